"""A canonical text of a checked body, for comparing two versions of a design.

The dump is built from the typed IR (:mod:`kvspec.lang.ir`), never from the Python
source, so what it ignores is exactly what cannot change a meaning:

* line numbers, files, comments, docstrings, blank lines, formatting;
* the names of locals, loop and generator variables and parameters: they are
  numbered in order of first appearance (``%0``, ``%1``, …), so renaming a local
  consistently does not change the dump;
* the names of called helper functions: a call is dumped as the digest of the
  callee's own dump (``call<3f2a…>(…)``), so moving or renaming a helper does not
  count, and changing its body changes every caller's dump;
* whether an expression is written in place or in a function without effects whose
  body is one ``return <expression>`` using every parameter: such a call is dumped
  as the expression with the arguments substituted.

Everything the interpretations read is in it: state variables by name, enum
members by name (not by their position), ``None``, the domains of loops, the
range checks the checker asked for, and the order of statements.

The leading ``require`` conditions of an action (those that do not call a function
with effects — the ones :mod:`kvspec.lang.pygen` hoists and tests before the step)
are its *guard*; the rest of the body is its *effects*.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from kvspec.lang import ir
from kvspec.lang.types import EnumType, IntType, RefType, ValueType

__all__ = ["ActionDump", "BodyDumper", "action_dump", "describe_type", "function_dump",
           "split_guard"]


def describe_type(t: ValueType) -> str:
    """A declared value type, with enum members (``enum Phase(NEW, DONE)``)."""
    if isinstance(t, EnumType):
        return f"enum {t.cls.__name__}({', '.join(m.name for m in t.members)})"
    if isinstance(t, IntType):
        return f"int {t.lo}..{t.hi}"
    if isinstance(t, RefType):
        return t.describe()
    return t.describe()


def _ir_type(t: Any) -> str:
    if isinstance(t, ir.EnumT):
        return f"enum {t.cls.__name__}({', '.join(m.name for m in t.cls)})"
    if t is None:
        return "?"
    describe = getattr(t, "describe", None)
    return describe() if callable(describe) else type(t).__name__


def split_guard(fn: ir.Function) -> tuple[list[ir.Stmt], list[ir.Stmt]]:
    """The leading ``require`` statements (the guard) and the rest (the effects),
    split the way :mod:`kvspec.lang.pygen` hoists them."""
    lead: list[ir.Stmt] = []
    for st in fn.body:
        if isinstance(st, ir.Require) and not _calls_with_effects(st.cond):
            lead.append(st)
        else:
            break
    return lead, fn.body[len(lead):]


def _calls_with_effects(e: ir.Expr) -> bool:
    if isinstance(e, ir.Call) and e.fn.effects:
        return True
    return any(_calls_with_effects(x) for x in ir.sub_exprs(e))


class BodyDumper:
    """Dumps the statements of one function; locals are numbered on first sight.

    ``helpers`` is shared between dumpers: it maps ``id(function)`` to the
    function's (name, dump, digest), so each helper is dumped once."""

    def __init__(self, helpers: dict[int, tuple[str, str, str]] | None = None,
                 prefix: str = "%") -> None:
        self.names: dict[str, str] = {}
        self.count = 0
        self.prefix = prefix
        self.used: set[str] = set()
        self.helpers = helpers if helpers is not None else {}

    # -- names -----------------------------------------------------------------------
    def local(self, name: str) -> str:
        self.used.add(name)
        if name not in self.names:
            self.names[name] = f"{self.prefix}{self.count}"
            self.count += 1
        return self.names[name]

    def params(self, fn: ir.Function) -> str:
        """Parameters are numbered apart from locals (``$0``, ``$1``), so adding a
        parameter does not renumber the locals of the body."""
        parts = []
        k = 0
        for name, t in fn.params:
            if isinstance(t, ir.StateT):
                parts.append("s")
                self.names[name] = "s"
            else:
                self.names[name] = f"${k}"
                k += 1
                parts.append(f"{self.names[name]}: {_ir_type(t)}")
        return ", ".join(parts)

    # -- expressions -----------------------------------------------------------------
    def ex(self, e: ir.Expr) -> str:  # noqa: C901 - one case per node
        if isinstance(e, ir.Const):
            return self.const(e)
        if isinstance(e, ir.Local):
            return self.local(e.name)
        if isinstance(e, ir.Load):
            if e.index is None:
                return f"s.{e.var.name}"
            return f"s.{e.var.name}[{self.ex(e.index)}{'!' if e.check else ''}]"
        if isinstance(e, ir.VecOf):
            if e.row is None:
                return f"s.{e.var.name}[:]"
            return f"s.{e.var.name}[{self.ex(e.row)},:]"
        if isinstance(e, ir.Unary):
            op = {"not": "not ", "neg": "-", "invert": "~"}.get(e.op, e.op + " ")
            return f"({op}{self.ex(e.x)})"
        if isinstance(e, (ir.Arith, ir.Compare)):
            return f"({self.ex(e.a)} {e.op} {self.ex(e.b)})"
        if isinstance(e, ir.BoolOp):
            return "(" + f" {e.op} ".join(self.ex(x) for x in e.items) + ")"
        if isinstance(e, ir.Cond):
            test = self.ex(e.test)
            return f"({self.ex(e.then)} if {test} else {self.ex(e.orelse)})"
        if isinstance(e, ir.VecCompare):
            return f"vec({self.ex(e.a)} {e.op} {self.ex(e.b)})"
        if isinstance(e, ir.MaskOp):
            return "mask(" + f" {e.op} ".join(self.ex(x) for x in e.items) + ")"
        if isinstance(e, ir.Reduce):
            return f"{e.op}({self.ex(e.mask)})"
        if isinstance(e, ir.Fold):
            var = self.local(e.var)
            dom = self.domain(e.domain)
            conds = "".join(f" if {self.ex(c)}" for c in e.conds)
            return f"{e.op}({self.ex(e.elt)} for {var} in {dom}{conds})"
        if isinstance(e, ir.MinMax):
            return f"{e.op}(" + ", ".join(self.ex(x) for x in e.items) + ")"
        if isinstance(e, ir.Call):
            inlined = self.inline(e)
            if inlined is not None:
                return inlined
            digest = self.helper(e.fn)
            return f"call<{digest[:12]}>(" + ", ".join(self.ex(a) for a in e.args) + ")"
        return self.generic(e)

    def const(self, e: ir.Const) -> str:
        t = e.ty
        if isinstance(t, ir.StateT):
            return "s"
        if isinstance(t, ir.NoneT) or (isinstance(t, ir.RefT) and e.value == -1):
            return "None"
        if isinstance(t, ir.EnumT) and isinstance(e.value, int) \
                and 0 <= e.value < len(t.cls):
            return f"{t.cls.__name__}.{list(t.cls)[e.value].name}"
        return repr(e.value)

    def domain(self, d: ir.Domain) -> str:
        if isinstance(d.ty, ir.RefT):
            return f"{d.ty.dim}s"
        return "[" + ", ".join(str(v) for v in d.values) + "]"

    def generic(self, node: Any) -> str:
        """Any IR node this module has no case for: its fields, minus locations."""
        parts = []
        for f in dataclasses.fields(node):
            if f.name in ("line", "ty", "file"):
                continue
            parts.append(f"{f.name}={self.value(getattr(node, f.name))}")
        return f"{type(node).__name__}(" + ", ".join(parts) + ")"

    def value(self, v: Any) -> str:
        if isinstance(v, ir.Expr):
            return self.ex(v)
        if isinstance(v, ir.Stmt):
            return "; ".join(self.stmt(v, 0))
        if isinstance(v, list):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, ir.Domain):
            return self.domain(v)
        if isinstance(v, ir.Function):
            return f"fn<{self.helper(v)[:12]}>"
        if hasattr(v, "name") and hasattr(v, "offset"):  # VarInfo
            return f"s.{v.name}"
        return repr(v)

    # -- helpers ---------------------------------------------------------------------
    def inline(self, call: ir.Call) -> str | None:
        """A call of a function whose body is one ``return <expression>`` and that has
        no effects, dumped as that expression with the arguments in place of the
        parameters (so extracting an expression into such a function, or inlining
        one, is no change). None for any other call."""
        fn = call.fn
        if fn.effects or len(fn.body) != 1 or not isinstance(fn.body[0], ir.Return) \
                or fn.body[0].value is None or len(call.args) != len(fn.params) \
                or any(_calls_with_effects(a) for a in call.args):
            return None
        sub = BodyDumper(self.helpers, prefix=self.prefix + "i")
        for (name, t), arg in zip(fn.params, call.args):
            sub.names[name] = "s" if isinstance(t, ir.StateT) else self.ex(arg)
        text = sub.ex(fn.body[0].value)
        if any(name not in sub.used for name, t in fn.params if not isinstance(t, ir.StateT)):
            return None  # an argument the body ignores is still evaluated (and checked)
        return text

    def helper(self, fn: ir.Function) -> str:
        """The digest of a called function's dump (dumped once, with its own locals)."""
        known = self.helpers.get(id(fn))
        if known is None:
            text = function_dump(fn, self.helpers)
            digest = hashlib.sha256(text.encode()).hexdigest()
            known = (fn.name, text, digest)
            self.helpers[id(fn)] = known
        return known[2]

    # -- statements ------------------------------------------------------------------
    def block(self, body: list[ir.Stmt], depth: int) -> list[str]:
        out: list[str] = []
        for st in body:
            out.extend(self.stmt(st, depth))
        return out

    def stmt(self, st: ir.Stmt, depth: int) -> list[str]:  # noqa: C901 - one case per node
        pad = "  " * depth
        if isinstance(st, ir.Assign):
            values = ", ".join(self.ex(v) for v in st.values)
            names = ", ".join(self.local(n) for n in st.names)
            return [f"{pad}{names} = {values}"]
        if isinstance(st, ir.Store):
            target = f"s.{st.var.name}"
            if st.index is not None:
                target += f"[{self.ex(st.index)}{'!' if st.check_index else ''}]"
            return [f"{pad}{target} = {self.ex(st.value)}{' !' if st.check_value else ''}"]
        if isinstance(st, ir.MaskStore):
            return [f"{pad}s.{st.var.name}[{self.ex(st.mask)}] = {self.ex(st.value)}"
                    f"{' !' if st.check_value else ''}"]
        if isinstance(st, ir.Require):
            return [f"{pad}require {self.ex(st.cond)}"]
        if isinstance(st, ir.Emit):
            args = [self.ex(st.request) + ("!" if st.check_request else "")]
            if st.page is not None:
                args.append(f"page={self.ex(st.page)}{'!' if st.check_page else ''}")
            if st.pages is not None:
                args.append(f"pages={self.ex(st.pages)}")
            return [f"{pad}emit {st.kind}({', '.join(args)})"]
        if isinstance(st, ir.Violate):
            named = ", ".join(f"{k}={self.ex(v)}" for k, v in st.args)
            return [f"{pad}violate {st.prop} {st.fmt!r} ({named})"]
        if isinstance(st, ir.If):
            out = [f"{pad}if {self.ex(st.test)}:"] + self.block(st.body, depth + 1)
            if st.orelse:
                out += [f"{pad}else:"] + self.block(st.orelse, depth + 1)
            return out
        if isinstance(st, ir.For):
            var = self.local(st.var)
            return [f"{pad}for {var} in {self.domain(st.domain)}:"] + \
                self.block(st.body, depth + 1)
        if isinstance(st, ir.Break):
            return [f"{pad}break"]
        if isinstance(st, ir.Continue):
            return [f"{pad}continue"]
        if isinstance(st, ir.Return):
            return [f"{pad}return" + (f" {self.ex(st.value)}" if st.value is not None else "")]
        if isinstance(st, ir.Do):
            return [f"{pad}do {self.ex(st.expr)}"]
        return [pad + self.generic(st)]


def function_dump(fn: ir.Function, helpers: dict[int, tuple[str, str, str]] | None = None
                  ) -> str:
    """The canonical text of a whole function (kind, parameters, result, body)."""
    d = BodyDumper(helpers)
    head = f"{fn.kind}({d.params(fn)})"
    if fn.ret is not None:
        head += f" -> {_ir_type(fn.ret)}"
    return "\n".join([head + ":"] + d.block(fn.body, 1))


@dataclass
class ActionDump:
    """An action's canonical parts: parameter types, guard and effects text, and the
    helper functions it reaches (name -> digest of the dump)."""

    params: list[str]
    guard: str
    effects: str
    helpers: dict[str, str]


def reachable_helpers(roots: list[ir.Function], helpers: dict[int, tuple[str, str, str]]
                      ) -> dict[str, str]:
    """Every function reachable from ``roots`` by calls: name -> digest (one entry per
    name; several specialisations of one name are joined)."""
    seen: list[ir.Function] = []
    stack = [c for r in roots for c in ir.calls_in(r)]
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.append(f)
        stack.extend(ir.calls_in(f))
    out: dict[str, list[str]] = {}
    for f in seen:
        entry = helpers.get(id(f))
        if entry is None:
            text = function_dump(f, helpers)
            entry = (f.name, text, hashlib.sha256(text.encode()).hexdigest())
            helpers[id(f)] = entry
        out.setdefault(f.name, []).append(entry[2])
    return {name: "+".join(sorted(ds)) for name, ds in out.items()}


def action_dump(fn: ir.Function, param_types: list[ValueType],
                helpers: dict[int, tuple[str, str, str]] | None = None) -> ActionDump:
    """Guard and effects of an action, dumped with one numbering of its locals."""
    helpers = helpers if helpers is not None else {}
    d = BodyDumper(helpers)
    d.params(fn)
    guard, effects = split_guard(fn)
    guard_text = "\n".join(d.block(guard, 0))
    effects_text = "\n".join(d.block(effects, 0))
    return ActionDump([describe_type(t) for t in param_types], guard_text, effects_text,
                      reachable_helpers([fn], helpers))
