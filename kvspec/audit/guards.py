"""Request-only leading guards of a model's actions, for the conformance check's fast
"is anything of request k enabled?" test.

An action's step function starts with its leading ``require`` conditions. The
conjuncts of those that read only the action's *request* parameters (and state
variables indexed by them or by constants) do not depend on its page parameters: when
such a conjunct is false for a request, every instance of the action with that request
(any pages) is disabled. One test then stands for all 32 ``prealloc(r, p)`` of a
request instead of 32 step calls.

The conjunct is compiled by the model's own code generator (:class:`PyGen`, the one
that produced the step functions) and evaluated in the generated module, so it reads
the state exactly as the step function does. Only simple conjuncts are used (constants,
request parameters, loads indexed by them, comparisons, ``and``/``or``/``not``,
``+ - *``); anything else is left to the step function itself. A guard that raises is
treated as "maybe enabled".
"""
from __future__ import annotations

from typing import Any, Callable

from kvspec.lang import ir
from kvspec.lang.pygen import PyGen
from kvspec.lang.system import ActionDef, System
from kvspec.lang.types import REQUEST, RefType
from kvspec.props.events import format_reason

#: a compiled guard and the positions of the action parameters it takes
Guard = tuple[Callable[..., Any], list[int]]


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.BoolOp) and e.op == "and":
        return [c for x in e.items for c in _conjuncts(x)]
    return [e]


def _simple(e: ir.Expr, allowed: set[str]) -> bool:
    """Whether ``e`` reads only ``allowed`` locals and state at those/constant indices,
    with operations that cannot fail."""
    if isinstance(e, ir.Const):
        return True
    if isinstance(e, ir.Local):
        return e.name in allowed and not isinstance(e.ty, ir.VecT)
    if isinstance(e, ir.Load):
        return e.index is None or isinstance(e.index, ir.Const) or (
            isinstance(e.index, ir.Local) and e.index.name in allowed)
    if isinstance(e, ir.Compare):
        return _simple(e.a, allowed) and _simple(e.b, allowed)
    if isinstance(e, ir.BoolOp):
        return all(_simple(x, allowed) for x in e.items)
    if isinstance(e, ir.Unary):
        return e.op == "not" and _simple(e.x, allowed)
    if isinstance(e, ir.Arith):
        return e.op in ("+", "-", "*") and _simple(e.a, allowed) and _simple(e.b, allowed)
    return False


def _has_call(e: ir.Expr) -> bool:
    return isinstance(e, ir.Call) or any(_has_call(x) for x in ir.sub_exprs(e))


def request_guard(system: System, action: ActionDef, gen: PyGen | None = None) -> Guard | None:
    """The request-only leading guard of ``action`` (None when it has none)."""
    fn = action.ir
    names = [n for n, t in fn.params if not isinstance(t, ir.StateT)]
    req_params = {n for n, t in action.params
                  if isinstance(t, RefType) and t.ref_dim == REQUEST}
    if not req_params:
        return None
    keep: list[ir.Expr] = []
    for st in fn.body:
        if not isinstance(st, ir.Require) or _has_call(st.cond):
            break
        keep.extend(c for c in _conjuncts(st.cond) if _simple(c, req_params))
    if not keep:
        return None
    gen = gen or PyGen(system.schema, format_reason, system.flags)
    positions = [k for k, n in enumerate(names) if n in req_params]
    src = (f"def _guard(S{''.join(f', v_{names[k]}' for k in positions)}):\n"
           f"    W = S\n    return {' and '.join(f'({gen.ex(c, fn)})' for c in keep)}\n")
    ns = dict(system.generated)
    exec(compile(src, f"<kvspec:{system.name}:{action.name}:guard>", "exec"), ns)  # noqa: S102
    return ns["_guard"], positions


def request_guards(system: System) -> dict[int, Guard]:
    """``id(action)`` -> its request-only guard, for the actions that have one."""
    gen = PyGen(system.schema, format_reason, system.flags)
    out = {}
    for a in system.actions:
        g = request_guard(system, a, gen)
        if g is not None:
            out[id(a)] = g
    return out
