"""The symbolic interpretation: lowered bodies run on Z3 terms.

Running an action instance symbolically from current-state terms gives its
*transition*: an enabledness condition, a term for every next-state slot, the
guarded events it emits and any model-error conditions (an out-of-range write
on some path). Monitors consume the guarded events the same way, so properties
become terms over the state too.
"""
from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import z3
from z3.z3 import _to_expr_ref

from kvspec.lang.declare import SCALAR
from kvspec.lang.errors import ModelError, current_location
from kvspec.lang.runtime import pop_kernel, push_kernel
from kvspec.lang.schema import Schema, VarInfo
from kvspec.lang.symvalues import (BOOL, INT, Sym, SymMask, as_bool, encode_like, to_sym,
                                   type_of_python, z3_const)
from kvspec.lang.types import EnumType, ValueType
from kvspec.props.events import EVENT_KINDS

TRUE = z3.BoolVal(True)
FALSE = z3.BoolVal(False)
# Z3 hash-conses terms, so "is the constant true" is a pointer comparison; this is
# much cheaper than z3.is_true (several foreign calls) on the encoder's hot path.
_TRUE_PTR = TRUE.ast.value
_FALSE_PTR = FALSE.ast.value


def _is_true(a: z3.ExprRef) -> bool:
    return a.ast.value == _TRUE_PTR  # type: ignore[no-any-return]


def _is_false(a: z3.ExprRef) -> bool:
    return a.ast.value == _FALSE_PTR  # type: ignore[no-any-return]


class _Undef:
    """Value of a local before its first assignment."""

    def __repr__(self) -> str:
        return "<unassigned>"


UNDEF = _Undef()


def _and(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    if _is_true(a):
        return b
    if _is_true(b):
        return a
    if _is_false(a) or _is_false(b):
        return FALSE
    return _mk2(z3.Z3_mk_and, a, b)


def _mk2(fn: Callable[..., Any], a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    """``And``/``Or`` of two Bools by a direct C call (the z3 wrappers re-check and
    coerce every argument, which dominated the encoder's time)."""
    ctx = a.ctx
    arr = (z3.Ast * 2)(a.as_ast(), b.as_ast())
    return z3.BoolRef(fn(ctx.ref(), 2, arr), ctx)


def _or(a: z3.BoolRef, b: z3.BoolRef) -> z3.BoolRef:
    if _is_false(a):
        return b
    if _is_false(b):
        return a
    if _is_true(a) or _is_true(b):
        return TRUE
    return _mk2(z3.Z3_mk_or, a, b)


def _not(a: z3.BoolRef) -> z3.BoolRef:
    if _is_true(a):
        return FALSE
    if _is_false(a):
        return TRUE
    ctx = a.ctx
    return z3.BoolRef(z3.Z3_mk_not(ctx.ref(), a.as_ast()), ctx)


def _ite(c: z3.BoolRef, a: z3.ExprRef, b: z3.ExprRef) -> z3.ExprRef:
    if _is_true(c) or a.ast.value == b.ast.value:
        return a
    if _is_false(c):
        return b
    if not a.sort().eq(b.sort()):
        return z3.If(c, a, b)  # let the wrapper coerce (or report) mixed sorts
    ctx = a.ctx
    return _to_expr_ref(z3.Z3_mk_ite(ctx.ref(), c.as_ast(), a.as_ast(), b.as_ast()), ctx)


def _concrete(x: Any) -> bool:
    return not isinstance(x, (Sym, SymMask))


_PY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
    "Gt": operator.gt, "GtE": operator.ge, "Is": operator.is_, "IsNot": operator.is_not,
    "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
}


class Frame:
    """Guard bookkeeping for one running lowered function."""

    def __init__(self, kernel: "SymKernel", base: z3.BoolRef) -> None:
        self.k = kernel
        self.base = base
        self.conds: list[z3.BoolRef] = []
        self.alive: z3.BoolRef = TRUE  # not yet returned
        self.loops: list[list[z3.BoolRef]] = []  # [running-in-loop, running-in-iteration]
        self.result: Any = UNDEF
        self.g = base

    # guard ---------------------------------------------------------------
    def _refresh(self) -> None:
        g = self.base
        for c in self.conds:
            g = _and(g, c)
        g = _and(g, self.alive)
        for loop_alive, iter_alive in self.loops:
            g = _and(_and(g, loop_alive), iter_alive)
        self.g = g

    def _running(self) -> z3.BoolRef:
        """Paths of this frame that have not returned/broken/continued."""
        r = self.alive
        for loop_alive, iter_alive in self.loops:
            r = _and(_and(r, loop_alive), iter_alive)
        return r

    def cond(self, x: Any) -> Any:
        if _concrete(x):
            return bool(x)
        c = as_bool(x)
        if _is_true(c):
            return True
        if _is_false(c):
            return False
        return c

    def push(self, c: Any) -> None:
        self.conds.append(TRUE if c is True else c)
        self._refresh()

    def push_not(self, c: Any) -> None:
        self.conds.append(TRUE if c is False else _not(c))
        self._refresh()

    def pop(self) -> None:
        self.conds.pop()
        self._refresh()

    def _here(self) -> z3.BoolRef:
        """The branch conditions of the current point (without base)."""
        g = TRUE
        for c in self.conds:
            g = _and(g, c)
        return g

    def ret(self, value: Any) -> None:
        here = _and(self._here(), self._running())
        if _is_false(here):
            return
        self.result = self.k.merge(here, value, self.result)
        self.alive = _and(self.alive, _not(here))
        self._refresh()

    def brk(self) -> None:
        if not self.loops:
            raise self.k.error("`break` outside a loop")
        here = _and(self._here(), self._running())
        self.loops[-1][0] = _and(self.loops[-1][0], _not(here))
        self._refresh()

    def cont(self) -> None:
        if not self.loops:
            raise self.k.error("`continue` outside a loop")
        here = _and(self._here(), self._running())
        self.loops[-1][1] = _and(self.loops[-1][1], _not(here))
        self._refresh()

    def loop_begin(self) -> None:
        self.loops.append([TRUE, TRUE])

    def iter_begin(self) -> None:
        self.loops[-1][1] = TRUE
        self._refresh()

    def loop_end(self) -> None:
        self.loops.pop()
        self._refresh()

    def static(self, iterable: Any) -> Iterable[Any]:
        if isinstance(iterable, (Sym, SymMask)):
            raise self.k.error("a `for` loop must run over a static range (s.pages, s.requests, "
                               "range(n)), not over state-dependent values")
        return list(iterable)

    def assign(self, old: Any, new: Any) -> Any:
        running = self._running()
        if _is_true(running) or old is UNDEF:
            return new
        here = self._here()
        return self.k.merge(_and(here, running), new, old)

    def merge(self, c: Any, then_vals: tuple[Any, ...], else_vals: tuple[Any, ...]
              ) -> tuple[Any, ...]:
        if c is True:
            return then_vals
        if c is False:
            return else_vals
        return tuple(self.k.merge(c, a, b) for a, b in zip(then_vals, else_vals))

    # expressions ------------------------------------------------------------
    def and_(self, first: Any, *rest: Callable[[], Any]) -> Any:
        acc = first
        for thunk in rest:
            if _concrete(acc):
                if not acc:
                    return acc
                acc = thunk()
                continue
            c = as_bool(acc)
            self.push(c)
            try:
                nxt = thunk()
            finally:
                self.pop()
            acc = Sym(_and(c, as_bool(nxt)), BOOL)
        return acc

    def or_(self, first: Any, *rest: Callable[[], Any]) -> Any:
        acc = first
        for thunk in rest:
            if _concrete(acc):
                if acc:
                    return acc
                acc = thunk()
                continue
            c = as_bool(acc)
            self.push_not(c)
            try:
                nxt = thunk()
            finally:
                self.pop()
            acc = Sym(_or(c, as_bool(nxt)), BOOL)
        return acc

    def not_(self, x: Any) -> Any:
        if _concrete(x):
            return not x
        return Sym(_not(as_bool(x)), BOOL)

    def ite(self, c: Any, a: Callable[[], Any], b: Callable[[], Any]) -> Any:
        c = self.cond(c)
        if c is True:
            return a()
        if c is False:
            return b()
        self.push(c)
        try:
            va = a()
        finally:
            self.pop()
        self.push_not(c)
        try:
            vb = b()
        finally:
            self.pop()
        return self.k.merge(c, va, vb)

    def cmp(self, op: str, a: Any, b: Any) -> Any:
        if _concrete(a) and _concrete(b):
            return _PY_OPS[op](a, b)
        if op in ("In", "NotIn"):
            if isinstance(b, (Sym, SymMask)):
                raise self.k.error("`in` needs a static collection on the right")
            hit = FALSE
            for item in b:
                hit = _or(hit, as_bool(self.cmp("Eq", a, item)))
            return Sym(hit if op == "In" else _not(hit), BOOL)
        if op in ("Is", "IsNot"):
            if not (a is None or b is None or isinstance(a, bool) or isinstance(b, bool)):
                raise self.k.error("`is` is only supported with None, True or False")
            op = "Eq" if op == "Is" else "NotEq"
        ea, eb = self.k.unify(a, b)
        if op == "Eq":
            return Sym(ea == eb, BOOL)
        if op == "NotEq":
            return Sym(ea != eb, BOOL)
        if ea.sort() == z3.BoolSort():
            raise self.k.error("ordering comparisons on bools are not supported")
        for side in (a, b):
            if isinstance(side, Sym) and isinstance(side.t, EnumType):
                raise self.k.error("ordering comparisons on enum values are not supported")
        return Sym({"Lt": ea < eb, "LtE": ea <= eb, "Gt": ea > eb, "GtE": ea >= eb}[op], BOOL)

    def builtin(self, name: str, *args: Any) -> Any:
        # generators and other one-shot iterables are materialised first
        args = tuple(list(a) if hasattr(a, "__next__") else a for a in args)
        if all(_concrete(a) for a in args) and not any(
                isinstance(x, (Sym, SymMask)) for a in args if isinstance(a, (list, tuple))
                for x in a):
            return {"any": any, "all": all, "sum": sum, "min": min, "max": max,
                    "abs": abs}[name](*args)
        if name in ("any", "all", "sum") and len(args) == 1:
            x = args[0]
            if isinstance(x, SymMask):
                return x.any() if name == "any" else x.all() if name == "all" else x.count()
            items = list(x)
            if name == "sum":
                total: Any = 0
                for item in items:
                    total = total + (Sym(z3.If(item.e, 1, 0), INT) if isinstance(item, Sym)
                                     and item.t.kind == "bool" else item)
                return total
            acc = FALSE if name == "any" else TRUE
            for item in items:
                acc = _or(acc, as_bool(item)) if name == "any" else _and(acc, as_bool(item))
            return Sym(acc, BOOL)
        if name in ("min", "max") and len(args) >= 2:
            best = args[0]
            for other in args[1:]:
                c = self.cmp("Lt" if name == "min" else "Gt", other, best)
                best = self.k.merge(as_bool(c), other, best)
            return best
        if name == "abs" and len(args) == 1:
            x = args[0]
            return self.k.merge(as_bool(self.cmp("Lt", x, 0)), -x, x)
        raise self.k.error(f"{name}() is not supported on state-dependent values here")

    def end(self) -> Any:
        self.k.frames.pop()
        return None if self.result is UNDEF else self.result


class SymRuntime:
    """The ``_kv_`` object lowered code calls to open a frame."""

    def frame(self) -> Frame:
        return self.kernel.new_frame()

    @property
    def kernel(self) -> "SymKernel":
        from kvspec.lang.runtime import current
        k = current()
        if not isinstance(k, SymKernel):
            raise ModelError("lowered model code ran outside the symbolic interpretation")
        return k


SYM_RUNTIME = SymRuntime()


@dataclass
class SymEvent:
    guard: z3.BoolRef
    kind: str
    request: Any  # int or Sym
    page: Any  # int, Sym or None


@dataclass
class StepEncoding:
    """A symbolic step: enabled ⇒ next slots; errors are model-error conditions."""

    enabled: z3.BoolRef
    next: list[z3.ExprRef]
    errors: list[tuple[z3.BoolRef, str]] = field(default_factory=list)
    events: list[SymEvent] = field(default_factory=list)
    violations: dict[str, z3.BoolRef] = field(default_factory=dict)


class _SymView:
    """``s.owner`` for the symbolic interpretation."""

    def __init__(self, k: "SymKernel", info: VarInfo) -> None:
        self.k = k
        self.info = info

    def _elems(self) -> list[z3.ExprRef]:
        return self.k.slots[self.info.offset:self.info.offset + self.info.length]

    def __len__(self) -> int:
        return self.info.length

    def __getitem__(self, i: Any) -> Sym:
        t = self.info.type
        if isinstance(i, Sym):
            elems = self._elems()
            self.k.check(_and(i.e >= 0, i.e < len(elems)),
                         f"{self.info.name}[...]: index out of range 0..{len(elems) - 1}")
            acc = elems[-1]
            for k in range(len(elems) - 2, -1, -1):
                acc = z3.If(i.e == k, elems[k], acc)
            return Sym(acc, t)
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.info.length:
            if self.k.dead():
                return Sym(self._elems()[0], t)
            raise self.k.error(f"{self.info.name}[{i!r}]: index out of range 0..{self.info.length - 1}")
        return Sym(self.k.slots[self.info.offset + i], t)

    def __setitem__(self, i: Any, value: Any) -> None:
        g = self.k.guard()
        if _is_false(g):
            return
        if isinstance(i, SymMask):
            ev = self.k.encode_write(value, self.info, None)
            for k, bit in enumerate(i.bits):
                self.k.write(self.info.offset + k, ev, _and(g, bit))
            return
        if isinstance(i, Sym):
            self.k.check(_and(i.e >= 0, i.e < self.info.length),
                         f"write {self.info.name}[...]: index out of range")
            ev = self.k.encode_write(value, self.info, None)
            for k in range(self.info.length):
                self.k.write(self.info.offset + k, ev, _and(g, i.e == k))
            return
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.info.length:
            raise self.k.error(f"write {self.info.name}[{i!r}]: index out of range "
                               f"0..{self.info.length - 1}")
        self.k.write(self.info.offset + i, self.k.encode_write(value, self.info, i), g)

    def _compare(self, op: str, value: Any) -> SymMask:
        frame = self.k.frames[-1] if self.k.frames else Frame(self.k, TRUE)
        return SymMask([as_bool(frame.cmp(op, self[k], value)) for k in range(self.info.length)])

    def __eq__(self, value: Any) -> SymMask:  # type: ignore[override]
        return self._compare("Eq", value)

    def __ne__(self, value: Any) -> SymMask:  # type: ignore[override]
        return self._compare("NotEq", value)

    def __lt__(self, value: Any) -> SymMask:
        return self._compare("Lt", value)

    def __le__(self, value: Any) -> SymMask:
        return self._compare("LtE", value)

    def __gt__(self, value: Any) -> SymMask:
        return self._compare("Gt", value)

    def __ge__(self, value: Any) -> SymMask:
        return self._compare("GtE", value)

    def is_none(self) -> SymMask:
        return self._compare("Eq", None)

    def count(self, value: Any) -> Sym:
        return self._compare("Eq", value).count()

    def __iter__(self) -> Any:
        return iter([self[k] for k in range(self.info.length)])

    __hash__ = None  # type: ignore[assignment]


def _sym_scalar(info: VarInfo) -> property:
    def get(self: Any) -> Sym:
        return Sym(self._kv_k.slots[info.offset], info.type)

    def put(self: Any, value: Any) -> None:
        k: SymKernel = self._kv_k
        g = k.guard()
        if not _is_false(g):
            k.write(info.offset, k.encode_write(value, info, None), g)

    return property(get, put)


class SymKernel:
    """Runs lowered bodies on Z3 terms for one schema."""

    def __init__(self, schema: Schema, files: set[str]) -> None:
        self.schema = schema
        self.files = files
        namespace: dict[str, Any] = {}
        for v in schema.vars:
            if v.dim == SCALAR:
                namespace[v.name] = _sym_scalar(v)
        for name, value in schema.sizes.items():
            namespace.setdefault(name, value)
        namespace["requests"] = range(schema.requests)
        namespace["pages"] = range(schema.pages)
        self.proxy = type("SymState", (), namespace)()
        self.proxy._kv_k = self
        for v in schema.vars:
            if v.dim != SCALAR:
                setattr(self.proxy, v.name, _SymView(self, v))
        self.frames: list[Frame] = []
        self.outer: list[z3.BoolRef] = []
        self.slots: list[z3.ExprRef] = []
        self.enabled: z3.BoolRef = TRUE
        self.errors: list[tuple[z3.BoolRef, str]] = []
        self.events: list[SymEvent] = []
        self.violations: dict[str, z3.BoolRef] = {}

    # guards ----------------------------------------------------------------
    def guard(self) -> z3.BoolRef:
        if self.frames:
            return self.frames[-1].g
        return self.outer[-1] if self.outer else TRUE

    def dead(self) -> bool:
        return _is_false(self.guard())

    def new_frame(self) -> Frame:
        frame = Frame(self, self.guard())
        self.frames.append(frame)
        return frame

    def error(self, message: str) -> ModelError:
        file, line = current_location(self.files)
        return ModelError(message, file, line)

    def check(self, ok: z3.BoolRef, message: str) -> None:
        """Record a model-error condition: on a path reaching here, ``ok`` must hold.

        A path reaches here only if every ``require`` before this point held (the
        concrete interpretation stops at the first failing one), so the condition
        includes the requirements so far: when it holds, the concrete run raises."""
        bad = _and(_and(self.enabled, self.guard()), _not(ok))
        if _is_false(bad):
            return
        file, line = current_location(self.files)
        where = f"{file}:{line}: " if file else ""
        self.errors.append((bad, where + message))

    # values -------------------------------------------------------------------
    def unify(self, a: Any, b: Any) -> tuple[z3.ExprRef, z3.ExprRef]:
        """Encode two values in a common encoding for comparison."""
        ta = a.t if isinstance(a, Sym) else None
        tb = b.t if isinstance(b, Sym) else None
        like = ta or tb
        if ta is not None and isinstance(ta, EnumType) and isinstance(b, enum.Enum):
            return a.e, z3_const(ta, ta.encode(b))
        if tb is not None and isinstance(tb, EnumType) and isinstance(a, enum.Enum):
            return z3_const(tb, tb.encode(a)), b.e
        sa = to_sym(a, None if isinstance(a, Sym) or a is None else like if type_of_python(a)
                    is INT and like is not None and like.kind != "bool" else None)
        sb = to_sym(b, None if isinstance(b, Sym) or b is None else like if type_of_python(b)
                    is INT and like is not None and like.kind != "bool" else None)
        if a is None:
            sa = Sym(z3.IntVal(-1), like or INT)
        if b is None:
            sb = Sym(z3.IntVal(-1), like or INT)
        if sa.e.sort() != sb.e.sort():
            raise self.error(f"cannot compare a {sa.t.describe()} with a {sb.t.describe()}")
        return sa.e, sb.e

    def merge_value(self, c: z3.BoolRef, a: Any, b: Any) -> Any:
        return self.merge(c, a, b)

    def merge(self, c: Any, a: Any, b: Any) -> Any:
        """if c then a else b, for any pair of model values."""
        if isinstance(c, z3.ExprRef):
            c = True if _is_true(c) else False if _is_false(c) else c
        if c is True:
            return a
        if c is False:
            return b
        if a is b or a is UNDEF:
            return b
        if b is UNDEF:
            return a
        if _concrete(a) and _concrete(b):
            try:
                if type(a) is type(b) and a == b:
                    return a
            except ModelError:
                pass
        if isinstance(a, SymMask) or isinstance(b, SymMask):
            if not (isinstance(a, SymMask) and isinstance(b, SymMask)):
                raise self.error("a local is a mask on one branch and not on the other")
            return SymMask([_ite(c, x, y) for x, y in zip(a.bits, b.bits)])
        if isinstance(a, _SymView) or isinstance(b, _SymView):
            raise self.error("a local holds different state arrays on different branches")
        ta = a.t if isinstance(a, Sym) else type_of_python(a)
        tb = b.t if isinstance(b, Sym) else type_of_python(b)
        like = ta if isinstance(a, Sym) else tb if isinstance(b, Sym) else ta or tb
        if like is None:
            like = INT
        ea, eb = self.unify(a if a is not None else None, b if b is not None else None)
        return Sym(_ite(c, ea, eb), like)

    def encode_write(self, value: Any, info: VarInfo, index: int | None) -> z3.ExprRef:
        vtype: ValueType = info.type
        where = info.label(index) if index is not None else info.name
        if isinstance(value, SymMask):
            raise self.error(f"write {where}: a mask is not a {vtype.describe()}")
        if not isinstance(value, Sym):
            try:
                return z3_const(vtype, vtype.encode(value))
            except ValueError as exc:
                if _is_true(self.guard()) and _is_true(self.enabled):
                    raise self.error(f"write {where} = {value!r}: {exc}") from None
                self.check(FALSE, f"write {where} = {value!r}: {exc}")
                return self.slots[info.offset + (index or 0)]
        try:
            e = encode_like(value, vtype)
        except ModelError as exc:
            raise self.error(f"write {where}: {exc.message}") from None
        if vtype.kind != "bool" and value.t is not vtype:
            values = vtype.domain()
            self.check(z3.And(e >= min(values), e <= max(values)),
                       f"write {where}: value out of range {min(values)}..{max(values)}")
        return e

    def write(self, slot: int, value: z3.ExprRef, guard: z3.BoolRef) -> None:
        self.slots[slot] = _ite(guard, value, self.slots[slot])

    # kernel protocol ------------------------------------------------------------
    def require(self, cond: Any, message: str | None) -> None:
        g = self.guard()
        if _is_false(g):
            return
        c = as_bool(cond)
        self.enabled = _and(self.enabled, _or(_not(g), c))

    def emit(self, kind: str, request: Any, page: Any, pages: Any) -> None:
        g = self.guard()
        if _is_false(g):
            return
        if isinstance(request, SymMask) or request is None:
            raise self.error(f"emit.{kind}: the first argument must be a request id")
        if pages is not None:
            if not EVENT_KINDS[kind]:
                raise self.error(f"emit.{kind}: this event takes no pages")
            if not isinstance(pages, SymMask) or len(pages.bits) != self.schema.pages:
                raise self.error(f"emit.{kind}: pages= must be a mask over pages")
            for p, bit in enumerate(pages.bits):
                eg = _and(g, bit)
                if not _is_false(eg):
                    self.events.append(SymEvent(eg, kind, request, p))
            return
        if EVENT_KINDS[kind] and page is None:
            raise self.error(f"emit.{kind}: this event needs a page")
        if not EVENT_KINDS[kind] and page is not None:
            raise self.error(f"emit.{kind}: this event takes no page")
        self.events.append(SymEvent(g, kind, request, page))

    def violate(self, prop: str, fmt: str, args: dict[str, Any]) -> None:
        g = self.guard()
        self.violations[prop] = _or(self.violations.get(prop, FALSE), g)

    def count(self, x: Any) -> Any:
        if isinstance(x, SymMask):
            return x.count()
        return self.frames[-1].builtin("sum", list(x)) if self.frames else sum(x)

    def any(self, x: Any) -> Any:
        return x.any() if isinstance(x, SymMask) else self.frames[-1].builtin("any", list(x))

    def all(self, x: Any) -> Any:
        return x.all() if isinstance(x, SymMask) else self.frames[-1].builtin("all", list(x))

    # running -------------------------------------------------------------------------
    def run_step(self, current: list[z3.ExprRef], fn: Callable[..., Any], args: tuple[Any, ...],
                 handlers: dict[str, list[Callable[..., Any]]], flags: dict[str, int]
                 ) -> StepEncoding:
        """Encode one action instance (lowered ``fn``) followed by the monitors."""
        self.slots = list(current)
        self.enabled = TRUE
        self.errors = []
        self.events = []
        self.violations = {}
        self.frames = []
        self.outer = []
        push_kernel(self)
        try:
            fn(self.proxy, *args)
            for ev in list(self.events):
                for handler in handlers.get(ev.kind, ()):
                    self.outer.append(ev.guard)
                    try:
                        if ev.page is None:
                            handler(self.proxy, ev.request)
                        else:
                            handler(self.proxy, ev.request, ev.page)
                    finally:
                        self.outer.pop()
        finally:
            pop_kernel()
        for prop, viol in self.violations.items():
            off = flags.get(prop)
            if off is not None:
                self.slots[off] = _or(self.slots[off], viol)
        return StepEncoding(self.enabled, self.slots, self.errors, self.events, self.violations)

    def evaluate(self, current: list[z3.ExprRef], fn: Callable[..., Any]) -> z3.BoolRef:
        """A lowered invariant evaluated on symbolic state."""
        self.slots = list(current)
        self.frames = []
        self.outer = []
        self.errors = []
        self.enabled = TRUE
        push_kernel(self)
        try:
            value = fn(self.proxy)
        finally:
            pop_kernel()
        if value is None:
            raise ModelError(f"invariant {getattr(fn, '__name__', '?')} returned nothing")
        return as_bool(value)
