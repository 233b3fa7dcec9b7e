"""The functions a model body calls: ``require``, ``emit``, ``violate`` and the
vector reductions. They are *markers*: the static checker recognises them in a
body and builds the IR (:mod:`kvspec.lang.ir`); they never run. Calling one
outside a body kvspec checks is a mistake and says so.
"""
from __future__ import annotations

from typing import Any, Callable

from kvspec.lang.errors import ModelError
from kvspec.props.events import EVENT_KINDS


def _outside(name: str) -> ModelError:
    return ModelError(f"{name}(...) only has a meaning inside a model body checked by kvspec "
                      "(an @action, @invariant or a function they call)")


def require(cond: Any, message: str | None = None) -> None:
    """The action is enabled only if ``cond`` holds (on the path that reaches here)."""
    raise _outside("require")


class _Emitter:
    """``emit.read(r, p)``, ``emit.free(r, pages=mask)``: lifecycle events."""

    def __getattr__(self, kind: str) -> Callable[..., None]:
        if kind.startswith("__"):
            raise AttributeError(kind)
        if kind not in EVENT_KINDS:
            raise ModelError(f"unknown event kind {kind!r} (known: {', '.join(EVENT_KINDS)})")

        def fire(*args: Any, **kwargs: Any) -> None:
            raise _outside(f"emit.{kind}")

        fire.__name__ = kind
        return fire


emit = _Emitter()


def violate(prop: str, fmt: str, **args: Any) -> None:
    """Used by monitors: property ``prop`` fails here. ``fmt`` is formatted with
    ``args``; ``{x:req}`` prints a request id as ``r0``."""
    raise _outside("violate")


def count(x: Any) -> Any:
    """Number of true elements of a mask."""
    raise _outside("count")


def any_(x: Any) -> Any:
    """Some element of a mask is true."""
    raise _outside("any_")


def all_(x: Any) -> Any:
    """Every element of a mask is true."""
    raise _outside("all_")
