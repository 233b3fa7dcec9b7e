"""The concrete interpretation: action bodies run as plain Python on plain values.

A :class:`ConcreteMachine` owns one state proxy (``s`` inside a body) whose
attribute views read from the current flat state tuple and copy it on the first
write. The explicit engine, the Hypothesis driver and replay all step models
through :meth:`ConcreteMachine.step`.
"""
from __future__ import annotations

import string
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from kvspec.lang.declare import SCALAR
from kvspec.lang.fastpath import DISABLED
from kvspec.lang.errors import ModelError, current_location, model_error_from
from kvspec.lang.runtime import pop_kernel, push_kernel
from kvspec.lang.schema import Schema, State, VarInfo
from kvspec.lang.types import REQUEST
from kvspec.props.events import EVENT_KINDS, Event


class Disabled(Exception):
    """Raised by ``require`` when the guard fails: the action instance is disabled."""


_DISABLED = Disabled()


class Mask:
    """A vector of bools over requests or pages (the result of ``s.owner == r``)."""

    __slots__ = ("bits",)

    def __init__(self, bits: tuple[bool, ...]) -> None:
        self.bits = bits

    def __and__(self, other: Any) -> "Mask":
        o = _bits(other, len(self.bits))
        return Mask(tuple(a and b for a, b in zip(self.bits, o)))

    __rand__ = __and__

    def __or__(self, other: Any) -> "Mask":
        o = _bits(other, len(self.bits))
        return Mask(tuple(a or b for a, b in zip(self.bits, o)))

    __ror__ = __or__

    def __invert__(self) -> "Mask":
        return Mask(tuple(not a for a in self.bits))

    def __bool__(self) -> bool:
        raise ModelError("the truth value of a mask is ambiguous; use .any(), .all() or .count()")

    def __iter__(self) -> Iterator[bool]:
        return iter(self.bits)

    def __len__(self) -> int:
        return len(self.bits)

    def __getitem__(self, i: int) -> bool:
        return self.bits[i]

    def any(self) -> bool:
        return True in self.bits

    def all(self) -> bool:
        return False not in self.bits

    def count(self) -> int:
        return sum(self.bits)

    def __repr__(self) -> str:
        return "Mask(" + "".join("1" if b else "0" for b in self.bits) + ")"


def _bits(other: Any, n: int) -> tuple[bool, ...]:
    if isinstance(other, Mask):
        if len(other.bits) != n:
            raise ModelError("masks over different id spaces cannot be combined")
        return other.bits
    if isinstance(other, bool):
        return (other,) * n
    raise ModelError(f"cannot combine a mask with {other!r}")


class _Store:
    __slots__ = ("data", "mut", "machine")

    def __init__(self, machine: "ConcreteMachine") -> None:
        self.data: Any = ()
        self.mut = False
        self.machine = machine

    def write(self, index: int, value: Any) -> None:
        if not self.mut:
            self.data = list(self.data)
            self.mut = True
        self.data[index] = value


class ArrayView:
    """``s.owner``: a per-request or per-page variable seen by a model body."""

    __slots__ = ("store", "off", "n", "info", "dec", "enc")

    def __init__(self, store: _Store, info: VarInfo) -> None:
        self.store = store
        self.off = info.offset
        self.n = info.length
        self.info = info
        kind = info.type.kind
        self.dec: Callable[[Any], Any] | None = None if kind in ("bool", "int") else info.type.decode
        self.enc = info.type.encode

    def __getitem__(self, i: Any) -> Any:
        if i.__class__ is int and 0 <= i < self.n:
            x = self.store.data[self.off + i]
            return x if self.dec is None else self.dec(x)
        raise self.store.machine.error(f"{self.info.name}[{i!r}]: index out of range 0..{self.n - 1}")

    def __setitem__(self, i: Any, value: Any) -> None:
        if isinstance(i, Mask):
            if len(i.bits) != self.n:
                raise self.store.machine.error(f"{self.info.name}[mask]: mask has the wrong length")
            x = self._encode(value)
            for k, bit in enumerate(i.bits):
                if bit:
                    self.store.write(self.off + k, x)
            return
        if i.__class__ is not int or not 0 <= i < self.n:
            raise self.store.machine.error(
                f"write {self.info.name}[{i!r}]: index out of range 0..{self.n - 1}")
        self.store.write(self.off + i, self._encode(value, i))

    def _encode(self, value: Any, index: int | None = None) -> Any:
        try:
            return self.enc(value)
        except ValueError as exc:
            where = self.info.name if index is None else self.info.label(index)
            raise self.store.machine.error(f"write {where} = {value!r}: {exc}") from None

    def _cmp(self, value: Any) -> tuple[Any, ...]:
        data = self.store.data[self.off:self.off + self.n]
        return tuple(data) if self.dec is None else tuple(self.dec(x) for x in data)

    def __eq__(self, value: Any) -> Mask:  # type: ignore[override]
        return Mask(tuple(x == value for x in self._cmp(value)))

    def __ne__(self, value: Any) -> Mask:  # type: ignore[override]
        return Mask(tuple(x != value for x in self._cmp(value)))

    def __lt__(self, value: Any) -> Mask:
        return Mask(tuple(x < value for x in self._cmp(value)))

    def __le__(self, value: Any) -> Mask:
        return Mask(tuple(x <= value for x in self._cmp(value)))

    def __gt__(self, value: Any) -> Mask:
        return Mask(tuple(x > value for x in self._cmp(value)))

    def __ge__(self, value: Any) -> Mask:
        return Mask(tuple(x >= value for x in self._cmp(value)))

    def is_none(self) -> Mask:
        return self == None  # noqa: E711

    def count(self, value: Any) -> int:
        return sum(1 for x in self._cmp(value) if x == value)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cmp(None))

    def __len__(self) -> int:
        return self.n

    __hash__ = None  # type: ignore[assignment]


def _scalar_property(info: VarInfo) -> property:
    off = info.offset
    dec = None if info.type.kind in ("bool", "int") else info.type.decode
    enc = info.type.encode

    def get(self: Any) -> Any:
        x = self._kv_store.data[off]
        return x if dec is None else dec(x)

    def put(self: Any, value: Any) -> None:
        try:
            x = enc(value)
        except ValueError as exc:
            raise self._kv_store.machine.error(f"write {info.name} = {value!r}: {exc}") from None
        self._kv_store.write(off, x)

    return property(get, put)


class _ReasonFormatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "req":
            return "None" if value is None else f"r{value}"
        return super().format_field(value, format_spec)


_FORMATTER = _ReasonFormatter()


class ConcreteMachine:
    """Runs action bodies, monitor handlers and invariants on concrete states."""

    def __init__(self, schema: Schema, files: set[str],
                 handlers: dict[str, list[Callable[..., None]]],
                 flags: dict[str, int]) -> None:
        self.schema = schema
        self.files = files
        self.handlers = handlers
        self.flags = flags  # property -> offset of its violation flag
        self.store = _Store(self)
        namespace: dict[str, Any] = {"__slots__": ("_kv_store",) + tuple(
            v.name for v in schema.vars if v.dim != SCALAR)}
        for v in schema.vars:
            if v.dim == SCALAR:
                namespace[v.name] = _scalar_property(v)
        for name, value in schema.sizes.items():
            if name not in namespace:
                namespace[name] = value
        namespace["requests"] = range(schema.requests)
        namespace["pages"] = range(schema.pages)
        known = ", ".join(v.name for v in schema.vars if v.owner == "model")

        def missing(self: Any, name: str) -> Any:
            raise ModelError(f"unknown state variable {name!r} (the model declares: {known})")

        namespace["__getattr__"] = missing
        proxy_cls = type("State", (), namespace)
        self.proxy = proxy_cls()
        self.proxy._kv_store = self.store
        for v in schema.vars:
            if v.dim != SCALAR:
                setattr(self.proxy, v.name, ArrayView(self.store, v))
        self.events: list[Event] = []
        self.violations: list[tuple[str, str, Event | None]] = []
        self.current_event: Event | None = None
        self.active = False

    # -- kernel protocol -------------------------------------------------
    def require(self, cond: Any, message: str | None) -> None:
        if not cond:
            raise _DISABLED

    def emit(self, kind: str, request: Any, page: Any, pages: Any) -> None:
        R = self.schema.requests
        if request.__class__ is not int or not 0 <= request < R:
            raise self.error(f"emit.{kind}: request {request!r} is not a request id")
        needs_page = EVENT_KINDS[kind]
        if pages is not None:
            if not needs_page:
                raise self.error(f"emit.{kind}: this event takes no pages")
            if not isinstance(pages, Mask) or len(pages.bits) != self.schema.pages:
                raise self.error(f"emit.{kind}: pages= must be a mask over pages")
            for p, bit in enumerate(pages.bits):
                if bit:
                    self.events.append(Event(kind, request, p))
            return
        if needs_page:
            if page.__class__ is not int or not 0 <= page < self.schema.pages:
                raise self.error(f"emit.{kind}: page {page!r} is not a page id")
            self.events.append(Event(kind, request, page))
        else:
            if page is not None:
                raise self.error(f"emit.{kind}: this event takes no page")
            self.events.append(Event(kind, request, None))

    def violate(self, prop: str, fmt: str, args: dict[str, Any]) -> None:
        off = self.flags.get(prop)
        if off is None:
            return
        self.store.write(off, True)
        self.violations.append((prop, _FORMATTER.format(fmt, **args), self.current_event))

    def count(self, x: Any) -> Any:
        if isinstance(x, Mask):
            return x.count()
        return sum(1 for b in x if b)

    def any(self, x: Any) -> Any:
        return x.any() if isinstance(x, Mask) else any(x)

    def all(self, x: Any) -> Any:
        return x.all() if isinstance(x, Mask) else all(x)

    def error(self, message: str) -> ModelError:
        file, line = current_location(self.files)
        return ModelError(message, file, line)

    # -- stepping ----------------------------------------------------------
    def step(self, state: State, fn: Callable[..., None], args: tuple[Any, ...]
             ) -> tuple[State, list[Event], list[tuple[str, str, Event | None]]] | None:
        """Run one action instance. None when disabled; else the successor, the
        events it emitted and the property violations those events caused."""
        if not self.active:
            with self.session():
                return self.step(state, fn, args)
        store = self.store
        store.data = state
        store.mut = False
        self.events = []
        self.violations = []
        try:
            if fn(self.proxy, *args) is DISABLED:
                return None
            if self.events:
                self._dispatch()
        except Disabled:
            _DISABLED.__traceback__ = None
            return None
        except ModelError as exc:
            raise model_error_from(exc, self.files) from None
        except RecursionError:
            raise
        except Exception as exc:  # a bug in the model body
            raise model_error_from(exc, self.files) from None
        return (tuple(store.data) if store.mut else state), self.events, self.violations

    def guard(self, state: State, fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
        """Evaluate a hoisted guard; True when it holds or cannot be decided here
        (the full instance then runs and reports any error)."""
        store = self.store
        store.data = state
        store.mut = False
        try:
            return bool(fn(self.proxy, *args))
        except Exception:
            return True

    @contextmanager
    def session(self) -> Iterator[None]:
        """Make this machine the running interpretation for many steps."""
        push_kernel(self)
        self.active = True
        try:
            yield
        finally:
            self.active = False
            pop_kernel()

    def _dispatch(self) -> None:
        for ev in self.events:
            self.current_event = ev
            for handler in self.handlers.get(ev.kind, ()):
                if ev.page is None:
                    handler(self.proxy, ev.request)
                else:
                    handler(self.proxy, ev.request, ev.page)

    def evaluate(self, state: State, fn: Callable[..., Any]) -> Any:
        """Evaluate a read-only function (an invariant) on a state."""
        store = self.store
        store.data = state
        store.mut = False
        push_kernel(self)
        try:
            return fn(self.proxy)
        except Exception as exc:
            raise model_error_from(exc, self.files) from None
        finally:
            pop_kernel()
            if store.mut:
                raise self.error("an invariant must not change the state")

    def is_request_var(self, info: VarInfo) -> bool:
        return info.dim == REQUEST
