"""Symbolic values: Z3 terms tagged with the model type they encode.

Encoding (one place, so engines can rely on it): bools are Z3 Bools; bounded
ints, enum members (their index) and request/page references (their id, ``-1``
for None) are Z3 Ints. Flat per-element variables are used, no array theory,
which keeps transition formulas quantifier-free linear integer arithmetic that
Z3's BMC and Spacer handle well.
"""
from __future__ import annotations

import enum
from typing import Any, Iterator

import z3

from kvspec.lang.errors import ModelError
from kvspec.lang.types import BoolType, EnumType, IntType, RefType, ValueType

BOOL = BoolType()
INT = IntType(-(2**31), 2**31 - 1)  # an unconstrained arithmetic result


def z3_var(name: str, vtype: ValueType) -> z3.ExprRef:
    return z3.Bool(name) if vtype.kind == "bool" else z3.Int(name)


def z3_const(vtype: ValueType, internal: Any) -> z3.ExprRef:
    return z3.BoolVal(bool(internal)) if vtype.kind == "bool" else z3.IntVal(int(internal))


def domain_constraint(expr: z3.ExprRef, vtype: ValueType) -> z3.BoolRef:
    """The values an encoded variable of this type may take."""
    if vtype.kind == "bool":
        return z3.BoolVal(True)
    values = vtype.domain()
    return z3.And(expr >= min(values), expr <= max(values))


def from_z3(vtype: ValueType, value: z3.ExprRef) -> Any:
    """A Z3 model value -> internal value."""
    if vtype.kind == "bool":
        return z3.is_true(value)
    return value.as_long()


class Sym:
    """A symbolic value: a Z3 expression and the model type it encodes."""

    __slots__ = ("e", "t")

    def __init__(self, e: z3.ExprRef, t: ValueType) -> None:
        self.e = e
        self.t = t

    def __bool__(self) -> bool:
        raise ModelError("a state-dependent value is used where Python needs a plain bool "
                         "(e.g. in a comprehension `if`, `while`, or a call into non-model code); "
                         "write it as if/else, a mask operation, or require(...)")

    def __index__(self) -> int:
        raise ModelError("a state-dependent value cannot be used as a Python index here")

    def __hash__(self) -> int:
        return id(self)

    def _num(self) -> z3.ArithRef:
        if self.t.kind not in ("int", "ref"):
            raise ModelError(f"arithmetic on a {self.t.describe()} value is not supported")
        return self.e  # type: ignore[return-value]

    def __add__(self, o: Any) -> "Sym":
        return Sym(self._num() + as_int(o), INT)

    def __radd__(self, o: Any) -> "Sym":
        return Sym(as_int(o) + self._num(), INT)

    def __sub__(self, o: Any) -> "Sym":
        return Sym(self._num() - as_int(o), INT)

    def __rsub__(self, o: Any) -> "Sym":
        return Sym(as_int(o) - self._num(), INT)

    def __mul__(self, o: Any) -> "Sym":
        return Sym(self._num() * as_int(o), INT)

    def __rmul__(self, o: Any) -> "Sym":
        return Sym(as_int(o) * self._num(), INT)

    def __neg__(self) -> "Sym":
        return Sym(-self._num(), INT)

    def __floordiv__(self, o: Any) -> "Sym":
        if isinstance(o, int) and o > 0:
            return Sym(self._num() / o, INT)  # Z3 Int division floors for positive divisors
        raise ModelError("only division by a positive constant is supported")

    def __mod__(self, o: Any) -> "Sym":
        if isinstance(o, int) and o > 0:
            return Sym(self._num() % o, INT)
        raise ModelError("only modulo by a positive constant is supported")

    def __repr__(self) -> str:
        return f"Sym({self.e}: {self.t.describe()})"


def as_int(o: Any) -> z3.ArithRef:
    if isinstance(o, Sym):
        return o._num()
    if isinstance(o, bool) or not isinstance(o, int):
        raise ModelError(f"cannot do arithmetic with {o!r}")
    return z3.IntVal(o)


def as_bool(x: Any) -> z3.BoolRef:
    """Truth value of x as a Z3 Bool (x is a Sym or a Python value)."""
    if isinstance(x, Sym):
        if x.t.kind == "bool":
            return x.e  # type: ignore[return-value]
        if x.t.kind == "int":
            return x.e != 0  # type: ignore[return-value]
        raise ModelError(f"a {x.t.describe()} value has no truth value; compare it explicitly")
    if isinstance(x, SymMask):
        bool(x)  # raises the ambiguity error
    return z3.BoolVal(bool(x))


def encode_like(value: Any, vtype: ValueType) -> z3.ExprRef:
    """Encode a Python or symbolic value as a term of ``vtype``'s encoding."""
    if isinstance(value, Sym):
        if vtype.kind == "bool" and value.t.kind != "bool":
            raise ModelError(f"expected a bool, got a {value.t.describe()} value")
        if vtype.kind != "bool" and value.t.kind == "bool":
            raise ModelError(f"expected a {vtype.describe()}, got a bool")
        if isinstance(vtype, EnumType) and value.t is not vtype and not (
                isinstance(value.t, EnumType) and value.t.cls is vtype.cls):
            raise ModelError(f"expected a {vtype.describe()}, got a {value.t.describe()} value")
        return value.e
    return z3_const(vtype, vtype.encode(value))


def type_of_python(value: Any) -> ValueType | None:
    """The type a Python constant suggests (None when it fits any reference)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, enum.Enum):
        return EnumType(type(value))
    if isinstance(value, int):
        return INT
    return None


class _OptRef(RefType):
    """A merged value that may be an id or None, of unknown id space."""

    def __init__(self) -> None:
        super().__init__("ref", 2**31 - 1, optional=True)


OPT_REF = _OptRef()


def to_sym(value: Any, like: ValueType | None = None) -> Sym:
    """Wrap a Python constant (or pass a Sym through)."""
    if isinstance(value, Sym):
        return value
    vtype = like
    if vtype is None:
        vtype = type_of_python(value)
        if vtype is None:
            if value is None:
                vtype = OPT_REF
            else:
                raise ModelError(f"{value!r} cannot be used as a model value")
    if value is None:
        return Sym(z3.IntVal(-1), vtype)
    if isinstance(vtype, (RefType,)) and not isinstance(value, bool) and isinstance(value, int):
        return Sym(z3.IntVal(value), vtype)
    if vtype is INT:
        return Sym(z3.IntVal(int(value)), INT)
    return Sym(z3_const(vtype, vtype.encode(value)), vtype)


class SymMask:
    """A vector of symbolic bools over requests or pages."""

    __slots__ = ("bits",)

    def __init__(self, bits: list[z3.BoolRef]) -> None:
        self.bits = bits

    def _other(self, other: Any) -> list[z3.BoolRef]:
        if isinstance(other, SymMask):
            if len(other.bits) != len(self.bits):
                raise ModelError("masks over different id spaces cannot be combined")
            return other.bits
        return [as_bool(other)] * len(self.bits)

    def __and__(self, other: Any) -> "SymMask":
        return SymMask([z3.And(a, b) for a, b in zip(self.bits, self._other(other))])

    __rand__ = __and__

    def __or__(self, other: Any) -> "SymMask":
        return SymMask([z3.Or(a, b) for a, b in zip(self.bits, self._other(other))])

    __ror__ = __or__

    def __invert__(self) -> "SymMask":
        return SymMask([z3.Not(a) for a in self.bits])

    def __bool__(self) -> bool:
        raise ModelError("the truth value of a mask is ambiguous; use .any(), .all() or .count()")

    def __len__(self) -> int:
        return len(self.bits)

    def __iter__(self) -> Iterator[Sym]:
        return iter(Sym(b, BOOL) for b in self.bits)

    def __getitem__(self, i: int) -> Sym:
        return Sym(self.bits[i], BOOL)

    def any(self) -> Sym:
        return Sym(z3.Or(*self.bits) if self.bits else z3.BoolVal(False), BOOL)

    def all(self) -> Sym:
        return Sym(z3.And(*self.bits) if self.bits else z3.BoolVal(True), BOOL)

    def count(self) -> Sym:
        if not self.bits:
            return Sym(z3.IntVal(0), INT)
        return Sym(z3.Sum([z3.If(b, 1, 0) for b in self.bits]), INT)
