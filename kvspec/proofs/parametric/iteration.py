"""Loops and folds of the parametric interpretation
(:class:`~kvspec.proofs.parametric.encode.ParamExec`).

A loop or fold over an id space runs every iteration at once, for an arbitrary
element of its sort: a loop whose iterations touch only their own element is exact;
one that carries a local from one iteration to the next, or stops with ``break``, is
over-approximated (recorded with its line); ``any``/``all`` over ids are quantifiers
(no effects inside them); a sum over ids is outside the fragment. A loop or fold over
values (ints, enum members, the ids of an index space) is unrolled.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang import ir
from kvspec.lang.z3gen import FALSE, TRUE, and_, is_false, is_true, not_, or_
from kvspec.proofs.parametric.values import Unsupported, exists, forall

__all__ = ["Frame", "Iteration", "Parallel"]


@dataclass
class Frame:
    entry: z3.BoolRef
    conds: list[z3.BoolRef] = field(default_factory=list)
    alive: z3.BoolRef = TRUE
    loops: list[list[z3.BoolRef]] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    g: z3.BoolRef = TRUE

    def __post_init__(self) -> None:
        self.conds = [self.entry]
        self.g = self.entry

    def refresh(self) -> None:
        g = TRUE
        for c in self.conds:
            g = and_(g, c)
        r = self.alive
        for brk, cont in self.loops:
            r = and_(and_(r, brk), cont)
        self.g = and_(g, r)

    def running(self) -> z3.BoolRef:
        r = self.alive
        for brk, cont in self.loops:
            r = and_(and_(r, brk), cont)
        return r

    def push(self, c: z3.BoolRef) -> None:
        self.conds.append(c)
        self.g = and_(self.g, c)

    def pop(self) -> None:
        self.conds.pop()
        self.refresh()


@dataclass
class Parallel:
    """A loop over an id space (or a mask event) running for every element at once."""

    dim: str
    x: z3.ExprRef
    block: int
    written: set[str] = field(default_factory=set)
    outer: set[str] = field(default_factory=set)  # locals defined before the loop
    #: outer locals the loop assigns: read as any value (an over-approximation)
    carried: set[str] = field(default_factory=set)
    frame: Any = None  # the frame the loop runs in (None: monitor handlers)
    depth: int = 0  # loops of that frame enclosing the loop

    def here(self, f: Any) -> bool:
        """Whether statements of frame ``f`` are the loop's own (not a helper's)."""
        return f is self.frame


class Iteration:
    """Loops and folds, for :class:`~kvspec.proofs.parametric.encode.ParamExec` (which
    provides ``f``, ``par``, ``sorts``, ``spaces``, ``binders``, ``blocks``, ``view``,
    ``enabled``, ``errors``, ``events``, ``violations``, ``block``, ``ex``,
    ``boolean``, ``integer``, ``fresh`` and ``approximate``)."""

    f: Frame
    par: Parallel | None
    sorts: Any
    spaces: dict[str, int]
    binders: list[z3.ExprRef]
    blocks: Any
    view: dict[str, Any]
    enabled: z3.BoolRef
    errors: list[tuple[z3.BoolRef, str]]
    events: list[Any]
    violations: dict[str, z3.BoolRef]

    def loop(self, st: ir.For, fn: ir.Function, where: str) -> None:
        f = self.f
        if isinstance(st.domain.ty, ir.RefT) and st.domain.ty.dim not in self.spaces:
            if self.par is not None:
                raise Unsupported(where, "nested loops over ids")
            self.loop_over_ids(st, fn, where)
            return
        f.loops.append([TRUE, TRUE])
        for v in st.domain.values:
            f.loops[-1][1] = TRUE
            f.refresh()
            if is_false(f.g):
                break
            f.env[st.var] = z3.IntVal(v)
            self.block(st.body, fn)
        f.loops.pop()
        f.refresh()

    def loop_over_ids(self, st: ir.For, fn: ir.Function, where: str) -> None:
        """Every iteration at once, for an arbitrary element ``x``. A local the loop
        carries from one iteration to the next reads as any value in each iteration
        and holds any value after the loop; with ``break`` any set of iterations runs
        (both over-approximations, recorded)."""
        f = self.f
        dim = st.domain.ty.dim
        x = self.sorts.fresh(dim, st.var)
        assigned = _assigned(st.body)
        before = set(f.env)
        par = Parallel(dim, x, next(self.blocks), outer=before, frame=f, depth=len(f.loops))
        self.binders.append(x)
        try:
            for name in sorted(assigned & before):
                old = f.env[name]
                if not isinstance(old, z3.ExprRef):
                    raise Unsupported(where, f"{name!r} carries a value from one iteration of "
                                             "a loop over ids to the next")
                par.carried.add(name)
                f.env[name] = self.fresh(old.sort(), name)
                self.approximate(where, f"the loop over {dim}s carries {name!r} from one "
                                        "iteration to the next: read as any value")
            f.env[st.var] = x
            saved_g = f.g
            f.push(self.sorts.real(x))
            pushed = 1
            if _breaks(st.body):
                pushed += 1
                self.approximate(where, f"the loop over {dim}s stops early with `break`: "
                                        "any set of its iterations runs")
                f.push(self.fresh(z3.BoolSort(), "runs"))  # type: ignore[arg-type]
            f.loops.append([TRUE, TRUE])  # break/continue end this iteration
            f.refresh()
            self.par = par
            try:
                self.block(st.body, fn)
            finally:
                self.par = None
            f.loops.pop()
        finally:
            self.binders.pop()
        f.conds = f.conds[:len(f.conds) - pushed]
        f.refresh()
        f.g = saved_g
        for name in list(f.env):
            if name in par.carried:
                # after the loop: the value of some iteration, or the one before it
                f.env[name] = self.fresh(f.env[name].sort(), name)
            elif name not in before:
                del f.env[name]  # iteration-local names end with the loop (the language
                # rejects reading one after it: it may never have been assigned)

    def fold(self, e: ir.Fold, fn: ir.Function, where: str) -> Any:
        f = self.f
        saved = f.env.get(e.var)
        if isinstance(e.domain.ty, ir.RefT) and e.domain.ty.dim not in self.spaces:
            if e.op == "sum":
                raise Unsupported(where, "a sum over ids (a count of ids as a number)")
            x = self.sorts.fresh(e.domain.ty.dim, e.var)
            f.env[e.var] = x
            self.binders.append(x)
            try:
                return self._fold_ids(e, fn, where, x, saved)
            finally:
                self.binders.pop()
        return self._fold_values(e, fn, where, saved)

    def _fold_ids(self, e: ir.Fold, fn: ir.Function, where: str, x: z3.ExprRef,
                  saved: Any) -> Any:
        f = self.f
        n_err, n_ev = len(self.errors), len(self.events)
        before = (dict(self.view), self.enabled, dict(self.violations))
        c, elt = self._element(e, fn, where)
        elt = self.boolean(elt, where)
        if len(self.events) != n_ev or self.enabled is not before[1] \
                or set(self.violations) != set(before[2]) \
                or any(self.violations[k] is not v for k, v in before[2].items()) \
                or any(self.view[k] is not v for k, v in before[0].items()):
            raise Unsupported(where, "effects (writes, events, require) inside any()/all() "
                                     "over ids")
        self.errors[n_err:] = [(exists(self.sorts, [x], cond), msg)
                               for cond, msg in self.errors[n_err:]]
        self._restore(f, e.var, saved)
        if e.op == "any":
            return exists(self.sorts, [x], and_(c, elt))
        return forall(self.sorts, [x], or_(not_(c), elt))

    def _fold_values(self, e: ir.Fold, fn: ir.Function, where: str, saved: Any) -> Any:
        f = self.f
        acc: Any = FALSE if e.op == "any" else TRUE if e.op == "all" else z3.IntVal(0)
        terms: list[z3.ExprRef] = []
        for v in e.domain.values:
            f.env[e.var] = z3.IntVal(v)
            c, elt = self._element(e, fn, where)
            if e.op == "any":
                acc = or_(acc, and_(c, self.boolean(elt, where)))
            elif e.op == "all":
                acc = and_(acc, or_(not_(c), self.boolean(elt, where)))
            else:
                elt = self.integer(elt, where)
                terms.append(elt if is_true(c) else z3.If(c, elt, 0))
        self._restore(f, e.var, saved)
        if e.op == "sum":
            return z3.Sum(terms) if terms else z3.IntVal(0)
        return acc

    def _element(self, e: ir.Fold, fn: ir.Function, where: str) -> tuple[z3.BoolRef, Any]:
        """A fold's filter (its ``if`` conditions, in order) and its element under it."""
        f = self.f
        c = TRUE
        depth = 0
        for cond in e.conds:
            c = and_(c, self.boolean(self.ex(cond, fn), where))
            f.push(c)
            depth += 1
        elt = self.ex(e.elt, fn)
        for _ in range(depth):
            f.conds.pop()
        if depth:
            f.refresh()
        return c, elt

    @staticmethod
    def _restore(f: Frame, name: str, saved: Any) -> None:
        if saved is None:
            f.env.pop(name, None)
        else:
            f.env[name] = saved


def _assigned(body: list[ir.Stmt]) -> set[str]:
    """The locals a loop body assigns (its nested loops' bodies included)."""
    return {n for st in ir.walk_stmts(body) if isinstance(st, ir.Assign) for n in st.names}


def _breaks(body: list[ir.Stmt]) -> bool:
    """Whether a ``break`` ends the loop whose body this is (not a nested loop's)."""
    for st in body:
        if isinstance(st, ir.Break):
            return True
        if isinstance(st, ir.If) and (_breaks(st.body) or _breaks(st.orelse)):
            return True
    return False
