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
from kvspec.lang.system import Property, System
from kvspec.proofs.certificate import certificate_path, check_certificate
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

ProgressFn = Callable[[int, int, float], None]

#: explicit search is used when the reachable states fit this budget ...
SMALL_STATES = 50_000
#: ... and this many seconds
SMALL_SECONDS = 10.0


def run_auto(system: System, *, timeout: float | None, max_states: int | None, symmetry: bool,
             save_proof: bool, proofs_dir: Path, progress: ProgressFn | None = None
             ) -> EngineOutcome:
    deadline = Deadline(timeout)
    verdicts: dict[str, Verdict] = {}
    stages: list[dict[str, Any]] = []
    stats = Stats()

    # 1. a stored certificate for this exact model
    path = certificate_path(system, proofs_dir)
    if path.exists():
        t0 = time.monotonic()
        check = check_certificate(path, system)
        stages.append({"stage": "certificate", "path": str(path), "ok": check.ok,
                       "seconds": round(time.monotonic() - t0, 3),
                       "problems": check.problems})
        if check.ok:
            for name in check.properties:
                verdicts[name] = Verdict(name, Status.PROVED, "certificate re-checked")
    pending = [p for p in system.properties if p.name not in verdicts]

    # 2. quick BMC for shallow bugs
    if pending:
        t0 = time.monotonic()
        search = Search(system, build(system, symmetry=symmetry), deadline, "bmc")
        budget = 5.0 if timeout is None else min(5.0, 0.2 * timeout)
        search.deepen(pending, verdicts, max_depth=12, until=time.monotonic() + budget)
        stages.append({"stage": "bmc", "depth": search.depth,
                       "seconds": round(time.monotonic() - t0, 3)})
        stats.depth = max(search.depth, 0)
        if progress is not None:
            progress(search.depth, search.depth, deadline.elapsed())

    # 3. exhaustive search when the state space is small
    if pending and not deadline.expired():
        pending = _explicit(system, pending, verdicts, stages, stats, deadline, max_states,
                            symmetry, progress)

    # 4. PDR for the rest
    if pending and not deadline.expired():
        from kvspec.engines.pdr import run_pdr

        t0 = time.monotonic()
        left = None if deadline.end is None else max(1.0, deadline.end - time.monotonic())
        out = run_pdr(system, timeout=left, save_proof=save_proof, proofs_dir=proofs_dir,
                      progress=progress)
        for v in out.verdicts:
            if v.prop in {p.name for p in pending}:
                verdicts[v.prop] = v
        stages.append({"stage": "pdr", "seconds": round(time.monotonic() - t0, 3),
                       **out.stats.extra.get("pdr", {})})
    for p in system.properties:
        if p.name not in verdicts:
            verdicts[p.name] = Verdict(p.name, Status.UNKNOWN, "auto",
                                       "timeout" if deadline.expired() else "undecided")
    stats.seconds = deadline.elapsed()
    stats.extra["auto"] = stages
    return EngineOutcome([verdicts[p.name] for p in system.properties], stats, "auto")


def _explicit(system: System, pending: list[Property], verdicts: dict[str, Verdict],
              stages: list[dict[str, Any]], stats: Stats, deadline: Deadline,
              max_states: int | None, symmetry: bool, progress: ProgressFn | None
              ) -> list[Property]:
    from kvspec.engines.explicit import Limits, explore

    t0 = time.monotonic()
    left = None if deadline.end is None else deadline.end - time.monotonic()
    if max_states is None:  # "small": what fits the default budget
        cap: int | None = SMALL_STATES
        budget: float | None = SMALL_SECONDS if left is None else min(SMALL_SECONDS, 0.3 * left)
    else:  # the user's own bound on the state space
        cap, budget = max_states, None if left is None else 0.5 * left
    out = explore(system, symmetry=symmetry, limits=Limits(cap, budget), progress=progress)
    stages.append({"stage": "explicit", "complete": out.complete, "states": out.stats.states,
                   "seconds": round(time.monotonic() - t0, 3)})
    names = {p.name for p in pending}
    for v in out.verdicts:
        if v.prop in names and (v.status is Status.VIOLATED or out.complete):
            verdicts[v.prop] = v
    if out.complete or out.stats.states:
        stats.states, stats.transitions = out.stats.states, out.stats.transitions
        stats.symmetry = out.stats.symmetry
        stats.peak_memory_mb = out.stats.peak_memory_mb
        stats.depth = max(stats.depth, out.stats.depth)
    return [p for p in pending if p.name not in verdicts]
