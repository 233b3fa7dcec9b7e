"""The default engine: a portfolio, cheapest conclusive method first.

1. **Certificate** — the stored certificates of this model class: an all-sizes one
   (:func:`kvspec.proofs.certificate.all_sizes_paths`) first, then the one for these
   sizes (:func:`kvspec.proofs.certificate.size_specific_path`); the properties of one
   that re-checks are PROVED (certificate re-checked[, all sizes]).
2. **Exhaustive explicit search** when the state space is small: it runs until it has
   explored every reachable state or ``min(SMALL_STATES, SMALL_WORK / instances)``
   states (50,000, and 2.5 million step-function calls), and while symmetry
   reduction has computed at most ``SMALL_CANON_WORK`` (25 million) state images ×
   state length (``--max-states N`` replaces these caps): HOLDS (exhaustive) /
   VIOLATED (explicit). A search the cap stops still
   decides every violation within the depth it completed (breadth-first: shortest).
   2a. **Proof for every size** when that search stopped at its budget and the run's
   size is larger than the small one (two requests, four pages): the clauses of a
   proof at the small size, generalised and checked for every number of requests and
   pages (:func:`kvspec.proofs.parametric.engine.prove_every_size`, re-checked on the
   reading of the run's size), within ``EVERY_SIZE_SECONDS`` — PROVED (all sizes, …)
   for what it proves. Its search does not grow with the run's size, and with
   ``--save-proof`` its certificate re-checks at every size in about a second.
   2b. **Orbit proof** when that search stopped at its budget and the model is
   symmetric in its requests or pages: the clauses inferred at a small size, checked
   at this size one orbit of action instances at a time
   (:func:`kvspec.engines.pdr.prove_by_orbits`) — PROVED (pdr, …, orbit
   representatives) for what they prove, before anything builds the whole
   transition system, which is what grows fastest with the size.
3. **Quick BMC** for what is still open — bounded model checking up to depth
   ``QUICK_BMC_DEPTH`` (12), within ``QUICK_BMC_WORK`` (100 million) Z3 resource units
   (``rlimit``) for all its queries together: shallow bugs of large models, with
   shortest counterexamples, VIOLATED (bmc, depth 9). It starts past the depth stage 2
   explored completely (every shorter trace was already checked there). When the work
   budget runs out the stage stops at the depth it reached.
4. **PDR** otherwise (:mod:`kvspec.engines.pdr`): inferred inductive invariants,
   Spacer, deeper BMC, until it decides or the overall timeout. Its first BMC pass is
   skipped (stage 3 did it); its interleaving of Spacer and BMC is time-sliced, which
   changes only which of the two sound methods decides first, never the verdict.

**Budgets are work, not seconds.** Stages 2 and 3 are bounded by depth, solver
resources and states, so the same command reaches the same verdicts on an idle and
on a loaded machine (Z3's resource counter is deterministic for a given Z3 version).
The only wall-clock limit is ``--timeout`` for the whole run: hitting it makes what
is still undecided UNKNOWN (timeout), never a success.

Each verdict names the method that decided it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvspec.coverage import Coverage
from kvspec.engines.bmc import Deadline, Search, build
from kvspec.engines.explicit import (TIMEOUT, OutOfTime, check_count, check_timeout,
                                     time_limit)
from kvspec.engines.transition import python_handles_ctrl_c
from kvspec.lang.system import Property, System
from kvspec.proofs.certificate import KIND_ALL_SIZES, all_sizes_paths, check_certificate, \
    size_specific_path
from kvspec.proofs.parametric.engine import ALL_SIZES
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

if TYPE_CHECKING:
    from kvspec.engines.pdr import SmallSelection

ProgressFn = Callable[[int, int, float, str], None]  # states, depth, seconds, stage

#: explicit search decides when the reachable states fit this budget (states, not seconds) ...
SMALL_STATES = 50_000
#: ... and states × action instances (the step functions tried) fit this one: a model
#: with many instances per state gets proportionally fewer states
SMALL_WORK = 2_500_000
#: ... and symmetry reduction's own work (state images × state length) this one: with
#: many interchangeable requests a state has many images to compare (patched at
#: requests=6, pages=32: 120 per state, 56 CPU s for 3,000 states without this budget)
SMALL_CANON_WORK = 25_000_000
#: the proof for every size (stage 2a) may take this many seconds (it decides nothing
#: the later stages cannot: running out of it changes only which one proves); 0 skips it
EVERY_SIZE_SECONDS = 120.0
#: the quick BMC stage: at most this depth ...
QUICK_BMC_DEPTH = 12
#: ... and this many Z3 resource units (``rlimit``) for all of its queries together
#: (about 10-20 s of solving on a laptop core; at requests=4, pages=16 of buggy_pd it
#: reaches the depth-9 counterexamples with room to spare)
QUICK_BMC_WORK = 100_000_000


def run_auto(system: System, *, timeout: float | None, max_states: int | None, symmetry: bool,
             save_proof: bool, proofs_dir: Path, progress: ProgressFn | None = None,
             backend: str = "python", warn: Callable[[str], None] | None = None
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
    coverage: list[Coverage] = []
    try:
        _certificate(system, proofs_dir, verdicts, stages, deadline)
        pending = [p for p in system.properties if p.name not in verdicts]
        if pending:
            pending = _explicit(system, pending, verdicts, stages, stats, deadline, max_states,
                                symmetry, progress, coverage, backend, warn)
        if pending and not deadline.expired() and _explicit_incomplete(stages):
            _every_size(system, pending, verdicts, stages, deadline, save_proof, proofs_dir,
                        progress, symmetry, max_states)
            pending = [p for p in pending if p.name not in verdicts]
        small = None
        if pending and not deadline.expired() and _explicit_incomplete(stages) and symmetry:
            small = _orbits(system, pending, verdicts, stages, deadline, max_states, save_proof,
                            proofs_dir, progress)
            pending = [p for p in pending if p.name not in verdicts]
        if pending and not deadline.expired():
            covered = max(stats.depth - 1, -1) if stats.states else -1
            _quick_bmc(system, pending, verdicts, stages, stats, deadline, symmetry, progress,
                       covered)
            pending = [p for p in pending if p.name not in verdicts]
        if pending and not deadline.expired():
            _pdr(system, pending, verdicts, stages, deadline, max_states, symmetry, save_proof,
                 proofs_dir, progress, small)
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
    out = EngineOutcome([verdicts[p.name] for p in system.properties], stats, "auto")
    out.coverage = coverage[0] if coverage else None
    return out


def _certificate(system: System, proofs_dir: Path, verdicts: dict[str, Verdict],
                 stages: list[dict[str, Any]], deadline: Deadline) -> None:
    """1. The stored certificates for this model, re-checked: an all-sizes one first
    (its proofs say more), then the size-specific one for what is still open."""
    own = size_specific_path(system, proofs_dir)
    paths = all_sizes_paths(system, proofs_dir) + ([own] if own.exists() else [])
    names = {p.name for p in system.properties}
    for path in paths:
        if names <= set(verdicts):
            return
        t0 = time.monotonic()
        with time_limit(deadline, "the certificate check"), python_handles_ctrl_c():
            check = check_certificate(path, system)
        stages.append({"stage": "certificate", "path": str(path), "ok": check.ok,
                       "seconds": round(time.monotonic() - t0, 3),
                       "problems": check.problems})
        if check.ok:
            every = check.kind == KIND_ALL_SIZES
            for name in check.properties:
                if name in names and name not in verdicts:
                    verdicts[name] = Verdict(name, Status.PROVED, "certificate re-checked",
                                             ALL_SIZES if every else "")


def _quick_bmc(system: System, pending: list[Property], verdicts: dict[str, Verdict],
               stages: list[dict[str, Any]], stats: Stats, deadline: Deadline, symmetry: bool,
               progress: ProgressFn | None, covered: int = -1) -> None:
    """3. BMC up to QUICK_BMC_DEPTH within QUICK_BMC_WORK solver resources, for shallow
    bugs (violations only leave ``pending``). Depths up to ``covered`` (every trace that
    long was explored by stage 2's breadth-first search) are not checked again."""
    t0 = time.monotonic()
    ts = build(system, symmetry=symmetry, deadline=deadline)
    with time_limit(deadline, "bmc"):
        search = Search(system, ts, deadline, "bmc", work=QUICK_BMC_WORK, progress=progress)
        search.deepen(pending, verdicts, max_depth=QUICK_BMC_DEPTH, covered=covered)
    stage: dict[str, Any] = {"stage": "bmc", "depth": search.depth, "from_depth": covered + 1,
                             "work": search.unroller.used, "work_budget": QUICK_BMC_WORK,
                             "seconds": round(time.monotonic() - t0, 3)}
    if search.gave_up:
        stage["stopped"] = search.gave_up
    stages.append(stage)
    stats.depth = max(stats.depth, search.depth, 0)


def _explicit_incomplete(stages: list[dict[str, Any]]) -> bool:
    """Stage 2 ran and stopped at its budget: the state space is not small."""
    return any(st.get("stage") == "explicit" and not st.get("complete") for st in stages)


def _every_size(system: System, pending: list[Property], verdicts: dict[str, Verdict],
                stages: list[dict[str, Any]], deadline: Deadline, save_proof: bool,
                proofs_dir: Path, progress: ProgressFn | None, symmetry: bool,
                max_states: int | None) -> None:
    """2a. Beyond the small state spaces, at a size larger than the small one: a proof
    for every size learnt at the small size
    (:func:`kvspec.proofs.parametric.engine.prove_every_size`), within
    ``EVERY_SIZE_SECONDS``. Its cost does not grow with the run's size, and its
    certificate re-checks as fast at every size. Proofs only (re-checked); the rest
    goes on to the size-specific stages."""
    from kvspec.engines.inference import is_small
    from kvspec.proofs.parametric.engine import all_sizes_verdict, prove_every_size

    if EVERY_SIZE_SECONDS <= 0 or is_small(system):
        return
    t0 = time.monotonic()
    left = deadline.left()
    budget = EVERY_SIZE_SECONDS if left is None else min(left, EVERY_SIZE_SECONDS)
    with time_limit(deadline, "the proof for every size"), python_handles_ctrl_c():
        proof, extra, note = prove_every_size(
            system, [p.name for p in pending], timeout=budget, save_proof=save_proof,
            proofs_dir=proofs_dir, progress=progress, symmetry=symmetry,
            max_states=max_states)
    for name in proof.proved:
        verdicts[name] = all_sizes_verdict(proof, name, note)
    stage: dict[str, Any] = {"stage": "all-sizes", "proved": sorted(proof.proved),
                             "seconds": round(time.monotonic() - t0, 3)}
    if proof.why_not and len(proof.proved) < len(pending):
        stage["why_not"] = proof.why_not
    if "learnt_at" in extra:
        stage["learnt_at"] = extra["learnt_at"]
    stages.append(stage)


def _orbits(system: System, pending: list[Property], verdicts: dict[str, Verdict],
            stages: list[dict[str, Any]], deadline: Deadline, max_states: int | None,
            save_proof: bool, proofs_dir: Path, progress: ProgressFn | None
            ) -> SmallSelection | None:
    """2b. Beyond the small state spaces, of a model symmetric in its requests or pages:
    the small size's inferred clauses checked one orbit at a time at this size, before
    anything builds the whole transition system (whose encoding grows faster than the
    number of action instances: 151 CPU s for patched at requests=8, pages=64). Proofs
    only (re-checked); what it cannot prove goes on to BMC and PDR, which reuse the
    small size's selection. Returns that selection (None: not made)."""
    from kvspec.engines.pdr import prove_by_orbits

    t0 = time.monotonic()
    proved, notes, small = prove_by_orbits(
        system, [p.name for p in pending], deadline=deadline, symmetry=True,
        save_proof=save_proof, proofs_dir=proofs_dir, max_states=max_states,
        progress=progress)
    verdicts.update(proved)
    stages.append({"stage": "orbits", "proved": sorted(proved),
                   "seconds": round(time.monotonic() - t0, 3),
                   **{k: v for k, v in notes.items() if k in ("not_applicable", "stopped")}})
    return small


def _pdr(system: System, pending: list[Property], verdicts: dict[str, Verdict],
         stages: list[dict[str, Any]], deadline: Deadline, max_states: int | None,
         symmetry: bool, save_proof: bool, proofs_dir: Path, progress: ProgressFn | None,
         small: SmallSelection | None = None) -> None:
    """4. PDR for the rest: proofs that re-checked, violations that replayed (with the
    small size's selection of stage 2b when it made one)."""
    from kvspec.engines.pdr import run_pdr

    t0 = time.monotonic()
    left = deadline.left()
    if left is not None and left <= 0:
        return
    out = run_pdr(system, timeout=left, save_proof=save_proof, proofs_dir=proofs_dir,
                  progress=progress, symmetry=symmetry, max_states=max_states, quick_depth=0,
                  small=small)
    names = {p.name for p in pending}
    for v in out.verdicts:
        if v.prop in names and v.status is not Status.HOLDS:
            verdicts[v.prop] = v
    stages.append({"stage": "pdr", "seconds": round(time.monotonic() - t0, 3),
                   **out.stats.extra.get("pdr", {})})


def _explicit(system: System, pending: list[Property], verdicts: dict[str, Verdict],
              stages: list[dict[str, Any]], stats: Stats, deadline: Deadline,
              max_states: int | None, symmetry: bool, progress: ProgressFn | None,
              coverage: list[Coverage], backend: str = "python",
              warn: Callable[[str], None] | None = None) -> list[Property]:
    """2. Exhaustive search when the state space is small (see the module docstring,
    or the user's ``max_states``): HOLDS only when it ran to completion. Its
    coverage is the run's coverage."""
    from kvspec.engines.explicit import Limits, explore

    t0 = time.monotonic()
    canon_work: int | None = None
    if max_states is None:
        cap = max(1, min(SMALL_STATES, SMALL_WORK // max(1, len(system.instances))))
        canon_work = SMALL_CANON_WORK
    else:
        cap = max_states
    out = explore(system, backend=backend, symmetry=symmetry,
                  limits=Limits(cap, None, canon_work),
                  progress=progress, deadline=deadline, warn=warn)
    if out.coverage is not None:
        coverage.append(out.coverage)
    stages.append({"stage": "explicit", "complete": out.complete, "stopped": out.stopped,
                   "states": out.stats.states, "seconds": round(time.monotonic() - t0, 3)})
    names = {p.name for p in pending}
    for v in out.verdicts:
        if v.prop not in names:
            continue
        if v.status is Status.VIOLATED or (v.status is Status.HOLDS and out.complete):
            verdicts[v.prop] = v
    if out.stopped == TIMEOUT and deadline.expired():
        # the run's deadline passed inside the search (its symmetry analysis, say):
        # say where, as the other stages do
        raise OutOfTime(out.stopped_during or "the explicit search")
    if out.stats.states:
        stats.states, stats.transitions = out.stats.states, out.stats.transitions
        stats.symmetry = out.stats.symmetry
        stats.peak_memory_mb = out.stats.peak_memory_mb
        stats.depth = max(stats.depth, out.stats.depth)
        stats.extra["explicit"] = out.stats.extra.get("explicit", {})
    return [p for p in pending if p.name not in verdicts]
