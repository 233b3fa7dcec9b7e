"""Run one engine on a compiled model: the dispatch shared by ``kvspec verify``,
``kvspec check``, the pytest plugin and :mod:`kvspec.testing`, so that all of them
mean the same by a verdict.

``run`` also looks after the stored certificate ``auto`` re-checks: one that is not a
certificate at all (a directory, not JSON, fields of the wrong types) is ignored with a
warning and never decides a verdict.
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from kvspec.lang.system import System
from kvspec.trace import DocumentError, load_json_document
from kvspec.verdict import EngineOutcome, Result

__all__ = ["CERT_FORMAT", "ENGINES", "certificate_problem", "load_certificate", "run",
           "run_engine"]

ENGINES = ("auto", "explicit", "bmc", "kind", "pdr")
CERT_FORMAT = "kvspec-proof/1"
ProgressFn = Callable[..., None]


def _silent(*_: Any) -> None:
    return None


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
               proofs_dir: Path = Path("proofs"), progress: ProgressFn | None = None
               ) -> EngineOutcome:
    """One engine's outcome; ``proofs_dir`` is used as given (see :func:`run`)."""
    progress = progress or _silent
    if engine == "explicit":
        from kvspec.engines.explicit import Limits, explore
        out = explore(system, symmetry=symmetry, limits=Limits(max_states, timeout),
                      progress=progress)
        return EngineOutcome(out.verdicts, out.stats, "explicit")
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
    if engine != "auto":
        raise ValueError(f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    from kvspec.engines.auto import run_auto
    return run_auto(system, timeout=timeout, max_states=max_states, symmetry=symmetry,
                    save_proof=save_proof, proofs_dir=proofs_dir, progress=progress)


def run(system: System, engine: str = "auto", *, depth: int = 30, timeout: float | None = None,
        max_states: int | None = None, symmetry: bool = True, save_proof: bool = False,
        proofs_dir: Path = Path("proofs"), progress: ProgressFn | None = None,
        warn: Callable[[str], None] | None = None) -> Result:
    """Verify every selected property of ``system`` with ``engine``."""
    with _usable_proofs_dir(system, engine, Path(proofs_dir), save_proof,
                            warn or (lambda _m: None)) as (usable, fix):
        outcome = run_engine(system, engine, depth=depth, timeout=timeout,
                             max_states=max_states, symmetry=symmetry, save_proof=save_proof,
                             proofs_dir=usable, progress=progress)
        for v in outcome.verdicts:
            v.detail = fix(v.detail)
        outcome.stats.extra = fix(outcome.stats.extra)
    return Result(system, outcome.engine or engine, outcome.verdicts, outcome.stats)
