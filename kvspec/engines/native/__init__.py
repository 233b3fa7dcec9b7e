"""The native backend of the explicit engine: the model compiled to C.

:func:`run_native` is what :func:`kvspec.engines.explicit.explore` calls for
``backend="native"`` (or None: native when a C compiler is present): the same
breadth-first search with the transition system lowered to C by :mod:`.codegen`,
compiled by :mod:`.build` and run by :mod:`.run`. It answers None — the Python search
then runs, and ``warn`` gets one line — when there is no C compiler or the model uses
something the lowering does not support. Both backends give the same states,
verdicts and counterexamples (``tests/test_native.py``).
"""
from __future__ import annotations

from typing import Callable

from kvspec.engines.explicit import Deadline, ExplicitOutcome, Limits, ProgressFn
from kvspec.engines.native.build import BuildError, find_compiler
from kvspec.engines.native.terms import Unsupported
from kvspec.lang.system import System

__all__ = ["BACKENDS", "available", "default_backend", "run_native"]

BACKENDS = ("native", "python")


def available() -> bool:
    """A C compiler is present (the native backend can build)."""
    return find_compiler() is not None


def default_backend() -> str:
    return "native" if available() else "python"


def run_native(system: System, backend: str | None, *, symmetry: bool = True,
               limits: Limits | None = None, progress: ProgressFn | None = None,
               deadline: Deadline | None = None, coverage: bool = True,
               stop_at_first: bool = False, fingerprint: bool = False, workers: int = 1,
               dfs: bool = False,
               warn: Callable[[str], None] | None = None) -> ExplicitOutcome | None:
    """The native search, or None when the Python search must run instead."""
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
    if backend == "python":
        return None
    if not available():
        if warn is not None:
            warn("no C compiler found (cc, gcc or clang; or set CC); using the Python "
                 "explicit engine")
        return None
    from kvspec.engines.native.run import explore_native
    try:
        return explore_native(system, symmetry=symmetry, limits=limits, progress=progress,
                              deadline=deadline, coverage=coverage, stop_at_first=stop_at_first,
                              fingerprint=fingerprint, workers=workers, dfs=dfs)
    except (BuildError, Unsupported) as exc:
        if warn is not None:
            first = str(exc).splitlines()[0]
            warn(f"native backend unavailable ({first}); using the Python explicit engine")
        return None
