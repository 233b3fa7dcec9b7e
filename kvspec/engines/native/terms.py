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

from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import z3

from kvspec.engines.native.layout import Layout
from kvspec.proofs.smt_check import deep_terms


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


Node = tuple[int, tuple[Any, ...], Any]  # operation, argument ASTs, leaf value (number/name)
_NUM, _CONST = -1, -2


class Lowering:
    """Writes C for the terms of one block (an action instance, the invariants).

    Terms are walked through Z3's C API directly (the Python wrappers cost more than
    the rest of the build); a term's sub-ASTs stay alive as long as the caller holds
    the term, which it must for the whole block (:meth:`begin` to the last
    :meth:`expr`)."""

    def __init__(self, slot_of: dict[str, int], layout: Layout) -> None:
        self.slot_of = slot_of
        self.layout = layout
        self.refs: Counter[int] = Counter()
        self.temps: dict[int, str] = {}
        self.lines: list[str] = []
        self.indent = 1
        self._counter = 0
        self._nodes: dict[int, Node] = {}
        self._ctx: Any = None
        #: the largest literal seen and whether a product occurs: see :meth:`may_overflow`
        self.largest = 0
        self.products = False

    # -- the terms through the C API -----------------------------------------------------
    def _node(self, a: Any) -> tuple[int, Node]:
        # a term's address names it while it is alive (Z3 shares equal terms), as its
        # id does, and costs no call
        key = a.value
        hit = self._nodes.get(key)
        if hit is not None:
            return key, hit
        ctx = self._ctx
        kind = z3.Z3_get_ast_kind(ctx, a)
        if kind == z3.Z3_NUMERAL_AST:
            node: Node = (_NUM, (), int(z3.Z3_get_numeral_string(ctx, a)))
            self.largest = max(self.largest, abs(node[2]))
        elif kind != z3.Z3_APP_AST:
            raise Unsupported("a quantified or non-ground term")
        else:
            d = z3.Z3_get_app_decl(ctx, a)
            op = z3.Z3_get_decl_kind(ctx, d)
            n = z3.Z3_get_app_num_args(ctx, a)
            if n == 0 and op == z3.Z3_OP_UNINTERPRETED:
                name = z3.Z3_get_symbol_string(ctx, z3.Z3_get_decl_name(ctx, d))
                node = (_CONST, (), name)
            elif n == 0 and op in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
                node = (_NUM, (), int(op == z3.Z3_OP_TRUE))
            else:
                node = (op, tuple(z3.Z3_get_app_arg(ctx, a, i) for i in range(n)), None)
                self.products = self.products or op == z3.Z3_OP_MUL
        self._nodes[key] = node
        return key, node

    # -- block structure -------------------------------------------------------------
    def begin(self, roots: Iterable[z3.ExprRef]) -> None:
        """A new block over ``roots``: count how often each subterm is used."""
        self.refs = Counter()
        self.temps = {}
        self._nodes = {}  # Z3 reuses freed terms' ids and memory: nothing is kept across blocks
        seen: set[int] = set()
        stack = []
        for r in roots:
            self._ctx = r.ctx.ref()
            stack.append(r.as_ast())
            self.refs[self._node(stack[-1])[0]] += 1
        while stack:
            key, (_, args, _) = self._node(stack.pop())
            if key in seen:
                continue
            seen.add(key)
            for c in args:
                self.refs[self._node(c)[0]] += 1
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
        self._ctx = e.ctx.ref()
        with deep_terms():  # deep terms, the recursion limit restored after
            return self._expr(e.as_ast())

    def _expr(self, a: Any) -> str:
        key, node = self._node(a)
        hit = self.temps.get(key)
        if hit is not None:
            return hit
        text = self._build(node)
        if self.refs[key] > 1 and node[1]:
            self._counter += 1
            name = f"t{self._counter}"
            self.put(f"const int64_t {name} = {text};")
            self.temps[key] = name
            return name
        return text

    def _build(self, node: Node) -> str:
        op, kids, leaf = node
        if op == _NUM:
            return literal(leaf)
        if op == _CONST:
            slot = self.slot_of.get(leaf)
            if slot is None:
                raise Unsupported(f"unknown constant {leaf}")
            const = self.layout.slots[slot].const
            return literal(const) if const is not None else f"s[{slot}]"
        n = len(kids)
        if op == z3.Z3_OP_ITE:
            # a choice of 1 or 0 on a condition (a mask counted) is the condition: truth
            # values are 0 or 1 in C
            then, other = self._node(kids[1])[1], self._node(kids[2])[1]
            if then[0] == _NUM and other[0] == _NUM and {then[2], other[2]} == {0, 1}:
                cond = self._expr(kids[0])
                return cond if then[2] == 1 else f"(!{cond})"
        if op in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            d = self._node(kids[1])[1]
            if d[0] != _NUM or d[2] <= 0:
                raise Unsupported("division by a non-constant")
        args = [self._expr(c) for c in kids]
        if op in _INFIX and (n >= 2 or op in (z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_ADD)):
            if n > 2 and op in (z3.Z3_OP_LE, z3.Z3_OP_LT, z3.Z3_OP_GE, z3.Z3_OP_GT,
                                z3.Z3_OP_EQ, z3.Z3_OP_IFF, z3.Z3_OP_XOR):
                raise Unsupported(f"{n}-ary comparison")
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
            fn = "kv_fdiv" if op == z3.Z3_OP_IDIV else "kv_fmod"
            return f"{fn}({args[0]}, {args[1]})"
        raise Unsupported(f"Z3 operation {op}")
