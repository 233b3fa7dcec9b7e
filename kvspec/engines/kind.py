"""k-induction with simple-path constraints.

For k = 0, 1, ...: the *base case* is bounded model checking at depth k (so a
violation found here is a shortest one and replays concretely); the *step case*
asks whether k consecutive distinct states that satisfy every still-open
property (and raise no model error) can be followed by one that violates one.
When the step case is unsatisfiable, every open property is k-inductive: PROVED
(k-inductive, k=N). Otherwise the engine goes on to k + 1, and when the bound or
the time runs out it says so: UNKNOWN, never a success.

Properties that the base case finds violated stop being assumed in the step case
(each assumption sits behind an activation literal), so a false property never
helps to prove another.
"""
from __future__ import annotations

from collections.abc import Callable

import z3

from kvspec.engines.bmc import Deadline, Unroller, build, check_depth, check_errors
from kvspec.engines.explicit import OutOfTime, check_count, check_timeout, time_limit
from kvspec.engines.transition import TransitionSystem, check_sat
from kvspec.lang.system import Property, System
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

ProgressFn = Callable[[int, int, float, str], None]  # states, depth, seconds, stage


class StepCase:
    """Frames ``0..k`` from an arbitrary state, pairwise distinct, open properties
    assumed on all frames but the last."""

    def __init__(self, ts: TransitionSystem) -> None:
        self.ts = ts
        self.unroller = Unroller(ts, from_init=False)
        self.acts = {p.name: z3.Bool(f"assume:{p.name}") for p in ts.system.properties}
        self.no_error = z3.Bool("assume:no-model-error")

    @property
    def k(self) -> int:
        return self.unroller.depth

    def _assume(self, t: int) -> None:
        ts = self.ts
        vs = ts.frame(t)
        solver = self.unroller.solver
        for p in ts.system.properties:
            solver.add(z3.Implies(self.acts[p.name], z3.Not(ts.bad(p, vs))))
        solver.add(z3.Implies(self.no_error, z3.Not(ts.any_error(vs))))

    def extend(self) -> None:
        """Add frame k + 1, distinct from every earlier frame."""
        self.unroller.extend()
        k = self.k
        new = self.ts.frame(k)
        for i in range(k):
            old = self.ts.frame(i)
            self.unroller.solver.add(z3.Or(*[a != b for a, b in zip(new, old)]))

    def check(self, open_props: list[Property], deadline: Deadline) -> z3.CheckSatResult:
        """Can the open properties (and no-error) hold on frames 0..k-1 but not at k?"""
        ts = self.ts
        vs = ts.frame(self.k)
        goal = z3.Or(ts.any_error(vs), *[ts.bad(p, vs) for p in open_props])
        lit = z3.Bool(f"step-goal!{self.k}")
        solver = self.unroller.solver
        solver.add(z3.Implies(lit, goal))
        deadline.arm(solver)
        return check_sat(solver, lit, self.no_error, *[self.acts[p.name] for p in open_props])

    def close_frame(self) -> None:
        """The last frame becomes an assumed one (before the next :meth:`extend`)."""
        self._assume(self.k)


def run_kind(system: System, *, max_k: int, timeout: float | None,
             progress: ProgressFn | None = None, symmetry: bool = True) -> EngineOutcome:
    """k-induction up to ``max_k`` (``timeout``: seconds for the whole run, every phase
    included; None: no limit). ``symmetry=False`` turns symmetry breaking off."""
    check_count("max_k", max_k, 0)
    check_timeout(timeout)
    deadline = Deadline(timeout)
    verdicts: dict[str, Verdict] = {}
    pending: list[Property] = list(system.properties)
    stopped = ""
    k_done = -1
    ts: TransitionSystem | None = None
    try:
        ts = build(system, symmetry=symmetry, deadline=deadline)
        with time_limit(deadline, "k-induction"):
            base = Unroller(ts)
            step = StepCase(ts)
            for k in range(max_k + 1):
                if progress is not None:  # "checking k" (a long solve is reported as such)
                    progress(0, k, deadline.elapsed(), "k-induction")
                # base case: no violation (and no model error) at depth exactly k
                if k > 0:
                    if check_errors(base, k - 1, deadline, "k-induction") == z3.unknown:
                        stopped = _why(base.solver, deadline, k)
                        break
                    base.extend()
                stopped = check_depth(system, ts, base, pending, verdicts, k, deadline)
                if stopped or not pending:
                    k_done = k
                    break
                # step case
                if k > 0:
                    step.close_frame()
                    step.extend()
                res = step.check(pending, deadline)
                if res == z3.unknown:
                    stopped = _why(step.unroller.solver, deadline, k)
                    break
                k_done = k
                if res == z3.unsat:
                    for p in pending:
                        verdicts[p.name] = Verdict(p.name, Status.PROVED, "k-inductive",
                                                   f"k={k}")
                    pending = []
                    break
    except OutOfTime as exc:
        stopped = str(exc)
    for p in pending:
        if p.name in verdicts:
            continue
        why = stopped or f"not k-inductive up to k={max_k}"
        upto = f"no violation up to depth {k_done}" if k_done >= 0 else "nothing checked"
        verdicts[p.name] = Verdict(p.name, Status.UNKNOWN, "k-induction", f"{why}; {upto}")
    stats = Stats(depth=max(k_done, 0), seconds=deadline.elapsed())
    if ts is not None:
        stats.extra["kind"] = {"instances": len(ts.steps), "slots": ts.width}
    return EngineOutcome([verdicts[p.name] for p in system.properties], stats, "kind")


def _why(solver: z3.Solver, deadline: Deadline, k: int) -> str:
    if deadline.expired():
        return f"timeout at k={k}"
    return f"solver gave up at k={k} ({solver.reason_unknown()})"
