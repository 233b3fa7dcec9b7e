"""Type rules of the model language: joins, intervals, and what may be stored where."""
from __future__ import annotations

from typing import Any

from kvspec.lang import ir
from kvspec.lang.types import BoolType, EnumType, IntType, RefType, ValueType


def of_value_type(t: ValueType) -> Any:
    """The IR type of a declared state/parameter type."""
    if isinstance(t, BoolType):
        return ir.BOOL
    if isinstance(t, IntType):
        return ir.IntT(t.lo, t.hi)
    if isinstance(t, EnumType):
        return ir.EnumT(t.cls)
    if isinstance(t, RefType):
        assert t.ref_dim is not None
        return ir.RefT(t.ref_dim, t.optional)
    raise TypeError(t)


def join(a: Any, b: Any) -> Any | None:
    """The type of a local that holds an ``a`` on one path and a ``b`` on another
    (None when they cannot be joined)."""
    if a == b:
        return a
    if isinstance(a, ir.IntT) and isinstance(b, ir.IntT):
        lo = None if a.lo is None or b.lo is None else min(a.lo, b.lo)
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        return ir.IntT(lo, hi)
    if isinstance(a, ir.RefT) and isinstance(b, ir.RefT) and a.dim == b.dim:
        return ir.RefT(a.dim, a.optional or b.optional)
    if isinstance(a, ir.NoneT) and isinstance(b, ir.RefT):
        return ir.RefT(b.dim, True)
    if isinstance(b, ir.NoneT) and isinstance(a, ir.RefT):
        return ir.RefT(a.dim, True)
    return None


def widen(t: Any) -> Any:
    return ir.INT if isinstance(t, ir.IntT) else t


def interval(t: Any, counts: dict[str, int]) -> tuple[int | None, int | None]:
    """Bounds of an int-valued type (ids count as ints 0..n-1, -1 if optional)."""
    if isinstance(t, ir.IntT):
        return t.lo, t.hi
    if isinstance(t, ir.RefT):
        return (-1 if t.optional else 0), counts.get(t.dim, 0) - 1
    return None, None


def _combine(op: str, a: tuple[int | None, int | None], b: tuple[int | None, int | None]
             ) -> tuple[int | None, int | None]:
    if None in a or None in b:
        if op == "%" and b[0] is not None and b[0] >= 1 and b[1] is not None:
            return 0, b[1] - 1
        return None, None
    alo, ahi = a  # type: ignore[misc]
    blo, bhi = b  # type: ignore[misc]
    if op == "+":
        return alo + blo, ahi + bhi
    if op == "-":
        return alo - bhi, ahi - blo
    if op == "*":
        prods = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(prods), max(prods)
    if op == "//":  # divisor >= 1
        cands = [alo // blo, alo // bhi, ahi // blo, ahi // bhi]
        return min(cands), max(cands)
    if op == "%":
        return 0, bhi - 1
    return None, None


def arith_type(op: str, a: Any, b: Any, counts: dict[str, int]) -> ir.IntT:
    lo, hi = _combine(op, interval(a, counts), interval(b, counts))
    return ir.IntT(lo, hi)


def within(t: Any, lo: int, hi: int, counts: dict[str, int]) -> bool:
    """Every value of ``t`` lies in lo..hi."""
    tlo, thi = interval(t, counts)
    return tlo is not None and thi is not None and lo <= tlo and thi <= hi


def const_type(value: Any) -> Any:
    if isinstance(value, bool):
        return ir.BOOL
    if isinstance(value, int):
        return ir.IntT(value, value)
    if value is None:
        return ir.NONE
    raise TypeError(value)
