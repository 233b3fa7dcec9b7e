"""The functions a model body calls: ``require``, ``emit``, ``violate`` and the
vector helpers. Each forwards to the interpretation that is running the body
(concrete or symbolic), so one body means the same in both.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from kvspec.lang.errors import ModelError
from kvspec.props.events import EVENT_KINDS


class Kernel(Protocol):
    def require(self, cond: Any, message: str | None) -> None: ...
    def emit(self, kind: str, request: Any, page: Any, pages: Any) -> None: ...
    def violate(self, prop: str, fmt: str, args: dict[str, Any]) -> None: ...
    def count(self, x: Any) -> Any: ...
    def any(self, x: Any) -> Any: ...
    def all(self, x: Any) -> Any: ...


_kernels: list[Kernel] = []


def push_kernel(kernel: Kernel) -> None:
    _kernels.append(kernel)


def pop_kernel() -> None:
    _kernels.pop()


def current() -> Kernel:
    if not _kernels:
        raise ModelError("model code called outside of a kvspec interpretation")
    return _kernels[-1]


def require(cond: Any, message: str | None = None) -> None:
    """The action is enabled only if ``cond`` holds (on the path that reaches here)."""
    _kernels[-1].require(cond, message)


class _Emitter:
    """``emit.read(r, p)``, ``emit.free(r, pages=mask)``: lifecycle events."""

    def __getattr__(self, kind: str) -> Callable[..., None]:
        if kind not in EVENT_KINDS:
            raise ModelError(f"unknown event kind {kind!r} (known: {', '.join(EVENT_KINDS)})")

        def fire(request: Any, page: Any = None, *, pages: Any = None) -> None:
            _kernels[-1].emit(kind, request, page, pages)

        fire.__name__ = kind
        return fire


emit = _Emitter()


def violate(prop: str, fmt: str, **args: Any) -> None:
    """Used by monitors: property ``prop`` fails here. ``fmt`` is formatted with
    ``args``; ``{x:req}`` prints a request id as ``r0``."""
    _kernels[-1].violate(prop, fmt, args)


def count(x: Any) -> Any:
    """Number of true elements of a mask."""
    return _kernels[-1].count(x)


def any_(x: Any) -> Any:
    """Some element of a mask is true."""
    return _kernels[-1].any(x)


def all_(x: Any) -> Any:
    """Every element of a mask is true."""
    return _kernels[-1].all(x)
