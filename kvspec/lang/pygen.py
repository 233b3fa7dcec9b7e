"""The concrete interpretation: IR compiled to straight-line Python over the state tuple.

Every IR construct becomes the Python expression or statement with exactly the
meaning documented in :mod:`kvspec.lang.ir` (on encoded values), so the
explicit engine, fuzzing, trace replay and the symbolic interpretation agree by
construction. Per action the generated code has:

* ``a<i>(S, *args)`` — one step: the leading ``require``\\ s are tested on the
  tuple ``S`` before anything is copied; then the body runs on a list copy, the
  emitted events are dispatched to the property monitors, and
  ``(next_state_list, events, violations)`` is returned (None when disabled);
* ``g<i>(S, *some_args)`` — the leading guards over the parameters they use,
  so the engines can skip whole groups of instances.

Model errors raise :class:`ModelError` with the file and line of the IR node.
"""
from __future__ import annotations

from typing import Any, Callable

from kvspec.lang import ir
from kvspec.lang.errors import ModelError

_PREAMBLE = '''
class _Disabled(Exception):
    pass

_DISABLED = _Disabled()
_DIS = object()
_CUR = [None]

def _err(i, *vals):
    msg, file, line = _ERRORS[i]
    raise _ModelError(msg.format(*vals), file, line)

def _ck(x, n, i):
    if 0 <= x < n:
        return x
    _err(i, x)

def _cv(x, lo, hi, i):
    if lo <= x <= hi:
        return x
    _err(i, x)

def _line(W, b, step, n):
    return W[b:b + step * (n - 1) + 1:step]

def _veq(xs, v):
    return tuple([x == v for x in xs])

def _vne(xs, v):
    return tuple([x != v for x in xs])

def _vlt(xs, v):
    return tuple([x < v for x in xs])

def _vle(xs, v):
    return tuple([x <= v for x in xs])

def _vgt(xs, v):
    return tuple([x > v for x in xs])

def _vge(xs, v):
    return tuple([x >= v for x in xs])

def _mstore(W, off, m, v):
    for k, b in enumerate(m):
        if b:
            W[off + k] = v
'''

_VEC = {"==": "_veq", "!=": "_vne", "<": "_vlt", "<=": "_vle", ">": "_vgt", ">=": "_vge"}


class PyGen:
    """Generates one Python module for all functions of a system."""

    def __init__(self, schema: Any, req_formatter: Callable[[str, dict[str, Any]], str],
                 flags: dict[str, int]) -> None:
        self.schema = schema
        self.flags = flags
        self.errors: list[tuple[str, str, int]] = []
        self.lines: list[str] = []
        self.formatter = req_formatter
        #: whether any monitor handles events (set by :meth:`dispatch`; actions generated
        #: before it always dispatch)
        self.has_handlers = True

    # -- errors ------------------------------------------------------------------------
    def error(self, message: str, file: str, line: int) -> int:
        self.errors.append((message.replace("{", "{{").replace("}", "}}").replace(
            "{{0}}", "{0}").replace("{{0!r}}", "{0!r}"), file, line))
        return len(self.errors) - 1

    # -- expressions ---------------------------------------------------------------------
    def vec(self, e: ir.Expr, fn: ir.Function | None = None) -> str:
        """A state array (or one page's row of a (page, request) array) as a slice of W."""
        if isinstance(e, ir.VecOf) and e.row is not None:
            assert fn is not None
            var = e.var
            fixed = var.strides[1 - e.along]
            base = f"{var.offset} + {fixed} * {self.ex(e.row, fn)}"
            return f"_line(W, {base}, {var.strides[e.along]}, {var.shape[e.along]})"
        var = self.schema.by_name[e.ty.var]
        return f"W[{var.offset}:{var.offset + var.length}]"

    def ex(self, e: ir.Expr, fn: ir.Function) -> str:  # noqa: C901 - one case per node
        if isinstance(e, ir.Const):
            return repr(e.value)
        if isinstance(e, ir.Local):
            if isinstance(e.ty, ir.VecT):
                return self.vec(e)
            return "v_" + e.name
        if isinstance(e, ir.Load):
            off = e.var.offset
            if e.index is None:
                return f"W[{off}]"
            if isinstance(e.index, ir.Const):
                return f"W[{off + e.index.value}]"
            idx = self.ex(e.index, fn)
            if e.check:
                i = self.error(f"{e.var.name}[{{0!r}}]: index out of range 0..{e.var.length - 1}",
                               fn.file, e.line)
                idx = f"_ck({idx}, {e.var.length}, {i})"
            return f"W[{off} + {idx}]"
        if isinstance(e, ir.VecOf):
            return self.vec(e, fn)
        if isinstance(e, ir.Uniform):
            n = self.schema.counts[e.ty.dim] if e.ty.dim in self.schema.counts else e.var.length
            return f"({e.value!r},) * {n}"
        if isinstance(e, ir.Unary):
            x = self.ex(e.x, fn)
            if e.op == "not":
                return f"(not {x})"
            if e.op == "neg":
                return f"(-{x})"
            return f"tuple([not b for b in {x}])"
        if isinstance(e, ir.Arith):
            return f"({self.ex(e.a, fn)} {e.op} {self.ex(e.b, fn)})"
        if isinstance(e, ir.Compare):
            return f"({self.ex(e.a, fn)} {e.op} {self.ex(e.b, fn)})"
        if isinstance(e, ir.BoolOp):
            return "(" + f" {e.op} ".join(self.ex(x, fn) for x in e.items) + ")"
        if isinstance(e, ir.Cond):
            return f"({self.ex(e.then, fn)} if {self.ex(e.test, fn)} else {self.ex(e.orelse, fn)})"
        if isinstance(e, ir.VecCompare):
            a = self.ex(e.a, fn)
            if isinstance(e.b.ty, ir.VecT):
                return f"tuple([x {e.op} y for x, y in zip({a}, {self.ex(e.b, fn)})])"
            if e.op == "==" and isinstance(e.b, ir.Const) and e.b.value is True:
                return f"tuple({a})"
            return f"{_VEC[e.op]}({a}, {self.ex(e.b, fn)})"
        if isinstance(e, ir.MaskOp):
            a, b = (self.ex(x, fn) for x in e.items)
            op = "and" if e.op == "&" else "or"
            return f"tuple([x {op} y for x, y in zip({a}, {b})])"
        if isinstance(e, ir.Reduce):
            m = e.mask
            if isinstance(m, ir.VecCompare) and m.op == "==" and e.op in ("count", "sum", "any") \
                    and not isinstance(m.b.ty, ir.VecT) \
                    and not (isinstance(m.b, ir.Const) and m.b.value is True):
                # the same count / test without building the mask (``==`` item by item)
                a, b = self.ex(m.a, fn), self.ex(m.b, fn)
                # (parenthesised: a uniform array is ``(v,) * n``)
                return f"({a}).count({b})" if e.op != "any" else f"({a}).__contains__({b})"
            return _reduction(e.op, self.ex(e.mask, fn))
        if isinstance(e, ir.Fold):
            values = "(" + "".join(f"{v}, " for v in e.domain.values) + ")"
            conds = "".join(f" if {self.ex(c, fn)}" for c in e.conds)
            return _reduction(e.op, f"[{self.ex(e.elt, fn)} for v_{e.var} in {values}{conds}]")
        if isinstance(e, ir.MinMax):
            return f"{e.op}(" + ", ".join(self.ex(x, fn) for x in e.items) + ")"
        if isinstance(e, ir.Call):
            args = [self.ex(a, fn) for a, (_, t) in zip(e.args, e.fn.params)
                    if not isinstance(t, (ir.StateT, ir.VecT))]
            return f"{e.fn.key}(W, E, V" + "".join(", " + a for a in args) + ")"
        raise TypeError(f"no code for {type(e).__name__}")

    # -- statements -------------------------------------------------------------------
    def emit_line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def block(self, body: list[ir.Stmt], fn: ir.Function, depth: int) -> None:
        if not body:
            self.emit_line(depth, "pass")
        for st in body:
            self.stmt(st, fn, depth)

    def value_check(self, value: str, var: Any, check: bool, fn: ir.Function, line: int,
                    where: str) -> str:
        if not check:
            return value
        vt = var.type
        lo, hi = min(vt.domain()), max(vt.domain())
        desc = (f"{vt.ref_dim} id {{0}} is outside 0..{hi}" if vt.kind == "ref"
                else f"{{0}} is outside {lo}..{hi}")
        if vt.kind == "ref" and not vt.optional:
            desc = f"{{0}} is not a {vt.ref_dim} id (0..{hi})"
        i = self.error(f"write {where} = {{0}}: {desc}", fn.file, line)
        return f"_cv({value}, {lo}, {hi}, {i})"

    def stmt(self, st: ir.Stmt, fn: ir.Function, depth: int) -> None:  # noqa: C901
        put = self.emit_line
        if isinstance(st, ir.Assign):
            if len(st.names) == 1:
                put(depth, f"v_{st.names[0]} = {self.ex(st.values[0], fn)}")
            else:
                put(depth, ", ".join("v_" + n for n in st.names) + " = "
                    + ", ".join(self.ex(v, fn) for v in st.values))
        elif isinstance(st, ir.Store):
            var = st.var
            if st.index is None:
                put(depth, f"W[{var.offset}] = "
                    + self.value_check(self.ex(st.value, fn), var, st.check_value, fn, st.line,
                                       var.name))
            else:
                idx = self.ex(st.index, fn)
                if st.check_index:
                    i = self.error(f"write {var.name}[{{0!r}}]: index out of range "
                                   f"0..{var.length - 1}", fn.file, st.line)
                    idx = f"_ck({idx}, {var.length}, {i})"
                value = self.value_check(self.ex(st.value, fn), var, st.check_value, fn, st.line,
                                         f"{var.name}[...]")
                put(depth, f"_v = {value}")
                put(depth, f"W[{var.offset} + {idx}] = _v")
        elif isinstance(st, ir.MaskStore):
            var = st.var
            value = self.value_check(self.ex(st.value, fn), var, st.check_value, fn, st.line,
                                     f"{var.name}[mask]")
            put(depth, f"_mstore(W, {var.offset}, {self.ex(st.mask, fn)}, {value})")
        elif isinstance(st, ir.Require):
            fail = "raise _DISABLED" if fn.kind == "helper" else "return _DIS"
            put(depth, f"if not {self.ex(st.cond, fn)}:")
            put(depth + 1, fail)
        elif isinstance(st, ir.Emit):
            r = self.ex(st.request, fn)
            n_r = self.schema.requests
            if st.check_request:
                i = self.error(f"emit.{st.kind}: request {{0!r}} is not a request id "
                               f"(0..{n_r - 1})", fn.file, st.line)
                r = f"_ck({r}, {n_r}, {i})"
            if st.pages is not None:
                put(depth, f"_r = {r}")
                put(depth, f"E.extend([_EV({st.kind!r}, _r, _k) for _k, _b in "
                    f"enumerate({self.ex(st.pages, fn)}) if _b])")
            elif st.page is not None:
                p = self.ex(st.page, fn)
                n_p = self.schema.pages
                if st.check_page:
                    i = self.error(f"emit.{st.kind}: page {{0!r}} is not a page id "
                                   f"(0..{n_p - 1})", fn.file, st.line)
                    p = f"_ck({p}, {n_p}, {i})"
                put(depth, f"E.append(_EV({st.kind!r}, {r}, {p}))")
            else:
                put(depth, f"E.append(_EV({st.kind!r}, {r}, None))")
        elif isinstance(st, ir.Violate):
            off = self.flags.get(st.prop)
            if off is not None:
                args = "{" + ", ".join(f"{k!r}: {self.ex(v, fn)}" for k, v in st.args) + "}"
                put(depth, f"W[{off}] = True")
                put(depth, f"V.append(({st.prop!r}, _fmt({st.fmt!r}, {args}), _CUR[0]))")
            else:
                put(depth, "pass")
        elif isinstance(st, ir.If):
            put(depth, f"if {self.ex(st.test, fn)}:")
            self.block(st.body, fn, depth + 1)
            if st.orelse:
                put(depth, "else:")
                self.block(st.orelse, fn, depth + 1)
        elif isinstance(st, ir.For):
            values = st.domain.values
            if values and values == list(range(values[0], values[-1] + 1)):
                dom = f"range({values[0]}, {values[-1] + 1})"
            else:
                dom = "(" + "".join(f"{v}, " for v in values) + ")"
            put(depth, f"for v_{st.var} in {dom}:")
            self.block(st.body, fn, depth + 1)
        elif isinstance(st, ir.Break):
            put(depth, "break")
        elif isinstance(st, ir.Continue):
            put(depth, "continue")
        elif isinstance(st, ir.Return):
            if st.value is None:
                put(depth, "return None")
            else:
                put(depth, f"return {self.ex(st.value, fn)}")
        elif isinstance(st, ir.Do):
            put(depth, self.ex(st.expr, fn))
        else:
            raise TypeError(f"no code for {type(st).__name__}")

    # -- functions ------------------------------------------------------------------------
    def params(self, fn: ir.Function) -> str:
        return "".join(f", v_{n}" for n, t in fn.params
                       if not isinstance(t, (ir.StateT, ir.VecT)))

    def function(self, fn: ir.Function) -> None:
        self.emit_line(0, f"def {fn.key}(W, E, V{self.params(fn)}):")
        self.block(fn.body, fn, 1)
        self.emit_line(0, "")

    def action(self, fn: ir.Function, index: int) -> tuple[str, str | None, list[int]]:
        """Step function ``a<index>`` and guard ``g<index>`` (with the positions of the
        parameters it takes) for one action."""
        lead: list[ir.Require] = []
        for st in fn.body:
            if isinstance(st, ir.Require) and not _calls_with_effects(st.cond):
                lead.append(st)
            else:
                break
        rest = fn.body[len(lead):]
        body_fn = ir.Function(fn.name, "action", fn.params, rest, fn.file, fn.line,
                              key=f"b{index}_{fn.name}")
        self.function(body_fn)
        names = [n for n, t in fn.params if not isinstance(t, ir.StateT)]
        step = f"a{index}_{fn.name}"
        self.emit_line(0, f"def {step}(S" + "".join(f", v_{n}" for n in names) + "):")
        self.emit_line(1, "W = S")
        self.emit_line(1, "E = V = None")
        for st in lead:
            self.emit_line(1, f"if not {self.ex(st.cond, fn)}:")
            self.emit_line(2, "return None")
        self.emit_line(1, "W = list(S)")
        self.emit_line(1, "E = []")
        self.emit_line(1, "V = []")
        self.emit_line(1, "try:")
        self.emit_line(2, f"if {body_fn.key}(W, E, V" + "".join(f", v_{n}" for n in names)
                       + ") is _DIS:")
        self.emit_line(3, "return None")
        self.emit_line(1, "except _Disabled:")
        self.emit_line(2, "return None")
        if self.has_handlers:  # the monitors see the step's events
            self.emit_line(1, "if E:")
            self.emit_line(2, "_dispatch(W, V, E)")
        self.emit_line(1, "return W, E, V")
        self.emit_line(0, "")
        if not lead:
            return step, None, []
        used = _locals_used([st.cond for st in lead])
        positions = [k for k, n in enumerate(names) if n in used]
        if len(positions) == len(names):
            return step, None, []
        guard = f"g{index}_{fn.name}"
        self.emit_line(0, f"def {guard}(S" + "".join(f", v_{names[k]}" for k in positions) + "):")
        self.emit_line(1, "W = S")
        self.emit_line(1, "E = V = None")
        self.emit_line(1, "return " + " and ".join(self.ex(st.cond, fn) for st in lead))
        self.emit_line(0, "")
        return step, guard, positions

    def invariant(self, fn: ir.Function) -> None:
        self.function(fn)

    def dispatch(self, handlers: dict[str, list[ir.Function]]) -> None:
        put = self.emit_line
        put(0, "def _dispatch(W, V, E):")
        put(1, "E2 = None")
        put(1, "for ev in E:")
        put(2, "_CUR[0] = ev")
        put(2, "k = ev[0]")
        first = True
        any_handler = False
        for kind, fns in handlers.items():
            if not fns:
                continue
            any_handler = True
            put(2, f"{'if' if first else 'elif'} k == {kind!r}:")
            first = False
            for h in fns:
                takes_page = len(h.value_params) == 2
                args = "ev[1], ev[2]" if takes_page else "ev[1]"
                put(3, f"{h.key}(W, E2, V, {args})")
        if not any_handler:
            put(2, "pass")
        self.has_handlers = any_handler
        put(1, "_CUR[0] = None")
        put(0, "")

    def compile(self, name: str) -> dict[str, Any]:
        source = _PREAMBLE + "\n".join(self.lines) + "\n"
        from kvspec.props.events import Event
        ns: dict[str, Any] = {"_ModelError": ModelError, "_ERRORS": self.errors, "_EV": Event,
                              "_fmt": self.formatter}
        exec(compile(source, f"<kvspec:{name}>", "exec"), ns)  # noqa: S102 - generated code
        ns["__source__"] = source
        return ns


def _reduction(op: str, items: str) -> str:
    """``count``/``sum``, ``any`` or ``all`` of a sequence expression (every item is
    evaluated: no short-circuit, as in the symbolic interpretation)."""
    if op in ("count", "sum"):
        return f"sum({items})"
    if op == "any":
        return f"(True in {items})"
    return f"(False not in {items})"


def _locals_used(exprs: list[ir.Expr]) -> set[str]:
    out: set[str] = set()

    def visit(e: ir.Expr) -> None:
        if isinstance(e, ir.Local):
            out.add(e.name)
        if isinstance(e, ir.Call):
            out.add("\0call")
        for x in ir.sub_exprs(e):
            visit(x)

    for e in exprs:
        visit(e)
    return out


def _calls_with_effects(e: ir.Expr) -> bool:
    """Whether evaluating ``e`` calls a function that writes, emits or requires."""
    if isinstance(e, ir.Call) and e.fn.effects:
        return True
    return any(_calls_with_effects(x) for x in ir.sub_exprs(e))
