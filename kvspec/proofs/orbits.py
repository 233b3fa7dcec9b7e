"""Checking a symmetric invariant at one size, one orbit at a time.

When the model treats its request ids (and page ids) interchangeably — decided
statically by :func:`kvspec.lang.symmetry.analyse_symmetry`, which also requires
the initial state to be the same for every id and to name no id — an invariant
closed under renaming of ids needs only a few of its instances checked. Such an
invariant is given by **orbit representatives**: clauses over the model's slots,
each standing for itself and every renaming of it. The invariant ``I`` is the
conjunction of all renamings of all representatives, so it is symmetric by
construction (nothing to verify about the stored text). With ``π`` a permutation of
the symmetric id spaces, ``π(T_a) = T_{π(a)}`` (model symmetry) and ``π(I) = I``:

1. **initiation**: ``init`` is fixed by every ``π`` (checked here too, on a
   transposition and a cycle of each space), so ``I(init)`` holds iff every
   representative holds on ``init``;
2. **properties and model errors**: ``I ∧ bad`` (``I ∧ error_a``) is satisfiable iff
   it is for the representative action ``a`` of each orbit of action instances;
3. **consecution**: ``I ∧ T_b → ψ'`` for every instance ``b`` and clause instance
   ``ψ`` iff it holds for every representative action ``a`` and every ``ψ`` up to
   the permutations that fix ``a``'s ids (the stabiliser of ``a``): renaming by
   ``π`` maps one query to the other. Only instances ``ψ`` that read a slot ``a``
   writes can change.

**Actions that single out ids.** A model may fail to treat a space's ids
interchangeably only because of some actions' own code (``lowest_free``'s
``prealloc`` takes the lowest-numbered free pages), decided statically too
(:func:`kvspec.lang.symmetry.breaking_actions`). The invariant stays closed under
every renaming; only those actions lose their reduction: each of their instances is
checked (no renaming of that space maps one onto another), and its stabiliser
contains no renaming of that space, so every clause instance it may break is a
target. The argument above needs ``π(T_a) = T_{π(a)}`` only for the actions it
renames, and initiation and the properties need no symmetry of the actions at all.

Each query's premise is weakened to the instances of ``I`` whose slots lie in the
query's neighbourhood (sound: a premise that refutes the query refutes it with the
whole invariant); only when that does not refute it is the whole invariant used.
The number of queries so depends on the number of orbits, not on the size, and each
premise grows with the instances that touch the action's slots.

**Renaming a clause.** Ids occur in a clause as slot indices and as values of
id-typed slots (``owner[3] == 1``). A representative may compare an id-typed slot
only with ``=``/``distinct`` against integer literals or other slots of the same id
space; any other use (arithmetic, order) is rejected, so renaming literals in those
places is exact. The ids a clause *names* are found and checked: a clause that
mentions every id of a space (a count over all pages) must be unchanged (up to the
order of the arguments of ``and``, ``or``, ``+``, ``=``) by every permutation of the
ids it does not single out; otherwise it is rejected.
"""
from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang.system import ActionInstance, Property, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.clauses import CertificateError, term_constants, var_names, var_sorts
from kvspec.proofs.lifted import LiftedCheck, check_lifted, orbit_instances
from kvspec.proofs.orbit_queries import OrbitQueries
from kvspec.proofs.smt_check import (
    CounterexampleToInduction,
    Encoding,
    InductionReport,
    cti_trace,
    mk_or,
    _Substitution,
)

DIMS = (REQUEST, PAGE)
#: an orbit query may take this many times the per-query time limit
ORBIT_QUERY_FACTOR = 10
#: the consecution query of an action checked at every id of a space (not renamed) is
#: asked in this many parts, by stretches of that space's ids (the instances that name
#: none of them apart): the one disjunction over thousands of clause instances makes
#: Z3 search across all of them, a part per id repeats the reasoning they share
#: (``lowest_free``'s prealloc at 8 requests and 64 pages, in Z3 resource units: one
#: part 8.6 M, 2 parts 5.8 M, 3 parts 5.4 M, 4 parts 6.6 M, a part per page 45 M)
PARTS = 3
Perm = dict[str, Any]  # id space -> the image of each id (a tuple, or a dict of some ids)


class NotSymmetric(CertificateError):
    """A clause (or the model) cannot be checked one orbit at a time; says why."""


#: id space -> the actions that do not commute with renaming its ids (all others do)
Unrenamed = dict[str, frozenset[str]]


def representatives(system: System, dims: tuple[bool, bool],
                    unrenamed: Unrenamed | None = None) -> list[int]:
    """Action instances up to renaming of the symmetric id spaces: those whose request
    (page) arguments are 0, 1, ... in order of first appearance. An action in
    ``unrenamed[space]`` keeps every instance along that space."""
    out = []
    for inst in system.instances:
        ok = True
        for dim, on in zip(DIMS, dims):
            if not on or inst.action.name in (unrenamed or {}).get(dim, ()):
                continue
            seen: list[int] = []
            for (_, t), a in zip(inst.action.params, inst.args):
                if t.ref_dim == dim and a not in seen:
                    seen.append(a)
            ok = ok and seen == list(range(len(seen)))
        if ok:
            out.append(inst.index)
    return out


def representatives_view(system: System, dims: tuple[bool, bool],
                         unrenamed: Unrenamed | None = None) -> System:
    """``system`` with only the representative action instances, renumbered."""
    if not any(dims):
        return system
    keep = representatives(system, dims, unrenamed)
    insts = [ActionInstance(k, system.instances[j].action, system.instances[j].args)
             for k, j in enumerate(keep)]
    return dataclasses.replace(system, instances=insts, _batches=None, _machine=None)


def _args(inst: ActionInstance, dim: str) -> list[int]:
    out: list[int] = []
    for (_, t), a in zip(inst.action.params, inst.args):
        if t.ref_dim == dim and a not in out:
            out.append(a)
    return out


class Renaming:
    """Slots and id values of ``system`` under permutations of the symmetric id spaces."""

    def __init__(self, system: System, dims: tuple[bool, bool]) -> None:
        self.system = system
        self.on = {d for d, ok in zip(DIMS, dims) if ok}
        self.n = {REQUEST: system.schema.requests, PAGE: system.schema.pages}
        self.cur = system.state_vars()
        self.cur_ast = [v.as_ast() for v in self.cur]
        self.slot_of = {name: i for i, name in enumerate(var_names(self.cur))}
        self.known = var_sorts(self.cur)
        # slot -> (var offset, (axis, coordinate, stride) per axis, {dim: id}) and the id
        # space of its value; a 2-D array's slots move along each symmetric axis (a
        # request's rank flags ``failed[r, k]`` with the request), whatever its layout
        self.where: list[tuple[int, tuple[tuple[str, int, int], ...], dict[str, int]]] = []
        self.value_dim: dict[int, str] = {}
        for v in system.schema.vars:
            axes = v.axes
            if any(axes.count(a) > 1 for a in axes if a in DIMS):
                raise NotSymmetric(f"{v.name} is indexed twice by the {axes[0]} ids")
            strides = v.strides if v.two_d else (1,)
            for k in range(v.length):
                coords = v.position(k)
                parts = tuple(zip(axes, coords, strides))
                ids = {a: c for a, c in zip(axes, coords) if a in DIMS}
                self.where.append((v.offset, parts, ids))
                if v.type.ref_dim in self.on:
                    self.value_dim[v.offset + k] = v.type.ref_dim
        self._holes: dict[tuple[str, int], z3.ArithRef] = {}
        self.shared = frozenset(i for i, (_, _, ids) in enumerate(self.where) if PAGE not in ids)

    def hole(self, dim: str, k: int) -> z3.ArithRef:
        """The placeholder of id value ``k`` of space ``dim`` inside a clause."""
        key = (dim, k)
        if key not in self._holes:
            self._holes[key] = z3.Int(f"#{dim}{k}")
        return self._holes[key]

    def slot(self, slot: int, perm: Perm) -> int:
        offset, parts, ids = self.where[slot]
        if not ids:
            return slot
        out = offset
        for axis, c, stride in parts:
            out += (perm[axis][c] if axis in perm else c) * stride
        return out

    def ids(self, slot: int) -> dict[str, int]:
        return self.where[slot][2]

    def moves_initial_state(self) -> str:
        """Why a renaming changes the initial state ('' when none does): checked for a
        transposition and a cycle of each symmetric space, which generate them all."""
        init = self.system.initial
        for dim in sorted(self.on):
            n = self.n[dim]
            if n < 2:
                continue
            swap = (1, 0) + tuple(range(2, n))
            cycle = tuple((i + 1) % n for i in range(n))
            for perm in ({dim: swap}, {dim: cycle}):
                for s, x in enumerate(init):
                    d = self.value_dim.get(s)
                    y = perm[d][x] if d in perm and isinstance(x, int) and 0 <= x < n else x
                    if init[self.slot(s, perm)] != y:
                        return (f"the initial state is not the same under renaming of {dim} "
                                f"ids ({self.cur[s]})")
        return ""


@dataclass
class OrbitClause:
    """A representative clause, with id values as placeholders (``hat``)."""

    index: int
    label: str
    formula: z3.BoolRef
    hat: z3.BoolRef
    slots: list[int]
    holes: list[tuple[str, int]]
    named: dict[str, list[int]]  # per symmetric space: the ids it singles out
    full: set[str] = field(default_factory=set)  # spaces it mentions every id of


def _literal(e: z3.ExprRef) -> int | None:
    """The value of an integer literal (``5``, or ``(- 1)`` as SMT-LIB2 writes -1)."""
    if z3.is_int_value(e):
        return int(e.as_long())
    if z3.is_app_of(e, z3.Z3_OP_UMINUS) and z3.is_int_value(e.arg(0)):
        return -int(e.arg(0).as_long())
    return None


def _canon(e: z3.ExprRef, memo: dict[int, Any]) -> Any:
    """A hashable form of ``e``, the arguments of commutative operators sorted."""
    key = e.get_id()
    if key in memo:
        return memo[key]
    if z3.is_int_value(e):
        out: Any = ("#", e.as_long())
    elif z3.is_const(e):
        out = ("c", e.decl().name())
    else:
        kids = [_canon(c, memo) for c in e.children()]
        kind = e.decl().kind()
        if kind in (z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_ADD, z3.Z3_OP_MUL, z3.Z3_OP_EQ,
                    z3.Z3_OP_DISTINCT, z3.Z3_OP_IFF):
            kids.sort(key=repr)
        out = (kind, e.decl().name(), tuple(kids))
    memo[key] = out
    return out


class Orbits:
    """The instances of a list of representative clauses (see the module docstring)."""

    def __init__(self, ren: Renaming, formulas: list[z3.BoolRef], labels: list[str]) -> None:
        self.ren = ren
        self.clauses = [self._orbit_clause(k, f, lab)
                        for k, (f, lab) in enumerate(zip(formulas, labels))]
        #: every representative by its index (``clauses`` may leave some out)
        self.by_index = {c.index: c for c in self.clauses}
        self._terms: dict[tuple[int, tuple[Any, ...]], z3.BoolRef] = {}
        self._fixing: dict[tuple[int, tuple[Any, ...]],
                           list[tuple[tuple[tuple[int, ...], ...], frozenset[int]]]] = {}
        self._sources: dict[int, tuple[list[z3.ExprRef], Any]] = {}
        self._values: dict[int, z3.IntNumRef] = {}
        self._all: list[tuple[int, tuple[Any, ...], frozenset[int]]] | None = None
        self._perms: dict[tuple[int, tuple[Any, ...]], Perm] = {}

    # -- one representative ---------------------------------------------------------------
    def _orbit_clause(self, k: int, f: z3.BoolRef, label: str) -> OrbitClause:
        ren = self.ren
        holes: set[tuple[str, int]] = set()
        memo: dict[int, z3.ExprRef] = {}

        dims: dict[int, str | None] = {}

        def idslot(e: z3.ExprRef) -> str | None:
            key = e.get_id()
            if key not in dims:
                dim = None
                if z3.is_const(e) and not z3.is_int_value(e):
                    s = ren.slot_of.get(e.decl().name())
                    dim = ren.value_dim.get(s) if s is not None else None
                dims[key] = dim
            return dims[key]

        def walk(e: z3.ExprRef) -> z3.ExprRef:
            key = e.get_id()
            if key in memo:
                return memo[key]
            if z3.is_quantifier(e) or z3.is_var(e):
                raise NotSymmetric(f"clause {k + 1} ({label}) has a quantifier")
            if idslot(e) is not None:
                raise NotSymmetric(f"clause {k + 1} ({label}) uses the id-valued "
                                   f"{e.decl().name()} other than in = or distinct")
            kids = e.children()
            if (z3.is_eq(e) or z3.is_distinct(e)) and any(idslot(c) for c in kids):
                dim = next(d for d in (idslot(c) for c in kids) if d)
                new = []
                for c in kids:
                    if idslot(c) == dim:
                        new.append(c)
                    elif _literal(c) is not None:
                        v = _literal(c)
                        if 0 <= v < ren.n[dim]:
                            holes.add((dim, v))
                            new.append(ren.hole(dim, v))
                        else:
                            new.append(c)
                    else:
                        raise NotSymmetric(f"clause {k + 1} ({label}) compares an id with "
                                           f"{c} (only literal ids and id variables)")
                out = z3.Distinct(*new) if z3.is_distinct(e) else (new[0] == new[1])
            elif kids:
                new = [walk(c) for c in kids]
                same = all(a.get_id() == b.get_id() for a, b in zip(new, kids))
                out = e if same else e.decl()(*new)  # rebuilt only where a hole is below
            else:
                out = e
            memo[key] = out
            return out

        hat = walk(f)
        names, quantified = term_constants(f, ren.known)
        if quantified:
            raise NotSymmetric(f"clause {k + 1} ({label}) has a quantifier")
        slots = sorted(ren.slot_of[n] for n in names)
        clause = OrbitClause(k, label, f, hat, slots, sorted(holes), {})
        for dim in ren.on:
            count: Counter[int] = Counter()
            for s in slots:
                if dim in ren.ids(s):
                    count[ren.ids(s)[dim]] += 1
            for d, v in holes:
                if d == dim:
                    count[v] += 1
            if len(count) < ren.n[dim]:
                clause.named[dim] = sorted(count)
                continue
            clause.full.add(dim)
            usual = Counter(count.values()).most_common(1)[0][0]
            named = sorted(i for i, c in count.items() if c != usual)
            rest = [i for i in range(ren.n[dim]) if i not in named]
            if len(rest) >= 2:
                base = _canon(hat, {})
                swap = list(range(ren.n[dim]))
                swap[rest[0]], swap[rest[1]] = rest[1], rest[0]
                cycle = list(range(ren.n[dim]))
                for a, b in zip(rest, rest[1:] + rest[:1]):
                    cycle[a] = b
                for p in (swap, cycle):
                    moved = self._rename(clause, {dim: tuple(p)}, holes_to_values=False)
                    if _canon(moved, {}) != base:
                        raise NotSymmetric(
                            f"clause {k + 1} ({label}) mentions every {dim} id but is not "
                            f"the same for all of them")
            clause.named[dim] = named
        return clause

    def _rename(self, c: OrbitClause, perm: Perm, holes_to_values: bool = True) -> z3.BoolRef:
        ren = self.ren
        pairs: list[tuple[z3.ExprRef, z3.ExprRef]] = []
        for s in c.slots:
            t = ren.slot(s, perm)
            if t != s:
                pairs.append((ren.cur[s], ren.cur[t]))
        for d, v in c.holes:
            w = perm[d][v] if d in perm else v
            pairs.append((ren.hole(d, v), z3.IntVal(w) if holes_to_values else ren.hole(d, w)))
        return _Substitution(pairs)(c.hat) if pairs else c.hat

    def drop_renamings(self) -> int:
        """Leave out every representative that is a renaming of an earlier one (it has
        the same instances); returns how many. Two are compared exactly, up to the order
        of the arguments of commutative operators, with their singled-out ids renamed to
        0, 1, … in each order (in sorted order only beyond three ids, so a renaming may
        go unrecognised: then its instances are only asserted twice)."""
        seen: set[str] = set()
        kept = []
        for c in self.clauses:
            key = self._orbit_key(c)
            if key is None or key not in seen:
                kept.append(c)
            if key is not None:
                seen.add(key)
        dropped = len(self.clauses) - len(kept)
        self.clauses = kept
        self._all = None
        return dropped

    def _orbit_key(self, c: OrbitClause) -> str | None:
        """The same text for two representatives iff one renames the other (as
        :meth:`drop_renamings` compares them); None for one that mentions every id of
        a space."""
        if c.full:
            return None
        per_dim = []
        for dim, named in sorted(c.named.items()):
            orders = itertools.permutations(named) if len(named) <= 3 else [tuple(named)]
            per_dim.append([(dim, {a: i for i, a in enumerate(o)}) for o in orders])
        best: str | None = None
        for choice in itertools.product(*per_dim):
            key = repr(_canon(self._rename(c, dict(choice), holes_to_values=False), {}))
            if best is None or key < best:
                best = key
        return best

    # -- instances ---------------------------------------------------------------------------
    def _perm(self, c: OrbitClause, images: tuple[tuple[int, ...], ...]) -> Perm:
        """The permutation taking the named ids of ``c`` to ``images`` and the others, in
        order, to the remaining ids in order (kept: an instance's slots, its term and
        its terms after each step that writes it all start from it)."""
        key = (c.index, images)
        perm = self._perms.get(key)
        if perm is None:
            perm = self._perms[key] = self._make_perm(c, images)
        return perm

    def _make_perm(self, c: OrbitClause, images: tuple[tuple[int, ...], ...]) -> Perm:
        perm: Perm = {}
        for (dim, named), img in zip(sorted(c.named.items()), images):
            if dim not in c.full:  # the clause mentions only its named ids
                perm[dim] = dict(zip(named, img))  # type: ignore[assignment]
                continue
            n = self.ren.n[dim]
            rest_src = [i for i in range(n) if i not in named]
            rest_dst = [i for i in range(n) if i not in img]
            p = [0] * n
            for a, b in zip(named, img):
                p[a] = b
            for a, b in zip(rest_src, rest_dst):
                p[a] = b
            perm[dim] = tuple(p)
        return perm

    def term(self, k: int, images: tuple[tuple[int, ...], ...]) -> z3.BoolRef:
        key = (k, images)
        t = self._terms.get(key)
        if t is None:
            c = self.by_index[k]
            t = self._instance(c, self._perm(c, images))
            self._terms[key] = t
        return t

    def term_after(self, k: int, images: tuple[tuple[int, ...], ...],
                   after: dict[int, Any]) -> z3.BoolRef:
        """The instance ``images`` of clause ``k`` read on the state after a step:
        each slot in ``after`` (slot -> its next value's AST) replaced by its next
        value, in the same single substitution that renames the clause (not kept)."""
        c = self.by_index[k]
        return self._instance(c, self._perm(c, images), after)

    def _instance(self, c: OrbitClause, perm: Perm,
                  after: dict[int, Any] | None = None) -> z3.BoolRef:
        """``_rename(c, perm)`` in one C call: the array of what is replaced (every slot
        and hole of ``c``) is built once per clause, only the replacements per instance
        (``after``: see :meth:`term_after`)."""
        ren = self.ren
        source = self._sources.get(c.index)
        if source is None:
            keys = [ren.cur[s] for s in c.slots] + [ren.hole(d, v) for d, v in c.holes]
            source = (keys, (z3.Ast * len(keys))(*[e.as_ast() for e in keys]))
            self._sources[c.index] = source
        keys, src = source
        if not keys:
            return c.hat
        if after:
            cur = ren.cur_ast
            dst = [after.get(j, cur[j]) for j in (ren.slot(s, perm) for s in c.slots)]
        else:
            dst = [ren.cur_ast[ren.slot(s, perm)] for s in c.slots]
        for d, v in c.holes:
            w = perm[d][v] if d in perm else v
            value = self._values.get(w)
            if value is None:
                value = self._values[w] = z3.IntVal(w)
            dst.append(value.as_ast())
        ctx = c.hat.ctx
        return z3.BoolRef(z3.Z3_substitute(ctx.ref(), c.hat.as_ast(), len(keys), src,
                                           (z3.Ast * len(keys))(*dst)), ctx)

    def slots(self, k: int, images: tuple[tuple[int, ...], ...]) -> frozenset[int]:
        c = self.by_index[k]
        perm = self._perm(c, images)
        return frozenset(self.ren.slot(s, perm) for s in c.slots)

    def every_instance(self) -> list[tuple[int, tuple[Any, ...], frozenset[int]]]:
        """(clause, images, slots) of every instance of the invariant."""
        if self._all is None:
            out = []
            for c in self.clauses:
                spaces = [itertools.permutations(range(self.ren.n[d]), len(named))
                          for d, named in sorted(c.named.items())]
                for images in itertools.product(*spaces):
                    out.append((c.index, images, self.slots(c.index, images)))
            self._all = out
        return self._all

    def fixing_slots(self, k: int, fixed: dict[str, list[int]]
                     ) -> list[tuple[tuple[tuple[int, ...], ...], frozenset[int]]]:
        """:meth:`fixing`, each images tuple with the slots of its instance (kept: the
        representative actions of a model single out the same ids again and again)."""
        key = (k, tuple((d, tuple(ids)) for d, ids in sorted(fixed.items())))
        out = self._fixing.get(key)
        if out is None:
            out = self._fixing[key] = [(images, self.slots(k, images))
                                       for images in self.fixing(k, fixed)]
        return out

    def fixing(self, k: int, fixed: dict[str, list[int]]) -> Iterator[tuple[tuple[int, ...], ...]]:
        """One images tuple per orbit of the instances of clause ``k`` under the
        permutations that fix every id in ``fixed``."""
        c = self.by_index[k]
        per_dim = []
        for dim, named in sorted(c.named.items()):
            keep = fixed.get(dim, [])
            fresh = [i for i in range(self.ren.n[dim]) if i not in keep]
            options = []
            for choice in itertools.product(*[[None] + keep for _ in named]):
                used = [x for x in choice if x is not None]
                if len(used) != len(set(used)):
                    continue
                nfresh = sum(1 for x in choice if x is None)
                if nfresh > len(fresh):
                    continue
                it = iter(fresh)
                options.append(tuple(x if x is not None else next(it) for x in choice))
            per_dim.append(options)
        yield from itertools.product(*per_dim)


@dataclass
class OrbitReport(InductionReport):
    broken: list[int] = field(default_factory=list)  # representatives a CTI breaks
    queries: int = 0
    orbit_instances: int = 0
    representatives: int = 0  # action instances checked (``instances``: all, by renaming)
    unexcluded: str | None = None  # a property whose violations the invariant allows
    #: the route through the clauses' reading for every size, when tried
    lifted: LiftedCheck | None = None
    #: id space -> the actions checked without renaming its ids (:func:`unrenamed_actions`)
    unrenamed: dict[str, list[str]] = field(default_factory=dict)
    #: representatives left out as renamings of others (``drop_renamings``)
    renamings_dropped: int = 0


def unrenamed_actions(system: System, dims: tuple[bool, bool]) -> Unrenamed:
    """For each id space ``dims`` asks to rename that the model does not treat
    interchangeably as a whole: the actions whose own code singles its ids out
    (:func:`kvspec.lang.symmetry.breaking_actions`); every other action commutes with
    renaming them, which is all the orbit check needs of the actions it renames.
    Raises :class:`NotSymmetric` when the reason lies elsewhere (the initial state,
    a variable holding such ids, an invariant, a monitor)."""
    from kvspec.lang.symmetry import analyse_symmetry, breaking_actions, partial_alarm

    sym = analyse_symmetry(system)
    alarm = any(r.startswith("internal alarm") for r in sym.reasons)
    out: Unrenamed = {}
    counts = {REQUEST: system.schema.requests, PAGE: system.schema.pages}
    for dim, want, have in zip(DIMS, dims, (sym.requests, sym.pages)):
        if not want or have:
            continue
        partial = breaking_actions(system, dim) if counts[dim] > 1 and not alarm else None
        if not partial:
            raise NotSymmetric(f"the model does not treat its {dim} ids interchangeably "
                               f"({'; '.join(sym.reasons) or 'symmetry analysis'})")
        alarm_says = partial_alarm(system, dim, partial)
        if alarm_says:
            raise NotSymmetric("; ".join(alarm_says))
        out[dim] = partial
    return out


def wider_symmetry(system: System, dims: tuple[bool, bool]) -> tuple[bool, bool] | None:
    """``dims`` with every id space added that the orbit check may rename in this model
    (in all its actions or all but some); None when there is none to add."""
    out = list(dims)
    for k in range(len(out)):
        if out[k]:
            continue
        trial = (out[0] or k == 0, out[1] or k == 1)
        try:
            unrenamed_actions(system, trial)
        except NotSymmetric:
            continue
        out[k] = True
    return None if tuple(out) == dims else (out[0], out[1])


def check_orbits(system: System, formulas: list[z3.BoolRef], labels: list[str],
                 properties: list[Property], dims: tuple[bool, bool], *,
                 timeout: float = 60.0, lifted_from: int | None = None,
                 drop_renamings: bool = False) -> OrbitReport:
    """Checks 1–3 of the module docstring for the invariant whose orbit
    representatives are ``formulas``. Raises :class:`NotSymmetric` when a clause
    cannot be renamed exactly. ``lifted_from``: when the invariant has at least this
    many instances, first try the representatives' exact reading for every size
    (:mod:`kvspec.proofs.lifted`), which re-checks the invariant at once when it is
    inductive for every size; else (or when it is not) the check one orbit at a time
    decides. None: never. ``drop_renamings``: the representatives may include
    renamings of one another (:meth:`Orbits.drop_renamings`)."""
    report = OrbitReport(clauses=list(labels), properties=[p.name for p in properties])
    unrenamed = unrenamed_actions(system, dims)
    report.unrenamed = {d: sorted(names) for d, names in unrenamed.items()}
    ren = Renaming(system, dims)
    moved = ren.moves_initial_state()
    if moved:
        raise NotSymmetric(moved)
    orbits = Orbits(ren, formulas, labels)
    if drop_renamings:
        report.renamings_dropped = orbits.drop_renamings()
    instances = orbit_instances(orbits)
    if lifted_from is not None and instances >= lifted_from:
        report.lifted = check_lifted(system, orbits, properties, timeout=timeout)
        if report.lifted.proved:
            report.orbit_instances = instances
            report.instances = len(system.instances)
            report.queries = report.lifted.queries
            report.passed.append(
                f"for every number of requests and pages, so at this size: initiation, "
                f"consecution over every action and safety of the {len(formulas)} "
                f"representatives read as {report.lifted.clauses} quantified clauses, "
                f"whose instances at this size are exactly their "
                f"{report.orbit_instances} renamings ({report.lifted.queries} queries)")
            return report
    everything = orbits.every_instance()
    report.orbit_instances = len(everything)
    view = representatives_view(system, dims, unrenamed)
    enc = Encoding(view)
    report.instances = len(system.instances)
    report.representatives = len(enc.steps)
    # one query here covers what hundreds of instance-by-instance queries would: its
    # limit is ORBIT_QUERY_FACTOR times the per-query limit
    ms = max(1, int(timeout * ORBIT_QUERY_FACTOR * 1000))
    known = var_sorts(enc.cur)
    queries = OrbitQueries(enc, ren, orbits, ms)

    def ask(goal: list[z3.BoolRef], vocab: set[int], parts: list[z3.BoolRef] | None = None
            ) -> tuple[z3.CheckSatResult, Any]:
        res, why = queries.ask(goal, vocab, parts)
        report.queries = queries.queries
        return res, why

    # 1. initiation
    at = _Substitution([(v, enc.value(i, x)) for i, (v, x) in enumerate(zip(enc.cur,
                                                                            system.initial))])
    for c in orbits.clauses:
        if not z3.is_true(z3.simplify(at(c.formula))):
            report.problems.append(f"the initial state violates clause {c.index + 1} "
                                   f"({c.label})")
    if report.problems:
        return report
    report.passed.append(f"initiation: the initial state satisfies all {len(formulas)} "
                         "representative clauses (and so every renaming of them)")
    # 2. properties
    for p in properties:
        bad = enc.bad(p)
        vocab = {enc.slot[n] for n in term_constants(bad, known)[0]}
        res, why = ask([bad], vocab)
        if res != z3.unsat:
            if res == z3.sat:
                report.unexcluded = p.name
            return _fail(report, res, why, enc, f"the invariant does not exclude violations "
                                                f"of {p.name}",
                         f"whether the invariant excludes violations of {p.name}")
    if properties:
        report.passed.append("implication: the invariant excludes every violation of "
                             + ", ".join(p.name for p in properties))
    # 3. model errors and consecution, one action instance per orbit
    for step in enc.steps:
        r = set(step.reads)  # the slots its terms mention (and perhaps a few more)
        if step.errors:
            res, why = ask([step.error], r)
            if res != z3.unsat:
                return _fail(report, res, why, enc, f"{step.inst.label()} may raise a model "
                                                    "error from a state of the invariant",
                             f"whether {step.inst.label()} may raise a model error")
        written = set(step.updates)
        # the renamings that fix the action instance: those of its own ids, and none of
        # a space whose renaming it does not commute with
        fixed = {d: (list(range(ren.n[d])) if step.inst.action.name in unrenamed.get(d, ())
                     else _args(step.inst, d)) for d in ren.on}
        targets: list[tuple[int, z3.BoolRef]] = []
        vocab = r | written
        after = {i: e.as_ast() for i, e in step.updates.items()}
        unrenamed_here = [d for d in sorted(ren.on)
                          if step.inst.action.name in unrenamed.get(d, ())]
        parts: dict[tuple[int, ...], list[z3.BoolRef]] = {}
        for c in orbits.clauses:
            for images, slots in orbits.fixing_slots(c.index, fixed):
                if not slots.isdisjoint(written):
                    vocab |= slots
                    targets.append((c.index, orbits.term_after(c.index, images, after)))
                    parts.setdefault(_part(c, images, unrenamed_here, ren.n), []).append(
                        _mk_not(targets[-1][1]))
        leaving = enc.leaving_domain(step.updates)
        if not targets and not leaving:
            continue
        if leaving:
            parts.setdefault((), []).extend(leaving)
        res, why = ask([step.enabled, z3.Not(step.error)], vocab,
                       [mk_or(parts[key]) for key in sorted(parts)])
        if res == z3.unsat:
            continue
        if res == z3.sat:
            report.broken = sorted({k for k, t in targets
                                    if z3.is_false(why.eval(t, model_completion=True))})
            pre = enc.state_of(why)
            trace = cti_trace(system, pre, step.inst)
            labels_broken = [orbits.by_index[k].label for k in report.broken] or [
                "a variable leaves its domain"]
            report.cti = CounterexampleToInduction(pre, trace, labels_broken)
        return _fail(report, res, why, enc, f"consecution: the invariant is not inductive: "
                                            f"{step.inst.label()} breaks it",
                     f"whether {step.inst.label()} preserves the invariant")
    report.passed.append(f"consecution: every renaming of the {len(formulas)} clauses "
                         f"({len(everything)} instances) is preserved by each of the "
                         f"{len(enc.steps)} representative action instances (the others are "
                         "their renamings)" + "".join(
                             f"; {', '.join(names)} checked at every {dim} (not renamed)"
                             for dim, names in sorted(report.unrenamed.items())))
    return report


def _part(c: OrbitClause, images: tuple[tuple[int, ...], ...], dims: list[str],
          n: dict[str, int]) -> tuple[int, ...]:
    """Which part of an action's consecution query the instance ``images`` of clause
    ``c`` goes to: per space in ``dims`` (those the action is checked at every id of,
    not renamed), which of :data:`PARTS` stretches of ids holds the highest id the
    instance names there (-1: it names none). Instances of a space renamed stay in
    one part: the stabiliser leaves few of them."""
    named = dict(zip(sorted(c.named), images))
    return tuple(max(named.get(d, ()), default=-1) * PARTS // n[d] for d in dims)


def _mk_not(t: z3.BoolRef) -> z3.BoolRef:
    """``z3.Not(t)`` in one C call (``Not`` checks and converts its argument first)."""
    ctx = t.ctx
    return z3.BoolRef(z3.Z3_mk_not(ctx.ref(), t.as_ast()), ctx)


def _fail(report: OrbitReport, res: z3.CheckSatResult, why: Any, enc: Encoding,
          problem: str, question: str) -> OrbitReport:
    """Record ``problem`` (sat) or that the solver could not decide ``question``."""
    if res == z3.sat:
        report.problems.append(problem)
        if report.bad_state is None and report.cti is None:
            report.bad_state = (enc.state_of(why), problem)
    else:
        report.problems.append(f"the solver could not decide {question} ({why})")
        report.undecided = True
    return report

