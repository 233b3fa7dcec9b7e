"""Which clauses of an all-sizes invariant each property needs, and the invariant cut
down to them.

Houdini (:mod:`kvspec.proofs.parametric.induction`) keeps every candidate that is
inductive, whether a property needs it or not. Here each query that proved the
invariant is asked again with every clause behind an assumption literal; the
solver's unsat core names the clauses that query used:

* the safety query of a property: the clauses the property follows from (its roots);
* each clause's consecution over each action: the clauses that preservation used;
* the model's error conditions: the clauses that exclude them (kept for every
  property).

A property needs the closure of its roots under "used by the consecution of". The
closure of every property's roots (with the error roots and the type clauses) is
inductive by construction — each clause in it is preserved assuming only clauses
in it — but nothing here is trusted: the caller re-checks the cut-down invariant
from scratch with :func:`~kvspec.proofs.parametric.induction.check_invariant` and
keeps the full one if that does not pass. A smaller invariant re-checks faster
(fewer consecution queries) and reads better.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from kvspec.proofs.parametric.generalise import QClause
from kvspec.proofs.parametric.induction import QUERY_TIMEOUT_S, transitions, type_clauses
from kvspec.proofs.parametric.model import ParamModel


@dataclass
class Needs:
    """``kept``: the clauses of the cut-down invariant (in their original order);
    ``by_property``: property -> the indices into ``kept`` it needs."""

    kept: list[QClause] = field(default_factory=list)
    by_property: dict[str, list[int]] = field(default_factory=dict)
    queries: int = 0


class _Guarded:
    """One solver per set of constraints, every clause behind an assumption literal."""

    def __init__(self, model: ParamModel, clauses: list[QClause], constraints: list[z3.BoolRef],
                 timeout: float) -> None:
        self.lits = [z3.Bool(f"kvspec.needs.{k}") for k in range(len(clauses))]
        self.index = {lit.get_id(): k for k, lit in enumerate(self.lits)}
        self.solver = z3.Solver()
        self.solver.set("timeout", max(1, int(timeout * 1000)))
        self.solver.set("mbqi", True)
        self.solver.add(*model.axioms)
        self.solver.add(*constraints)
        for lit, c in zip(self.lits, clauses):
            self.solver.add(z3.Implies(lit, c.formula))
        self.queries = 0

    def used(self, goal: z3.BoolRef) -> set[int] | None:
        """The clauses a proof of ``goal`` used; None when it is not proved."""
        self.queries += 1
        self.solver.push()
        self.solver.add(z3.Not(goal))
        r = self.solver.check(*self.lits)
        core = self.solver.unsat_core() if r == z3.unsat else None
        self.solver.pop()
        if core is None:
            return None
        return {self.index[lit.get_id()] for lit in core}


def find_needs(model: ParamModel, clauses: list[QClause], properties: list[str], *,
               timeout: float = QUERY_TIMEOUT_S, deadline: float | None = None
               ) -> Needs | None:
    """The clauses of ``clauses`` (an inductive invariant proving ``properties``) the
    properties need (module docstring); None when a query is not decided in time (keep
    the whole invariant then)."""
    types = type_clauses(model)
    typed = {c.formula.sexpr() for c in types}
    every = types + [c for c in clauses if c.formula.sexpr() not in typed]
    fixed = set(range(len(types)))  # the type clauses stay, as in every check
    out = Needs()
    steps = transitions(model)

    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() > deadline

    # roots: what each property, and the exclusion of every model error, follows from
    safety = _Guarded(model, every, [], timeout)
    roots: dict[str, set[int]] = {}
    for name in properties:
        used = safety.used(z3.Not(model.bad[name]))
        if used is None or out_of_time():
            return None
        roots[name] = used
    error_roots: set[int] = set()
    for cond, _msg in model.inv_errors:
        used = safety.used(z3.Not(cond))
        if used is None:
            return None
        error_roots |= used
    out.queries += safety.queries
    for t in steps:
        if not t.errors:
            continue
        g = _Guarded(model, every, list(t.param_ok), timeout)
        for cond, _msg in t.errors:
            used = g.used(z3.Not(cond))
            if used is None or out_of_time():
                return None
            error_roots |= used
        out.queries += g.queries
    # consecution: which clauses each clause's preservation used, over every action
    deps: dict[int, set[int]] = {}
    wanted = set().union(*roots.values(), error_roots, fixed)
    guarded = [(t, _Guarded(model, every, t.constraints, timeout)) for t in steps]
    queue = sorted(wanted)
    while queue:
        k = queue.pop()
        if k in deps:
            continue
        deps[k] = set()
        for t, g in guarded:
            post = t.post(every[k].formula)
            if post.eq(every[k].formula):
                continue
            used = g.used(post)
            if used is None or out_of_time():
                return None
            deps[k] |= used
        queue.extend(j for j in deps[k] if j not in deps)
    out.queries += sum(g.queries for _t, g in guarded)

    def closure(start_set: set[int]) -> set[int]:
        seen = set(start_set)
        todo = list(start_set)
        while todo:
            for j in deps.get(todo.pop(), ()):
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return seen

    keep = closure(wanted) - fixed
    order = [k for k in range(len(types), len(every)) if k in keep]
    position = {k: i for i, k in enumerate(order)}
    out.kept = [every[k] for k in order]
    out.by_property = {name: sorted(position[k] for k in closure(roots[name]) if k in position)
                       for name in properties}
    return out

