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
Nothing here says PROVED: the caller re-checks the final invariant through its
certificate text (:func:`kvspec.proofs.certificate.verify_invariant`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.engines.inference import QDIM, Template
from kvspec.engines.selection import FORMULA_BASE
from kvspec.lang.system import Property, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.orbits import NotSymmetric, check_orbits


@dataclass
class OrbitProof:
    """The representatives that survived, and the properties they prove."""

    formulas: list[z3.BoolRef]
    labels: list[str]
    proved: list[str]
    notes: dict[str, Any] = field(default_factory=dict)


def representatives_of(system: System, templates: list[Template], chosen: list[int],
                       symmetric: tuple[bool, bool]) -> tuple[list[z3.BoolRef], list[str]]:
    """Each chosen template as orbit representatives at ``system``'s size: its instance
    at id 0 of every symmetric space, every instance over the others."""
    schema = system.schema
    cur = system.state_vars()
    on = {REQUEST: symmetric[0], PAGE: symmetric[1]}
    formulas, labels = [], []
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
    return formulas, labels


def orbit_houdini(system: System, formulas: list[z3.BoolRef], labels: list[str],
                  properties: list[Property], goals: dict[str, str],
                  symmetric: tuple[bool, bool], deadline: Any) -> OrbitProof | None:
    """Drop representatives broken by counterexamples to induction until the rest is
    inductive. ``goals``: property name -> the label of its own clause. None when the
    route does not apply or ends without an invariant."""
    formulas, labels = list(formulas), list(labels)
    wanted = list(properties)
    notes: dict[str, Any] = {"rounds": 0, "dropped": 0, "queries": 0}
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
        if report.unexcluded is not None:
            # its own clause did not survive selection (at the small size, a violated
            # property's never does): the rest may still be proved
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
