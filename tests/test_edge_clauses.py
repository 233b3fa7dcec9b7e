"""Edge clauses: PDR's orbit route tries its invariant without the clauses that single
out a value just below the top of a range that grows with the sizes (``need[r] ==
pages``), keeps them only when the rest does not prove the same properties, and the
certificate it saves re-checks either way."""
from __future__ import annotations

import json
from pathlib import Path

from kvspec.engines.inference import Atom, Template
from kvspec.engines.bmc import Deadline
from kvspec.engines.orbit_route import (
    edge_clause,
    orbit_houdini,
    representatives_by_template,
    without_edge_clauses,
)
from kvspec.engines.pdr import run_pdr
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.proofs.certificate import load_certificate
from kvspec.proofs.clauses import parse_invariant
from kvspec.verdict import Status
from tests.conftest import MODELS, run_cli

SYM = (True, False)  # requests renamed; the model has no page variable
BOTH = (True, True)
STORED_3_6 = Path(__file__).parent / "certificates" / \
    "lowest_free.LowestFreePD.requests=3,pages=6.json"

#: a request that needs exactly the whole pool is rejected, and only a request that
#: does not may decode after a rejection: no-decode-after-rejection holds because of
#: ``phase[r] != REJECTED or need[r] == pages``, a clause about the edge value itself
EDGE_NEEDED = '''
import enum
from kvspec import Int, Model, Pages, Request, Requests, action, emit, require


def beyond_pool(sizes):
    return sizes["pages"] + 1


class Phase(enum.Enum):
    NEW = 0
    RUNNING = 1
    REJECTED = 2


class EdgeNeeded(Model):
    requests = Requests(2)
    pages = Pages(4)

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, beyond_pool), init=0)

    @action
    def arrive(s, r: Request, n: Int(1, beyond_pool)):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        if n == len(s.pages):
            s.phase[r] = Phase.REJECTED
            emit.reject(r)
        else:
            s.phase[r] = Phase.RUNNING

    @action
    def decode(s, r: Request):
        require(s.phase[r] == Phase.RUNNING
                or (s.phase[r] == Phase.REJECTED and s.need[r] != len(s.pages)))
        emit.decode(r)
'''


def _system(path: Path, sizes: dict[str, int]) -> System:
    return compile_model(load_model(path), sizes)


def _lowest_free(requests: int, pages: int) -> System:
    return _system(MODELS / "lowest_free.py", {"requests": requests, "pages": pages})


def test_an_edge_is_a_value_below_the_top_of_a_range_that_grows() -> None:
    small, big = _lowest_free(2, 4).schema, _lowest_free(3, 8).schema
    # need ranges over 0..pages + 1: need == pages is one below the top
    assert edge_clause(Template(("r",), ((Atom("eq", "need", "r", 1, top=True), False),)),
                       small, big)
    # the top itself (need == pages + 1, rejected at admission) is a bound, not an edge
    assert not edge_clause(Template(("r",), ((Atom("eq", "need", "r", 0, top=True), False),)),
                           small, big)
    # a constant read from the bottom of the range
    assert not edge_clause(Template(("r",), ((Atom("eq", "need", "r", 1), False),)),
                           small, big)
    # page_inflight_by ranges over 0..3 at every size: 2 means the same everywhere
    assert not edge_clause(
        Template(("p", "r"), ((Atom("eq", "page_inflight_by", "pr", 1, top=True), False),)),
        small, big)
    # a bound restricts the range, it does not single out a value: need[r] <= pages
    assert not edge_clause(Template(("r",), ((Atom("le", "need", "r", 1, top=True), True),)),
                           small, big)
    # one edge literal makes the clause an edge clause
    assert edge_clause(Template(("p", "r"), (
        (Atom("eq", "phase", "r", 3), False), (Atom("eq", "need", "r", 1, top=True), False),
        (Atom("is", "owner", "p", 0, "r"), True))), small, big)


def test_an_edge_clause_the_properties_do_not_need_is_dropped() -> None:
    """``lowest_free``'s invariant at (3,6) (a stored PDR certificate) with "a request in
    TRANSFER that needs the whole pool owns every page" added: the proof holds with it,
    and the trial drops it, proving the same without it."""
    system = _lowest_free(3, 6)
    small = _lowest_free(2, 4)
    doc = load_certificate(STORED_3_6)
    formulas = [c.formula for c in parse_invariant(doc.smtlib2, system.state_vars())]
    labels = list(doc.readable)
    owns_all = Template(("p", "r"), ((Atom("eq", "phase", "r", 3), False),
                                     (Atom("eq", "need", "r", 1, top=True), False),
                                     (Atom("is", "owner", "p", 0, "r"), True)))
    extra, extra_labels, _ = representatives_by_template(system, [owns_all], [0], BOTH)
    assert extra_labels == ["for all p, r: phase[r] != TRANSFER or need[r] != 6 or owner[p] == r"]
    props = list(system.properties)
    goals = {p.name: f"not violated:{p.name}" for p in props}
    proof = orbit_houdini(system, formulas + extra, labels + extra_labels, props, goals, BOTH,
                          Deadline(300))
    assert proof is not None and sorted(proof.proved) == sorted(goals), proof
    assert extra_labels[0] in proof.labels
    trial = without_edge_clauses(system, proof, {extra_labels[0]: owns_all}, small.schema,
                                 props, goals, BOTH, Deadline(300))
    assert trial is not proof and extra_labels[0] not in trial.labels
    assert sorted(trial.proved) == sorted(goals)
    assert trial.notes["edge_clauses_dropped"] == 1


def test_pdr_at_six_pages_saves_no_edge_clause(tmp_path: Path) -> None:
    """PDR's certificate of ``lowest_free`` at (3,6) has none of the clauses about a
    request that needs the whole pool unless the trial found them needed (the small
    size's selection may or may not have found one), and re-checks."""
    system = _lowest_free(3, 6)
    out = run_pdr(system, timeout=300, save_proof=True, proofs_dir=tmp_path)
    assert all(v.status == Status.PROVED for v in out.verdicts), out.verdicts
    (cert,) = tmp_path.glob("*.json")
    doc = json.loads(cert.read_text())
    readable = doc["invariant"]["readable"]
    edges = [r for r in readable if "need[r] != 6" in r or "need[r] == 6" in r]
    # only a trial that proved less keeps one (it has never happened for this model)
    assert not edges or doc["stats"]["orbit_route"].get("edge_clauses_kept"), edges
    res = run_cli("check-proof", str(cert), str(MODELS / "lowest_free.py"))
    assert res.code == 0, res.out


def test_an_edge_clause_a_property_needs_is_kept(tmp_path: Path) -> None:
    """Without ``phase[r] != REJECTED or need[r] == pages`` a rejected request could
    decode: the trial proves one property of two, so the proof keeps its clauses."""
    model = tmp_path / "edge_needed.py"
    model.write_text(EDGE_NEEDED)
    small = _system(model, {"requests": 2, "pages": 4})
    system = _system(model, {"requests": 3, "pages": 6})
    props = {p.name: p for p in system.properties}
    ndar, nrbw = props["no-decode-after-rejection"], props["no-read-beyond-written"]
    own = Template((), ((Atom("eq", "violated:no-decode-after-rejection", None, 1), False),))
    # a second property, which needs no other clause: without the edge clause the trial
    # still proves it, but not no-decode-after-rejection
    other = Template((), ((Atom("eq", "violated:no-read-beyond-written", None, 1), False),))
    templates = [
        own,
        other,
        # a rejected request needs the whole pool
        Template(("r",), ((Atom("eq", "phase", "r", 2), False),
                          (Atom("eq", "need", "r", 1, top=True), True))),
        Template(("r",), ((Atom("eq", "phase", "r", 2), True),
                          (Atom("eq", "rejected", "r", 1), False))),
    ]
    formulas, labels, origin = representatives_by_template(
        system, templates, list(range(len(templates))), SYM)
    goals = {ndar.name: own.render(system.schema), nrbw.name: other.render(system.schema)}
    proof = orbit_houdini(system, formulas, labels, [ndar, nrbw], goals, SYM, Deadline(120))
    assert proof is not None and proof.proved == [ndar.name, nrbw.name], proof
    by_label = {label: templates[k] for label, k in zip(labels, origin)}
    assert [label for label in labels
            if edge_clause(by_label[label], small.schema, system.schema)] == [
        "for all r: phase[r] != REJECTED or need[r] == 6"]
    kept = without_edge_clauses(system, proof, by_label, small.schema, [ndar, nrbw], goals,
                                SYM, Deadline(120))
    assert kept is proof and kept.labels == labels
    assert kept.notes["edge_clauses_kept"] == 1
    assert "edge_clauses_dropped" not in kept.notes
