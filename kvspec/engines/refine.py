"""Exact counterexamples through the monitor's saturated in-flight counts.

The library monitor counts in-flight writes per (page, request) exactly up to a
bound K; one more makes the count "more than K", treated as in flight from then on
(:mod:`kvspec.props.library`). That can only add violations, so HOLDS and PROVED
are exact whatever K is. A counterexample whose states reach a saturated count may
be spurious, though: the writes it counts as in flight may all have landed. Such a
verdict is never reported as it is; :func:`run_exact` checks the properties again
with the next larger bound (``INFLIGHT_BOUNDS``) and reports UNKNOWN, saying why,
if the largest bound still saturates.
"""
from __future__ import annotations

from typing import Callable

from kvspec.lang.system import System, compile_model, settable_sizes
from kvspec.props import library
from kvspec.trace import Trace
from kvspec.verdict import Result, Status, Verdict

__all__ = ["inexact", "run_exact", "saturates"]

#: the properties whose checks read the in-flight counts
COUNTING = library.COUNTING


def saturates(trace: Trace) -> bool:
    """Whether some state of the trace has a saturated count (in-flight writes, remote
    reads or slot writes: every counted monitor variable that the run stores)."""
    system = trace.system
    top = system.inflight_bound + 1
    states = [trace.initial] + [step.state for step in trace.steps]
    for name in library.COUNTED_VARS:
        info = system.schema.by_name.get(name)
        if info is None:
            continue
        lo, hi = info.offset, info.offset + info.length
        if any(top in state[lo:hi] for state in states):
            return True
    return False


def inexact(result: Result) -> list[str]:
    """The violated properties whose counterexample passes a saturated count."""
    return [v.prop for v in result.verdicts
            if v.status is Status.VIOLATED and v.prop in COUNTING and v.trace is not None
            and saturates(v.trace)]


def run_exact(system: System, run_once: Callable[[System], Result]) -> Result:
    """``run_once(system)``, with every counterexample through a saturated in-flight
    count re-decided at larger bounds (only those properties are run again)."""
    result = run_once(system)
    bounds = [b for b in library.INFLIGHT_BOUNDS if b > system.inflight_bound]
    bad = inexact(result)
    for bound in bounds:
        if not bad:
            break
        again = compile_model(system.loaded, settable_sizes(system.loaded, system.sizes), bad, inflight_bound=bound)
        redo = run_once(again)
        by_name = {v.prop: v for v in redo.verdicts}
        result.verdicts = [by_name.get(v.prop, v) for v in result.verdicts]
        result.stats.extra["inflight_bound"] = bound
        # the statistics above are the first run's; say what the re-check did
        result.stats.extra.setdefault("rechecked", []).append(
            {"inflight_bound": bound, "properties": bad, "states": redo.stats.states,
             "depth": redo.stats.depth, "seconds": round(redo.stats.seconds, 3)})
        bad = inexact(result)
    if bad:
        top = max([system.inflight_bound] + bounds)
        result.verdicts = [
            Verdict(v.prop, Status.UNKNOWN, "inflight-bound",
                    f"the shortest counterexample found has more than {top} writes of one "
                    "request in flight into one page at once; the monitor does not count that "
                    "many, so it is not confirmed")
            if v.prop in bad else v for v in result.verdicts]
    return result
