"""The Z3 encoding of state values, in one place so engines can rely on it: bools are Z3 Bools; bounded
ints, enum members (their index) and request/page references (their id, ``-1``
for None) are Z3 Ints. Flat per-element variables are used, no array theory,
which keeps transition formulas quantifier-free linear integer arithmetic that
Z3's BMC and Spacer handle well.
"""
from __future__ import annotations

from typing import Any

import z3

from kvspec.lang.types import ValueType


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
