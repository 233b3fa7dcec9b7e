"""Symbolic liveness: a bounded search for lassos with Z3 (``kvspec live --engine bmc``).

The same transition terms as the safety engines (:class:`TransitionSystem`, built
from :meth:`System.encode_step`) are unrolled ``k`` steps from the initial state
(:class:`kvspec.engines.bmc.Unroller`). Beside the model's state, every frame
holds the obligation monitor of :mod:`kvspec.liveness.obligations` as Z3 state —
one Bool per pending bit (``pages-eventually-freed``, ``request-terminates``), one
small bit-vector per write count (``writes-eventually-quiesce``, saturating as the
concrete monitor does) — updated by the events of the chosen instance, in the
order the body emits them, under their guards. So "pending at frame t" is exactly
the explicit product's monitor, whatever the model stores.

A lasso of length ``k`` (prefix + loop, the number of steps of the trace) is one of:

* a loop: some ``l < k`` with frame ``k`` equal to frame ``l`` (model state *and*
  monitor, as the explicit product requires), an obligation pending at ``l``, no
  step ``l..k-1`` discharging it (a step that discharges and re-opens it counts
  as discharging), and the loop fair: for every weakly fair instance, it is
  taken on some loop step or disabled at some loop state ``l..k-1``; for every
  strongly fair instance, it is taken on some loop step or disabled at every loop
  state;
* a stop: nothing is enabled at frame ``k`` and an obligation is pending there
  (the run stutters forever; ``loop_start == k``).

Pending at ``l`` and not discharged on the loop implies pending at every loop
state: a monitor bit (count) is only cleared (decremented) by a discharge.

Depths ``k = 1 .. depth`` are tried in order, so the first lasso found is one of
the fewest steps. Every lasso is re-executed concretely by
:func:`kvspec.liveness.lasso.replay_lasso` before it becomes a verdict; one that
does not re-execute as a fair violating lasso is an :class:`InternalError`. No
lasso up to the bound is ``UNKNOWN`` — a bounded search never shows that a
property holds. Model errors reachable within the bound are raised as
:class:`ModelError`, as the explicit search raises them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from kvspec.engines.bmc import Unroller, check_errors
from kvspec.engines.explicit import Deadline, OutOfTime, check_count, check_timeout, time_limit
from kvspec.engines.transition import EncodingOverflow, InstanceEncoding, Renaming, \
    TransitionSystem, encode_instance, mk_and, mk_or
from kvspec.lang.system import ActionInstance, System
from kvspec.lang.z3gen import SymEvent
from kvspec.liveness.check import (Fairness, declared_fairness, explain_lasso,
                                    unconfirmed_write_lasso)
from kvspec.liveness.lasso import build_trace, enabled_at, replay_lasso
from kvspec.liveness.obligations import PEF, RT, TERMINAL_EVENTS, WEQ, WRITE_BOUND, \
    Obligation, ObligationMonitor
from kvspec.liveness.temporal import TemporalProperty, select
from kvspec.liveness.temporal_bmc import PredicateTerms
from kvspec.liveness.temporal_search import temporal_verdict
from kvspec.trace import InternalError
from kvspec.verdict import Stats, Status, Verdict

BMC_LASSO = "bmc-lasso"
#: bits of a write count (0 .. WRITE_BOUND + 1, unsigned)
_COUNT_BITS = 4


@dataclass
class _Encoded:
    """The transition system and, per instance, its guarded events (solver encoding)."""

    ts: TransitionSystem
    events: list[list[SymEvent]]


def encode_instances(system: System, deadline: Deadline
                     ) -> tuple[list[Any], list[InstanceEncoding], list[list[SymEvent]]]:
    """Every instance encoded once over the integer state variables (returned first),
    with its guarded events (the transition system drops them)."""
    int_cur = system.state_vars()
    raw: list[InstanceEncoding] = []
    raw_events: list[list[SymEvent]] = []
    for inst in system.instances:
        deadline.check("encoding")
        encoded, enc = encode_instance(system, inst, int_cur)
        raw.append(encoded)
        raw_events.append([SymEvent(z3.simplify(e.guard), e.kind, e.request, e.page)
                           for e in enc.events if not z3.is_false(z3.simplify(e.guard))])
    return int_cur, raw, raw_events


def _encode(system: System, deadline: Deadline, temporal: list[TemporalProperty]
            ) -> tuple[_Encoded, PredicateTerms]:
    """Encode every instance once; keep its events. The temporal properties'
    predicates are encoded with the bad-state terms."""
    int_cur, raw, raw_events = encode_instances(system, deadline)
    raw_bad = {p.name: z3.simplify(system.encode_bad(p, int_cur)) for p in system.properties}
    preds = PredicateTerms(system, temporal, int_cur)
    raw_bad.update(preds.raw)
    ts = TransitionSystem(system, "bv", (False, False), (int_cur, raw, raw_bad),
                          deadline=deadline)
    try:
        enc = _Encoded(ts, _translate(ts, raw_events))
    except EncodingOverflow:  # an event's id term does not fit the bit-vector width
        ts = ts.twin("int")
        enc = _Encoded(ts, _translate(ts, raw_events))
    preds.attach(enc.ts)
    return enc, preds


def _translate(ts: TransitionSystem, raw: list[list[SymEvent]]) -> list[list[SymEvent]]:
    return [[SymEvent(ts.enc(e.guard), e.kind, ts.enc(e.request),
                      None if e.page is None else ts.enc(e.page)) for e in evs] for evs in raw]


class MonitorEncoding:
    """The obligation monitor of one property as Z3 state, frame by frame."""

    def __init__(self, ts: TransitionSystem, prop: str, events: list[list[SymEvent]]) -> None:
        self.ts = ts
        self.prop = prop
        R, P = ts.system.schema.requests, ts.system.schema.pages
        if prop == RT:
            self.obligations = [Obligation(RT, r) for r in range(R)]
        else:
            self.obligations = [Obligation(prop, r, p) for r in range(R) for p in range(P)]
        self.counting = prop == WEQ
        tag = {PEF: "pef", RT: "rt", WEQ: "weq"}[prop]
        self.tag = tag
        self.cur = [self._var(f"mon:{tag}:{i}") for i in range(len(self.obligations))]
        self.nxt = [self._var(f"mon:{tag}:{i}'") for i in range(len(self.obligations))]
        self.dis = [z3.Bool(f"dis:{tag}:{i}") for i in range(len(self.obligations))]
        self.sel = [z3.Bool(f"mact:{tag}:{j}") for j in range(len(ts.steps))]
        self._frames: dict[int, list[z3.ExprRef]] = {}
        self.template = self._template(events)

    def _var(self, name: str) -> z3.ExprRef:
        return z3.BitVec(name, _COUNT_BITS) if self.counting else z3.Bool(name)

    def _num(self, x: int) -> z3.ExprRef:
        if self.ts.bv is not None:
            return z3.BitVecVal(x, self.ts.bv.width)
        return z3.IntVal(x)

    def _index(self, ev: SymEvent) -> list[tuple[int, z3.BoolRef]]:
        """The obligations ``ev`` names, each with the condition that it names it."""
        if self.prop == RT:
            return [(r, z3.And(ev.guard, ev.request == self._num(r)))
                    for r in range(len(self.obligations))]
        if ev.page is None:
            return []
        P = self.ts.system.schema.pages
        return [(k, z3.And(ev.guard, ev.request == self._num(k // P),
                           ev.page == self._num(k % P)))
                for k in range(len(self.obligations))]

    def _step(self, evs: list[SymEvent]) -> tuple[list[z3.ExprRef], list[z3.BoolRef]]:
        """The monitor after ``evs`` (in order) from ``cur``, and per obligation the
        condition that one of them discharged it (mirrors ``ObligationMonitor.advance``)."""
        val: list[z3.ExprRef] = list(self.cur)
        dis: list[z3.BoolRef] = [z3.BoolVal(False) for _ in self.cur]
        B = WRITE_BOUND
        for ev in evs:
            k = ev.kind
            if self.prop == PEF and k in ("alloc", "free"):
                for i, m in self._index(ev):
                    if k == "alloc":
                        val[i] = z3.Or(m, val[i])
                    else:
                        dis[i] = z3.Or(dis[i], z3.And(m, val[i]))
                        val[i] = z3.And(z3.Not(m), val[i])
            elif self.prop == RT and (k == "admit" or k in TERMINAL_EVENTS):
                for i, m in self._index(ev):
                    if k == "admit":
                        val[i] = z3.Or(m, val[i])
                    else:
                        dis[i] = z3.Or(dis[i], z3.And(m, val[i]))
                        val[i] = z3.And(z3.Not(m), val[i])
            elif self.prop == WEQ and k in ("post_write", "land_write", "drain"):
                for i, m in self._index(ev):
                    c = val[i]
                    if k == "post_write":
                        up = z3.If(z3.UGE(c, B), z3.BitVecVal(B + 1, _COUNT_BITS), c + 1)
                        val[i] = z3.If(m, up, c)
                    else:
                        busy = z3.UGT(c, 0)
                        dis[i] = z3.Or(dis[i], z3.And(m, busy))
                        val[i] = z3.If(z3.And(m, busy, z3.ULE(c, B)), c - 1, c)
        return [z3.simplify(v) for v in val], [z3.simplify(d) for d in dis]

    def _template(self, events: list[list[SymEvent]]) -> list[z3.BoolRef]:
        out: list[z3.BoolRef] = []
        writers: list[list[int]] = [[] for _ in self.cur]
        dis_by: list[list[z3.BoolRef]] = [[] for _ in self.cur]
        for j, evs in enumerate(events):
            if not evs:
                continue
            val, dis = self._step(evs)
            for i, (v, d) in enumerate(zip(val, dis)):
                if not v.eq(self.cur[i]):
                    writers[i].append(j)
                    out.append(z3.Implies(self.sel[j], self.nxt[i] == v))
                if not z3.is_false(d):
                    dis_by[i].append(z3.And(self.sel[j], d))
        for i in range(len(self.cur)):
            keep = self.nxt[i] == self.cur[i]
            out.append(keep if not writers[i] else
                       z3.Or(keep, *[self.sel[j] for j in writers[i]]))
            out.append(self.dis[i] == mk_or(dis_by[i]))
        return out

    # -- frames --------------------------------------------------------------------------
    def frame(self, t: int) -> list[z3.ExprRef]:
        vs = self._frames.get(t)
        if vs is None:
            vs = [self._var(f"mon:{self.tag}:{i}@{t}") for i in range(len(self.cur))]
            self._frames[t] = vs
        return vs

    def discharged(self, t: int) -> list[z3.BoolRef]:
        """Per obligation: step ``t + 1`` discharges it."""
        return [z3.Bool(f"dis:{self.tag}:{i}@{t}") for i in range(len(self.cur))]

    def init(self) -> list[z3.BoolRef]:
        zero = z3.BitVecVal(0, _COUNT_BITS) if self.counting else z3.BoolVal(False)
        return [v == zero for v in self.frame(0)]

    def trans(self, t: int) -> list[z3.BoolRef]:
        pairs = list(zip(self.ts.cur, self.ts.frame(t)))
        pairs += list(zip(self.cur, self.frame(t))) + list(zip(self.nxt, self.frame(t + 1)))
        pairs += list(zip(self.dis, self.discharged(t)))
        pairs += list(zip(self.sel, self.ts.selectors(t)))
        return [Renaming(pairs)(mk_and(self.template))]  # one call across the FFI

    def pending(self, t: int) -> list[z3.BoolRef]:
        if self.counting:
            return [z3.UGT(v, 0) for v in self.frame(t)]
        return list(self.frame(t))  # type: ignore[arg-type]


class _Search:
    """The unrolled transition system with the monitors and per-frame enabledness."""

    def __init__(self, enc: _Encoded, props: list[str], fair: Fairness) -> None:
        ts = enc.ts
        self.ts = ts
        self.unroller = Unroller(ts)
        self.monitors = {p: MonitorEncoding(ts, p, enc.events) for p in props}
        for mon in self.monitors.values():
            self.unroller.solver.add(*mon.init())
        self.fair = fair
        self.watched = sorted(fair.weak | fair.strong)
        by_index = {step.inst.index: j for j, step in enumerate(ts.steps)}
        self.col = by_index  # instance index -> selector position
        en_vars = [z3.Bool(f"men:{i}") for i in self.watched]
        self.en_template = [v == ts.steps[by_index[i]].enabled
                            for v, i in zip(en_vars, self.watched)]
        self.en_vars = en_vars
        self.stuck_var = z3.Bool("#stuck")  # no model name has a #
        self.en_template.append(self.stuck_var == z3.Not(mk_or([s.enabled for s in ts.steps])))
        self.solver_frames = -1
        self._add_frame(0)

    def enabled(self, t: int) -> list[z3.BoolRef]:
        return [z3.Bool(f"men:{i}@{t}") for i in self.watched]

    def stuck(self, t: int) -> z3.BoolRef:
        return z3.Bool(f"#stuck@{t}")

    def _add_frame(self, t: int) -> None:
        pairs = list(zip(self.ts.cur, self.ts.frame(t)))
        pairs += list(zip(self.en_vars, self.enabled(t))) + [(self.stuck_var, self.stuck(t))]
        whole = Renaming(pairs)(mk_and(self.en_template))
        self.unroller.solver.add(whole)
        self.solver_frames = t

    def extend(self) -> None:
        t = self.unroller.depth
        self.unroller.extend()
        for mon in self.monitors.values():
            self.unroller.solver.add(*mon.trans(t))
        self._add_frame(t + 1)

    # -- the goal at depth k -------------------------------------------------------------
    def _loop(self, name: str, k: int, mon: MonitorEncoding | None
              ) -> tuple[list[z3.BoolRef], list[z3.BoolRef], list[z3.BoolRef]]:
        """The loop of a lasso of ``k`` steps: exactly one loop start, frame ``k``
        equal to the start's frame (model state, and ``mon``'s monitor), and the
        loop fair. Returns (constraints, loop-start literals, in-loop per step)."""
        ts = self.ts
        starts = [z3.Bool(f"loop:{name}@{l}/{k}") for l in range(k)]
        in_loop = [mk_or(starts[:t + 1]) for t in range(k)]
        last_state = ts.frame(k)
        parts: list[z3.BoolRef] = [mk_or(starts)]
        if k > 1:
            parts.append(z3.AtMost(*starts, 1))
        for l, s in enumerate(starts):
            same = [a == b for a, b in zip(last_state, ts.frame(l))]
            if mon is not None:
                same += [a == b for a, b in zip(mon.frame(k), mon.frame(l))]
            parts.append(z3.Implies(s, mk_and(same)))
        sels = [ts.selectors(t) for t in range(k)]
        ens = [self.enabled(t) for t in range(k)]
        for w, i in enumerate(self.watched):
            j = self.col[i]
            taken = mk_or([z3.And(in_loop[t], sels[t][j]) for t in range(k)])
            if i in self.fair.weak:
                off = mk_or([z3.And(in_loop[t], z3.Not(ens[t][w])) for t in range(k)])
                parts.append(z3.Or(taken, off))
            if i in self.fair.strong:
                never = mk_and([z3.Implies(in_loop[t], z3.Not(ens[t][w])) for t in range(k)])
                parts.append(z3.Or(taken, never))
        return parts, starts, in_loop

    def goal(self, prop: str, k: int) -> tuple[z3.BoolRef, list[z3.BoolRef], z3.BoolRef]:
        """(a lasso of ``k`` steps for ``prop``, the loop-start literals, the stop case)."""
        mon = self.monitors[prop]
        parts, starts, in_loop = self._loop(prop, k, mon)
        pend = mon.pending(k)
        owed = []
        for i in range(len(mon.cur)):
            kept = [z3.Implies(in_loop[t], z3.Not(mon.discharged(t)[i])) for t in range(k)]
            owed.append(mk_and([pend[i]] + kept))
        parts.append(mk_or(owed))
        loop = mk_and(parts)
        stop = z3.And(self.stuck(k), mk_or(pend))
        return z3.Or(loop, stop), starts, stop

    def temporal_goal(self, tp: TemporalProperty, preds: PredicateTerms, k: int
                      ) -> tuple[z3.BoolRef, list[z3.BoolRef], z3.BoolRef]:
        """The same for a temporal property of the model (:mod:`temporal_bmc`)."""
        parts, starts, in_loop = self._loop(tp.name, k, None)
        parts.append(preds.loop_goal(tp, k, in_loop))
        loop = mk_and(parts)
        stop = z3.And(self.stuck(k), preds.stop_goal(tp, k))
        return z3.Or(loop, stop), starts, stop


def _lasso_from_model(search: _Search, prop: str, k: int, starts: list[z3.BoolRef],
                      stop: z3.BoolRef) -> tuple[list[ActionInstance], int]:
    model = search.unroller.model()
    schedule = search.ts.schedule(model, k)
    if z3.is_true(model.eval(stop, model_completion=True)):
        return schedule, k
    picks = [l for l, s in enumerate(starts) if z3.is_true(model.eval(s, model_completion=True))]
    if len(picks) != 1:
        raise InternalError(f"bmc-lasso: solver model picks {len(picks)} loop starts")
    return schedule, picks[0]


def _verdict(system: System, prop: str, schedule: list[ActionInstance], loop_start: int,
             fair: Fairness) -> Verdict:
    """Re-execute the lasso concretely (for some obligation of ``prop``) and build it."""
    monitor = ObligationMonitor([prop], system.schema.requests, system.schema.pages, False)
    k = len(schedule)
    candidates = _obligations(system, prop)
    errors: list[str] = []
    unconfirmed: Obligation | None = None
    for ob in candidates:
        try:
            rp = replay_lasso(system, monitor, ob, schedule, loop_start, fair.weak, fair.strong)
        except InternalError as exc:
            errors.append(str(exc))
            continue
        if any(monitor.saturated(m, ob) for m in rp.monitors):
            unconfirmed = unconfirmed or ob
            continue
        explanation = explain_lasso(system, ob, schedule, loop_start, fair, rp)
        event = None
        for evs in rp.events[:loop_start]:
            for e in evs:
                if ob.opened_by(e):
                    event = e
        trace = build_trace(system, prop, schedule, loop_start, explanation, event)
        return Verdict(prop, Status.VIOLATED, BMC_LASSO, _detail(k, loop_start, fair), trace)
    if unconfirmed is not None:
        return unconfirmed_write_lasso(prop, unconfirmed, BMC_LASSO)
    why = errors[0] if errors else "no obligation"
    raise InternalError(f"bmc-lasso: the solver's lasso for {prop} does not re-execute as a "
                        f"fair violating lasso ({why})")


def _obligations(system: System, prop: str) -> list[Obligation]:
    R, P = system.schema.requests, system.schema.pages
    if prop == RT:
        return [Obligation(RT, r) for r in range(R)]
    return [Obligation(prop, r, p) for r in range(R) for p in range(P)]


def check_liveness_bmc(system: System, *, properties: list[str] | None = None, depth: int = 20,
                       fairness: bool = True, timeout: float | None = None
                       ) -> tuple[list[Verdict], Stats]:
    """Search for lassos of at most ``depth`` steps violating the liveness
    ``properties`` (default: all of :data:`LIVENESS` and the model's own temporal
    properties) under the model's fairness (``fairness=False`` ignores it). A lasso
    is VIOLATED (method ``bmc-lasso``); no lasso up to ``depth`` is UNKNOWN, never
    HOLDS."""
    check_count("depth", depth, 1)
    check_timeout(timeout)
    props, temporal = select(system, properties)
    names = props + [tp.name for tp in temporal]
    by_name = {tp.name: tp for tp in temporal}
    deadline = Deadline(timeout)
    fair = declared_fairness(system, fairness)
    found: dict[str, Verdict] = {}
    pending = list(names)
    reached = 0
    stopped = ""
    enc: _Encoded | None = None
    try:
        with time_limit(deadline, "bmc-lasso"):
            enc, preds = _encode(system, deadline, temporal)
            search = _Search(enc, props, fair)
            _predicate_errors(search, preds, 0, deadline)
            if temporal and not enabled_at(system, system.initial):
                for tp in temporal:  # the run stops at once: a lasso of no steps
                    v = _stopped_at_start(system, tp, fair)
                    if v is not None:
                        found[tp.name] = v
                        pending.remove(tp.name)
            for k in range(1, depth + 1):
                if not pending:
                    break
                res = check_errors(search.unroller, k - 1, deadline, BMC_LASSO)
                if res == z3.unknown:
                    stopped = _why(search, deadline, k)
                    break
                search.extend()
                if _predicate_errors(search, preds, k, deadline) == z3.unknown:
                    stopped = _why(search, deadline, k)
                    break
                goals = {name: (search.temporal_goal(by_name[name], preds, k)
                                if name in by_name else search.goal(name, k))
                         for name in pending}
                if len(goals) > 1:  # usually no lasso of this length at all: one query
                    res = search.unroller.check(mk_or([g[0] for g in goals.values()]), deadline)
                    if res == z3.unknown:
                        stopped = _why(search, deadline, k)
                        break
                    if res == z3.unsat:
                        reached = k
                        continue
                for name in list(pending):
                    goal, starts, stop = goals[name]
                    res = search.unroller.check(goal, deadline)
                    if res == z3.unknown:
                        stopped = _why(search, deadline, k)
                        break
                    if res == z3.sat:
                        schedule, loop_start = _lasso_from_model(search, name, k, starts, stop)
                        if name in by_name:
                            found[name] = temporal_verdict(system, by_name[name], schedule,
                                                           loop_start, fair, BMC_LASSO,
                                                           _detail(k, loop_start, fair))
                        else:
                            found[name] = _verdict(system, name, schedule, loop_start, fair)
                        pending.remove(name)
                if stopped:
                    break
                reached = k
    except OutOfTime as exc:
        stopped = str(exc) if reached == 0 else f"{exc} at depth {reached + 1}"
    verdicts: list[Verdict] = []
    for name in names:
        if name in found:
            verdicts.append(found[name])
            continue
        upto = f"no lasso up to depth {reached} (bounded)" if reached else "nothing checked"
        detail = f"{stopped}; {upto}" if stopped else upto
        verdicts.append(Verdict(name, Status.UNKNOWN, BMC_LASSO, f"{detail}; {fair.text()}"))
    stats = Stats(depth=reached, seconds=deadline.elapsed())
    stats.symmetry = {"enabled": False, "requests": False, "pages": False,
                      "reasons": ["the lasso search does not use symmetry breaking"]}
    stats.extra["liveness"] = {"engine": "bmc", "depth": reached, "max_depth": depth,
                               "complete": False, "stopped": stopped or None,
                               "fairness": fair.text()}
    if enc is not None:
        stats.extra["bmc"] = {"instances": len(enc.ts.steps), "slots": enc.ts.width,
                              "encoding": enc.ts.encoding}
    return verdicts, stats


def _detail(k: int, loop_start: int, fair: Fairness) -> str:
    if loop_start == k:
        return f"stops after step {k} with nothing enabled; {fair.text()}"
    return f"loop at step {loop_start + 1} of {k}; {fair.text()}"


def _stopped_at_start(system: System, tp: TemporalProperty, fair: Fairness) -> Verdict | None:
    """The lasso of no steps (nothing is enabled in the initial state), if it violates
    ``tp``."""
    try:
        return temporal_verdict(system, tp, [], 0, fair, BMC_LASSO,
                                f"stops in the initial state with nothing enabled; "
                                f"{fair.text()}")
    except InternalError:
        return None


def _predicate_errors(search: _Search, preds: PredicateTerms, t: int, deadline: Deadline
                      ) -> z3.CheckSatResult:
    """Raise the model error of a temporal predicate reachable at frame ``t``."""
    goal = preds.error(t)
    if z3.is_false(goal):
        return z3.unsat
    res = search.unroller.check(goal, deadline)
    if res == z3.sat:
        preds.raise_error(search.ts.schedule(search.unroller.model(), t))
    return res


def _why(search: _Search, deadline: Deadline, k: int) -> str:
    if deadline.expired():
        return f"timeout at depth {k}"
    return f"solver gave up at depth {k} ({search.unroller.solver.reason_unknown()})"


__all__ = ["BMC_LASSO", "MonitorEncoding", "check_liveness_bmc"]
