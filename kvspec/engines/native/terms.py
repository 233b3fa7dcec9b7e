"""Integer-encoded Z3 terms -> C expressions, with common-subexpression elimination.

The terms are those of :mod:`kvspec.engines.transition` over the current-state
variables (one per slot, read from the unpacked state ``s[]``); a slot the layout
folds to a constant becomes its literal. A subterm used more than once in a block
of code is computed once into a local; every other subterm is written inline.
Every operation is total in C over the values the model can take (division only by
positive constants, the interval analysis of the bit-vector encoding allows no
more), so evaluating a term never has side effects or undefined behaviour.
"""
from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import z3

from kvspec.engines.native.layout import Layout


class Unsupported(Exception):
    """A term the native backend cannot lower (the Python engine runs instead)."""


_INFIX = {z3.Z3_OP_LE: "<=", z3.Z3_OP_LT: "<", z3.Z3_OP_GE: ">=", z3.Z3_OP_GT: ">",
          z3.Z3_OP_EQ: "==", z3.Z3_OP_IFF: "==", z3.Z3_OP_XOR: "!=",
          z3.Z3_OP_ADD: "+", z3.Z3_OP_SUB: "-", z3.Z3_OP_MUL: "*",
          z3.Z3_OP_AND: "&&", z3.Z3_OP_OR: "||"}


def literal(v: int) -> str:
    if v == -(2 ** 63):
        return "INT64_MIN"
    return f"INT64_C({v})" if v >= 0 else f"(-INT64_C({-v}))"


class Lowering:
    """Writes C for the terms of one block (an action instance, the invariants)."""

    def __init__(self, slot_of: dict[str, int], layout: Layout) -> None:
        self.slot_of = slot_of
        self.layout = layout
        self.refs: Counter[int] = Counter()
        self.temps: dict[int, str] = {}
        self.lines: list[str] = []
        self.indent = 1
        self._counter = 0

    # -- block structure -------------------------------------------------------------
    def begin(self, roots: Iterable[z3.ExprRef]) -> None:
        """A new block over ``roots``: count how often each subterm is used."""
        self.refs = Counter()
        self.temps = {}
        seen: set[int] = set()
        stack = list(roots)
        for r in stack:
            self.refs[r.get_id()] += 1
        while stack:
            e = stack.pop()
            key = e.get_id()
            if key in seen:
                continue
            seen.add(key)
            for c in e.children():
                self.refs[c.get_id()] += 1
                stack.append(c)

    @contextmanager
    def nested(self) -> Iterator[None]:
        """Locals written inside stay inside (a C block)."""
        saved = dict(self.temps)
        self.indent += 1
        try:
            yield
        finally:
            self.indent -= 1
            self.temps = saved

    def put(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    # -- expressions -------------------------------------------------------------------
    def expr(self, e: z3.ExprRef) -> str:
        if sys.getrecursionlimit() < 20000:
            sys.setrecursionlimit(20000)
        return self._expr(e)

    def _expr(self, e: z3.ExprRef) -> str:
        key = e.get_id()
        hit = self.temps.get(key)
        if hit is not None:
            return hit
        text = self._build(e)
        if self.refs[key] > 1 and e.num_args() > 0:
            self._counter += 1
            name = f"t{self._counter}"
            self.put(f"const int64_t {name} = {text};")
            self.temps[key] = name
            return name
        return text

    def _build(self, e: z3.ExprRef) -> str:
        if z3.is_int_value(e):
            return literal(e.as_long())
        if z3.is_true(e):
            return "1"
        if z3.is_false(e):
            return "0"
        n = e.num_args()
        if n == 0:
            name = e.decl().name()
            slot = self.slot_of.get(name)
            if slot is None or e.decl().kind() != z3.Z3_OP_UNINTERPRETED:
                raise Unsupported(f"unknown constant {name}")
            const = self.layout.slots[slot].const
            return literal(const) if const is not None else f"s[{slot}]"
        op = e.decl().kind()
        args = [self._expr(c) for c in e.children()]
        if op in _INFIX and (n >= 2 or op in (z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_ADD)):
            if n > 2 and op in (z3.Z3_OP_LE, z3.Z3_OP_LT, z3.Z3_OP_GE, z3.Z3_OP_GT,
                                z3.Z3_OP_EQ, z3.Z3_OP_IFF, z3.Z3_OP_XOR):
                raise Unsupported(f"{n}-ary {e.decl().name()}")
            return "(" + f" {_INFIX[op]} ".join(args) + ")"
        if op == z3.Z3_OP_NOT:
            return f"(!{args[0]})"
        if op == z3.Z3_OP_UMINUS:
            return f"(-{args[0]})"
        if op == z3.Z3_OP_IMPLIES:
            return f"(!{args[0]} || {args[1]})"
        if op == z3.Z3_OP_ITE:
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if op == z3.Z3_OP_DISTINCT:
            pairs = [f"({a} != {b})" for i, a in enumerate(args) for b in args[i + 1:]]
            return "(" + " && ".join(pairs) + ")"
        if op in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            d = e.arg(1)
            if not z3.is_int_value(d) or d.as_long() <= 0:
                raise Unsupported(f"division by a non-constant in {e}")
            fn = "kv_fdiv" if op == z3.Z3_OP_IDIV else "kv_fmod"
            return f"{fn}({args[0]}, {args[1]})"
        raise Unsupported(f"operation {e.decl().name()}")
