"""The default engine: a portfolio, cheapest conclusive method first.

1. **Certificate** — if ``proofs/<model>.<sizes>.json`` exists for this exact model
   version and re-checks, its properties are PROVED (certificate re-checked).
2. **Quick BMC** — a few seconds of bounded model checking catches shallow bugs
   with shortest counterexamples: VIOLATED (bmc, depth 9).
3. **Exhaustive explicit search** when the state space is small (it completes
   within a state and time budget): HOLDS (exhaustive) / VIOLATED (explicit).
4. **PDR** otherwise: inferred inductive invariants, Spacer, deeper BMC.

Each verdict names the method that decided it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvspec.engines.bmc import Deadline, Search, build
from kvspec.engines.explicit import OutOfTime, check_count, check_timeout, time_limit
from kvspec.engines.transition import python_handles_ctrl_c
from kvspec.lang.system import Property, System
from kvspec.proofs.certificate import certificate_path, check_certificate
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

ProgressFn = Callable[[int, int, float], None]

#: explicit search is used when the reachable states fit this budget ...
SMALL_STATES = 50_000
#: ... and this many seconds
SMALL_SECONDS = 10.0
#: the quick BMC stage: at most this many seconds (and a fifth of the timeout) ...
QUICK_BMC_SECONDS = 5.0
#: ... and this depth
QUICK_BMC_DEPTH = 12


def run_auto(system: System, *, timeout: float | None, max_states: int | None, symmetry: bool,
             save_proof: bool, proofs_dir: Path, progress: ProgressFn | None = None
             ) -> EngineOutcome:
    """The portfolio (see the module docstring). ``timeout`` bounds the whole run and
    ``max_states`` every explicit exploration in it (None: no limit). A stage that is
    cut short by its budget contributes only what it decided: violations, and
    successes only from a search that ran to completion or a proof that re-checked."""
    check_timeout(timeout)
    check_count("max_states", max_states, 1)
    deadline = Deadline(timeout)
    verdicts: dict[str, Verdict] = {}
    stages: list[dict[str, Any]] = []
    stats = Stats()
    stopped = ""
    try:
        _certificate(system, proofs_dir, verdicts, stages, deadline)
        pending = [p for p in system.properties if p.name not in verdicts]
        if pending:
            _quick_bmc(system, pending, verdicts, stages, stats, deadline, symmetry, progress)
        if pending and not deadline.expired():
            pending = _explicit(system, pending, verdicts, stages, stats, deadline, max_states,
                                symmetry, progress)
        if pending and not deadline.expired():
            _pdr(system, pending, verdicts, stages, deadline, max_states, symmetry, save_proof,
                 proofs_dir, progress)
    except OutOfTime as exc:
        stopped = str(exc)
        stages.append({"stage": exc.phase or "auto", "stopped": stopped,
                       "seconds": round(deadline.elapsed(), 3)})
    for p in system.properties:
        if p.name not in verdicts:
            why = stopped or ("timeout" if deadline.expired() else "undecided")
            verdicts[p.name] = Verdict(p.name, Status.UNKNOWN, "auto", why)
    stats.seconds = deadline.elapsed()
    stats.extra["auto"] = stages
    return EngineOutcome([verdicts[p.name] for p in system.properties], stats, "auto")


def _certificate(system: System, proofs_dir: Path, verdicts: dict[str, Verdict],
                 stages: list[dict[str, Any]], deadline: Deadline) -> None:
    """1. A stored certificate for this exact model, re-checked."""
    path = certificate_path(system, proofs_dir)
    if not path.exists():
        return
    t0 = time.monotonic()
    with time_limit(deadline, "the certificate check"), python_handles_ctrl_c():
        check = check_certificate(path, system)
    stages.append({"stage": "certificate", "path": str(path), "ok": check.ok,
                   "seconds": round(time.monotonic() - t0, 3), "problems": check.problems})
    if check.ok:
        names = {p.name for p in system.properties}
        for name in check.properties:
            if name in names:
                verdicts[name] = Verdict(name, Status.PROVED, "certificate re-checked")


def _quick_bmc(system: System, pending: list[Property], verdicts: dict[str, Verdict],
               stages: list[dict[str, Any]], stats: Stats, deadline: Deadline, symmetry: bool,
               progress: ProgressFn | None) -> None:
    """2. A few seconds of BMC for shallow bugs (violations only leave ``pending``)."""
    t0 = time.monotonic()
    ts = build(system, symmetry=symmetry, deadline=deadline)
    with time_limit(deadline, "bmc"):
        search = Search(system, ts, deadline, "bmc")
        left = deadline.left()
        budget = QUICK_BMC_SECONDS if left is None else min(QUICK_BMC_SECONDS, 0.2 * left)
        search.deepen(pending, verdicts, max_depth=QUICK_BMC_DEPTH,
                      until=time.monotonic() + budget)
    stages.append({"stage": "bmc", "depth": search.depth,
                   "seconds": round(time.monotonic() - t0, 3)})
    stats.depth = max(search.depth, 0)
    if progress is not None:
        progress(search.depth, search.depth, deadline.elapsed())


def _pdr(system: System, pending: list[Property], verdicts: dict[str, Verdict],
         stages: list[dict[str, Any]], deadline: Deadline, max_states: int | None,
         symmetry: bool, save_proof: bool, proofs_dir: Path, progress: ProgressFn | None
         ) -> None:
    """4. PDR for the rest: proofs that re-checked, violations that replayed."""
    from kvspec.engines.pdr import run_pdr

    t0 = time.monotonic()
    left = deadline.left()
    if left is not None and left <= 0:
        return
    out = run_pdr(system, timeout=left, save_proof=save_proof, proofs_dir=proofs_dir,
                  progress=progress, symmetry=symmetry, max_states=max_states)
    names = {p.name for p in pending}
    for v in out.verdicts:
        if v.prop in names and v.status is not Status.HOLDS:
            verdicts[v.prop] = v
    stages.append({"stage": "pdr", "seconds": round(time.monotonic() - t0, 3),
                   **out.stats.extra.get("pdr", {})})


def _explicit(system: System, pending: list[Property], verdicts: dict[str, Verdict],
              stages: list[dict[str, Any]], stats: Stats, deadline: Deadline,
              max_states: int | None, symmetry: bool, progress: ProgressFn | None
              ) -> list[Property]:
    """3. Exhaustive search when the state space is small: HOLDS only when it ran to
    completion."""
    from kvspec.engines.explicit import Limits, explore

    t0 = time.monotonic()
    left = deadline.left()
    if max_states is None:  # "small": what fits the default budget
        cap: int = SMALL_STATES
        budget: float | None = SMALL_SECONDS if left is None else min(SMALL_SECONDS, 0.3 * left)
    else:  # the user's own bound on the state space
        cap, budget = max_states, None if left is None else 0.5 * left
    if budget is not None and budget <= 0:
        return pending
    out = explore(system, symmetry=symmetry, limits=Limits(cap, budget), progress=progress,
                  deadline=deadline)
    stages.append({"stage": "explicit", "complete": out.complete, "stopped": out.stopped,
                   "states": out.stats.states, "seconds": round(time.monotonic() - t0, 3)})
    names = {p.name for p in pending}
    for v in out.verdicts:
        if v.prop not in names:
            continue
        if v.status is Status.VIOLATED or (v.status is Status.HOLDS and out.complete):
            verdicts[v.prop] = v
    if out.stats.states:
        stats.states, stats.transitions = out.stats.states, out.stats.transitions
        stats.symmetry = out.stats.symmetry
        stats.peak_memory_mb = out.stats.peak_memory_mb
        stats.depth = max(stats.depth, out.stats.depth)
        stats.extra["explicit"] = out.stats.extra.get("explicit", {})
    return [p for p in pending if p.name not in verdicts]
