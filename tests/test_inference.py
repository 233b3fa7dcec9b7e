"""Invariant inference: counting candidates, relational invariants found, per-property
needs, and every inferred invariant re-checked (a wrong one is rejected)."""
from __future__ import annotations

import random

import numpy as np
import pytest
import z3
from conftest import system_of
from hypothesis import given, settings
from hypothesis import strategies as st
from modelgen import random_model
from test_differential import compile_source

from kvspec.engines.bmc import Deadline
from kvspec.engines.explicit import Limits, explore
from kvspec.engines.selection import Strengthener, goal_templates
from kvspec.engines.inference import (
    StateTable,
    count_atoms,
    enumerate_candidates,
    sample_states,
    unique_rows,
)
from kvspec.engines.transition import TransitionSystem
from kvspec.lang.system import System
from kvspec.proofs.certificate import Invariant, verify_invariant
from kvspec.verdict import Status


def _random_state(system: System, rng: random.Random) -> tuple:
    return tuple(rng.choice(list(t.domain())) for t in system.slot_types())


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 32))
def test_count_atoms_mean_the_same_in_numpy_and_in_z3(seed: int) -> None:
    """A counting candidate evaluated on sampled states (numpy) and in the solver
    encoding (z3) agree on every binding, on arbitrary type-correct states."""
    system = system_of("lowest_free.py", {"requests": 2, "pages": 3})
    schema = system.schema
    rng = random.Random(seed)
    states = [_random_state(system, rng) for _ in range(3)]
    table = StateTable(schema, states)
    atoms = count_atoms(schema)
    assert {a.kind for a in atoms} == {"cnt", "cle"}
    assert any(a.plus for a in atoms)  # sums of two counts
    assert any(not a.other for a in atoms)  # counts against a constant
    from kvspec.engines.inference import atom_term
    for atom in atoms:
        got = table.atom(atom, ("r",))
        for k, state in enumerate(states):
            cur = [z3.BoolVal(bool(x)) if t.kind == "bool" else z3.IntVal(int(x))
                   for x, t in zip(state, system.slot_types())]
            for r in range(schema.counts["request"]):
                want = z3.is_true(z3.simplify(atom_term(atom, schema, cur, {"r": r})))
                assert bool(got[k, r]) == want, (atom, state, r)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=30))
def test_unique_rows_are_the_distinct_rows(rows: list[list[bool]]) -> None:
    mat = np.array(rows, dtype=bool)
    got = unique_rows(mat)
    assert {r.tobytes() for r in got} == {r.tobytes() for r in mat}
    assert len(got) == len({r.tobytes() for r in mat})


def _select(system: System, names: list[str] | None = None) -> Strengthener:
    schema, states = sample_states(system)
    templates = enumerate_candidates(schema, StateTable(schema, states))
    ts = TransitionSystem(system, "bv")
    st_ = Strengthener(ts, templates, goal_templates(system, templates, names), (True, False),
                       Deadline(300))
    st_.last = st_.run()  # type: ignore[attr-defined]
    return st_


def test_lowest_free_needs_the_relational_invariant() -> None:
    """no-read-beyond-written on the lowest-free design needs a clause tying the page
    arrays to the request arrays through ownership (a decoding request's pages hold
    its landed data), and the selection says which property needed it."""
    system = system_of("lowest_free.py", {"requests": 2, "pages": 2})
    sel = _select(system, ["no-read-beyond-written"])
    got = sel.last  # type: ignore[attr-defined]
    assert got.proved == ["no-read-beyond-written"] and got.errors_excluded
    needed = [sel.clause(k)[1] for k in got.needs["no-read-beyond-written"]]
    relational = [c for c in needed if c.startswith("for all p, r:") and "owner[p] != r" in c
                  and "phase[r]" in c]
    assert relational, needed
    inv = Invariant(*map(list, zip(*[sel.clause(k) for k in got.chosen])))
    assert verify_invariant(system, inv, ["no-read-beyond-written"]).ok


def _moving_slot(system: System) -> tuple[int, object] | None:
    """A slot whose value changes in some reachable state, with its initial value."""
    out = explore(system, symmetry=False, limits=Limits(max_states=400), keep_graph=True)
    for state in out.states:
        for i, (a, b) in enumerate(zip(system.initial, state)):
            if a != b:
                return i, a
    return None


@pytest.mark.parametrize("seed", [0, 4, 6])
def test_inferred_invariants_of_generated_models_recheck_and_a_tampered_one_does_not(
        seed: int, tmp_path) -> None:
    """On random models: whatever inference proves re-checks on the independent
    encoding; the same invariant with one more clause that holds initially but not
    in every reachable state ("this slot never changes") is rejected."""
    model = random_model(seed, small=True)
    _, system = compile_source(model.source, tmp_path, model.class_name)
    try:
        sel = _select(system)
    except Exception as exc:  # noqa: BLE001 - a model error in the sample: nothing to prove
        pytest.skip(f"no selection on this model: {exc}")
    got = sel.last  # type: ignore[attr-defined]
    if not got.proved or not got.errors_excluded:
        pytest.skip("inference proved nothing on this model")
    pairs = [sel.clause(k) for k in got.chosen]
    inv = Invariant([c for c, _ in pairs], [r for _, r in pairs])
    assert verify_invariant(system, inv, got.proved).ok
    moving = _moving_slot(system)
    if moving is None:
        pytest.skip("no slot of this model ever changes")
    slot, init = moving
    var = system.state_vars()[slot]
    bad = var == (z3.BoolVal(bool(init)) if z3.is_bool(var) else z3.IntVal(int(init)))
    tampered = Invariant([*inv.conjuncts, bad], [*inv.readable, f"{var} never changes"])
    check = verify_invariant(system, tampered, got.proved)
    assert not check.ok


def test_lowest_free_holds_exhaustively_at_small_sizes() -> None:
    for sizes in ({"requests": 2, "pages": 2}, {"requests": 2, "pages": 3}):
        system = system_of("lowest_free.py", sizes)
        out = explore(system, symmetry=True)
        assert out.complete
        assert [v.status for v in out.verdicts] == [Status.HOLDS] * 4, out.verdicts


def test_lowest_free_certificate_rechecks(tmp_path) -> None:
    from pathlib import Path

    from kvspec.proofs.certificate import certificate_path, check_certificate

    system = system_of("lowest_free.py")
    cert = certificate_path(system)
    assert cert.parent == Path(__file__).resolve().parent.parent / "proofs"
    check = check_certificate(cert, system)
    assert check.ok, check.problems


def test_counterexamples_propose_the_clauses_the_pool_lacks() -> None:
    """ICE-style: with a pool of clauses of at most two literals, the three-literal
    relational clause no-read-beyond-written needs is not in the pool; the
    selection proves it only when counterexamples to induction may propose new
    candidates (true on the sample, false on the counterexample's pre-state)."""
    system = system_of("lowest_free.py", {"requests": 2, "pages": 2})
    schema, states = sample_states(system)
    sample = StateTable(schema, states)
    outcomes = {}
    for ice in (False, True):
        templates = enumerate_candidates(schema, sample, max_literals=2)
        sel = Strengthener(TransitionSystem(system, "bv"), templates,
                           goal_templates(system, templates, ["no-read-beyond-written"]),
                           (True, False), Deadline(300), sample=sample if ice else None)
        got = sel.run()
        outcomes[ice] = got.proved
        if ice:
            assert sel.proposed > 0
            assert max(len(sel.templates[k].literals) for k in got.chosen
                       if k < len(sel.templates)) >= 3
            pairs = [sel.clause(k) for k in got.chosen]
            inv = Invariant([c for c, _ in pairs], [r for _, r in pairs])
            assert verify_invariant(system, inv, got.proved).ok
    assert outcomes == {False: [], True: ["no-read-beyond-written"]}
