"""Liveness proofs by k-liveness (``kvspec live --engine proof``).

Claessen and Sörensson's k-liveness, over the same transition terms as every
symbolic engine (:func:`kvspec.engines.transition.encode_instance`, integer
encoding), for one obligation ``ob`` of a library property at a time. The state is
extended with

* ``ob``'s monitor (pending bit; for ``writes-eventually-quiesce`` an unbounded
  count of writes in flight), as :meth:`ObligationMonitor.advance` updates it;
* ``committed``: a step may commit, once, when ``ob`` is pending; after it, a step
  that discharges ``ob`` is not allowed (the run "guesses" that ``ob`` stays
  pending forever from there);
* per fair instance a flag: taken, or disabled at some state, since the round
  began; when every flag is set a *round* is complete: ``count`` goes up by one
  (capped at ``k``) and the flags start again.

Bad states: ``committed`` with ``count >= k``; ``ob`` pending with nothing enabled
(the run stops there forever); a model error (the proof covers runs without one).

Soundness. A fair run that leaves ``ob`` pending forever commits once ``ob`` is
pending for good; weak fairness of an instance means it is, infinitely often,
taken or disabled; so rounds complete forever and ``count`` reaches every ``k``.
A run that stops with ``ob`` pending reaches a stop state. So for any ``k``: no bad
state reachable means ``ob`` is discharged on every fair run. Strong fairness is
used as weak fairness (it rules out fewer runs: still sound), and the fairness
of only some instances may be used (first: the instances of ``ob``'s own
request) — a proof under fewer assumptions holds under more; the verdict says
which were used.

Spacer (Z3's IC3/PDR for Horn clauses) looks for an inductive invariant of the
extended system that excludes the bad states, for ``k`` in :data:`ROUNDS`. The
invariant is then **re-checked** by a plain Z3 solver — it holds initially, every
rule (every action instance; not committed, committing, committed) preserves it,
and it excludes every bad state — before HOLDS is said. Anything else — Spacer's
timeout, a reachable bad state (the proof says nothing more; ``--engine explicit``
or ``bmc`` finds the lasso if there is one), a failed re-check — is UNKNOWN with
the reason.

Obligations: every ``(r, p)`` (or every ``r``), unless the model treats requests
(pages) interchangeably (:func:`kvspec.lang.symmetry.analyse_symmetry`): then the
model commutes with renaming, fairness is declared per action (a union of orbits)
and the obligations of one orbit have the same fair runs up to renaming, so one
obligation per orbit is proved (``r0``, page 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from kvspec.engines.bmc import Deadline
from kvspec.engines.explicit import OutOfTime, check_timeout, time_limit
from kvspec.engines.transition import TransitionSystem, mk_and, mk_or
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import ActionInstance, System
from kvspec.lang.types import REQUEST
from kvspec.lang.z3gen import SymEvent
from kvspec.liveness.check import Fairness, declared_fairness
from kvspec.liveness.obligations import PEF, RT, TERMINAL_EVENTS, WEQ, Obligation
from kvspec.liveness.symbolic import encode_instances
from kvspec.liveness.temporal import select
from kvspec.verdict import Stats, Status, Verdict

PROOF = "k-liveness"
#: the bounds k tried: "the obligation stays pending through at most k rounds of the
#: fairness conditions"
ROUNDS = (4,)


@dataclass
class Encoded:
    """The integer-encoded transition system and each instance's guarded events."""

    ts: TransitionSystem
    events: list[list[SymEvent]]


def encode(system: System, deadline: Deadline) -> Encoded:
    """The system in the integer encoding (what Spacer works on), with its events."""
    int_cur, raw, events = encode_instances(system, deadline)
    ts = TransitionSystem(system, "int", (False, False), (int_cur, raw, {}), deadline=deadline)
    return Encoded(ts, events)


class ObligationTerms:
    """One obligation's monitor as terms: pending, and per instance the next monitor
    value and the condition that the step discharges it (as
    :meth:`ObligationMonitor.advance`, the events in the order the body emits them)."""

    def __init__(self, ob: Obligation, events: list[list[SymEvent]]) -> None:
        self.ob = ob
        self.counting = ob.prop == WEQ
        self.var = z3.Int("l2s:count") if self.counting else z3.Bool("l2s:pending")
        self.init = self.var == 0 if self.counting else z3.Not(self.var)
        self.next: list[z3.ExprRef] = []
        self.discharged: list[z3.BoolRef] = []
        for evs in events:
            val, dis = self._step(evs)
            self.next.append(z3.simplify(val))
            self.discharged.append(z3.simplify(dis))

    def pending(self, v: z3.ExprRef | None = None) -> z3.BoolRef:
        v = self.var if v is None else v
        return v > 0 if self.counting else v  # type: ignore[return-value]

    def _names(self, ev: SymEvent) -> z3.BoolRef:
        ob = self.ob
        cond = z3.And(ev.guard, ev.request == ob.request)
        if ob.page is not None:
            if ev.page is None:
                return z3.BoolVal(False)
            cond = z3.And(cond, ev.page == ob.page)
        return cond

    def _step(self, evs: list[SymEvent]) -> tuple[z3.ExprRef, z3.BoolRef]:
        val: Any = self.var
        dis: z3.BoolRef = z3.BoolVal(False)
        prop = self.ob.prop
        for ev in evs:
            k = ev.kind
            if prop == PEF and k in ("alloc", "free") or \
                    prop == RT and (k == "admit" or k in TERMINAL_EVENTS):
                m = self._names(ev)
                if k in ("alloc", "admit"):
                    val = z3.Or(m, val)
                else:
                    dis = z3.Or(dis, z3.And(m, val))
                    val = z3.And(z3.Not(m), val)
            elif prop == WEQ and k in ("post_write", "land_write", "drain"):
                m = self._names(ev)
                if k == "post_write":
                    val = z3.If(m, val + 1, val)
                else:
                    busy = val > 0
                    dis = z3.Or(dis, z3.And(m, busy))
                    val = z3.If(z3.And(m, busy), val - 1, val)
        return val, dis


@dataclass
class ProofResult:
    proved: bool
    reason: str          # why not, or a summary of the checked invariant
    invariant: z3.BoolRef | None = None
    lemmas: int = 0
    sat: bool = False  # a bad state is reachable at this k


def own_instance(inst: ActionInstance, ob: Obligation) -> bool:
    """Whether every request argument of ``inst`` is ``ob``'s request."""
    return all(a == ob.request for (_, t), a in zip(inst.action.params, inst.args)
               if t.ref_dim == REQUEST)


class KLiveness:
    """The extended system for one obligation and one bound ``k``, its Horn rules and
    its bad states (module docstring)."""

    def __init__(self, enc: Encoded, ob: Obligation, fair: Fairness, k: int,
                 local: bool = False) -> None:
        ts = enc.ts
        self.ts = ts
        self.k = k
        self.x = list(ts.cur)
        self.mon = ObligationTerms(ob, enc.events)
        self.committed = z3.Bool("kl:committed")
        self.count = z3.Int("kl:count")
        self.col = {step.inst.index: j for j, step in enumerate(ts.steps)}
        just = fair.weak | fair.strong  # strong fairness used as weak
        if local:
            just = {i for i in just if own_instance(ts.system.instances[i], ob)}
        self.just = sorted(just)
        self.flags = [z3.Bool(f"kl:just:{i}") for i in self.just]
        self.args: list[z3.ExprRef] = self.x + [self.mon.var, self.committed, self.count] \
            + self.flags
        self.inv = z3.Function("KLivenessInv", *[a.sort() for a in self.args], z3.BoolSort())
        self.domain = mk_and(ts.domain(self.x))

    def enabled(self, i: int) -> z3.BoolRef:
        return self.ts.steps[self.col[i]].enabled

    def init(self) -> z3.BoolRef:
        parts = [self.ts.init(self.x), self.mon.init, z3.Not(self.committed), self.count == 0]
        parts += [z3.Not(b) for b in self.flags]
        return z3.And(*parts)

    def _round(self, flags: list[z3.BoolRef]) -> list[z3.ExprRef]:
        """Count and flags after a step that leaves ``flags``: a completed round (every
        fairness condition met) counts one and starts the next."""
        done = mk_and(flags)
        count = z3.If(done, z3.If(self.count + 1 > self.k, self.k, self.count + 1), self.count)
        return [count] + [z3.And(f, z3.Not(done)) for f in flags]

    def rules(self) -> list[tuple[list[z3.ExprRef], list[z3.BoolRef]]]:
        """(head arguments, body) per rule; the body holds ``Inv(args)`` implicitly."""
        out: list[tuple[list[z3.ExprRef], list[z3.BoolRef]]] = []
        mon = self.mon
        for j, step in enumerate(self.ts.steps):
            idx = step.inst.index
            x2 = [step.updates.get(i, v) for i, v in enumerate(self.x)]
            base = [self.domain, step.enabled, z3.Not(step.error)]
            m2 = mon.next[j]
            no_dis = z3.Not(mon.discharged[j])
            met = [z3.BoolVal(True) if i == idx else z3.Not(self.enabled(i)) for i in self.just]
            # not committed, and not committing
            out.append((x2 + [m2, z3.BoolVal(False), self.count] + self.flags,
                        base + [z3.Not(self.committed)]))
            # committing now: ob pending from here on, this step is the first after
            out.append((x2 + [m2, z3.BoolVal(True)] + self._round(met),
                        base + [z3.Not(self.committed), mon.pending(), no_dis]))
            # committed
            seen = [z3.Or(f, m) for f, m in zip(self.flags, met)]
            out.append((x2 + [m2, z3.BoolVal(True)] + self._round(seen),
                        base + [self.committed, no_dis]))
        return out

    def bad(self) -> z3.BoolRef:
        mon = self.mon
        rounds = z3.And(self.committed, self.count >= self.k)
        stuck = z3.And(mon.pending(), z3.Not(mk_or([s.enabled for s in self.ts.steps])))
        error = mk_or([z3.And(s.enabled, s.error) for s in self.ts.steps if s.errors])
        return z3.And(self.domain, z3.Or(rounds, stuck, error))

    # -- proving ---------------------------------------------------------------------------
    def spacer(self, timeout_ms: int | None) -> tuple[z3.CheckSatResult, z3.BoolRef | None, str]:
        fp = z3.Fixedpoint()
        fp.set(engine="spacer")
        if timeout_ms is not None:
            fp.set(timeout=max(1, timeout_ms))
        fp.register_relation(self.inv)
        fp.declare_var(*self.args)
        fp.rule(self.inv(*self.args), [self.init()])
        for head, body in self.rules():
            fp.rule(self.inv(*head), [self.inv(*self.args)] + body)
        try:
            res = fp.query(z3.And(self.inv(*self.args), self.bad()))
        except z3.Z3Exception as exc:
            return z3.unknown, None, str(exc)
        if res != z3.unsat:
            return res, None, fp.reason_unknown() if res == z3.unknown else ""
        cover = fp.get_cover_delta(-1, self.inv)
        return res, z3.simplify(z3.substitute_vars(cover, *self.args)), ""

    def recheck(self, invariant: z3.BoolRef, deadline: Deadline) -> str | None:
        """None when ``invariant`` holds initially, is preserved by every rule and
        excludes the bad states (separate Z3 queries over the same terms); otherwise
        what fails."""
        def valid(claim: z3.BoolRef) -> bool:
            s = z3.Solver()
            deadline.arm(s)
            s.add(z3.Not(claim))
            return s.check() == z3.unsat

        if not valid(z3.Implies(self.init(), invariant)):
            return "the invariant does not hold initially"
        for head, body in self.rules():
            deadline.check("the invariant check")
            after = z3.substitute(invariant, *zip(self.args, head))
            if not valid(z3.Implies(z3.And(invariant, *body), after)):
                return "the invariant is not preserved by a step"
        if not valid(z3.Implies(invariant, z3.Not(self.bad()))):
            return "the invariant does not exclude the bad states"
        return None


def obligations_to_prove(system: System, prop: str) -> tuple[list[Obligation], str]:
    """The obligations to prove (one per orbit under the model's symmetry) and a note."""
    R, P = system.schema.requests, system.schema.pages
    report = analyse_symmetry(system, True)
    rs = range(1) if report.requests else range(R)
    ps = range(1) if report.pages else range(P)
    if prop == RT:
        obs = [Obligation(RT, r) for r in rs]
    else:
        obs = [Obligation(prop, r, p) for r in rs for p in ps]
    moved = [d for d, on in (("requests", report.requests), ("pages", report.pages)) if on]
    note = f"one obligation per orbit ({' and '.join(moved)} interchangeable)" if moved \
        else "every obligation"
    return obs, note


def prove_obligation(enc: Encoded, ob: Obligation, fair: Fairness, deadline: Deadline,
                     k: int, local: bool = False) -> ProofResult:
    kl = KLiveness(enc, ob, fair, k, local)
    res, invariant, why = kl.spacer(deadline.left_ms())
    if res == z3.sat:
        return ProofResult(False, f"{_name(ob)} can stay pending through {k} rounds of the "
                                  "fairness conditions (or until the run stops, or a model "
                                  "error is reachable): no proof (--engine explicit or bmc "
                                  "finds a lasso if there is one)", sat=True)
    if res != z3.unsat or invariant is None:
        if deadline.expired():
            raise OutOfTime("the liveness proof")
        return ProofResult(False, f"the solver gave up on {_name(ob)} ({why or 'unknown'})")
    failed = kl.recheck(invariant, deadline)
    if failed is not None:
        return ProofResult(False, f"{_name(ob)}: {failed} (not trusted)")
    lemmas = len(invariant.children()) if z3.is_and(invariant) else 1
    return ProofResult(True, "", invariant, lemmas)


def _assumed(fair: Fairness, local: bool) -> str:
    """The fairness the proof assumed. Strong fairness is used as weak, and with
    ``local`` only the instances of the obligation's own request are assumed fair:
    both rule out fewer runs, so the proof holds under the declared fairness too."""
    text = fair.text()
    if local and (fair.weak or fair.strong):
        text += " (used: only the instances of the obligation's own request)"
    if fair.strong_actions:
        text += " (strong fairness used as weak fairness: a weaker assumption)"
    return text


def _name(ob: Obligation) -> str:
    return f"r{ob.request}" if ob.page is None else f"(r{ob.request}, page {ob.page})"


@dataclass
class Proved:
    """How one obligation was proved: the rounds bound and whether the fairness of the
    obligation's own request was enough."""

    rounds: int
    local: bool
    lemmas: int


def prove(enc: Encoded, ob: Obligation, fair: Fairness, deadline: Deadline
          ) -> Proved | str:
    """Try the bounds of :data:`ROUNDS`, first with the fairness of ``ob``'s own
    request's instances only, then with all of it; a :class:`Proved` or why not."""
    full = fair.weak | fair.strong
    own = {i for i in full if own_instance(enc.ts.system.instances[i], ob)}
    why = ""
    for local in ((True, False) if own != full else (False,)):
        for k in ROUNDS:
            res = prove_obligation(enc, ob, fair, deadline, k, local)
            if res.proved:
                return Proved(k, local, res.lemmas)
            why = res.reason
            if not res.sat:
                break  # the solver gave up: a larger bound will not help
    return why


def check_liveness_proof(system: System, *, properties: list[str] | None = None,
                         fairness: bool = True, timeout: float | None = None
                         ) -> tuple[list[Verdict], Stats]:
    """Prove the library liveness ``properties`` (default: all) under the model's
    fairness by k-liveness; HOLDS only with a re-checked inductive invariant, UNKNOWN
    otherwise (never VIOLATED: this engine shows no lassos). The model's own temporal
    properties are UNKNOWN here."""
    check_timeout(timeout)
    props, temporal = select(system, properties)
    deadline = Deadline(timeout)
    fair = declared_fairness(system, fairness)
    verdicts: list[Verdict] = []
    sizes = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
    lemmas = 0
    try:
        with time_limit(deadline, "the liveness proof"):
            enc = encode(system, deadline)
            for prop in props:
                obs, note = obligations_to_prove(system, prop)
                why = ""
                done: list[Proved] = []
                for ob in obs:
                    res = prove(enc, ob, fair, deadline)
                    if isinstance(res, str):
                        why = res
                        break
                    done.append(res)
                    lemmas += res.lemmas
                if why:
                    verdicts.append(Verdict(prop, Status.UNKNOWN, PROOF,
                                            f"{why}; {fair.text()}"))
                    continue
                k = max(p.rounds for p in done)
                local = all(p.local for p in done)
                verdicts.append(Verdict(prop, Status.HOLDS, PROOF,
                                        f"proved, {sizes}: k={k}, inductive "
                                        f"invariant re-checked, {note}; assuming "
                                        f"{_assumed(fair, local)}"))
    except OutOfTime as exc:
        done_props = {v.prop for v in verdicts}
        for prop in props:
            if prop not in done_props:
                verdicts.append(Verdict(prop, Status.UNKNOWN, PROOF, f"{exc}; {fair.text()}"))
    for tp in temporal:
        verdicts.append(Verdict(tp.name, Status.UNKNOWN, PROOF,
                                "the proof engine covers the library properties only (use "
                                "--engine explicit)"))
    stats = Stats(seconds=deadline.elapsed())
    stats.symmetry = {"enabled": False, "requests": False, "pages": False,
                      "reasons": ["the proof uses symmetry only to pick one obligation per "
                                  "orbit"]}
    stats.extra["liveness"] = {"engine": "proof", "complete": False, "lemmas": lemmas,
                               "fairness": fair.text()}
    return verdicts, stats
