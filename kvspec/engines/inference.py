"""Data-driven invariant inference (after DistAI / DuoAI) with Houdini pruning.

1. **Templates.** Candidate invariants are clauses of up to three literals over
   the model's per-request, per-page and scalar variables, universally quantified
   over a request ``r``, a page ``p``, or both: ``for all p, r: owner[p] != r or
   phase[r] != RUNNING or landed[p]``. Being quantified, a candidate means the
   same at every size.
2. **Sampling.** A candidate is kept only if it holds on every reachable state of
   a small configuration (explored exhaustively by the explicit engine; the
   symmetry-reduced representatives suffice, since every candidate is evaluated
   under all instantiations). Literal truth tables are computed with numpy over
   the distinct projections of (state, r, p), so thousands of clauses are
   enumerated in well under a second.
3. **Selection** among the candidates (:mod:`kvspec.engines.selection`): a lazy,
   counterexample-guided Houdini that keeps what the properties need.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import z3

from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import Schema, State, VarInfo
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST

QDIM = {"r": REQUEST, "p": PAGE}
DIMQ = {REQUEST: "r", PAGE: "p"}
CONTEXTS: tuple[tuple[str, ...], ...] = ((), ("r",), ("p",), ("p", "r"))
COUNT_KINDS = ("cnt", "cle")


@dataclass(frozen=True)
class Atom:
    """``var[idx] == value`` (eq), ``var[idx] <= value`` (le), ``var[idx] == q`` (is),
    ``var[idx] == other[idx]`` (veq) or ``var[idx] <= other[idx]`` (vle).

    Counting kinds (``idx == "r"``): ``var`` is a page array of request ids and
    ``other`` a request-indexed integer array; with ``n = #{p : var[p] == r}``,
    ``cnt`` is ``n == other[r]`` and ``cle`` is ``n <= other[r]``
    (``count(owner == r) == need[r]``). They mention every slot of ``var``. With
    ``plus`` (a second page array of request ids) ``n`` is the sum of both counts
    (``count(written == r) + count(inflight == r) == sent[r]``: every chunk sent has
    landed or is still in flight). Without ``other``, ``cle`` compares with the
    constant ``value`` (``count(reading == r) <= 1``: at most one page per request, a
    relation between two pages that no clause over one page expresses).

    The constant of an integer ``eq``/``le`` atom in the upper half of the variable's
    range counts down from its upper bound (``top``; one in the lower half, or in
    the middle, is the number itself): a range
    whose bound is a function of the sizes (``Int(0, "pages")``) then gives the
    atom the same meaning at every size — ``need[r] != 5`` over ``0..pages + 1``
    at four pages is ``need[r] != 9`` at eight (one more than the pool), not a
    value in the middle of the range. For a range that does not depend on the
    sizes both readings are the same number."""

    kind: str
    var: str
    idx: str | None  # "r", "p", "pr" (a (page, request) array) or None for a scalar
    value: int = 0
    other: str = ""  # veq/vle: the second variable; is: the quantified variable
    top: bool = False  # eq/le of an int: the constant is the range's upper bound - value
    plus: str = ""  # counting kinds: a second page array whose count is added

    def constant(self, schema: Schema) -> int:
        """The atom's constant in ``schema`` (its sizes fix the variable's range)."""
        if not self.top:
            return self.value
        return int(schema.by_name[self.var].type.hi) - self.value

    @property
    def links(self) -> bool:
        """Relates a page to a request (or a request to a page)."""
        return self.kind == "is" and self.idx is not None and self.idx != self.other

    @property
    def counts(self) -> bool:
        return self.kind in COUNT_KINDS

    def counted(self) -> tuple[str, ...]:
        """The page arrays a counting atom counts in."""
        return (self.var, self.plus) if self.plus else (self.var,)

    def slots(self, schema: Schema, binding: dict[str, int]) -> list[int]:
        if self.counts:
            out = [i for name in self.counted() for v in (schema.by_name[name],)
                   for i in range(v.offset, v.offset + v.length)]
            if not self.other:
                return out
            return [*out, _slot(schema.by_name[self.other], "r", binding)]
        out = [_slot(schema.by_name[self.var], self.idx, binding)]
        if self.kind in ("veq", "vle"):
            out.append(_slot(schema.by_name[self.other], self.idx, binding))
        return out

    def render(self, schema: Schema, positive: bool) -> str:
        v = schema.by_name[self.var]
        if self.counts:
            op = ("==" if positive else "!=") if self.kind == "cnt" else ("<=" if positive
                                                                          else ">")
            n = " + ".join(f"count({name} == r)" for name in self.counted())
            return f"{n} {op} {self.other}[r]" if self.other else f"{n} {op} {self.value}"
        name = f"{self.var}[{_index_text(self.idx)}]" if self.idx else self.var
        if self.kind == "eq":
            if v.type.kind == "bool":
                return name if positive else f"not {name}"
            if v.type.kind == "ref" and self.value < 0:
                return f"{name} is None" if positive else f"{name} is not None"
            shown = v.type.to_json(self.constant(schema))
            return f"{name} {'==' if positive else '!='} {shown}"
        if self.kind == "le":
            c = self.constant(schema)
            return f"{name} <= {c}" if positive else f"{name} > {c}"
        if self.kind == "is":
            return f"{name} {'==' if positive else '!='} {self.other}"
        other = f"{self.other}[{_index_text(self.idx)}]" if self.idx else self.other
        if self.kind == "veq":
            return f"{name} {'==' if positive else '!='} {other}"
        return f"{name} <= {other}" if positive else f"{name} > {other}"


Literal = tuple[Atom, bool]


@dataclass(frozen=True)
class Template:
    """A universally quantified clause."""

    ctx: tuple[str, ...]
    literals: tuple[Literal, ...]

    def render(self, schema: Schema) -> str:
        body = " or ".join(a.render(schema, pos) for a, pos in self.literals)
        if not self.ctx:
            return body
        return f"for all {', '.join(self.ctx)}: {body}"

    def bindings(self, schema: Schema) -> list[dict[str, int]]:
        ranges = [range(schema.counts[QDIM[q]]) for q in self.ctx]
        return [dict(zip(self.ctx, combo)) for combo in itertools.product(*ranges)]

    def instance(self, schema: Schema, cur: list[z3.ExprRef], binding: dict[str, int]
                 ) -> z3.BoolRef:
        """The clause for one binding, over the integer-encoded variables ``cur``."""
        lits = []
        for atom, pos in self.literals:
            t = atom_term(atom, schema, cur, binding)
            lits.append(t if pos else z3.Not(t))
        return z3.Or(*lits) if len(lits) > 1 else lits[0]

    def slots(self, schema: Schema, binding: dict[str, int]) -> set[int]:
        return {s for a, _ in self.literals for s in a.slots(schema, binding)}


def _index_text(idx: str) -> str:
    return "p, r" if idx == "pr" else idx


def _slot(v: VarInfo, idx: str | None, binding: dict[str, int]) -> int:
    if v.dim == SCALAR:
        return v.offset
    if v.dim == PAGE_BY_REQUEST:
        return v.offset + binding["p"] * v.row + binding["r"]
    return v.offset + binding[idx]  # type: ignore[index]


def atom_term(atom: Atom, schema: Schema, cur: list[z3.ExprRef], binding: dict[str, int]
              ) -> z3.BoolRef:
    v = schema.by_name[atom.var]
    if atom.counts:
        r = binding["r"]
        n = z3.Sum([z3.If(cur[i] == r, 1, 0) for name in atom.counted()
                    for u in (schema.by_name[name],) for i in range(u.offset, u.offset + u.length)])
        y = (cur[_slot(schema.by_name[atom.other], "r", binding)] if atom.other
             else z3.IntVal(atom.value))
        return n == y if atom.kind == "cnt" else n <= y  # type: ignore[return-value]
    x = cur[_slot(v, atom.idx, binding)]
    if atom.kind == "eq":
        if v.type.kind == "bool":
            return x  # type: ignore[return-value]
        return x == atom.constant(schema)  # type: ignore[return-value]
    if atom.kind == "le":
        return x <= atom.constant(schema)  # type: ignore[return-value,operator]
    if atom.kind == "is":
        return x == binding[atom.other]  # type: ignore[return-value]
    y = cur[_slot(schema.by_name[atom.other], atom.idx, binding)]
    return x == y if atom.kind == "veq" else x <= y  # type: ignore[return-value,operator]


# -- atoms of a context -------------------------------------------------------------------

def _template_vars(schema: Schema) -> list[VarInfo]:
    return [v for v in schema.vars if v.owner in ("model", "monitor", "flag")]


def atoms_for(schema: Schema, ctx: tuple[str, ...]) -> list[Atom]:
    """Every atom over variables indexed by ``ctx``'s quantified ids (and scalars)."""
    dims = {QDIM[q] for q in ctx}
    out: list[Atom] = []
    grid = ctx == ("p", "r")
    usable = [v for v in _template_vars(schema) if v.dim == SCALAR or v.dim in dims
              or (grid and v.dim == PAGE_BY_REQUEST)]
    for v in usable:
        idx = _idx_of(v)
        t = v.type
        if t.kind == "bool":
            out.append(Atom("eq", v.name, idx, 1))
        elif t.kind == "enum":
            dom = t.domain()
            for c in dom[:-1] if len(dom) == 2 else dom:
                out.append(Atom("eq", v.name, idx, c))
        elif t.kind == "int":
            dom = t.domain()
            if len(dom) > 1:
                out.extend(int_atom("eq", v, idx, c) for c in dom)
                out.extend(int_atom("le", v, idx, c) for c in dom[1:-1])
        elif t.kind == "ref":
            if t.optional:
                out.append(Atom("eq", v.name, idx, -1))
            for q in ctx:
                if QDIM[q] == t.ref_dim and q != idx:
                    out.append(Atom("is", v.name, idx, 0, q))
    if ctx == ("r",):
        out.extend(count_atoms(schema))
    for a, b in itertools.combinations(usable, 2):
        if a.dim != b.dim or a.type.kind != b.type.kind or a.type.kind == "bool":
            continue
        if a.type.kind == "ref" and a.type.ref_dim != b.type.ref_dim:
            continue
        if a.type.kind == "enum" and a.type.describe() != b.type.describe():
            continue
        idx = _idx_of(a)
        out.append(Atom("veq", a.name, idx, 0, b.name))
        if a.type.kind == "int":
            out.append(Atom("vle", a.name, idx, 0, b.name))
            out.append(Atom("vle", b.name, idx, 0, a.name))
    return out


def int_atom(kind: str, v: VarInfo, idx: str | None, c: int) -> Atom:
    """``v[idx] == c`` (eq) or ``<= c`` (le), its constant read from the nearer end of
    ``v``'s range (from the lower end on a tie)."""
    lo, hi = v.type.lo, v.type.hi
    if hi - c < c - lo:
        return Atom(kind, v.name, idx, hi - c, top=True)
    return Atom(kind, v.name, idx, c)


def count_atoms(schema: Schema) -> list[Atom]:
    """``count(var == r) == other[r]`` and ``<=`` for every page array ``var`` of request
    ids and every request-indexed integer array ``other`` of the model (chosen by their
    types, not their names), ``==`` for the sum of the counts in two such arrays
    (``count(written == r) + count(inflight == r) == sent[r]``); ``count(var == r) <= 1``
    for every page array of the model. The monitors' page
    arrays take part only in sums with one of the model's: alone they mostly copy one."""
    out: list[Atom] = []
    model = [v for v in schema.vars if v.owner in ("model", "monitor")]
    pages = [v for v in model if v.dim == PAGE and v.type.kind == "ref"
             and v.type.ref_dim == REQUEST]
    ints = [v for v in model if v.owner == "model" and v.dim == REQUEST and v.type.kind == "int"]
    out.extend(Atom("cle", a.name, "r", 1) for a in pages if a.owner == "model")
    for b in ints:
        for a in pages:
            if a.owner == "model":
                out.append(Atom("cnt", a.name, "r", 0, b.name))
                out.append(Atom("cle", a.name, "r", 0, b.name))
        for a, c in itertools.combinations(pages, 2):
            if "model" in (a.owner, c.owner):
                out.append(Atom("cnt", a.name, "r", 0, b.name, plus=c.name))
    return out


def _idx_of(v: VarInfo) -> str | None:
    if v.dim == SCALAR:
        return None
    if v.dim == PAGE_BY_REQUEST:
        return "pr"
    return DIMQ[v.dim]


# -- evaluating atoms on many states ---------------------------------------------------------

class StateTable:
    """States of one schema as an integer matrix, for vectorised atom evaluation."""

    def __init__(self, schema: Schema, states: Iterable[State]) -> None:
        self.schema = schema
        rows = [[int(x) for x in s] for s in states]
        self.data = np.array(rows, dtype=np.int64).reshape(len(rows), schema.width)

    def block(self, var: str, idx: str | None, ctx: tuple[str, ...]) -> np.ndarray:
        """The values of ``var`` shaped (N, *ctx extents), singleton on other axes."""
        v = self.schema.by_name[var]
        n = self.data.shape[0]
        shape = [n] + [1] * len(ctx)
        if v.dim == SCALAR:
            return self.data[:, v.offset].reshape(shape)
        cols = self.data[:, v.offset:v.offset + v.length]
        if v.dim == PAGE_BY_REQUEST:  # laid out page by page: (N, P, R) in context (p, r)
            assert ctx == ("p", "r")
            return cols.reshape(n, v.length // v.row, v.row)
        shape[1 + ctx.index(idx)] = v.length  # type: ignore[arg-type]
        return cols.reshape(shape)

    def qvalues(self, q: str, ctx: tuple[str, ...]) -> np.ndarray:
        shape = [1] * (1 + len(ctx))
        k = self.schema.counts[QDIM[q]]
        shape[1 + ctx.index(q)] = k
        return np.arange(k).reshape(shape)

    def extents(self, ctx: tuple[str, ...]) -> list[int]:
        return [self.data.shape[0]] + [self.schema.counts[QDIM[q]] for q in ctx]

    def atom(self, atom: Atom, ctx: tuple[str, ...]) -> np.ndarray:
        if atom.counts:
            k = self.schema.counts[REQUEST]
            n = sum((self.block(name, "p", ("p",))[:, :, None]  # (N, P, R) -> (N, R)
                     == np.arange(k)[None, None, :]).sum(axis=1) for name in atom.counted())
            y = self.block(atom.other, "r", ("r",)) if atom.other else atom.value
            out = n == y if atom.kind == "cnt" else n <= y
            return np.broadcast_to(out, self.extents(ctx))
        x = self.block(atom.var, atom.idx, ctx)
        if atom.kind == "eq":
            out = x == atom.constant(self.schema)
        elif atom.kind == "le":
            out = x <= atom.constant(self.schema)
        elif atom.kind == "is":
            out = x == self.qvalues(atom.other, ctx)
        else:
            y = self.block(atom.other, atom.idx, ctx)
            out = x == y if atom.kind == "veq" else x <= y
        return np.broadcast_to(out, self.extents(ctx))

    def matrix(self, atoms: list[Atom], ctx: tuple[str, ...]) -> np.ndarray:
        """Rows: (state, binding) pairs; columns: atoms."""
        if not atoms:
            return np.zeros((0, 0), dtype=bool)
        cols = [self.atom(a, ctx).reshape(-1) for a in atoms]
        return np.stack(cols, axis=1)

    def holds(self, template: Template, atom_index: dict[Atom, int], mat: np.ndarray
              ) -> np.ndarray:
        """Per state: does the template hold under every binding?"""
        acc = np.zeros(mat.shape[0], dtype=bool)
        for atom, pos in template.literals:
            col = mat[:, atom_index[atom]]
            acc |= col if pos else ~col
        per_state = acc.reshape(self.data.shape[0], -1)
        return np.asarray(per_state.all(axis=1))


# -- enumeration ----------------------------------------------------------------------------

def _mask(col: np.ndarray) -> int:
    return int.from_bytes(np.packbits(col, bitorder="little").tobytes(), "little")


def _tautology(lits: tuple[Literal, ...], schema: Schema) -> bool:
    """A clause true whatever the values of the slots it mentions (checked by brute
    force when literals share a variable; literals on distinct slots are each falsifiable)."""
    if any(a.counts for a, _ in lits):  # counts are not brute-forced: the rest decides
        rest = tuple(lit for lit in lits if not lit[0].counts)
        return bool(rest) and _tautology(rest, schema)
    keys = [(a.var, a.idx) for a, _ in lits] + [(a.other, a.idx) for a, _ in lits
                                                if a.kind in ("veq", "vle")]
    if len(set(keys)) == len(keys):
        return False
    names = sorted(set(keys), key=str)
    doms = []
    for var, _ in names:
        t = schema.by_name[var].type
        doms.append(sorted(set(t.domain()) | ({-1, 0, 1, 2} if t.kind == "ref" else set()))
                    if t.kind == "ref" else t.domain())
    binding = {"r": 0, "p": 0}
    for combo in itertools.product(*doms):
        env = dict(zip(names, combo))
        ok = False
        for a, pos in lits:
            x = env[(a.var, a.idx)]
            if a.kind == "eq":
                val = ((x == a.constant(schema)) if schema.by_name[a.var].type.kind != "bool"
                       else bool(x))
            elif a.kind == "le":
                val = x <= a.constant(schema)
            elif a.kind == "is":
                val = x == binding[a.other]
            else:
                y = env[(a.other, a.idx)]
                val = x == y if a.kind == "veq" else x <= y
            if val == pos:
                ok = True
                break
        if not ok:
            return False
    return True


def enumerate_candidates(schema: Schema, table: StateTable, *, max_literals: int = 3
                         ) -> list[Template]:
    """Every minimal clause (up to ``max_literals``) true on all sampled states."""
    out: list[Template] = []
    for ctx in CONTEXTS:
        if any(schema.counts.get(QDIM[q], 0) == 0 for q in ctx):
            continue
        atoms = atoms_for(schema, ctx)
        if not atoms:
            continue
        uniq = unique_rows(table.matrix(atoms, ctx))
        full = (1 << uniq.shape[0]) - 1
        lits: list[tuple[Literal, int]] = []
        for k, atom in enumerate(atoms):
            m = _mask(uniq[:, k])
            if m not in (0, full):  # a constant column says nothing on its own
                lits.append(((atom, True), m))
                lits.append(((atom, False), full ^ m))
            elif _covers(ctx, [(atom, True)]):
                out.append(Template(ctx, ((atom, m == full),)))
        out.extend(_clauses(ctx, lits, full, max_literals, schema))
    return out


def unique_rows(mat: np.ndarray) -> np.ndarray:
    """The distinct rows of a Boolean matrix (in no particular order). Rows are packed
    into bytes and compared as one opaque value each: ``np.unique(axis=0)`` sorts
    lexicographically column by column, 20x slower on 30,000 states x 1,000 atoms."""
    if mat.shape[0] == 0 or mat.shape[1] == 0:
        return mat[:1] if mat.shape[1] == 0 else mat
    packed = np.ascontiguousarray(np.packbits(mat, axis=1))
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first = np.unique(keys, return_index=True)
    return mat[np.sort(first)]


def _covers(ctx: tuple[str, ...], lits: Iterable[Literal]) -> bool:
    """Every quantified id of ``ctx`` is mentioned (a page-request clause must link them)."""
    atoms = [a for a, _ in lits]
    if ctx == ("p", "r"):
        return any(a.links or a.idx == "pr" for a in atoms)
    return all(any(a.idx == q or (a.kind == "is" and a.other == q) for a in atoms) for q in ctx)


def _clauses(ctx: tuple[str, ...], lits: list[tuple[Literal, int]], full: int,
             max_literals: int, schema: Schema) -> list[Template]:
    out: list[Template] = []
    n = len(lits)
    valid1: set[int] = set()  # constant columns were set aside by the caller
    if max_literals < 2:
        return out
    pair_ok: set[tuple[int, int]] = set()
    for i in range(n):
        if i in valid1:
            continue
        for j in range(i + 1, n):
            if j in valid1 or lits[i][0][0] == lits[j][0][0]:
                continue
            if lits[i][1] | lits[j][1] != full:
                continue
            pair: tuple[Literal, ...] = (lits[i][0], lits[j][0])
            if _tautology(pair, schema):
                continue
            pair_ok.add((i, j))
            if _covers(ctx, pair):
                out.append(Template(ctx, pair))
    if max_literals < 3:
        return out
    # a sum of counts, or a count against a constant, is a strong atom: with two more
    # literals it mostly makes clauses true on the sample by accident (and costs every
    # selection time)
    summed = [a.counts and (a.plus != "" or not a.other) for (a, _), _ in lits]
    for i in range(n):
        if i in valid1 or summed[i]:
            continue
        mi = lits[i][1]
        for j in range(i + 1, n):
            if j in valid1 or summed[j] or (i, j) in pair_ok or lits[i][0][0] == lits[j][0][0]:
                continue
            mij = mi | lits[j][1]
            for k in range(j + 1, n):
                if mij | lits[k][1] != full or k in valid1 or summed[k]:
                    continue
                if (i, k) in pair_ok or (j, k) in pair_ok:
                    continue
                ak = lits[k][0][0]
                if ak == lits[i][0][0] or ak == lits[j][0][0]:
                    continue
                clause = (lits[i][0], lits[j][0], lits[k][0])
                if not _covers(ctx, clause) or _tautology(clause, schema):
                    continue
                out.append(Template(ctx, clause))
    return out


class TemplateEvaluator:
    """Evaluates many templates on concrete states of one schema."""

    def __init__(self, schema: Schema, templates: list[Template]) -> None:
        self.schema = schema
        self.by_ctx: dict[tuple[str, ...], list[int]] = {}
        for k, t in enumerate(templates):
            self.by_ctx.setdefault(t.ctx, []).append(k)
        self.templates = templates
        self.atoms: dict[tuple[str, ...], list[Atom]] = {}
        self.index: dict[tuple[str, ...], dict[Atom, int]] = {}
        for ctx, ks in self.by_ctx.items():
            seen: dict[Atom, int] = {}
            for k in ks:
                for a, _ in templates[k].literals:
                    seen.setdefault(a, len(seen))
            self.atoms[ctx] = list(seen)
            self.index[ctx] = seen

    def failing(self, states: list[State], among: Iterable[int]) -> set[int]:
        """Templates (indices) false on some of ``states``."""
        wanted = set(among)
        table = StateTable(self.schema, states)
        out: set[int] = set()
        for ctx, ks in self.by_ctx.items():
            ks = [k for k in ks if k in wanted]
            if not ks:
                continue
            mat = table.matrix(self.atoms[ctx], ctx)
            for k in ks:
                if not table.holds(self.templates[k], self.index[ctx], mat).all():
                    out.add(k)
        return out


def small_sizes(system: Any) -> dict[str, int]:
    """The sizes of the small configuration candidates are sampled from: at most two
    requests and four pages, every other size as ``system`` has it."""
    from kvspec.lang.system import settable_sizes

    sizes = settable_sizes(system.loaded, system.sizes)
    for decl in system.loaded.decl.sizes:
        if decl.derived is not None:
            continue
        if decl.dim == REQUEST:
            sizes[decl.name] = min(sizes[decl.name], 2)
        elif decl.dim == PAGE:
            sizes[decl.name] = min(sizes[decl.name], 4)
    return sizes


def is_small(system: Any) -> bool:
    """Whether ``system`` is already at the small size (:func:`small_sizes`)."""
    from kvspec.lang.system import settable_sizes

    return small_sizes(system) == settable_sizes(system.loaded, system.sizes)


def sample_states(system: Any, *, max_states: int = 30000, deadline: Any = None
                  ) -> tuple[Schema, list[State]]:
    """Reachable states of a small configuration of ``system``'s model (two requests,
    at most four pages), explored exhaustively when it fits ``max_states`` (and the
    ``deadline`` of the run, if any: a sample cut short is still a sample, since every
    candidate is checked for inductiveness afterwards)."""
    schema, states, _ = sample_outcome(system, max_states=max_states, deadline=deadline)
    return schema, states


def sample_outcome(system: Any, *, max_states: int = 30000, deadline: Any = None
                   ) -> tuple[Schema, list[State], dict[str, int] | None]:
    """:func:`sample_states`, and the length of the shortest counterexample of every
    property the small configuration violates when its breadth-first exploration
    decided every property (it was exhaustive, or stopped once all were violated);
    None when it did not."""
    from kvspec.engines.explicit import Limits, explore
    from kvspec.lang.system import compiled_again
    from kvspec.verdict import Status

    small = compiled_again(system, small_sizes(system))
    out = explore(small, symmetry=True, limits=Limits(max_states=max_states), keep_graph=True,
                  deadline=deadline)
    shortest: dict[str, int] | None = None
    if out.complete or out.stopped == "all-violated":
        shortest = {v.prop: len(v.trace.steps) for v in out.verdicts
                    if v.status is Status.VIOLATED and v.trace is not None}
        if any(v.status not in (Status.HOLDS, Status.VIOLATED) or (
                v.status is Status.VIOLATED and v.trace is None) for v in out.verdicts):
            shortest = None
    return small.schema, out.states, shortest
