"""Unbounded proofs: inferred inductive invariants, completed by Z3's Spacer (IC3/PDR).

1. **Inference** (:mod:`kvspec.engines.inference`): candidate clauses from
   templates over the per-request and per-page variables, true on every
   reachable state of a small configuration, are selected counterexample-guided
   into an inductive invariant — first at the small size, then at the target size
   starting from that selection (quantified clauses carry over between sizes).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import z3

from kvspec.engines.bmc import Deadline, Unroller, check_errors
from kvspec.engines.inference import (InferenceTimeout, Selection, StateTable, Strengthener,
                                      Template, enumerate_candidates, goal_templates,
                                      sample_states)
from kvspec.engines.transition import TransitionSystem
from kvspec.lang.errors import ModelError
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import Property, System, compile_model
from kvspec.proofs.certificate import Invariant, verify_invariant, write_certificate
from kvspec.trace import InternalError
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

ProgressFn = Callable[[int, int, float], None]


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
        pairs = [self.strengthener.clause(k) for k in self.selection.chosen]
        return [c for c, _ in pairs], [r for _, r in pairs]


def infer(system: System, ts: TransitionSystem, symmetric: tuple[bool, bool],
          deadline: Deadline) -> Inferred:
    """Candidates from a small configuration, selected at the small and the target size."""
    notes: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        small_schema, states = sample_states(system)
    except ModelError:
        return Inferred(None, None, notes={"sample": "the small configuration raises a model "
                                                     "error"})
    templates = enumerate_candidates(small_schema, StateTable(small_schema, states))
    notes.update(sample_states=len(states), candidates=len(templates),
                 sample_seconds=round(time.monotonic() - t0, 2))
    seed: list[int] = []
    if dict(small_schema.sizes) != dict(system.sizes):
        small = compile_model(system.loaded, small_schema.sizes, [p.name for p in system.properties])
        small_ts = TransitionSystem(small, "bv")
        small_sym = (symmetric[0] and small_schema.requests > 1,
                     symmetric[1] and small_schema.pages > 1)
        t1 = time.monotonic()
        try:
            first = Strengthener(small_ts, templates, goal_templates(small, templates),
                                 small_sym, deadline).run()
        except InferenceTimeout:
            return Inferred(None, None, templates, notes)
        seed = first.chosen
        notes.update(small_selection=len(seed), small_seconds=round(time.monotonic() - t1, 2))
    t2 = time.monotonic()
    goals = goal_templates(system, templates)
    strengthener = Strengthener(ts, templates, goals, symmetric, deadline, seed=seed)
    try:
        selection = strengthener.run()
    except InferenceTimeout:
        return Inferred(None, None, templates, notes)
    notes.update(selection=len(selection.chosen), queries=selection.queries,
                 dropped=selection.dropped, select_seconds=round(time.monotonic() - t2, 2))
    return Inferred(selection, strengthener, templates, notes)


# -- Spacer -----------------------------------------------------------------------------------

def spacer(ts: TransitionSystem, strengthening: list[z3.BoolRef], bad: z3.BoolRef,
           deadline: Deadline) -> tuple[z3.CheckSatResult, z3.BoolRef | None]:
    """Is ``bad`` reachable? On unsat also an inductive invariant over ``ts.cur``
    (``ts`` must use the integer encoding and no symmetry breaking)."""
    fp = z3.Fixedpoint()
    fp.set(engine="spacer")
    ms = deadline.left_ms()
    if ms is not None:
        fp.set(timeout=ms)
    sorts = [v.sort() for v in ts.cur] + [z3.BoolSort()]
    inv = z3.Function("Inv", *sorts)
    fp.register_relation(inv)
    template = ts.trans_template()
    sel = ts._template_sel
    fp.declare_var(*ts.cur, *ts.nxt, *sel)
    fp.rule(inv(*ts.cur), [ts.init(ts.cur)])
    helper = z3.And(*strengthening) if strengthening else z3.BoolVal(True)
    body = [inv(*ts.cur), helper, *ts.domain(ts.cur), *template]
    fp.rule(inv(*ts.nxt), body)
    res = fp.query(z3.And(inv(*ts.cur), helper, bad))
    if res != z3.unsat:
        return res, None
    cover = fp.get_cover_delta(-1, inv)
    subst = [(z3.Var(i, v.sort()), v) for i, v in enumerate(ts.cur)]
    return res, z3.simplify(z3.substitute_vars(cover, *[v for _, v in subst]))


# -- the engine -------------------------------------------------------------------------------

def run_pdr(system: System, *, timeout: float | None, save_proof: bool, proofs_dir: Path,
            progress: ProgressFn | None = None) -> EngineOutcome:
    deadline = Deadline(timeout)
    report = analyse_symmetry(system)
    symmetric = (report.requests, report.pages)
    ts = TransitionSystem(system, "bv", symmetric)
    inferred = infer(system, ts, symmetric, deadline)
    extra: dict[str, Any] = {"inference": inferred.notes}
    verdicts: dict[str, Verdict] = {}
    props = {p.name: p for p in system.properties}
    sel = inferred.selection
    clauses, readable = inferred.clauses()
    proved: list[str] = []
    if sel is not None and sel.errors_excluded and sel.proved:
        proved = list(sel.proved)
    if progress is not None:
        progress(0, 0, deadline.elapsed())
    open_props = [p for p in system.properties if p.name not in proved]
    spacer_inv: z3.BoolRef | None = None
    int_ts = ts.twin("int")
    if open_props:
        strengthening = clauses if sel is not None else []
        spacer_inv = _spacer_loop(system, int_ts, ts, strengthening, open_props, deadline,
                                  verdicts, extra, sel is None or not sel.errors_excluded)
        for p in open_props:
            if p.name not in verdicts:
                proved.append(p.name)
    certificate_note = ""
    if proved:
        inv_clauses = list(clauses)
        inv_readable = list(readable)
        if spacer_inv is not None and not z3.is_true(spacer_inv):
            inv_clauses.append(spacer_inv)
            inv_readable.append("Spacer lemmas: " + _short(spacer_inv))
        invariant = Invariant(inv_clauses, inv_readable)
        check = verify_invariant(system, invariant, proved)
        if not check.ok:
            raise InternalError("pdr: the inferred invariant does not re-check: "
                                + "; ".join(check.problems))
        extra["certificate_check_seconds"] = round(check.seconds, 3)
        if save_proof:
            path = write_certificate(system, invariant, proofs_dir,
                                     method="pdr: template inference + Spacer",
                                     stats={"seconds": round(deadline.elapsed(), 2),
                                            **inferred.notes})
            certificate_note = f", saved {path}"
        for name in proved:
            verdicts[name] = Verdict(name, Status.PROVED, "pdr",
                                     f"inductive invariant, {len(inv_clauses)} clauses"
                                     + certificate_note)
    for p in system.properties:
        if p.name not in verdicts:
            verdicts[p.name] = Verdict(p.name, Status.UNKNOWN, "pdr",
                                       "timeout" if deadline.expired() else "solver gave up")
    stats = Stats(seconds=deadline.elapsed())
    stats.extra["pdr"] = extra
    return EngineOutcome([verdicts[p.name] for p in system.properties], stats, "pdr")


def _spacer_loop(system: System, int_ts: TransitionSystem, bmc_ts: TransitionSystem,
                 strengthening: list[z3.BoolRef], open_props: list[Property],
                 deadline: Deadline, verdicts: dict[str, Verdict], extra: dict[str, Any],
                 with_errors: bool) -> z3.BoolRef | None:
    """Decide ``open_props`` (and model errors when ``with_errors``) with Spacer; the
    violated ones get shortest counterexamples. Returns Spacer's invariant for the
    rest, or None when undecided ones remain (they get no verdict here)."""
    pending = list(open_props)
    t0 = time.monotonic()
    while pending and not deadline.expired():
        bad = z3.Or(*[int_ts.bad(p) for p in pending])
        if with_errors:
            bad = z3.Or(bad, int_ts.any_error())
        res, inv = spacer(int_ts, strengthening, bad, deadline)
        extra["spacer_seconds"] = round(time.monotonic() - t0, 2)
        if res == z3.unsat:
            return inv if inv is not None else z3.BoolVal(True)
        if res == z3.unknown:
            for p in pending:
                verdicts[p.name] = Verdict(p.name, Status.UNKNOWN, "pdr",
                                           "timeout" if deadline.expired() else
                                           "Spacer gave up")
            return None
        # some bad state is reachable: find which, with shortest traces
        before = {p.name for p in pending}
        if not _first_violation(system, bmc_ts, pending, deadline, verdicts, with_errors):
            for p in pending:
                verdicts.setdefault(p.name, Verdict(p.name, Status.UNKNOWN, "pdr", "timeout"))
            return None
        pending = [p for p in pending if p.name in before and p.name not in verdicts]
        with_errors = False if not pending else with_errors
    for p in pending:
        verdicts.setdefault(p.name, Verdict(p.name, Status.UNKNOWN, "pdr", "timeout"))
    return None


def _first_violation(system: System, ts: TransitionSystem, pending: list[Property],
                     deadline: Deadline, verdicts: dict[str, Verdict], with_errors: bool
                     ) -> bool:
    """Deepen BMC until some pending property is violated (model errors raise)."""
    from kvspec.engines.bmc import _check_depth

    unroller = Unroller(ts)
    todo = list(pending)
    k = 0
    while not deadline.expired():
        if k > 0:
            if check_errors(unroller, k - 1, deadline, "pdr") == z3.unknown:
                return False
            unroller.extend()
        n = len(todo)
        if _check_depth(system, ts, unroller, todo, verdicts, k, deadline):
            return False
        if len(todo) < n:
            for name in [p.name for p in pending if p not in todo]:
                v = verdicts[name]
                verdicts[name] = Verdict(name, v.status, "pdr", v.detail, v.trace)
            return True
        k += 1
    return False


def _short(e: z3.ExprRef, limit: int = 160) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit] + " …"

