"""The concrete form of an action body used on the exploration hot path.

It is the original body with one rewrite: a ``require(c)`` statement written
directly in the action becomes ``if not c: return DISABLED``. The meaning is the
same as the library ``require`` (the instance is disabled), but no exception is
raised, which makes trying a disabled instance several times cheaper. A
``require`` inside a helper still raises.
"""
from __future__ import annotations

import ast
import copy
from typing import Any, Callable

from kvspec.lang.lowering import ParsedBody


class _Disabled:
    def __repr__(self) -> str:
        return "<disabled>"


DISABLED = _Disabled()
DISABLED_NAME = "_kv_disabled_"


class _RequireToReturn(ast.NodeTransformer):
    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        call = node.value
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "require" and 1 <= len(call.args) <= 2 and not call.keywords):
            new = ast.If(test=ast.UnaryOp(ast.Not(), call.args[0]),
                         body=[ast.Return(ast.Name(DISABLED_NAME, ast.Load()))], orelse=[])
            return ast.copy_location(new, node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.body = [self.visit(stmt) for stmt in node.body]
        return node


def fast_action(body: ParsedBody, namespace: dict[str, Any]) -> Callable[..., Any]:
    """Compile the hot-path form of an action body in the model's namespace."""
    if namespace.get("require") is not _library_require():
        return body.fn  # the model rebinds `require`: keep the original
    tree = ast.parse("")
    fn = _RequireToReturn().visit(copy.deepcopy(body.tree))
    fn.decorator_list = []
    tree.body = [fn]
    ast.fix_missing_locations(tree)
    scope: dict[str, Any] = {}
    ns = dict(namespace)
    ns[DISABLED_NAME] = DISABLED
    exec(compile(tree, body.file, "exec"), ns, scope)  # noqa: S102 - the model's own code
    return scope[body.tree.name]  # type: ignore[no-any-return]


def _library_require() -> Any:
    from kvspec.lang.runtime import require
    return require


def hoisted_guard(body: ParsedBody, param_names: list[str], namespace: dict[str, Any]
                  ) -> tuple[Callable[..., Any], list[int]] | None:
    """If the body starts with ``require(c1 and c2 ...)`` and the leading conjuncts
    use only some of the parameters, compile those conjuncts as a guard over just
    those parameters: the engine then tries the guard once per value of them and
    skips every instance it rules out. Returns (guard, parameter positions)."""
    if namespace.get("require") is not _library_require() or not body.tree.body:
        return None
    first = body.tree.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):  # docstring
        if len(body.tree.body) < 2:
            return None
        first = body.tree.body[1]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Call)
            and isinstance(first.value.func, ast.Name) and first.value.func.id == "require"
            and first.value.args):
        return None
    cond = first.value.args[0]
    conjuncts = cond.values if isinstance(cond, ast.BoolOp) and isinstance(cond.op, ast.And) \
        else [cond]
    params = set(param_names)
    used_first = _names(conjuncts[0]) & params
    if used_first == params:
        return None
    chosen = []
    for c in conjuncts:
        if _names(c) & params <= used_first:
            chosen.append(c)
        else:
            break
    state = body.params[0]
    keep = [p for p in param_names if p in used_first]
    test = chosen[0] if len(chosen) == 1 else ast.BoolOp(ast.And(), chosen)
    args = ast.arguments(posonlyargs=[], args=[ast.arg(state)] + [ast.arg(p) for p in keep],
                         vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    fn = ast.FunctionDef(name=f"_kv_guard_{body.tree.name}", args=args,
                         body=[ast.Return(copy.deepcopy(test))], decorator_list=[], returns=None,
                         type_comment=None)
    ast.copy_location(fn, first)
    module = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(module)
    scope: dict[str, Any] = {}
    exec(compile(module, body.file, "exec"), dict(namespace), scope)  # noqa: S102
    return scope[fn.name], [param_names.index(p) for p in keep]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
