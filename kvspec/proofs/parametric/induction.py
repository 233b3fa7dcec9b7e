"""Checking a quantified invariant for every number of requests and pages.

The invariant is a conjunction of clauses over the parametric state of
:mod:`kvspec.proofs.parametric.model` (requests and pages as uninterpreted
sorts). It proves its properties for every size when

* **initiation**: every clause holds in the initial state;
* **consecution**: for every action, from any state satisfying all clauses, with
  any ids and parameter values, the step (when enabled) leads to a state
  satisfying every clause;
* **safety**: no state satisfying the clauses is a bad state of a claimed
  property, and no step from one hits a model error.

The invariant always includes the *type clauses* (every int and enum within its
range, non-optional references not ``None``): counting quantifiers are expanded
over those ranges, so they must be proved, not assumed.

Queries are quantified (EPR where the model is, :mod:`~kvspec.proofs.parametric.model`),
solved by Z3 with model-based quantifier instantiation and a timeout per query. A
query that comes back ``unknown`` is never a success: in the Houdini search the
clause is dropped, in a final check the invariant is not accepted.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang.declare import SCALAR
from kvspec.proofs.parametric.values import var_dims
from kvspec.proofs.parametric.generalise import QClause, quantify
from kvspec.proofs.parametric.model import ParamModel, make_symbols

#: seconds per solver query
QUERY_TIMEOUT_S = 20.0


def type_clauses(model: ParamModel) -> list[QClause]:
    """The ranges of the state's ints and enums, and non-optional references set."""
    out: list[QClause] = []
    for v in model.vars:
        t = v.type
        if t.kind == "bool" or (t.kind == "ref" and t.optional):
            continue
        sym = model.symbols[v.name]
        xs = [model.sorts.fresh(d, d[0]) for d in var_dims(v)]
        term = sym(*xs) if xs else sym
        if t.kind == "ref":
            body = model.sorts.real(term)
            text = "is an id"
        elif v.name in model.symbolic:
            lo, hi = model.symbolic[v.name]
            body = z3.And(term >= lo, term <= hi)
            text = f"in {lo}..{hi}"
        else:
            dom = t.domain()
            body = z3.And(term >= min(dom), term <= max(dom))
            text = f"in {min(dom)}..{max(dom)}"
        idx = ", ".join(d[0] for d in var_dims(v))
        name = f"{v.name}[{idx}]" if idx else v.name
        prefix = f"for all {idx}: " if idx else ""
        out.append(QClause(quantify(model.sorts, xs, body), f"type: {prefix}{name} {text}"))
    return out


@dataclass
class Transition:
    """One action's step, as constraints and a renaming of clauses onto its post-state."""

    name: str
    constraints: list[z3.BoolRef]
    scalar_subst: list[tuple[z3.ExprRef, z3.ExprRef]]
    fun_subst: list[tuple[z3.FuncDeclRef, z3.ExprRef]]
    errors: list[tuple[z3.BoolRef, str]]
    param_ok: list[z3.BoolRef]

    def post(self, f: z3.BoolRef) -> z3.BoolRef:
        if self.fun_subst:
            f = z3.substitute_funs(f, *self.fun_subst)
        if self.scalar_subst:
            f = z3.substitute(f, *self.scalar_subst)
        return f


def _renaming(model: ParamModel, view: dict[str, Any], suffix: str
              ) -> tuple[list[z3.BoolRef], list[Any], list[Any]]:
    """Axioms defining the variables ``view`` changes, and the substitutions that read a
    clause over the pre-state symbols on ``view``."""
    pre = model.pre_view()
    post_syms = make_symbols(model.sorts, model.vars, suffix)
    axioms: list[z3.BoolRef] = []
    scal: list[tuple[z3.ExprRef, z3.ExprRef]] = []
    funs: list[tuple[z3.FuncDeclRef, z3.ExprRef]] = []
    for v in model.vars:
        new = view[v.name]
        if new is pre[v.name]:
            continue
        if v.dim == SCALAR:
            if not new.eq(model.symbols[v.name]):
                scal.append((model.symbols[v.name], new))
            continue
        dims = var_dims(v)
        xs = [model.sorts.fresh(d, "a") for d in dims]
        body = new(*xs)
        g = post_syms[v.name]
        axioms.append(z3.ForAll(xs, g(*xs) == body))
        funs.append((model.symbols[v.name],
                     g(*[z3.Var(i, model.sorts.sort[d]) for i, d in enumerate(dims)])))
    return axioms, scal, funs


def transitions(model: ParamModel) -> list[Transition]:
    out = []
    for k, (name, step) in enumerate(model.steps):
        axioms, scal, funs = _renaming(model, step.post, f"'{k}")
        out.append(Transition(name, [step.enabled] + step.param_ok + axioms, scal, funs,
                              step.errors, step.param_ok))
    return out


def initial(model: ParamModel) -> Transition:
    axioms, scal, funs = _renaming(model, model.init, "'init")
    return Transition("initial state", axioms, scal, funs, [], [])


def _solver(timeout: float, model: ParamModel) -> z3.Solver:
    s = z3.Solver()
    s.set("timeout", max(1, int(timeout * 1000)))
    s.set("mbqi", True)
    s.add(*model.axioms)  # what holds of the size symbols at every size
    return s


@dataclass
class InductionResult:
    """What the check found; ``kept`` are the clauses of the inductive invariant."""

    kept: list[QClause] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    proved: list[str] = field(default_factory=list)
    unknown: int = 0
    queries: int = 0
    seconds: float = 0.0


def _holds(s: z3.Solver, goal: z3.BoolRef, res: InductionResult) -> z3.CheckSatResult:
    """Whether ``goal`` follows from what ``s`` holds: unsat of its negation."""
    res.queries += 1
    s.push()
    s.add(z3.Not(goal))
    r = s.check()
    s.pop()
    if r == z3.unknown:
        res.unknown += 1
    return r


def check_invariant(model: ParamModel, candidates: list[QClause], properties: list[str], *,
                    houdini: bool, timeout: float = QUERY_TIMEOUT_S,
                    deadline: float | None = None) -> InductionResult:
    """Check (``houdini=False``) or search (``houdini=True``: drop what is not inductive
    until the rest is) a quantified invariant; then decide which ``properties`` it
    proves. The type clauses are added to ``candidates`` and can never be dropped."""
    start = time.monotonic()
    res = InductionResult()
    types = type_clauses(model)
    required = {id(c) for c in types}
    clauses = types + list(candidates)
    init = initial(model)
    steps = transitions(model)

    def left() -> float:
        if deadline is None:
            return timeout
        return max(0.001, min(timeout, deadline - time.monotonic()))

    def arm(s: z3.Solver) -> None:
        """Bound the next query by what is left of the deadline (without one, the
        solver's own per-query timeout stands)."""
        if deadline is not None:
            s.set("timeout", max(1, int(left() * 1000)))

    def fail(c: QClause, why: str) -> bool:
        """Record that ``c`` is not inductive; False when the whole check fails."""
        if houdini and id(c) not in required:
            res.dropped.append(f"{c.label}: {why}")
            return True
        res.problems.append(f"{c.label}: {why}")
        return False

    alive = list(clauses)
    s = _solver(left(), model)
    s.add(*init.constraints)
    for c in list(alive):
        arm(s)
        r = _holds(s, init.post(c.formula), res)
        if r != z3.unsat:
            alive.remove(c)
            if not fail(c, "does not hold initially" if r == z3.sat
                        else "initiation undecided (solver unknown)"):
                return _finish(res, start)
    changed = True
    while changed:
        changed = False
        for t in steps:
            if deadline is not None and time.monotonic() > deadline:
                res.problems.append("timeout")
                return _finish(res, start)
            s = _solver(left(), model)
            s.add(*[c.formula for c in alive])
            s.add(*t.constraints)
            for c in list(alive):
                post = t.post(c.formula)
                if post.eq(c.formula):
                    continue  # the action leaves every symbol of the clause as it was
                arm(s)
                r = _holds(s, post, res)
                if r == z3.unsat:
                    continue
                # not preserved even from every clause still alive: not from fewer either
                # (the solver still assumes the clauses dropped in this pass, so what
                # passes here is only decided by a pass that drops nothing)
                alive.remove(c)
                changed = True
                if not fail(c, f"not preserved by {t.name}" if r == z3.sat
                            else f"consecution over {t.name} undecided (solver unknown)"):
                    return _finish(res, start)
    res.kept = list(alive)
    inv = [c.formula for c in alive]
    errors_ok = True
    for t in steps:
        if not t.errors:
            continue
        s = _solver(left(), model)
        s.add(*inv)
        s.add(*t.param_ok)
        for cond, msg in t.errors:
            arm(s)
            r = _holds(s, z3.Not(cond), res)
            if r != z3.unsat:
                errors_ok = False
                res.problems.append(f"a model error may be reachable: {msg}"
                                    + ("" if r == z3.sat else " (solver unknown)"))
    if model.inv_errors:
        s = _solver(left(), model)
        s.add(*inv)
        for cond, msg in model.inv_errors:
            r = _holds(s, z3.Not(cond), res)
            if r != z3.unsat:
                errors_ok = False
                res.problems.append(f"a model error may be reachable: {msg}")
    if errors_ok:
        s = _solver(left(), model)
        s.add(*inv)
        for name in properties:
            arm(s)
            r = _holds(s, z3.Not(model.bad[name]), res)
            if r == z3.unsat:
                res.proved.append(name)
            elif not houdini:
                res.problems.append(f"the invariant does not exclude violations of {name}"
                                    + ("" if r == z3.sat else " (solver unknown)"))
    return _finish(res, start)


def _finish(res: InductionResult, start: float) -> InductionResult:
    res.seconds = time.monotonic() - start
    return res
