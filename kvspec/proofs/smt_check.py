"""Checking an invariant on an encoding of its own.

The encoding here is built directly from :meth:`System.encode_step` and
:meth:`System.encode_bad` over the plain integer state variables
(:meth:`System.state_vars`): no bit-vector image, no symmetry breaking and no
term rewriting shared with the engines that search for invariants
(:mod:`kvspec.engines.transition`). Every clause, quantified or not, takes part in
every check:

1. **initiation** — each clause holds in the initial state;
2. **properties** — the invariant (the conjunction of all clauses) implies
   ``not bad`` for each claimed property;
3. **model errors** — no action instance raises a model error from a state
   satisfying the invariant;
4. **consecution** — for each action instance, no state satisfying the invariant
   (and the variables' domains) steps to one violating a clause or leaving a
   variable's domain.

A clause that does not mention any slot an instance writes is unchanged by that
instance, so only the others are re-checked for it (their constants include the
ones under quantifiers). A solver ``unknown`` (a quantifier it cannot decide, a
timeout) in any query is a failed check, never a pass.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang.schema import State
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST
from kvspec.lang.system import ActionInstance, Property, System
from kvspec.proofs.clauses import Clause, term_constants, var_names, var_sorts
from kvspec.trace import InternalError, Trace, TraceStep

#: default limit for one solver query, in seconds
QUERY_TIMEOUT_S = 60.0


#: Python recursion limit while terms are built and walked: a count over 64 pages
#: inside a loop nests terms deeper than the default 1,000 frames allow
DEEP_TERMS_LIMIT = 100_000


@contextmanager
def deep_terms() -> Iterator[None]:
    """Raise the recursion limit for the duration of an encoding (restored after)."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, DEEP_TERMS_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


@dataclass
class CounterexampleToInduction:
    pre: State
    trace: Trace  # one step from ``pre``
    broken: list[str]  # the clauses false after the step


@dataclass
class InductionReport:
    """What :func:`check_clauses` found; ``ok`` only when every check passed."""

    clauses: list[str] = field(default_factory=list)  # the clauses checked
    properties: list[str] = field(default_factory=list)  # the properties checked
    instances: int = 0
    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cti: CounterexampleToInduction | None = None
    bad_state: tuple[State, str] | None = None
    undecided: bool = False  # some query came back ``unknown`` (a rejection, too)
    local_queries: int = 0  # consecution queries decided by the local premise alone

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class _Step:
    inst: ActionInstance
    enabled: z3.BoolRef
    error: z3.BoolRef
    errors: list[tuple[z3.BoolRef, str]]
    updates: dict[int, z3.ExprRef]  # slot -> next value, where it is not the slot itself
    #: the slots the symbolic interpreter recorded the step reading or writing: a
    #: superset of those its terms mention (tests/test_step_reads.py)
    reads: frozenset[int]


class Encoding:
    """Initial state, domains, steps and bad states over ``system.state_vars()``."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.cur: list[z3.ExprRef] = system.state_vars()
        self.types = system.slot_types()
        self.names = var_names(self.cur)
        self.slot = {name: i for i, name in enumerate(self.names)}
        self.values: list[list[int] | None] = [
            None if t.kind == "bool" else sorted({int(x) for x in t.domain()})
            for t in self.types]
        self._slot_domains: dict[int, z3.BoolRef | None] = {}
        self._ints: dict[int, z3.IntNumRef] = {}
        self.steps: list[_Step] = [self._step(inst) for inst in system.instances]

    def _step(self, inst: ActionInstance) -> _Step:
        enc = self.system.encode_step(inst, self.cur)
        if len(enc.next) != len(self.cur):
            raise InternalError(f"certificate check: {inst.label()} encodes {len(enc.next)} "
                                f"next-state values for {len(self.cur)} state variables")
        # the same term is the same node (Z3 shares terms): compare the addresses, not
        # by ``eq`` (a checked call per slot, for every slot of every instance)
        updates = {i: n for i, (c, n) in enumerate(zip(self.cur, enc.next))
                   if n.as_ast().value != c.as_ast().value}
        errors = list(enc.errors)
        error = z3.Or(*[c for c, _ in errors]) if errors else z3.BoolVal(False)
        return _Step(inst, enc.enabled, error, errors, updates, frozenset(enc.reads))

    def value(self, slot: int, internal: Any) -> z3.ExprRef:
        if self.types[slot].kind == "bool":
            return z3.BoolVal(bool(internal))
        return z3.IntVal(int(internal))

    def in_domain(self, slot: int, term: z3.ExprRef) -> z3.BoolRef | None:
        """``term`` is a value of slot ``slot``'s type (None: every value is)."""
        values = self.values[slot]
        if values is None:
            return None
        if not values:
            return z3.BoolVal(False)
        ctx = term.ctx
        ref, t = ctx.ref(), term.as_ast()
        if values == list(range(values[0], values[-1] + 1)):
            # direct C calls: the z3 wrappers' checks cost more than the terms, for
            # every updated slot of every action instance
            return mk_and([z3.BoolRef(z3.Z3_mk_ge(ref, t, self._int(values[0], ctx)), ctx),
                           z3.BoolRef(z3.Z3_mk_le(ref, t, self._int(values[-1], ctx)), ctx)])
        return z3.Or(*[term == x for x in values])

    def _int(self, value: int, ctx: z3.Context) -> z3.Ast:
        """The integer literal ``value`` (kept: built once)."""
        lit = self._ints.get(value)
        if lit is None:
            lit = self._ints[value] = z3.IntVal(value, ctx)
        return lit.as_ast()

    def slot_domain(self, slot: int) -> z3.BoolRef | None:
        """:meth:`in_domain` of the slot's own variable (built once)."""
        if slot not in self._slot_domains:
            self._slot_domains[slot] = self.in_domain(slot, self.cur[slot])
        return self._slot_domains[slot]

    def domains(self, slots: Iterable[int]) -> list[z3.BoolRef]:
        """The domain constraints of ``slots`` (those whose type is not every value)."""
        return [d for i in slots for d in [self.slot_domain(i)] if d is not None]

    def leaving_domain(self, updates: dict[int, z3.ExprRef]) -> list[z3.BoolRef]:
        """For each update whose value may leave its slot's type: the condition that
        it does."""
        out = []
        for i, e in updates.items():
            dom = self.in_domain(i, e)
            if dom is not None:
                out.append(z3.Not(dom))
        return out

    def value_in_domain(self, slot: int, internal: Any) -> bool:
        values = self.values[slot]
        return values is None or int(internal) in values

    def domain(self) -> list[z3.BoolRef]:
        return self.domains(range(len(self.cur)))

    def state_of(self, model: z3.ModelRef) -> State:
        out: list[Any] = []
        for i, v in enumerate(self.cur):
            val = model.eval(v, model_completion=True)
            out.append(z3.is_true(val) if self.types[i].kind == "bool" else val.as_long())
        return tuple(out)

    def bad(self, prop: Property) -> z3.BoolRef:
        return self.system.encode_bad(prop, self.cur)


class _Evaluator:
    """Clauses on concrete states (a solver decides the quantified ones)."""

    def __init__(self, enc: Encoding, clauses: list[Clause], timeout_ms: int) -> None:
        self.enc = enc
        self.clauses = clauses
        self.solver = z3.Solver()
        self.solver.set("timeout", timeout_ms)

    def evaluate(self, state: State) -> tuple[list[int], list[int]]:
        """(indices of the clauses false on ``state``, indices undecided)."""
        at = _Substitution([(v, self.enc.value(i, x))
                            for i, (v, x) in enumerate(zip(self.enc.cur, state))])
        false, undecided = [], []
        for k, c in enumerate(self.clauses):
            closed = z3.simplify(at(c.formula))
            if z3.is_true(closed):
                continue
            if z3.is_false(closed):
                false.append(k)
                continue
            self.solver.push()
            self.solver.add(z3.Not(closed))
            res = self.solver.check()
            self.solver.pop()
            if res == z3.sat:
                false.append(k)
            elif res != z3.unsat:
                undecided.append(k)
        return false, undecided


def check_clauses(system: System, clauses: list[Clause], properties: list[Property], *,
                  timeout: float = QUERY_TIMEOUT_S) -> InductionReport:
    """Checks 1–4 of the module docstring for the conjunction of ``clauses``."""
    report = InductionReport(clauses=[c.describe(60) for c in clauses],
                             properties=[p.name for p in properties])
    with deep_terms():
        enc = Encoding(system)
    report.instances = len(enc.steps)
    timeout_ms = max(1, int(timeout * 1000))
    ev = _Evaluator(enc, clauses, timeout_ms)
    n = len(clauses)

    # 1. initiation
    false, undecided = ev.evaluate(system.initial)
    for k in false:
        report.problems.append("the initial state violates " + clauses[k].describe())
    for k in undecided:
        report.problems.append("the solver could not decide whether the initial state "
                               "satisfies " + clauses[k].describe())
    if undecided:
        report.undecided = True
        return report  # a clause that cannot be decided cannot be checked any further
    if not false:
        report.passed.append(f"initiation: the initial state satisfies all {n} clauses")

    solver = z3.Solver()
    if not any(c.quantified for c in clauses):
        # faster on these many small quantifier-free queries
        solver.set("arith.solver", 2)
        solver.set("relevancy", 0)
    solver.set("timeout", timeout_ms)
    assert_all(solver, enc.domain())
    assert_all(solver, [c.formula for c in clauses])

    def query(*extra: z3.BoolRef) -> tuple[z3.CheckSatResult, z3.ModelRef | None, str]:
        solver.push()
        assert_all(solver, extra)
        res = solver.check()
        model = solver.model() if res == z3.sat else None
        why = solver.reason_unknown() if res == z3.unknown else ""
        solver.pop()
        return res, model, why

    # 2. the claimed properties
    implied = []
    for p in properties:
        res, model, why = query(enc.bad(p))
        if res == z3.unsat:
            implied.append(p.name)
        elif model is not None:
            report.problems.append(f"the invariant does not exclude violations of {p.name}")
            if report.bad_state is None:
                report.bad_state = (enc.state_of(model), f"{p.name} is violated")
        else:
            report.problems.append(f"the solver could not decide whether the invariant "
                                   f"excludes violations of {p.name} ({why})")
            report.undecided = True
            return report
    if implied:
        report.passed.append("implication: the invariant excludes every violation of "
                             + ", ".join(implied))

    # 3. model errors
    erring = [s for s in enc.steps if s.errors]
    res, model, why = query(z3.Or(*[s.error for s in erring])) if erring else (z3.unsat, None, "")
    if model is not None:
        report.problems.append("the invariant does not rule out model errors")
        if report.bad_state is None:
            report.bad_state = (enc.state_of(model), _which_error(erring, model))
    elif res != z3.unsat:
        report.problems.append(f"the solver could not decide whether the invariant rules "
                               f"out model errors ({why})")
        report.undecided = True
        return report
    else:
        report.passed.append("the invariant rules out every model error")

    # 4. consecution, every action instance: first against the local premise (the
    # pieces of the invariant within the step's neighbourhood), then, only if that
    # is not enough, against the whole invariant (the query above's solver)
    known = var_sorts(enc.cur)
    pieces: list[z3.BoolRef] = []
    piece_slots: list[frozenset[int]] = []
    readers: dict[int, list[int]] = {}
    for c in clauses:
        for piece in c.pieces():
            # the parser records a clause's constants; a clause built otherwise has none
            # recorded, and is read here (else no step would be seen to touch it)
            names = (c.constants if c.constants and piece.eq(c.formula)
                     else term_constants(piece, known)[0])
            slots = frozenset(enc.slot[name] for name in names)
            for slot in slots:
                readers.setdefault(slot, []).append(len(pieces))
            pieces.append(piece)
            piece_slots.append(slots)
    local = _LocalPremise(enc, pieces, piece_slots, timeout_ms)
    negated: dict[int, z3.BoolRef] = {}  # piece -> its negation, built once
    for step in enc.steps:
        parts = sorted({j for slot in step.updates for j in readers.get(slot, ())})
        post = _Substitution([(enc.cur[i], e) for i, e in step.updates.items()])
        for j in parts:
            if j not in negated:
                negated[j] = z3.Not(pieces[j])
        broken = [post(mk_or([negated[j] for j in parts]))] if parts else []
        broken += enc.leaving_domain(step.updates)
        if not broken:
            continue
        goal = [step.enabled, z3.Not(step.error), z3.Or(*broken)]
        if local.refutes(step, parts, goal):
            report.local_queries += 1
            continue
        res, model, why = query(*goal)
        if res == z3.unsat:
            continue
        if model is None:
            report.problems.append(f"consecution: the solver could not decide whether "
                                   f"{step.inst.label()} preserves the invariant ({why})")
            report.undecided = True
            return report
        cti, why = _cti(system, ev, enc.state_of(model), step.inst)
        if cti is None:
            report.problems.append(f"consecution: cannot check {step.inst.label()}: {why}")
            report.undecided = True
            return report
        report.cti = cti
        report.problems.append(f"consecution: the invariant is not inductive: "
                               f"{step.inst.label()} breaks it")
        return report
    report.passed.append(f"consecution: the invariant is inductive, all {n} clauses are "
                         f"preserved by each of the "
                         f"{len(enc.steps)} action instances")
    return report


class _LocalPremise:
    """Consecution of one action instance against part of the invariant.

    The premise of a consecution query may be weakened soundly: if ``P ∧ T → Inv'``
    is valid for a conjunction ``P`` of some of the invariant's pieces, it is valid
    for the whole invariant. The part taken is the step's *neighbourhood*: every
    piece whose slots all lie in the slots the step reads or writes, the slots of
    the pieces it may break, and the slots not indexed by a page (scalars and
    per-request variables: few, shared by every step). At R requests and P pages a
    step touching one page so takes O(R) pieces instead of O(R·P), and the whole
    check grows about linearly with the number of instances. When the local
    premise does not refute the query (``sat`` or ``unknown``), the caller asks
    again with the whole invariant, so the check is as complete as before."""

    def __init__(self, enc: Encoding, pieces: list[z3.BoolRef],
                 piece_slots: list[frozenset[int]], timeout_ms: int) -> None:
        self.enc = enc
        self.pieces = pieces
        self.piece_slots = piece_slots
        self.timeout_ms = timeout_ms
        schema = enc.system.schema
        self.shared: set[int] = set()
        for v in schema.vars:
            if v.dim not in (PAGE, PAGE_BY_REQUEST):
                self.shared.update(range(v.offset, v.offset + v.length))

    def refutes(self, step: _Step, parts: list[int], goal: list[z3.BoolRef]) -> bool:
        vocab = set(self.shared) | step.reads  # every slot the step's terms mention
        for j in parts:
            vocab |= self.piece_slots[j]
        premise = [p for p, slots in zip(self.pieces, self.piece_slots) if slots <= vocab]
        if len(premise) == len(self.pieces):
            return False  # the whole invariant: the caller's query is the same one
        solver = z3.Solver()
        solver.set("timeout", self.timeout_ms)
        assert_all(solver, self.enc.domains(sorted(vocab)))
        assert_all(solver, premise)
        assert_all(solver, goal)
        return solver.check() == z3.unsat


# The z3 Python wrappers check sorts pair by pair; on the hot paths (thousands of
# clause instances and renamings per proof check) the direct C calls are several times
# cheaper.

def mk_or(terms: Sequence[z3.BoolRef]) -> z3.BoolRef:
    """``z3.Or(*terms)`` (``False`` for none, the term itself for one)."""
    return _connective(z3.Z3_mk_or, False, terms)


def mk_and(terms: Sequence[z3.BoolRef]) -> z3.BoolRef:
    """``z3.And(*terms)`` (``True`` for none, the term itself for one)."""
    return _connective(z3.Z3_mk_and, True, terms)


def _connective(make: Any, unit: bool, terms: Sequence[z3.BoolRef]) -> z3.BoolRef:
    if not terms:
        return z3.BoolVal(unit)
    if len(terms) == 1:
        return terms[0]
    ctx = terms[0].ctx
    arr = (z3.Ast * len(terms))(*[t.as_ast() for t in terms])
    return z3.BoolRef(make(ctx.ref(), len(terms), arr), ctx)


def assert_all(solver: z3.Solver, terms: Iterable[z3.BoolRef]) -> None:
    """``solver.add(*terms)`` with one C call per term (``add`` checks and converts each
    term in Python first, which costs more than the solver's own work on thousands of
    small clauses)."""
    ref, sref = solver.ctx.ref(), solver.solver
    for t in terms:
        z3.Z3_solver_assert(ref, sref, t.as_ast())


class _Substitution:
    """``expr`` with a step's updates substituted (one C call per term)."""

    def __init__(self, pairs: list[tuple[z3.ExprRef, z3.ExprRef]]) -> None:
        self.keep = pairs
        self.n = len(pairs)
        self.src = (z3.Ast * self.n)(*[a.as_ast() for a, _ in pairs])
        self.dst = (z3.Ast * self.n)(*[b.as_ast() for _, b in pairs])

    def __call__(self, expr: z3.ExprRef) -> z3.ExprRef:
        if self.n == 0:
            return expr
        ctx = expr.ctx
        return z3.BoolRef(z3.Z3_substitute(ctx.ref(), expr.as_ast(), self.n, self.src,
                                           self.dst), ctx)


def _which_error(steps: list[_Step], model: z3.ModelRef) -> str:
    for s in steps:
        for cond, msg in s.errors:
            if z3.is_true(model.eval(cond, model_completion=True)):
                return f"{s.inst.label()} raises a model error ({msg})"
    return "an action raises a model error"


def cti_trace(system: System, pre: State, inst: ActionInstance) -> Trace:
    """A one-step trace from ``pre`` (re-executed concretely)."""
    from kvspec.lang.errors import ModelError

    try:
        res = system.step(pre, inst)
    except ModelError as exc:
        raise InternalError(f"certificate check: {inst.label()} raises a model error when "
                            f"re-executed concretely ({exc}), but not symbolically") from None
    if res is None:
        raise InternalError(f"certificate check: {inst.label()} is enabled symbolically but "
                            "not concretely")
    trace = Trace(system, "inductiveness", pre)
    trace.steps.append(TraceStep(1, inst, res.events, res.state,
                                 system.schema.diff(pre, res.state)))
    return trace


def _cti(system: System, ev: _Evaluator, pre: State, inst: ActionInstance
         ) -> tuple[CounterexampleToInduction | None, str]:
    """The counterexample to induction the solver found, re-executed concretely; or
    None and the reason when the clauses cannot be decided on its states."""
    false, undecided = ev.evaluate(pre)
    if false:
        raise InternalError("certificate check: the solver's pre-state does not satisfy the "
                            "invariant when evaluated concretely")
    if undecided:
        return None, ("the solver could not decide on a concrete state: "
                      + ev.clauses[undecided[0]].describe())
    trace = cti_trace(system, pre, inst)
    post = trace.steps[0].state
    broken, undecided = ev.evaluate(post)
    if undecided and not broken:
        return None, ("the solver could not decide on a concrete state: "
                      + ev.clauses[undecided[0]].describe())
    labels = [ev.clauses[k].describe() for k in broken]
    if not labels:
        labels = [f"{ev.enc.names[i]} leaves its domain" for i, x in enumerate(post)
                  if not ev.enc.value_in_domain(i, x)]
        if not labels:
            raise InternalError("certificate check: a counterexample to induction does not "
                                "break the invariant when re-executed concretely")
    return CounterexampleToInduction(pre, trace, labels), ""
