"""Statements of the model language, with flow typing, definite assignment and the
symmetry rules for loops over ids."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from kvspec.lang import ir
from kvspec.lang.check_calls import domain
from kvspec.lang.check_expr import RUNTIME_FUNCTIONS, ExprBuilder, _Marker
from kvspec.lang.check_types import join, widen, within
from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import VarInfo
from kvspec.lang.types import PAGE, REQUEST, BoolType, EnumType, IntType, RefType

_AUG = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
        ast.BitAnd: "&", ast.BitOr: "|"}

#: how the symmetry analysis words the order dependences that the all-sizes reading
#: over-approximates instead of rejecting (kvspec.proofs.parametric.model)
CARRIES_LOCAL = "carries local"
STOPS_EARLY = "stops early with `break`"


@dataclass
class _Loop:
    var: str
    dim: str | None  # the id space the loop runs over (None for ranges/tuples)
    node: ast.For
    writes: list[tuple[VarInfo, ir.Expr | None]] = field(default_factory=list)
    reads: list[tuple[VarInfo, ir.Expr | None]] = field(default_factory=list)


class BodyBuilder(ExprBuilder):
    def __init__(self, scope: Any, body: Any, kind: str, params: list[tuple[str, Any]]) -> None:
        self.scope = scope
        self.body = body
        self.kind = kind
        self.params = params
        self.env: dict[str, Any] = {n: t for n, t in params}
        self.defined: set[str] = set(self.env)
        self.state = next((n for n, t in params if isinstance(t, ir.StateT)), None)
        self.loops: list[_Loop] = []
        self.returns: list[Any] = []
        self.effects = False
        self.value_return = any(isinstance(n, ast.Return) and n.value is not None
                                for n in ast.walk(body.tree))

    # -- entry -------------------------------------------------------------------------
    def build(self) -> ir.Function:
        tree = self.body.tree
        stmts, terminates = self.block(tree.body)
        ret = None
        if self.kind == "invariant" or self.value_return:
            if not terminates:
                last = tree.body[-1] if tree.body else tree
                what = "an invariant" if self.kind == "invariant" else f"{tree.name}()"
                raise self.err(getattr(last, "end_lineno", None) and last or tree,
                               f"{what} can reach its end without returning a value; every "
                               "path must end in `return <value>`")
            ret = self.returns[0]
            for t in self.returns[1:]:
                j = join(ret, t)
                if j is None:
                    raise self.err(tree, f"{tree.name}() returns values of different types "
                                         f"({ret.describe()} / {t.describe()})")
                ret = j
            if self.kind == "invariant" and not isinstance(ret, ir.BoolT):
                raise self.err(tree, f"invariant {tree.name} must return a bool, not "
                                     f"{ret.describe()}")
        return ir.Function(tree.name, self.kind, self.params, stmts, self.file, tree.lineno,
                           ret=ret, effects=self.effects)

    def state_local(self, node: Any) -> ir.Local:
        if self.state is None:
            raise self.err(node, "this function has no state parameter to pass on")
        return ir.Local(self.state, ty=ir.StateT(), line=getattr(node, "lineno", 0))

    # -- blocks ------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> tuple[list[ir.Stmt], bool]:
        out: list[ir.Stmt] = []
        for node in stmts:
            built, terminates = self.stmt(node)
            out.extend(built)
            if terminates:
                return out, True
        return out, False

    def stmt(self, node: ast.stmt) -> tuple[list[ir.Stmt], bool]:
        method = getattr(self, "s_" + type(node).__name__, None)
        if method is None:
            raise self.err(node, f"`{type(node).__name__}` statements are not supported in "
                                 "model code")
        return method(node)  # type: ignore[no-any-return]

    def s_Pass(self, node: ast.Pass) -> tuple[list[ir.Stmt], bool]:
        return [], False

    def s_Expr(self, node: ast.Expr) -> tuple[list[ir.Stmt], bool]:
        v = node.value
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            return [], False  # a docstring or comment string
        if not isinstance(v, ast.Call):
            raise self.err(node, "this expression statement has no effect")
        func = v.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            base = self.body.fn.__globals__.get(func.value.id)
            from kvspec.lang.runtime import emit as emit_obj
            if base is emit_obj and func.value.id not in self.env:
                return [self.emit(func.attr, v)], False
        target = self.expr(func) if not isinstance(func, ast.Attribute) or func.attr not in (
            "count", "any", "all", "is_none") else None
        if isinstance(target, _Marker) and target.what == "function" \
                and target.value in RUNTIME_FUNCTIONS:
            name = RUNTIME_FUNCTIONS[target.value]
            if name == "require":
                return [self.require(v)], False
            if name == "violate":
                return [self.violate(v)], False
        e = self.expr(v)
        if not isinstance(e, ir.Call):
            raise self.err(node, "this expression statement has no effect")
        return [ir.Do(e, line=node.lineno)], False

    # -- effects --------------------------------------------------------------------------
    def pure_only(self, node: Any, what: str) -> None:
        if self.kind == "invariant":
            raise self.err(node, f"an invariant must be read-only, but here {what}")

    def note_call(self, call: ir.Call, node: Any) -> None:
        if call.fn.effects:
            self.pure_only(node, f"{call.fn.name}() changes the state, emits or requires")
            self.effects = True
            for loop in self.loops:
                if loop.dim is not None:
                    self.brk(loop.dim, node, f"{call.fn.name}(), which has effects, is called in "
                                             f"a loop over {loop.dim}s (order-dependent)")

    def require(self, call: ast.Call) -> ir.Stmt:
        self.pure_only(call, "it calls require(...)")
        if self.kind == "handler":
            raise self.err(call, "monitors cannot use require(...)")
        if call.keywords or not 1 <= len(call.args) <= 2:
            raise self.err(call, "require(cond) or require(cond, \"message\")")
        if len(call.args) == 2 and not (isinstance(call.args[1], ast.Constant)
                                        and isinstance(call.args[1].value, str)):
            raise self.err(call, "the message of require must be a string literal")
        self.effects = True
        return ir.Require(self.boolean(call.args[0], "the condition of require"),
                          line=call.lineno)

    def emit(self, kind: str, call: ast.Call) -> ir.Stmt:
        self.pure_only(call, "it emits an event")
        if self.kind == "handler":
            raise self.err(call, "monitors cannot emit events")
        events = self.scope.events
        if kind not in events:
            raise self.err(call, f"unknown event kind {kind!r} (known: {', '.join(events)})")
        self.effects = True
        needs_page = events[kind]
        args = list(call.args)
        kw = {k.arg: k.value for k in call.keywords}
        if None in kw or set(kw) - {"page", "pages"}:
            raise self.err(call, f"emit.{kind} takes (request, page) or (request, pages=mask)")
        if not args:
            raise self.err(call, f"emit.{kind} needs the request id as first argument")
        if len(args) > 2 or (len(args) == 2 and kw):
            raise self.err(call, f"emit.{kind} takes (request, page) or (request, pages=mask)")
        request, check_r = self.id_value(args[0], "request", f"emit.{kind}")
        page_node = args[1] if len(args) == 2 else kw.get("page")
        pages_node = kw.get("pages")
        if not needs_page and (page_node is not None or pages_node is not None):
            raise self.err(call, f"emit.{kind}: this event takes no page")
        if needs_page:
            if self.counts.get("page", 0) == 0:
                raise self.err(call, f"emit.{kind}: the model declares no pages")
            if pages_node is not None:
                m = self.value(pages_node)
                if not (isinstance(m.ty, ir.MaskT) and m.ty.dim == "page") and not (
                        isinstance(m.ty, ir.VecT) and m.ty.dim == "page"
                        and isinstance(m.ty.elem, ir.BoolT)):
                    raise self.err(call, f"emit.{kind}: pages= must be a mask over pages")
                return ir.Emit(kind, request, None, self.as_mask(m, pages_node),
                               check_request=check_r, line=call.lineno)
            if page_node is None:
                raise self.err(call, f"emit.{kind}: this event needs a page (or pages=mask)")
            page, check_p = self.id_value(page_node, "page", f"emit.{kind}")
            return ir.Emit(kind, request, page, None, check_request=check_r,
                           check_page=check_p, line=call.lineno)
        return ir.Emit(kind, request, None, None, check_request=check_r, line=call.lineno)

    def id_value(self, node: ast.expr, dim: str, what: str) -> tuple[ir.Expr, bool]:
        e = self.scalar(node)
        t = e.ty
        n = self.counts.get(dim, 0)
        if isinstance(t, ir.RefT) and t.dim == dim:
            return e, t.optional
        if isinstance(t, ir.IntT):
            if isinstance(e, ir.Const):
                self.brk(dim, node, f"{what} with a literal {dim} id")
                if not 0 <= e.value < n:
                    raise self.err(node, f"{what}: {dim} {e.value} is not a {dim} id")
            else:
                self.brk(dim, node, f"{what} with an int used as a {dim} id")
            return e, not within(t, 0, n - 1, self.counts)
        raise self.err(node, f"{what}: {ast.unparse(node)} is {t.describe()}, not a {dim} id")

    def violate(self, call: ast.Call) -> ir.Stmt:
        if self.kind != "handler":
            raise self.err(call, "violate(...) is only for property monitors")
        if len(call.args) != 2:
            raise self.err(call, "violate(PROPERTY, \"message\", name=value, ...)")
        prop = self.expr(call.args[0])
        fmt = self.expr(call.args[1])
        if not (isinstance(prop, _Marker) and prop.what == "str" and isinstance(fmt, _Marker)
                and fmt.what == "str"):
            raise self.err(call, "violate() needs a property name and a message string")
        if prop.value not in self.scope.properties:
            raise self.err(call, f"violate(): unknown property {prop.value!r}")
        self.effects = True
        args = []
        for k in call.keywords:
            v = self.value(k.value)
            if isinstance(v.ty, ir.VecT):
                v = self.as_mask(v, k.value)
            if not (ir.is_scalar(v.ty) or isinstance(v.ty, ir.MaskT)):
                raise self.err(call, f"violate(): {k.arg}= must be a value or a mask")
            args.append((k.arg or "", v))
        return ir.Violate(prop.value, fmt.value, args, line=call.lineno)

    # -- assignments ------------------------------------------------------------------------
    def s_Assign(self, node: ast.Assign) -> tuple[list[ir.Stmt], bool]:
        out: list[ir.Stmt] = []
        for target in node.targets:
            out.extend(self.assign(target, node.value, node))
        return out, False

    def s_AnnAssign(self, node: ast.AnnAssign) -> tuple[list[ir.Stmt], bool]:
        if node.value is None:
            return [], False
        return self.assign(node.target, node.value, node), False

    def s_AugAssign(self, node: ast.AugAssign) -> tuple[list[ir.Stmt], bool]:
        if type(node.op) not in _AUG:
            raise self.err(node, "this augmented assignment is not supported")
        as_load = ast.BinOp(left=_load(node.target), op=node.op, right=node.value)
        ast.copy_location(as_load, node)
        ast.fix_missing_locations(as_load)
        return self.assign(node.target, as_load, node), False

    def assign(self, target: ast.expr, value: ast.expr, node: Any) -> list[ir.Stmt]:
        if isinstance(target, ast.Name):
            v = self.value(value)
            if isinstance(v.ty, ir.VecT):
                raise self.err(node, "a local cannot hold a whole state array; keep reading it "
                                     "as s.x (or build a mask, e.g. s.x == v)")
            return [self.set_local(target.id, v, node)]
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (ast.Tuple, ast.List)) or len(value.elts) != len(target.elts):
                raise self.err(node, "tuple assignment needs a tuple of the same length on the "
                                     "right (a, b = x, y)")
            if not all(isinstance(t, ast.Name) for t in target.elts):
                raise self.err(node, "tuple assignment can only assign locals")
            values = [self.value(v) for v in value.elts]
            names = [t.id for t in target.elts]  # type: ignore[attr-defined]
            if len(set(names)) != len(names):
                raise self.err(node, "a name appears twice on the left of a tuple assignment")
            for n, v in zip(names, values):
                self.declare_local(n, v.ty, node)
            return [ir.Assign(names, values, line=node.lineno)]
        if isinstance(target, ast.Attribute):
            base = self.expr(target.value)
            if not (isinstance(base, ir.Local) and isinstance(base.ty, ir.StateT)):
                raise self.err(node, "only locals and state variables (s.x, s.x[i]) can be "
                                     "assigned")
            info = self.state_var(target, target.attr)
            if info.dim != SCALAR:
                raise self.err(node, f"{info.name} is a per-{info.dim} array; assign an element "
                                     f"(s.{info.name}[i] = v) or a masked set "
                                     f"(s.{info.name}[mask] = v)")
            v, check = self.store_value(info, self.value(value), node)
            self.note_write(info, None, node)
            return [ir.Store(info, None, v, False, check, line=node.lineno)]
        if isinstance(target, ast.Subscript):
            if isinstance(target.value, ast.Subscript):
                raise self.err(node, "a masked or indexed assignment into a row or column "
                                     "(s.x[r][m] = v) is not supported; write s.x[r, k] = v "
                                     "in a loop over the row's space (for k in s.ranks)")
            if not (isinstance(target.value, ast.Attribute)):
                raise self.err(node, "only locals and state variables (s.x, s.x[i]) can be "
                                     "assigned")
            base = self.expr(target.value.value)
            if not (isinstance(base, ir.Local) and isinstance(base.ty, ir.StateT)):
                raise self.err(node, "only locals and state variables (s.x, s.x[i]) can be "
                                     "assigned")
            info = self.state_var(target.value, target.value.attr)
            if info.dim == SCALAR:
                raise self.err(node, f"{info.name} is a scalar; it cannot be indexed")
            if info.two_d and not self.is_mask_index(target.slice):
                return self.grid_store(info, target, value, node)
            if isinstance(target.slice, ast.Tuple):
                raise self.err(node, "multi-dimensional indexing needs a two-dimensional array "
                                     "(declared requests.by(ranks).var(...))")
            idx = self.value(target.slice)
            v = self.value(value)
            if isinstance(idx.ty, (ir.MaskT, ir.VecT)):
                m = self.as_mask(idx, target.slice)
                if m.ty.dim != info.dim:
                    raise self.err(node, f"{info.name} is indexed by {info.dim} ids; the mask is "
                                         f"over {m.ty.dim}s")
                v, check = self.store_value(info, v, node)
                self.note_write(info, m, node)
                return [ir.MaskStore(info, m, v, check, line=node.lineno)]
            idx, check_i = self.index(info, idx, node)
            v, check_v = self.store_value(info, v, node)
            self.note_write(info, idx, node)
            return [ir.Store(info, idx, v, check_i, check_v, line=node.lineno)]
        raise self.err(node, "only locals and state variables (s.x, s.x[i]) can be assigned")

    def is_mask_index(self, node: ast.expr) -> bool:
        """``s.x[m] = v`` with ``m`` a mask over the whole (two-dimensional) array."""
        if isinstance(node, (ast.Tuple, ast.Slice)):
            return False
        e = self.expr(node)
        return isinstance(e, ir.Expr) and isinstance(e.ty, (ir.MaskT, ir.VecT))

    def grid_store(self, info: VarInfo, target: ast.Subscript, value: ast.expr,
                   node: Any) -> list[ir.Stmt]:
        """``s.x[i, j] = v`` (one element), or ``s.x[i, :] = v`` / ``s.x[:, j] = v`` (a
        whole line: one store per id of the line's axis, in id order)."""
        got = self.two_d(ir.VecOf(info, ty=ir.VecT(info.name, info.dim, None),
                                  line=node.lineno), target)
        v, check_v = self.store_value(info, self.value(value), node)
        if isinstance(got, ir.Load):
            assert got.axes is not None
            self.note_write(info, got.axes, node)
            return [ir.Store(info, got.index, v, False, check_v, axes=got.axes,
                             line=node.lineno)]
        if not (isinstance(got, ir.VecOf) and got.row is not None):
            raise self.err(node, f"assign an element or a line: {info.name}[i, j] = v, "
                                 f"{info.name}[i, :] = v or {info.name}[:, j] = v")
        along = got.along
        dim = info.axes[along]
        var = f"_line{node.lineno}_{node.col_offset}"
        if var in self.env:
            raise self.err(node, "nested line assignments on one line are not supported")
        fixed = self.local_copy(got.row, node)
        k = ir.Local(var, ty=ir.RefT(dim, False), line=node.lineno)
        ij = (fixed[1], k) if along == 1 else (k, fixed[1])
        axes: tuple[Any, Any] = (got.row, None) if along == 1 else (None, got.row)
        self.note_write(info, axes, node)
        flat = self.flat_slot(info, ij[0], ij[1], node)
        dom = ir.Domain(list(range(info.shape[along])), ir.RefT(dim, False))
        store = ir.Store(info, flat, v, False, check_v, axes=ij, line=node.lineno)
        return fixed[0] + [ir.For(var, dom, [store], line=node.lineno)]

    def local_copy(self, e: ir.Expr, node: Any) -> tuple[list[ir.Stmt], ir.Expr]:
        """``e`` evaluated once before a loop: a constant or local as it is, anything else
        into a fresh local."""
        if isinstance(e, (ir.Const, ir.Local)):
            return [], e
        name = f"_fix{node.lineno}_{node.col_offset}"
        self.env[name] = e.ty
        self.defined.add(name)
        return ([ir.Assign([name], [e], line=node.lineno)],
                ir.Local(name, ty=e.ty, line=node.lineno))

    def state_var(self, node: ast.Attribute, name: str) -> VarInfo:
        self.pure_only(node, f"it assigns s.{name}")
        got = self.state_attr(node)
        if not isinstance(got, (ir.Load, ir.VecOf)):
            raise self.err(node, f"s.{name} is not a state variable and cannot be assigned")
        self.effects = True
        return got.var

    def set_local(self, name: str, v: ir.Expr, node: Any) -> ir.Stmt:
        if name == self.state:
            raise self.err(node, "the state parameter cannot be reassigned")
        self.declare_local(name, v.ty, node)
        return ir.Assign([name], [v], line=node.lineno)

    def declare_local(self, name: str, t: Any, node: Any) -> None:
        old = self.env.get(name)
        if isinstance(t, ir.StateT) or isinstance(old, ir.StateT):
            raise self.err(node, "the state cannot be held in a local")
        if old is not None:
            j = join(old, t)
            if j is None:
                raise self.err(node, f"local {name!r} holds {old.describe()} and here "
                                     f"{t.describe()}; use a separate name")
            t = j
        self.env[name] = t
        self.defined.add(name)

    def store_value(self, info: VarInfo, v: ir.Expr, node: Any) -> tuple[ir.Expr, bool]:
        """Check that ``v`` may be stored in ``info``; (value, needs a range check)."""
        vt = info.type
        t = v.ty
        where = f"{info.name}"
        if isinstance(t, (ir.MaskT, ir.VecT)):
            raise self.err(node, f"cannot store {t.describe()} in {where} ({vt.describe()})")
        if isinstance(vt, BoolType):
            if isinstance(t, ir.BoolT):
                return v, False
        elif isinstance(vt, IntType):
            if isinstance(t, ir.RefT):
                self.brk(t.dim, node, f"a {t.dim} id is stored in an int variable")
                return v, not within(t, vt.lo, vt.hi, self.counts)
            if isinstance(t, ir.IntT):
                if isinstance(v, ir.Const) and not vt.lo <= v.value <= vt.hi:
                    raise self.err(node, f"write {where} = {v.value}: {v.value} is outside "
                                         f"{vt.lo}..{vt.hi}")
                return v, not within(t, vt.lo, vt.hi, self.counts)
        elif isinstance(vt, EnumType):
            if isinstance(t, ir.EnumT) and t.cls is vt.cls:
                return v, False
        elif isinstance(vt, RefType):
            dim = vt.ref_dim
            assert dim is not None
            if isinstance(t, ir.NoneT):
                if vt.optional:
                    return v, False
                raise self.err(node, f"write {where} = None: None is not a {dim} id (declare "
                                     "the type optional)")
            if isinstance(t, ir.RefT) and t.dim == dim:
                return v, t.optional and not vt.optional
            if isinstance(t, ir.IntT):
                if isinstance(v, ir.Const):
                    self.brk(dim, node, f"a literal {dim} id is stored")
                    if not 0 <= v.value < vt.count:
                        raise self.err(node, f"write {where} = {v.value}: {dim} id {v.value} is "
                                             f"outside 0..{vt.count - 1}")
                else:
                    self.brk(dim, node, f"an int is stored as a {dim} id")
                return v, not within(t, 0, vt.count - 1, self.counts)
        raise self.err(node, f"cannot store {t.describe()} in {where} ({vt.describe()})")

    def note_write(self, info: VarInfo, idx: ir.Expr | None, node: Any) -> None:
        for loop in self.loops:
            loop.writes.append((info, idx))

    # -- control flow ------------------------------------------------------------------------
    def s_If(self, node: ast.If) -> tuple[list[ir.Stmt], bool]:
        test = self.boolean(node.test, "the condition of `if`")
        before = set(self.defined)
        then, t_term = self.block(node.body)
        after_then = self.defined
        self.defined = set(before)
        orelse, e_term = self.block(node.orelse)
        after_else = self.defined
        if t_term and e_term:
            self.defined = after_then & after_else
        elif t_term:
            self.defined = after_else
        elif e_term:
            self.defined = after_then
        else:
            self.defined = after_then & after_else
        if isinstance(test, ir.Const):
            return (then if test.value else orelse), (t_term if test.value else e_term)
        return [ir.If(test, then, orelse, line=node.lineno)], t_term and e_term

    def s_For(self, node: ast.For) -> tuple[list[ir.Stmt], bool]:
        if node.orelse:
            raise self.err(node, "`for ... else` is not supported")
        if not isinstance(node.target, ast.Name):
            raise self.err(node, "a loop must bind one name (for x in ...)")
        var = node.target.id
        if var == self.state:
            raise self.err(node, "the state parameter cannot be a loop variable")
        if var in self.defined:
            # Python would leave it at the loop's last value afterwards: an id picked by
            # the order of the loop, which no symmetry rule could see
            raise self.err(node, f"the loop variable {var!r} already names a parameter or "
                                 "local here (or an enclosing loop's variable); choose "
                                 "another name")
        dom = domain(self, node.iter)
        dim = dom.ty.dim if isinstance(dom.ty, ir.RefT) else None
        before = set(self.defined)
        self.declare_local(var, dom.ty, node)
        body: list[ir.Stmt] = []
        for attempt in range(4):
            snapshot = dict(self.env)
            self.defined = before | {var}
            loop = _Loop(var, dim, node)
            self.loops.append(loop)
            try:
                body, _ = self.block(node.body)
            finally:
                self.loops.pop()
            if self.env == snapshot:
                break
            if attempt >= 1:
                for name, t in self.env.items():
                    if t != snapshot.get(name):
                        self.env[name] = widen(t)
        self.defined = before
        if dim is not None:
            self.loop_symmetry(loop, before, body)
        for outer in self.loops:
            outer.writes.extend(loop.writes)
        return [ir.For(var, dom, body, line=node.lineno)], False

    def loop_symmetry(self, loop: _Loop, before: set[str], body: list[ir.Stmt]) -> None:
        """A loop over ids must not depend on the order of the ids."""
        dim = loop.dim
        assert dim is not None
        node = loop.node
        inside = {id(n) for n in ast.walk(node)}
        assigned = {n.id for st in node.body for n in ast.walk(st)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - {loop.var}
        read_outside = {n.id for n in ast.walk(self.body.tree)
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                        and id(n) not in inside}
        carried = sorted(assigned & (before | read_outside))
        if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == loop.var
               for st in node.body for n in ast.walk(st)):
            self.brk(dim, node, f"the loop over {dim}s assigns its variable {loop.var!r} in its "
                                "body (order-dependent)")
        why = _emit_order(body, loop.var, dim)
        if why:
            self.brk(dim, node, f"the loop over {dim}s {why}, which the property monitors see "
                                f"in {dim} order (order-dependent)")
        for name in carried:
            self.brk(dim, node, f"the loop over {dim}s {CARRIES_LOCAL} {name!r} from one "
                                "iteration to the next (order-dependent; use masks or count())")
        for sub in ast.walk(node):
            if isinstance(sub, ast.Break) and _innermost_loop(node, sub) is node:
                self.brk(dim, sub, f"the loop over {dim}s {STOPS_EARLY} (order-dependent)")
            if isinstance(sub, ast.Return):
                self.brk(dim, sub, f"`return` inside a loop over {dim}s (order-dependent)")
        written: set[str] = set()
        for info, idx in loop.writes:
            if not _at_loop_var(info, idx, loop):
                self.brk(dim, node, f"the loop over {dim}s writes {info.name} at another index "
                                    "than the loop variable (order-dependent)")
            written.add(info.name)
        for name, idx in _ir_reads(body):
            info = self.scope.var(name)
            if name in written and not (info is not None and _at_loop_var(info, idx, loop)):
                self.brk(dim, node, f"the loop over {dim}s writes {name} and reads it at "
                                    "another index (order-dependent)")

    def s_Break(self, node: ast.Break) -> tuple[list[ir.Stmt], bool]:
        return [ir.Break(line=node.lineno)], True

    def s_Continue(self, node: ast.Continue) -> tuple[list[ir.Stmt], bool]:
        return [ir.Continue(line=node.lineno)], True

    def s_Return(self, node: ast.Return) -> tuple[list[ir.Stmt], bool]:
        if node.value is None:
            if self.value_return or self.kind == "invariant":
                raise self.err(node, "this function returns a value on other paths; return a "
                                     "value here too")
            return [ir.Return(None, line=node.lineno)], True
        if self.kind in ("action", "handler"):
            raise self.err(node, "an action returns nothing (use `return` alone to stop early)")
        v = self.value(node.value)
        if isinstance(v.ty, ir.VecT):
            raise self.err(node, "a function cannot return a whole state array")
        self.returns.append(v.ty)
        return [ir.Return(v, line=node.lineno)], True


def _at_loop_var(info: VarInfo, idx: Any, loop: Any) -> bool:
    """An access of ``info`` at ``idx`` (an index, or a pair of indices of a 2-D array,
    None for a whole line) is at the loop variable of ``loop`` along the loop's space."""
    if isinstance(idx, tuple):
        axes = info.axes
        if loop.dim not in axes:
            return False
        at = idx[axes.index(loop.dim)]
        return isinstance(at, ir.Local) and at.name == loop.var
    return isinstance(idx, ir.Local) and idx.name == loop.var


def _emit_order(body: list[ir.Stmt], var: str, dim: str) -> str:
    """Why the events a loop over ids emits may reach the monitors in an order that
    matters ('' when they cannot). The monitors' per-page state changes only at an
    event's own page and their per-request state only at its request (checks may read
    other state: ``ack`` reads every page's writes in flight), so the iterations
    commute when, over pages, every page event is at the loop's page and any event
    without a page is the loop's only kind of event; over requests, when every event
    is one without a page, for the loop's request."""
    emits = [st for st in ir.walk_stmts(body) if isinstance(st, ir.Emit)]
    if not emits:
        return ""
    here = lambda e: isinstance(e, ir.Local) and e.name == var  # noqa: E731
    kinds = sorted({st.kind for st in emits})
    for st in emits:
        if st.pages is not None:
            return f"emits {st.kind} over a mask of pages"
        if dim == PAGE and st.page is not None and not here(st.page):
            return f"emits {st.kind} for another page than the loop's"
        if dim == PAGE and st.page is None and len(kinds) > 1:
            return f"emits {' and '.join(kinds)}"
        if dim == REQUEST and (st.page is not None or not here(st.request)):
            return f"emits {st.kind} for another request than the loop's, or for a page"
    return ""


def _innermost_loop(outer: ast.For, target: ast.AST) -> ast.AST | None:
    """The innermost for-loop (inside ``outer``, or ``outer``) containing ``target``."""
    best: ast.AST | None = None
    for n in ast.walk(outer):
        if isinstance(n, ast.For) and any(x is target for x in ast.walk(n)):
            if best is None or any(x is n for x in ast.walk(best)):
                best = n
    return best


#: what an index names inside a called function when it is not one of its parameters
#: (the callee's own locals and loop variables): never the caller's loop variable
_ELSEWHERE = ir.Local("#elsewhere")


def _ir_reads(body: list[ir.Stmt]) -> list[tuple[str, Any]]:
    """State variables a body reads, inside called functions too: (name, index or None
    for a whole-array or scalar read). An index inside a called function is given as
    the caller's expression its parameter was bound to, unless the callee assigns the
    parameter; the callee's other locals (its own loops, generators) are
    ``_ELSEWHERE``, so no read is taken for one at the caller's loop variable by name."""
    out: list[tuple[str, Any]] = []
    walked: set[tuple[Any, ...]] = set()  # (callee, its bindings) already read

    def name_of(e: Any, env: dict[str, Any] | None) -> Any:
        """``e`` as the caller sees it (``env``: the names bound in a callee; None at
        the top)."""
        if isinstance(e, tuple):
            return tuple(name_of(x, env) for x in e)
        if isinstance(e, ir.Local) and env is not None:
            return env.get(e.name, _ELSEWHERE)
        return e

    def expr(e: ir.Expr, env: dict[str, Any] | None) -> None:
        if isinstance(e, ir.Load):
            out.append((e.var.name, name_of(e.axes if e.axes is not None else e.index, env)))
        elif isinstance(e, ir.VecOf):
            line = None
            if e.row is not None:
                row = name_of(e.row, env)
                line = (row, None) if e.along == 1 else (None, row)
            out.append((e.var.name, line))
        elif isinstance(e, ir.Local) and isinstance(e.ty, ir.VecT):
            out.append((e.ty.var, None))
        elif isinstance(e, ir.Call):
            # a parameter the callee assigns is no longer the caller's argument
            assigned = {n for st in ir.walk_stmts(e.fn.body) if isinstance(st, ir.Assign)
                        for n in st.names}
            bound = {n: name_of(a, env) for (n, _), a in zip(e.fn.params, e.args)
                     if n not in assigned}
            key = (id(e.fn), tuple(sorted((n, id(v)) for n, v in bound.items())))
            if key not in walked:
                walked.add(key)
                stmts(e.fn.body, bound)
        # a generator's variable never shadows a local (the checker refuses that), and
        # inside a callee every name that is not a parameter is _ELSEWHERE already
        for x in ir.sub_exprs(e):
            expr(x, env)

    def stmts(b: list[ir.Stmt], env: dict[str, Any] | None) -> None:
        for st in b:
            for e in ir.stmt_exprs(st):
                expr(e, env)
            if isinstance(st, ir.If):
                stmts(st.body, env)
                stmts(st.orelse, env)
            elif isinstance(st, ir.For):
                stmts(st.body, env if env is None else {**env, st.var: _ELSEWHERE})

    stmts(body, None)
    return out


def _load(target: ast.expr) -> ast.expr:
    """The load form of an assignment target (for augmented assignment)."""
    import copy
    t = copy.deepcopy(target)
    for n in ast.walk(t):
        if hasattr(n, "ctx"):
            n.ctx = ast.Load()
    return t
