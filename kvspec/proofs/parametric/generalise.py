"""From a size-specific invariant to clauses quantified over every request and page.

A size-specific invariant (a certificate's SMT-LIB2 text) asserts, for a clause
such as ``for all p, r: phase[r] != NEW or owner[p] != r``, one instance per
choice of ids: ``(or (not (= |phase[r1]| 0)) (not (= |owner[2]| 1)))``. Lifting an
instance replaces each id it mentions — in a slot name, or as the value a
reference is compared with — by a variable of the id's sort (distinct ids by
distinct variables), the integer encoding of references by elements of the sorts
(``-1`` by ``none``), and each slot by the state function applied to those
variables. Instances that lift to the same clause are one ``for all`` clause —
accepted only if the invariant has an instance for *every* choice of distinct ids
at its size; a clause that is not uniform across instances (a Spacer lemma, a
clause about one particular request) is rejected with the reason.

Nothing here needs to be right for a proof to be sound: the lifted clauses are
only candidates, checked from scratch by :mod:`kvspec.proofs.parametric.induction`.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import VarInfo
from kvspec.lang.system import System
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST
from kvspec.proofs.parametric.values import Sorts


class NotLiftable(Exception):
    """An instance that has no parametric reading (the reason is the message)."""


class CountNotLiftable(NotLiftable):
    """A count of ids the quantified clauses cannot state (a count compared with a
    value other than 0 or 1, a sum of counts); ``names``: the variables counted."""

    def __init__(self, message: str, names: list[str]) -> None:
        super().__init__(message)
        self.names = names


@dataclass
class QClause:
    """A universally quantified clause over the parametric state."""

    formula: z3.BoolRef
    label: str
    instances: int = 0


@dataclass
class Generalised:
    clauses: list[QClause] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # why a clause did not generalise
    #: the clauses rejected for a count they hold: (label, reason, variables counted)
    counts: list[tuple[str, str, list[str]]] = field(default_factory=list)


def slot_map(system: System) -> dict[str, tuple[VarInfo, tuple[tuple[str, int], ...]]]:
    """Slot name (``phase[r0]``, ``page_inflight_by[2,r1]``) -> variable and ids. A
    variable an index space splits maps each slot to the symbol of its index
    (``failed[r1,0]`` -> ``failed@0`` at request 1; :mod:`.spaces`)."""
    from kvspec.proofs.parametric.spaces import reading

    split = reading(system)
    out: dict[str, tuple[VarInfo, tuple[tuple[str, int], ...]]] = dict(split.slots)
    for v in system.schema.vars:
        if v.name in split.layouts or any(w.name == v.name for w, _ in split.slots.values()):
            continue
        for i in range(v.length):
            if v.dim == SCALAR:
                ids: tuple[tuple[str, int], ...] = ()
            elif v.dim == PAGE_BY_REQUEST:
                p, r = divmod(i, v.row)
                ids = ((PAGE, p), (REQUEST, r))
            else:
                ids = ((v.dim, i),)
            out[v.label(None if v.dim == SCALAR else i)] = (v, ids)
    return out


def slot_sorts(slots: dict[str, tuple[VarInfo, tuple[tuple[str, int], ...]]]
               ) -> dict[str, str]:
    """Slot name -> its sort in the size-specific (integer) encoding."""
    return {name: "Bool" if v.type.kind == "bool" else "Int" for name, (v, _) in slots.items()}


class Lifter:
    """Lifts one size-specific instance (module docstring); ``ids`` and ``order``: the
    variables it made for the ids it met, in order."""

    def __init__(self, sorts: Sorts, symbols: dict[str, Any],
                 slots: dict[str, tuple[VarInfo, tuple[tuple[str, int], ...]]],
                 counts: dict[str, int] | None = None,
                 known: dict[str, str] | None = None, readings: Any = None) -> None:
        self.sorts = sorts
        #: where counts over every page become ghost counts (a CountReadings), if anywhere
        self.readings = readings
        self.symbols = symbols
        self.slots = slots
        self.counts = counts or {}
        #: slot name -> its sort in the size-specific encoding (for term_constants)
        self.known = known if known is not None else slot_sorts(slots)
        self.ids: dict[tuple[str, int], z3.ExprRef] = {}
        self.order: list[tuple[str, int]] = []

    def idvar(self, dim: str, k: int) -> z3.ExprRef:
        key = (dim, k)
        if key not in self.ids:
            n = sum(1 for d, _ in self.order if d == dim)
            # '#' keeps the name apart from every model variable (identifiers), which
            # the quantifier would otherwise capture
            self.ids[key] = z3.Const(f"{dim[0]}#{n}", self.sorts.sort[dim])
            self.order.append(key)
        return self.ids[key]

    @contextmanager
    def _bound(self, key: tuple[str, int], var: z3.ExprRef) -> Iterator[None]:
        """Id ``key`` read as ``var`` (a count's own variable) inside the block; the
        variable it had before (the same id named outside the count) afterwards."""
        before = self.ids.get(key)
        self.ids[key] = var
        try:
            yield
        finally:
            if before is None:
                del self.ids[key]
            else:
                self.ids[key] = before

    def is_ref(self, t: Any) -> bool:
        return isinstance(t, z3.ExprRef) and self.sorts.dim_of_sort(t.sort()) is not None

    def as_ref(self, t: Any, dim: str) -> z3.ExprRef:
        if self.is_ref(t):
            return t  # type: ignore[no-any-return]
        if z3.is_int_value(t):
            k = t.as_long()
            return self.sorts.nil[dim] if k < 0 else self.idvar(dim, k)
        raise NotLiftable(f"{t} compared with an id")

    def lift(self, t: z3.ExprRef) -> Any:  # noqa: C901 - one case per operator
        if z3.is_quantifier(t):
            raise NotLiftable("a quantifier in a size-specific clause")
        if z3.is_int_value(t) or z3.is_true(t) or z3.is_false(t):
            return t
        if not z3.is_app(t):
            raise NotLiftable(f"unsupported term {t}")
        counted = self.at_most(t)
        if counted is not None:
            return counted
        ghost = self.count_term(t)
        if ghost is not None:
            return ghost
        d = t.decl()
        kind = d.kind()
        if kind == z3.Z3_OP_UNINTERPRETED and t.num_args() == 0:
            name = d.name()
            if name not in self.slots:
                raise NotLiftable(f"unknown symbol {name}")
            v, ids = self.slots[name]
            sym = self.symbols[v.name]
            if not ids:
                return sym
            return sym(*[self.idvar(dim, k) for dim, k in ids])
        if kind == z3.Z3_OP_UMINUS and z3.is_int_value(t.arg(0)):
            return z3.IntVal(-t.arg(0).as_long())
        args = [self.lift(a) for a in t.children()]
        if kind in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT):
            refs = [a for a in args if self.is_ref(a)]
            if refs:
                dim = self.sorts.dim_of_sort(refs[0].sort())
                assert dim is not None
                args = [self.as_ref(a, dim) for a in args]
            return args[0] == args[1] if kind == z3.Z3_OP_EQ and len(args) == 2 \
                else z3.Distinct(*args)
        if kind == z3.Z3_OP_ITE:
            c, a, b = args
            if self.is_ref(a) or self.is_ref(b):
                dim = self.sorts.dim_of_sort((a if self.is_ref(a) else b).sort())
                assert dim is not None
                a, b = self.as_ref(a, dim), self.as_ref(b, dim)
            return z3.If(c, a, b)
        if any(self.is_ref(a) for a in args):
            raise NotLiftable(f"arithmetic or order on ids in {_short(t)}")
        if kind == z3.Z3_OP_AND:
            return z3.And(*args)
        if kind == z3.Z3_OP_OR:
            return z3.Or(*args)
        if kind == z3.Z3_OP_NOT:
            return z3.Not(args[0])
        if kind == z3.Z3_OP_IMPLIES:
            return z3.Implies(args[0], args[1])
        try:
            return d(*args)
        except z3.Z3Exception as exc:
            raise NotLiftable(f"cannot lift {_short(t)}: {exc}") from None


    def at_most(self, t: z3.ExprRef) -> z3.BoolRef | None:
        """``count(φ) <= 0`` or ``<= 1`` over every id of one space — a sum of
        ``ite(φ(i), 1, 0)`` over all of them compared with a numeral — as the quantified
        ``for all y: not φ(y)`` / ``for all distinct y1, y2: not (φ(y1) and φ(y2))``
        (None: not such a count)."""
        ops = {z3.Z3_OP_LE: "<=", z3.Z3_OP_GE: ">=", z3.Z3_OP_LT: "<", z3.Z3_OP_GT: ">",
               z3.Z3_OP_EQ: "=="}
        kind = t.decl().kind()
        if kind not in ops or t.num_args() != 2:
            return None
        a, b = t.arg(0), t.arg(1)
        op = ops[kind]
        if z3.is_int_value(a) and not z3.is_int_value(b):
            a, b = b, a
            op = {"<=": ">=", ">=": "<=", "<": ">", ">": "<", "==": "=="}[op]
        if not z3.is_int_value(b):
            return None
        addends = list(a.children()) if z3.is_add(a) else [a]
        if not all(z3.is_app_of(x, z3.Z3_OP_ITE) and z3.is_int_value(x.arg(1))
                   and x.arg(1).as_long() == 1 and z3.is_int_value(x.arg(2))
                   and x.arg(2).as_long() == 0 for x in addends):
            return None
        k = b.as_long() - (1 if op == "<" else 0)
        if op not in ("<=", "<", "==") or k not in (0, 1) or (op == "==" and k != 0):
            counted = self.counted(a)
            if counted is not None and self.readings is not None and counted[0] == PAGE:
                return None  # compared as a number, a ghost count (count_term)
            if counted is not None:
                raise CountNotLiftable(f"a count over every {counted[0]} compared with "
                                       f"{b.as_long()} (only 'at most none' and 'at most "
                                       "one' lift)", counted[1])
            raise NotLiftable("a count of ids other than 'at most none' or 'at most one'")
        conds = [x.arg(0) for x in addends]
        ids = [self._slot_ids(c) for c in conds]
        common = set.intersection(*ids)
        own = [i - common for i in ids]
        if not any(own):  # the terms differ in index-space coordinates only (a count
            return None   # over the ranks of one request): a finite sum, lifted as it is
        if not all(len(o) == 1 for o in own):
            raise NotLiftable("a count whose terms do not each name one id of their own")
        keys = [next(iter(o)) for o in own]
        dim = keys[0][0]
        if any(d != dim for d, _ in keys) or sorted(n for _, n in keys) != \
                list(range(self.counts.get(dim, -1))):
            raise NotLiftable("a count that is not over every id of one space")
        ys = [z3.Const(f"{dim[0]}#c{j}", self.sorts.sort[dim]) for j in range(k + 1)]
        lifted = []
        for key, c in zip(keys, conds):
            with self._bound(key, ys[0]):
                lifted.append(self.lift(c))
        if len({x.sexpr() for x in lifted}) != 1:
            raise NotLiftable("a count whose terms are not one condition on each id")
        phi = lifted[0]
        pre = [self.sorts.real(y) for y in ys] + ([z3.Distinct(*ys)] if k else [])
        body = z3.Not(phi) if k == 0 else z3.Not(z3.And(phi, z3.substitute(phi, (ys[0], ys[1]))))
        return z3.ForAll(ys, z3.Implies(z3.And(*pre), body))

    def count_term(self, t: z3.ExprRef) -> z3.ArithRef | None:
        """When ``t`` is a count (or a sum of counts) over every id of one space: its
        ghost counts (:mod:`kvspec.proofs.parametric.cardinality`) where the lifter has
        them, else CountNotLiftable — read one addend at a time it would become a clause
        about some ids, not the count. None: not a count."""
        counted = self.counted(t)
        if counted is None:
            return None
        dim, names, several = counted
        what = "a sum of counts" if several else "a count"
        if self.readings is None or dim != PAGE:
            raise CountNotLiftable(f"{what} over every {dim} ({', '.join(names)}) used as "
                                   "a number, which the all-sizes reading cannot state", names)
        from kvspec.proofs.parametric.cardinality import NotCountable

        try:
            return self.ghost_sum(t, dim)
        except (NotCountable, NotLiftable) as exc:
            raise CountNotLiftable(f"{what} over every {dim} ({', '.join(names)}) that is "
                                   f"not a ghost count: {exc}", names) from None

    def ghost_sum(self, t: z3.ExprRef, dim: str) -> z3.ArithRef:
        """The counts of ``t`` (a sum of ``ite(φ(p_i), 1, 0)``, :meth:`counted`) as ghost
        counts: the addends grouped by their condition on one page, each group over
        every page once."""
        addends = list(t.children()) if z3.is_add(t) else [t]
        ids = [self._slot_ids(x.arg(0)) for x in addends]
        common = set.intersection(*ids)
        keys = [next(iter(i - common)) for i in ids]
        y = z3.Const(f"{dim[0]}#count", self.sorts.sort[dim])
        groups: dict[str, tuple[z3.BoolRef, list[int]]] = {}
        for key, x in zip(keys, addends):
            with self._bound(key, y):
                phi = self.lift(x.arg(0))
            groups.setdefault(phi.sexpr(), (phi, []))[1].append(key[1])
        vars_ = {v.get_id(): (d, v) for (d, _), v in self.ids.items()}
        terms = []
        for phi, ns in groups.values():
            if sorted(ns) != list(range(self.counts.get(dim, -1))):
                raise NotLiftable("a sum whose terms are not one condition on each page")
            free = {vars_[c.get_id()] for c in _constants(phi) if c.get_id() in vars_}
            if any(d != REQUEST for d, _ in free) or len(free) > 1:
                raise NotLiftable("a count whose condition names another page or request")
            request = next(iter(free))[1] if free else None
            terms.append(self.readings.term(phi, y, request))
        return terms[0] if len(terms) == 1 else z3.Sum(*terms)

    def counted(self, t: z3.ExprRef) -> tuple[str, list[str], bool] | None:
        """(space, variables counted, whether several counts) when ``t`` is a sum of
        ``ite(φ, 1, 0)`` each naming one id of one space and together every id of it
        the same number of times; None otherwise."""
        if not z3.is_app(t) or not z3.is_int(t):
            return None
        addends = list(t.children()) if z3.is_add(t) else [t]
        if not all(z3.is_app_of(x, z3.Z3_OP_ITE) and z3.is_int_value(x.arg(1))
                   and x.arg(1).as_long() == 1 and z3.is_int_value(x.arg(2))
                   and x.arg(2).as_long() == 0 for x in addends):
            return None
        from kvspec.proofs.clauses import CertificateError, term_constants

        try:
            ids = [self._slot_ids(x.arg(0)) for x in addends]
            read = [term_constants(x.arg(0), self.known)[0] for x in addends]
        except (KeyError, CertificateError):
            return None
        common = set.intersection(*ids)
        own = [i - common for i in ids]
        if not all(len(o) == 1 for o in own):
            return None
        keys = [next(iter(o)) for o in own]
        dim = keys[0][0]
        n = self.counts.get(dim, -1)
        if n <= 0 or any(d != dim for d, _ in keys) or len(keys) % n:
            return None
        times = len(keys) // n
        if sorted(k for _, k in keys) != sorted(list(range(n)) * times):
            return None
        names = sorted({self.slots[name][0].name for r in read for name in r})
        return dim, names, times > 1

    def _slot_ids(self, t: z3.ExprRef) -> set[tuple[str, int]]:
        """The ids named by the state slots ``t`` reads."""
        from kvspec.proofs.clauses import term_constants

        names, _ = term_constants(t, self.known)
        return {i for n in names for i in self.slots[n][1]}


def _constants(t: z3.ExprRef) -> list[z3.ExprRef]:
    """The uninterpreted constants of a quantifier-free term."""
    out, stack, seen = [], [t], set()
    while stack:
        x = stack.pop()
        if x.get_id() in seen or not z3.is_app(x):
            continue
        seen.add(x.get_id())
        if x.num_args() == 0 and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.append(x)
        stack.extend(x.children())
    return out


def _short(t: z3.ExprRef, limit: int = 80) -> str:
    text = " ".join(t.sexpr().split())
    return text if len(text) <= limit else text[:limit] + " …"


def quantify(sorts: Sorts, xs: list[z3.ExprRef], body: z3.BoolRef) -> z3.BoolRef:
    """``for all distinct ids xs: body`` (ids: not the None elements)."""
    if not xs:
        return body
    pre = [sorts.real(x) for x in xs]
    for dim in (REQUEST, PAGE):
        same = [x for x in xs if x.sort() == sorts.sort[dim]]
        if len(same) > 1:
            pre.append(z3.Distinct(*same))
    return z3.ForAll(xs, z3.Implies(z3.And(*pre), body))


def pieces(f: z3.BoolRef) -> list[z3.BoolRef]:
    return list(f.children()) if z3.is_and(f) else [f]


def generalise(system: System, sorts: Sorts, symbols: dict[str, Any],
               clauses: list[tuple[z3.BoolRef, str]], readings: Any = None) -> Generalised:
    """Lift the size-specific ``(formula, label)`` clauses (module docstring);
    ``readings``: a :class:`~kvspec.proofs.parametric.cardinality.CountReadings` to read
    counts over every page as ghost counts (None: such clauses are rejected)."""
    slots = slot_map(system)
    known = slot_sorts(slots)
    counts = system.schema.counts
    groups: dict[str, tuple[z3.BoolRef, str, set[tuple[int, ...]], dict[str, int]]] = {}
    order: list[str] = []
    out = Generalised()
    for index, (formula, label) in enumerate(clauses, 1):
        try:
            lifted = []
            for piece in pieces(formula):
                lifter = Lifter(sorts, symbols, slots, counts, known, readings)
                body = lifter.lift(piece)
                if not z3.is_bool(body):
                    raise NotLiftable("not a Boolean clause")
                xs = [lifter.ids[k] for k in lifter.order]
                q = quantify(sorts, xs, body)
                per_dim: dict[str, int] = {}
                for dim, _ in lifter.order:
                    per_dim[dim] = per_dim.get(dim, 0) + 1
                lifted.append((q, tuple(k for _, k in lifter.order), per_dim))
        except NotLiftable as exc:
            out.rejected.append(f"clause {index} ({label}): {exc}")
            if isinstance(exc, CountNotLiftable):
                out.counts.append((label, str(exc), exc.names))
            continue
        for q, binding, per_dim in lifted:
            key = q.sexpr()
            if key not in groups:
                groups[key] = (q, label, set(), per_dim)
                order.append(key)
            groups[key][2].add(binding)
    for key in order:
        q, label, seen, per_dim = groups[key]
        expected = 1
        for dim, k in per_dim.items():
            expected *= math.perm(counts.get(dim, 0), k)
        if len(seen) != expected:
            out.rejected.append(f"{label}: not uniform across ids ({len(seen)} of the "
                                f"{expected} instances at this size)")
            continue
        out.clauses.append(QClause(q, label, expected))
    return out


def size_variants(clauses: list[QClause], ranged: set[str],
                  symbols: list[tuple[z3.ArithRef, int]], limit: int = 8) -> list[QClause]:
    """Candidates that read a clause's constants as sizes: where a variable whose range
    depends on the number of ids (``ranged``) is compared with a number ``c`` and a
    size symbol ``S`` (``symbols``: symbol and its value at the certificate's size) is
    within one of it, the comparison with ``S + (c - value)`` — and ``x != c`` also as
    ``x < …`` and ``x > …`` (at its range's end the two say the same). A size-specific
    ``need[r] != 5`` with ``need`` in ``0..pages+1`` at 4 pages proposes ``need[r] <
    size.pages + 1``. Only candidates: the induction check decides."""
    out: list[QClause] = []
    for c in clauses:
        xs, body = _open(c.formula)
        made = 0
        for old, news in _comparisons(body, ranged, symbols):
            for new, text in news:
                if made >= limit:
                    break
                out.append(QClause(_close(xs, z3.substitute(body, (old, new))),
                                   f"{c.label} [{text}]", c.instances))
                made += 1
    return out


def _open(f: z3.BoolRef) -> tuple[list[z3.ExprRef], z3.BoolRef]:
    """A ``for all`` clause's variables (as constants) and its body over them."""
    if z3.is_quantifier(f) and f.is_forall():
        xs = [z3.Const(f.var_name(i), f.var_sort(i)) for i in range(f.num_vars())]
        return xs, z3.substitute_vars(f.body(), *reversed(xs))
    return [], f


def _close(xs: list[z3.ExprRef], body: z3.BoolRef) -> z3.BoolRef:
    return z3.ForAll(xs, body) if xs else body


def _comparisons(body: z3.ExprRef, ranged: set[str], symbols: list[tuple[z3.ArithRef, int]]
                 ) -> list[tuple[z3.BoolRef, list[tuple[z3.BoolRef, str]]]]:
    """(comparison, its readings with a size symbol) in ``body``."""
    out: list[tuple[z3.BoolRef, list[tuple[z3.BoolRef, str]]]] = []
    seen: set[int] = set()
    stack = [body]
    ops = {z3.Z3_OP_EQ: "==", z3.Z3_OP_LE: "<=", z3.Z3_OP_LT: "<", z3.Z3_OP_GE: ">=",
           z3.Z3_OP_GT: ">"}
    while stack:
        t = stack.pop()
        if t.get_id() in seen or not z3.is_app(t):
            continue
        seen.add(t.get_id())
        negated = z3.is_not(t) and z3.is_eq(t.arg(0))
        cmp = t.arg(0) if negated else t
        kind = cmp.decl().kind() if z3.is_app(cmp) else None
        if kind in ops and cmp.num_args() == 2:
            a, b = cmp.arg(0), cmp.arg(1)
            if z3.is_int_value(a):
                a, b = b, a
                flip = {"<=": ">=", "<": ">", ">=": "<=", ">": "<", "==": "=="}
                op = flip[ops[kind]]
            else:
                op = ops[kind]
            if z3.is_int_value(b) and z3.is_app(a) and a.decl().name() in ranged:
                value = b.as_long()
                readings: list[tuple[z3.BoolRef, str]] = []
                for sym, v in symbols:
                    k = value - v
                    if abs(k) > 1:
                        continue
                    term = sym if k == 0 else sym + k
                    text = f"{value} read as {term}"
                    if negated:
                        readings += [(a != term, text), (a < term, text), (a > term, text)]
                    else:
                        readings.append(({"==": a == term, "<=": a <= term, "<": a < term,
                                          ">=": a >= term, ">": a > term}[op], text))
                if readings:
                    out.append((t, readings))
                    continue
        stack.extend(t.children())
    return out


def enum_siblings(clauses: list[QClause], enums: dict[str, list[int]],
                  limit: int = 12) -> list[QClause]:
    """For a clause that excludes one value of an enum variable (``phase[r] != TRANSFER
    or …``), the same clause for each other value. A size-specific invariant states a
    bound only in the phases where its size needed it (in others the pool's size
    implied it); at every size the other phases may need it as well. Only candidates."""
    out: list[QClause] = []
    for c in clauses:
        xs, body = _open(c.formula)
        made = 0
        for lit, term, value in _enum_exclusions(body, enums):
            for other in enums[term.decl().name()]:
                if other == value or made >= limit:
                    continue
                out.append(QClause(_close(xs, z3.substitute(body, (lit, term != other))),
                                   f"{c.label} [also for {term.decl().name()} value {other}]",
                                   c.instances))
                made += 1
    return out


def _enum_exclusions(body: z3.ExprRef, enums: dict[str, list[int]]
                     ) -> list[tuple[z3.BoolRef, z3.ExprRef, int]]:
    """``(literal, term, value)`` for each ``term != value`` in ``body`` over an enum."""
    out = []
    stack, seen = [body], set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen or not z3.is_app(t):
            continue
        seen.add(t.get_id())
        if z3.is_not(t) and z3.is_eq(t.arg(0)):
            a, b = t.arg(0).arg(0), t.arg(0).arg(1)
            if z3.is_int_value(a):
                a, b = b, a
            if z3.is_int_value(b) and z3.is_app(a) and a.decl().name() in enums:
                out.append((t, a, b.as_long()))
                continue
        stack.extend(t.children())
    return out
