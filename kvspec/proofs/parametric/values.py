"""The values of the parametric interpretation: id sorts, vectors, counts, and the
error for constructs outside the fragment (:mod:`kvspec.proofs.parametric.encode`)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from kvspec.lang import ir
from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import VarInfo
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST, ValueType
from kvspec.lang.z3gen import FALSE, TRUE, is_false, is_true

#: the largest bounded range a count may be compared with (counting quantifiers
#: with up to this many witnesses)
MAX_COUNT = 8

class Unsupported(Exception):
    """A construct outside the parametric fragment; ``where`` is ``file:line``."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.where = where
        self.why = why


def where_of(fn: ir.Function | None, line: int) -> str:
    if fn is None:
        return "<model>"
    return f"{fn.file}:{line or fn.line}"


class _None:
    """The literal ``None`` before its sort is known."""


NONE = _None()


@dataclass
class Vec:
    """A vector over one id space: element term -> value term."""

    dim: str
    at: Callable[[z3.ExprRef], Any]


@dataclass
class Count:
    """``mask.count()``, kept symbolic until it is compared."""

    mask: Vec
    line: int


@dataclass
class Sorts:
    """The id sorts, their ``None`` elements and fresh-name counters."""

    sort: dict[str, z3.SortRef] = field(default_factory=dict)
    nil: dict[str, z3.ExprRef] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)  # type: ignore[type-arg]

    @classmethod
    def make(cls) -> "Sorts":
        out = cls()
        for dim, name in ((REQUEST, "Request"), (PAGE, "Page")):
            s = z3.DeclareSort(name)
            out.sort[dim] = s
            out.nil[dim] = z3.Const(f"none_{dim}", s)
        return out

    def fresh(self, dim: str, hint: str = "x") -> z3.ExprRef:
        return z3.Const(f"{hint}!{next(self.counter)}", self.sort[dim])

    def of_type(self, t: ValueType) -> z3.SortRef:
        if t.kind == "bool":
            return z3.BoolSort()
        if t.kind == "ref":
            return self.sort[t.ref_dim or REQUEST]
        return z3.IntSort()

    def dim_of_sort(self, s: z3.SortRef) -> str | None:
        for dim, srt in self.sort.items():
            if srt == s:
                return dim
        return None

    def real(self, x: z3.ExprRef) -> z3.BoolRef:
        """``x`` is an id (not the None element of its sort)."""
        dim = self.dim_of_sort(x.sort())
        assert dim is not None
        return x != self.nil[dim]  # type: ignore[return-value]


def var_dims(v: VarInfo) -> tuple[str, ...]:
    if v.dim == SCALAR:
        return ()
    if v.dim == PAGE_BY_REQUEST:
        return (PAGE, REQUEST)
    return (v.dim,)


def exists(sorts: Sorts, xs: list[z3.ExprRef], body: z3.BoolRef) -> z3.BoolRef:
    if is_false(body):
        return FALSE
    return z3.Exists(xs, z3.And(*[sorts.real(x) for x in xs], body))


def forall(sorts: Sorts, xs: list[z3.ExprRef], body: z3.BoolRef) -> z3.BoolRef:
    if is_true(body):
        return TRUE
    return z3.ForAll(xs, z3.Implies(z3.And(*[sorts.real(x) for x in xs]), body))


def at_least(sorts: Sorts, mask: Vec, k: int) -> z3.BoolRef:
    """At least ``k`` distinct ids satisfy ``mask``."""
    if k <= 0:
        return TRUE
    xs = [sorts.fresh(mask.dim, "w") for _ in range(k)]
    parts = [mask.at(x) for x in xs]
    if k > 1:
        parts.append(z3.Distinct(*xs))
    return exists(sorts, xs, z3.And(*parts))


def int_range(t: z3.ExprRef, ranges: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
    """Bounds of an integer term built from constants, bounded state variables and
    parameters (None when they are not known)."""
    if z3.is_int_value(t):
        return t.as_long(), t.as_long()
    if z3.is_app(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        return ranges.get(t.decl().name())
    if z3.is_app_of(t, z3.Z3_OP_ITE):
        a, b = int_range(t.arg(1), ranges), int_range(t.arg(2), ranges)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    if z3.is_app_of(t, z3.Z3_OP_ADD) or z3.is_app_of(t, z3.Z3_OP_SUB):
        parts = [int_range(x, ranges) for x in t.children()]
        if any(p is None for p in parts):
            return None
        lo, hi = parts[0]  # type: ignore[misc]
        for p in parts[1:]:
            assert p is not None
            if z3.is_app_of(t, z3.Z3_OP_ADD):
                lo, hi = lo + p[0], hi + p[1]
            else:
                lo, hi = lo - p[1], hi - p[0]
        return lo, hi
    return None


#: variable name -> term (scalar) or callable(*ids) -> term (array)
View = dict[str, Any]
