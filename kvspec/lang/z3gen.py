"""The symbolic interpretation: IR -> Z3 terms by guarded updates.

Running an action's IR from current-state terms gives its *transition*: the
enabledness condition, one next-value term per slot, the guarded events and
the model-error conditions. Every ``if`` runs both branches under their
conditions and merges locals with if-then-else, ``return``/``break``/
``continue`` clear "still running" flags, loops unroll over their static
domain, helpers run inline under the caller's guard — so a loop over P pages
with an ``if`` inside gives O(P) terms. Each construct means exactly what the
generated Python of :mod:`kvspec.lang.pygen` does.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import z3
from z3.z3 import _to_expr_ref

from kvspec.lang import ir
from kvspec.lang.schema import Schema

TRUE = z3.BoolVal(True)
FALSE = z3.BoolVal(False)
_TRUE_PTR = TRUE.ast.value
_FALSE_PTR = FALSE.ast.value


def is_true(a: z3.ExprRef) -> bool:
    return a.ast.value == _TRUE_PTR  # type: ignore[no-any-return]


def is_false(a: z3.ExprRef) -> bool:
    return a.ast.value == _FALSE_PTR  # type: ignore[no-any-return]


def _mk2(fn: Callable[..., Any], a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    ctx = a.ctx
    arr = (z3.Ast * 2)(a.as_ast(), b.as_ast())
    return z3.BoolRef(fn(ctx.ref(), 2, arr), ctx)


def and_(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    if is_true(a):
        return b
    if is_true(b):
        return a
    if is_false(a) or is_false(b):
        return FALSE
    return _mk2(z3.Z3_mk_and, a, b)


def or_(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    if is_false(a):
        return b
    if is_false(b):
        return a
    if is_true(a) or is_true(b):
        return TRUE
    return _mk2(z3.Z3_mk_or, a, b)


def not_(a: z3.BoolRef) -> z3.BoolRef:
    if is_true(a):
        return FALSE
    if is_false(a):
        return TRUE
    ctx = a.ctx
    return z3.BoolRef(z3.Z3_mk_not(ctx.ref(), a.as_ast()), ctx)


def ite(c: z3.BoolRef, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    if is_true(c) or a.ast.value == b.ast.value:
        return a
    if is_false(c):
        return b
    ctx = a.ctx
    made = z3.Z3_mk_ite(ctx.ref(), c.as_ast(), a.as_ast(), b.as_ast())
    # an if-then-else is never a numeral: its wrapper is that of its branches' sort
    if isinstance(a, z3.BoolRef):
        return z3.BoolRef(made, ctx)
    if isinstance(a, z3.ArithRef):
        return z3.ArithRef(made, ctx)
    return _to_expr_ref(made, ctx)


# The constructors below build exactly the terms the z3 operators build (the same
# C API call on the same arguments; Z3 shares equal terms, so the results are the
# very same ASTs) without the wrappers' sort coercions: the symbolic interpretation
# builds tens of thousands of terms per model. Anything that is not two Int terms
# (or two Bool terms) goes through the z3 operator.

#: the value of each numeral :func:`int_val` made, by address (kept alive here, so
#: that no other term can take the address)
_VALUES: dict[int, tuple[int, z3.IntNumRef]] = {}


@functools.lru_cache(maxsize=4096)
def int_val(v: int) -> z3.IntNumRef:
    """``z3.IntVal(v)`` (shared: Z3 gives equal numerals one AST anyway)."""
    made = z3.IntVal(v)
    _VALUES[made.ast.value] = (v, made)
    return made


def _ints(a: Any, b: Any) -> bool:
    return isinstance(a, z3.ArithRef) and isinstance(b, z3.ArithRef)


def _bools(a: Any, b: Any) -> bool:
    return isinstance(a, z3.BoolRef) and isinstance(b, z3.BoolRef)


_CMP = {"<=": z3.Z3_mk_le, "<": z3.Z3_mk_lt, ">=": z3.Z3_mk_ge, ">": z3.Z3_mk_gt}


_REFLECTED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def compare(op: str, a: Any, b: Any) -> z3.BoolRef:
    """``a <op> b`` as the z3 operator builds it. As Python does, a right operand of a
    subclass of the left one's type (a numeral against a term) runs its reflected
    method: ``t == 0`` builds ``0 == t``."""
    ta, tb = type(a), type(b)
    if ta is not tb and issubclass(tb, ta):
        a, b, op = b, a, _REFLECTED[op]
    return compare_as_is(op, a, b)


def compare_as_is(op: str, a: Any, b: Any) -> z3.BoolRef:
    """``a <op> b`` with ``a`` on the left (``t == 0`` written with a Python int)."""
    if op in ("==", "!=") and (_ints(a, b) or _bools(a, b)):
        ctx = a.ctx
        if op == "==":
            return z3.BoolRef(z3.Z3_mk_eq(ctx.ref(), a.as_ast(), b.as_ast()), ctx)
        return _mk2(z3.Z3_mk_distinct, a, b)
    fn = _CMP.get(op)
    if fn is not None and _ints(a, b):
        ctx = a.ctx
        return z3.BoolRef(fn(ctx.ref(), a.as_ast(), b.as_ast()), ctx)
    return {"==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b,  # type: ignore
            "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b}[op]()


_NARY = {"+": z3.Z3_mk_add, "-": z3.Z3_mk_sub, "*": z3.Z3_mk_mul}


def arith(op: str, a: Any, b: Any) -> Any:
    """``a + b``, ``a - b``, ``a * b``, ``a / b`` (``//``), ``a % b`` as the z3
    operators build them."""
    if not _ints(a, b):
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                "//": lambda: a / b, "%": lambda: a % b}[op]()
    ctx = a.ctx
    fn = _NARY.get(op)
    # (an application, never a numeral: Z3 folds nothing when it builds a term)
    if fn is not None:
        arr = (z3.Ast * 2)(a.as_ast(), b.as_ast())
        return z3.ArithRef(fn(ctx.ref(), 2, arr), ctx)
    if op == "//":
        return z3.ArithRef(z3.Z3_mk_div(ctx.ref(), a.as_ast(), b.as_ast()), ctx)
    return z3.ArithRef(z3.Z3_mk_mod(ctx.ref(), a.as_ast(), b.as_ast()), ctx)


def if_int(c: z3.BoolRef, a: z3.ArithRef, b: z3.ArithRef) -> z3.ExprRef:
    """``z3.If(c, a, b)`` (no shortcut: unlike :func:`ite`, the term is always built)."""
    ctx = a.ctx
    return z3.ArithRef(z3.Z3_mk_ite(ctx.ref(), c.as_ast(), a.as_ast(), b.as_ast()), ctx)


def sum_(terms: list[z3.ArithRef]) -> z3.ExprRef:
    """``z3.Sum(terms)`` of Int terms (``0`` for none)."""
    if not terms:
        return int_val(0)
    if not all(isinstance(t, z3.ArithRef) for t in terms):
        return z3.Sum(terms)
    ctx = terms[0].ctx
    arr = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
    return _to_expr_ref(z3.Z3_mk_add(ctx.ref(), len(terms), arr), ctx)


def int_value(x: Any) -> int | None:
    """The value of an Int numeral term (``z3.is_int_value``), else None."""
    if not isinstance(x, z3.ArithRef):
        return None
    known = _VALUES.get(x.ast.value)
    if known is not None:
        return known[0]
    ctx, a = x.ctx_ref(), x.as_ast()
    if z3.Z3_is_numeral_ast(ctx, a) and \
            z3.Z3_get_sort_kind(ctx, z3.Z3_get_sort(ctx, a)) == z3.Z3_INT_SORT:
        return int(z3.Z3_get_numeral_string(ctx, a))
    return None


def encode_if(f: Any, c: z3.BoolRef, block: Callable[[list[ir.Stmt]], None], st: ir.If,
              merge_values: Callable[[Any, Any], Any]) -> None:
    """Both branches of ``st`` run under their guards (``c``, ``not c``) on frame ``f``
    (its ``env`` of local values, ``push``/``pop`` of guards); afterwards each local
    is the value of the side that assigned it, or both merged. The symbolic and the
    parametric interpretation share it, each with its own value merge."""
    before = dict(f.env)
    f.push(c)
    block(st.body)
    f.pop()
    then_env = f.env
    f.env = dict(before)
    f.push(not_(c))
    block(st.orelse)
    f.pop()
    else_env = f.env
    merged: dict[str, Any] = {}
    for name in set(then_env) | set(else_env):
        a, b = then_env.get(name), else_env.get(name)
        merged[name] = a if b is None else b if a is None else (
            a if a is b else merge_values(a, b))
    f.env = merged


def merge(c: z3.BoolRef, a: Any, b: Any) -> Any:
    if isinstance(a, list):
        return [ite(c, x, y) for x, y in zip(a, b)]
    return ite(c, a, b)


def const(e: ir.Const) -> z3.ExprRef:
    if isinstance(e.ty, ir.BoolT):
        return TRUE if e.value else FALSE
    return int_val(int(e.value))


@dataclass
class SymEvent:
    guard: z3.BoolRef
    kind: str
    request: z3.ExprRef
    page: z3.ExprRef | None


@dataclass
class StepEncoding:
    """A symbolic step: enabled ⇒ next slots; errors are model-error conditions."""

    enabled: z3.BoolRef
    next: list[z3.ExprRef]
    errors: list[tuple[z3.BoolRef, str]] = field(default_factory=list)
    events: list[SymEvent] = field(default_factory=list)
    violations: dict[str, z3.BoolRef] = field(default_factory=dict)
    #: every slot the step reads or writes (a superset of the slots whose variables
    #: its terms mention)
    reads: set[int] = field(default_factory=set)


class _Frame:
    def __init__(self, entry: z3.BoolRef) -> None:
        self.conds: list[z3.BoolRef] = [entry]
        self.alive: z3.BoolRef = TRUE
        self.loops: list[list[z3.BoolRef]] = []
        self.env: dict[str, Any] = {}
        self.result: Any = None
        self.g = entry

    def refresh(self) -> None:
        g = TRUE
        for c in self.conds:
            g = and_(g, c)
        self.g = and_(g, self.running())

    def running(self) -> z3.BoolRef:
        r = self.alive
        for brk, cont in self.loops:
            r = and_(and_(r, brk), cont)
        return r

    def push(self, c: z3.BoolRef) -> None:
        self.conds.append(c)
        self.g = and_(self.g, c)

    def pop(self) -> None:
        self.conds.pop()
        self.refresh()


class SymExec:
    """Runs IR functions on Z3 terms for one schema."""

    def __init__(self, schema: Schema, flags: dict[str, int]) -> None:
        self.schema = schema
        self.flags = flags
        self.slots: list[z3.ExprRef] = []
        self.enabled: z3.BoolRef = TRUE
        self.errors: list[tuple[z3.BoolRef, str]] = []
        self.events: list[SymEvent] = []
        self.violations: dict[str, z3.BoolRef] = {}
        self.frames: list[_Frame] = []
        #: the slots read or written since the last run_step/evaluate
        self.reads: set[int] = set()

    # -- running ---------------------------------------------------------------------
    def run_step(self, current: list[z3.ExprRef], action: ir.Function, args: tuple[Any, ...],
                 handlers: dict[str, list[ir.Function]]) -> StepEncoding:
        self.slots = list(current)
        self.enabled = TRUE
        self.errors = []
        self.events = []
        self.violations = {}
        self.frames = []
        self.reads = set()
        values = [(TRUE if a else FALSE) if isinstance(t, ir.BoolT) else int_val(int(a))
                  for a, (_, t) in zip(args, action.value_params)]
        self.call(action, values, TRUE)
        for ev in list(self.events):
            for h in handlers.get(ev.kind, ()):
                vals = [ev.request] if len(h.value_params) == 1 else [ev.request, ev.page]
                self.call(h, vals, ev.guard)
        for prop, viol in self.violations.items():
            off = self.flags.get(prop)
            if off is not None:
                self.reads.add(off)
                self.slots[off] = or_(self.slots[off], viol)
        return StepEncoding(self.enabled, self.slots, self.errors, self.events, self.violations,
                            self.reads)

    def evaluate(self, current: list[z3.ExprRef], fn: ir.Function
                 ) -> tuple[z3.BoolRef, list[tuple[z3.BoolRef, str]]]:
        """An invariant's value on ``current`` and its model-error conditions."""
        self.slots = list(current)
        self.enabled = TRUE
        self.errors = []
        self.frames = []
        self.reads = set()
        value = self.call(fn, [], TRUE)
        return value, list(self.errors)

    def call(self, fn: ir.Function, values: list[Any], entry: z3.BoolRef) -> Any:
        frame = _Frame(entry)
        names = [n for n, t in fn.params if not isinstance(t, (ir.StateT, ir.VecT))]
        for name, v in zip(names, values):
            frame.env[name] = v
        self.frames.append(frame)
        try:
            self.block(fn.body, fn)
        finally:
            self.frames.pop()
        if frame.result is None and fn.ret is not None:
            return _default(fn.ret, self.schema)  # the call is unreachable on every path
        return frame.result

    # -- helpers -------------------------------------------------------------------------
    @property
    def f(self) -> _Frame:
        return self.frames[-1]

    def check(self, ok: z3.BoolRef, message: str, fn: ir.Function, line: int) -> None:
        bad = and_(and_(self.enabled, self.f.g), not_(ok))
        if not is_false(bad):
            self.errors.append((bad, f"{fn.file}:{line}: {message}"))

    def in_range(self, x: z3.ExprRef, lo: int, hi: int) -> z3.BoolRef:
        return _mk2(z3.Z3_mk_and, compare_as_is(">=", x, int_val(lo)),
                    compare_as_is("<=", x, int_val(hi)))

    # -- statements ---------------------------------------------------------------------
    def block(self, body: list[ir.Stmt], fn: ir.Function) -> None:
        for st in body:
            if is_false(self.f.g):
                return
            self.stmt(st, fn)

    def stmt(self, st: ir.Stmt, fn: ir.Function) -> None:  # noqa: C901 - one case per node
        f = self.f
        if isinstance(st, ir.Assign):
            values = [self.ex(v, fn) for v in st.values]
            running = f.running()
            for name, v in zip(st.names, values):
                old = f.env.get(name)
                f.env[name] = v if old is None or is_true(running) else merge(running, v, old)
        elif isinstance(st, ir.Store):
            var = st.var
            value = self.ex(st.value, fn)
            if st.check_value:
                lo, hi = min(var.type.domain()), max(var.type.domain())
                self.check(self.in_range(value, lo, hi),
                           f"write {var.name} = <value>: outside {lo}..{hi}", fn, st.line)
            if st.index is None:
                self.reads.add(var.offset)
                self.slots[var.offset] = ite(f.g, value, self.slots[var.offset])
                return
            idx = self.ex(st.index, fn)
            at = int_value(idx)
            if isinstance(st.index, ir.Arith) and at is None:
                idx = z3.simplify(idx)
                at = int_value(idx)
            if at is not None and 0 <= at < var.length:
                k = var.offset + at
                self.reads.add(k)
                self.slots[k] = ite(f.g, value, self.slots[k])
                return
            if st.check_index:
                self.check(self.in_range(idx, 0, var.length - 1),
                           f"write {var.name}[...]: index out of range 0..{var.length - 1}",
                           fn, st.line)
            self.reads.update(range(var.offset, var.offset + var.length))
            for k in range(var.length):
                slot = var.offset + k
                self.slots[slot] = ite(and_(f.g, compare_as_is("==", idx, int_val(k))), value,
                                       self.slots[slot])
        elif isinstance(st, ir.MaskStore):
            var = st.var
            mask = self.ex(st.mask, fn)
            value = self.ex(st.value, fn)
            if st.check_value:
                lo, hi = min(var.type.domain()), max(var.type.domain())
                self.check(self.in_range(value, lo, hi),
                           f"write {var.name}[mask] = <value>: outside {lo}..{hi}", fn, st.line)
            for k, bit in enumerate(mask):
                slot = var.offset + k
                self.reads.add(slot)
                self.slots[slot] = ite(and_(f.g, bit), value, self.slots[slot])
        elif isinstance(st, ir.Require):
            c = self.ex(st.cond, fn)
            self.enabled = and_(self.enabled, or_(not_(f.g), c))
        elif isinstance(st, ir.Emit):
            self.emit(st, fn)
        elif isinstance(st, ir.Violate):
            self.violations[st.prop] = or_(self.violations.get(st.prop, FALSE), f.g)
        elif isinstance(st, ir.If):
            c = self.ex(st.test, fn)
            encode_if(f, c, lambda body: self.block(body, fn), st,
                      lambda a, b: merge(c, a, b))
        elif isinstance(st, ir.For):
            f.loops.append([TRUE, TRUE])
            for v in st.domain.values:
                f.loops[-1][1] = TRUE
                f.refresh()
                if is_false(f.g):
                    break
                f.env[st.var] = int_val(v)
                self.block(st.body, fn)
            f.loops.pop()
            f.refresh()
        elif isinstance(st, ir.Break):
            f.loops[-1][0] = and_(f.loops[-1][0], not_(f.g))
            f.refresh()
        elif isinstance(st, ir.Continue):
            f.loops[-1][1] = and_(f.loops[-1][1], not_(f.g))
            f.refresh()
        elif isinstance(st, ir.Return):
            if st.value is not None:
                v = self.ex(st.value, fn)
                f.result = v if f.result is None else merge(f.g, v, f.result)
            f.alive = and_(f.alive, not_(f.g))
            f.refresh()
        elif isinstance(st, ir.Do):
            self.ex(st.expr, fn)
        else:
            raise TypeError(f"no encoding for {type(st).__name__}")

    def emit(self, st: ir.Emit, fn: ir.Function) -> None:
        g = self.f.g
        r = self.ex(st.request, fn)
        if st.check_request:
            self.check(self.in_range(r, 0, self.schema.requests - 1),
                       f"emit.{st.kind}: request is not a request id", fn, st.line)
        if st.pages is not None:
            for k, bit in enumerate(self.ex(st.pages, fn)):
                eg = and_(g, bit)
                if not is_false(eg):
                    self.events.append(SymEvent(eg, st.kind, r, int_val(k)))
            return
        p = None
        if st.page is not None:
            p = self.ex(st.page, fn)
            if st.check_page:
                self.check(self.in_range(p, 0, self.schema.pages - 1),
                           f"emit.{st.kind}: page is not a page id", fn, st.line)
        self.events.append(SymEvent(g, st.kind, r, p))

    # -- expressions --------------------------------------------------------------------
    def elems(self, e: ir.Expr, fn: ir.Function | None = None) -> list[z3.ExprRef]:
        if isinstance(e, ir.VecOf) and e.row is not None:
            assert fn is not None
            var = e.var
            fixed = 1 - e.along
            n, m = var.shape[e.along], var.shape[fixed]
            sf, sa = var.strides[fixed], var.strides[e.along]
            row = self.ex(e.row, fn)
            at = int_value(row)
            if at is not None:
                b = var.offset + sf * at
                self.reads.update(b + sa * k for k in range(n))
                return [self.slots[b + sa * k] for k in range(n)]
            self.reads.update(range(var.offset, var.offset + var.length))
            out = []
            for k in range(n):
                acc = self.slots[var.offset + (m - 1) * sf + k * sa]
                for p in range(m - 2, -1, -1):
                    acc = ite(compare_as_is("==", row, int_val(p)),
                              self.slots[var.offset + p * sf + k * sa], acc)
                out.append(acc)
            return out
        var = self.schema.by_name[e.ty.var]
        self.reads.update(range(var.offset, var.offset + var.length))
        return self.slots[var.offset:var.offset + var.length]

    def ex(self, e: ir.Expr, fn: ir.Function) -> Any:  # noqa: C901 - one case per node
        f = self.f
        if isinstance(e, ir.Const):
            return const(e)
        if isinstance(e, ir.Local):
            if isinstance(e.ty, ir.VecT):
                return self.elems(e)
            return f.env[e.name]
        if isinstance(e, ir.Load):
            var = e.var
            if e.index is None:
                self.reads.add(var.offset)
                return self.slots[var.offset]
            if isinstance(e.index, ir.Const):
                self.reads.add(var.offset + e.index.value)
                return self.slots[var.offset + e.index.value]
            idx = self.ex(e.index, fn)
            at = int_value(idx)
            if isinstance(e.index, ir.Arith) and at is None:
                idx = z3.simplify(idx)
                at = int_value(idx)
            if at is not None and 0 <= at < var.length:
                self.reads.add(var.offset + at)
                return self.slots[var.offset + at]
            self.reads.update(range(var.offset, var.offset + var.length))
            elems = self.slots[var.offset:var.offset + var.length]
            if e.check:
                self.check(self.in_range(idx, 0, var.length - 1),
                           f"{var.name}[...]: index out of range 0..{var.length - 1}", fn, e.line)
            acc = elems[-1]
            for k in range(len(elems) - 2, -1, -1):
                acc = ite(compare_as_is("==", idx, int_val(k)), elems[k], acc)
            return acc
        if isinstance(e, ir.VecOf):
            return self.elems(e, fn)
        if isinstance(e, ir.Uniform):
            n = self.schema.counts[e.ty.dim] if e.ty.dim in self.schema.counts else e.var.length
            return [const(ir.Const(e.value, ty=e.ty.elem))] * n
        if isinstance(e, ir.Unary):
            x = self.ex(e.x, fn)
            if e.op == "not":
                return not_(x)
            if e.op == "neg":
                return _to_expr_ref(z3.Z3_mk_unary_minus(x.ctx_ref(), x.as_ast()), x.ctx) \
                    if isinstance(x, z3.ArithRef) else -x
            return [not_(b) for b in x]
        if isinstance(e, ir.Arith):
            # Z3 integer division floors for a positive divisor
            return arith(e.op, self.ex(e.a, fn), self.ex(e.b, fn))
        if isinstance(e, ir.Compare):
            return self.compare(e.op, self.ex(e.a, fn), self.ex(e.b, fn))
        if isinstance(e, ir.BoolOp):
            if e.op in ("&", "|"):
                a, b = (self.ex(x, fn) for x in e.items)
                return and_(a, b) if e.op == "&" else or_(a, b)
            acc = self.ex(e.items[0], fn)
            pushed = 0
            for item in e.items[1:]:
                f.push(acc if e.op == "and" else not_(acc))
                pushed += 1
                nxt = self.ex(item, fn)
                acc = and_(acc, nxt) if e.op == "and" else or_(acc, nxt)
            for _ in range(pushed):
                f.conds.pop()
            if pushed:
                f.refresh()
            return acc
        if isinstance(e, ir.Cond):
            c = self.ex(e.test, fn)
            f.push(c)
            a = self.ex(e.then, fn)
            f.pop()
            f.push(not_(c))
            b = self.ex(e.orelse, fn)
            f.pop()
            return merge(c, a, b)
        if isinstance(e, ir.VecCompare):
            a = self.ex(e.a, fn)
            b = self.ex(e.b, fn)
            if isinstance(b, list):
                return [self.compare(e.op, x, y) for x, y in zip(a, b)]
            return [self.compare(e.op, x, b) for x in a]
        if isinstance(e, ir.MaskOp):
            a, b = (self.ex(x, fn) for x in e.items)
            op = and_ if e.op == "&" else or_
            return [op(x, y) for x, y in zip(a, b)]
        if isinstance(e, ir.Reduce):
            m = self.ex(e.mask, fn)
            if e.op == "count":
                one, zero = int_val(1), int_val(0)
                return sum_([if_int(b, one, zero) for b in m])
            acc = FALSE if e.op == "any" else TRUE
            for b in m:
                acc = or_(acc, b) if e.op == "any" else and_(acc, b)
            return acc
        if isinstance(e, ir.Fold):
            return self.fold(e, fn)
        if isinstance(e, ir.MinMax):
            acc = self.ex(e.items[0], fn)
            for item in e.items[1:]:
                v = self.ex(item, fn)
                acc = ite(v < acc, v, acc) if e.op == "min" else ite(v > acc, v, acc)
            return acc
        if isinstance(e, ir.Call):
            values = [self.ex(a, fn) for a, (_, t) in zip(e.args, e.fn.params)
                      if not isinstance(t, (ir.StateT, ir.VecT))]
            return self.call(e.fn, values, f.g)
        raise TypeError(f"no encoding for {type(e).__name__}")

    def compare(self, op: str, a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
        return compare(op, a, b)

    def fold(self, e: ir.Fold, fn: ir.Function) -> Any:
        f = self.f
        saved = f.env.get(e.var)
        acc: Any = FALSE if e.op == "any" else TRUE if e.op == "all" else int_val(0)
        terms: list[z3.ExprRef] = []
        for v in e.domain.values:
            f.env[e.var] = int_val(v)
            c = TRUE
            depth = 0
            for cond in e.conds:
                c = and_(c, self.ex(cond, fn))
                f.push(c)
                depth += 1
            elt = self.ex(e.elt, fn)
            for _ in range(depth):
                f.conds.pop()
            if depth:
                f.refresh()
            if e.op == "any":
                acc = or_(acc, and_(c, elt))
            elif e.op == "all":
                acc = and_(acc, or_(not_(c), elt))
            else:
                terms.append(elt if is_true(c) else if_int(c, elt, int_val(0))
                             if isinstance(elt, z3.ArithRef) else z3.If(c, elt, 0))
        if saved is None:
            f.env.pop(e.var, None)
        else:
            f.env[e.var] = saved
        if e.op == "sum":
            return sum_(terms)
        return acc


def _default(t: object, schema: Schema) -> object:
    """A value of type ``t`` for a result no path produces."""
    if isinstance(t, ir.BoolT):
        return FALSE
    if isinstance(t, ir.MaskT):
        return [FALSE] * schema.counts.get(t.dim, 0)
    return int_val(0)
