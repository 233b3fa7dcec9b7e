"""The parametric interpretation: IR -> Z3 with requests and pages as uninterpreted sorts.

Where :mod:`kvspec.lang.z3gen` builds one term per state slot for one choice of
sizes, this interpretation builds the transition of *every* size at once:

* requests and pages are the elements of two uninterpreted sorts (``Request``,
  ``Page``), each with one extra element ``none_request`` / ``none_page`` standing
  for ``None``; a quantifier over ids ranges over the elements other than it;
* a per-request or per-page array is a function from its sort (a (page, request)
  array a function of both); a scalar is a constant; bools are ``Bool``, bounded
  ints and enum members ``Int``, ids elements of their sort;
* an action parameterised by a request or page is one step with that id an
  arbitrary (existentially chosen) element;
* a declared index space (``ranks``) keeps its size ``n``: its ids are ints
  ``0 .. n-1``, a variable over it one symbol per index, its lines, loops and folds
  run once per index (:mod:`kvspec.proofs.parametric.spaces`);
* ``any``/``all`` over a mask and ``any(...)``/``all(...)`` over ``s.pages`` or
  ``s.requests`` are quantifiers; ``mask.count()`` is supported where it is
  compared with a value of a bounded range (counting quantifiers: at least k
  distinct elements); a loop over an id space whose iterations touch only their
  own element runs for every element at once (:mod:`.iteration`), and so do the
  monitor handlers of the events a mask or such a loop emits.

Some constructs are read as a *larger* set of behaviours (an over-approximation,
sound for invariants) and recorded as :class:`~kvspec.proofs.parametric.bounds.Approximation`
with their line: a loop over ids that carries a local from one iteration to the
next (each iteration reads any value; after the loop the local holds any value),
``break`` in such a loop (any set of iterations runs), a count of ids compared
with a number that is not a small bounded one or used as a number (any value).
``len()`` of an id space and bounds that depend on the number of ids are symbols
(:class:`~kvspec.proofs.parametric.bounds.SizeSymbols`).

Everything else — arithmetic or order on ids, a literal id, a sum over ids,
``return`` inside a loop over ids — is outside the fragment: :class:`Unsupported`
names the file and line of the construct. Every construct accepted and not
recorded as an approximation is translated exactly.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang import ir
from kvspec.lang.schema import VarInfo
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST, ValueType
from kvspec.lang.z3gen import FALSE, TRUE, and_, encode_if, is_false, is_true, not_, or_
from kvspec.proofs.parametric.bounds import ID_SPACES, Approximation, SizeSymbols
from kvspec.proofs.parametric.iteration import Frame, Iteration, Parallel
from kvspec.proofs.parametric.spaces import GridAccess, Layout, Reading, matches, reduce_line
from kvspec.proofs.parametric.values import (MAX_COUNT, NONE, Count, Sorts, Unsupported, Vec,
                                             View, at_least, exists, forall, int_range,
                                             var_dims, where_of)

__all__ = ["Event", "ParamExec", "Step", "Unsupported", "View", "var_dims"]


# -- the state -----------------------------------------------------------------------------

@dataclass
class Event:
    kind: str
    guard: z3.BoolRef
    request: z3.ExprRef
    page: z3.ExprRef | None
    par: Parallel | None = None


@dataclass
class Step:
    """One action's parametric step from a view."""

    enabled: z3.BoolRef
    post: View
    errors: list[tuple[z3.BoolRef, str]]
    params: list[z3.ExprRef]
    param_ok: list[z3.BoolRef]
    #: the comparisons of a count of ids it reads outside loops over ids: (the mask
    #: counted, operator, the value compared with, the reading's result)
    counts: list[tuple[Vec, str, z3.ArithRef, z3.BoolRef]] = field(default_factory=list)


class ParamExec(Iteration, GridAccess):
    """Runs IR functions on a parametric state view."""

    def __init__(self, sorts: Sorts, vars_by_name: dict[str, VarInfo],
                 flags: dict[str, str], sizes: SizeSymbols | None = None,
                 symbolic: dict[str, tuple[z3.ArithRef, z3.ArithRef]] | None = None,
                 state: Reading | None = None) -> None:
        self.sorts = sorts
        #: index spaces (size) and the variables split by them (:mod:`.spaces`)
        self.spaces: dict[str, int] = state.spaces if state is not None else {}
        self.layouts: dict[str, Layout] = state.layouts if state is not None else {}
        self.vars = vars_by_name
        self.flags = flags  # property -> flag variable name
        self.sizes = sizes
        #: variable (or ``action.param``) -> symbolic (lo, hi) of an Int whose bounds
        #: depend on the number of ids
        self.symbolic = dict(symbolic or {})
        self.approximations: list[Approximation] = []
        #: the id variables bound where an expression is encoded (loop and any/all);
        #: a fresh value depends on them
        self.binders: list[z3.ExprRef] = []
        self.view: View = {}
        self.enabled: z3.BoolRef = TRUE
        self.errors: list[tuple[z3.BoolRef, str]] = []
        self.events: list[Event] = []
        self.violations: dict[str, z3.BoolRef] = {}
        self.frames: list[Frame] = []
        self.par: Parallel | None = None
        self.blocks = itertools.count()
        self.counts: list[tuple[Vec, str, z3.ArithRef, z3.BoolRef]] = []
        #: symbol name -> (lo, hi) of the bounded ints and enums (state and parameters)
        self.ranges: dict[str, tuple[int, int]] = {}
        for v in vars_by_name.values():
            if v.type.kind in ("int", "enum") and v.name not in self.symbolic:
                dom = v.type.domain()
                self.ranges[v.name] = (min(dom), max(dom))

    # -- entry points ----------------------------------------------------------------------
    def run_action(self, view: View, action: ir.Function, params: list[tuple[str, ValueType]],
                   handlers: dict[str, list[ir.Function]]) -> Step:
        self.view = dict(view)
        self.enabled = TRUE
        self.errors = []
        self.events = []
        self.violations = {}
        self.frames = []
        self.par = None
        self.counts = []
        values: list[z3.ExprRef] = []
        ok: list[z3.BoolRef] = []
        for name, t in params:
            if t.kind == "ref" and t.ref_dim in self.spaces:  # an index: 0 .. n-1
                v = z3.Int(f"{action.name}.{name}!{next(self.sorts.counter)}")
                lo = -1 if t.optional else 0
                self.ranges[v.decl().name()] = (lo, self.spaces[t.ref_dim] - 1)
                ok.append(z3.And(v >= lo, v <= self.spaces[t.ref_dim] - 1))
            elif t.kind == "ref":
                v = self.sorts.fresh(t.ref_dim or REQUEST, f"{action.name}.{name}")
                ok.append(self.sorts.real(v))
            elif t.kind == "bool":
                v = z3.Bool(f"{action.name}.{name}!{next(self.sorts.counter)}")
            else:
                v = z3.Int(f"{action.name}.{name}!{next(self.sorts.counter)}")
                sym = self.symbolic.get(f"{action.name}.{name}")
                if sym is not None:
                    ok.append(z3.And(v >= sym[0], v <= sym[1]))
                else:
                    dom = t.domain()
                    self.ranges[v.decl().name()] = (min(dom), max(dom))
                    ok.append(z3.And(v >= min(dom), v <= max(dom)))
            values.append(v)
        self.call(action, list(values), TRUE)
        self.run_handlers(handlers)
        for prop, viol in self.violations.items():
            flag = self.flags.get(prop)
            if flag is not None:
                self.view[flag] = or_(self.view[flag], viol)
        return Step(self.enabled, self.view, self.errors, values, ok, self.counts)

    def evaluate(self, view: View, fn: ir.Function) -> tuple[z3.BoolRef, list[tuple[z3.BoolRef, str]]]:
        """A model invariant's value on ``view`` and its model-error conditions."""
        self.view = dict(view)
        self.enabled = TRUE
        self.errors = []
        self.events = []
        self.violations = {}  # not the last action's: an invariant starts from nothing
        self.counts = []
        self.frames = []
        self.par = None
        value = self.call(fn, [], TRUE)
        if self.events or self.violations:
            raise Unsupported(where_of(fn, fn.line), "an invariant with effects")
        return value, list(self.errors)

    def run_handlers(self, handlers: dict[str, list[ir.Function]]) -> None:
        events = list(self.events)
        i = 0
        while i < len(events):
            ev = events[i]
            if ev.par is None:
                for h in handlers.get(ev.kind, ()):
                    vals = [ev.request] if len(h.value_params) == 1 else [ev.request, ev.page]
                    self.call(h, vals, ev.guard)
                i += 1
                continue
            block = [e for e in events[i:] if e.par is not None and e.par.block == ev.par.block]
            # the events of one block are contiguous: a loop or a mask emit
            par = Parallel(ev.par.dim, ev.par.x, ev.par.block)
            saved = self.par
            self.par = par
            self.binders.append(par.x)
            try:
                for e in block:
                    for h in handlers.get(e.kind, ()):
                        vals = [e.request] if len(h.value_params) == 1 else [e.request, e.page]
                        self.call(h, vals, e.guard)
            finally:
                self.par = saved
                self.binders.pop()
            i += len(block)

    def call(self, fn: ir.Function, values: list[Any], entry: z3.BoolRef) -> Any:
        frame = Frame(entry)
        names = [n for n, t in fn.params if not isinstance(t, (ir.StateT, ir.VecT))]
        for name, v in zip(names, values):
            frame.env[name] = v
        self.frames.append(frame)
        try:
            self.block(fn.body, fn)
        finally:
            self.frames.pop()
        if frame.result is None and fn.ret is not None:
            if isinstance(fn.ret, ir.BoolT):
                return FALSE
            return z3.IntVal(0)
        return frame.result

    @property
    def f(self) -> Frame:
        return self.frames[-1]

    # -- guards under a parallel block ---------------------------------------------------------
    def some(self, cond: z3.BoolRef) -> z3.BoolRef:
        """``cond`` for some element of the parallel block (``cond`` itself outside one)."""
        if self.par is None or is_false(cond):
            return cond
        y = self.sorts.fresh(self.par.dim, "e")
        return exists(self.sorts, [y], z3.substitute(cond, (self.par.x, y)))

    def every(self, cond: z3.BoolRef) -> z3.BoolRef:
        if self.par is None or is_true(cond):
            return cond
        y = self.sorts.fresh(self.par.dim, "e")
        return forall(self.sorts, [y], z3.substitute(cond, (self.par.x, y)))

    def check(self, bad: z3.BoolRef, message: str, fn: ir.Function, line: int) -> None:
        cond = and_(and_(self.enabled, self.f.g), bad)
        cond = self.some(cond)
        if not is_false(cond):
            self.errors.append((cond, f"{fn.file}:{line}: {message}"))

    def approximate(self, where: str, what: str) -> None:
        a = Approximation(where, what)
        if a not in self.approximations:
            self.approximations.append(a)

    def fresh(self, sort: z3.SortRef, hint: str) -> z3.ExprRef:
        """Any value of ``sort``, chosen anew for every element of the ids bound here."""
        name = f"{hint}!{next(self.sorts.counter)}"
        if not self.binders:
            return z3.Const(name, sort)
        fn = z3.Function(name, *[x.sort() for x in self.binders], sort)
        return fn(*self.binders)

    # -- statements ------------------------------------------------------------------------
    def block(self, body: list[ir.Stmt], fn: ir.Function) -> None:
        for st in body:
            if is_false(self.f.g):
                return
            self.stmt(st, fn)

    def stmt(self, st: ir.Stmt, fn: ir.Function) -> None:  # noqa: C901 - one case per node
        f = self.f
        where = where_of(fn, st.line)
        if isinstance(st, ir.Assign):
            values = [self.ex(v, fn) for v in st.values]
            running = f.running()
            for name, v in zip(st.names, values):
                if self.par is not None and self.par.here(f) and name in self.par.outer \
                        and name not in self.par.carried:
                    raise Unsupported(where, f"{name!r} carries a value from one iteration of a "
                                             "loop over ids to the next")
                old = f.env.get(name)
                f.env[name] = v if old is None or is_true(running) else \
                    self.merge(running, v, old, where)
        elif isinstance(st, ir.Store):
            self.store(st, fn, where)
        elif isinstance(st, ir.MaskStore):
            if self.par is not None:
                raise Unsupported(where, "a masked assignment inside a loop over ids")
            var = st.var
            mask = self.vec(self.ex(st.mask, fn), where)
            value = self.value_for(self.ex(st.value, fn), var.type, where)
            # whatever the mask, as the concrete run checks it; and whatever the compiler
            # decided at the compiled size (an integer range check it omits there, it may
            # need at another: every range check is encoded, see store)
            self.check(not_(self.in_type(value, var.type, var.name)),
                       f"write {var.name}[mask] = <value>: outside its type", fn, st.line)
            if var.name in self.layouts:
                self.mask_store_line(var, mask, value, where)
                return
            if len(var_dims(var)) != 1:
                raise Unsupported(where, f"a masked assignment to {var.name}")
            old = self.view[var.name]
            g = f.g
            self.view[var.name] = lambda x, old=old, g=g, m=mask, v=value: \
                z3.If(z3.And(g, m.at(x)), v, old(x))
        elif isinstance(st, ir.Require):
            c = self.boolean(self.ex(st.cond, fn), where)
            self.enabled = and_(self.enabled, self.every(or_(not_(f.g), c)))
        elif isinstance(st, ir.Emit):
            self.emit(st, fn, where)
        elif isinstance(st, ir.Violate):
            self.violations[st.prop] = or_(self.violations.get(st.prop, FALSE), self.some(f.g))
        elif isinstance(st, ir.If):
            c = self.boolean(self.ex(st.test, fn), where)
            encode_if(f, c, lambda body: self.block(body, fn), st,
                      lambda a, b: self.merge(c, a, b, where))
        elif isinstance(st, ir.For):
            self.loop(st, fn, where)
        elif isinstance(st, (ir.Break, ir.Continue)):
            if self.par is not None and self.par.here(f) and len(f.loops) <= self.par.depth:
                raise Unsupported(where, "break/continue in a loop over ids")
            k = 0 if isinstance(st, ir.Break) else 1
            f.loops[-1][k] = and_(f.loops[-1][k], not_(f.g))
            f.refresh()
        elif isinstance(st, ir.Return):
            if self.par is not None and self.par.here(f):
                raise Unsupported(where, "return inside a loop over ids")
            if st.value is not None:
                v = self.ex(st.value, fn)
                f.result = v if f.result is None else self.merge(f.g, v, f.result, where)
            f.alive = and_(f.alive, not_(f.g))
            f.refresh()
        elif isinstance(st, ir.Do):
            self.ex(st.expr, fn)
        else:
            raise Unsupported(where, f"{type(st).__name__} statements")

    def store(self, st: ir.Store, fn: ir.Function, where: str) -> None:
        var = st.var
        g = self.f.g
        value = self.value_for(self.ex(st.value, fn), var.type, where)
        # the compiler omits a range check where it can show the value in range at the
        # size it compiled; at another size (five pages instead of four) the same code
        # may need it, so the reading for every size checks every write and every index
        # of an index space (the solver shows the checks that cannot fail)
        self.check(not_(self.in_type(value, var.type, var.name)),
                   f"write {var.name} = <value>: outside its type", fn, st.line)
        if st.index is None:
            if self.par is not None:
                raise Unsupported(where, f"the scalar {var.name} is written inside a loop over ids")
            self.view[var.name] = z3.If(g, value, self.view[var.name])
            return
        if var.name in self.layouts:
            idx, coords = self.grid(var, st.index, st.axes, fn, where)
            coords = self.coordinates(coords, where)
            self.check(self.outside(var, coords), f"write {var.name}[...]: not an index",
                       fn, st.line)
            lay = self.layouts[var.name]
            for key, part in lay.parts.items():
                hit = and_(g, matches(coords, key))
                if not is_false(hit):
                    self.store_at(part.name, var.name, idx, hit, value, where)
            return
        idx = self.indices(var, st.index, fn, where)
        if st.check_index:
            self.check(z3.Or(*[z3.Not(self.sorts.real(i)) for i in idx]),
                       f"write {var.name}[...]: not an id", fn, st.line)
        self.store_at(var.name, var.name, idx, g, value, where)

    def store_at(self, name: str, var: str, idx: list[z3.ExprRef], g: z3.BoolRef, value: Any,
                 where: str) -> None:
        """Write ``value`` at the ids ``idx`` of the symbol ``name`` (of the model's
        variable ``var``) where ``g`` holds."""
        old = self.view[name]
        par = self.par
        if not idx:  # one index of a variable over index spaces only
            if par is not None:
                raise Unsupported(where, f"{var} is written inside a loop over ids at no id "
                                         "of the loop")
            self.view[name] = z3.If(g, value, old)
            return
        if par is None:
            self.view[name] = lambda *a, old=old, g=g, idx=idx, v=value: z3.If(
                z3.And(g, *[x == i for x, i in zip(a, idx)]), v, old(*a))
            return
        pos = [k for k, i in enumerate(idx) if i.eq(par.x)]
        if not pos:
            raise Unsupported(where, f"{var} is written at an element other than the "
                                     "loop's own inside a loop over ids")
        k = pos[0]
        par.written.add(var)
        x = par.x

        def upd(*a: z3.ExprRef, old: Any = old, g: z3.BoolRef = g, idx: list[z3.ExprRef] = idx,
                v: Any = value, k: int = k, x: z3.ExprRef = x) -> z3.ExprRef:
            s = (x, a[k])
            conds = [z3.substitute(g, s)] + [a[j] == z3.substitute(i, s)
                                             for j, i in enumerate(idx) if j != k]
            return z3.If(z3.And(*conds), z3.substitute(v, s), old(*a))

        self.view[name] = upd

    def emit(self, st: ir.Emit, fn: ir.Function, where: str) -> None:
        g = self.f.g
        r = self.ex(st.request, fn)
        if r is NONE or not isinstance(r, z3.ExprRef):
            raise Unsupported(where, f"emit.{st.kind} with no request")
        if st.check_request:
            self.check(z3.Not(self.sorts.real(r)), f"emit.{st.kind}: request is not a request id",
                       fn, st.line)
        if st.pages is not None:
            if self.par is not None:
                raise Unsupported(where, "an event over a mask of pages inside a loop over ids")
            mask = self.vec(self.ex(st.pages, fn), where)
            x = self.sorts.fresh(PAGE, "q")
            par = Parallel(PAGE, x, next(self.blocks))
            self.events.append(Event(st.kind, and_(g, z3.And(self.sorts.real(x), mask.at(x))),
                                     r, x, par))
            return
        p = None
        if st.page is not None:
            p = self.ex(st.page, fn)
            if st.check_page:
                self.check(z3.Not(self.sorts.real(p)), f"emit.{st.kind}: page is not a page id",
                           fn, st.line)
        self.events.append(Event(st.kind, g, r, p, self.par))

    # -- values ------------------------------------------------------------------------------
    def merge(self, c: z3.BoolRef, a: Any, b: Any, where: str) -> Any:
        if isinstance(a, Vec) or isinstance(b, Vec):
            va, vb = self.vec(a, where), self.vec(b, where)
            return Vec(va.dim, lambda x, va=va, vb=vb: z3.If(c, va.at(x), vb.at(x)))
        if isinstance(a, Count) or isinstance(b, Count):
            a, b = self.scalar(a, where), self.scalar(b, where)
        if a is NONE and b is NONE:
            return NONE
        if a is NONE:
            a = self.nil_like(b, where)
        if b is NONE:
            b = self.nil_like(a, where)
        if is_true(c) or a.eq(b):
            return a
        if is_false(c):
            return b
        return z3.If(c, a, b)

    def nil_like(self, other: Any, where: str) -> z3.ExprRef:
        if self.spaces and isinstance(other, z3.ExprRef) and z3.is_int(other):
            return z3.IntVal(-1)  # None of an index space (the language types the rest)
        dim = self.sorts.dim_of_sort(other.sort()) if isinstance(other, z3.ExprRef) else None
        if dim is None:
            raise Unsupported(where, "None where a value that is not an id is expected")
        return self.sorts.nil[dim]

    def value_for(self, v: Any, t: ValueType, where: str) -> z3.ExprRef:
        if v is NONE and t.kind == "ref" and t.ref_dim in self.spaces:
            return z3.IntVal(-1)
        if v is NONE:
            if t.kind != "ref":
                raise Unsupported(where, "None stored in a variable that holds no ids")
            return self.sorts.nil[t.ref_dim or REQUEST]
        return self.scalar(v, where)

    def in_type(self, v: z3.ExprRef, t: ValueType, name: str = "") -> z3.BoolRef:
        if t.kind == "ref" and t.ref_dim in self.spaces:
            return z3.And(v >= (-1 if t.optional else 0), v <= self.spaces[t.ref_dim] - 1)
        if t.kind == "ref":
            return TRUE if t.optional else self.sorts.real(v)
        if t.kind == "bool":
            return TRUE
        sym = self.symbolic.get(name)
        if sym is not None:
            return z3.And(v >= sym[0], v <= sym[1])
        dom = t.domain()
        return z3.And(v >= min(dom), v <= max(dom))

    def scalar(self, v: Any, where: str) -> z3.ExprRef:
        if isinstance(v, Count):
            self.approximate(where, "a count of ids used as a number: read as any number")
            return self.fresh(z3.IntSort(), "count")
        if isinstance(v, Vec) or v is NONE or not isinstance(v, z3.ExprRef):
            raise Unsupported(where, "a vector or None where a single value is expected")
        return v

    def coordinates(self, coords: list[Any], where: str) -> list[z3.ExprRef]:
        """The index terms of an element of an index space, a count of ids among them
        read as any number (:meth:`scalar`)."""
        return [self.integer(c, where) for c in coords]

    def boolean(self, v: Any, where: str) -> z3.BoolRef:
        v = self.scalar(v, where)
        if not z3.is_bool(v):
            raise Unsupported(where, "a value that is not a bool used as a condition")
        return v

    def integer(self, v: Any, where: str) -> z3.ArithRef:
        v = self.scalar(v, where)
        if not z3.is_int(v):
            raise Unsupported(where, "arithmetic or order on ids (ids are opaque for every size)")
        return v

    def vec(self, v: Any, where: str) -> Vec:
        if not isinstance(v, Vec):
            raise Unsupported(where, "a single value where a vector is expected")
        return v

    def indices(self, var: VarInfo, index: ir.Expr, fn: ir.Function, where: str
                ) -> list[z3.ExprRef]:
        """The id terms an index expression of ``var`` denotes."""
        if var.dim == PAGE_BY_REQUEST:
            # m.x[p, r] is lowered to the flat slot p * stride_p + r * stride_r (a stride
            # of 1 folded away); the two ids are told apart by their sorts
            parts = []
            if isinstance(index, ir.Arith) and index.op == "+":
                for part in (index.a, index.b):
                    if isinstance(part, ir.Arith) and part.op == "*" \
                            and isinstance(part.b, ir.Const):
                        part = part.a
                    parts.append(self.ex(part, fn))
            by_sort = {p.sort(): p for p in parts if isinstance(p, z3.ExprRef)}
            page, req = self.sorts.sort[PAGE], self.sorts.sort[REQUEST]
            if len(parts) != 2 or set(by_sort) != {page, req}:
                raise Unsupported(where, f"an index of {var.name} that is not [page, request]")
            out = [by_sort[page], by_sort[req]]
        else:
            out = [self.ex(index, fn)]
        for i, dim in zip(out, var_dims(var)):
            if not (isinstance(i, z3.ExprRef) and i.sort() == self.sorts.sort[dim]):
                raise Unsupported(where, f"{var.name} indexed by an int, not by a {dim} id")
        return out

    def read(self, var: VarInfo, idx: list[z3.ExprRef], where: str) -> z3.ExprRef:
        par = self.par
        if par is not None and var.name in par.written and not any(i.eq(par.x) for i in idx):
            raise Unsupported(where, f"{var.name} is read at another element than the one the "
                                     "loop over ids writes")
        return self.view[var.name](*idx)  # type: ignore[no-any-return]

    def whole(self, var: VarInfo, where: str) -> Vec:
        dims = var_dims(var)
        if len(dims) != 1:
            raise Unsupported(where, f"{var.name} as a whole vector")
        if self.par is not None and var.name in self.par.written:
            raise Unsupported(where, f"{var.name} is read as a whole inside a loop over ids "
                                     "that writes it")
        f = self.view[var.name]
        return Vec(dims[0], lambda x, f=f: f(x))

    # -- expressions ---------------------------------------------------------------------------
    def ex(self, e: ir.Expr, fn: ir.Function) -> Any:  # noqa: C901 - one case per node
        f = self.f
        where = where_of(fn, e.line)
        if isinstance(e, ir.Const):
            if e.size is not None and e.size in ID_SPACES and self.sizes is not None:
                return self.sizes.of_space(e.size)
            if e.size is not None and set(e.size.split("*")) & set(ID_SPACES):
                raise Unsupported(where, "len() of a vector over more than one space of ids")
            # len() of an index space the model only counts: its size, fixed
            if e.param is not None and self.sizes is not None:
                term = self.sizes.param(e.param)
                if term is not None:
                    return term
            if isinstance(e.ty, ir.NoneT) or (isinstance(e.ty, ir.RefT) and e.value == -1):
                return NONE
            if isinstance(e.ty, ir.RefT) and e.ty.dim in self.spaces:
                return z3.IntVal(int(e.value))  # an index: its ids are not interchangeable
            if isinstance(e.ty, ir.RefT):
                raise Unsupported(where, "a literal id (ids are interchangeable for every size)")
            if isinstance(e.ty, ir.BoolT):
                return z3.BoolVal(bool(e.value))
            return z3.IntVal(int(e.value))
        if isinstance(e, ir.Local):
            if isinstance(e.ty, ir.VecT):
                var = self.vars.get(e.ty.var)
                if var is None:
                    raise Unsupported(where, f"the vector {e.ty.var}")
                return self.whole(var, where)
            if e.name not in f.env:
                raise Unsupported(where, f"{e.name!r} is used after the loop over ids that "
                                         "assigns it")
            return f.env[e.name]
        if isinstance(e, ir.Load):
            var = e.var
            if e.index is None:
                if self.par is not None and var.name in self.par.written:
                    raise Unsupported(where, f"{var.name} read inside a loop over ids")
                return self.view[var.name]
            if var.name in self.layouts:
                idx, coords = self.grid(var, e.index, e.axes, fn, where)
                coords = self.coordinates(coords, where)
                self.check(self.outside(var, coords), f"{var.name}[...]: not an index",
                           fn, e.line)  # every size's check (see store)
                return self.read_grid(var, idx, coords, where)
            idx = self.indices(var, e.index, fn, where)
            if e.check:
                self.check(z3.Or(*[z3.Not(self.sorts.real(i)) for i in idx]),
                           f"{var.name}[...]: not an id", fn, e.line)
            return self.read(var, idx, where)
        if isinstance(e, ir.VecOf):
            var = e.var
            if var.name in self.layouts:
                return self.line(var, e, fn, where)
            if e.row is None:
                return self.whole(var, where)
            row = self.ex(e.row, fn)
            if self.par is not None and var.name in self.par.written and not row.eq(self.par.x):
                raise Unsupported(where, f"{var.name} is read at another element than the one "
                                         "the loop over ids writes")
            g2 = self.view[var.name]
            if e.along == 0:  # m.x[:, r]: the column of request r, over pages
                return Vec(PAGE, lambda y, g2=g2, row=row: g2(y, row))
            return Vec(REQUEST, lambda y, g2=g2, row=row: g2(row, y))
        if isinstance(e, ir.Uniform):
            val = e.value
            elem = e.ty.elem
            if isinstance(elem, ir.RefT) and val == -1:
                term = self.sorts.nil[elem.dim]
            elif isinstance(elem, ir.BoolT):
                term = z3.BoolVal(bool(val))
            elif isinstance(elem, ir.RefT) and elem.dim in self.spaces:
                term = z3.IntVal(int(val))
            elif isinstance(elem, ir.RefT):
                raise Unsupported(where, "a literal id")
            else:
                term = z3.IntVal(int(val))
            return Vec(e.ty.dim, lambda x, t=term: t)
        if isinstance(e, ir.Unary):
            x = self.ex(e.x, fn)
            if e.op == "not":
                return not_(self.boolean(x, where))
            if e.op == "neg":
                return -self.integer(x, where)
            m = self.vec(x, where)
            return Vec(m.dim, lambda y, m=m: z3.Not(m.at(y)))
        if isinstance(e, ir.Arith):
            a = self.integer(self.ex(e.a, fn), where)
            b = self.integer(self.ex(e.b, fn), where)
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            if e.op == "//":
                return a / b
            return a % b
        if isinstance(e, ir.Compare):
            return self.compare(e.op, self.ex(e.a, fn), self.ex(e.b, fn), where)
        if isinstance(e, ir.BoolOp):
            if e.op in ("&", "|"):
                a, b = (self.boolean(self.ex(x, fn), where) for x in e.items)
                return and_(a, b) if e.op == "&" else or_(a, b)
            acc = self.boolean(self.ex(e.items[0], fn), where)
            pushed = 0
            for item in e.items[1:]:
                f.push(acc if e.op == "and" else not_(acc))
                pushed += 1
                nxt = self.boolean(self.ex(item, fn), where)
                acc = and_(acc, nxt) if e.op == "and" else or_(acc, nxt)
            for _ in range(pushed):
                f.conds.pop()
            if pushed:
                f.refresh()
            return acc
        if isinstance(e, ir.Cond):
            c = self.boolean(self.ex(e.test, fn), where)
            f.push(c)
            a = self.ex(e.then, fn)
            f.pop()
            f.push(not_(c))
            b = self.ex(e.orelse, fn)
            f.pop()
            return self.merge(c, a, b, where)
        if isinstance(e, ir.VecCompare):
            a = self.vec(self.ex(e.a, fn), where)
            b = self.ex(e.b, fn)
            op = e.op
            if isinstance(b, Vec):
                return Vec(a.dim, lambda x, a=a, b=b: self.compare(op, a.at(x), b.at(x), where))
            return Vec(a.dim, lambda x, a=a, b=b: self.compare(op, a.at(x), b, where))
        if isinstance(e, ir.MaskOp):
            a, b = (self.vec(self.ex(x, fn), where) for x in e.items)
            if e.op == "&":
                return Vec(a.dim, lambda x, a=a, b=b: z3.And(a.at(x), b.at(x)))
            return Vec(a.dim, lambda x, a=a, b=b: z3.Or(a.at(x), b.at(x)))
        if isinstance(e, ir.Reduce):
            m = self.vec(self.ex(e.mask, fn), where)
            if m.dim in self.spaces:  # a line over an index space: n elements, exact
                return reduce_line(e.op, [m.at(z3.IntVal(i))
                                          for i in range(self.spaces[m.dim])])
            if e.op == "count":
                return Count(m, e.line)
            y = self.sorts.fresh(m.dim, "y")
            if e.op == "any":
                return exists(self.sorts, [y], m.at(y))
            return forall(self.sorts, [y], m.at(y))
        if isinstance(e, ir.Fold):
            return self.fold(e, fn, where)
        if isinstance(e, ir.MinMax):
            acc = self.integer(self.ex(e.items[0], fn), where)
            for item in e.items[1:]:
                v = self.integer(self.ex(item, fn), where)
                acc = z3.If(v < acc, v, acc) if e.op == "min" else z3.If(v > acc, v, acc)
            return acc
        if isinstance(e, ir.Call):
            values = [self.ex(a, fn) for a, (_, t) in zip(e.args, e.fn.params)
                      if not isinstance(t, (ir.StateT, ir.VecT))]
            return self.call(e.fn, values, f.g)
        raise Unsupported(where, f"{type(e).__name__} expressions")

    def compare(self, op: str, a: Any, b: Any, where: str) -> z3.BoolRef:
        if isinstance(b, Count) and not isinstance(a, Count):
            flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
            return self.compare(flip[op], b, a, where)
        if isinstance(a, Count):
            return self.count_compare(op, a, b, where)
        if a is NONE and b is NONE:
            return z3.BoolVal(op in ("==", "<=", ">="))
        if a is NONE:
            a = self.nil_like(b, where)
        if b is NONE:
            b = self.nil_like(a, where)
        a, b = self.scalar(a, where), self.scalar(b, where)
        if op == "==":
            return a == b  # type: ignore[no-any-return]
        if op == "!=":
            return a != b  # type: ignore[no-any-return]
        a, b = self.integer(a, where), self.integer(b, where)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore

    def count_compare(self, op: str, c: Count, b: Any, where: str) -> z3.BoolRef:
        if isinstance(b, Count):
            return self.loose_count(where, "two counts of ids compared with each other")
        b = self.integer(b, where)
        result = self._count_compare(op, c, b, where)
        if not self.binders and self.par is None:
            self.counts.append((c.mask, op, b, result))
        return result

    def _count_compare(self, op: str, c: Count, b: z3.ArithRef, where: str) -> z3.BoolRef:
        bounds = int_range(b, self.ranges)
        if bounds is None:
            return self.loose_count(where, "a count of ids compared with a number of unbounded "
                                           "range")
        lo, hi = bounds
        if hi - lo > MAX_COUNT or hi > MAX_COUNT:
            return self.loose_count(where, f"a count of ids compared with numbers up to {hi} "
                                           f"(exact up to {MAX_COUNT})")

        def rel(v: int) -> z3.BoolRef:
            ge = lambda k: at_least(self.sorts, c.mask, k)  # noqa: E731
            if op == "==":
                return and_(ge(v), not_(ge(v + 1)))
            if op == "!=":
                return not_(and_(ge(v), not_(ge(v + 1))))
            if op == "<":
                return not_(ge(v))
            if op == "<=":
                return not_(ge(v + 1))
            if op == ">":
                return ge(v + 1)
            return ge(v)

        if lo == hi:
            return rel(lo)
        return z3.Or(*[z3.And(b == v, rel(v)) for v in range(lo, hi + 1)])

    def loose_count(self, where: str, what: str) -> z3.BoolRef:
        """A comparison of a count read as either outcome (an over-approximation)."""
        self.approximate(where, f"{what}: read as either outcome")
        return self.fresh(z3.BoolSort(), "cmp")  # type: ignore[return-value]
