"""Bounded model checking: incremental unrolling, depth by depth.

Depth ``k`` is checked only after every depth below it was shown free of
violations, so the first counterexample found for a property is a shortest one.
Every solver counterexample is turned into a schedule and re-executed by
:func:`kvspec.trace.concretize`; a schedule that does not replay raises
:class:`~kvspec.trace.InternalError`.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import z3

from kvspec.engines.explicit import Deadline, OutOfTime, check_count, check_timeout, time_limit
from kvspec.engines.transition import TransitionSystem, Vars, check_sat, replay_error
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import ActionInstance, Property, System
from kvspec.trace import InternalError, concretize
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

ProgressFn = Callable[[int, int, float, str], None]  # states, depth, seconds, stage

__all__ = ["Deadline", "OutOfTime", "Search", "Unroller", "build", "check_depth",
           "check_errors", "run_bmc"]


class Unroller:
    """A solver holding frames ``0..depth`` of the transition system."""

    def __init__(self, ts: TransitionSystem, *, from_init: bool = True, rlimit: int = 0,
                 work: int | None = None) -> None:
        """``rlimit``: Z3's resource limit for each query (0: none); ``work``: the Z3
        resources all queries together may use (None: no limit). Both are budgets of
        work, not seconds, so a query gives up at the same point on every machine."""
        self.ts = ts
        self.solver = ts.solver()
        self.depth = 0
        self._n = 0
        self.rlimit = rlimit
        self.work = work
        self.used = 0  # Z3 resources used by the queries so far
        if from_init:
            self.solver.add(ts.init(ts.frame(0)))
        self.solver.add(*ts.domain(ts.frame(0)))

    def extend(self) -> None:
        """Add the step from frame ``depth`` to ``depth + 1``."""
        self.solver.add(*self.ts.trans(self.depth))
        self.depth += 1

    def frame(self, t: int) -> Vars:
        return self.ts.frame(t)

    def check(self, goal: z3.BoolRef, deadline: Deadline) -> z3.CheckSatResult:
        """Is ``goal`` satisfiable together with the frames? (goal is not kept)"""
        self._n += 1
        lit = z3.Bool(f"goal!{self._n}")
        self.solver.add(z3.Implies(lit, goal))
        deadline.arm(self.solver)
        limit = self.rlimit
        if self.work is not None:
            left = self.work - self.used
            if left <= 0:
                return z3.unknown
            limit = left if limit == 0 else min(limit, left)
        self.solver.set("rlimit", limit)
        before = _resources(self.solver)
        try:
            return check_sat(self.solver, lit)
        finally:
            self.used += max(0, _resources(self.solver) - before)

    def model(self) -> z3.ModelRef:
        return self.solver.model()

    def error_schedule(self, t: int) -> list[ActionInstance]:
        """After a sat :meth:`check` of an error at frame ``t``: the path to it."""
        model = self.model()
        found = self.ts.erring(model, self.frame(t))
        if found is not None:
            return self.ts.schedule(model, t) + [found[0]]
        raise InternalError("bmc: solver reports a model error but none holds in its model")


def _resources(solver: z3.Solver) -> int:
    """Z3's resource counter (``rlimit count``; it only grows)."""
    stats = solver.statistics()
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0


def check_errors(unroller: Unroller, t: int, deadline: Deadline, engine: str) -> z3.CheckSatResult:
    """Raise the model error reachable at frame ``t`` if the solver finds one."""
    ts = unroller.ts
    goal = ts.any_error(unroller.frame(t))
    if z3.is_false(goal):
        return z3.unsat
    res = unroller.check(goal, deadline)
    if res == z3.sat:
        raise replay_error(ts.system, unroller.error_schedule(t), engine)
    return res


def build(system: System, *, symmetry: bool, encoding: str = "bv",
          deadline: Deadline | None = None) -> TransitionSystem:
    """The transition system, with least-fresh-id symmetry breaking over the id spaces
    the model provably treats interchangeably (:mod:`kvspec.lang.symmetry`) — none
    when ``symmetry`` is off. With a ``deadline``, the symmetry analysis and the
    encoding raise :class:`OutOfTime` when it passes."""
    if deadline is None:
        report = analyse_symmetry(system, enabled=symmetry)
    else:
        with time_limit(deadline, "symmetry analysis"):
            report = analyse_symmetry(system, enabled=symmetry)
    breaking = (report.requests, report.pages) if symmetry else (False, False)
    return TransitionSystem(system, encoding, breaking, deadline=deadline)


def run_bmc(system: System, *, depth: int, timeout: float | None,
            progress: ProgressFn | None = None, symmetry: bool = True) -> EngineOutcome:
    """Check every property on all paths of up to ``depth`` steps (``timeout``: seconds
    for the whole run, every phase included; None: no limit). ``symmetry=False``
    turns symmetry breaking off."""
    check_count("depth", depth, 0)
    check_timeout(timeout)
    deadline = Deadline(timeout)
    verdicts: dict[str, Verdict] = {}
    pending: list[Property] = list(system.properties)
    reached = -1
    stopped = ""
    ts: TransitionSystem | None = None
    try:
        ts = build(system, symmetry=symmetry, deadline=deadline)
        with time_limit(deadline, "bmc"):
            unroller = Unroller(ts)
            for k in range(depth + 1):
                if progress is not None:  # "checking depth k" (a long solve is reported as such)
                    progress(0, k, deadline.elapsed(), "bmc")
                if k > 0:
                    res = check_errors(unroller, k - 1, deadline, "bmc")
                    if res == z3.unknown:
                        stopped = _why(unroller, deadline, k)
                        break
                    unroller.extend()
                stopped = check_depth(system, ts, unroller, pending, verdicts, k, deadline)
                if stopped:
                    break
                reached = k
                if not pending:
                    break
    except OutOfTime as exc:
        stopped = str(exc) if reached < 0 else f"{exc} at depth {reached + 1}"
    for p in pending:
        if p.name in verdicts:
            continue
        if stopped:
            upto = f"no violation up to depth {reached}" if reached >= 0 else "nothing checked"
            verdicts[p.name] = Verdict(p.name, Status.UNKNOWN, "bmc", f"{stopped}; {upto}")
        else:
            verdicts[p.name] = Verdict(p.name, Status.HOLDS, "bounded", f"depth {reached}")
    stats = Stats(depth=max(reached, 0), seconds=deadline.elapsed())
    if ts is not None:
        stats.extra["bmc"] = {"instances": len(ts.steps), "slots": ts.width}
    return EngineOutcome([verdicts[p.name] for p in system.properties], stats, "bmc")


def _why(unroller: Unroller, deadline: Deadline, k: int) -> str:
    if deadline.expired():
        return f"timeout at depth {k}"
    return f"solver gave up at depth {k} ({unroller.solver.reason_unknown()})"


def check_depth(system: System, ts: TransitionSystem, unroller: Unroller,
                 pending: list[Property], verdicts: dict[str, Verdict], k: int,
                 deadline: Deadline) -> str:
    """Decide the pending properties at exactly depth ``k``; '' or why it stopped."""
    vs = unroller.frame(k)
    bads = {p.name: ts.bad(p, vs) for p in pending}
    live = [p for p in pending if not z3.is_false(bads[p.name])]
    if not live:
        return ""
    res = unroller.check(z3.Or(*[bads[p.name] for p in live]), deadline)
    if res == z3.unsat:
        return ""
    if res == z3.unknown:
        return _why(unroller, deadline, k)
    for p in live:
        res = unroller.check(bads[p.name], deadline)
        if res == z3.unknown:
            return _why(unroller, deadline, k)
        if res == z3.sat:
            schedule = ts.schedule(unroller.model(), k)
            trace = concretize(system, p.name, schedule, engine="bmc")
            verdicts[p.name] = Verdict(p.name, Status.VIOLATED, "bmc", f"depth {k}", trace)
            pending.remove(p)
    return ""


class Search:
    """Bounded model checking, deepened on demand, for the properties still open."""

    def __init__(self, system: System, ts: TransitionSystem, deadline: Deadline,
                 engine: str, *, rlimit: int = 0, work: int | None = None,
                 progress: ProgressFn | None = None) -> None:
        """``rlimit``/``work``: Z3 resource limits per query and for all queries
        (see :class:`Unroller`); ``progress`` is told each depth before it is checked."""
        self.engine = engine
        self.system = system
        self.ts = ts
        self.deadline = deadline
        self.unroller = Unroller(ts, rlimit=rlimit, work=work)
        self.depth = -1  # deepest depth completely checked
        self.progress = progress
        self.gave_up = ""  # why the solver gave up, when it did

    def deepen(self, pending: list[Property], verdicts: dict[str, Verdict], *,
               max_depth: int, until: float | None = None, covered: int = -1) -> bool:
        """Check depths ``depth + 1 ..`` up to ``max_depth`` (and, if given, until time
        ``until``); violated properties leave ``pending``. False when the solver gave up
        (``gave_up`` says why). Depths up to ``covered`` are only unrolled, not checked:
        an exhaustive search already showed no violation and no model error within
        that many steps."""
        while pending and self.depth < max_depth and (until is None
                                                       or time.monotonic() < until):
            k = self.depth + 1
            if k <= covered:
                if k > 0 and self.unroller.depth < k:
                    self.unroller.extend()
                self.depth = k
                continue
            if self.progress is not None:
                self.progress(0, k, self.deadline.elapsed(), self.engine)
            if k > 0:
                if check_errors(self.unroller, k - 1, self.deadline, self.engine) == z3.unknown:
                    self.gave_up = _why(self.unroller, self.deadline, k)
                    return False
                if self.unroller.depth < k:  # not yet: an earlier call may have given up at k
                    self.unroller.extend()
            names = {p.name for p in pending}
            why = check_depth(self.system, self.ts, self.unroller, pending, verdicts, k,
                              self.deadline)
            if why:
                self.gave_up = why
                return False
            for name in names - {p.name for p in pending}:
                v = verdicts[name]
                verdicts[name] = Verdict(name, v.status, self.engine, v.detail, v.trace)
            self.depth = k
        return True
