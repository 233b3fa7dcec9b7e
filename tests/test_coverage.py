"""Coverage and vacuity: every run says what it saw fire, and a design whose abort can
never happen does not pass silently."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ALL_MODELS, run_cli, system_of

from kvspec.coverage import coverage_of, vacuous_invariants
from kvspec.engines.explicit import explore
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.runner import run

#: abort needs a timer that is never armed: it can never fire
DEAD_ABORT = '''
import enum
from kvspec import Int, Model, Request, Requests, action, emit, invariant, require

class Phase(enum.Enum):
    NEW = 0
    RUNNING = 1
    DONE = 2

class DeadAbort(Model):
    requests = Requests(2)
    phase = requests.var(Phase, init=Phase.NEW)
    armed = requests.var(bool, init=False)
    level = requests.var(Int(0, 3), init=0)

    @action
    def start(s, r: Request):
        require(s.phase[r] == Phase.NEW)
        s.phase[r] = Phase.RUNNING
        emit.admit(r)

    @action
    def finish(s, r: Request):
        require(s.phase[r] == Phase.RUNNING)
        s.phase[r] = Phase.DONE
        emit.finish(r)

    @action
    def abort(s, r: Request):
        require(s.phase[r] == Phase.RUNNING and s.armed[r])
        s.phase[r] = Phase.DONE
        emit.abort(r)

    @action
    def pair(s, a: Request, b: Request):
        """Only with another request (a == b never fires)."""
        require(a != b and s.phase[a] == Phase.RUNNING and s.phase[b] == Phase.RUNNING)
        s.level[a] = 1

    @invariant
    def level_in_range(s):
        return all(s.level[r] >= 0 for r in s.requests)

    @invariant
    def level_low(s):
        return all(s.level[r] <= 1 for r in s.requests)
'''


@pytest.fixture
def dead_abort(write_model) -> Path:  # type: ignore[no-untyped-def]
    return write_model(DEAD_ABORT, "dead_abort.py")


def test_dead_action_is_reported_as_never_firing(dead_abort: Path) -> None:
    cov = coverage_of(compile_model(load_model(dead_abort)))
    assert cov.complete
    assert cov.dead_actions == ["abort"]
    assert cov.actions["start"] > 0 and cov.actions["abort"] == 0
    assert {"abort(r0)", "abort(r1)", "pair(r0, r0)", "pair(r1, r1)"} <= set(cov.dead_instances)
    assert cov.instances["pair(r0, r1)"] > 0
    assert cov.events.get("abort", 0) == 0 and cov.events["admit"] > 0
    doc = cov.to_json()
    assert doc["dead_actions"] == ["abort"] and doc["complete"] is True


def test_vacuous_invariant_is_named(dead_abort: Path) -> None:
    system = compile_model(load_model(dead_abort))
    # level >= 0 holds for every value of Int(0, 3); level <= 1 does not
    assert vacuous_invariants(system) == ["level-in-range"]


def test_verify_warns_about_a_dead_action_and_keeps_the_exit_code(dead_abort: Path) -> None:
    res = run_cli("verify", str(dead_abort), "--engine", "explicit")
    assert res.code == 0, res.out
    assert "action abort never fires in any reachable state" in res.out
    assert "invariant level-in-range is true in every state of the types" in res.out
    warnings = [line for line in res.err.splitlines() if line.startswith("kvspec: warning:")]
    assert any("action abort never fires in any reachable state" in w for w in warnings)
    assert any("level-in-range" in w for w in warnings)


def test_incomplete_exploration_does_not_claim_never(
        dead_abort: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kvspec.runner.RUNNER_MAX_STATES", 2)
    res = run_cli("verify", str(dead_abort), "--engine", "explicit", "--max-states", "2",
                  "--no-symmetry")
    assert res.code == 3
    assert "never fires in any reachable state" not in res.out + res.err
    assert "not seen in the" in res.out and "states explored" in res.out
    assert "kvspec: warning: coverage" not in res.err  # an unknown run: the report says it


def test_symbolic_engines_attach_coverage_in_json(dead_abort: Path) -> None:
    res = run_cli("verify", str(dead_abort), "--engine", "bmc", "--depth", "3", "--json")
    doc = json.loads(res.out)
    assert doc["coverage"]["dead_actions"] == ["abort"]
    assert doc["coverage"]["complete"] is True
    assert "abort" in res.err  # the warning also goes to stderr with --json


def test_events_no_property_watches_are_not_findings() -> None:
    # single_node never emits drain, which none of its properties watches
    system = system_of("single_node.py")
    cov = coverage_of(system)
    assert cov.complete and cov.unseen_events == {}
    assert "drain" not in cov.events


def test_unseen_events_of_a_property(write_model) -> None:  # type: ignore[no-untyped-def]
    path = write_model(DEAD_ABORT.replace("emit.admit(r)", "emit.admit(r)\n        emit.decode(r)"),
                       "no_reject.py")
    result = run(compile_model(load_model(path), {}, ["no-decode-after-rejection"]),
                 "explicit")
    assert result.coverage is not None
    assert result.coverage.unseen_events == {"no-decode-after-rejection": ["reject", "read"]}
    assert result.to_json()["coverage"]["unseen_events"] == {
        "no-decode-after-rejection": ["reject", "read"]}


@pytest.mark.parametrize("model", ALL_MODELS)
def test_symmetry_reduced_coverage_agrees_with_the_plain_exploration(model: str) -> None:
    """Under symmetry an instance counts when a symmetric image of it fires: the dead
    instances and actions are exactly those of the exploration without symmetry."""
    system = system_of(model, {"requests": 2, "pages": 3})
    reduced = explore(system, symmetry=True).coverage
    plain = coverage_of(system)
    assert reduced is not None and reduced.complete and plain.complete
    assert reduced.dead_instances == plain.dead_instances
    assert reduced.dead_actions == plain.dead_actions
    assert set(reduced.events) == set(plain.events)


def test_symmetry_reduced_dead_instances_of_the_dead_abort_model(dead_abort: Path) -> None:
    system = compile_model(load_model(dead_abort))
    reduced = explore(system, symmetry=True).coverage
    assert reduced is not None and reduced.symmetry
    assert reduced.dead_instances == coverage_of(system).dead_instances


def test_coverage_budget_marks_it_incomplete() -> None:
    cov = coverage_of(system_of("patched.py"), max_states=50)
    assert not cov.complete and cov.states >= 50


def test_the_report_keeps_the_coverage_of_the_larger_exploration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that stopped after a handful of states (here a state cap; in ``auto``
    at large sizes, its explicit stage) does not hide what the runner's own, larger
    exploration saw, even when neither is complete."""
    import kvspec.runner as runner
    monkeypatch.setattr(runner, "RUNNER_MAX_STATES", 200)
    result = run(system_of("patched.py"), "explicit", max_states=5)
    assert result.coverage is not None and not result.coverage.complete
    assert result.coverage.states >= 200


def test_walks_reach_every_action_where_a_search_gets_nowhere() -> None:
    """At requests=8, pages=64 a breadth-first search expands a handful of states in its
    budget; the random walks still see every action and watched event fire, so a proof
    at that size is not followed by warnings about actions that merely were not
    reached."""
    system = system_of("patched.py", {"requests": 8, "pages": 64})
    cov = coverage_of(system, max_states=20_000, timeout=20.0)  # walks: 5 s at most
    assert not cov.complete
    assert cov.dead_actions == [] and cov.unseen_events == {}


def test_walks_do_not_make_a_dead_action_fire(dead_abort: Path) -> None:
    """What a walk records fired in a reachable state: 2,000 steps of walks see every
    live action and never the dead one."""
    from kvspec.coverage import CoverageRecorder, _walks

    system = compile_model(load_model(dead_abort))
    rec = CoverageRecorder(system)
    steps = _walks(system, rec, timeout=None, max_states=2_000)
    cov = rec.result(complete=False, states=steps)
    assert steps == 2_000
    assert cov.dead_actions == ["abort"]


def test_a_search_stops_at_its_deadline_within_one_state() -> None:
    """Expanding one state at a large size takes seconds under symmetry reduction; the
    deadline is kept within the expansion, and the cut state leaves the search
    incomplete."""
    import time

    from kvspec.engines.explicit import Limits

    system = system_of("patched.py", {"requests": 8, "pages": 64})
    start = time.monotonic()
    out = explore(system, symmetry=True, limits=Limits(timeout=0.5), backend="python")
    assert time.monotonic() - start < 2.5
    assert not out.complete and out.stopped == "timeout"
