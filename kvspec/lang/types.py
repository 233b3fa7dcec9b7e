"""Value types of model state and action parameters.

Every value is stored in a flat state tuple in an *internal* form: bools as
``bool``, bounded ints as ``int``, enum members as their index, request and page
references as their id with ``-1`` for an empty optional reference. Each type
converts between the internal form, the Python value a model sees, and JSON.
"""
from __future__ import annotations

import enum
import types as pytypes
import typing
from dataclasses import dataclass
from typing import Any, Callable, Union

from kvspec.lang.errors import ModelError

REQUEST = "request"
PAGE = "page"
#: a two-dimensional (page, request) array, laid out row by row: slot p * R + r
PAGE_BY_REQUEST = "page*request"


class Request(int):
    """Annotation for an action parameter (or state value) that is a request id."""


class Page(int):
    """Annotation for an action parameter (or state value) that is a page id."""


Bound = Union[int, str, Callable[[dict[str, int]], int]]


class SizeView(dict):  # type: ignore[type-arg]
    """The resolved sizes as a function of the sizes sees them (a derived size's, an
    ``Int`` bound's): ``sz.pages`` or ``sz["pages"]``."""

    def __getattr__(self, name: str) -> int:
        try:
            return self[name]  # type: ignore[no-any-return]
        except KeyError:
            raise AttributeError(f"no size named {name!r} (declared before it: "
                                 f"{', '.join(self) or 'none'})") from None


def resolve_bound(bound: Bound, sizes: dict[str, int], what: str) -> int:
    """A bound is an int, the name of a size parameter, or a function of the sizes."""
    if isinstance(bound, bool):
        raise ModelError(f"{what}: bound must be an int, not a bool")
    if isinstance(bound, int):
        return bound
    if isinstance(bound, str):
        if bound not in sizes:
            raise ModelError(f"{what}: unknown size parameter {bound!r} (known: {', '.join(sizes)})")
        return sizes[bound]
    if callable(bound):
        try:
            value = bound(SizeView(sizes))
        except Exception as exc:  # noqa: BLE001 - the model's own function: report it
            raise ModelError(f"{what}: bound function failed: {type(exc).__name__}: "
                             f"{exc}") from None
        if not isinstance(value, int) or isinstance(value, bool):
            raise ModelError(f"{what}: bound function returned {value!r}, not an int")
        return value
    raise ModelError(f"{what}: bound must be an int, a size name or a function of the sizes")


@dataclass(frozen=True)
class Int:
    """A bounded integer type ``lo..hi`` (inclusive); bounds may name size parameters."""

    lo: Bound
    hi: Bound


@dataclass(frozen=True)
class OptionalRef:
    """A request or page reference that may be empty (``None``)."""

    dim: str


@dataclass(frozen=True, eq=False)
class IndexRef:
    """The type "an id of a declared index space" (``ranks.id``, ``ranks.optional``);
    it holds the space itself, which learns its name when the model class is made."""

    space: Any
    optional: bool

    @property
    def dim(self) -> str | None:
        return self.space.dim  # type: ignore[no-any-return]


#: the id spaces whose ids are interchangeable (candidates for symmetry reduction)
SYMMETRIC_DIMS = (REQUEST, PAGE)


def axes_of(dim: str) -> tuple[str, ...]:
    """The id spaces a variable of dimension ``dim`` is indexed by, outermost first
    (``"request*ranks"`` -> ``("request", "ranks")``)."""
    return tuple(dim.split("*"))


def id_text(dim: str, i: int) -> str:
    """How id ``i`` of ``dim`` is written in traces: ``r0``, ``page 1``, ``ranks 1``."""
    if dim == REQUEST:
        return f"r{i}"
    return f"{dim} {i}"


class ValueType:
    """A resolved finite type."""

    kind: str = ""
    optional: bool = False
    ref_dim: str | None = None  # REQUEST / PAGE for references

    def domain(self) -> list[Any]:
        """All internal values."""
        raise NotImplementedError

    def encode(self, value: Any) -> Any:
        """Python value -> internal value (raises ValueError when out of type)."""
        raise NotImplementedError

    def decode(self, internal: Any) -> Any:
        """Internal value -> Python value a model sees."""
        return internal

    def to_json(self, internal: Any) -> Any:
        return internal

    def from_json(self, value: Any) -> Any:
        return self.encode(value)

    def describe(self) -> str:
        return self.kind

    def fmt(self, internal: Any) -> str:
        """Short text for traces."""
        value = self.to_json(internal)
        if value is None:
            return "None"
        return str(value)


class BoolType(ValueType):
    kind = "bool"

    def domain(self) -> list[Any]:
        return [False, True]

    def encode(self, value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, enum.Enum) or value is None:
            raise ValueError(f"{value!r} is not a bool")
        if value in (0, 1):
            return bool(value)
        raise ValueError(f"{value!r} is not a bool")


class IntType(ValueType):
    kind = "int"

    def __init__(self, lo: int, hi: int) -> None:
        self.lo = lo
        self.hi = hi

    def domain(self) -> list[Any]:
        return list(range(self.lo, self.hi + 1))

    def encode(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not an int")
        if not self.lo <= value <= self.hi:
            raise ValueError(f"{value} is outside {self.lo}..{self.hi}")
        return int(value)

    def describe(self) -> str:
        return f"int {self.lo}..{self.hi}"


class EnumType(ValueType):
    kind = "enum"

    def __init__(self, cls: type[enum.Enum]) -> None:
        self.cls = cls
        self.members: tuple[enum.Enum, ...] = tuple(cls)
        self.index = {m: i for i, m in enumerate(self.members)}

    def domain(self) -> list[Any]:
        return list(range(len(self.members)))

    def encode(self, value: Any) -> Any:
        try:
            return self.index[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a {self.cls.__name__}") from None

    def decode(self, internal: Any) -> Any:
        return self.members[internal]

    def to_json(self, internal: Any) -> Any:
        return self.members[internal].name

    def from_json(self, value: Any) -> Any:
        try:
            return self.index[self.cls[value]]
        except KeyError:
            raise ValueError(f"{value!r} is not a {self.cls.__name__}") from None

    def describe(self) -> str:
        return f"enum {self.cls.__name__}"


class RefType(ValueType):
    """A request or page id, optionally empty."""

    kind = "ref"

    def __init__(self, dim: str, count: int, optional: bool) -> None:
        self.ref_dim = dim
        self.count = count
        self.optional = optional

    def domain(self) -> list[Any]:
        ids = list(range(self.count))
        return ([-1] + ids) if self.optional else ids

    def encode(self, value: Any) -> Any:
        if value is None:
            if self.optional:
                return -1
            raise ValueError(f"None is not a {self.ref_dim} id (declare the type optional)")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not a {self.ref_dim} id")
        if not 0 <= value < self.count:
            raise ValueError(f"{self.ref_dim} id {value} is outside 0..{self.count - 1}")
        return int(value)

    def decode(self, internal: Any) -> Any:
        return None if internal < 0 else internal

    def to_json(self, internal: Any) -> Any:
        if internal < 0:
            return None
        return f"r{internal}" if self.ref_dim == REQUEST else internal

    def from_json(self, value: Any) -> Any:
        if value is None:
            return self.encode(None)
        if self.ref_dim == REQUEST and isinstance(value, str) and value.startswith("r"):
            value = int(value[1:])
        return self.encode(value)

    def describe(self) -> str:
        return f"{self.ref_dim}?" if self.optional else self.ref_dim

    def fmt(self, internal: Any) -> str:
        if internal < 0:
            return "None"
        assert self.ref_dim is not None
        return id_text(self.ref_dim, internal)


def resolve_type(spec: Any, sizes: dict[str, int], counts: dict[str, int], what: str) -> ValueType:
    """Resolve a declared type (``bool``, ``Int(..)``, an Enum class, ``Request``,
    ``Page``, ``Request | None``, ``requests.optional``) against the sizes."""
    if spec is bool:
        return BoolType()
    if isinstance(spec, Int):
        lo = resolve_bound(spec.lo, sizes, what)
        hi = resolve_bound(spec.hi, sizes, what)
        if lo > hi:
            raise ModelError(f"{what}: empty int range {lo}..{hi}")
        return IntType(lo, hi)
    if isinstance(spec, type) and issubclass(spec, enum.Enum):
        if not list(spec):
            raise ModelError(f"{what}: enum {spec.__name__} has no members")
        return EnumType(spec)
    if spec is Request:
        return RefType(REQUEST, counts[REQUEST], optional=False)
    if spec is Page:
        return RefType(PAGE, counts[PAGE], optional=False)
    if isinstance(spec, OptionalRef):
        return RefType(spec.dim, counts[spec.dim], optional=True)
    if isinstance(spec, IndexRef):
        if spec.dim is None or spec.dim not in counts:
            raise ModelError(f"{what}: the index space is not declared in the model class")
        return RefType(spec.dim, counts[spec.dim], optional=spec.optional)
    args = _optional_args(spec)
    if args is not None:
        if args is Request:
            return RefType(REQUEST, counts[REQUEST], optional=True)
        if args is Page:
            return RefType(PAGE, counts[PAGE], optional=True)
    if spec is int:
        raise ModelError(f"{what}: plain int is unbounded; use Int(lo, hi)")
    raise ModelError(
        f"{what}: unsupported type {spec!r}; use bool, Int(lo, hi), an Enum, Request, Page, "
        "Request | None, an index space's ids (ranks.id) or ranks.optional"
    )


def _optional_args(spec: Any) -> Any:
    """``X | None`` / ``Optional[X]`` -> X, else None."""
    origin = typing.get_origin(spec)
    if origin is Union or (hasattr(pytypes, "UnionType") and isinstance(spec, pytypes.UnionType)):
        args = [a for a in typing.get_args(spec) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(spec)) == 2:
            return args[0]
    return None
