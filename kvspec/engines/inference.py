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
3. **Houdini** (:class:`Houdini`) at the target size with Z3: a candidate that is
   not preserved by some action from a state satisfying all the candidates is
   dropped (the counterexample to induction is stepped concretely and every
   candidate false after it goes), until the rest is inductive.
4. **Cores.** The final invariant keeps only the candidates some proof needs: the
   closure of the unsat cores of the property checks and of the inductiveness
   checks of what they use.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3

from kvspec.engines.transition import check_sat
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
    (``count(owner == r) == need[r]``). They mention every slot of ``var``."""

    kind: str
    var: str
    idx: str | None  # "r", "p", "pr" (a (page, request) array) or None for a scalar
    value: int = 0
    other: str = ""  # veq/vle: the second variable; is: the quantified variable

    @property
    def links(self) -> bool:
        """Relates a page to a request (or a request to a page)."""
        return self.kind == "is" and self.idx is not None and self.idx != self.other

    @property
    def counts(self) -> bool:
        return self.kind in COUNT_KINDS

    def slots(self, schema: Schema, binding: dict[str, int]) -> list[int]:
        if self.counts:
            v = schema.by_name[self.var]
            return [*range(v.offset, v.offset + v.length),
                    _slot(schema.by_name[self.other], "r", binding)]
        out = [_slot(schema.by_name[self.var], self.idx, binding)]
        if self.kind in ("veq", "vle"):
            out.append(_slot(schema.by_name[self.other], self.idx, binding))
        return out

    def render(self, schema: Schema, positive: bool) -> str:
        v = schema.by_name[self.var]
        if self.counts:
            op = ("==" if positive else "!=") if self.kind == "cnt" else ("<=" if positive
                                                                          else ">")
            return f"count({self.var} == r) {op} {self.other}[r]"
        name = f"{self.var}[{_index_text(self.idx)}]" if self.idx else self.var
        if self.kind == "eq":
            if v.type.kind == "bool":
                return name if positive else f"not {name}"
            if v.type.kind == "ref" and self.value < 0:
                return f"{name} is None" if positive else f"{name} is not None"
            shown = v.type.to_json(self.value)
            return f"{name} {'==' if positive else '!='} {shown}"
        if self.kind == "le":
            return f"{name} <= {self.value}" if positive else f"{name} > {self.value}"
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
        n = z3.Sum([z3.If(cur[i] == r, 1, 0) for i in range(v.offset, v.offset + v.length)])
        y = cur[_slot(schema.by_name[atom.other], "r", binding)]
        return n == y if atom.kind == "cnt" else n <= y  # type: ignore[return-value]
    x = cur[_slot(v, atom.idx, binding)]
    if atom.kind == "eq":
        return x if v.type.kind == "bool" else x == atom.value  # type: ignore[return-value]
    if atom.kind == "le":
        return x <= atom.value  # type: ignore[return-value,operator]
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
                out.extend(Atom("eq", v.name, idx, c) for c in dom)
                out.extend(Atom("le", v.name, idx, c) for c in dom[1:-1])
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


def count_atoms(schema: Schema) -> list[Atom]:
    """``count(var == r) == other[r]`` and ``<=`` for every page array ``var`` of request
    ids and every request-indexed integer array ``other`` of the model (chosen by their
    types, not their names; the monitors' copies of the model's arrays are left out)."""
    out: list[Atom] = []
    vs = [v for v in schema.vars if v.owner == "model"]
    pages = [v for v in vs if v.dim == PAGE and v.type.kind == "ref" and v.type.ref_dim == REQUEST]
    ints = [v for v in vs if v.dim == REQUEST and v.type.kind == "int"]
    for a in pages:
        for b in ints:
            out.append(Atom("cnt", a.name, "r", 0, b.name))
            out.append(Atom("cle", a.name, "r", 0, b.name))
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
            pages = self.block(atom.var, "p", ("p",))  # (N, P)
            k = self.schema.counts[REQUEST]
            n = (pages[:, :, None] == np.arange(k)[None, None, :]).sum(axis=1)  # (N, R)
            y = self.block(atom.other, "r", ("r",))
            out = n == y if atom.kind == "cnt" else n <= y
            return np.broadcast_to(out, self.extents(ctx))
        x = self.block(atom.var, atom.idx, ctx)
        if atom.kind == "eq":
            out = x == atom.value
        elif atom.kind == "le":
            out = x <= atom.value
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
                val = (x == a.value) if schema.by_name[a.var].type.kind != "bool" else bool(x)
            elif a.kind == "le":
                val = x <= a.value
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
    for i in range(n):
        if i in valid1:
            continue
        mi = lits[i][1]
        for j in range(i + 1, n):
            if j in valid1 or (i, j) in pair_ok or lits[i][0][0] == lits[j][0][0]:
                continue
            mij = mi | lits[j][1]
            for k in range(j + 1, n):
                if mij | lits[k][1] != full or k in valid1:
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


def sample_states(system: Any, *, max_states: int = 30000, deadline: Any = None
                  ) -> tuple[Schema, list[State]]:
    """Reachable states of a small configuration of ``system``'s model (two requests,
    at most four pages), explored exhaustively when it fits ``max_states`` (and the
    ``deadline`` of the run, if any: a sample cut short is still a sample, since every
    candidate is checked for inductiveness afterwards)."""
    from kvspec.engines.explicit import Limits, explore
    from kvspec.lang.system import compile_model, settable_sizes

    sizes = settable_sizes(system.loaded, system.sizes)
    for decl in system.loaded.decl.sizes:
        if decl.derived is not None:
            continue
        if decl.dim == REQUEST:
            sizes[decl.name] = min(sizes[decl.name], 2)
        elif decl.dim == PAGE:
            sizes[decl.name] = min(sizes[decl.name], 4)
    small = compile_model(system.loaded, sizes, [p.name for p in system.properties],
                          inflight_bound=system.inflight_bound)
    out = explore(small, symmetry=True, limits=Limits(max_states=max_states), keep_graph=True,
                  deadline=deadline)
    return small.schema, out.states


# -- Houdini at the target size ---------------------------------------------------------------

def representative_instances(system: Any, symmetric: tuple[bool, bool]) -> list[int]:
    """Action instances up to renaming of the symmetric id spaces: those whose request
    (page) arguments are 0, 1, ... in order of first appearance."""
    out = []
    for inst in system.instances:
        ok = True
        for dim, on in ((REQUEST, symmetric[0]), (PAGE, symmetric[1])):
            if not on:
                continue
            seen: list[int] = []
            for (_, t), a in zip(inst.action.params, inst.args):
                if t.ref_dim == dim and a not in seen:
                    seen.append(a)
            if seen != list(range(len(seen))):
                ok = False
        if ok:
            out.append(inst.index)
    return out


class InferenceTimeout(Exception):
    """The deadline passed (or the solver gave up) during invariant selection."""


@dataclass
class Goal:
    """A clause the invariant must keep: a property (or "no model error")."""

    name: str
    template: int | None = None  # a template index (monitor flags: ``not violated:x``)
    formula: Any = None  # else an integer-encoded formula over the state (model invariants)


@dataclass
class Selection:
    """The outcome of :meth:`Strengthener.run`: ``chosen`` is inductive (at the
    checked instances) and contains every goal in ``proved``."""

    chosen: list[int]  # template indices, goals included
    proved: list[str]  # goals the invariant keeps
    open: list[str]  # goals the candidates could not support
    errors_excluded: bool  # the invariant rules out every model error
    queries: int = 0
    dropped: int = 0
    needs: dict[str, list[int]] = field(default_factory=dict)  # goal -> clauses it needs


ERRORS_GOAL = "(no model error)"
#: clause indices of model-invariant goals start here, after every template (the
#: pool grows when counterexamples propose new candidates)
FORMULA_BASE = 1 << 30


class Strengthener:
    """Counterexample-guided choice of an inductive invariant among the candidates
    (a lazy Houdini): start from the goals; while some action leads from a state
    satisfying the chosen clauses to one violating them (a counterexample to
    induction, CTI), add the simplest candidate that is false on the CTI's
    pre-state; when no candidate excludes it, the violated clauses cannot be in
    any inductive subset of the candidates and are dropped (a goal among them
    stays open). Everything kept lies in the largest inductive subset, so the
    result is what Houdini would find, pruned to what the goals need. States
    where some action raises a model error are treated as CTIs too, until no
    candidate excludes one.

    With ``symmetric`` id spaces only representative action instances are checked
    (candidates and transitions are closed under renaming); the certificate check
    re-checks every instance."""

    def __init__(self, ts: Any, templates: list[Template], goals: list[Goal],
                 symmetric: tuple[bool, bool], deadline: Any,
                 seed: Iterable[int] = (),
                 support: dict[int | str, set[int]] | None = None,
                 sample: StateTable | None = None) -> None:
        from kvspec.trace import InternalError

        self._internal = InternalError
        self.ts = ts
        self.system = ts.system
        self.schema: Schema = ts.system.schema
        self.templates = templates
        self.goals = goals
        self.deadline = deadline
        self.evaluator = TemplateEvaluator(self.schema, templates)
        self.reps = representative_instances(self.system, symmetric)
        self.solver = ts.solver()
        self.solver.add(*ts.domain(ts.cur))
        self.acts: dict[int, z3.BoolRef] = {}
        self.terms: dict[int, list[tuple[z3.BoolRef, frozenset[int]]]] = {}
        self.formulas: dict[int, str] = {}  # clause index -> invariant property name
        self.chosen: list[int] = []
        self.banned: set[int] = set()
        self.seed = [k for k in seed]
        # clause -> the clauses added to exclude a counterexample to its induction
        self.support: dict[int | str, set[int]] = {k: set(v) for k, v in (support or {}).items()}
        self._post: dict[tuple[int, int, int], z3.BoolRef] = {}
        self._n = 0
        self._dead = 0
        self.queries = 0
        # simplest first: fewer literals, fewer quantified ids; a count (a sum over every
        # page) costs as much as two more literals, so it is picked only when needed
        self.size = [len(t.literals) * 4 + len(t.ctx) + 8 * sum(a.counts for a, _ in t.literals)
                     for t in templates]
        slot_of = {name: i for i, name in enumerate(ts.labels)}
        self.sample = sample  # the sampled states: proposals must hold on them
        self.proposed = 0
        for g in goals:
            if g.template is None:
                k = FORMULA_BASE + len(self.formulas)  # after any template, proposals too
                self.formulas[k] = g.name
                names = _names(g.formula)
                self.terms[k] = [(ts.enc(g.formula), frozenset(slot_of[n] for n in names))]
                g.template = k

    # -- solver plumbing --------------------------------------------------------------
    def _add(self, k: int) -> None:
        if k in self.chosen:
            return
        if k not in self.acts:
            act = z3.Bool(f"cand!{k}")
            if k not in self.terms:
                t = self.templates[k]
                self.terms[k] = [
                    (self.ts.enc(t.instance(self.schema, self.ts.int_cur, b)),
                     frozenset(t.slots(self.schema, b))) for b in t.bindings(self.schema)]
            for term, _ in self.terms[k]:
                self.solver.add(z3.Implies(act, term))
            self.acts[k] = act
        self.chosen.append(k)

    def _fresh_solver(self) -> None:
        """Start over with only the domain and the chosen clauses (every query leaves a
        dead goal behind; a long selection would otherwise slow down)."""
        self.solver = self.ts.solver()
        self.solver.add(*self.ts.domain(self.ts.cur))
        for k in self.chosen:
            for term, _ in self.terms[k]:
                self.solver.add(z3.Implies(self.acts[k], term))
        self._dead = 0

    def _check(self, goal: z3.BoolRef) -> z3.CheckSatResult:
        if self.deadline.expired():
            raise InferenceTimeout()
        self._dead += 1
        if self._dead > 200:
            self._fresh_solver()
        self._n += 1
        lit = z3.Bool(f"goal!{self._n}")
        self.solver.add(z3.Implies(lit, goal))
        self.deadline.arm(self.solver)
        self.queries += 1
        res = check_sat(self.solver, lit, *[self.acts[k] for k in self.chosen])
        if res == z3.unknown:
            raise InferenceTimeout()
        return res

    def _posts(self, j: int) -> list[z3.BoolRef]:
        written = set(self.ts.steps[j].updates)
        out = []
        for k in self.chosen:
            for n, (term, slots) in enumerate(self.terms[k]):
                if slots & written:
                    key = (j, k, n)
                    post = self._post.get(key)
                    if post is None:
                        post = self.ts.post(j, term)
                        self._post[key] = post
                    out.append(post)
        return out

    def failing(self, states: list[State], among: Iterable[int]) -> set[int]:
        among = list(among)
        out = self.evaluator.failing(states, [k for k in among if k < len(self.templates)])
        for k in among:
            name = self.formulas.get(k)
            if name is not None and any(name in self.system.failed_invariants(s)
                                        for s in states):
                out.add(k)
        return out

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> Selection:
        # a clause false in the initial state is in no invariant
        everything = list(range(len(self.templates))) + list(self.formulas)
        self.banned |= self.failing([self.system.initial], everything)
        for g in self.goals:
            if g.template not in self.banned:
                self._add(g.template)  # type: ignore[arg-type]
        for k in self.seed:
            if k not in self.banned:
                self._add(k)
        dropped = 0
        errors_goal = True
        while True:
            cti = self._find_cti(errors_goal)
            if cti is None:
                break
            pre, post = cti
            pick = self._pick(pre)
            if pick is None and self.sample is not None:
                pick = self._propose(pre, post)
            if pick is not None:
                self._add(pick)
                for b in (self.failing([post], self.chosen) if post is not None
                          else [ERRORS_GOAL]):
                    self.support.setdefault(b, set()).add(pick)
                continue
            if post is None:  # an invariant state where some action errs: give up on that
                errors_goal = False
                continue
            broken = self.failing([post], self.chosen)
            if not broken:
                raise self._internal("inference: a counterexample to induction does not break "
                                     "the invariant when stepped concretely")
            for k in broken:
                self.chosen.remove(k)
                self.banned.add(k)
                dropped += 1
        proved = [g.name for g in self.goals if g.template in self.chosen]
        open_ = [g.name for g in self.goals if g.template not in self.chosen]
        needs = {g.name: self.needed(g.template) for g in self.goals  # type: ignore[arg-type]
                 if g.template in self.chosen}
        if errors_goal:
            needs[ERRORS_GOAL] = self.needed(ERRORS_GOAL)
        return Selection(list(self.chosen), proved, open_, errors_goal, self.queries, dropped,
                         needs)

    def needed(self, root: int | str) -> list[int]:
        """The chosen clauses ``root`` depends on: those added to exclude a
        counterexample to its induction, and theirs, transitively (``root`` included).
        Seeded clauses (from a smaller size) that no counterexample asked for are in
        no goal's list: they were kept because they are inductive together."""
        chosen = set(self.chosen)
        out: list[int] = [root] if isinstance(root, int) and root in chosen else []
        stack = [root]
        seen: set[int | str] = {root}
        while stack:
            for k in sorted(self.support.get(stack.pop(), ())):
                if k not in seen and k in chosen:
                    seen.add(k)
                    out.append(k)
                    stack.append(k)
        return out

    def _find_cti(self, errors_goal: bool) -> tuple[State, State | None] | None:
        ts = self.ts
        errs = ts.any_error()
        if errors_goal and not z3.is_false(errs) and self._check(errs) == z3.sat:
            return self._state(), None
        for j in self.reps:
            posts = self._posts(j)
            if not posts:
                continue
            step = ts.steps[j]
            goal = z3.And(step.enabled, z3.Not(step.error), z3.Or(*[z3.Not(p) for p in posts]))
            if self._check(goal) == z3.sat:
                pre = self._state()
                res = self.system.step(pre, self.system.instances[j])
                if res is None:
                    raise self._internal(f"inference: {self.system.instances[j].label()} is "
                                         "enabled symbolically but not concretely")
                return pre, res.state
        return None

    def _state(self) -> State:
        state = self.ts.state_of(self.solver.model())
        if self.failing([state], self.chosen):
            raise self._internal("inference: a solver state breaks a clause it was told to keep")
        return state

    def _pick(self, pre: State) -> int | None:
        """The simplest unused candidate that is false on ``pre``."""
        chosen = set(self.chosen)
        pool = [k for k in range(len(self.templates)) if k not in chosen and k not in self.banned]
        false_on = self.evaluator.failing([pre], pool)
        if not false_on:
            return None
        return min(false_on, key=lambda k: (self.size[k], k))

    def _propose(self, pre: State, post: State | None) -> int | None:
        """ICE-style: new candidates false on ``pre`` and true on the sample, over the
        variables of the clauses the counterexample broke (:mod:`proposals`); they
        join the pool, and the simplest is returned."""
        from kvspec.engines.proposals import propose

        assert self.sample is not None
        broken = self.failing([post], self.chosen) if post is not None else set()
        related = {v.name for v in self.schema.vars if v.owner == "model"}
        for k in broken:
            if k < len(self.templates):
                for a, _ in self.templates[k].literals:
                    related |= {a.var, a.other}
        new = propose(self.sample, self.schema, pre, related, set(self.templates))
        if not new:
            return None
        first = len(self.templates)
        self.templates.extend(new)
        self.size.extend(len(t.literals) * 4 + len(t.ctx)
                         + 8 * sum(a.counts for a, _ in t.literals) for t in new)
        self.evaluator = TemplateEvaluator(self.schema, self.templates)
        self.proposed += len(new)
        false_on = self.evaluator.failing([pre], range(first, len(self.templates)))
        return min(false_on, key=lambda k: (self.size[k], k)) if false_on else None

    def size_of(self, k: int) -> int:
        return self.size[k] if k < len(self.size) else 0

    def clause(self, k: int) -> tuple[z3.BoolRef, str]:
        """Clause ``k`` over the integer-encoded state, and its reading."""
        if k in self.formulas:
            name = self.formulas[k]
            goal = next(g for g in self.goals if g.name == name)
            return goal.formula, f"invariant {name}"
        t = self.templates[k]
        insts = [t.instance(self.schema, self.ts.int_cur, b) for b in t.bindings(self.schema)]
        return (z3.And(*insts) if len(insts) > 1 else insts[0]), t.render(self.schema)


def _names(e: z3.ExprRef) -> set[str]:
    out: set[str] = set()
    stack = [e]
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x.decl().name())
        stack.extend(x.children())
    return out


def goal_templates(system: Any, templates: list[Template], names: Iterable[str] | None = None
                   ) -> list[Goal]:
    """One goal per property (of ``names``, default all): ``not violated:<name>`` for
    monitor properties (added to ``templates`` if absent), the invariant's own formula
    for model invariants."""
    goals = []
    index = {t: k for k, t in enumerate(templates)}
    wanted = None if names is None else set(names)
    for p in system.properties:
        if wanted is not None and p.name not in wanted:
            continue
        if p.flag is not None:
            info = next(v for v in system.schema.vars if v.offset == p.flag and v.owner == "flag")
            t = Template((), ((Atom("eq", info.name, None, 1), False),))
            if t not in index:
                index[t] = len(templates)
                templates.append(t)
            goals.append(Goal(p.name, template=index[t]))
        else:
            goals.append(Goal(p.name, formula=z3.simplify(
                system.encode_invariant(p, system.state_vars()))))
    return goals
