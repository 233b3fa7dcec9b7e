"""Proofs at large sizes from the invariant of a small one, checked one orbit at a time.

The clauses selected at the small size (:mod:`kvspec.engines.selection`) are
quantified over a request and a page, so they mean something at every size. At
the target size each becomes one *orbit representative* (the instance for request
0 and page 0 over the id spaces the model treats interchangeably; every instance
over the others), and :func:`kvspec.proofs.orbits.check_orbits` checks the
conjunction of all their renamings with one query per orbit of action instances:
the work grows with the number of clause instances an action touches, not with the
number of instances times the number of clauses. A representative that some
counterexample to induction breaks is dropped with its whole orbit (Houdini), and
the check repeats; a property whose own clause goes is left to the other routes.
Before anything is dropped, the counterexample's pre-state (or the invariant state
in which a property fails or an action raises a model error) is used to *propose*
new clauses (:class:`OrbitProposals`, ICE-style, as the selection at one size
does): quantified clauses false on that state and true on every sampled state of
the small size, added as representatives; only when none exists is anything dropped.
Once the representatives prove the properties, those that single out the value
next to the top of a variable's range (*edge clauses*, :func:`edge_clause`) are
tried without (:func:`without_edge_clauses`): kept only when the rest does not
prove the same properties.
Nothing here says PROVED: the caller re-checks the final invariant through its
certificate text (:func:`kvspec.proofs.certificate.verify_invariant`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.engines.inference import QDIM, StateTable, Template
from kvspec.engines.selection import ERRORS_GOAL, FORMULA_BASE, support_closure
from kvspec.lang.schema import Schema, State
from kvspec.lang.system import Property, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.orbits import NotSymmetric, OrbitReport, check_orbits

#: proposal rounds an orbit Houdini may spend before it only drops clauses
PROPOSAL_ROUNDS = 8


@dataclass
class OrbitProof:
    """The representatives that survived, and the properties they prove."""

    formulas: list[z3.BoolRef]
    labels: list[str]
    proved: list[str]
    notes: dict[str, Any] = field(default_factory=dict)
    #: the id spaces the representatives are renamed over (requests, pages)
    dims: tuple[bool, bool] = (False, False)


def representatives_of(system: System, templates: list[Template], chosen: list[int],
                       symmetric: tuple[bool, bool]) -> tuple[list[z3.BoolRef], list[str]]:
    """Each chosen template as orbit representatives at ``system``'s size: its instance
    at id 0 of every symmetric space, every instance over the others."""
    formulas, labels, _ = representatives_by_template(system, templates, chosen, symmetric)
    return formulas, labels


def representatives_by_template(system: System, templates: list[Template], chosen: list[int],
                                symmetric: tuple[bool, bool]
                                ) -> tuple[list[z3.BoolRef], list[str], list[int]]:
    """:func:`representatives_of`, with the template index of each representative."""
    schema = system.schema
    cur = system.state_vars()
    on = {REQUEST: symmetric[0], PAGE: symmetric[1]}
    formulas, labels, origin = [], [], []
    for k in chosen:
        if k >= FORMULA_BASE or k >= len(templates):
            continue  # model-invariant goals are added at the target size by the caller
        t = templates[k]
        for b in t.bindings(schema):
            if any(on[QDIM[q]] and b[q] != 0 for q in t.ctx):
                continue
            formulas.append(t.instance(schema, cur, b))
            suffix = "" if all(on[QDIM[q]] for q in t.ctx) else " @ " + ", ".join(
                f"{q}={b[q]}" for q in t.ctx if not on[QDIM[q]])
            labels.append(t.render(schema) + suffix)
            origin.append(k)
    return formulas, labels, origin


class OrbitProposals:
    """New orbit representatives from a state the invariant fails to exclude
    (:func:`kvspec.engines.proposals.propose` over the small size's sample), with a
    record of which clause each proposal was added for (``support``: label of a
    broken clause, a property's own clause or :data:`ERRORS_GOAL` -> the labels
    added). ``origin`` maps every label to its template."""

    def __init__(self, system: System, sample: StateTable, templates: list[Template],
                 origin: dict[str, Template], symmetric: tuple[bool, bool],
                 rounds: int = PROPOSAL_ROUNDS) -> None:
        self.system = system
        self.sample = sample
        self.known = set(templates)
        self.origin = dict(origin)
        self.symmetric = symmetric
        self.rounds = rounds
        self.support: dict[str, set[str]] = {}

    def __call__(self, pre: State, broken: list[str], why: str
                 ) -> tuple[list[z3.BoolRef], list[str]]:
        """Representatives of new clauses false on ``pre``; ``broken`` are the labels of
        the clauses the counterexample breaks, ``why`` the clause they are added for
        when none is broken (a property's own clause, or :data:`ERRORS_GOAL`)."""
        from kvspec.engines.proposals import propose

        if self.rounds <= 0:
            return [], []
        self.rounds -= 1
        schema = self.system.schema
        related = {v.name for v in schema.vars if v.owner == "model"}
        for label in broken:
            t = self.origin.get(label)
            if t is not None:
                related |= {x for a, _ in t.literals for x in (a.var, a.other, a.plus) if x}
        new = propose(self.sample, schema, pre, related, self.known)
        if not new:
            return [], []
        self.known |= set(new)
        formulas, labels, origin = representatives_by_template(
            self.system, new, list(range(len(new))), self.symmetric)
        for label, k in zip(labels, origin):
            self.origin[label] = new[k]
        for b in broken or [why]:
            self.support.setdefault(b, set()).update(labels)
        return formulas, labels

    def needed(self, roots: list[str], present: set[str]) -> list[str]:
        """``roots`` and the proposals added for them, transitively, among ``present``."""
        return support_closure(self.support, roots, present)


def _state_to_exclude(report: OrbitReport, goals: dict[str, str]
                      ) -> tuple[State, list[str], str] | None:
    """The state a failed orbit check found (a counterexample's pre-state, or an
    invariant state that violates a property or raises a model error), the labels of
    the clauses it breaks and the clause new ones would be added for."""
    if report.cti is not None:  # no clause broken: a variable leaves its domain
        broken = [report.clauses[k] for k in report.broken]
        return report.cti.pre, broken, "" if broken else ERRORS_GOAL
    if report.bad_state is None:
        return None
    state, problem = report.bad_state
    for name, own in goals.items():
        if problem.endswith(f"violations of {name}"):
            return state, [], own
    return state, [], ERRORS_GOAL


def orbit_houdini(system: System, formulas: list[z3.BoolRef], labels: list[str],
                  properties: list[Property], goals: dict[str, str],
                  symmetric: tuple[bool, bool], deadline: Any,
                  proposals: OrbitProposals | None = None,
                  notes: dict[str, Any] | None = None) -> OrbitProof | None:
    """Drop representatives broken by counterexamples to induction until the rest is
    inductive; with ``proposals``, first add new clauses that exclude the
    counterexample. ``goals``: property name -> the label of its own clause. None when
    the route does not apply (``notes["not_applicable"]`` says why) or ends without an
    invariant. ``notes``: the dict to record the route's notes in."""
    formulas, labels = list(formulas), list(labels)
    wanted = list(properties)
    if notes is None:
        notes = {}
    notes.update({"rounds": 0, "dropped": 0, "queries": 0, "proposed": 0})
    while wanted and not deadline.expired():
        notes["rounds"] += 1
        try:
            left = deadline.left_ms()
            per_query = 60.0 if left is None else max(0.1, min(60.0, left / 1000 / 10))
            report = check_orbits(system, formulas, labels, wanted, symmetric,
                                  timeout=per_query)
        except NotSymmetric as exc:
            notes["not_applicable"] = str(exc)
            return None
        notes["queries"] += report.queries
        notes["instances"] = report.orbit_instances
        if report.ok:
            return OrbitProof(formulas, labels, [p.name for p in wanted], notes)
        found = _state_to_exclude(report, goals) if proposals is not None else None
        if found is not None:
            assert proposals is not None
            new_formulas, new_labels = proposals(*found)
            if new_formulas:
                formulas += new_formulas
                labels += new_labels
                notes["proposed"] += len(new_labels)
                continue
        if report.unexcluded is not None:
            # nothing excludes its violations (at the small size, a violated property's
            # own clause never survives selection): the rest may still be proved
            wanted = [p for p in wanted if p.name != report.unexcluded]
            notes.setdefault("not_excluded", []).append(report.unexcluded)
            continue
        if report.cti is None or not report.broken:
            notes["stopped"] = "; ".join(report.problems)
            return None
        gone = {labels[k] for k in report.broken}
        keep = [k for k in range(len(formulas)) if k not in set(report.broken)]
        formulas = [formulas[k] for k in keep]
        labels = [labels[k] for k in keep]
        notes["dropped"] += len(report.broken)
        wanted = [p for p in wanted if goals.get(p.name) not in gone]
    return None


def edge_clause(t: Template, small: Schema, target: Schema) -> bool:
    """Whether ``t`` singles out a value just below the top of a range that grows with
    the sizes (an equality with a constant counted down from the upper bound, not the
    bound itself,
    of a variable whose bound differs between the ``small`` size the clause comes
    from and the ``target`` size): ``need[r] == pages`` over ``0..pages + 1``, "a
    request that needs the whole pool". Such clauses hold, but describe a corner of
    the states that the properties rarely need; at large sizes their instances
    after an allocation make the solver count the pages allocated, which costs most
    of a certificate's re-check (``lowest_free`` at 8 requests and 64 pages,
    ``benchmarks/RESULTS.md``). A range that does not grow (``0..3``) has no edge:
    its values mean the same at every size; a bound (``need[r] <= pages``) restricts
    the range rather than singling out a value."""
    return any(a.kind == "eq" and a.top and a.value > 0
               and small.by_name[a.var].type.hi != target.by_name[a.var].type.hi
               for a, _ in t.literals)


def without_edge_clauses(system: System, proof: OrbitProof, origin: dict[str, Template],
                         small: Schema, properties: list[Property], goals: dict[str, str],
                         symmetric: tuple[bool, bool], deadline: Any) -> OrbitProof:
    """``proof`` without its edge clauses (:func:`edge_clause`; ``origin``: each label's
    template, of the ``small`` size's schema) when the rest, after dropping what
    counterexamples to induction break (no proposals), still proves every property
    ``proof`` proves; else ``proof``. The notes say which happened
    (``edge_clauses_dropped``/``edge_clauses_kept``)."""
    own = set(goals.values())
    edge = {label for label in proof.labels if label not in own
            and label in origin and edge_clause(origin[label], small, system.schema)}
    if not edge:
        return proof
    keep = [k for k, label in enumerate(proof.labels) if label not in edge]
    wanted = [p for p in properties if p.name in set(proof.proved)]
    notes: dict[str, Any] = {}
    trial = orbit_houdini(system, [proof.formulas[k] for k in keep],
                          [proof.labels[k] for k in keep], wanted, goals, symmetric,
                          deadline, None, notes)
    proof.notes["queries"] += notes.get("queries", 0)
    if trial is None or set(trial.proved) != set(proof.proved):
        proof.notes["edge_clauses_kept"] = len(edge)
        return proof
    trial.notes = {**proof.notes, "edge_clauses_dropped": len(edge),
                   "dropped": proof.notes["dropped"] + notes["dropped"],
                   "instances": notes["instances"]}
    return trial
