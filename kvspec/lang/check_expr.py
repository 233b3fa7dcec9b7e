"""Expressions of the model language: Python expression AST -> typed IR, or a ModelError."""
from __future__ import annotations

import ast
import builtins
import enum
import inspect
import sysconfig
import types as pytypes
from pathlib import Path
from typing import Any

from kvspec.lang import ir
from kvspec.lang import runtime as rt
from kvspec.lang.check_types import (arith_type, const_type, interval, of_value_type, within)
from kvspec.lang.declare import SCALAR, SizeParam
from kvspec.lang.errors import ModelError
from kvspec.lang.schema import VarInfo
from kvspec.lang.types import SYMMETRIC_DIMS

_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_ORDER = ("<", "<=", ">", ">=")
_NO_LIB_DIRS = tuple(str(Path(p).resolve()) for p in
                     {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                      sysconfig.get_paths()["platlib"]})
_KVSPEC_DIR = str(Path(__file__).resolve().parent.parent)


class _Marker:
    """A name that is not a value: an enum class, a module, a function, an id space."""

    def __init__(self, what: str, value: Any) -> None:
        self.what = what
        self.value = value


def _fold(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
            ">=": a >= b}[op]


class ExprBuilder:
    """Builds expressions; :class:`kvspec.lang.check_stmt.BodyBuilder` adds statements."""

    scope: Any
    body: Any
    env: dict[str, Any]
    defined: set[str]
    kind: str

    # -- plumbing ---------------------------------------------------------------------
    @property
    def file(self) -> str:
        return self.body.file  # type: ignore[no-any-return]

    @property
    def counts(self) -> dict[str, int]:
        return self.scope.schema.counts  # type: ignore[no-any-return]

    def err(self, node: Any, message: str) -> ModelError:
        return ModelError(message, self.file, getattr(node, "lineno", self.body.first_line))

    def brk(self, dim: str, node: Any, why: str) -> None:
        self.scope.brk(dim, self.file, getattr(node, "lineno", self.body.first_line), why)

    def const(self, value: Any, ty: Any, node: Any) -> ir.Const:
        return ir.Const(value, ty=ty, line=getattr(node, "lineno", 0))

    def size_const(self, name: str, node: Any) -> ir.Const:
        """The value of size parameter ``name``, marked as a read of it."""
        n = self.scope.schema.sizes[name]
        const = ir.Const(n, ty=ir.IntT(n, n), line=getattr(node, "lineno", 0), param=name)
        self.scope.sized.append((self.file, const))
        return const

    # -- names -------------------------------------------------------------------------
    def lookup(self, node: ast.Name) -> Any:
        name = node.id
        if name in self.env:
            if name not in self.defined:
                raise self.err(node, f"local {name!r} may be used before it is assigned")
            return ir.Local(name, ty=self.env[name], line=node.lineno)
        g = self.body.fn.__globals__
        if name in g:
            return self.global_value(g[name], name, node)
        if hasattr(builtins, name):
            return _Marker("builtin", getattr(builtins, name))
        raise self.err(node, f"unknown name {name!r}")

    def global_value(self, value: Any, name: str, node: Any) -> Any:
        if isinstance(value, enum.Enum):
            return self.const(list(type(value)).index(value), ir.EnumT(type(value)), node)
        if isinstance(value, (bool, int)):
            return self.const(value, const_type(value), node)
        if value is None:
            return self.const(-1, ir.NONE, node)
        if isinstance(value, str):
            return _Marker("str", value)
        if isinstance(value, type) and issubclass(value, enum.Enum):
            return _Marker("enum", value)
        if isinstance(value, pytypes.ModuleType):
            return _Marker("module", value)
        if callable(value):
            return _Marker("function", value)
        raise self.err(node, f"{name!r} is a module-level {type(value).__name__}; model code may "
                             "only read module-level constants (int, bool, enum members), sizes "
                             "and state variables")

    # -- entry points --------------------------------------------------------------------
    def expr(self, node: ast.expr) -> Any:
        """An expression of any type, or a _Marker."""
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            raise self.err(node, f"{type(node).__name__} expressions are not supported in model code")
        return method(node)

    def value(self, node: ast.expr) -> ir.Expr:
        """A value (scalar, mask or vector): not a name of a function/module/type."""
        e = self.expr(node)
        if isinstance(e, _Marker):
            if e.what == "space":
                raise self.err(node, f"{ast.unparse(node)} is an id space; loop over it "
                                     f"(for x in {ast.unparse(node)}) or take len() of it")
            raise self.err(node, f"{ast.unparse(node)} is not a value model code can use")
        if e.ty is None:
            raise self.err(node, f"{ast.unparse(node)} returns no value")
        if isinstance(e.ty, ir.StateT):
            raise self.err(node, "the state can only be passed to a function or read from")
        return e  # type: ignore[no-any-return]

    def scalar(self, node: ast.expr) -> ir.Expr:
        e = self.value(node)
        if not ir.is_scalar(e.ty):
            raise self.err(node, f"{ast.unparse(node)} is {e.ty.describe()}, not a single value"
                           + ("; reduce it with .any(), .all() or .count()"
                              if isinstance(e.ty, (ir.MaskT, ir.VecT)) else ""))
        return e

    def boolean(self, node: ast.expr, what: str = "a condition") -> ir.Expr:
        e = self.value(node)
        if isinstance(e.ty, ir.BoolT):
            return e
        hint = ""
        if isinstance(e.ty, ir.RefT) or isinstance(e.ty, ir.NoneT):
            hint = "; for an optional id write `x is None` / `x is not None`"
        elif isinstance(e.ty, ir.IntT):
            hint = "; write the comparison, e.g. `x != 0`"
        elif isinstance(e.ty, (ir.MaskT, ir.VecT)):
            hint = "; reduce the mask with .any(), .all() or .count()"
        raise self.err(node, f"{what} must be a bool, but {ast.unparse(node)} is "
                             f"{e.ty.describe()}{hint}")

    def mask(self, node: ast.expr) -> ir.Expr:
        e = self.value(node)
        return self.as_mask(e, node)

    def as_mask(self, e: ir.Expr, node: Any) -> ir.Expr:
        if isinstance(e.ty, ir.MaskT):
            return e
        if isinstance(e.ty, ir.VecT) and isinstance(e.ty.elem, ir.BoolT):
            return ir.VecCompare("==", e, self.const(True, ir.BOOL, node), ty=ir.MaskT(e.ty.dim),
                                 line=e.line)
        raise self.err(node, f"{ast.unparse(node)} is {e.ty.describe()}, not a mask "
                             "(a mask is e.g. `s.owner == r` or a per-id bool variable)")

    # -- leaves ----------------------------------------------------------------------------
    def e_Constant(self, node: ast.Constant) -> Any:
        v = node.value
        if isinstance(v, (bool, int)):
            return self.const(v, const_type(v), node)
        if v is None:
            return self.const(-1, ir.NONE, node)
        if isinstance(v, str):
            return _Marker("str", v)
        raise self.err(node, f"constant {v!r} is not supported in model code (ints, bools, None)")

    def e_Name(self, node: ast.Name) -> Any:
        return self.lookup(node)

    def e_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        if isinstance(base, ir.Local) and isinstance(base.ty, ir.StateT):
            return self.state_attr(node)
        if isinstance(base, _Marker) and base.what in ("enum", "module"):
            if not hasattr(base.value, node.attr):
                raise self.err(node, f"{ast.unparse(node)} does not exist")
            return self.global_value(getattr(base.value, node.attr), ast.unparse(node), node)
        if isinstance(base, ir.Const) and isinstance(base.ty, ir.EnumT) and node.attr in (
                "value", "name"):
            raise self.err(node, f"`.{node.attr}` of an enum member is not supported; compare "
                                 "members with ==")
        raise self.err(node, f"attribute {node.attr!r} of {ast.unparse(node.value)} is not "
                             "supported in model code")

    def state_attr(self, node: ast.Attribute) -> Any:
        name = node.attr
        if self.kind == "handler":
            if name in self.scope.constants:
                info, value = self.scope.constants[name]
                t = of_value_type(info.type)
                if info.dim == SCALAR:
                    return constant_value(value, t, node.lineno)
                return ir.Uniform(value, info, ty=ir.VecT(info.name, info.dim, t),
                                  line=node.lineno)
            if name in self.scope.handler_names:
                v = self.scope.handler_names[name]
                return self.const(v, ir.IntT(v, v), node)
        info: VarInfo | None = self.scope.var(name)
        if info is not None and (info.owner != "flag"):
            if self.kind == "handler" and info.owner == "model":
                raise self.err(node, f"monitors see only monitor variables, not {name!r}")
            if self.kind != "handler" and info.owner == "monitor":
                raise self.err(node, f"{name!r} is a property-monitor variable; model code "
                                     "cannot read it")
            t = of_value_type(info.type)
            if info.dim == SCALAR:
                return ir.Load(info, None, ty=t, line=node.lineno)
            return ir.VecOf(info, ty=ir.VecT(info.name, info.dim, t), line=node.lineno)
        sizes = self.scope.schema.sizes
        cls = self.scope.model_cls
        declared = getattr(cls, name, None) if cls is not None else None
        dim = declared.dim if isinstance(declared, SizeParam) else None
        if dim is None and name in ("requests", "pages"):
            dim = "request" if name == "requests" else "page"
        if dim is not None:
            if self.counts.get(dim, 0) == 0:
                raise self.err(node, f"the model declares no {dim}s")
            return _Marker("space", dim)
        if name in sizes:
            return self.size_const(name, node)
        if cls is not None and hasattr(cls, name):
            static = inspect.getattr_static(cls, name)
            value = getattr(cls, name)
            if isinstance(static, (staticmethod, classmethod)):
                raise self.err(node, f"{name} is a {type(static).__name__}; model helpers are "
                                     "plain functions or methods taking the state")
            if inspect.isfunction(value):
                return _Marker("method", value)
            if isinstance(value, SizeParam):
                return self.size_const(value.name, node)
            if isinstance(value, (bool, int, enum.Enum)) or value is None:
                return self.global_value(value, name, node)
        known = ", ".join(v.name for v in self.scope.schema.vars if v.owner == "model")
        raise self.err(node, f"unknown state variable {name!r} (the model declares: {known})")

    # -- operators -----------------------------------------------------------------------
    def e_UnaryOp(self, node: ast.UnaryOp) -> ir.Expr:
        if isinstance(node.op, ast.Not):
            x = self.boolean(node.operand, "the operand of `not`")
            if isinstance(x, ir.Const):
                return self.const(not x.value, ir.BOOL, node)
            return ir.Unary("not", x, ty=ir.BOOL, line=node.lineno)
        if isinstance(node.op, ast.Invert):
            x = self.value(node.operand)
            if isinstance(x.ty, ir.BoolT):
                raise self.err(node, "`~` on a bool is an int in Python (~True == -2); use `not`")
            m = self.as_mask(x, node.operand)
            return ir.Unary("invert", m, ty=m.ty, line=node.lineno)
        x = self.int_operand(node.operand, "-" if isinstance(node.op, ast.USub) else "+")
        if isinstance(node.op, ast.UAdd):
            return x
        if isinstance(x, ir.Const):
            return self.const(-x.value, ir.IntT(-x.value, -x.value), node)
        lo, hi = interval(x.ty, self.counts)
        return ir.Unary("neg", x, ty=ir.IntT(None if hi is None else -hi, None if lo is None
                                             else -lo), line=node.lineno)

    def int_operand(self, node: ast.expr, op: str) -> ir.Expr:
        x = self.scalar(node)
        t = x.ty
        if isinstance(t, ir.IntT):
            return x
        if isinstance(t, ir.RefT):
            self.brk(t.dim, node, f"arithmetic on a {t.dim} id")
            return x
        if isinstance(t, ir.BoolT):
            raise self.err(node, f"arithmetic (`{op}`) on a bool is not supported; write "
                                 "`1 if b else 0`")
        if isinstance(t, ir.EnumT):
            raise self.err(node, f"arithmetic (`{op}`) on an enum member is not supported")
        raise self.err(node, f"arithmetic (`{op}`) on None is not supported")

    def e_BinOp(self, node: ast.BinOp) -> ir.Expr:
        op = node.op
        if isinstance(op, (ast.BitAnd, ast.BitOr)):
            sym = "&" if isinstance(op, ast.BitAnd) else "|"
            a, b = self.value(node.left), self.value(node.right)
            if isinstance(a.ty, ir.BoolT) and isinstance(b.ty, ir.BoolT):
                return ir.BoolOp(sym, [a, b], ty=ir.BOOL, line=node.lineno)
            if isinstance(a.ty, (ir.IntT, ir.RefT)) or isinstance(b.ty, (ir.IntT, ir.RefT)):
                raise self.err(node, f"bitwise `{sym}` on ints is not supported")
            ma, mb = self.as_mask(a, node.left), self.as_mask(b, node.right)
            if ma.ty != mb.ty:
                raise self.err(node, f"masks over different id spaces cannot be combined "
                                     f"({ma.ty.describe()} {sym} {mb.ty.describe()})")
            return ir.MaskOp(sym, [ma, mb], ty=ma.ty, line=node.lineno)
        if isinstance(op, ast.Pow):
            base = self.int_operand(node.left, "**")
            exp = self.value(node.right)
            if not (isinstance(exp, ir.Const) and isinstance(exp.ty, ir.IntT)
                    and 0 <= exp.value <= 64):
                raise self.err(node, "`**` needs a constant exponent 0..64 (an exponent that "
                                     "depends on the state is not supported)")
            acc: ir.Expr = self.const(1, ir.IntT(1, 1), node)
            for _ in range(exp.value):
                acc = self.arith("*", acc, base, node)
            return acc
        if type(op) not in _ARITH:
            what = {ast.Div: "`/` (true division) is not supported in model code; use `//`",
                    ast.LShift: "`<<` is not supported in model code",
                    ast.RShift: "`>>` is not supported in model code",
                    ast.BitXor: "`^` is not supported in model code",
                    ast.MatMult: "`@` is not supported in model code"}.get(
                type(op), "this operator is not supported in model code")
            raise self.err(node, what)
        sym = _ARITH[type(op)]
        a = self.int_operand(node.left, sym)
        b = self.int_operand(node.right, sym)
        return self.arith(sym, a, b, node)

    def arith(self, sym: str, a: ir.Expr, b: ir.Expr, node: Any) -> ir.Expr:
        if sym in ("//", "%"):
            lo, _ = interval(b.ty, self.counts)
            if lo is None or lo < 1:
                raise self.err(node, f"the divisor of `{sym}` must be positive (a positive "
                                     "constant or size)")
        if isinstance(a, ir.Const) and isinstance(b, ir.Const):
            v = _fold(sym, a.value, b.value)
            return self.const(v, ir.IntT(v, v), node)
        return ir.Arith(sym, a, b, ty=arith_type(sym, a.ty, b.ty, self.counts), line=node.lineno)

    def e_BoolOp(self, node: ast.BoolOp) -> ir.Expr:
        op = "and" if isinstance(node.op, ast.And) else "or"
        items = [self.boolean(v, f"each operand of `{op}`") for v in node.values]
        return ir.BoolOp(op, items, ty=ir.BOOL, line=node.lineno)

    def e_IfExp(self, node: ast.IfExp) -> ir.Expr:
        from kvspec.lang.check_types import join
        test = self.boolean(node.test)
        a, b = self.value(node.body), self.value(node.orelse)
        t = join(a.ty, b.ty)
        if t is None or isinstance(t, (ir.VecT, ir.SpaceT, ir.StateT)):
            raise self.err(node, f"the branches of the conditional expression have different "
                                 f"types ({a.ty.describe()} / {b.ty.describe()})")
        if isinstance(test, ir.Const):
            return a if test.value else b
        return ir.Cond(test, a, b, ty=t, line=node.lineno)

    # -- comparisons --------------------------------------------------------------------------
    def e_Compare(self, node: ast.Compare) -> ir.Expr:
        parts: list[ir.Expr] = []
        left_node = node.left
        for op, right_node in zip(node.ops, node.comparators):
            parts.append(self.compare_one(op, left_node, right_node, node))
            left_node = right_node
        if len(parts) == 1:
            return parts[0]
        if any(not isinstance(p.ty, ir.BoolT) for p in parts):
            raise self.err(node, "chained comparisons of arrays are not supported")
        return ir.BoolOp("and", parts, ty=ir.BOOL, line=node.lineno)

    def compare_one(self, op: ast.cmpop, ln: ast.expr, rn: ast.expr, node: Any) -> ir.Expr:
        if isinstance(op, (ast.In, ast.NotIn)):
            if not isinstance(rn, (ast.Tuple, ast.List)):
                raise self.err(node, "`in` needs a tuple of values on the right, e.g. "
                                     "`x in (Phase.A, Phase.B)`")
            a = self.scalar(ln)
            hits = [self.scalar_compare("==", a, self.scalar(e), node) for e in rn.elts]
            if not hits:
                res: ir.Expr = self.const(False, ir.BOOL, node)
            else:
                res = hits[0] if len(hits) == 1 else ir.BoolOp("or", hits, ty=ir.BOOL,
                                                               line=node.lineno)
            if isinstance(op, ast.NotIn):
                return ir.Unary("not", res, ty=ir.BOOL, line=node.lineno)
            return res
        a, b = self.value(ln), self.value(rn)
        if isinstance(op, (ast.Is, ast.IsNot)):
            sym = "==" if isinstance(op, ast.Is) else "!="
            consts = [x for x in (a, b) if isinstance(x, ir.Const)
                      and isinstance(x.ty, (ir.NoneT, ir.BoolT))]
            if not consts:
                raise self.err(node, "`is` is only supported with None, True or False; use ==")
        elif type(op) in _CMP:
            sym = _CMP[type(op)]
        else:
            raise self.err(node, "unsupported comparison")
        if isinstance(a.ty, ir.VecT) or isinstance(b.ty, ir.VecT):
            return self.vec_compare(sym, a, b, node)
        if isinstance(a.ty, ir.MaskT) or isinstance(b.ty, ir.MaskT):
            raise self.err(node, "comparing masks is not supported; combine them with &, |, ~ "
                                 "and reduce with .any(), .all() or .count()")
        return self.scalar_compare(sym, a, b, node)

    def vec_compare(self, sym: str, a: ir.Expr, b: ir.Expr, node: Any) -> ir.Expr:
        if not isinstance(a.ty, ir.VecT):
            a, b = b, a
            sym = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(sym, sym)
        elem = a.ty.elem
        if isinstance(b.ty, ir.VecT):
            if b.ty.dim != a.ty.dim:
                raise self.err(node, f"{a.ty.var} and {b.ty.var} are indexed by different id "
                                     "spaces and cannot be compared element-wise")
            self.check_scalar_compare(sym, elem, b.ty.elem, a, b, node)
        elif ir.is_scalar(b.ty):
            self.check_scalar_compare(sym, elem, b.ty, a, b, node)
        else:
            raise self.err(node, f"cannot compare {a.ty.describe()} with {b.ty.describe()}")
        return ir.VecCompare(sym, a, b, ty=ir.MaskT(a.ty.dim), line=getattr(node, "lineno", 0))

    def scalar_compare(self, sym: str, a: ir.Expr, b: ir.Expr, node: Any) -> ir.Expr:
        self.check_scalar_compare(sym, a.ty, b.ty, a, b, node)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const):
            return self.const(bool(_fold(sym, a.value, b.value)), ir.BOOL, node)
        return ir.Compare(sym, a, b, ty=ir.BOOL, line=getattr(node, "lineno", 0))

    def check_scalar_compare(self, sym: str, ta: Any, tb: Any, a: ir.Expr, b: ir.Expr,
                             node: Any) -> None:
        order = sym in _ORDER
        kinds = {type(ta), type(tb)}
        if kinds == {ir.BoolT}:
            if order:
                raise self.err(node, "ordering comparisons on bools are not supported")
            return
        if kinds == {ir.EnumT}:
            if ta.cls is not tb.cls:
                raise self.err(node, f"cannot compare a {ta.describe()} with a {tb.describe()}")
            if order:
                raise self.err(node, "ordering comparisons on enum members are not supported; "
                                     "use == or `in (...)`")
            return
        if ir.NoneT in kinds:
            other = tb if isinstance(ta, ir.NoneT) else ta
            if isinstance(other, (ir.RefT, ir.NoneT)) and not order:
                return
            raise self.err(node, f"cannot compare None with {other.describe()}"
                           + (" by order" if order else ""))
        if kinds <= {ir.RefT, ir.IntT}:
            for t, e, other in ((ta, a, b), (tb, b, a)):
                if isinstance(t, ir.RefT):
                    ot = other.ty if not isinstance(other.ty, ir.VecT) else other.ty.elem
                    if isinstance(ot, ir.RefT) and ot.dim != t.dim:
                        raise self.err(node, f"cannot compare a {t.dim} id with a {ot.dim} id")
                    if order:
                        self.brk(t.dim, node, f"{t.dim} ids are compared by order")
                    elif isinstance(other, ir.Const):
                        self.brk(t.dim, node, f"a {t.dim} id is compared with a literal")
                    elif isinstance(ot, ir.IntT):
                        self.brk(t.dim, node, f"a {t.dim} id is compared with an int")
            return
        raise self.err(node, f"cannot compare {ta.describe()} with {tb.describe()}")

    # -- subscripts --------------------------------------------------------------------------
    def e_Subscript(self, node: ast.Subscript) -> ir.Expr:
        base = self.value(node.value)
        if (isinstance(base, (ir.VecOf, ir.Uniform)) and base.var.two_d
                and getattr(base, "row", None) is None and base.ty.dim == base.var.dim):
            return self.two_d(base, node)
        if isinstance(node.slice, ast.Tuple):
            raise self.err(node, "multi-dimensional indexing needs a two-dimensional array "
                                 "(declared requests.by(ranks).var(...))")
        if isinstance(node.slice, ast.Slice):
            raise self.err(node, "slices are not supported in model code; use masks "
                                 "(s.owner == r), or s.x[i, :] / s.x[:, j] on a two-dimensional "
                                 "array")
        if not isinstance(base.ty, ir.VecT):
            raise self.err(node, f"{ast.unparse(node.value)} is {base.ty.describe()}; only state "
                                 "arrays (per-request / per-page variables) can be indexed")
        assert isinstance(base, (ir.VecOf, ir.Uniform))
        idx = self.value(node.slice)
        if isinstance(idx.ty, (ir.MaskT, ir.VecT)):
            raise self.err(node, "a mask can only index the target of an assignment "
                                 "(s.x[mask] = v); to read, reduce the mask")
        if isinstance(base, ir.Uniform):
            if not (isinstance(idx.ty, ir.RefT) and idx.ty.dim == base.ty.dim
                    and not idx.ty.optional):
                raise self.err(node, f"{base.var.name} is indexed by {base.ty.dim} ids")
            return constant_value(base.value, base.ty.elem, node.lineno)
        idx, check = self.index(base.var, idx, node)
        return ir.Load(base.var, idx, check, ty=base.ty.elem, line=node.lineno)

    def grid_index(self, var: VarInfo, part: ast.expr, axis: int, node: Any) -> ir.Expr | None:
        """One index of ``var[i, j]``: an id of that axis's space (None for a bare ``:``).
        An axis that is not requests or pages also takes a constant int in range."""
        dim = var.axes[axis]
        if isinstance(part, ast.Slice):
            if part.lower is not None or part.upper is not None or part.step is not None:
                raise self.err(node, f"{var.name}: only a bare `:` (a whole line) is supported "
                                     "as a slice")
            return None
        e = self.scalar(part)
        t = e.ty
        if isinstance(t, ir.RefT) and t.dim == dim and not t.optional:
            return e
        if (dim not in SYMMETRIC_DIMS and isinstance(e, ir.Const) and isinstance(t, ir.IntT)
                and 0 <= e.value < self.counts[dim]):
            return e
        pos = ", ".join("i" if k == axis else "_" for k in range(2))
        raise self.err(node, f"{var.name}[{pos}] needs a {dim} id here (not optional), not "
                             f"{t.describe()}"
                       + ("" if dim in SYMMETRIC_DIMS else
                          f", or a constant 0..{self.counts[dim] - 1}"))

    def two_d(self, base: ir.VecOf | ir.Uniform, node: ast.Subscript) -> ir.Expr:
        """``s.x[i, j]`` (an element), ``s.x[i]`` / ``s.x[i, :]`` (the line along the
        inner axis), ``s.x[:, j]`` (the line along the outer axis) of a two-dimensional
        array; every index is an id of its space."""
        var = base.var
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(parts) > 2:
            raise self.err(node, f"{var.name} has two dimensions ({', '.join(var.axes)})")
        ids = [self.grid_index(var, part, k, node) for k, part in enumerate(parts)]
        if len(ids) == 1:
            ids.append(None)
        elem = of_value_type(var.type)
        if ids[0] is None and ids[1] is None:
            return base  # type: ignore[return-value]
        if ids[0] is None or ids[1] is None:
            along = 0 if ids[0] is None else 1
            fixed = ids[1 - along]
            ty = ir.VecT(f"{var.name}[line]", var.axes[along], elem)
            if isinstance(base, ir.Uniform):
                return ir.Uniform(base.value, var, ty=ty, line=node.lineno)
            return ir.VecOf(var, fixed, along, ty=ty, line=node.lineno)
        if isinstance(base, ir.Uniform):
            return constant_value(base.value, elem, node.lineno)
        i, j = ids
        return ir.Load(var, self.flat_slot(var, i, j, node), False, (i, j), ty=elem,
                       line=node.lineno)

    def flat_slot(self, var: VarInfo, i: ir.Expr, j: ir.Expr, node: Any) -> ir.Expr:
        """The slot offset of ``var[i, j]``: ``i * stride0 + j * stride1`` (folded)."""
        s0, s1 = var.strides
        return self.arith("+", self.arith("*", i, self.const(s0, ir.IntT(s0, s0), node), node),
                          self.arith("*", j, self.const(s1, ir.IntT(s1, s1), node), node), node)

    def index(self, var: VarInfo, idx: ir.Expr, node: Any) -> tuple[ir.Expr, bool]:
        """Type an index of array ``var``: (index, needs a range check)."""
        dim, n = var.dim, var.length
        t = idx.ty
        if isinstance(t, ir.RefT):
            if t.dim != dim:
                raise self.err(node, f"{var.name} is indexed by {dim} ids, not by {t.dim} ids")
            return idx, t.optional
        if isinstance(t, ir.IntT):
            if isinstance(idx, ir.Const):
                self.brk(dim, node, f"a per-{dim} array is indexed with a literal")
                if not 0 <= idx.value < n:
                    raise self.err(node, f"{var.name}[{idx.value}]: index out of range 0..{n - 1}")
            else:
                self.brk(dim, node, f"a per-{dim} array is indexed with an int, not a {dim} id")
            return idx, not within(t, 0, n - 1, self.counts)
        if isinstance(t, ir.NoneT):
            raise self.err(node, f"{var.name}[None]: None is not a {dim} id")
        raise self.err(node, f"{var.name} is indexed by {dim} ids, not by {t.describe()}")

    # -- calls --------------------------------------------------------------------------------
    def e_Call(self, node: ast.Call) -> Any:
        from kvspec.lang.check_calls import build_call
        return build_call(self, node)

    def e_Slice(self, node: ast.Slice) -> ir.Expr:
        raise self.err(node, "slices are not supported in model code; use masks (s.owner == r), "
                             "or s.x[i, :] / s.x[:, j] on a two-dimensional array")

    def e_GeneratorExp(self, node: ast.GeneratorExp) -> ir.Expr:
        raise self.err(node, "a generator expression can only be the argument of any(), all() "
                             "or sum()")

    def e_ListComp(self, node: ast.ListComp) -> ir.Expr:
        raise self.err(node, "a list comprehension can only be the argument of any(), all() or "
                             "sum()")

    def e_Tuple(self, node: ast.Tuple) -> ir.Expr:
        raise self.err(node, "tuples are only supported in `x in (...)`, loop domains and "
                             "parallel assignment")

    e_List = e_Tuple


def constant_value(value: Any, ty: Any, line: int) -> ir.Expr:
    """An element of an unstored monitor variable: its initial value (an empty
    reference is the literal None, never a literal id)."""
    if isinstance(ty, ir.RefT) and value == -1:
        return ir.Const(-1, ty=ir.NONE, line=line)
    return ir.Const(value, ty=ty, line=line)


def is_model_function(fn: Any) -> bool:
    """A plain Python function from user code (not kvspec, not a library)."""
    if not inspect.isfunction(fn):
        return False
    try:
        src = str(Path(inspect.getsourcefile(fn) or "").resolve())
    except TypeError:
        return False
    if src.startswith(_KVSPEC_DIR) and getattr(fn, "__module__", "") != "kvspec.props.library":
        return False
    return not any(src.startswith(d) for d in _NO_LIB_DIRS)


RUNTIME_FUNCTIONS = {rt.require: "require", rt.count: "count", rt.any_: "any_",
                     rt.all_: "all_", rt.violate: "violate"}
