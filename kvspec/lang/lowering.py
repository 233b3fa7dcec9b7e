"""Lowering of model bodies: plain Python control flow -> guarded updates.

A body is parsed once. :func:`check_body` rejects constructs the language does
not support (with file and line). :func:`lower` rewrites the body so that it can
run on symbolic values: every ``if`` runs *both* branches, each under its branch
condition pushed on a guard stack, and the locals the branches assign are merged
with if-then-else afterwards; ``return``/``break``/``continue`` clear a "still
running" flag instead of jumping; ``and``/``or``/``not``, conditional
expressions and comparisons go through the frame so they work on symbolic values.
Nothing forks per path, so a loop over P pages with an ``if`` inside produces
O(P) terms. The rewritten code calls a *frame* object (``_kvf_``) supplied by the
symbolic interpretation; the concrete interpretation runs the original body.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from kvspec.lang.errors import ModelError

FRAME = "_kvf_"
RUNTIME = "_kv_"
UNDEF_NAME = "_kv_undef_"
_BUILTINS = {"any", "all", "sum", "min", "max", "abs"}


@dataclass
class ParsedBody:
    """A model function's source, parsed with the line numbers of its file."""

    fn: Callable[..., Any]
    tree: ast.FunctionDef
    file: str
    first_line: int

    @property
    def params(self) -> list[str]:
        return [a.arg for a in self.tree.args.args]


def parse_body(fn: Callable[..., Any]) -> ParsedBody:
    """Parse a function's source; line numbers match its file."""
    file = inspect.getsourcefile(fn) or "<model>"
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise ModelError(f"cannot read the source of {fn.__name__}: {exc}", file) from None
    source = textwrap.dedent("".join(lines))
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise ModelError(f"syntax error: {exc.msg}", file, first + (exc.lineno or 1) - 1) from None
    ast.increment_lineno(module, first - 1)
    node = module.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise ModelError(f"{fn.__name__} must be a plain function", file, first)
    return ParsedBody(fn, node, file, first)


# -- checking --------------------------------------------------------------------

_UNSUPPORTED: dict[type, str] = {
    ast.While: "`while` loops are not supported; loop with `for` over a static range "
               "(s.pages, s.requests, range(n))",
    ast.Try: "`try` is not supported in model code",
    ast.With: "`with` is not supported in model code",
    ast.AsyncFunctionDef: "async code is not supported in model code",
    ast.AsyncFor: "async code is not supported in model code",
    ast.AsyncWith: "async code is not supported in model code",
    ast.ClassDef: "classes cannot be defined inside model code",
    ast.FunctionDef: "functions cannot be defined inside model code; use a module-level @helper",
    ast.Lambda: "lambdas are not supported in model code",
    ast.Global: "`global` is not supported: model state lives in declared variables",
    ast.Nonlocal: "`nonlocal` is not supported in model code",
    ast.Yield: "generators are not supported in model code",
    ast.YieldFrom: "generators are not supported in model code",
    ast.Await: "async code is not supported in model code",
    ast.Delete: "`del` is not supported in model code",
    ast.Import: "imports belong at the top of the model file",
    ast.ImportFrom: "imports belong at the top of the model file",
    ast.Raise: "`raise` is not supported; use require(...) to disable an action",
    ast.Assert: "`assert` is not supported; use require(...) for guards or an @invariant",
    ast.NamedExpr: "`:=` is not supported in model code",
    ast.Match: "`match` is not supported; use if/elif/else",
}


def check_body(body: ParsedBody, state_param: str | None = None) -> None:
    """Reject unsupported constructs with the file and line of the first one."""
    fn = body.tree
    if fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.posonlyargs:
        raise ModelError(f"{fn.name}: only plain positional parameters are supported",
                         body.file, fn.lineno)
    state = state_param if state_param is not None else (body.params[0] if body.params else None)
    for stmt in fn.body:
        for node in ast.walk(stmt):
            message = _UNSUPPORTED.get(type(node))
            if message is not None:
                raise ModelError(message, body.file, getattr(node, "lineno", fn.lineno))
            if isinstance(node, ast.For) and node.orelse:
                raise ModelError("`for ... else` is not supported", body.file, node.lineno)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    _check_target(target, state, body)


def _check_target(target: ast.expr, state: str | None, body: ParsedBody) -> None:
    if isinstance(target, ast.Name):
        return
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _check_target(elt, state, body)
        return
    root = target
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    if not (isinstance(root, ast.Name) and root.id == state):
        raise ModelError("only local names and state variables (s.x, s.x[i]) can be assigned",
                         body.file, target.lineno)


# -- lowering --------------------------------------------------------------------

def _assigned_names(stmts: list[ast.stmt]) -> list[str]:
    names: list[str] = []
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if node.id not in names:
                    names.append(node.id)
    return names


def _call(method: str, *args: ast.expr, owner: str = FRAME) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=ast.Name(owner, ast.Load()), attr=method,
                                       ctx=ast.Load()),
                    args=list(args), keywords=[])


def _thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=expr)


def _names_tuple(names: list[str], ctx: ast.expr_context) -> ast.Tuple:
    return ast.Tuple([ast.Name(n, ctx.__class__()) for n in names], ctx.__class__())


class _ExprLowering(ast.NodeTransformer):
    """Rewrites expressions so they evaluate on symbolic values."""

    def __init__(self, local_names: set[str]) -> None:
        self.local_names = local_names

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        values = [self.visit(v) for v in node.values]
        method = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(_call(method, values[0], *[_thunk(v) for v in values[1:]]), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("not_", operand), node)
        node.operand = operand
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        return ast.copy_location(
            _call("ite", self.visit(node.test), _thunk(self.visit(node.body)),
                  _thunk(self.visit(node.orelse))), node)

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        left = self.visit(node.left)
        parts: list[ast.expr] = []
        for op, right in zip(node.ops, node.comparators):
            right = self.visit(right)
            parts.append(_call("cmp", ast.Constant(type(op).__name__), left, right))
            left = right
        if len(parts) == 1:
            return ast.copy_location(parts[0], node)
        return ast.copy_location(_call("and_", parts[0], *[_thunk(p) for p in parts[1:]]), node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id in _BUILTINS
                and node.func.id not in self.local_names and not node.keywords):
            return ast.copy_location(
                _call("builtin", ast.Constant(node.func.id), *node.args), node)
        return node


class _StmtLowering:
    def __init__(self, local_names: set[str]) -> None:
        self.expr = _ExprLowering(local_names)
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"_kv_{stem}{self.counter}_"

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            out.extend(self.stmt(stmt))
        return out

    def stmt(self, node: ast.stmt) -> list[ast.stmt]:
        method = getattr(self, "s_" + type(node).__name__, None)
        if method is None:
            return [self.expr.visit(node)]
        result: list[ast.stmt] = method(node)
        for new in result:
            ast.copy_location(new, node)
            ast.fix_missing_locations(new)
        return result

    def s_If(self, node: ast.If) -> list[ast.stmt]:
        cond = self.fresh("c")
        saved = self.fresh("saved")
        then_vals = self.fresh("then")
        names = _assigned_names(node.body + node.orelse)
        load = ast.Load()
        store = ast.Store()
        out: list[ast.stmt] = [
            ast.Assign([ast.Name(cond, store)], _call("cond", self.expr.visit(node.test))),
            ast.Assign([ast.Name(saved, store)], _names_tuple(names, load)),
        ]
        then_block = [ast.Expr(_call("push", ast.Name(cond, load)))] + self.block(node.body) + [
            ast.Expr(_call("pop"))]
        out.append(ast.If(ast.Compare(ast.Name(cond, load), [ast.IsNot()], [ast.Constant(False)]),
                          then_block, []))
        out.append(ast.Assign([ast.Name(then_vals, store)], _names_tuple(names, load)))
        if names:
            out.append(ast.Assign([_names_tuple(names, store)], ast.Name(saved, load)))
        if node.orelse:
            else_block = [ast.Expr(_call("push_not", ast.Name(cond, load)))] + \
                self.block(node.orelse) + [ast.Expr(_call("pop"))]
            out.append(ast.If(ast.Compare(ast.Name(cond, load), [ast.IsNot()],
                                          [ast.Constant(True)]), else_block, []))
        if names:
            out.append(ast.Assign([_names_tuple(names, store)],
                                  _call("merge", ast.Name(cond, load), ast.Name(then_vals, load),
                                        _names_tuple(names, load))))
        return out

    def s_Return(self, node: ast.Return) -> list[ast.stmt]:
        value = self.expr.visit(node.value) if node.value is not None else ast.Constant(None)
        return [ast.Expr(_call("ret", value))]

    def s_Break(self, node: ast.Break) -> list[ast.stmt]:
        return [ast.Expr(_call("brk"))]

    def s_Continue(self, node: ast.Continue) -> list[ast.stmt]:
        return [ast.Expr(_call("cont"))]

    def _assign_name(self, name: str, value: ast.expr) -> ast.stmt:
        return ast.Assign([ast.Name(name, ast.Store())],
                          _call("assign", ast.Name(name, ast.Load()), value))

    def s_Assign(self, node: ast.Assign) -> list[ast.stmt]:
        value = self.expr.visit(node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return [self._assign_name(node.targets[0].id, value)]
        tmp = self.fresh("v")
        out: list[ast.stmt] = [ast.Assign([ast.Name(tmp, ast.Store())], value)]
        for target in node.targets:
            out.extend(self._assign_target(target, ast.Name(tmp, ast.Load())))
        return out

    def _assign_target(self, target: ast.expr, value: ast.expr) -> list[ast.stmt]:
        if isinstance(target, ast.Name):
            return [self._assign_name(target.id, value)]
        if isinstance(target, (ast.Tuple, ast.List)):
            tmp = self.fresh("t")
            out: list[ast.stmt] = [ast.Assign([ast.Name(tmp, ast.Store())],
                                              ast.Call(ast.Name("tuple", ast.Load()), [value], []))]
            for i, elt in enumerate(target.elts):
                out.extend(self._assign_target(
                    elt, ast.Subscript(ast.Name(tmp, ast.Load()), ast.Constant(i), ast.Load())))
            return out
        return [ast.Assign([self.expr.visit(target)], value)]

    def s_AnnAssign(self, node: ast.AnnAssign) -> list[ast.stmt]:
        if node.value is None:
            return []
        return self._assign_target(node.target, self.expr.visit(node.value))

    def s_AugAssign(self, node: ast.AugAssign) -> list[ast.stmt]:
        if isinstance(node.target, ast.Name):
            value = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op,
                              self.expr.visit(node.value))
            return [self._assign_name(node.target.id, value)]
        node.value = self.expr.visit(node.value)
        node.target = self.expr.visit(node.target)
        return [node]

    def s_For(self, node: ast.For) -> list[ast.stmt]:
        body = [ast.Expr(_call("iter_begin"))] + self.block(node.body)
        loop = ast.For(target=node.target, iter=_call("static", self.expr.visit(node.iter)),
                       body=body, orelse=[])
        return [ast.Expr(_call("loop_begin")), loop, ast.Expr(_call("loop_end"))]

    def s_Expr(self, node: ast.Expr) -> list[ast.stmt]:
        return [ast.Expr(self.expr.visit(node.value))]


def lower(body: ParsedBody, namespace: dict[str, Any]) -> Callable[..., Any]:
    """Compile the lowered form of a body. It takes the same parameters and returns
    the merged return value (or None); it must run inside a symbolic frame."""
    fn = body.tree
    params = set(body.params)
    locals_ = [n for n in _assigned_names(fn.body) if n not in params]
    lowering = _StmtLowering(set(locals_) | params)
    new_body: list[ast.stmt] = [
        ast.Assign([ast.Name(FRAME, ast.Store())], _call("frame", owner=RUNTIME))]
    for name in locals_:
        new_body.append(ast.Assign([ast.Name(name, ast.Store())], ast.Name(UNDEF_NAME, ast.Load())))
    new_body.extend(lowering.block(fn.body))
    new_body.append(ast.Return(_call("end")))
    new_fn = ast.FunctionDef(name=fn.name, args=fn.args, body=new_body, decorator_list=[],
                             returns=None, type_comment=None)
    ast.copy_location(new_fn, fn)
    for stmt in new_body:
        if not hasattr(stmt, "lineno"):
            ast.copy_location(stmt, fn)
    module = ast.Module(body=[new_fn], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, body.file, "exec")
    scope: dict[str, Any] = {}
    exec(code, namespace, scope)  # noqa: S102 - compiling the model's own code
    return scope[fn.name]  # type: ignore[no-any-return]
