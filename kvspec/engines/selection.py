"""Counterexample-guided selection of an inductive invariant among candidate
clauses (a lazy Houdini), checked on one action instance per symmetry orbit.

The candidates come from :mod:`kvspec.engines.inference`; counterexamples that no
candidate excludes ask :mod:`kvspec.engines.proposals` for new ones.
"""
from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.engines.inference import Atom, StateTable, Template, TemplateEvaluator
from kvspec.engines.transition import check_sat, mk_and, mk_or
from kvspec.lang.schema import Schema, State
from kvspec.proofs.orbits import representatives as representative_instances


# -- Houdini at the target size ---------------------------------------------------------------

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
        self.size = [clause_size(t) for t in templates]
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

    def _broken_posts(self, j: int) -> list[z3.BoolRef]:
        """Per chosen clause instance that action instance ``j`` may change: its negation
        after the step (cached: the selection asks again after every counterexample)."""
        written = set(self.ts.steps[j].updates)
        out = []
        for k in self.chosen:
            for n, (term, slots) in enumerate(self.terms[k]):
                if slots & written:
                    key = (j, k, n)
                    post = self._post.get(key)
                    if post is None:
                        post = z3.Not(self.ts.post(j, term))
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
        return support_closure(self.support, [root], set(self.chosen))

    def _find_cti(self, errors_goal: bool) -> tuple[State, State | None] | None:
        ts = self.ts
        errs = ts.any_error()
        if errors_goal and not z3.is_false(errs) and self._check(errs) == z3.sat:
            return self._state(), None
        for j in self.reps:
            broken = self._broken_posts(j)
            if not broken:
                continue
            step = ts.steps[j]
            goal = mk_and([step.enabled, z3.Not(step.error), mk_or(broken)])
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
                    related |= {a.var, a.other, a.plus}
        new = propose(self.sample, self.schema, pre, related, set(self.templates))
        if not new:
            return None
        first = len(self.templates)
        self.templates.extend(new)
        self.size.extend(clause_size(t) for t in new)
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


def clause_size(t: Template) -> int:
    """How complex a candidate is; the selection picks the simplest first: fewer
    literals, fewer quantified ids. A count (a sum over every page) compared with a
    variable costs as much as three more literals, a sum of two counts or a count
    compared with a constant as five: they are picked only when nothing simpler
    excludes a counterexample (and ``--engine all-sizes`` cannot generalise them)."""
    return (len(t.literals) * 4 + len(t.ctx)
            + sum(12 + 8 * bool(a.plus or not a.other) for a, _ in t.literals if a.counts))


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


def support_closure(support: Mapping[Any, Iterable[Any]], roots: list[Any],
                    present: Container[Any]) -> list[Any]:
    """``roots`` and what was added to support them (``support``: a clause or goal ->
    the clauses added for it), transitively, keeping only what is ``present``; in
    discovery order."""
    out = [r for r in roots if r in present]
    seen = set(out)
    stack = list(roots)
    while stack:
        for k in sorted(support.get(stack.pop(), ())):
            if k not in seen and k in present:
                seen.add(k)
                out.append(k)
                stack.append(k)
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
