"""Run one engine on a compiled model: the dispatch shared by ``kvspec verify``,
``kvspec check``, the pytest plugin and :mod:`kvspec.testing`, so that all of them
mean the same by a verdict.

``run`` also looks after the stored certificate ``auto`` re-checks: one that is not a
certificate at all (a directory, not JSON, fields of the wrong types) is ignored with a
warning and never decides a verdict. Certificates live in the model's proofs directory
(:func:`kvspec.proofs.location.default_proofs_dir`) unless ``proofs_dir`` is given.

Every result carries coverage (:mod:`kvspec.coverage`): recorded by the explicit
search (also ``auto``'s explicit stage), else — or when that search stopped early —
computed by :func:`coverage_of` with a budget of ``RUNNER_MAX_STATES`` states (and
what is left of the timeout).
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from kvspec.ctrl_c import stops_on_ctrl_c
from kvspec.coverage import RUNNER_MAX_SECONDS, RUNNER_MAX_STATES, Coverage, coverage_of
from kvspec.engines.refine import run_exact
from kvspec.lang.system import System
from kvspec.trace import DocumentError, load_json_document
from kvspec.verdict import EngineOutcome, Result

__all__ = ["CERT_FORMAT", "ENGINES", "Search", "certificate_problem", "load_certificate", "run",
           "run_engine"]

ENGINES = ("auto", "explicit", "bmc", "kind", "pdr", "all-sizes")
CERT_FORMAT = "kvspec-proof/1"
#: ``progress(states, depth, seconds, stage)``: states explored (0 for the symbolic
#: engines), the depth being checked, seconds since the engine started, and the stage
#: (``explicit``, ``bmc``, ``k-induction``, ``pdr``, ``pdr inference``, ``pdr round N``)
ProgressFn = Callable[[int, int, float, str], None]


def _silent(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class Search:
    """How the explicit search runs. ``backend``: ``native`` (the model compiled to C),
    ``python``, or None — native when a C compiler is present for ``--engine explicit``,
    Python for ``auto``'s small capped stage (compiling would cost more than it saves).
    ``stop_at_first``: stop at the first violation of any property (still a shortest
    counterexample for it). ``fingerprint``: 64-bit hash compaction (native only; its
    HOLDS is not exhaustive and says so). ``workers``: threads of the native search (the
    same results as one). ``dfs``: depth-first to the first violation (native only; its
    counterexample is not claimed shortest). ``warn``: where a fallback is announced."""

    backend: str | None = None
    stop_at_first: bool = False
    fingerprint: bool = False
    warn: Callable[[str], None] | None = None
    workers: int = 1
    dfs: bool = False


def certificate_problem(doc: Any) -> str | None:
    """Why ``doc`` is not shaped like a ``kvspec-proof/1`` certificate (None: it is).

    Only the shape is checked (the types every consumer relies on); whether the
    certificate is valid for a model is what ``check-proof`` decides."""
    if not isinstance(doc, dict):
        return f"expected a JSON object, got {type(doc).__name__}"
    if doc.get("format") != CERT_FORMAT:
        return f"format is {doc.get('format')!r}, expected {CERT_FORMAT!r}"
    for key, kind, name in (("model", dict, "an object"), ("sizes", dict, "an object"),
                            ("properties", list, "a list"), ("library_sha256", str, "a string"),
                            ("method", str, "a string"), ("stats", dict, "an object")):
        if key in doc and not isinstance(doc[key], kind):
            return f"'{key}' must be {name}"
    model = doc.get("model", {})
    if "sha256" in model and not isinstance(model["sha256"], str):
        return "'model.sha256' must be a string"
    sizes = doc.get("sizes", {})
    if any(isinstance(v, bool) or not isinstance(v, int) for v in sizes.values()):
        return "'sizes' must map names to integers"
    if any(not isinstance(p, str) for p in doc.get("properties", [])):
        return "'properties' must be a list of property names"
    inv = doc.get("invariant")
    if not isinstance(inv, dict):
        return "'invariant' must be an object"
    if not isinstance(inv.get("smtlib2"), str):
        return "'invariant.smtlib2' must be a string"
    readable = inv.get("readable", [])
    if not isinstance(readable, list) or any(not isinstance(r, str) for r in readable):
        return "'invariant.readable' must be a list of strings"
    if "sha256" in inv and not isinstance(inv["sha256"], str):
        return "'invariant.sha256' must be a string"
    clauses = inv.get("clauses", 0)
    if isinstance(clauses, bool) or not isinstance(clauses, int):
        return "'invariant.clauses' must be an integer"
    return None


def load_certificate(path: str | Path) -> dict[str, Any]:
    """The certificate document in ``path``; DocumentError when it is not one."""
    what = "a kvspec certificate"
    doc = load_json_document(path, what)
    problem = certificate_problem(doc)
    if problem is not None:
        raise DocumentError(f"{path} is not {what}: {problem}")
    return doc  # type: ignore[no-any-return]


@contextlib.contextmanager
def _usable_proofs_dir(system: System, engine: str, proofs_dir: Path, save_proof: bool,
                       warn: Callable[[str], None]
                       ) -> Iterator[tuple[Path, Callable[[Any], Any]]]:
    """The proofs directory to hand the engine, and a fix-up for what it returns.

    ``auto`` re-checks the stored certificate of the model. One that is not a
    certificate at all (a directory, not JSON, fields of the wrong types) is ignored
    with a one-line warning: the engine gets an empty directory instead, so the
    verdicts come from the other engines, never from that file. With ``--save-proof`` a
    certificate written there replaces the broken file."""
    if engine != "auto":
        yield proofs_dir, lambda x: x
        return
    from kvspec.proofs.certificate import certificate_path
    stored = certificate_path(system, proofs_dir)
    if not stored.exists():
        yield proofs_dir, lambda x: x
        return
    try:
        load_certificate(stored)
    except DocumentError as exc:
        warn("ignoring the stored certificate: " + " ".join(str(exc).split()))
    else:
        yield proofs_dir, lambda x: x
        return
    with tempfile.TemporaryDirectory(prefix="kvspec-proofs-") as tmp:
        fresh = certificate_path(system, Path(tmp))

        def fix(value: Any) -> Any:
            if isinstance(value, str):
                return value.replace(str(fresh), str(stored)).replace(tmp, str(proofs_dir))
            if isinstance(value, dict):
                return {k: fix(v) for k, v in value.items()}
            if isinstance(value, list):
                return [fix(v) for v in value]
            return value

        yield Path(tmp), fix
        if save_proof and fresh.is_file() and stored.is_file():
            shutil.copyfile(fresh, stored)


def run_engine(system: System, engine: str = "auto", *, depth: int = 30,
               timeout: float | None = None, max_states: int | None = None,
               symmetry: bool = True, save_proof: bool = False,
               proofs_dir: Path | None = None, progress: ProgressFn | None = None,
               search: Search | None = None) -> EngineOutcome:
    """One engine's outcome; ``proofs_dir`` is used as given (see :func:`run`; None:
    the model's proofs directory)."""
    search = search or Search()
    progress = progress or _silent
    if proofs_dir is None:
        from kvspec.proofs.location import default_proofs_dir
        proofs_dir = default_proofs_dir(system.loaded.path)
    if engine == "explicit":
        from kvspec.engines.explicit import Limits, explore
        out = explore(system, backend=search.backend, symmetry=symmetry,
                      limits=Limits(max_states, timeout), progress=progress,
                      stop_at_first=search.stop_at_first, fingerprint=search.fingerprint,
                      workers=search.workers, dfs=search.dfs, warn=search.warn)
        return EngineOutcome(out.verdicts, out.stats, "explicit", out.coverage)
    if engine == "bmc":
        from kvspec.engines.bmc import run_bmc
        return run_bmc(system, depth=depth, timeout=timeout, progress=progress,
                       symmetry=symmetry)
    if engine == "kind":
        from kvspec.engines.kind import run_kind
        return run_kind(system, max_k=depth, timeout=timeout, progress=progress,
                        symmetry=symmetry)
    if engine == "pdr":
        from kvspec.engines.pdr import run_pdr
        return run_pdr(system, timeout=timeout, save_proof=save_proof, proofs_dir=proofs_dir,
                       progress=progress, symmetry=symmetry, max_states=max_states)
    if engine == "all-sizes":
        from kvspec.proofs.parametric.engine import run_all_sizes
        return run_all_sizes(system, timeout=timeout, save_proof=save_proof,
                             proofs_dir=proofs_dir, progress=progress, symmetry=symmetry,
                             max_states=max_states)
    if engine != "auto":
        raise ValueError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    from kvspec.engines.auto import run_auto
    return run_auto(
        system, timeout=timeout, max_states=max_states, symmetry=symmetry,
        save_proof=save_proof, proofs_dir=proofs_dir, progress=progress,
        backend=search.backend if search.backend is not None else "python",
        warn=search.warn)


@stops_on_ctrl_c
def run(system: System, engine: str = "auto", *, depth: int = 30, timeout: float | None = None,
        max_states: int | None = None, symmetry: bool = True, save_proof: bool = False,
        proofs_dir: Path | None = None, progress: ProgressFn | None = None,
        warn: Callable[[str], None] | None = None, coverage: bool = True,
        search: Search | None = None) -> Result:
    """Verify every selected property of ``system`` with ``engine``. ``proofs_dir``:
    where certificates are read and written (None: the model's proofs directory, the
    same from any working directory). ``coverage=False`` skips the coverage report.
    ``search``: the explicit search's backend and modes (:class:`Search`)."""
    search = search or Search()
    if search.warn is None and warn is not None:
        search = replace(search, warn=warn)
    if proofs_dir is None:
        from kvspec.proofs.location import default_proofs_dir
        proofs_dir = default_proofs_dir(system.loaded.path)
    started = time.monotonic()
    calls = [0]

    def once(target: System) -> Result:
        # the first call checks every property; later ones (kvspec.engines.refine) only
        # re-decide counterexamples through a saturated in-flight count, at a larger bound
        calls[0] += 1
        first = calls[0] == 1
        left = timeout
        if timeout is not None and not first:
            left = max(timeout - (time.monotonic() - started), 0.001)
        with _usable_proofs_dir(target, engine, Path(proofs_dir), save_proof and first,
                                warn or (lambda _m: None)) as (usable, fix):
            outcome = run_engine(target, engine, depth=depth, timeout=left,
                                 max_states=max_states, symmetry=symmetry,
                                 save_proof=save_proof and first, proofs_dir=usable,
                                 progress=progress, search=search)
            for v in outcome.verdicts:
                v.detail = fix(v.detail)
            outcome.stats.extra = fix(outcome.stats.extra)
        return Result(target, outcome.engine or engine, outcome.verdicts, outcome.stats,
                      outcome.coverage)

    outcome = run_exact(system, once)
    cov = outcome.coverage
    if coverage and (cov is None or not cov.complete):
        # none recorded, or the search stopped early (e.g. once every property was
        # violated): a plain exploration within the runner's budget, kept if complete
        # or if it saw more states than the engine's
        fresh = _coverage(system, timeout, started, progress)
        if cov is None or (fresh is not None and (fresh.complete or fresh.states > cov.states)):
            cov = fresh
    return Result(system, outcome.engine or engine, outcome.verdicts, outcome.stats,
                  cov if coverage else None)


def _coverage(system: System, timeout: float | None, started: float,
              progress: ProgressFn | None) -> Coverage | None:
    """Coverage after an engine that does not record it: an exploration within
    ``RUNNER_MAX_STATES`` states, ``RUNNER_MAX_SECONDS`` and what is left of ``timeout``
    (None when nothing is)."""
    left = RUNNER_MAX_SECONDS if timeout is None else \
        min(RUNNER_MAX_SECONDS, timeout - (time.monotonic() - started))
    if left <= 0:
        return None
    if progress is not None:
        progress(0, 0, time.monotonic() - started, "coverage")
    return coverage_of(system, max_states=RUNNER_MAX_STATES, timeout=left)


@stops_on_ctrl_c
def fuzz(system: System, *, max_examples: int = 200, steps: int = 50, seed: int = 0,
         timeout: float | None = None) -> Result:
    """Randomised exploration with shrinking (Hypothesis); a counterexample through a
    saturated in-flight count is re-decided like :func:`run`'s."""
    from kvspec.engines.fuzz import run_fuzz

    def once(target: System) -> Result:
        outcome = run_fuzz(target, max_examples=max_examples, steps=steps, seed=seed,
                           timeout=timeout)
        return Result(target, "fuzz", outcome.verdicts, outcome.stats)

    result = run_exact(system, once)
    return Result(system, "fuzz", result.verdicts, result.stats)
