"""The model language as a small typed IR: the one meaning every interpretation shares.

:mod:`kvspec.lang.check` builds this IR from the Python source of actions,
invariants, helpers and monitor handlers, rejecting everything outside the
grammar. The concrete interpretation (:mod:`kvspec.lang.pygen`, IR compiled to
straight-line Python over the state tuple), the symbolic one
(:mod:`kvspec.lang.z3gen`, IR to Z3 terms) and the symmetry analysis all read
this IR and nothing else, so there is nothing left for two of them to read
differently.

Values are *encoded* everywhere: bools are bools; bounded ints, enum members
(their index) and ids (request/page number, ``-1`` for None) are ints.

Types::

    Bool | Int(lo, hi) | Enum(cls) | Ref(dim, optional) | NoneT
    Mask(dim)      a vector of bools over one id space (``s.owner == r``)
    Vec(var)       a whole per-id state variable (operand of vector operations)
    Space(dim)     ``s.requests`` / ``s.pages`` (loop domains)

Expressions: Const, Local, Load (state slot, index), VecOf (whole variable),
Unary, Arith, Compare, BoolOp (short-circuit), Cond, VecCompare, MaskOp, Reduce,
Fold (``any``/``all``/``sum`` over a generator), MinMax, Call (a helper, with its
own IR body). Statements: Assign, Store, MaskStore, Require, Emit, Violate, If,
For (static domain), Break, Continue, Return, Do (a call for its effects).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Union

from kvspec.lang.schema import VarInfo


# -- types ---------------------------------------------------------------------------

@dataclass(frozen=True)
class BoolT:
    def describe(self) -> str:
        return "bool"


@dataclass(frozen=True)
class IntT:
    lo: int | None = None
    hi: int | None = None

    def describe(self) -> str:
        if self.lo is None or self.hi is None:
            return "int"
        return f"int {self.lo}..{self.hi}"


@dataclass(frozen=True)
class EnumT:
    cls: type[enum.Enum]

    def describe(self) -> str:
        return f"enum {self.cls.__name__}"


@dataclass(frozen=True)
class RefT:
    dim: str
    optional: bool

    def describe(self) -> str:
        return f"{self.dim} id" + (" or None" if self.optional else "")


@dataclass(frozen=True)
class NoneT:
    def describe(self) -> str:
        return "None"


@dataclass(frozen=True)
class MaskT:
    dim: str

    def describe(self) -> str:
        # index spaces are named in the plural already (``ranks``), requests/pages not
        return f"mask over {self.dim if self.dim.endswith('s') else self.dim + 's'}"


@dataclass(frozen=True)
class VecT:
    var: str
    dim: str
    elem: "Scalar"

    def describe(self) -> str:
        return f"state array {self.var}"


@dataclass(frozen=True)
class SpaceT:
    dim: str

    def describe(self) -> str:
        return f"the {self.dim} ids"


@dataclass(frozen=True)
class StateT:
    """The state parameter ``s`` (passed on to helpers)."""

    def describe(self) -> str:
        return "the state"


Scalar = Union[BoolT, IntT, EnumT, RefT, NoneT]
Type = Union[BoolT, IntT, EnumT, RefT, NoneT, MaskT, VecT, SpaceT, StateT]

BOOL = BoolT()
INT = IntT()
NONE = NoneT()


def is_scalar(t: Type) -> bool:
    return isinstance(t, (BoolT, IntT, EnumT, RefT, NoneT))


# -- expressions -----------------------------------------------------------------------

@dataclass(eq=False)
class Expr:
    line: int = field(default=0, kw_only=True)
    ty: Any = field(default=None, kw_only=True)


@dataclass(eq=False)
class Const(Expr):
    value: Any  # encoded: bool or int
    #: ``len()`` of this id space (``value`` is its size in this compilation); the
    #: all-sizes reading takes the size as a symbol
    size: str | None = field(default=None, kw_only=True)
    #: the size parameter this reads (``s.max_need``), likewise
    param: str | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class Local(Expr):
    name: str


@dataclass(eq=False)
class Load(Expr):
    """``s.x`` (index None) or ``s.x[i]``; ``check`` says whether ``i`` may be out of range."""

    var: VarInfo
    index: Expr | None
    check: bool = False
    #: an element ``s.x[i, j]`` of a two-dimensional array: ``(i, j)`` (``index`` is the
    #: slot offset computed from them)
    axes: tuple[Expr, Expr] | None = None


@dataclass(eq=False)
class VecOf(Expr):
    """A whole state variable, as a vector; for a two-dimensional array with ``row``
    given, the line of it along axis ``along`` at index ``row`` of the other axis
    (``s.x[i]`` / ``s.x[i, :]``: along 1; ``s.x[:, j]``: along 0)."""

    var: VarInfo
    row: Expr | None = None
    along: int = 1


@dataclass(eq=False)
class Uniform(Expr):
    """A per-id array every element of which is ``value`` (``ty`` is a VecT): a monitor
    variable that no event of the model can change, so it is not stored."""

    value: Any
    var: VarInfo


@dataclass(eq=False)
class Unary(Expr):
    op: str  # "not" (bool), "neg" (int), "invert" (mask)
    x: Expr


@dataclass(eq=False)
class Arith(Expr):
    op: str  # + - * // %
    a: Expr
    b: Expr


@dataclass(eq=False)
class Compare(Expr):
    op: str  # == != < <= > >=
    a: Expr
    b: Expr


@dataclass(eq=False)
class BoolOp(Expr):
    op: str  # "and" / "or" (short-circuit)
    items: list[Expr]


@dataclass(eq=False)
class Cond(Expr):
    test: Expr
    then: Expr
    orelse: Expr


@dataclass(eq=False)
class VecCompare(Expr):
    """Element-wise comparison of a vector with a scalar or with another vector."""

    op: str
    a: Expr  # VecOf
    b: Expr  # scalar expression or VecOf


@dataclass(eq=False)
class MaskOp(Expr):
    op: str  # "&" / "|"
    items: list[Expr]


@dataclass(eq=False)
class Reduce(Expr):
    op: str  # "count" / "any" / "all"
    mask: Expr


@dataclass(eq=False)
class Domain:
    """A static loop domain: the values the loop variable takes, in order."""

    values: list[int]
    ty: Any  # RefT (id space) or IntT (range)


@dataclass(eq=False)
class Fold(Expr):
    """``any(e for x in D if c)``, ``all(...)``, ``sum(...)``."""

    op: str
    var: str
    domain: Domain
    conds: list[Expr]
    elt: Expr


@dataclass(eq=False)
class MinMax(Expr):
    op: str  # "min" / "max"
    items: list[Expr]


@dataclass(eq=False)
class Call(Expr):
    fn: "Function"
    args: list[Expr]  # state argument passed as Const(None, ty=StateT())


# -- statements ------------------------------------------------------------------------

@dataclass(eq=False)
class Stmt:
    line: int = field(default=0, kw_only=True)


@dataclass(eq=False)
class Assign(Stmt):
    names: list[str]
    values: list[Expr]  # parallel assignment: all values are evaluated first


@dataclass(eq=False)
class Store(Stmt):
    """``s.x = v`` / ``s.x[i] = v``; ``check_index``/``check_value`` ask for range checks."""

    var: VarInfo
    index: Expr | None
    value: Expr
    check_index: bool = False
    check_value: bool = False
    #: an element ``s.x[i, j] = v`` of a two-dimensional array: ``(i, j)`` (``index`` is
    #: the slot offset computed from them)
    axes: tuple[Expr, Expr] | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class MaskStore(Stmt):
    var: VarInfo
    mask: Expr
    value: Expr
    check_value: bool = False


@dataclass(eq=False)
class Require(Stmt):
    cond: Expr


@dataclass(eq=False)
class Emit(Stmt):
    kind: str
    request: Expr
    page: Expr | None = None
    pages: Expr | None = None  # a mask over pages
    check_request: bool = False
    check_page: bool = False


@dataclass(eq=False)
class Violate(Stmt):
    prop: str
    fmt: str
    args: list[tuple[str, Expr]]


@dataclass(eq=False)
class If(Stmt):
    test: Expr
    body: list[Stmt]
    orelse: list[Stmt]


@dataclass(eq=False)
class For(Stmt):
    var: str
    domain: Domain
    body: list[Stmt]


@dataclass(eq=False)
class Break(Stmt):
    pass


@dataclass(eq=False)
class Continue(Stmt):
    pass


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None


@dataclass(eq=False)
class Do(Stmt):
    expr: Expr


# -- functions -------------------------------------------------------------------------

@dataclass(eq=False)
class Function:
    """One checked body: an action, invariant, helper specialisation or monitor handler."""

    name: str
    kind: str  # "action" | "invariant" | "helper" | "handler"
    params: list[tuple[str, Any]]  # (name, type); the state parameter has StateT
    body: list[Stmt]
    file: str
    line: int
    ret: Any = None  # result type of a helper/invariant, None for procedures
    effects: bool = False  # writes state, emits, requires or violates (directly or via calls)
    key: str = ""  # unique name among all functions of a system (for code generation)
    #: id space -> why this body (not the functions it calls) does not treat the ids
    #: of that space interchangeably (:mod:`kvspec.lang.symmetry`)
    breaks: dict[str, list[str]] = field(default_factory=dict)

    @property
    def value_params(self) -> list[tuple[str, Any]]:
        return [(n, t) for n, t in self.params if not isinstance(t, StateT)]


def walk_stmts(body: list[Stmt]) -> Any:
    """Every statement of a body, nested ones included."""
    for st in body:
        yield st
        if isinstance(st, If):
            yield from walk_stmts(st.body)
            yield from walk_stmts(st.orelse)
        elif isinstance(st, For):
            yield from walk_stmts(st.body)


def sub_exprs(e: Expr) -> list[Expr]:
    """The direct sub-expressions of an expression."""
    if isinstance(e, Load):
        return [e.index] if e.index is not None else []
    if isinstance(e, VecOf):
        return [e.row] if e.row is not None else []
    if isinstance(e, Unary):
        return [e.x]
    if isinstance(e, (Arith, Compare, VecCompare)):
        return [e.a, e.b]
    if isinstance(e, (BoolOp, MaskOp, MinMax)):
        return list(e.items)
    if isinstance(e, Cond):
        return [e.test, e.then, e.orelse]
    if isinstance(e, Reduce):
        return [e.mask]
    if isinstance(e, Fold):
        return list(e.conds) + [e.elt]
    if isinstance(e, Call):
        return list(e.args)
    return []


def stmt_exprs(st: Stmt) -> list[Expr]:
    """The expressions a statement evaluates directly."""
    if isinstance(st, Assign):
        return list(st.values)
    if isinstance(st, Store):
        return ([st.index] if st.index is not None else []) + [st.value]
    if isinstance(st, MaskStore):
        return [st.mask, st.value]
    if isinstance(st, Require):
        return [st.cond]
    if isinstance(st, Emit):
        return [x for x in (st.request, st.page, st.pages) if x is not None]
    if isinstance(st, Violate):
        return [e for _, e in st.args]
    if isinstance(st, If):
        return [st.test]
    if isinstance(st, Return):
        return [st.value] if st.value is not None else []
    if isinstance(st, Do):
        return [st.expr]
    return []


def calls_in(fn: Function) -> list[Function]:
    """Helper functions called (directly) by a body."""
    out: list[Function] = []

    def visit(e: Expr) -> None:
        if isinstance(e, Call) and e.fn not in out:
            out.append(e.fn)
        for x in sub_exprs(e):
            visit(x)

    for st in walk_stmts(fn.body):
        for e in stmt_exprs(st):
            visit(e)
    return out


def reachable(fns: list[Function]) -> list[Function]:
    """``fns`` and every function they call, transitively, each once, callees first."""
    order: list[Function] = []
    seen: set[int] = set()

    def visit(f: Function) -> None:
        if id(f) in seen:
            return
        seen.add(id(f))
        for c in calls_in(f):
            visit(c)
        order.append(f)

    for f in fns:
        visit(f)
    return order
