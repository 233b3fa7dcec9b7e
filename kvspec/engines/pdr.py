"""Unbounded proofs: inferred inductive invariants, completed by Z3's Spacer (IC3/PDR).

1. **Inference** (:mod:`kvspec.engines.inference`): candidate clauses from
   templates over the per-request and per-page variables, true on every
   reachable state of a small configuration, are selected counterexample-guided
   into an inductive invariant — first at the small size, then at the target size
   starting from that selection (quantified clauses carry over between sizes).
   At the target size only one action instance per symmetry orbit is encoded
   (:func:`representatives_view`); when the selection proves every property, the
   whole transition system is never built and no BMC runs (the certificate check
   still covers every instance). Otherwise bounded model checking up to
   ``quick_depth`` looks for shallow counterexamples of what is left.
   Before that, at sizes above the small one, the small size's clauses are tried
   as orbit representatives (:mod:`kvspec.engines.orbit_route`), checked one orbit
   of action instances at a time (:mod:`kvspec.proofs.orbits`); when they prove
   every property, nothing else runs.
2. **Spacer** for whatever the candidates cannot support: the model × monitors as
   constrained Horn clauses (``Inv(s) ← init(s)``, ``Inv(s') ← Inv(s) ∧ H(s) ∧
   T(s, s')``, ``false ← Inv(s) ∧ bad(s)``), strengthened by the inductive part
   ``H`` the inference found. Spacer either finds an invariant (``H ∧`` its
   lemmas), or the bad states are reachable — then bounded model checking, depth
   by depth, produces a shortest counterexample that is re-executed concretely.
3. **Every invariant is re-checked** by the certificate checker on the integer
   encoding and every action instance before PROVED is said; with ``save_proof``
   the certificate is written to ``proofs/``. A check that fails is a bug in
   kvspec (InternalError), never a silent pass.

Timeouts and solver give-ups are UNKNOWN. Why inference first: a direct Spacer run
on ``patched`` at (2, 4) took minutes; inference + selection proves it in seconds
and the invariant reads like the design (``docs/proofs.md`` has the numbers).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3

from kvspec.engines.bmc import Deadline, Search
from kvspec.engines.explicit import OutOfTime, check_count, check_timeout, time_limit
from kvspec.engines.inference import (
    StateTable,
    Template,
    enumerate_candidates,
    is_small,
    sample_outcome,
)
from kvspec.engines.selection import (
    ERRORS_GOAL,
    InferenceTimeout,
    Selection,
    Strengthener,
    goal_templates,
)
from kvspec.engines.orbit_route import (
    OrbitProof,
    OrbitProposals,
    orbit_houdini,
    representatives_by_template,
    without_edge_clauses,
)
from kvspec.engines.spacer import spacer
from kvspec.engines.transition import (
    TransitionSystem,
    check_sat,
    mk_and,
    mk_or,
    python_handles_ctrl_c,
)
from kvspec.lang.errors import ModelError
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import Property, System, compiled_again, settable_sizes
from kvspec.proofs.certificate import Invariant, verify_invariant, write_certificate
from kvspec.proofs.orbits import representatives_view, wider_symmetry
from kvspec.proofs.smt_check import deep_terms
from kvspec.trace import InternalError
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

ProgressFn = Callable[[int, int, float, str], None]  # states, depth, seconds, stage

#: Z3 resource limit of one query of the first BMC pass (see :mod:`kvspec.engines.auto`)
QUICK_BMC_RLIMIT = 20_000_000


@dataclass
class Inferred:
    """What inference produced at the target size."""

    selection: Selection | None
    strengthener: Strengthener | None
    templates: list[Template] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def clauses(self) -> tuple[list[z3.BoolRef], list[str]]:
        if self.selection is None or self.strengthener is None:
            return [], []
        st = self.strengthener
        order = sorted(self.selection.chosen, key=lambda k: (
            (9, ()) if k >= len(st.templates) else (len(st.templates[k].ctx),
                                                    st.templates[k].ctx), st.size_of(k), k))
        pairs = [st.clause(k) for k in order]
        return [c for c, _ in pairs], [r for _, r in pairs]


@dataclass
class SmallSelection:
    """Candidates from a small configuration and the clauses selected there."""

    templates: list[Template]
    sample: StateTable | None
    seed: list[int]
    support: dict[int | str, set[int]]
    notes: dict[str, Any]
    ok: bool = True
    needs: dict[str, list[int]] = field(default_factory=dict)  # goal -> clauses it needs
    #: at the target size itself, when its exploration decided every property: the
    #: violated properties and their shortest counterexamples' lengths (else None)
    shortest: dict[str, int] | None = None


def select_small(system: System, symmetric: tuple[bool, bool], deadline: Deadline,
                 names: list[str] | None = None, *, max_states: int | None = None
                 ) -> SmallSelection:
    """Sample a small configuration, enumerate candidates, and select an inductive
    subset there (nothing is selected when ``system`` is that small size itself)."""
    notes: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        small_schema, states, shortest = sample_outcome(
            system, max_states=min(30000, max_states or 30000), deadline=deadline)
    except ModelError:
        return SmallSelection([], None, [], {}, {"sample": "the small configuration raises a "
                                                           "model error"}, ok=False)
    sample = StateTable(small_schema, states)
    templates = enumerate_candidates(small_schema, sample)
    refuted = _violated_in(system, small_schema, states)
    if refuted:
        # no invariant of the small size excludes these: selecting clauses for them
        # only costs time (the target size gets its own goals, and every proof is
        # re-checked there)
        names = [n for n in (names if names is not None else
                             [p.name for p in system.properties]) if n not in refuted]
        notes["violated_at_small_size"] = sorted(refuted)
    notes.update(sample_states=len(states), candidates=len(templates),
                 sample_seconds=round(time.monotonic() - t0, 2))
    out = SmallSelection(templates, sample, [], {}, notes)
    if dict(small_schema.sizes) == dict(system.sizes):
        out.shortest = shortest
    else:
        small = compiled_again(system, settable_sizes(system.loaded, small_schema.sizes))
        small_ts = TransitionSystem(small, "bv")
        small_sym = (symmetric[0] and small_schema.requests > 1,
                     symmetric[1] and small_schema.pages > 1)
        t1 = time.monotonic()
        try:
            small_st = Strengthener(small_ts, templates, goal_templates(small, templates, names),
                                    small_sym, deadline, sample=sample)
            first = small_st.run()
        except InferenceTimeout:
            out.ok = False
            return out
        out.seed = first.chosen
        out.support = small_st.support
        out.needs = first.needs
        notes.update(small_selection=len(out.seed), small_seconds=round(time.monotonic() - t1, 2))
    return out


def _violated_in(system: System, small_schema: Any, states: list[Any]) -> set[str]:
    """The monitor properties some sampled state of the small size violates."""
    offsets = {v.name: v.offset for v in small_schema.vars if v.owner == "flag"}
    out = set()
    for p in system.properties:
        if p.flag is None:
            continue
        name = next(v.name for v in system.schema.vars if v.offset == p.flag
                    and v.owner == "flag")
        at = offsets.get(name)
        if at is not None and any(st[at] == 1 for st in states):
            out.add(p.name)
    return out


def infer(system: System, ts: TransitionSystem, symmetric: tuple[bool, bool],
          deadline: Deadline, names: list[str] | None = None, *,
          max_states: int | None = None, small: SmallSelection | None = None) -> Inferred:
    """Candidates from a small configuration, selected at the small and the target size.
    ``max_states`` bounds the exploration of the small configuration."""
    if small is None:
        small = select_small(system, symmetric, deadline, names, max_states=max_states)
    notes = dict(small.notes)
    if not small.ok:
        return Inferred(None, None, small.templates, notes)
    templates = small.templates
    t2 = time.monotonic()
    refuted = set(notes.get("violated_at_small_size", ()))
    if names is None:
        names = [p.name for p in system.properties]
    # a property some state of the small size violates is, as a rule, violated here too:
    # its goal would only make the selection chase counterexamples no clause excludes
    # (BMC looks for its counterexample; Spacer decides it if there is none)
    names = [n for n in names if n not in refuted]
    goals = goal_templates(system, templates, names)
    strengthener = Strengthener(ts, templates, goals, symmetric, deadline, seed=small.seed,
                                support=small.support, sample=small.sample)
    try:
        selection = strengthener.run()
    except InferenceTimeout:
        return Inferred(None, None, templates, notes)
    notes.update(proposed=strengthener.proposed, candidates=len(strengthener.templates))
    notes.update(selection=len(selection.chosen), queries=selection.queries,
                 dropped=selection.dropped, select_seconds=round(time.monotonic() - t2, 2))
    notes["needs"] = {goal: [strengthener.clause(k)[1] for k in ks]
                      for goal, ks in selection.needs.items()}
    return Inferred(selection, strengthener, templates, notes)


def orbit_symmetry(system: System, symmetric: tuple[bool, bool], enabled: bool
                   ) -> tuple[bool, bool]:
    """The id spaces the orbit route renames: those the model treats interchangeably
    (``symmetric``), and those it does in every action but some (their instances are
    then checked one by one: :func:`kvspec.proofs.orbits.unrenamed_actions`)."""
    if not enabled:
        return symmetric
    return wider_symmetry(system, symmetric) or symmetric


def orbit_route(system: System, small: SmallSelection, symmetric: tuple[bool, bool],
                pending: list[Property], deadline: Deadline, *, partial: bool = False,
                wider: tuple[bool, bool] | None = None) -> OrbitProof | None:
    """The small size's clauses at ``system``'s size, checked one orbit at a time
    (:mod:`kvspec.engines.orbit_route`); None when that does not prove every one of
    ``pending`` (the other routes then start afresh) — with ``partial``, None only
    when it proves none of them. ``wider``: the id spaces to rename first
    (:func:`orbit_symmetry`); ``symmetric`` when a clause cannot be renamed over them.
    The proof's ``dims`` say which were renamed."""
    for dims in dict.fromkeys([d for d in (wider, symmetric) if d is not None and any(d)]):
        notes: dict[str, Any] = {}
        proof = _orbit_route(system, small, dims, pending, deadline, partial, notes)
        if proof is not None or "not_applicable" not in notes:
            return proof
    return None


def _orbit_route(system: System, small: SmallSelection, symmetric: tuple[bool, bool],
                 pending: list[Property], deadline: Deadline, partial: bool,
                 notes: dict[str, Any]) -> OrbitProof | None:
    if not small.ok or not small.seed:
        return None
    if partial:
        refuted = set(small.notes.get("violated_at_small_size", ()))
        pending = [p for p in pending if p.name not in refuted]
    goals = goal_templates(system, small.templates, [p.name for p in pending])
    if any(g.template is None for g in goals):
        return None  # a model invariant: its formula is not a template
    formulas, labels, origin = representatives_by_template(system, small.templates, small.seed,
                                                           symmetric)
    own = {g.name: small.templates[g.template].render(system.schema) for g in goals
           if g.template is not None}
    proposals = None if small.sample is None else OrbitProposals(
        system, small.sample, small.templates,
        {label: small.templates[k] for label, k in zip(labels, origin)}, symmetric)
    started = time.monotonic()
    proof = orbit_houdini(system, formulas, labels, pending, own, symmetric, deadline,
                          proposals, notes)
    if proof is None or not proof.proved:
        return None
    # the trial costs about one orbit check, as the proof's last round did: it runs only
    # when far more time is left than the proof took (the certificate check comes next,
    # and a deadline passing during the trial would lose the proof found)
    left = deadline.left()
    if proposals is not None and (left is None or left > 4 * (time.monotonic() - started) + 10):
        proof = without_edge_clauses(system, proof, proposals.origin, proposals.sample.schema,
                                     pending, own, symmetric, deadline)
    proof.dims = symmetric
    if not partial and set(proof.proved) != {p.name for p in pending}:
        return None
    # which clauses each property needs: those the small size's selection added for
    # it (every surviving representative of them), and what was proposed here for those
    present = set(proof.labels)
    by_template: dict[int, list[str]] = {}
    for label, k in zip(labels, origin):
        by_template.setdefault(k, []).append(label)
    needs: dict[str, list[str]] = {}
    for goal, ks in small.needs.items():
        roots = [label for k in ks for label in by_template.get(k, [])]
        if goal != ERRORS_GOAL:
            roots.insert(0, own.get(goal, ""))
        if proposals is not None:
            roots = proposals.needed(list(dict.fromkeys(roots + [goal])), present)
        needs[goal] = [label for label in dict.fromkeys(roots) if label in present]
    proof.notes["needs"] = needs
    return proof


def prove_by_orbits(system: System, names: list[str], *, deadline: Deadline, symmetry: bool,
                    save_proof: bool, proofs_dir: Path, max_states: int | None = None,
                    progress: ProgressFn | None = None
                    ) -> tuple[dict[str, Verdict], dict[str, Any], SmallSelection | None]:
    """Only the orbit route: the small size's clauses at ``system``'s size, checked one
    orbit at a time, for as many of ``names`` as they prove (re-checked, like every
    proof). Nothing of the size's whole transition system is built, so this is the
    cheap first try at large sizes (:mod:`kvspec.engines.auto`). Returns the PROVED
    verdicts, notes, and the small selection (for :func:`run_pdr` to reuse)."""
    verdicts: dict[str, Verdict] = {}
    extra: dict[str, Any] = {}
    with time_limit(deadline, "symmetry analysis"):
        report = analyse_symmetry(system, enabled=symmetry)
    symmetric = (report.requests, report.pages) if symmetry else (False, False)
    renamed = orbit_symmetry(system, symmetric, symmetry)
    if not any(renamed):
        return verdicts, {"not_applicable": "no symmetry"}, None
    if is_small(system):
        return verdicts, {"not_applicable": "already the small size"}, None
    pending = [p for p in system.properties if p.name in names]
    if progress is not None:
        progress(0, 0, deadline.elapsed(), "orbit proof")
    with time_limit(deadline, "invariant inference"), deep_terms():
        small = select_small(system, symmetric, deadline, [p.name for p in pending],
                             max_states=max_states)
        orbit = orbit_route(system, small, symmetric, pending, deadline, partial=True,
                            wider=renamed)
    if orbit is None:
        return verdicts, {"inference": small.notes, "proved": []}, small
    stopped = _prove_orbits(system, small, orbit, verdicts, extra, save_proof, proofs_dir,
                            deadline)
    if stopped:
        extra["stopped"] = stopped
    extra["proved"] = sorted(verdicts)
    return verdicts, extra, small


# -- IC3 over the finite encoding (measured against Spacer; see docs/proofs.md) ---------------

Cube = tuple[tuple[int, Any], ...]  # (slot, internal value) pairs


class IC3:
    """A textbook IC3/PDR over the bit-vector encoding: frames of clauses (negated
    cubes of slot values), relative-induction queries, cube generalization by unsat
    cores, clause propagation. ``strengthening`` (inductive clauses found by
    inference) constrains every state. No symmetry breaking: the invariant must hold
    for every transition."""

    def __init__(self, ts: TransitionSystem, strengthening: list[z3.BoolRef],
                 bad: z3.BoolRef, deadline: Deadline) -> None:
        self.ts = ts
        self.deadline = deadline
        self.bad = bad
        self.solver = ts.solver()
        s = self.solver
        # the transition sits behind a literal: a state without successors must still
        # count in the "is a bad state in this frame" queries
        self.step = z3.Bool("ic3!step")
        helper = mk_and([ts.enc(c) for c in strengthening])
        s.add(*ts.domain(ts.cur), helper)
        s.add(z3.Implies(self.step, mk_and([*ts.trans_template(), ts.rename(helper, ts.nxt)])))
        self.init_lit = z3.Bool("ic3!init")
        s.add(z3.Implies(self.init_lit, ts.init(ts.cur)))
        self.levels: list[list[Cube]] = [[]]  # lemmas (as blocked cubes) per level, 1-based
        self.acts: list[z3.BoolRef] = [self.init_lit]
        self._lits: dict[tuple[int, Any, bool], z3.BoolRef] = {}
        self.queries = 0

    # -- plumbing ----------------------------------------------------------------------
    def _lit(self, slot: int, value: Any, nxt: bool) -> z3.BoolRef:
        key = (slot, value, nxt)
        lit = self._lits.get(key)
        if lit is None:
            lit = z3.Bool(f"ic3!{'n' if nxt else 'c'}{slot}={value}")
            var = (self.ts.nxt if nxt else self.ts.cur)[slot]
            self.solver.add(lit == (var == self.ts.value(slot, value)))
            self._lits[key] = lit
        return lit

    def _frame(self, i: int) -> list[z3.BoolRef]:
        """Assumptions selecting frame i (lemmas of levels >= i; level 0 is init)."""
        if i == 0:
            return [self.init_lit]
        return self.acts[i:]

    def _check(self, *assumptions: z3.BoolRef) -> z3.CheckSatResult:
        if self.deadline.expired():
            raise InferenceTimeout()
        self.deadline.arm(self.solver)
        self.queries += 1
        res = check_sat(self.solver, *assumptions)
        if res == z3.unknown:
            raise InferenceTimeout()
        return res

    def _cube(self, vs: list[z3.ExprRef]) -> Cube:
        model = self.solver.model()
        return tuple((i, self.ts.decode(i, model.eval(v, model_completion=True)))
                     for i, v in enumerate(vs))

    def _add_level(self) -> None:
        self.acts.append(z3.Bool(f"ic3!F{len(self.acts)}"))
        self.levels.append([])

    def _block_clause(self, cube: Cube, level: int) -> None:
        clause = z3.Or(*[z3.Not(self._lit(i, v, False)) for i, v in cube])
        self.solver.add(z3.Implies(self.acts[level], clause))
        self.levels[level].append(cube)

    # -- the algorithm -------------------------------------------------------------------
    def run(self) -> tuple[str, int, list[Cube]]:
        """("safe", level, lemmas) or ("unsafe", depth bound, [])."""
        bad_lit = z3.Bool("ic3!bad")
        self.solver.add(z3.Implies(bad_lit, self.bad))
        if self._check(self.init_lit, bad_lit) == z3.sat:
            return "unsafe", 0, []
        self._add_level()
        k = 1
        while True:
            while self._check(bad_lit, *self._frame(k)) == z3.sat:
                if not self._block(self._cube(self.ts.cur), k):
                    return "unsafe", k, []
            self._add_level()
            fixed = self._propagate(k)
            if fixed is not None:
                lemmas = [c for lvl in self.levels[fixed:] for c in lvl]
                return "safe", fixed, lemmas
            k += 1

    def _block(self, cube: Cube, level: int) -> bool:
        queue: list[tuple[int, int, Cube]] = [(level, 0, cube)]
        n = 0
        while queue:
            queue.sort(key=lambda x: (x[0], x[1]))
            lvl, _, c = queue[0]
            if lvl == 0 or self._meets_init(c):  # reaches back to an initial state
                return False
            pred = self._predecessor(c, lvl)
            if pred is None:
                queue.pop(0)
                self._block_clause(self._generalize(c, lvl), lvl)
            else:
                n += 1
                queue.append((lvl - 1, n, pred))
        return True

    def _predecessor(self, cube: Cube, lvl: int) -> Cube | None:
        """A state of frame lvl-1 (outside ``cube``) stepping into ``cube``, or None."""
        nots = z3.Or(*[z3.Not(self._lit(i, v, False)) for i, v in cube])
        lit = z3.Bool(f"ic3!q{self.queries}")
        self.solver.add(z3.Implies(lit, nots))
        res = self._check(lit, self.step, *self._frame(lvl - 1),
                          *[self._lit(i, v, True) for i, v in cube])
        if res == z3.sat:
            return self._cube(self.ts.cur)
        core = {str(x) for x in self.solver.unsat_core()}
        self._core = core
        return None

    def _generalize(self, cube: Cube, lvl: int) -> Cube:
        core = self._core
        kept = tuple((i, v) for i, v in cube if str(self._lit(i, v, True)) in core)
        if not kept or self._meets_init(kept):
            return cube
        return kept

    def _meets_init(self, cube: Cube) -> bool:
        init = self.ts.system.initial
        return all(init[i] == v for i, v in cube)

    def _propagate(self, k: int) -> int | None:
        for i in range(1, k + 1):
            for cube in list(self.levels[i]):
                cls_next = [self._lit(s, v, True) for s, v in cube]
                if self._check(self.step, *self._frame(i), *cls_next) == z3.unsat:
                    self.levels[i].remove(cube)
                    self._block_clause(cube, i + 1)
            if not self.levels[i]:
                return i + 1
        return None

    def invariant(self, lemmas: list[Cube]) -> z3.BoolRef:
        """The lemmas over the integer-encoded variables."""
        cur = self.ts.int_cur
        clauses = [z3.Or(*[z3.Not(_eq(cur[i], self.ts.types[i].kind, v)) for i, v in cube])
                   for cube in lemmas]
        return mk_and(clauses)


def _eq(var: z3.ExprRef, kind: str, value: Any) -> z3.BoolRef:
    return var == (z3.BoolVal(bool(value)) if kind == "bool" else z3.IntVal(int(value)))


def ic3(int_ts: TransitionSystem, strengthening: list[z3.BoolRef], bad: z3.BoolRef,
        timeout_ms: int | None) -> tuple[z3.CheckSatResult, z3.BoolRef | None]:
    """:func:`spacer`'s contract, decided by :class:`IC3` on the bit-vector encoding."""
    ts = int_ts.twin("bv")
    engine = IC3(ts, strengthening, ts.enc(bad), Deadline(None if timeout_ms is None
                                                        else timeout_ms / 1000))
    try:
        verdict, _, lemmas = engine.run()
    except InferenceTimeout:
        return z3.unknown, None
    if verdict == "unsafe":
        return z3.sat, None
    return z3.unsat, engine.invariant(lemmas)


# -- the engine -------------------------------------------------------------------------------

def run_pdr(system: System, *, timeout: float | None, save_proof: bool, proofs_dir: Path,
            progress: ProgressFn | None = None, quick_depth: int = 10,
            inference: bool = True, fallback: str = "spacer", symmetry: bool = True,
            max_states: int | None = None, small: SmallSelection | None = None
            ) -> EngineOutcome:
    """Prove or refute every property (see the module docstring). ``timeout`` bounds the
    whole run, every phase included (None: no limit); ``quick_depth`` bounds the first
    BMC pass; ``inference=False`` leaves everything to the fallback prover,
    ``fallback="ic3"`` uses our IC3 instead of Spacer (both for comparisons);
    ``symmetry=False`` turns symmetry breaking and reduced checks off; ``max_states``
    bounds the exploration of the small configuration the candidates come from;
    ``small``: that configuration's selection when a caller already made it and tried
    the orbit route with it (:func:`prove_by_orbits`), for the same symmetry setting."""
    check_timeout(timeout)
    check_count("quick_depth", quick_depth, 0)
    check_count("max_states", max_states, 1)
    if fallback not in ("spacer", "ic3"):
        raise ValueError(f"unknown fallback {fallback!r} (spacer or ic3)")
    deadline = Deadline(timeout)
    verdicts: dict[str, Verdict] = {}
    extra: dict[str, Any] = {}
    depth = -1
    stopped = ""
    try:
        with time_limit(deadline, "symmetry analysis"):
            report = analyse_symmetry(system, enabled=symmetry)
        symmetric = (report.requests, report.pages) if symmetry else (False, False)
        pending = list(system.properties)
        # 1. inference, selected over one action instance per symmetry orbit: only those
        # are encoded (the whole transition system is built only if something is left)
        inferred = Inferred(None, None)
        if inference:
            if progress is not None:
                progress(0, 0, deadline.elapsed(), "pdr inference")
            with time_limit(deadline, "invariant inference"), deep_terms():
                orbit = None
                if small is None:
                    small = select_small(system, symmetric, deadline,
                                         [p.name for p in pending], max_states=max_states)
                    orbit = orbit_route(system, small, symmetric, pending, deadline,
                                        wider=orbit_symmetry(system, symmetric, symmetry))
            if orbit is not None:
                stopped = _prove_orbits(system, small, orbit, verdicts, extra, save_proof,
                                        proofs_dir, deadline)
                pending = [p for p in pending if p.name not in verdicts]
            if pending:
                with time_limit(deadline, "invariant inference"), deep_terms():
                    view = representatives_view(system, symmetric)
                    rep_ts = TransitionSystem(view, "bv", symmetric, deadline=deadline)
                    inferred = infer(view, rep_ts, symmetric, deadline,
                                     [p.name for p in pending], max_states=max_states,
                                     small=small)
                extra["inference"] = inferred.notes
        sel = inferred.selection
        clauses, readable = inferred.clauses()
        proved: list[str] = []
        if not pending:
            pass
        elif sel is not None and sel.errors_excluded:
            proved = [name for name in sel.proved if any(p.name == name for p in pending)]
        open_props = [p for p in pending if p.name not in proved]
        spacer_inv: z3.BoolRef | None = None
        if open_props:
            with deep_terms():
                ts = TransitionSystem(system, "bv", symmetric, deadline=deadline)
            # 2. shallow bugs: bounded model checking up to ``quick_depth``, each query
            # limited by work (QUICK_BMC_RLIMIT), not by seconds: the same on any machine
            known = small.shortest if small is not None else None
            with time_limit(deadline, "bmc"):
                search = Search(system, ts, deadline, "pdr", rlimit=QUICK_BMC_RLIMIT,
                                progress=progress)
                if known is not None and all(p.name in known for p in open_props):
                    # the exploration of this very size found them all: BMC needs only
                    # rebuild shortest counterexamples, from the first depth with one
                    search.unroller.rlimit = 0
                    search.deepen(open_props, verdicts, covered=min(known.values()) - 1,
                                  max_depth=max(known[p.name] for p in open_props))
                else:
                    search.deepen(open_props, verdicts, max_depth=quick_depth,
                                  covered=-1 if known is None else min(
                                      known.values(), default=quick_depth + 1) - 1)
                search.unroller.rlimit = 0  # the deeper BMC of step 3 runs without a limit
                depth = search.depth
            extra["quick_bmc_depth"] = search.depth
            open_props = [p for p in open_props if p.name not in verdicts]
        # 3. Spacer for what the candidates cannot support, BMC for what fails
        if open_props:
            with time_limit(deadline, "Spacer" if fallback == "spacer" else "IC3"):
                spacer_inv = _decide(system, ts.twin("int"), search, clauses if sel else [],
                                     open_props, deadline, verdicts, extra,
                                     with_errors=sel is None or not sel.errors_excluded,
                                     fallback=fallback, progress=progress)
            depth = search.depth
            if spacer_inv is not None:
                proved += [p.name for p in open_props if p.name not in verdicts]
        if proved:
            with time_limit(deadline, "the certificate check"), deep_terms():
                stopped = _prove(system, clauses, readable, spacer_inv, proved, verdicts, extra,
                                 save_proof, proofs_dir, deadline, inferred.notes,
                                 "IC3" if fallback == "ic3" else "Spacer")
    except OutOfTime as exc:
        stopped = str(exc)
    for p in system.properties:
        if p.name not in verdicts:
            why = stopped or ("timeout" if deadline.expired() else "solver gave up")
            verdicts[p.name] = Verdict(p.name, Status.UNKNOWN, "pdr", why)
    stats = Stats(seconds=deadline.elapsed(), depth=max(depth, 0))
    stats.extra["pdr"] = extra
    return EngineOutcome([verdicts[p.name] for p in system.properties], stats, "pdr")


def _prove_orbits(system: System, small: SmallSelection, orbit: OrbitProof,
                  verdicts: dict[str, Verdict], extra: dict[str, Any], save_proof: bool,
                  proofs_dir: Path, deadline: Deadline) -> str:
    """:func:`_prove` for what the orbit route proved, its notes (and which clauses each
    property needs) recorded under ``extra["inference"]``; the clauses are
    representatives over the spaces the route renamed (``orbit.dims``)."""
    needs = orbit.notes.pop("needs", {})
    extra["inference"] = {**small.notes, "orbit_route": orbit.notes, "needs": needs}
    with time_limit(deadline, "the certificate check"), deep_terms():
        return _prove(system, orbit.formulas, orbit.labels, None, orbit.proved, verdicts,
                      extra, save_proof, proofs_dir, deadline, extra["inference"],
                      symmetry=orbit.dims)


def _prove(system: System, clauses: list[z3.BoolRef], readable: list[str],
           spacer_inv: z3.BoolRef | None, proved: list[str], verdicts: dict[str, Verdict],
           extra: dict[str, Any], save_proof: bool, proofs_dir: Path, deadline: Deadline,
           notes: dict[str, Any], prover: str = "Spacer",
           symmetry: tuple[bool, bool] | None = None) -> str:
    """Re-check the invariant on every instance, then record PROVED (and the certificate).
    With ``symmetry`` the clauses are orbit representatives over those id spaces and
    the check runs one orbit at a time (:mod:`kvspec.proofs.orbits`).
    Returns '' or, when the check could not decide, why nothing was proved."""
    inv_clauses, inv_readable = list(clauses), list(readable)
    if spacer_inv is not None and not z3.is_true(spacer_inv):
        inv_clauses.append(spacer_inv)
        inv_readable.append(f"{prover} lemmas: " + _short(spacer_inv))
    dims = [d for d, on in zip(("requests", "pages"), symmetry or (False, False)) if on]
    invariant = Invariant(inv_clauses, inv_readable, dims)
    with python_handles_ctrl_c():
        check = verify_invariant(system, invariant, proved)
    if not check.ok:
        if deadline.expired():
            return "timeout during the certificate check"
        if _undecided(check):
            return "the certificate check could not decide: " + "; ".join(check.problems)
        raise InternalError("pdr: the invariant found does not re-check: "
                            + "; ".join(check.problems))
    extra["certificate_check_seconds"] = round(check.seconds, 3)
    note = ""
    if save_proof:
        method = "template inference" + (f" + {prover}" if spacer_inv is not None else "")
        if dims:
            method += " (small-size clauses, checked one orbit at a time)"
        path = write_certificate(system, invariant, proofs_dir, method=method,
                                 stats={"seconds": round(deadline.elapsed(), 2), **notes},
                                 properties=list(proved))
        note = f", saved to {path}"
        extra["certificate"] = str(path)
    needs = notes.get("needs", {})
    for name in proved:
        own = ""
        if name in needs and spacer_inv is None:
            own = f" (this property needs {len(needs[name])} of them)"
        verdicts[name] = Verdict(name, Status.PROVED, "pdr",
                                 f"inductive invariant, {_clauses(len(inv_clauses))}"
                                 f"{' (orbit representatives)' if dims else ''}{own}{note}")
    return ""


def _undecided(check: Any) -> bool:
    """The check failed only because the solver could not decide a query (no
    counterexample to induction, no bad state): not a refutation of the invariant."""
    if getattr(check, "cti", None) is not None or getattr(check, "bad_state", None) is not None:
        return False
    flag = getattr(check, "undecided", None)
    if isinstance(flag, bool):
        return flag
    return bool(check.problems) and all(
        any(w in p for w in ("could not decide", "cannot check", "gave up"))
        for p in check.problems)


def _decide(system: System, int_ts: TransitionSystem, search: Search,
            strengthening: list[z3.BoolRef], open_props: list[Property], deadline: Deadline,
            verdicts: dict[str, Verdict], extra: dict[str, Any], with_errors: bool,
            fallback: str = "spacer", progress: ProgressFn | None = None
            ) -> z3.BoolRef | None:
    """Alternate Spacer (or our IC3) — can it prove the rest? — with deeper BMC
    (shortest counterexamples), with growing time slices. Returns the prover's
    invariant once the remaining properties are proved; None if time ran out first."""
    pending = [p for p in open_props if p.name not in verdicts]
    slice_s = 2.0
    spent = 0.0
    round_no = 0
    while pending and not deadline.expired():
        round_no += 1
        if progress is not None:
            progress(0, max(search.depth, 0), deadline.elapsed(), f"pdr round {round_no}")
        bad = mk_or([int_ts.bad(p) for p in pending])
        if with_errors:
            bad = z3.Or(bad, int_ts.any_error())
        left = deadline.left_ms()
        ms = int(slice_s * 1000) if left is None else min(int(slice_s * 1000), left)
        t0 = time.monotonic()
        if fallback == "ic3":
            res, inv = ic3(int_ts, strengthening, bad, ms)
        else:
            res, inv = spacer(int_ts, strengthening, bad, ms)
        spent += time.monotonic() - t0
        extra[f"{fallback}_seconds"] = round(spent, 2)
        if res == z3.unsat:
            return inv if inv is not None else z3.BoolVal(True)
        until = time.monotonic() + slice_s
        if deadline.end is not None:
            until = min(until, deadline.end)
        if not search.deepen(pending, verdicts, max_depth=10 ** 6, until=until):
            break
        extra["bmc_depth"] = search.depth
        slice_s *= 2
    return None


def _clauses(n: int) -> str:
    return f"{n} clause" if n == 1 else f"{n} clauses"


def _short(e: z3.ExprRef, limit: int = 160) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit] + " …"
