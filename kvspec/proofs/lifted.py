"""Re-checking a size-specific orbit certificate through its reading for every size.

An orbit certificate at size ``N`` (:mod:`kvspec.proofs.orbits`) stands for the
invariant ``I_N``: every renaming of each representative clause. A representative
``c`` that singles out ids ``a1 … ak`` has one instance per injective choice of ids
for them, so ``c`` **lifts exactly** to the quantified clause

    ``for all distinct x1 … xk: c[a1 := x1, …, ak := xk]``

over the parametric reading of the model (:mod:`kvspec.proofs.parametric`), whose
instances at size ``N`` are exactly the instances of ``c`` — when

* every id the lifting turns into a variable is one the orbit check counts as named
  by ``c`` (a clause that mentions every id of a space only through a count, ``at
  most one page owned by r``, lifts that count to a quantifier over every id, which
  says the same at every size), and every such id is of a space the certificate is
  symmetric in;
* every integer compared with an id is an id at size ``N`` or ``-1`` (``None``);
* nothing is read as a ghost count (no new state);
* no id becomes two variables, and — checked, not trusted — each lifted clause
  instantiated at its representative's ids is equivalent to the representative
  (:class:`_Identity`: one small query per clause).

The lifting's variables (``r#0``) and the reading's constants cannot be a model's
(:func:`kvspec.proofs.parametric.model.parametric_model` refuses a state variable
named like one of them).

The lifted clauses ``Q`` then satisfy ``Q[N] = I_N`` (as sets of instances), and
checking ``Q`` for every number of requests and pages
(:func:`kvspec.proofs.parametric.induction.check_invariant`: initiation, consecution
over every action, no model error, the properties) checks in particular ``I_N`` at
``N``: the certificate is re-checked. One such check costs about as much at every
size, where the orbit-by-orbit check grows with the instances an action touches.

A constant tied to the pool says something else at other sizes when read literally
(``need[r] != 65`` at 64 pages is ``need[r] != pages + 1``). So the representatives
are first read with such constants relative to one size at a time
(:func:`_size_readings`: a constant next to a size's value, compared with a variable
whose range depends on the sizes, as ``size.pages + 1``), each reading kept only when
:class:`_Identity`, with every size at its value here, proves it the same clause as
its representative at this size; a representative with several is checked through
all of them, which at this size are still just it. The literal reading comes after.
The route needs no renaming of the actions: the reading of each action is the
model's for every size, or over-approximates it (an ordered allocation is read
loosely), which only adds behaviours.

When a representative does not lift exactly, the model has no parametric reading,
or ``Q`` is not inductive for every size (a clause that holds at ``N`` only because
of the pool's size), nothing is concluded: the orbit check decides, as before (a
lifting that raises is such a case too).
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import z3

from kvspec.lang.system import Property, System
from kvspec.proofs.parametric.generalise import (
    NotLiftable,
    QClause,
    Lifter,
    pieces,
    quantify,
    size_variants,
    slot_map,
    slot_sorts,
)

if TYPE_CHECKING:
    from kvspec.proofs.orbits import Orbits, Renaming

#: the fewest clause instances at which ``check-proof`` tries this route first: below
#: it the orbit check is as fast (measured in benchmarks/RESULTS.md, ninth round)
LIFTED_FROM = 5000
#: the whole lifted check may take this long before the orbit check takes over
BUDGET_S = 10.0
#: a representative that singles out more ids than this is left to the orbit check
#: (its quantified clause would be slow to instantiate)
MAX_VARIABLES = 6


@dataclass
class LiftedCheck:
    """The outcome of the lifted route: ``proved`` when the certificate is re-checked,
    else ``why_not`` says why the orbit check decides."""

    proved: bool
    why_not: str = ""
    clauses: int = 0  # quantified clauses checked
    queries: int = 0
    #: of ``clauses``, those that read constants relative to a size
    readings: int = 0


class _ExactLifter(Lifter):
    """The lifting of :mod:`~kvspec.proofs.parametric.generalise`, refusing the one
    reading that is not exact: an integer other than an id at this size or ``-1``
    compared with an id (it would read as ``None`` or as one more id)."""

    def as_ref(self, t: Any, dim: str) -> z3.ExprRef:
        if not self.is_ref(t) and z3.is_int_value(t):
            k = t.as_long()
            if k < -1 or k >= self.counts.get(dim, 0):
                raise NotLiftable(f"{k} compared with a {dim} id is not one at this size")
        return super().as_ref(t, dim)


def orbit_instances(orbits: Orbits) -> int:
    """How many instances the representatives of ``orbits`` stand for."""
    n = orbits.ren.n
    return sum(math.prod(math.perm(n[d], len(named)) for d, named in c.named.items())
               for c in orbits.clauses)


@dataclass
class _Piece:
    """One lifted piece of a representative: the size-specific ``piece``, the ids its
    lifting turned into variables (``order``) and its quantified ``clause`` (the
    literal reading of its constants)."""

    piece: z3.BoolRef
    order: list[tuple[str, int]]
    clause: QClause


def lift_exactly(system: System, model: Any, orbits: Orbits, identity: _Identity
                 ) -> list[_Piece]:
    """The representatives of ``orbits`` as quantified clauses over ``model`` (the
    parametric reading of ``system``) whose instances at ``system``'s size are exactly
    theirs (module docstring), each piece with what its readings as sizes need;
    ``identity`` compares them. Raises NotLiftable, naming the clause, otherwise."""
    slots = identity.slots
    known = slot_sorts(slots)
    counts = system.schema.counts
    out: list[_Piece] = []
    for c in orbits.clauses:
        named = {d: set(ids) for d, ids in c.named.items()}
        for piece in pieces(c.formula):
            lifter = _ExactLifter(model.sorts, model.symbols, slots, counts, known, None)
            try:
                body = lifter.lift(piece)
            except NotLiftable as exc:
                raise NotLiftable(f"clause {c.index + 1} ({c.label}): {exc}") from None
            except Exception as exc:  # noqa: BLE001 - the orbit check decides instead
                raise NotLiftable(f"clause {c.index + 1} ({c.label}) has no reading for "
                                  f"every size ({type(exc).__name__}: {exc})") from None
            if not z3.is_bool(body):
                raise NotLiftable(f"clause {c.index + 1} ({c.label}) is not a Boolean clause")
            for dim, k in lifter.order:
                if dim not in orbits.ren.on:
                    raise NotLiftable(f"clause {c.index + 1} ({c.label}) names {dim} {k}, "
                                      f"and the certificate does not rename {dim}s")
                if k not in named.get(dim, set()):
                    raise NotLiftable(f"clause {c.index + 1} ({c.label}) names {dim} {k} "
                                      f"among every {dim}, not as an id its renamings move")
            if len(lifter.order) > MAX_VARIABLES:
                raise NotLiftable(f"clause {c.index + 1} ({c.label}) names more than "
                                  f"{MAX_VARIABLES} ids")
            if len(set(lifter.order)) != len(lifter.order):
                raise NotLiftable(f"clause {c.index + 1} ({c.label}) reads one id as two")
            xs = [lifter.ids[k] for k in lifter.order]
            q = QClause(quantify(model.sorts, xs, body), c.label)
            why = _differs(identity, piece, q, lifter.order)
            if why:
                raise NotLiftable(f"clause {c.index + 1} ({c.label}): {why}")
            out.append(_Piece(piece, list(lifter.order), q))
    return out


def _size_readings(model: Any, identity: _Identity, lifted: list[_Piece]
                   ) -> Iterator[tuple[list[QClause], int]]:
    """For one size symbol at a time (``size.*`` before the bounds computed from the
    sizes, ``bound.*``), the lifted clauses with each constant compared with a
    size-dependent variable next to that symbol's value read relative to it
    (:func:`size_variants`: ``!=``, and at a range's end ``<`` or ``>``), and how many
    of them are such readings. A piece's readings are all kept when each is the same
    as it at this size (checked, :class:`_Identity`): together they still are. The
    values only place the readings; the identity check decides."""
    if model.sizes is None:
        return
    symbols = sorted([(t, model.sizes.values[n]) for n, t in model.sizes.terms.items()
                      if n in model.sizes.values],
                     key=lambda tv: (not str(tv[0]).startswith("size."), str(tv[0])))
    ranged = set(model.symbolic)
    for sym in symbols:
        clauses: list[QClause] = []
        read = 0
        for x in lifted:
            same = [v for v in size_variants([x.clause], ranged, [sym])
                    if not _differs(identity, x.piece, v, x.order)]
            clauses += same or [x.clause]
            read += len(same)
        if read:
            yield clauses, read


def _differs(identity: _Identity, piece: z3.BoolRef, q: QClause,
             order: list[tuple[str, int]]) -> str:
    """:meth:`_Identity.differs`, an exception read as a difference."""
    try:
        return identity.differs(piece, q.formula, order)
    except Exception as exc:  # noqa: BLE001 - the orbit check decides instead
        return f"its reading could not be compared ({type(exc).__name__}: {exc})"


class _Identity:
    """The parametric reading at this size, tied to the size-specific slots: id ``k`` of
    each space is an element ``e_k`` (distinct, none of them ``None``, and together with
    ``None`` every element), and each parametric term at those elements equals its slot
    (an id-valued slot's integer decoded: ``-1`` to ``None``, ``k`` to ``e_k``). A lifted
    clause instantiated at the ids its representative singles out must then be
    equivalent to the representative: one small query that does not trust the lifting
    (a clause read vacuously, a model constant bound by the quantifier)."""

    #: seconds per equivalence query (running out: not exact)
    TIMEOUT_S = 2.0
    #: the most instances a quantifier is expanded to (more: not compared, not exact)
    EXPAND = 1_000

    def __init__(self, system: System, model: Any, slots: dict[str, Any],
                 ren: Renaming) -> None:
        self.model = model
        self.slots = slots
        self.counts = system.schema.counts
        self.ren = ren  # the certificate's slots: their constants, names and sorts
        sorts = model.sorts
        self.elements: dict[str, list[z3.ExprRef]] = {}
        self.decode: dict[str, z3.FuncDeclRef] = {}
        #: every element of each sort: None and the e_k (a quantifier left after
        #: instantiation, from a count over every id, is expanded over them)
        self.every: dict[z3.SortRef, list[z3.ExprRef]] = {}
        self.solver = z3.Solver()
        self.solver.set("timeout", int(self.TIMEOUT_S * 1000))
        for dim, sort in sorts.sort.items():
            n = self.counts.get(dim, 0)
            es = [z3.Const(f"{dim}#e{k}", sort) for k in range(n)]
            nil = sorts.nil[dim]
            dec = z3.Function(f"{dim}#decode", z3.IntSort(), sort)
            self.elements[dim], self.decode[dim] = es, dec
            self.every[sort] = [nil, *es]
            self.solver.add(z3.Distinct(*es, nil) if es else z3.BoolVal(True),
                            dec(-1) == nil, *[dec(k) == e for k, e in enumerate(es)])
        # the sizes and size-dependent bounds at their values in this compilation: a
        # reading that names them (``need[r] != size.pages + 1``) is compared at this
        # size. A size symbol is the size itself; a bound's value is the compiled
        # range's end it stands for (not a fresh call of the model's bound function)
        if model.sizes is not None:
            self.solver.add(*[t == system.sizes[n[len("size."):]]
                              for n, t in model.sizes.terms.items()
                              if n.startswith("size.") and n[len("size."):] in system.sizes])
        for var, ends in model.symbolic.items():
            t = system.schema.by_name[var].type
            self.solver.add(*[end == value for end, value in zip(ends, (t.lo, t.hi))
                              if not z3.is_int_value(end)])

    def _link(self, name: str) -> z3.BoolRef:
        v, ids = self.slots[name]
        sym = self.model.symbols[v.name]
        term = sym(*[self.elements[d][k] for d, k in ids]) if ids else sym
        slot = self.ren.cur[self.ren.slot_of[name]]
        t = v.type
        if t.kind == "ref":
            dim = t.ref_dim
            return z3.And(slot >= -1, slot < self.counts.get(dim, 0),
                          term == self.decode[dim](slot))
        if t.kind == "bool":
            return term == slot
        dom = t.domain()
        return z3.And(term == slot, slot >= min(dom), slot <= max(dom))

    def _expand(self, t: z3.ExprRef, memo: dict[int, z3.ExprRef]) -> z3.ExprRef:
        """``t`` with each quantifier replaced by the conjunction (disjunction) of its
        instances over every element of its sorts: quantifier-free, so the query is
        decided at once."""
        key = t.get_id()
        if key in memo:
            return memo[key]
        if z3.is_quantifier(t):
            choices = [self.every.get(t.var_sort(i), []) for i in range(t.num_vars())]
            if math.prod(len(c) for c in choices) > self.EXPAND:
                raise _TooMany
            body = t.body()
            insts = [self._expand(z3.substitute_vars(body, *reversed(pick)), memo)
                     for pick in itertools.product(*choices)]
            out: z3.ExprRef = z3.And(*insts) if t.is_forall() else z3.Or(*insts)
        elif z3.is_app(t) and t.num_args():
            kids = [self._expand(k, memo) for k in t.children()]
            same = all(a.eq(b) for a, b in zip(kids, t.children()))
            out = t if same else t.decl()(*kids)
        else:
            out = t
        memo[key] = out
        return out

    def differs(self, piece: z3.BoolRef, q: z3.BoolRef, order: list[tuple[str, int]]) -> str:
        """Why ``q`` at the ids ``order`` is not equivalent to ``piece`` ('' when it is)."""
        from kvspec.proofs.clauses import term_constants

        names, _ = term_constants(piece, self.ren.known)
        if order:  # the clause's own quantifier (a bare count's is part of the reading)
            at = [self.elements[d][k] for d, k in order]
            inst = z3.substitute_vars(q.body(), *reversed(at))
        else:
            inst = q
        try:
            inst = self._expand(inst, {})
        except _TooMany:
            return "its quantified reading has too many instances to compare at this size"
        s = self.solver
        s.push()
        try:
            s.add(*[self._link(n) for n in sorted(names)])
            s.add(inst != piece)
            res = s.check()
        finally:
            s.pop()
        if res == z3.unsat:
            return ""
        return ("its quantified reading differs from it at its own ids" if res == z3.sat
                else "whether its quantified reading is the same could not be decided")


class _TooMany(Exception):
    """A quantifier with more instances than :data:`_Identity.EXPAND` at this size."""


def check_lifted(system: System, orbits: Orbits, properties: list[Property], *,
                 timeout: float, budget: float = BUDGET_S) -> LiftedCheck:
    """Re-check the invariant of ``orbits`` for ``properties`` at ``system``'s size
    through its exact lifting, checked for every size (module docstring)."""
    from kvspec.proofs.parametric.induction import check_invariant
    from kvspec.proofs.parametric.model import parametric_model
    from kvspec.proofs.parametric.values import Unsupported

    start = time.monotonic()

    def done(why: str, **kw: Any) -> LiftedCheck:
        return LiftedCheck(not why, why, **kw)

    try:
        model = parametric_model(system)
    except Unsupported as exc:
        return done(f"the model has no reading for every size: {exc}")
    names = [p.name for p in properties]
    unread = [n for n in names if n not in model.bad]
    if unread:
        return done("no reading for every size of " + ", ".join(unread))
    identity = _Identity(system, model, slot_map(system), orbits.ren)
    try:
        lifted = lift_exactly(system, model, orbits, identity)
    except NotLiftable as exc:
        return done(f"a representative does not lift exactly: {exc}")
    # the constants read relative to one size at a time (a constant next to the pool's
    # size in a size-specific certificate is, as a rule, tied to it); then as they are
    tries = itertools.chain(_size_readings(model, identity, lifted),
                            [([x.clause for x in lifted], 0)])
    queries = 0
    why = ""
    checked = 0
    for clauses, readings in tries:
        checked = len(clauses)
        res = check_invariant(model, clauses, names, houdini=False,
                              timeout=min(timeout, budget), deadline=start + budget)
        queries += res.queries
        why = "; ".join(res.problems)
        if not why and res.unknown:
            why = f"{res.unknown} queries undecided"
        if not why and sorted(res.proved) != sorted(names):
            why = "not every property is proved"
        if not why:
            return done("", clauses=len(clauses), queries=queries, readings=readings)
        if time.monotonic() - start >= budget:
            break
    return done(f"not inductive for every size ({why})", clauses=checked, queries=queries)
