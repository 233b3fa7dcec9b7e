"""The model × property monitors as a Z3 transition system.

Everything here is built from :meth:`System.encode_step` — the symbolic
interpretation of the very action bodies the concrete interpretation runs — so
there is no second, hand-written symbolic version of a model.

Encoding (measured in ``docs/proofs.md``). The symbolic interpretation produces
quantifier-free integer terms: one Z3 variable per state slot, bools as Bools,
bounded ints, enum members and request/page references as Ints (``-1`` is
``None``). By default the engines solve a *bit-vector* image of those terms: every
Int slot becomes a signed bit-vector of one common width ``W``, chosen by an
interval analysis of every term so that no intermediate value can overflow (so
the image is exactly equivalent), and the SAT-based finite-domain solver decides
it. On our models this is 5–10× faster than linear integer arithmetic at depth.
``encoding="int"`` keeps the integer terms (used for the readable, re-checkable
certificates and as a cross-check).

Each action instance is one disjunct of the transition relation, chosen by a
one-hot Boolean selector per step; a slot the chosen instance does not write
keeps its value through a frame axiom, so one step costs O(instances + slots)
constraints, not O(instances × slots).

Model errors (an out-of-range write on some path) are conditions over the
pre-state: when one holds, the concrete interpretation raises at that point of
the body. Engines treat "some instance errs" as a bad state of its own and report
it as a :class:`~kvspec.lang.errors.ModelError` after replaying the path to it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import z3
from z3.z3 import _to_expr_ref

from kvspec.engines.explicit import Deadline
from kvspec.lang.errors import ModelError
from kvspec.lang.schema import State
from kvspec.lang.symvalues import domain_constraint, from_z3, z3_const
from kvspec.lang.system import ActionInstance, Property, System
from kvspec.lang.types import PAGE, REQUEST, ValueType
from kvspec.lang.z3gen import is_false
from kvspec.proofs.smt_check import mk_and, mk_or
from kvspec.trace import InternalError

Vars = list[z3.ExprRef]
ENCODINGS = ("bv", "int")


def _no_deadline(phase: str | None = None) -> None:
    """Stands in for :meth:`Deadline.check` when a run has no deadline."""


class EncodingOverflow(Exception):
    """A term's value range does not fit the chosen bit-vector width."""


@dataclass
class InstanceEncoding:
    """One action instance as a guarded update of the current-state variables."""

    inst: ActionInstance
    enabled: z3.BoolRef
    updates: dict[int, z3.ExprRef]  # slot -> next value (only the slots it may change)
    errors: list[tuple[z3.BoolRef, str]] = field(default_factory=list)

    @property
    def error(self) -> z3.BoolRef:
        if not self.errors:
            return z3.BoolVal(False)
        return z3.Or(*[c for c, _ in self.errors]) if len(self.errors) > 1 else self.errors[0][0]


# -- solver calls and Ctrl-C ---------------------------------------------------------------
# During a check Z3 installs its own SIGINT handler: Ctrl-C stops the check, which
# answers ``unknown``, and Python never sees the KeyboardInterrupt. Engines call
# :func:`check_sat` so that an interrupted check raises KeyboardInterrupt instead of
# being mistaken for a solver answer; code that calls Z3 directly runs under
# :func:`python_handles_ctrl_c`.

def interrupted(solver: z3.Solver) -> bool:
    """The last ``unknown`` of ``solver`` was Ctrl-C."""
    try:
        reason = solver.reason_unknown()
    except z3.Z3Exception:
        return False
    return "interrupted" in reason.lower()


def check_sat(solver: z3.Solver, *assumptions: z3.ExprRef) -> z3.CheckSatResult:
    """``solver.check(*assumptions)``; Ctrl-C during the check raises KeyboardInterrupt
    (``unknown`` is only ever a give-up or a timeout)."""
    res = solver.check(*assumptions)
    if res == z3.unknown and interrupted(solver):
        raise KeyboardInterrupt
    return res


@contextmanager
def python_handles_ctrl_c() -> Iterator[None]:
    """Z3 leaves SIGINT to Python in the body: Ctrl-C raises KeyboardInterrupt as soon
    as the running Z3 call returns (for code that reads results without
    :func:`check_sat`, e.g. certificate checks)."""
    try:
        before = z3.get_param("ctrl_c")
    except z3.Z3Exception:
        before = "true"
    z3.set_param("ctrl_c", False)
    try:
        yield
    finally:
        z3.set_param("ctrl_c", before)


# -- fast term plumbing --------------------------------------------------------------------
# (``mk_and``/``mk_or``: direct C calls, from kvspec.proofs.smt_check)

class Renaming:
    """A prepared substitution (sources and targets as C arrays)."""

    def __init__(self, pairs: Sequence[tuple[z3.ExprRef, z3.ExprRef]]) -> None:
        self.keep = list(pairs)
        self.n = len(pairs)
        self.src = (z3.Ast * self.n)(*[a.as_ast() for a, _ in pairs])
        self.dst = (z3.Ast * self.n)(*[b.as_ast() for _, b in pairs])

    def __call__(self, expr: z3.ExprRef) -> z3.ExprRef:
        if self.n == 0:
            return expr
        ctx = expr.ctx
        return _to_expr_ref(z3.Z3_substitute(ctx.ref(), expr.as_ast(), self.n, self.src,
                                             self.dst), ctx)


def free_constants(e: z3.ExprRef) -> set[str]:
    """Names of the uninterpreted constants in ``e`` (a DAG walk with direct C calls)."""
    return set(free_constant_sorts(e))


def free_constant_sorts(e: z3.ExprRef) -> dict[str, int]:
    """Name -> Z3 sort kind of the uninterpreted constants in ``e``."""
    ctx = e.ctx.ref()
    out: dict[str, int] = {}
    seen: set[int] = set()
    stack = [e.as_ast()]
    app = z3.Z3_APP_AST
    while stack:
        a = stack.pop()
        key = z3.Z3_get_ast_id(ctx, a)
        if key in seen:
            continue
        seen.add(key)
        if z3.Z3_get_ast_kind(ctx, a) != app:
            continue
        n = z3.Z3_get_app_num_args(ctx, a)
        if n == 0:
            d = z3.Z3_get_app_decl(ctx, a)
            if z3.Z3_get_decl_kind(ctx, d) == z3.Z3_OP_UNINTERPRETED:
                name = z3.Z3_get_symbol_string(ctx, z3.Z3_get_decl_name(ctx, d))
                out[name] = z3.Z3_get_sort_kind(ctx, z3.Z3_get_sort(ctx, a))
            continue
        for i in range(n):
            stack.append(z3.Z3_get_app_arg(ctx, a, i))
    return out


def simplified(e: z3.ExprRef) -> z3.ExprRef:
    """``z3.simplify(e)``; a constant, a truth value or an integer literal is its own
    simplification (most of the terms an encoding simplifies are)."""
    ctx, a = e.ctx_ref(), e.as_ast()
    kind = z3.Z3_get_ast_kind(ctx, a)
    if kind == z3.Z3_NUMERAL_AST and isinstance(e, z3.IntNumRef):
        return e
    if kind == z3.Z3_APP_AST and z3.Z3_get_app_num_args(ctx, a) == 0:
        return e
    return z3.simplify(e)


# -- integer terms -> bit-vector terms ----------------------------------------------------

_CMP = {z3.Z3_OP_LE: lambda a, b: a <= b, z3.Z3_OP_LT: lambda a, b: a < b,
        z3.Z3_OP_GE: lambda a, b: a >= b, z3.Z3_OP_GT: lambda a, b: a > b}


class BitVecImage:
    """Translates integer terms over known-bounded Int constants to signed bit-vectors.

    Every Int subterm gets an interval (a sound over-approximation of its values)
    and a *reach* (the largest magnitude of it and of every partial sum or product
    computed on the way); a term whose reach does not fit ``width`` signed bits
    raises :class:`EncodingOverflow`, so a translated term always means the same as
    the integer one."""

    def __init__(self, bounds: dict[str, tuple[int, int]], width: int) -> None:
        self.bounds = bounds
        self.width = width
        self.limit = 2 ** (width - 1) - 1  # |value| <= limit fits (and -limit - 1)
        self._iv: dict[int, tuple[z3.ExprRef, tuple[int, int] | None, int]] = {}
        self._bv: dict[int, tuple[z3.ExprRef, z3.ExprRef]] = {}

    @staticmethod
    def needed_width(reach: int) -> int:
        w = 2
        while reach > 2 ** (w - 1) - 1:
            w += 1
        return w

    # -- intervals ---------------------------------------------------------------------
    def interval(self, e: z3.ExprRef) -> tuple[int, int] | None:
        return self._analyse(e)[0]

    def reach(self, e: z3.ExprRef) -> int:
        """The largest magnitude any (partial) value of ``e``'s Int subterms can take."""
        return self._analyse(e)[1]

    def _analyse(self, e: z3.ExprRef) -> tuple[tuple[int, int] | None, int]:
        key = e.get_id()
        hit = self._iv.get(key)
        if hit is not None:
            return hit[1], hit[2]
        iv, reach = self._interval(e)
        self._iv[key] = (e, iv, reach)  # keep e alive: Z3 reuses ids of freed terms
        return iv, reach

    def _interval(self, e: z3.ExprRef) -> tuple[tuple[int, int] | None, int]:
        if z3.is_int_value(e):
            v = e.as_long()
            return (v, v), abs(v)
        if e.num_args() == 0:
            if e.sort() == z3.IntSort():
                name = e.decl().name()
                if name not in self.bounds:
                    raise EncodingOverflow(f"unbounded integer constant {name}")
                lo, hi = self.bounds[name]
                return (lo, hi), max(abs(lo), abs(hi))
            return None, 0
        kids = [self._analyse(c) for c in e.children()]
        reach = max(r for _, r in kids)
        ivs = [iv for iv, _ in kids]
        op = e.decl().kind()
        if op in (z3.Z3_OP_ADD, z3.Z3_OP_SUB):
            lo, hi = ivs[0]  # type: ignore[misc]
            for iv in ivs[1:]:
                assert iv is not None
                lo, hi = (lo + iv[0], hi + iv[1]) if op == z3.Z3_OP_ADD else \
                    (lo - iv[1], hi - iv[0])
                reach = max(reach, abs(lo), abs(hi))
            return (lo, hi), reach
        if op == z3.Z3_OP_UMINUS:
            lo, hi = ivs[0]  # type: ignore[misc]
            return (-hi, -lo), reach
        if op == z3.Z3_OP_MUL:
            iv = ivs[0]
            for civ in ivs[1:]:
                prods = [a * b for a in iv for b in civ]  # type: ignore[union-attr]
                iv = (min(prods), max(prods))
                reach = max(reach, abs(iv[0]), abs(iv[1]))
            return iv, reach
        if op in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            if not z3.is_int_value(e.arg(1)) or e.arg(1).as_long() <= 0:
                raise EncodingOverflow(f"division by a non-constant in {e}")
            c = e.arg(1).as_long()
            lo, hi = ivs[0]  # type: ignore[misc]
            reach = max(reach, abs(lo - c), abs(hi + c))
            return ((lo // c, hi // c) if op == z3.Z3_OP_IDIV else (0, c - 1)), reach
        if op == z3.Z3_OP_ITE and ivs[1] is not None:
            a, b = ivs[1], ivs[2]
            return (min(a[0], b[0]), max(a[1], b[1])), reach  # type: ignore[index]
        if z3.is_bool(e) or op == z3.Z3_OP_ITE:
            return None, reach
        raise EncodingOverflow(f"unsupported operation in {e}")

    # -- translation -------------------------------------------------------------------
    def __call__(self, e: z3.ExprRef) -> z3.ExprRef:
        reach = self.reach(e)
        if reach > self.limit:
            raise EncodingOverflow(f"{e} may reach ±{reach}, beyond {self.width} bits")
        return self._translate(e)

    def _translate(self, e: z3.ExprRef) -> z3.ExprRef:
        key = e.get_id()
        hit = self._bv.get(key)
        if hit is not None:
            return hit[1]
        out = self._build(e)
        self._bv[key] = (e, out)
        return out

    def _build(self, e: z3.ExprRef) -> z3.ExprRef:
        W = self.width
        if z3.is_int_value(e):
            return z3.BitVecVal(e.as_long(), W)
        d = e.decl()
        if e.num_args() == 0:
            return z3.BitVec(d.name(), W) if e.sort() == z3.IntSort() else e
        op = d.kind()
        ch = [self._translate(c) for c in e.children()]
        if op == z3.Z3_OP_ADD:
            acc = ch[0]
            for c in ch[1:]:
                acc = acc + c
            return acc
        if op == z3.Z3_OP_SUB:
            acc = ch[0]
            for c in ch[1:]:
                acc = acc - c
            return acc
        if op == z3.Z3_OP_UMINUS:
            return -ch[0]
        if op == z3.Z3_OP_MUL:
            acc = ch[0]
            for c in ch[1:]:
                acc = acc * c
            return acc
        if op in (z3.Z3_OP_IDIV, z3.Z3_OP_MOD):
            c = e.arg(1).as_long()
            a, cv = ch[0], z3.BitVecVal(c, W)
            floor = z3.If(a >= 0, z3.UDiv(a, cv), -z3.UDiv(-a + (c - 1), cv))
            return floor if op == z3.Z3_OP_IDIV else a - floor * cv
        if op in _CMP:
            return _CMP[op](ch[0], ch[1])
        if op == z3.Z3_OP_EQ:
            return ch[0] == ch[1]
        if op == z3.Z3_OP_DISTINCT:
            return z3.Distinct(*ch)
        if op == z3.Z3_OP_ITE:
            return z3.If(ch[0], ch[1], ch[2])
        return d(*ch)  # and, or, not, implies, xor, pseudo-boolean constraints


# -- the transition system ----------------------------------------------------------------

def encode_instance(system: System, inst: ActionInstance, int_cur: list[Any]
                    ) -> tuple[InstanceEncoding, Any]:
    """One instance over the integer-encoded state: its enabledness, the slots it can
    change, its model-error conditions; and the step encoding they come from (whose
    guarded events a caller may need; the transition system itself drops them)."""
    enc = system.encode_step(inst, int_cur)
    updates = {}
    for i, (c, n) in enumerate(zip(int_cur, enc.next)):
        if c.ast.value != n.ast.value:  # Z3 shares equal terms: the same term is the same AST
            n = simplified(n)
            if n.ast.value != c.ast.value:
                updates[i] = n
    errors = [(simplified(c), msg) for c, msg in enc.errors]
    errors = [(c, msg) for c, msg in errors if not is_false(c)]
    return InstanceEncoding(inst, simplified(enc.enabled), updates, errors), enc


class TransitionSystem:
    """init, transition and bad states of one compiled system, over Z3 variables.

    ``int_cur`` are the integer-encoded current-state variables the symbolic
    interpretation works on; ``cur``/``nxt``/``frame(t)`` are the solver's
    variables in the chosen encoding, and :meth:`enc` maps an integer term over
    ``int_cur`` to it."""

    def __init__(self, system: System, encoding: str = "bv",
                 symmetry: tuple[bool, bool] = (False, False),
                 _raw: tuple[Vars, list[InstanceEncoding], dict[str, z3.BoolRef]] | None = None,
                 *, deadline: Deadline | None = None) -> None:
        """``deadline``: raise :class:`~kvspec.engines.explicit.OutOfTime` when it passes
        during the encoding (checked between action instances)."""
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r}")
        self.system = system
        self.types: list[ValueType] = system.slot_types()
        poll = deadline.check if deadline is not None else _no_deadline
        if _raw is None:
            self.int_cur: Vars = system.state_vars()
            raw = []
            for inst in system.instances:
                poll("encoding")
                raw.append(self._encode(inst))
            raw_bad = {p.name: z3.simplify(system.encode_bad(p, self.int_cur))
                       for p in system.properties}
        else:
            self.int_cur, raw, raw_bad = _raw
        self.width = len(self.int_cur)
        self.labels: list[str] = [str(v) for v in self.int_cur]
        self._raw = (self.int_cur, raw, raw_bad)
        self.encoding = encoding
        self.bv: BitVecImage | None = None
        if encoding == "bv":
            poll("encoding")
            try:
                self.bv = self._bit_vectors(raw, list(raw_bad.values()), poll)
            except EncodingOverflow:
                self.encoding = "int"
        self.cur: Vars = self._vars("")
        self.nxt: Vars = self._vars("'")
        self.steps: list[InstanceEncoding] = []
        for r in raw:
            poll("encoding")
            self.steps.append(InstanceEncoding(r.inst, self.enc(r.enabled),
                                               {i: self.enc(e) for i, e in r.updates.items()},
                                               [(self.enc(c), m) for c, m in r.errors]))
        self.int_steps = raw
        self._bad = {name: self.enc(b) for name, b in raw_bad.items()}
        self.writers: list[list[int]] = [[] for _ in range(self.width)]
        for j, step in enumerate(self.steps):
            for slot in step.updates:
                self.writers[slot].append(j)
        self._frames: dict[int, Vars] = {}
        self._template: list[z3.BoolRef] | None = None
        self._template_sel: list[z3.BoolRef] = []
        self.symmetry = symmetry
        self._posts: dict[int, Renaming] = {}

    def twin(self, encoding: str, symmetry: tuple[bool, bool] = (False, False)
             ) -> TransitionSystem:
        """The same system in another encoding, without re-running the encoder."""
        return TransitionSystem(self.system, encoding, symmetry, self._raw)

    # -- building ----------------------------------------------------------------------
    def _encode(self, inst: ActionInstance) -> InstanceEncoding:
        return encode_instance(self.system, inst, self.int_cur)[0]

    def _bit_vectors(self, raw: list[InstanceEncoding], extra: list[z3.BoolRef],
                     poll: Callable[[str], None]) -> BitVecImage:
        bounds: dict[str, tuple[int, int]] = {}
        for v, t in zip(self.int_cur, self.types):
            if t.kind != "bool":
                dom = t.domain()
                bounds[str(v)] = (min(dom), max(dom))
        terms: list[z3.ExprRef] = list(extra)
        for r in raw:
            terms.append(r.enabled)
            terms.extend(r.updates.values())
            terms.extend(c for c, _ in r.errors)
        probe = BitVecImage(bounds, 64)
        reach = max([1] + [max(abs(lb), abs(ub)) for lb, ub in bounds.values()])
        for k, term in enumerate(terms):
            if (k & 63) == 0:
                poll("encoding")
            reach = max(reach, probe.reach(term))
        # one spare bit: candidate invariants add counts and sums of their own
        image = BitVecImage(bounds, BitVecImage.needed_width(reach) + 1)
        image._iv = probe._iv
        for term in terms:
            image(term)
        return image

    def _vars(self, suffix: str) -> Vars:
        if self.bv is None:
            return self.system.state_vars(suffix)
        return [z3.Bool(f"{name}{suffix}") if t.kind == "bool"
                else z3.BitVec(f"{name}{suffix}", self.bv.width)
                for name, t in zip(self.labels, self.types)]

    def enc(self, expr: z3.ExprRef) -> z3.ExprRef:
        """An integer term over ``int_cur`` in the solver's encoding over ``cur``."""
        return expr if self.bv is None else self.bv(expr)

    def value(self, slot: int, internal: Any) -> z3.ExprRef:
        t = self.types[slot]
        if t.kind == "bool" or self.bv is None:
            return z3_const(t, internal)
        return z3.BitVecVal(int(internal), self.bv.width)

    def solver(self) -> z3.Solver:
        """A fresh solver suited to the encoding."""
        return z3.SolverFor("QF_FD") if self.bv is not None else z3.Solver()

    # -- variables -------------------------------------------------------------------
    def frame(self, t: int) -> Vars:
        """The state variables of time step ``t`` (``phase[r0]@3``)."""
        vs = self._frames.get(t)
        if vs is None:
            vs = self._vars(f"@{t}")
            self._frames[t] = vs
        return vs

    def selectors(self, t: int) -> list[z3.BoolRef]:
        """One Boolean per action instance: "step t+1 runs this instance"."""
        return [z3.Bool(f"act:{step.inst.label()}@{t}") for step in self.steps]

    def rename(self, expr: z3.ExprRef, target: Sequence[z3.ExprRef],
               source: Sequence[z3.ExprRef] | None = None) -> z3.ExprRef:
        """``expr`` over ``source`` (default: ``cur``) moved to ``target``."""
        src = self.cur if source is None else source
        if target is src:
            return expr
        return z3.substitute(expr, *zip(src, target))

    # -- formulas ----------------------------------------------------------------------
    def init(self, vs: Sequence[z3.ExprRef]) -> z3.BoolRef:
        return z3.And(*[v == self.value(i, x) for i, (v, x) in
                        enumerate(zip(vs, self.system.initial))])

    def domain(self, vs: Sequence[z3.ExprRef]) -> list[z3.BoolRef]:
        out = []
        for v, t in zip(vs, self.types):
            if t.kind == "bool":
                continue
            if self.bv is None:
                c = domain_constraint(v, t)
                if not z3.is_true(c):
                    out.append(c)
            else:
                dom = t.domain()
                out.append(z3.And(v >= min(dom), v <= max(dom)))
        return out

    def bad(self, prop: Property, vs: Sequence[z3.ExprRef] | None = None) -> z3.BoolRef:
        """The states of ``vs`` (default ``cur``) that violate ``prop``."""
        base = self._bad[prop.name]
        return base if vs is None else self.rename(base, vs)

    def any_error(self, vs: Sequence[z3.ExprRef] | None = None) -> z3.BoolRef:
        """Some instance raises a model error when run from ``vs``."""
        errs = [step.error for step in self.steps if step.errors]
        if not errs:
            return z3.BoolVal(False)
        out = z3.Or(*errs)
        return out if vs is None else self.rename(out, vs)

    def trans_template(self) -> list[z3.BoolRef]:
        """The transition over ``cur``, ``nxt`` and the selectors of frame -1."""
        if self._template is not None:
            return self._template
        sel = [z3.Bool(f"act:{step.inst.label()}") for step in self.steps]
        out: list[z3.BoolRef] = [z3.Or(*sel)]
        if len(sel) > 1:
            out.append(z3.AtMost(*sel, 1))
        for b, step in zip(sel, self.steps):
            parts = [step.enabled] + [z3.Not(c) for c, _ in step.errors]
            parts += [self.nxt[i] == e for i, e in step.updates.items()]
            out.append(z3.Implies(b, z3.And(*parts)))
        for i in range(self.width):
            keep = self.nxt[i] == self.cur[i]
            ws = self.writers[i]
            out.append(keep if not ws else z3.Or(keep, *[sel[j] for j in ws]))
        out.extend(self.domain(self.nxt))
        out.extend(self._least_fresh(sel))
        self._template_sel = sel
        self._template = out
        return out

    def _fresh(self, dim: str, i: int) -> z3.BoolRef:
        """Id ``i`` of ``dim`` is untouched: its own slots hold their initial values and
        no reference slot names it. Two untouched ids are interchangeable."""
        parts: list[z3.BoolRef] = []
        for v in self.system.schema.vars:
            # its element (per-id arrays) or its line (two-dimensional arrays)
            own = [v.offset + k for k in v.slots_of(dim, i)]
            for slot in own:
                parts.append(self.cur[slot] == self.value(slot, self.system.initial[slot]))
            if v.type.ref_dim == dim:
                for slot in range(v.offset, v.offset + v.length):
                    parts.append(self.cur[slot] != self.value(slot, i))
        return z3.And(*parts) if parts else z3.BoolVal(True)

    def _least_fresh(self, sel: list[z3.BoolRef]) -> list[z3.BoolRef]:
        """Symmetry breaking for symmetric id spaces: a step may name an untouched id
        ``i`` only if id ``i - 1`` is touched or named by the same step. Any path can
        be renamed into one that obeys this (swap ``i`` and ``i - 1`` from that step
        on; the state is unchanged by the swap), with the same length and verdicts."""
        out: list[z3.BoolRef] = []
        for dim, on in ((REQUEST, self.symmetry[0]), (PAGE, self.symmetry[1])):
            if not on:
                continue
            fresh: dict[int, z3.BoolRef] = {}
            for b, step in zip(sel, self.steps):
                ids = {a for (_, t), a in zip(step.inst.action.params, step.inst.args)
                       if t.ref_dim == dim}
                for i in sorted(ids):
                    if i == 0 or i - 1 in ids:
                        continue
                    for k in (i, i - 1):
                        if k not in fresh:
                            fresh[k] = self._fresh(dim, k)
                    out.append(z3.Implies(b, z3.Not(z3.And(fresh[i], fresh[i - 1]))))
        return out

    def trans(self, t: int) -> list[z3.BoolRef]:
        """Constraints from frame ``t`` to frame ``t + 1``."""
        template = self.trans_template()
        pairs = list(zip(self.cur, self.frame(t))) + list(zip(self.nxt, self.frame(t + 1)))
        pairs += list(zip(self._template_sel, self.selectors(t)))
        whole = z3.substitute(z3.And(*template), *pairs)  # one call: pairs cross the FFI once
        return list(whole.children())

    def post(self, j: int, expr: z3.ExprRef) -> z3.ExprRef:
        """``expr`` (over ``cur``) evaluated after instance ``j``: substitute its updates."""
        ren = self._posts.get(j)
        if ren is None:
            ren = Renaming([(self.cur[i], e) for i, e in self.steps[j].updates.items()])
            self._posts[j] = ren
        return ren(expr)

    # -- decoding ------------------------------------------------------------------------
    def decode(self, slot: int, value: z3.ExprRef) -> Any:
        t = self.types[slot]
        if t.kind != "bool" and self.bv is not None:
            return value.as_signed_long()  # type: ignore[attr-defined]
        return from_z3(t, value)

    def state_of(self, model: z3.ModelRef, vs: Sequence[z3.ExprRef] | None = None) -> State:
        vs = self.cur if vs is None else vs
        return tuple(self.decode(i, model.eval(v, model_completion=True))
                     for i, v in enumerate(vs))

    def chosen(self, model: z3.ModelRef, t: int) -> ActionInstance:
        picks = [j for j, b in enumerate(self.selectors(t))
                 if z3.is_true(model.eval(b, model_completion=True))]
        if len(picks) != 1:
            raise InternalError(f"solver model picks {len(picks)} actions at step {t + 1}")
        return self.steps[picks[0]].inst

    def schedule(self, model: z3.ModelRef, depth: int) -> list[ActionInstance]:
        return [self.chosen(model, t) for t in range(depth)]

    def erring(self, model: z3.ModelRef, vs: Sequence[z3.ExprRef] | None = None
               ) -> tuple[ActionInstance, str] | None:
        """An instance whose model error holds in ``model`` at ``vs``, with the message."""
        vs = self.cur if vs is None else vs
        for step in self.steps:
            for cond, msg in step.errors:
                if z3.is_true(model.eval(self.rename(cond, vs), model_completion=True)):
                    return step.inst, msg
        return None


def replay_error(system: System, schedule: list[ActionInstance], engine: str) -> ModelError:
    """Re-execute a schedule whose last step must raise a model error; return that error."""
    state = system.initial
    for i, inst in enumerate(schedule, 1):
        try:
            if i == len(schedule):
                system.failed_invariants(state)  # an invariant that errs on the state reached
            res = system.step(state, inst)
        except ModelError as exc:
            if i != len(schedule):
                raise InternalError(f"{engine}: model error already at step {i} of "
                                    f"{len(schedule)}") from None
            path = ", ".join(x.label() for x in schedule)
            exc.message = f"{exc.message} (reachable in {len(schedule)} steps: {path})"
            return exc
        if res is None:
            raise InternalError(f"{engine}: step {i} {inst.label()} of a model-error path is not "
                                "enabled when re-executed concretely")
        state = res.state
    raise InternalError(f"{engine}: a solver-found model error does not happen when the path is "
                        "re-executed concretely")
