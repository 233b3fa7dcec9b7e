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
from kvspec.verdict import Status
from tests.conftest import MODELS, run_cli

SYM = (True, False)  # requests renamed; the model has no page variable

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


def test_pdr_drops_the_edge_clauses_lowest_free_does_not_need(tmp_path: Path) -> None:
    """Above the small size the orbit route finds "a request that needs the whole pool
    owns every page" among its clauses; the properties do not need it, so the saved
    certificate leaves it out and re-checks."""
    system = _lowest_free(3, 6)
    out = run_pdr(system, timeout=300, save_proof=True, proofs_dir=tmp_path)
    assert all(v.status == Status.PROVED for v in out.verdicts), out.verdicts
    (cert,) = tmp_path.glob("*.json")
    doc = json.loads(cert.read_text())
    route = doc["stats"]["orbit_route"]
    assert route.get("edge_clauses_dropped", 0) > 0, route
    readable = doc["invariant"]["readable"]
    assert not any("need[r] != 6" in r or "need[r] == 6" in r for r in readable), readable
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
