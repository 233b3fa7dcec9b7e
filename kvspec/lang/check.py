"""The static checker: Python source of model bodies -> the typed IR of :mod:`kvspec.lang.ir`.

Every action, invariant, monitor handler and every function they call (resolved
through the model class's MRO and the module's scope, decorated or not) is
parsed and checked against the grammar documented in ``docs/modelling.md``.
What the grammar does not contain is a :class:`ModelError` naming the file and
line and saying what to write instead — there is no fallthrough to "whatever
Python does". Types are inferred on the way (locals by forward flow with joins,
loops to a fixpoint), and every use of an id that is not opaque (arithmetic,
ordering, a literal id, an int used as an index, a loop carrying state across
ids) is recorded as a symmetry break for that id space.

Statements are built here; expressions in :mod:`kvspec.lang.check_expr`.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

from kvspec.lang import ir
from kvspec.lang.errors import ModelError
from kvspec.lang.schema import Schema, VarInfo

#: Python constructs outside the grammar, with what to write instead
UNSUPPORTED: dict[type, str] = {
    ast.While: "`while` loops are not supported; loop with `for` over a static range "
               "(s.pages, s.requests, range(n))",
    ast.Try: "`try` is not supported in model code",
    ast.With: "`with` is not supported in model code",
    ast.AsyncFunctionDef: "async code is not supported in model code",
    ast.AsyncFor: "async code is not supported in model code",
    ast.AsyncWith: "async code is not supported in model code",
    ast.ClassDef: "classes cannot be defined inside model code",
    ast.FunctionDef: "functions cannot be defined inside model code; define it at module level",
    ast.Lambda: "lambdas are not supported in model code; define a module-level function",
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
    ast.Starred: "`*` unpacking is not supported in model code",
    ast.Dict: "dicts are not supported in model code",
    ast.Set: "sets are not supported in model code",
    ast.DictComp: "dict comprehensions are not supported in model code",
    ast.SetComp: "set comprehensions are not supported in model code",
    ast.JoinedStr: "f-strings are not supported in model code",
}


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
        raise ModelError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {exc}",
                         file) from None
    source = textwrap.dedent("".join(lines))
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise ModelError(f"syntax error: {exc.msg}", file, first + (exc.lineno or 1) - 1) from None
    ast.increment_lineno(module, first - 1)
    node = module.body[0] if module.body else None
    if not isinstance(node, ast.FunctionDef):
        raise ModelError(f"{getattr(fn, '__name__', fn)} must be a plain function", file, first)
    node.decorator_list = []
    return ParsedBody(fn, node, file, first)


# -- the scope shared by all bodies of one system ------------------------------------------

@dataclass
class Scope:
    """What every body of one compiled model may refer to."""

    schema: Schema
    model_cls: type | None
    events: dict[str, bool]  # event kind -> takes a page
    properties: set[str]  # names `violate` may use (monitors)
    breaks: dict[str, list[str]] = field(default_factory=dict)
    #: (file, constant) of every read of a size — ``len()`` of a space, a size
    #: parameter — as the compiler first made it (it may fold it away afterwards)
    sized: list[tuple[str, ir.Const]] = field(default_factory=list)
    functions: list[ir.Function] = field(default_factory=list)
    #: monitor variables that are not stored: name -> (variable, the value of every element)
    constants: dict[str, tuple[VarInfo, Any]] = field(default_factory=dict)
    #: named integer constants monitor handlers may read as ``m.NAME``
    handler_names: dict[str, int] = field(default_factory=dict)
    _cache: dict[tuple[Any, ...], ir.Function] = field(default_factory=dict)
    _stack: list[Any] = field(default_factory=list)
    #: the breaks of each body being built, innermost last (a helper is built inside
    #: the body that first calls it)
    _building: list[dict[str, list[str]]] = field(default_factory=list)

    def brk(self, dim: str, file: str, line: int, why: str) -> None:
        text = f"{file.rsplit('/', 1)[-1]}:{line}: {why}"
        for lst in (self.breaks.setdefault(dim, []),
                    *(b.setdefault(dim, []) for b in self._building[-1:])):
            if text not in lst:
                lst.append(text)

    def var(self, name: str) -> VarInfo | None:
        return self.schema.by_name.get(name)

    def register(self, fn: ir.Function) -> ir.Function:
        fn.key = f"{fn.kind[0]}{len(self.functions)}_{fn.name}"
        self.functions.append(fn)
        return fn

    def helper(self, pyfn: Any, arg_types: list[Any], file: str, line: int) -> ir.Function:
        """The IR of ``pyfn`` specialised to the argument types of one call."""
        key = (id(pyfn), tuple(arg_types))
        if key in self._cache:
            return self._cache[key]
        code = id(pyfn)
        if code in self._stack:
            raise ModelError(f"recursive call of {pyfn.__name__}() is not supported in model code",
                             file, line)
        self._stack.append(code)
        try:
            fn = build_function(self, pyfn, "helper", arg_types)
        finally:
            self._stack.pop()
        self._cache[key] = fn
        return fn


# -- building one body -----------------------------------------------------------------------

def build_function(scope: Scope, pyfn: Any, kind: str, param_types: list[Any],
                   name: str | None = None) -> ir.Function:
    """Check one body and build its IR. ``param_types`` gives every parameter's
    type, the state parameter (if any) as ``ir.StateT()``."""
    from kvspec.lang.check_stmt import BodyBuilder

    body = parse_body(pyfn)
    tree = body.tree
    a = tree.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        raise ModelError(f"{tree.name}: only plain positional parameters (no defaults, *args, "
                         "**kwargs) are supported in model code", body.file, tree.lineno)
    if len(body.params) != len(param_types):
        raise ModelError(f"{tree.name}() takes {len(body.params)} arguments, "
                         f"{len(param_types)} given", body.file, tree.lineno)
    for node in ast.walk(tree):
        if node is tree:
            continue
        message = UNSUPPORTED.get(type(node))
        if message is not None:
            raise ModelError(message, body.file, getattr(node, "lineno", tree.lineno))
    scope._building.append({})
    try:
        fn = BodyBuilder(scope, body, kind, list(zip(body.params, param_types))).build()
    finally:
        breaks = scope._building.pop()
    fn.breaks = breaks
    if name is not None:
        fn.name = name
    return scope.register(fn)
