"""Calls in model expressions: reductions, builtins, generator folds and helper functions."""
from __future__ import annotations

import ast
from typing import Any

from kvspec.lang import ir
from kvspec.lang.check_expr import RUNTIME_FUNCTIONS, ExprBuilder, _Marker, is_model_function
from kvspec.lang.check_types import interval, join

_REDUCTIONS = {"count": "count", "any_": "any", "all_": "all"}


def build_call(b: ExprBuilder, node: ast.Call) -> ir.Expr:
    func = node.func
    # methods of masks and state arrays: m.count(), m.any(), s.owner.count(r), s.x.is_none()
    if isinstance(func, ast.Attribute) and func.attr in ("count", "any", "all", "is_none",
                                                         "min", "max"):
        base = b.expr(func.value)
        if isinstance(base, ir.Expr) and isinstance(base.ty, (ir.MaskT, ir.VecT)):
            if func.attr in ("min", "max"):
                return _vec_extreme(b, base, func.attr, node)
            return _method(b, base, func.attr, node)
    target = b.expr(func)
    if isinstance(target, ir.Expr):
        raise b.err(node, f"{ast.unparse(func)} is a value, not a function")
    if node.keywords:
        raise b.err(node, f"keyword arguments are not supported in calls to "
                          f"{ast.unparse(func)}()")
    if target.what == "builtin":
        return _builtin(b, target.value, node)
    if target.what == "function" and target.value in RUNTIME_FUNCTIONS:
        name = RUNTIME_FUNCTIONS[target.value]
        if name in _REDUCTIONS:
            if len(node.args) != 1:
                raise b.err(node, f"{name}() takes one mask")
            return ir.Reduce(_REDUCTIONS[name], b.mask(node.args[0]),
                             ty=_reduce_type(b, _REDUCTIONS[name], None), line=node.lineno)
        raise b.err(node, f"{name}(...) is a statement; it cannot be used as a value")
    if target.what in ("function", "method"):
        return helper_call(b, target, node)
    if target.what == "enum":
        raise b.err(node, f"calling the enum {target.value.__name__} is not supported; use its "
                          "members (e.g. Phase.NEW)")
    raise b.err(node, f"{ast.unparse(func)}() is not part of the model language")


def _reduce_type(b: ExprBuilder, op: str, mask: ir.Expr | None) -> Any:
    if op == "count":
        n = _length(b, mask.ty.dim) if mask is not None else None
        return ir.IntT(0, n)
    return ir.BOOL


def _length(b: ExprBuilder, dim: str) -> int:
    """Elements of a vector or mask over ``dim`` (one id space, or two: ``a*b``)."""
    return b.scope.schema.length_of(dim)  # type: ignore[no-any-return]


def _vec_extreme(b: ExprBuilder, base: ir.Expr, op: str, node: ast.Call) -> ir.Expr:
    """``v.min()`` / ``v.max()`` of an int array, row or column: the ``min``/``max`` of
    its elements (each one state slot; a space has at least one id)."""
    if node.args or node.keywords:
        raise b.err(node, f".{op}() takes no arguments")
    elem = getattr(base.ty, "elem", None)
    if not isinstance(elem, ir.IntT):
        raise b.err(node, f".{op}() applies to an array of ints (Int variables), not "
                          f"{base.ty.describe()}")
    items = _elements(b, base, node)
    if len(items) == 1:
        return items[0]
    return ir.MinMax(op, items, ty=elem, line=node.lineno)


def _elements(b: ExprBuilder, base: ir.Expr, node: ast.Call) -> list[ir.Expr]:
    """Every element of a whole state array or of one line of a 2-D array, as reads."""
    elem = base.ty.elem
    if isinstance(base, ir.Uniform):
        n = _length(b, base.ty.dim)
        return [ir.Const(base.value, ty=elem, line=node.lineno)] * n
    var = base.var if isinstance(base, ir.VecOf) else b.scope.var(base.ty.var)
    if var is None:
        raise b.err(node, "this vector has no elements to reduce")
    if isinstance(base, ir.VecOf) and base.row is not None:
        out: list[ir.Expr] = []
        for j in range(var.shape[base.along]):
            k = b.const(j, ir.IntT(j, j), node)
            ij = (base.row, k) if base.along == 1 else (k, base.row)
            out.append(ir.Load(var, b.flat_slot(var, ij[0], ij[1], node), False, ij, ty=elem,
                               line=node.lineno))
        return out
    return [ir.Load(var, b.const(k, ir.IntT(k, k), node), False, ty=elem, line=node.lineno)
            for k in range(var.length)]


def _axis_reduce(b: ExprBuilder, base: ir.Expr, attr: str, node: ast.Call) -> ir.Expr:
    """``m.any(axis=s.ranks)`` / ``m.all(axis=s.ranks)`` of a two-dimensional mask (or
    bool array): the mask over the other axis, each element the ``|`` / ``&`` of its
    line along ``axis``."""
    kw = node.keywords
    if len(kw) != 1 or kw[0].arg != "axis" or node.args or attr not in ("any", "all"):
        raise b.err(node, f".{attr}(): the only keyword is axis=, for .any() and .all() of a "
                          "two-dimensional mask (e.g. s.failed.any(axis=s.ranks))")
    space = b.expr(kw[0].value)
    dims = base.ty.dim.split("*")
    if not (isinstance(space, _Marker) and space.what == "space" and space.value in dims
            and len(dims) == 2):
        raise b.err(node, f".{attr}(axis=...) takes one of the id spaces of a two-dimensional "
                          f"mask ({' or '.join('s.' + d for d in dims) if len(dims) == 2 else 'none here'})")
    m = b.as_mask(base, node.func)
    along = dims.index(space.value)
    var = _grid_of(b, m, node)
    lines = [_line(b, m, along, k, node) for k in range(var.shape[along])]
    keep = dims[1 - along]
    acc = lines[0]
    for x in lines[1:]:  # mask operations are binary
        acc = ir.MaskOp("|" if attr == "any" else "&", [acc, x], ty=ir.MaskT(keep),
                        line=node.lineno)
    return acc


def _grid_of(b: ExprBuilder, e: ir.Expr, node: ast.Call) -> Any:
    """The two-dimensional state variable a mask expression reads (for its shape)."""
    if isinstance(e, (ir.VecOf, ir.Uniform)):
        return e.var
    for x in ir.sub_exprs(e):
        if isinstance(x.ty, (ir.MaskT, ir.VecT)):
            return _grid_of(b, x, node)
    raise b.err(node, "this mask cannot be reduced along an axis")


def _line(b: ExprBuilder, e: ir.Expr, along: int, k: int, node: ast.Call) -> ir.Expr:
    """The part of a two-dimensional mask (or array) expression with index ``k`` on axis
    ``along`` (its line across the other axis)."""
    other = 1 - along
    if isinstance(e, ir.VecOf) and e.row is None:
        var = e.var
        fixed = b.const(k, ir.IntT(k, k), node)
        return ir.VecOf(var, fixed, other, ty=ir.VecT(f"{var.name}[line]", var.axes[other],
                                                      e.ty.elem), line=node.lineno)
    if isinstance(e, ir.Uniform):
        return ir.Uniform(e.value, e.var, ty=ir.VecT(f"{e.var.name}[line]",
                                                     e.var.axes[other], e.ty.elem),
                          line=node.lineno)
    if isinstance(e, ir.VecCompare):
        rhs = _line(b, e.b, along, k, node) if isinstance(e.b.ty, ir.VecT) else e.b
        a = _line(b, e.a, along, k, node)
        return ir.VecCompare(e.op, a, rhs, ty=ir.MaskT(a.ty.dim), line=e.line)
    if isinstance(e, ir.Unary) and e.op == "invert":
        x = _line(b, e.x, along, k, node)
        return ir.Unary("invert", x, ty=x.ty, line=e.line)
    if isinstance(e, ir.MaskOp):
        items = [_line(b, x, along, k, node) for x in e.items]
        return ir.MaskOp(e.op, items, ty=items[0].ty, line=e.line)
    raise b.err(node, "reduce along an axis a two-dimensional state array or a mask built "
                      "from them (==, !=, <, ..., &, |, ~), not a local or a function's result")


def _method(b: ExprBuilder, base: ir.Expr, attr: str, node: ast.Call) -> ir.Expr:
    if node.keywords and "*" in getattr(base.ty, "dim", ""):
        return _axis_reduce(b, base, attr, node)
    if node.keywords:
        raise b.err(node, f".{attr}() takes no keyword arguments")
    if attr == "is_none":
        if node.args or not isinstance(base.ty, ir.VecT):
            raise b.err(node, ".is_none() takes no arguments and applies to a state array")
        none = b.const(-1, ir.NONE, node)
        return b.vec_compare("==", base, none, node)
    if attr == "count" and node.args:
        if len(node.args) != 1 or not isinstance(base.ty, ir.VecT):
            raise b.err(node, ".count(x) takes one value and applies to a state array")
        m = b.vec_compare("==", base, b.scalar(node.args[0]), node)
        return ir.Reduce("count", m, ty=ir.IntT(0, _length(b, m.ty.dim)), line=node.lineno)
    if node.args:
        raise b.err(node, f".{attr}() takes no arguments")
    m = b.as_mask(base, node.func)
    return ir.Reduce(attr, m, ty=_reduce_type(b, attr, m), line=node.lineno)


def _builtin(b: ExprBuilder, fn: Any, node: ast.Call) -> ir.Expr:
    name = getattr(fn, "__name__", "")
    args = node.args
    if name in ("any", "all", "sum"):
        if len(args) != 1:
            raise b.err(node, f"{name}() takes one argument here")
        arg = args[0]
        if isinstance(arg, (ast.GeneratorExp, ast.ListComp)):
            return fold(b, name, arg, node)
        value = b.value(arg)
        if isinstance(value.ty, (ir.MaskT, ir.VecT)):
            m = b.as_mask(value, arg)
            op = "count" if name == "sum" else name
            return ir.Reduce(op, m, ty=_reduce_type(b, op, m), line=node.lineno)
        raise b.err(node, f"{name}() needs a mask or a generator over ids, e.g. "
                          f"{name}(... for p in s.pages)")
    if name in ("min", "max"):
        if len(args) < 2 or any(isinstance(a, (ast.GeneratorExp, ast.ListComp)) for a in args):
            raise b.err(node, f"{name}() needs two or more values (over a generator it is not "
                              "supported)")
        items = [b.int_operand(a, name) for a in args]
        for a, it in zip(args, items):
            if isinstance(it.ty, ir.RefT):
                b.brk(it.ty.dim, a, f"{it.ty.dim} ids are compared by order ({name}())")
        ivs = [interval(it.ty, b.counts) for it in items]
        pick = min if name == "min" else max
        lo = None if any(v[0] is None for v in ivs) else pick(v[0] for v in ivs)  # type: ignore
        hi = None if any(v[1] is None for v in ivs) else pick(v[1] for v in ivs)  # type: ignore
        return ir.MinMax(name, items, ty=ir.IntT(lo, hi), line=node.lineno)
    if name == "abs":
        if len(args) != 1:
            raise b.err(node, "abs() takes one value")
        x = b.int_operand(args[0], "abs")
        lo, hi = interval(x.ty, b.counts)
        zero = b.const(0, ir.IntT(0, 0), node)
        neg = ir.Unary("neg", x, ty=ir.INT, line=node.lineno)
        bound = None if lo is None or hi is None else max(abs(lo), abs(hi))
        return ir.Cond(ir.Compare("<", x, zero, ty=ir.BOOL, line=node.lineno), neg, x,
                       ty=ir.IntT(0, bound), line=node.lineno)
    if name == "len":
        if len(args) != 1:
            raise b.err(node, "len() takes one argument")
        v = b.expr(args[0])
        if isinstance(v, _Marker) and v.what == "space":
            dim, n = v.value, b.counts[v.value]
        elif isinstance(v, ir.Expr) and isinstance(v.ty, (ir.VecT, ir.MaskT)):
            dim, n = v.ty.dim, _length(b, v.ty.dim)
        else:
            raise b.err(node, "len() applies to s.requests, s.pages, a state array or a mask")
        const = ir.Const(n, ty=ir.IntT(n, n), line=node.lineno, size=dim)
        b.scope.sized.append((b.file, const))
        return const
    if name in ("int", "bool", "float", "str"):
        raise b.err(node, f"{name}() conversions are not supported in model code")
    if name == "range":
        raise b.err(node, "range() can only be a loop domain (for i in range(n))")
    raise b.err(node, f"{name}() is not part of the model language")


def domain(b: ExprBuilder, node: ast.expr) -> ir.Domain:
    """A static loop domain: s.requests, s.pages, range(...), or a tuple of constants."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and node.func.id not in b.env and "range" not in b.body.fn.__globals__:
        if node.keywords or not 1 <= len(node.args) <= 3:
            raise b.err(node, "range() takes 1 to 3 constant arguments")
        vals = []
        for a in node.args:
            e = b.value(a)
            if not (isinstance(e, ir.Const) and isinstance(e.ty, ir.IntT)):
                raise b.err(node, "range() bounds must be constants or sizes (a loop must run "
                                  "over a static range)")
            vals.append(e.value)
        if len(vals) == 3 and vals[2] == 0:
            raise b.err(node, "range() step must not be zero")
        values = list(range(*vals))
        if len(values) > 100_000:
            raise b.err(node, "range() is too long for a model loop")
        lo = min(values) if values else 0
        hi = max(values) if values else 0
        return ir.Domain(values, ir.IntT(lo, hi))
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [b.scalar(e) for e in node.elts]
        if not all(isinstance(e, ir.Const) for e in items):
            raise b.err(node, "a loop over a tuple needs constant items")
        t: Any = items[0].ty if items else ir.IntT(0, 0)
        for it in items[1:]:
            t = join(t, it.ty)
            if t is None:
                raise b.err(node, "the items of the loop tuple have different types")
        return ir.Domain([it.value for it in items], t)
    v = b.expr(node)
    if isinstance(v, _Marker) and v.what == "space":
        return ir.Domain(list(range(b.counts[v.value])), ir.RefT(v.value, False))
    raise b.err(node, "a loop must run over s.requests, s.pages, range(n) with constant bounds, "
                      "or a tuple of constants (not over state-dependent values)")


def fold(b: ExprBuilder, name: str, gen: ast.GeneratorExp | ast.ListComp, node: Any) -> ir.Expr:
    if len(gen.generators) != 1:
        raise b.err(node, "a generator with several `for` clauses is not supported; nest the "
                          "reductions")
    g = gen.generators[0]
    if g.is_async or not isinstance(g.target, ast.Name):
        raise b.err(node, "the generator must bind one name (for x in ...)")
    var = g.target.id
    if var in b.env:
        raise b.err(node, f"the generator variable {var!r} shadows a local; choose another name")
    dom = domain(b, g.iter)
    b.env[var] = dom.ty
    b.defined.add(var)
    try:
        conds = [b.boolean(c, "a generator `if`") for c in g.ifs]
        if name == "sum":
            elt = b.int_operand(gen.elt, "sum")
        else:
            elt = b.boolean(gen.elt, f"the item of {name}()")
    finally:
        del b.env[var]
        b.defined.discard(var)
    if isinstance(dom.ty, ir.RefT) and _has_effects([*conds, elt]):
        b.brk(dom.ty.dim, node, f"a function with effects is called in a generator over "
                                f"{dom.ty.dim}s (order-dependent)")
    if name == "sum":
        lo, hi = interval(elt.ty, b.counts)
        n = len(dom.values)
        ty: Any = ir.IntT(None if lo is None else min(0, n * lo),
                          None if hi is None else max(0, n * hi))
    else:
        ty = ir.BOOL
    return ir.Fold(name, var, dom, conds, elt, ty=ty, line=node.lineno)


def helper_call(b: ExprBuilder, target: _Marker, node: ast.Call) -> ir.Expr:
    fn = target.value
    if not is_model_function(fn):
        raise b.err(node, f"{getattr(fn, '__qualname__', fn)}() is not part of the model "
                          "language (model code may call its own module-level functions and "
                          "methods, and kvspec's require/emit/count/any_/all_)")
    args: list[ir.Expr] = []
    types: list[Any] = []
    if target.what == "method":
        state = b.state_local(node)
        args.append(state)
        types.append(ir.StateT())
    for a in node.args:
        v = b.expr(a)
        if isinstance(v, _Marker):
            raise b.err(a, f"{ast.unparse(a)} cannot be passed to a function in model code")
        if isinstance(v.ty, ir.SpaceT) or (isinstance(v, ir.VecOf) and v.row is not None):
            raise b.err(a, f"{ast.unparse(a)} cannot be passed to a function")
        args.append(v)
        types.append(v.ty)
    n_params = fn.__code__.co_argcount
    if n_params != len(types):
        raise b.err(node, f"{fn.__name__}() takes {n_params} arguments, {len(types)} given"
                    + (" (the state is passed first for a method)" if target.what == "method"
                       else ""))
    callee = b.scope.helper(fn, types, b.file, node.lineno)
    call = ir.Call(callee, args, ty=callee.ret, line=node.lineno)
    note = getattr(b, "note_call", None)
    if note is not None:
        note(call, node)
    return call


def _has_effects(exprs: list[ir.Expr]) -> bool:
    for e in exprs:
        if isinstance(e, ir.Call) and e.fn.effects:
            return True
        if _has_effects(ir.sub_exprs(e)):
            return True
    return False
