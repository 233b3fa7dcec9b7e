"""Re-checking a size-specific certificate one orbit at a time (as ``check-proof``
does), at a size above the default: the stored certificate is accepted, one with a
needed clause removed (its checksum and counts kept consistent, so only the logic
can catch it) is rejected with a counterexample to induction that really is one,
and the queries that the local part of the invariant cannot refute are decided by
the whole of it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import z3
from conftest import ROOT, run_cli, system_of

from kvspec.lang.schema import State
from kvspec.lang.system import System
from kvspec.proofs.certificate import check_certificate, invariant_digest
from kvspec.proofs.clauses import parse_invariant
from kvspec.proofs.orbit_queries import OrbitQueries
from kvspec.proofs.orbits import Orbits, Renaming, check_orbits, representatives_view
from kvspec.proofs.smt_check import Encoding, _Substitution

CERT = ROOT / "proofs" / "lowest_free.LowestFreePD.requests=3,pages=8.json"
SIZES = {"requests": 3, "pages": 8}
DIMS = (True, False)  # lowest_free orders its pages: symmetric in requests only
#: a clause the invariant needs (at every page): without it, release breaks the invariant
NEEDED = "for all p: not landed[p] or owner[p] == page_written[p] @ p="

pytestmark = pytest.mark.skipif(not CERT.exists(), reason="no stored (3,8) certificate")


@pytest.fixture(scope="module")
def system() -> System:
    return system_of("lowest_free.py", SIZES)


def _without(prefix: str, out: Path) -> Path:
    """The certificate with every clause whose label starts with ``prefix`` removed,
    every count and the checksum recomputed (a careful forgery: only the re-check
    itself can catch it). Every page's instance goes: with one left, renaming pages
    (which check-proof tries first) would restore the others."""
    doc = json.loads(CERT.read_text())
    inv = doc["invariant"]
    gone = [k for k, label in enumerate(inv["readable"]) if label.startswith(prefix)]
    assert len(gone) == SIZES["pages"]
    lines = inv["smtlib2"].splitlines()
    asserts = [i for i, line in enumerate(lines) if line.startswith("(assert")]
    for k in reversed(gone):
        at = asserts[k]
        assert lines[at - 1].startswith(";")
        del lines[at - 1:at + 1]  # the assert and its comment
    smt = "\n".join(lines) + "\n"
    readable = [label for k, label in enumerate(inv["readable"]) if k not in gone]
    inv.update(smtlib2=smt, readable=readable, clauses=len(readable),
               sha256=invariant_digest(smt, readable))
    out.write_text(json.dumps(doc))
    return out


def _instances(system: System, smt: str) -> list[z3.BoolRef]:
    """Every instance (renaming) of the certificate's representative clauses."""
    formulas = [c.formula for c in parse_invariant(smt, system.state_vars())]
    orbits = Orbits(Renaming(system, DIMS), formulas, [""] * len(formulas))
    return [orbits.term(k, images) for k, images, _ in orbits.every_instance()]


def _false_on(system: System, state: State, terms: list[z3.BoolRef]) -> int:
    cur = system.state_vars()
    at = _Substitution([(v, z3.BoolVal(bool(x)) if z3.is_bool(v) else z3.IntVal(int(x)))
                        for v, x in zip(cur, state)])
    return sum(1 for t in terms if not z3.is_true(z3.simplify(at(t))))


def test_the_stored_certificate_is_accepted_one_orbit_at_a_time(system: System) -> None:
    check = check_certificate(CERT, system)
    assert check.ok, check.problems
    assert set(check.properties) == {p.name for p in system.properties}
    # check-proof renames pages too where the model allows (tests/test_partial_symmetry.py);
    # the certificate's own symmetry, requests only, proves it as well
    smt = json.loads(CERT.read_text())["invariant"]["smtlib2"]
    formulas = [c.formula for c in parse_invariant(smt, system.state_vars())]
    report = check_orbits(system, formulas, [""] * len(formulas), list(system.properties),
                          DIMS)
    assert report.ok, report.problems
    assert report.unrenamed == {}


def test_a_certificate_without_a_needed_clause_is_rejected(system: System,
                                                            tmp_path: Path) -> None:
    forged = _without(NEEDED, tmp_path / CERT.name)
    check = check_certificate(forged, system)
    assert not check.ok
    assert not any("checksum" in p or "clauses, but" in p for p in check.problems)
    assert any("not inductive" in p for p in check.problems), check.problems
    # the counterexample is genuine: its state satisfies every instance of what is
    # left, and the step (re-executed concretely) leaves the invariant
    assert check.cti is not None
    left = _instances(system, json.loads(forged.read_text())["invariant"]["smtlib2"])
    assert _false_on(system, check.cti.pre, left) == 0
    assert _false_on(system, check.cti.trace.steps[0].state, left) > 0


def fresh_queries(system: System) -> tuple[OrbitQueries, Encoding, Orbits]:
    """The orbit queries of the stored certificate's invariant, with no solver made yet."""
    smt = json.loads(CERT.read_text())["invariant"]["smtlib2"]
    formulas = [c.formula for c in parse_invariant(smt, system.state_vars())]
    ren = Renaming(system, DIMS)
    orbits = Orbits(ren, formulas, [""] * len(formulas))
    enc = Encoding(representatives_view(system, DIMS))
    return OrbitQueries(enc, ren, orbits, 60_000), enc, orbits


@pytest.fixture(scope="module")
def queries(system: System) -> tuple[OrbitQueries, Encoding, Orbits]:
    return fresh_queries(system)


def test_a_goal_the_local_part_cannot_refute_is_decided_by_the_whole(queries) -> None:
    """Negate an instance over page slots and ask with no vocabulary: the local part
    (the shared slots' instances) allows it, the whole invariant refutes it."""
    q, _, orbits = queries
    n = next(n for n, (_, _, slots) in enumerate(q.everything) if slots - q.shared)
    k, images, _ = q.everything[n]
    before = q.queries
    res, why = q.ask([z3.Not(orbits.term(k, images))], set())
    assert res == z3.unsat and why is None
    assert q.queries - before == 2  # the local query, then the whole invariant


def test_a_satisfiable_goal_gets_a_state_of_the_whole_invariant(queries, system) -> None:
    """``sat`` is only ever the whole invariant's answer: its model satisfies every
    instance and every domain (the goal here is a slot outside the local part)."""
    q, enc, orbits = queries
    slot = next(i for i in range(len(enc.cur)) if i not in q.shared and z3.is_bool(enc.cur[i]))
    res, model = q.ask([enc.cur[slot] == z3.BoolVal(not system.initial[slot])], {slot})
    if res == z3.unsat:  # the invariant may fix this slot: then try the other value
        res, model = q.ask([enc.cur[slot] == z3.BoolVal(bool(system.initial[slot]))], {slot})
    assert res == z3.sat
    state = enc.state_of(model)
    every = [orbits.term(k, images) for k, images, _ in q.everything]
    assert _false_on(system, state, every) == 0
    assert all(enc.value_in_domain(i, x) for i, x in enumerate(state))


def test_a_kept_local_solver_forgets_each_query_s_goal(system: System) -> None:
    """Queries with the same vocabulary share one local solver: a goal asked before
    must not stay asserted there (it would refute the next query's goal, a wrong
    ``unsat``), and a goal refuted locally stays refuted when asked again."""
    q, enc, orbits = fresh_queries(system)
    # a goal the local premise refutes: an instance of the invariant over page 0's slots
    n = next(n for n, (_, _, slots) in enumerate(q.everything)
             if slots - q.shared and len(q.local(slots | q.shared)) < len(q.everything) // 2)
    k, images, slots = q.everything[n]
    vocab = set(slots)
    broken = z3.Not(orbits.term(k, images))
    # and one over the same vocabulary that every state satisfies
    allowed = enc.cur[min(slots)] == enc.cur[min(slots)]
    for _ in range(3):
        before = q.queries
        assert q.ask([broken], vocab)[0] == z3.unsat
        assert q.queries - before == 1  # refuted by the local premise alone
        assert q.ask([allowed], vocab)[0] == z3.sat
    assert len(q._locals) == 1  # one solver for all six queries
    # two goals that contradict each other, both allowed, asked in turn with parts (a
    # part's scope inside the goal's): each must find its state
    x, vocab = next((enc.cur[i], set(slots)) for _, _, slots in q.everything
                    for i in sorted(slots - q.shared) if z3.is_bool(enc.cur[i])
                    and len(q.local(slots | q.shared)) < len(q.everything) // 2)
    for _ in range(2):
        for goal in (x, z3.Not(x)):
            assert q.ask([goal], vocab, [z3.BoolVal(True), goal])[0] == z3.sat
    assert len(q._locals) == 2


def test_a_query_that_fails_midway_leaves_the_kept_solver_as_it_was(
        system: System, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that raises (Ctrl-C, a Z3 error) inside a part's scope: the kept solver
    is back at its own scopes, so the next query with that vocabulary is not refuted
    by what the failed one asserted."""
    q, enc, _ = fresh_queries(system)
    n = next(n for n, (_, _, slots) in enumerate(q.everything)
             if slots - q.shared and len(q.local(slots | q.shared)) < len(q.everything) // 2)
    vocab = set(q.everything[n][2])
    x = enc.cur[min(vocab)]
    assert q.ask([x == x], vocab)[0] == z3.sat
    real_check = z3.Solver.check

    def fails(self: z3.Solver, *args: Any) -> z3.CheckSatResult:
        raise z3.Z3Exception("the check failed")

    monkeypatch.setattr(z3.Solver, "check", fails)
    with pytest.raises(z3.Z3Exception):
        q.ask([z3.BoolVal(False)], vocab, [z3.BoolVal(True)])
    monkeypatch.setattr(z3.Solver, "check", real_check)
    assert q.ask([x == x], vocab)[0] == z3.sat


@pytest.mark.parametrize("clause", ["(= true (forall ((x Int)) (or (< x 0) (>= x 0))))",
                                    "(distinct false (exists ((x Int)) (= x 0)))"])
def test_a_quantifier_under_an_equality_is_rejected_not_a_crash(clause: str,
                                                                 tmp_path: Path) -> None:
    """A representative clause must be quantifier-free, wherever the quantifier sits (an
    argument of ``=`` is looked at as a possible id-valued slot first)."""
    doc = json.loads(CERT.read_text())
    inv = doc["invariant"]
    smt = inv["smtlib2"] + "; extra\n(assert " + clause + ")\n"
    readable = inv["readable"] + ["extra"]
    inv.update(smtlib2=smt, readable=readable, clauses=len(readable),
               sha256=invariant_digest(smt, readable))
    forged = tmp_path / CERT.name
    forged.write_text(json.dumps(doc))
    res = run_cli("check-proof", str(forged), str(ROOT / "models" / "lowest_free.py"))
    assert res.code == 1, res.out + res.err
    assert "has a quantifier" in res.out and "certificate REJECTED" in res.out


def test_check_proof_says_the_sizes_it_checked_and_rejects_sizes_the_model_refuses(
        tmp_path: Path) -> None:
    """Without ``--size`` the certificate's own sizes are used, and the PROVED line names
    them; a certificate whose sizes the model does not take is rejected (exit 1), not
    blamed on the model."""
    model = str(ROOT / "models" / "lowest_free.py")
    res = run_cli("check-proof", str(CERT), model)
    assert res.code == 0
    assert "PROVED (certificate re-checked at requests=3, pages=8, " in res.out
    doc = json.loads(CERT.read_text())
    doc["sizes"]["pages"] = 0
    bad = tmp_path / CERT.name
    bad.write_text(json.dumps(doc))
    res = run_cli("check-proof", str(bad), model)
    assert res.code == 1 and res.err == ""
    assert "the certificate is for sizes {'requests': 3, 'pages': 0}" in res.out
