"""The native backend of the explicit engine: the model compiled to C.

:func:`explore` runs the breadth-first search of
:func:`kvspec.engines.explicit.explore` on the chosen backend — ``native`` (the
transition system lowered to C by :mod:`.codegen`, compiled by :mod:`.build`, run by
:mod:`.run`) or ``python`` — and falls back to the Python search, with one line
through ``warn``, when there is no C compiler or the model uses something the
lowering does not support. Both backends give the same states, verdicts and
counterexamples (``tests/test_native*.py``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from kvspec.engines.explicit import Deadline, ExplicitOutcome, Limits, ProgressFn
from kvspec.engines.explicit import explore as explore_python
from kvspec.engines.native.build import BuildError, find_compiler
from kvspec.engines.native.terms import Unsupported
from kvspec.lang.system import System

__all__ = ["BACKENDS", "available", "default_backend", "explore"]

BACKENDS = ("native", "python")


def available() -> bool:
    """A C compiler is present (the native backend can build)."""
    return find_compiler() is not None


def default_backend() -> str:
    return "native" if available() else "python"


def explore(system: System, *, backend: str | None = None, symmetry: bool = True,
            limits: Limits | None = None, progress: ProgressFn | None = None,
            deadline: Deadline | None = None, coverage: bool = True,
            stop_at_first: bool = False, fingerprint: bool = False,
            warn: Callable[[str], None] | None = None, cache: Path | None = None
            ) -> ExplicitOutcome:
    """The explicit search on ``backend`` (None: native when a compiler is present).
    ``stop_at_first``: stop at the first violation of any property (still a shortest
    one for it); ``fingerprint``: 64-bit hash compaction (native only)."""
    chosen = backend or default_backend()
    if backend is None and chosen == "python" and warn is not None:
        warn("no C compiler found (cc, gcc or clang; or set CC); using the Python explicit "
             "engine")
    if chosen not in BACKENDS:
        raise ValueError(f"unknown backend {chosen!r} (one of {', '.join(BACKENDS)})")
    if chosen == "native":
        from kvspec.engines.native.run import explore_native
        try:
            return explore_native(system, symmetry=symmetry, limits=limits, progress=progress,
                                  deadline=deadline, coverage=coverage,
                                  stop_at_first=stop_at_first, fingerprint=fingerprint,
                                  cache=cache)
        except (BuildError, Unsupported) as exc:
            if warn is not None:
                first = str(exc).splitlines()[0]
                warn(f"native backend unavailable ({first}); using the Python explicit engine")
    out = explore_python(system, symmetry=symmetry, limits=limits, progress=progress,
                         deadline=deadline, coverage=coverage, stop_at_first=stop_at_first)
    out.stats.extra["explicit"]["backend"] = "python"
    return out
