"""``check_liveness``: the library liveness properties, the model's own temporal
properties (:mod:`kvspec.liveness.temporal_search`) and deadlock freedom, by
explicit search of the reachable product graph (:mod:`kvspec.liveness.graph`)
and fair-cycle detection (:mod:`kvspec.liveness.fair_cycles`).

Runs are infinite: a run takes a step whenever some action instance is enabled,
and stays forever in a state where none is (it *stutters* there). Fairness
(``@action(fair=...)``) rules out runs that starve a fair instance. A property is
VIOLATED when some fair run leaves one of its obligations pending forever: a
reachable cycle (or a state with nothing enabled) on which the obligation is
pending at every state, no step discharges it, and every fair instance is taken
or not enabled as its fairness requires. It HOLDS when the whole graph was
explored and no such cycle exists; UNKNOWN otherwise (never a success).
"""
from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass
from typing import Callable

from kvspec.engines.canon import Canonicalizer, invert
from kvspec.engines.explicit import OutOfTime, check_count, check_timeout
from kvspec.lang.errors import UsageError
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import ActionInstance, System
from kvspec.liveness.fair_cycles import Component, fair_components, shortest_lasso
from kvspec.liveness.final import final_predicate
from kvspec.liveness.graph import STATE_LIMIT, ProductGraph, explore_product
from kvspec.liveness.lasso import Replayed, build_trace, replay_lasso, starvation
from kvspec.liveness.obligations import DEADLOCK, LIVENESS, WEQ, WRITE_BOUND, Obligation, \
    ObligationMonitor
from kvspec.liveness.quotient import QuotientGraph, explore_quotient, find_quotient_lasso
from kvspec.liveness.temporal import select
from kvspec.liveness.temporal_search import find_temporal_lasso
from kvspec.liveness.temporal_search import lasso_verdict as temporal_lasso_verdict
from kvspec.verdict import Stats, Status, Verdict

FAIR_CYCLE = "fair-cycle"
DEADLOCK_METHOD = "deadlock"


@dataclass
class Fairness:
    """Which action instances are weakly / strongly fair in this run."""

    weak_actions: list[str]
    strong_actions: list[str]
    weak: set[int]
    strong: set[int]
    ignored: bool = False  # declarations present but switched off

    def text(self) -> str:
        if self.ignored:
            return "no fairness assumed (declarations ignored)"
        parts = []
        if self.weak_actions:
            parts.append("weak fairness: " + ", ".join(self.weak_actions))
        if self.strong_actions:
            parts.append("strong fairness: " + ", ".join(self.strong_actions))
        return "; ".join(parts) if parts else "no fairness assumed"


def declared_fairness(system: System, use: bool = True) -> Fairness:
    """The fairness the model declares (every instance of a fair action is fair)."""
    decl = system.loaded.decl.fairness
    weak_a = [a.name for a in system.actions if decl.get(a.name) == "weak"]
    strong_a = [a.name for a in system.actions if decl.get(a.name) == "strong"]
    if not use:
        return Fairness([], [], set(), set(), ignored=bool(weak_a or strong_a))
    weak = {i.index for i in system.instances if i.name in weak_a}
    strong = {i.index for i in system.instances if i.name in strong_a}
    return Fairness(weak_a, strong_a, weak, strong)


@dataclass
class _Lasso:
    obligation: Obligation
    entry: int
    cycle: list[int]  # edge ids; [] = stutter at a state where nothing is enabled
    prefix: list[int]


def _peak_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _find_lasso(pg: ProductGraph, prop: str, fair: Fairness,
                check: object) -> _Lasso | None:
    """The lasso with the shortest prefix (then the shortest loop) that leaves an
    obligation of ``prop`` pending forever on a fair run."""
    mon = pg.monitor
    g = pg.graph
    expanded = pg.expanded
    by_ob: dict[Obligation, list[int]] = {}
    for n in range(expanded):
        for ob in mon.pending(pg.monitors[n]):
            if ob.prop == prop:
                by_ob.setdefault(ob, []).append(n)
    best: _Lasso | None = None
    best_key: tuple[int, int] | None = None
    for ob, nodes in sorted(by_ob.items()):
        if callable(check):
            check()
        member = set(nodes)

        def allowed(k: int, member: set[int] = member, ob: Obligation = ob) -> bool:
            return g.dst[k] in member and ob not in pg.discharged[k]

        cands: list[tuple[int, int, Component | None]] = []
        for n in nodes:
            if pg.terminal(n):
                cands.append((pg.depth[n], n, None))
                break  # nodes are in BFS order: the first is the shallowest
        for comp in fair_components(g, nodes, allowed, fair.weak, fair.strong, pg.enabled,
                                    check if callable(check) else None):
            entry = min(comp.nodes)
            cands.append((pg.depth[entry], entry, comp))
        chosen = shortest_lasso(cands, best_key, g, allowed, fair, pg.enabled)
        if chosen is not None:
            best_key, entry, cycle = chosen
            best = _Lasso(ob, entry, cycle, pg.path_to(entry))
    return best


def explain_lasso(system: System, ob: Obligation, schedule: list[ActionInstance],
                  loop_start: int, fair: Fairness, rp: Replayed) -> str:
    """The one-paragraph reason of a re-executed lasso (``rp``): the obligation, the
    step that opened it, the loop, and the instances the loop starves."""
    k = loop_start
    opened = ""
    for i in range(k):
        if any(ob.opened_by(e) for e in rp.events[i]):
            opened = f" (opened at step {i + 1}, {schedule[i].label()})"
    head = f"{ob.text()}{opened}"
    if k == len(schedule):
        return (f"{head}: the run stops after step {len(schedule)} with nothing enabled, "
                "and the obligation stays pending forever")
    loop = f"steps {k + 1}-{len(schedule)}" if len(schedule) - k > 1 else f"step {k + 1}"
    text = f"{head}: the loop ({loop}) repeats forever without discharging it"
    return text + starvation(system, schedule, k, rp) + f" [{fair.text()}]"


def _lasso_verdict(pg: ProductGraph, prop: str, lasso: _Lasso, fair: Fairness) -> Verdict:
    g = pg.graph
    schedule = [pg.system.instances[g.label[k]] for k in lasso.prefix + lasso.cycle]
    return schedule_verdict(pg.system, pg.monitor, prop, lasso.obligation, schedule,
                            len(lasso.prefix), fair)


def schedule_verdict(system: System, monitor: ObligationMonitor, prop: str, ob: Obligation,
                     schedule: list[ActionInstance], loop_start: int, fair: Fairness) -> Verdict:
    """The verdict of a concrete lasso (``schedule``, looping from ``loop_start``) that
    leaves ``ob`` pending forever, re-executed and checked first."""
    rp = replay_lasso(system, monitor, ob, schedule, loop_start, fair.weak, fair.strong)
    if any(monitor.saturated(m, ob) for m in rp.monitors):
        return unconfirmed_write_lasso(prop, ob, FAIR_CYCLE)
    explanation = explain_lasso(system, ob, schedule, loop_start, fair, rp)
    event = None
    for evs in rp.events[:loop_start]:
        for e in evs:
            if ob.opened_by(e):
                event = e
    trace = build_trace(system, prop, schedule, loop_start, explanation, event)
    loop_len = len(schedule) - loop_start
    loop = f"loop of {loop_len}" if loop_len else "stops"
    detail = f"{loop_start}-step prefix, {loop}; {fair.text()}"
    return Verdict(prop, Status.VIOLATED, FAIR_CYCLE, detail, trace)


def unconfirmed_write_lasso(prop: str, ob: Obligation, method: str) -> Verdict:
    """The verdict for a lasso whose write count saturated: the writes beyond the bound
    are not counted, so "never lands" is not shown (it may all have landed)."""
    return Verdict(prop, Status.UNKNOWN, method,
                   f"the shortest lasso found has more than {WRITE_BOUND} writes of "
                   f"r{ob.request} into page {ob.page} in flight at once: not counted "
                   "exactly, so it is not confirmed")


def _deadlock_verdict(pg: ProductGraph | QuotientGraph, final: object, sizes_text: str
                      ) -> Verdict:
    system = pg.system
    mon = pg.monitor
    for n in range(pg.expanded):
        if not pg.terminal(n) or mon.all_terminated(pg.monitors[n]):
            continue
        if callable(final) and final(pg.states[n]):
            continue
        edges = pg.path_to(n)
        if isinstance(pg, QuotientGraph):
            schedule, sigma = pg.unfold(edges)
            waiting_ids = sorted(invert(sigma)[0][r] for r in mon.unterminated(pg.monitors[n]))
        else:
            schedule = [system.instances[pg.graph.label[k]] for k in edges]
            waiting_ids = mon.unterminated(pg.monitors[n])
        waiting = ", ".join(f"r{r}" for r in waiting_ids)
        why = (f"deadlock after {len(schedule)} steps: no action is enabled, and {waiting} "
               f"{'has' if ',' not in waiting else 'have'} had no terminal event (finish, "
               "abort, timeout, reject)")
        if final is not None:
            why += " and no @final_state predicate holds"
        trace = build_trace(system, DEADLOCK, schedule, None, why, None)
        return Verdict(DEADLOCK, Status.VIOLATED, DEADLOCK_METHOD, f"{len(schedule)} steps",
                       trace)
    if pg.complete:
        return Verdict(DEADLOCK, Status.HOLDS, DEADLOCK_METHOD, f"exhaustive, {sizes_text}")
    return Verdict(DEADLOCK, Status.UNKNOWN, DEADLOCK_METHOD, _unfinished(pg))


def _unfinished(pg: ProductGraph | QuotientGraph) -> str:
    why = "state limit" if pg.stopped == STATE_LIMIT else "timeout"
    return f"{why} after {len(pg)} states, depth {max(pg.depth)}"


def selected_properties(properties: list[str] | None, system: System | None = None
                        ) -> list[str]:
    """The library liveness properties to check (default: all); an unknown name is a
    usage error (the names of ``system``'s own temporal properties are known too)."""
    if system is not None:
        return select(system, properties)[0]
    props = list(LIVENESS) if properties is None else list(properties)
    for name in props:
        if name not in LIVENESS:
            raise UsageError(f"unknown liveness property {name!r} (available: "
                             f"{', '.join(LIVENESS)})")
    return props


def _symmetry_plan(system: System, wanted: bool, temporal: bool, final: object
                   ) -> tuple[Canonicalizer | None, dict[str, object]]:
    """The canonicaliser the liveness search uses (None: the concrete graph), and the
    ``stats.symmetry`` record saying why."""
    if not wanted:
        return None, {"enabled": False, "requests": False, "pages": False,
                      "reasons": ["symmetry reduction off (the liveness default; "
                                  "--symmetry turns it on)"]}
    if temporal:
        why = "the model's own temporal properties are checked without symmetry reduction"
    elif final is not None:
        why = "@final_state predicates are checked without symmetry reduction"
    else:
        report = analyse_symmetry(system, True)
        canon = Canonicalizer(system.schema, report.requests, report.pages)
        record = report.to_json()
        if canon.active:
            return canon, record
        record["reasons"] = list(report.reasons) or ["no interchangeable ids at these sizes"]
        return None, record
    return None, {"enabled": True, "requests": False, "pages": False, "reasons": [why]}


def check_liveness(system: System, *, properties: list[str] | None = None,
                   deadlock: bool = True, max_states: int | None = None,
                   timeout: float | None = None, fairness: bool = True,
                   symmetry: bool = False, backend: str = "python",
                   warn: Callable[[str], None] | None = None) -> tuple[list[Verdict], Stats]:
    """Check the liveness ``properties`` (default: all of :data:`LIVENESS` and the
    model's own temporal properties, :mod:`kvspec.liveness.temporal`) and, with
    ``deadlock``, deadlock freedom. ``fairness=False`` ignores the model's
    ``@action(fair=...)`` declarations (nothing is assumed fair). ``symmetry`` searches
    the symmetry quotient where that is sound (:mod:`kvspec.liveness.quotient`).
    ``backend="native"`` builds the (plain) graph on the compiled search; ``warn`` gets
    one line when it falls back to Python."""
    check_count("max_states", max_states, 1)
    check_timeout(timeout)
    props, temporal = select(system, properties)
    start = time.monotonic()
    end = None if timeout is None else start + timeout
    fair = declared_fairness(system, fairness)
    final = final_predicate(system) if deadlock else None
    monitor = ObligationMonitor(props, system.schema.requests, system.schema.pages, deadlock)
    canon, sym_record = _symmetry_plan(system, symmetry, bool(temporal), final)
    pg: ProductGraph | QuotientGraph
    if canon is not None:
        pg = explore_quotient(system, monitor, canon, max_states=max_states, deadline=end)
    else:
        pg = explore_product(system, monitor, max_states=max_states, deadline=end,
                             backend=backend, warn=warn)

    def check() -> None:
        if end is not None and time.monotonic() >= end:
            raise OutOfTime("the fair-cycle search")

    sizes_text = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
    verdicts: list[Verdict] = []
    for prop in props:
        try:
            if isinstance(pg, QuotientGraph):
                ql = find_quotient_lasso(pg, prop, fair.weak, fair.strong, check)
                found = None if ql is None else schedule_verdict(
                    system, monitor, prop, ql.obligation, ql.schedule, ql.loop_start, fair)
            else:
                lasso = _find_lasso(pg, prop, fair, check)
                found = None if lasso is None else _lasso_verdict(pg, prop, lasso, fair)
        except OutOfTime:
            verdicts.append(Verdict(prop, Status.UNKNOWN, FAIR_CYCLE,
                                    f"timeout during the fair-cycle search; {fair.text()}"))
            continue
        if found is not None:
            verdicts.append(found)
        elif prop == WEQ and pg.saturated:
            verdicts.append(Verdict(prop, Status.UNKNOWN, FAIR_CYCLE,
                                    f"more than {WRITE_BOUND} writes of one request into one "
                                    "page in flight: not counted exactly"))
        elif pg.complete:
            verdicts.append(Verdict(prop, Status.HOLDS, FAIR_CYCLE,
                                    f"exhaustive, {sizes_text}; {fair.text()}"))
        else:
            verdicts.append(Verdict(prop, Status.UNKNOWN, FAIR_CYCLE,
                                    f"{_unfinished(pg)}; {fair.text()}"))
    for tp in temporal:
        assert isinstance(pg, ProductGraph)
        try:
            tl = find_temporal_lasso(pg, tp, fair, check)
        except OutOfTime:
            verdicts.append(Verdict(tp.name, Status.UNKNOWN, FAIR_CYCLE,
                                    f"timeout during the fair-cycle search; {fair.text()}"))
            continue
        if tl is not None:
            verdicts.append(temporal_lasso_verdict(pg, tp, tl, fair, FAIR_CYCLE))
        elif pg.complete:
            verdicts.append(Verdict(tp.name, Status.HOLDS, FAIR_CYCLE,
                                    f"exhaustive, {sizes_text}; {fair.text()}"))
        else:
            verdicts.append(Verdict(tp.name, Status.UNKNOWN, FAIR_CYCLE,
                                    f"{_unfinished(pg)}; {fair.text()}"))
    if deadlock:
        verdicts.append(_deadlock_verdict(pg, final, sizes_text))
    stats = Stats(states=len(pg), transitions=len(pg.graph.src), depth=max(pg.depth),
                  seconds=time.monotonic() - start, peak_memory_mb=_peak_mb())
    stats.symmetry = sym_record
    stats.extra["liveness"] = {"complete": pg.complete, "stopped": pg.stopped,
                               "model_states": len(set(pg.states)),
                               "fairness": fair.text()}
    return verdicts, stats
