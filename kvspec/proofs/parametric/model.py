"""A model as one transition system for every number of requests and pages.

:func:`parametric_model` checks that a compiled :class:`~kvspec.lang.system.System`
can be read for every size — its bodies are inside the fragment of
:mod:`kvspec.proofs.parametric.encode`, nothing in it depends on the number of
requests or pages, its initial state is the same for every id, and the functions
between id sorts have no cycle (so the checks stay in EPR, the decidable fragment
Ivy and mypyvy use) — and builds the state symbols, the initial state, one
parametric step per action and the bad states of every property. Anything that
stands in the way is an :class:`~kvspec.proofs.parametric.encode.Unsupported`
naming the model line.

Sizes that are not id spaces (``prefill_capacity``, ``max_need``, the size of a
declared index space such as ``ranks``) keep the values the system was compiled
with: a proof is for every number of requests and pages at those values. A
variable over an index space is one symbol per index and an id of one is an int
(:mod:`kvspec.proofs.parametric.spaces`). ``len()`` of an id space, ranges bounded by the number of ids and
bounds computed by functions of the sizes are symbols
(:mod:`kvspec.proofs.parametric.bounds`); order-dependent loops and loose counts
are over-approximated, and the model lists where (``approximations``).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang import ir
from kvspec.lang.declare import SCALAR
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.schema import VarInfo
from kvspec.lang.system import Property, System, action_hints
from kvspec.lang.check_stmt import CARRIES_LOCAL, STOPS_EARLY
from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.parametric.bounds import ID_SPACES, Approximation, SizeSymbols
from kvspec.proofs.parametric.encode import ParamExec, Step
from kvspec.proofs.parametric.spaces import Reading, reading
from kvspec.proofs.parametric.values import Sorts, Unsupported, View, var_dims


@dataclass
class ParamModel:
    system: System
    sorts: Sorts
    vars: list[VarInfo]
    symbols: dict[str, Any]  # name -> z3 constant (scalar) or FuncDeclRef (array)
    init: View
    steps: list[tuple[str, Step]] = field(default_factory=list)
    bad: dict[str, z3.BoolRef] = field(default_factory=dict)
    inv_errors: list[tuple[z3.BoolRef, str]] = field(default_factory=list)
    sizes: SizeSymbols | None = None
    #: what holds of the size symbols at every size (SizeSymbols.axioms)
    axioms: list[z3.BoolRef] = field(default_factory=list)
    #: state variable -> symbolic (lo, hi) of an Int bounded by a size symbol
    symbolic: dict[str, tuple[z3.ArithRef, z3.ArithRef]] = field(default_factory=dict)
    #: where the reading is looser than the model (sound for invariants)
    approximations: list[Approximation] = field(default_factory=list)
    #: the variables as read, those an index space splits included (spaces.Reading)
    reading: Reading | None = None

    @property
    def fixed_sizes(self) -> dict[str, int]:
        """The size parameters kept at their values (neither id spaces nor symbols)."""
        return fixed_sizes(self.system, self.sizes.params if self.sizes is not None else ())

    @property
    def all_sizes(self) -> list[str]:
        """The size parameters the reading covers every value of."""
        return [k for k in self.system.sizes if k not in self.fixed_sizes]

    def pre_view(self) -> View:
        return view_of(self.symbols, self.vars)

    def value_sort(self, v: VarInfo) -> z3.SortRef:
        return self.sorts.of_type(v.type)


def id_size_names(system: System) -> dict[str, str]:
    """Size parameter name -> id space, for the sizes that count requests and pages."""
    out: dict[str, str] = {}
    for s in system.loaded.decl.sizes:
        if s.dim in (REQUEST, PAGE):
            out[s.name] = s.dim
    return out


def fixed_sizes(system: System, params: Iterable[str] = ()) -> dict[str, int]:
    """The sizes an all-sizes reading keeps at their values: not the id spaces, not the
    size parameters ``params`` it reads as symbols."""
    ids = id_size_names(system)
    skip = set(params)
    return {k: v for k, v in system.sizes.items() if k not in ids and k not in skip}


def symbolic_params(system: System) -> list[str]:
    """The size parameters an all-sizes reading may take as symbols too: declared,
    neither id spaces nor derived, and below their maximum (the reading compiles the
    model once more with each one larger)."""
    return [s.name for s in system.loaded.decl.sizes
            if s.dim is None and s.derived is None and s.name in system.sizes
            and (s.maximum is None or system.sizes[s.name] < s.maximum)]


def view_of(symbols: dict[str, Any], vars_: list[VarInfo]) -> View:
    out: View = {}
    for v in vars_:
        sym = symbols[v.name]
        if v.dim == SCALAR:
            out[v.name] = sym
        else:
            out[v.name] = (lambda *a, s=sym: s(*a))
    return out


def make_symbols(sorts: Sorts, vars_: list[VarInfo], suffix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in vars_:
        rng = sorts.of_type(v.type)
        name = v.name + suffix
        dims = var_dims(v)
        if not dims:
            out[v.name] = z3.Const(name, rng)
        else:
            out[v.name] = z3.Function(name, *[sorts.sort[d] for d in dims], rng)
    return out


def parametric_model(system: System, *, bigger: System | None = None,
                     params: Iterable[str] = ()) -> ParamModel:
    """The parametric reading of ``system`` (see the module docstring). ``params``: the
    size parameters besides requests and pages to read as symbols (every value of
    them; :func:`symbolic_params`), the others keep their values. ``bigger``: the same
    model compiled with more requests and pages (and larger ``params``), to find what
    depends on them (None: compiled here)."""
    derived = {s.name for s in system.loaded.decl.sizes if s.derived is not None}
    params = frozenset(params) | frozenset(n for n in derived if n in system.sizes)
    state = reading(system)
    _check_symmetric(system)
    _check_size_constants(system, params)
    sizes = SizeSymbols(id_size_names(system), dict(system.sizes), params)
    for name in sorted(params):
        sizes.of_size(name)  # declared whether or not the code reads it
    symbolic = _symbolic_ranges(system, sizes)
    if bigger is None:
        bigger = _bigger(system, params)
    if bigger is not None:
        _check_size_independent(system, bigger, symbolic, params)
    _check_no_size_functions(system)
    vars_ = state.vars
    _check_sort_graph(system, vars_)
    sorts = Sorts.make()
    _check_reserved_names(system, sorts, vars_)
    symbols = make_symbols(sorts, vars_)
    init = _initial(system, sorts, vars_)
    model = ParamModel(system, sorts, vars_, symbols, init, sizes=sizes,
                       symbolic={v.name: symbolic[v.name] for v in vars_ if v.name in symbolic},
                       reading=state)
    flags = {p.name: f"violated:{p.name}" for p in system.properties if p.flag is not None}
    by_name = {v.name: v for v in vars_}
    ex = ParamExec(sorts, by_name, flags, sizes, symbolic, state)
    pre = model.pre_view()
    for a in system.actions:
        model.steps.append((a.name, ex.run_action(pre, a.ir, a.params, system.handlers)))
    for p in system.properties:
        model.bad[p.name] = _bad(ex, pre, p, model)
    model.approximations = list(ex.approximations)
    model.axioms = sizes.axioms(system, model.symbolic)
    return model


def _check_size_constants(system: System, params: frozenset[str]) -> None:
    """``len()`` of requests or pages and a read of a size in ``params`` are symbols: each
    must still be in the compiled code as the constant the compiler made for it. One the
    compiler folded into another constant (``len(s.requests) >= 4`` is ``False`` at 2
    and at 3 requests), or used as a loop range, is decided at compile time and
    rejected with its line."""
    present = {id(e) for e, _ in _expressions(system)}
    for file, c in system.sized_constants:
        symbolic = c.size in ID_SPACES or (c.param is not None and c.param in params)
        if symbolic and id(c) not in present:
            what = "len() of an id space" if c.size is not None else f"the size {c.param!r}"
            raise Unsupported(f"{file}:{c.line}", f"{what} where its value is decided at "
                                                  "compile time (a constant that differs "
                                                  "with the sizes)")


def _expressions(system: System) -> Iterator[tuple[ir.Expr, ir.Function]]:
    """Every expression of the model's bodies (the functions they call included), with
    the function it is in."""
    roots = [a.ir for a in system.actions]
    roots += [p.ir for p in system.properties if p.ir is not None]
    roots += [h for hs in system.handlers.values() for h in hs]
    seen: set[int] = set()
    stack: list[tuple[ir.Expr, ir.Function]] = []
    for fn in roots:
        if id(fn) not in seen:
            seen.add(id(fn))
            stack += [(x, fn) for st in ir.walk_stmts(fn.body) for x in ir.stmt_exprs(st)]
        while stack:
            e, owner = stack.pop()
            yield e, owner
            if isinstance(e, ir.Call) and id(e.fn) not in seen:
                seen.add(id(e.fn))
                stack += [(x, e.fn) for st in ir.walk_stmts(e.fn.body)
                          for x in ir.stmt_exprs(st)]
            stack += [(x, owner) for x in ir.sub_exprs(e)]


def _symbolic_ranges(system: System, sizes: SizeSymbols
                     ) -> dict[str, tuple[z3.ArithRef, z3.ArithRef]]:
    """Variable name (or ``action.param``) -> symbolic (lo, hi) of each declared ``Int``
    bounded by the number of ids or by a function of the sizes."""
    out: dict[str, tuple[z3.ArithRef, z3.ArithRef]] = {}
    types = {v.name: v.type for v in system.schema.vars}
    for d in system.loaded.decl.vars:
        t = types.get(d.name)
        if t is not None and t.kind == "int":
            r = sizes.range_of(d.type_spec, t.lo, t.hi)
            if r is not None:
                out[d.name] = r
    # a bound function is one symbol per object (SizeSymbols.bound keys it by id() and
    # keeps it alive); under postponed annotations every resolution makes new ones
    # (`Int(0, above(2))`)
    for a in system.actions:
        hints = _hints(system, a)
        for name, t in a.params:
            if t.kind == "int":
                r = sizes.range_of(hints.get(name), t.lo, t.hi)
                if r is not None:
                    out[f"{a.name}.{name}"] = r
    return out


def _hints(system: System, a: Any) -> dict[str, Any]:
    """The parameter annotations of action ``a``, resolved as its compilation resolved
    them (a name of the class body before one of the module)."""
    fn = a.pyfn
    if fn is None:
        return {}
    try:
        return action_hints(system.loaded, fn)
    except Exception:  # noqa: BLE001 - the compiled model resolved them; be safe
        raise Unsupported(f"{a.ir.file}:{a.ir.line}", f"the parameter types of {a.name} "
                                                      "cannot be re-read") from None


def _bad(ex: ParamExec, pre: View, p: Property, model: ParamModel) -> z3.BoolRef:
    if p.flag is not None:
        return pre[f"violated:{p.name}"]  # type: ignore[no-any-return]
    assert p.ir is not None
    value, errors = ex.evaluate(pre, p.ir)
    model.inv_errors.extend(errors)
    return z3.Not(value)


def _check_symmetric(system: System) -> None:
    """Ids must be interchangeable, except where a loop's order dependence is one the
    reading over-approximates (a carried local, ``break``)."""
    for dim, all_reasons in system.symmetry_breaks.items():
        if dim not in (REQUEST, PAGE):
            continue  # an index space's ids are read one by one (spaces.py)
        reasons = [r for r in all_reasons if not _over_approximated(r.partition(": ")[2])]
        if reasons:
            where, _, why = reasons[0].partition(": ")
            raise Unsupported(_full_path(system, where),
                              f"{why} (the {dim} ids are not interchangeable)")


def _over_approximated(why: str) -> bool:
    """Whether a symmetry break (its reason, without the place) is one the reading
    over-approximates: a loop over ids that carries a local or stops with ``break``."""
    return why.startswith("the loop over ") and (f" {CARRIES_LOCAL} " in why
                                                 or why.endswith(f" {STOPS_EARLY} "
                                                                 "(order-dependent)"))


def _full_path(system: System, short: str) -> str:
    """``file.py:12`` (as the symmetry analysis records it) with the model's path."""
    name, _, line = short.partition(":")
    for f in system.files:
        if f.endswith("/" + name) or f == name:
            return f"{f}:{line}"
    return short


def _bigger(system: System, params: frozenset[str] = frozenset()) -> System | None:
    from kvspec.lang.system import compile_model, settable_sizes

    ids = id_size_names(system)
    settable = settable_sizes(system.loaded, system.sizes)
    over = {k: v + 1 for k, v in settable.items() if k in ids or k in params}
    # a derived size is a symbol of the reading, unrelated to the sizes it is computed
    # from (a superset of its real values): the second compile moves it on its own, so
    # that a constant the compiler folded from it differs and is found, whether or not
    # its function would have moved it at the next size
    moved = {k: v + 1 for k, v in system.sizes.items() if k in params and k not in settable}
    if not over and not moved:
        return None
    props = [p.name for p in system.properties]
    try:
        bigger = compile_model(system.loaded, {**settable, **over}, props,
                               inflight_bound=system.inflight_bound, derived_values=moved)
    except ModelError as exc:
        where = f"{exc.file or system.loaded.file}:{exc.line or 0}"
        raise Unsupported(where, f"the model cannot be compiled with more requests and pages "
                                 f"({exc.message})") from None
    except UsageError as exc:
        raise Unsupported(system.loaded.file, f"the model cannot be compiled with more "
                                              f"requests and pages ({exc})") from None
    return bigger


def _constants(system: System, params: frozenset[str]) -> list[tuple[str, int, Any]]:
    """(file, line, value) of every int constant, loop range and type in the bodies, leaving
    out what an id space's size legitimately changes (the row of a (page, request) index)."""
    out: list[tuple[str, int, Any]] = []
    seen: set[int] = set()

    def index(var: VarInfo, e: ir.Expr, fn: ir.Function,
              axes: tuple[ir.Expr, ir.Expr] | None) -> None:
        if axes is not None:  # s.x[i, j]: the slot offset's strides are the sizes
            for x in axes:
                visit(x, fn)
        elif var.dim not in (SCALAR, REQUEST, PAGE) and isinstance(e, ir.Arith) \
                and isinstance(e.a, ir.Arith):
            visit(e.a.a, fn)
            visit(e.b, fn)
        else:
            visit(e, fn)

    def visit(e: ir.Expr, fn: ir.Function) -> None:
        if isinstance(e, ir.Load) and e.index is not None:
            index(e.var, e.index, fn, e.axes)
            return
        if isinstance(e, ir.VecOf) and e.row is not None:
            visit(e.row, fn)
            return
        if isinstance(e, ir.Const) and not isinstance(e.ty, (ir.RefT, ir.NoneT)) \
                and e.size is None and e.param not in params:
            out.append((fn.file, e.line, e.value))
        if isinstance(e, ir.Fold) and not isinstance(e.domain.ty, ir.RefT):
            out.append((fn.file, e.line, tuple(e.domain.values)))
        if isinstance(e, ir.Call):
            walk(e.fn)
        for x in ir.sub_exprs(e):
            visit(x, fn)

    def walk(fn: ir.Function) -> None:
        if id(fn) in seen:
            return
        seen.add(id(fn))
        for st in ir.walk_stmts(fn.body):
            if isinstance(st, ir.For) and not isinstance(st.domain.ty, ir.RefT):
                out.append((fn.file, st.line, tuple(st.domain.values)))
            if isinstance(st, ir.Store) and st.index is not None:
                index(st.var, st.index, fn, st.axes)
                visit(st.value, fn)
                continue
            for x in ir.stmt_exprs(st):
                visit(x, fn)

    for a in system.actions:
        walk(a.ir)
    for p in system.properties:
        if p.ir is not None:
            walk(p.ir)
    for hs in system.handlers.values():
        for h in hs:
            walk(h)
    return out


def _by_line(constants: list[tuple[str, int, Any]]) -> dict[tuple[str, int], list[Any]]:
    """The constants of each model line, in order (lines in the order they first occur)."""
    out: dict[tuple[str, int], list[Any]] = {}
    for file, line, value in constants:
        out.setdefault((file, line), []).append(value)
    return out


def _check_size_independent(system: System, bigger: System,
                            symbolic: dict[str, Any], params: frozenset[str]) -> None:
    ids = ", ".join(f"{k}" for k in id_size_names(system))
    for v, w in zip(system.schema.vars, bigger.schema.vars):
        if v.type.describe() != w.type.describe() and v.type.kind != "ref" \
                and v.name not in symbolic:
            raise Unsupported(f"{v.file or system.loaded.file}:{v.line or 0}",
                              f"the type of {v.name} depends on the number of ids ({ids})")
    for v, w in zip(system.schema.vars, bigger.schema.vars):
        mine = set(system.initial[v.offset:v.offset + v.length])
        theirs = set(bigger.initial[w.offset:w.offset + w.length])
        if v.type.kind != "ref" and mine != theirs:
            raise Unsupported(f"{v.file or system.loaded.file}:{v.line or 0}",
                              f"the initial value of {v.name} depends on the number of ids "
                              f"({ids})")
    for a, b in zip(system.actions, bigger.actions):
        for (n, t), (_, u) in zip(a.params, b.params):
            if t.kind != "ref" and t.describe() != u.describe() \
                    and f"{a.name}.{n}" not in symbolic:
                raise Unsupported(f"{a.ir.file}:{a.ir.line}", f"the type of parameter {n} of "
                                  f"{a.name} depends on the number of ids ({ids})")
    mine, theirs = _by_line(_constants(system, params)), _by_line(_constants(bigger, params))
    for where in list(mine) + [w for w in theirs if w not in mine]:
        if mine.get(where) != theirs.get(where):  # the first line whose values differ
            raise Unsupported(f"{where[0]}:{where[1]}", f"a value that depends on the number "
                                                        f"of ids ({ids})")


def _check_no_size_functions(system: System) -> None:
    """An initial value computed by a function of the sizes can change at any number of
    ids (``sizes["requests"] >= 4``), not only between the two sizes
    :func:`_check_size_independent` compares."""
    where = f"{system.loaded.file}"
    for d in system.loaded.decl.vars:
        if callable(d.init) and not isinstance(d.init, type):
            raise Unsupported(f"{where}:{d.line or 0}",
                              f"the initial value of {d.name} is computed from the sizes and "
                              "may depend on the number of ids (give a constant init)")
    # a bound computed from the sizes is a symbol of its own (bounds.SizeSymbols)


def _check_reserved_names(system: System, sorts: Sorts, vars_: list[VarInfo]) -> None:
    """A state variable must not be named like a constant of the reading itself: z3
    takes two constants of one name and sort for one, so a variable named
    ``none_request`` would be the ``None`` request (and always None), one named ``p``
    the page a ghost count ranges over."""
    from kvspec.proofs.parametric.cardinality import PAGE_VAR, REQUEST_VAR

    reserved = {str(nil): f"the None {dim}" for dim, nil in sorts.nil.items()}
    reserved[PAGE_VAR] = "the page a count ranges over"
    reserved[REQUEST_VAR] = "the request a count is of"
    for v in vars_:
        what = reserved.get(v.name)
        if what is not None:
            raise Unsupported(f"{v.file or system.loaded.file}:{v.line or 0}",
                              f"the variable name {v.name!r} names {what} in the reading for "
                              "every size; rename the variable")


def _check_sort_graph(system: System, vars_: list[VarInfo]) -> None:
    """Functions from one id sort into another must not form a cycle (EPR)."""
    edges: dict[str, set[str]] = {REQUEST: set(), PAGE: set()}
    first: dict[tuple[str, str], VarInfo] = {}
    for v in vars_:
        if v.type.kind != "ref":
            continue
        for d in var_dims(v):
            target = v.type.ref_dim or REQUEST
            if d != target:
                edges[d].add(target)
                first.setdefault((d, target), v)
    if PAGE in edges[REQUEST] and REQUEST in edges[PAGE]:
        v = first[(REQUEST, PAGE)]
        raise Unsupported(f"{v.file or system.loaded.file}:{v.line or 0}",
                          f"{v.name} maps requests to pages while another variable maps pages "
                          "to requests (a cycle between the id sorts leaves EPR)")


def _initial(system: System, sorts: Sorts, vars_: list[VarInfo]) -> View:
    out: View = {}
    for v in vars_:
        values = system.initial[v.offset:v.offset + v.length]
        if len(set(values)) > 1:
            raise Unsupported(f"{v.file or system.loaded.file}:{v.line or 0}",
                              f"the initial value of {v.name} differs between ids")
        raw = values[0] if values else (v.type.domain()[0])
        if v.type.kind == "bool":
            term: z3.ExprRef = z3.BoolVal(bool(raw))
        elif v.type.kind == "ref":
            if raw != -1:
                raise Unsupported(f"{v.file or system.loaded.file}:{v.line or 0}",
                                  f"the initial value of {v.name} is a literal id")
            term = sorts.nil[v.type.ref_dim or REQUEST]
        else:
            term = z3.IntVal(int(raw))
        if v.dim == SCALAR:
            out[v.name] = term
        else:
            out[v.name] = (lambda *a, t=term: t)
    return out
