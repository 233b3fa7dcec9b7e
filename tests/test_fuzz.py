"""Tests for kvspec.engines.fuzz: stateful Hypothesis generated from a model."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test

from kvspec.cli import main
from kvspec.engines.explicit import explore
from kvspec.engines.fuzz import (FuzzCounters, PropertyViolation, fuzz_settings,
                                 minimize_schedule, run_fuzz, state_machine)
from kvspec.testing import load
from kvspec.trace import instance_by_label
from kvspec.verdict import Status

MODELS = Path(__file__).resolve().parents[1] / "models"
NDAR, RIT, NRBW, NRBD = ("no-decode-after-rejection", "rejection-is-terminal",
                         "no-read-beyond-written", "no-reuse-before-drain")
BIG = {"requests": 8, "pages": 64}


def test_machine_has_one_rule_per_action_and_one_invariant_per_property() -> None:
    system = load(MODELS / "buggy_pd.py")
    machine = state_machine(system)
    rules = {r.function.__name__: r for r in machine.setup_state().rules}
    assert set(rules) == {a.name for a in system.actions} | {"no_action_enabled"}
    assert sorted(rules["prealloc"].arguments) == ["p", "r"]  # the action's parameters
    assert all(len(rules[a.name].preconditions) == 1 for a in system.actions)
    names = {i.function.__name__ for i in machine.setup_state().invariants}
    assert names == {"holds_" + p.name.replace("-", "_") for p in system.properties}
    with pytest.raises(ValueError, match="unknown property 'nope'"):
        state_machine(system, properties=["nope"])


def test_violation_is_found_shrunk_and_concretized() -> None:
    system = load(MODELS / "buggy_pd.py")
    outcome = run_fuzz(system, max_examples=40, steps=30, seed=1, shrink_steps=300)
    verdicts = {v.prop: v for v in outcome.verdicts}
    shortest = {v.prop: len(v.trace) for v in explore(system).verdicts if v.trace}
    for prop in (NDAR, RIT, NRBW):
        v = verdicts[prop]
        assert v.status is Status.VIOLATED and v.method == "fuzz"
        assert v.trace is not None and v.detail == f"{len(v.trace)} steps (shrunk)"
        assert len(v.trace) == shortest[prop]  # the minimizer reaches the explicit engine's length
        assert v.trace.violation is not None and v.trace.violation.prop == prop
    assert verdicts[NRBD].status is Status.UNKNOWN
    assert outcome.engine == "fuzz" and outcome.stats.states > 0
    assert outcome.stats.extra["fuzz"]["seed"] == 1


def test_patched_model_is_never_claimed_to_hold() -> None:
    system = load(MODELS / "patched.py")
    outcome = run_fuzz(system, max_examples=20, steps=25, seed=0)
    for v in outcome.verdicts:
        assert v.status is Status.UNKNOWN and v.method == "fuzz" and v.trace is None
        assert "not exhaustive" in v.detail and "× 25 steps" in v.detail
    assert outcome.stats.states >= 20  # every example took steps


def test_big_sizes_find_and_shrink_quickly() -> None:
    system = load(MODELS / "buggy_pd.py", sizes=BIG, properties=[RIT])
    (v,) = run_fuzz(system, max_examples=30, steps=30, seed=0, shrink_steps=300).verdicts
    assert v.status is Status.VIOLATED and v.trace is not None
    assert [s.instance.label() for s in v.trace.steps] == [
        "arrive(r0, 3)", "admission(r0)", "prealloc(r0, page 0)"]


def test_big_sizes_run_without_violation_on_patched() -> None:
    system = load(MODELS / "patched.py", sizes=BIG)
    outcome = run_fuzz(system, max_examples=8, steps=40, seed=3)
    assert all(v.status is Status.UNKNOWN for v in outcome.verdicts)
    assert outcome.stats.states > 100 and outcome.stats.depth == 40


def test_same_seed_same_result() -> None:
    system = load(MODELS / "free_before_drain.py", properties=[NRBD])
    runs = [run_fuzz(system, max_examples=20, steps=20, seed=1, shrink_steps=500)
            for _ in range(2)]
    labels = [[s.instance.label() for s in r.verdicts[-1].trace.steps] for r in runs]  # type: ignore[union-attr]
    assert labels[0] == labels[1] and runs[0].stats.states == runs[1].stats.states


def test_timeout_gives_unknown() -> None:
    system = load(MODELS / "patched.py", sizes=BIG)
    outcome = run_fuzz(system, max_examples=10_000, steps=50, seed=0, timeout=0.5)
    assert outcome.stats.seconds < 10
    assert all(v.status is Status.UNKNOWN and "timeout" in v.detail for v in outcome.verdicts)


def test_minimize_schedule_drops_noise_and_renames_ids() -> None:
    system = load(MODELS / "free_before_drain.py", sizes={"requests": 3, "pages": 5})
    steps: list[tuple[str, dict[str, Any]]] = [("arrive", {"r": "r2", "n": 2}), ("arrive", {"r": "r1", "n": 1}),
             ("admission", {"r": "r1"}), ("admission", {"r": "r2"}),
             ("prealloc", {"r": "r1", "p": 4}), ("prealloc", {"r": "r2", "p": 0}),
             ("send_chunk", {"r": "r1", "p": 4}), ("abort", {"r": "r1"}), ("land", {"p": 4})]
    schedule = [instance_by_label(system, name, args) for name, args in steps]
    small = minimize_schedule(system, schedule, NRBD)
    assert [i.label() for i in small] == ["arrive(r0, 1)", "admission(r0)", "prealloc(r0, page 0)",
                                          "send_chunk(r0, page 0)", "abort(r0)", "land(page 0)"]
    assert minimize_schedule(system, schedule[:3], NRBD) == schedule[:3]  # not a counterexample


def test_model_invariants_are_checked(tmp_path: Path) -> None:
    model = tmp_path / "counter.py"
    model.write_text(textwrap.dedent('''
        from kvspec import Int, Model, Request, Requests, action, invariant, require

        class Counter(Model):
            requests = Requests(2)
            hits = requests.var(Int(0, 4), init=0)

            @action
            def hit(s, r: Request):
                require(s.hits[r] < 4)
                s.hits[r] = s.hits[r] + 1

            @invariant
            def at_most_two(s):
                """No request is hit three times."""
                return all(s.hits[r] <= 2 for r in s.requests)
    '''))
    system = load(model)
    (v,) = [v for v in run_fuzz(system, max_examples=30, steps=10,
                                                 shrink_steps=300).verdicts if v.prop == "at-most-two"]
    assert v.status is Status.VIOLATED and len(v.trace) == 3  # type: ignore[arg-type]


def test_failures_are_recorded_and_raised_as_property_violation() -> None:
    system = load(MODELS / "buggy_pd.py", properties=[RIT])
    counters = FuzzCounters()
    machine = state_machine(system, counters=counters)
    with pytest.raises(PropertyViolation) as info:
        run_state_machine_as_test(machine, settings=fuzz_settings(max_examples=50, steps=20))
    assert info.value.props == [RIT] and "schedule (" in str(info.value)
    assert counters.failures and counters.steps > 0 and counters.examples > 0


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out, err)
    return code, out.getvalue(), err.getvalue()


def test_cli_fuzz_writes_a_result_that_replay_accepts(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out_file = tmp_path / "fuzz.json"
    code, out, _ = _cli(["fuzz", str(MODELS / "free_before_drain.py"), "--size",
                         "requests=3,pages=8", "--property", NRBD, "--max-examples", "30",
                         "--steps", "20", "--seed", "2", "--json", "-o", str(out_file)])
    doc = json.loads(out)
    assert code == 1 and doc["engine"] == "fuzz" and json.loads(out_file.read_text()) == doc
    (violated,) = [v for v in doc["verdicts"] if v["status"] == "VIOLATED"]
    assert violated["property"] == NRBD and violated["detail"].endswith("(shrunk)")
    code, out, _ = _cli(["replay", str(out_file), "--device", "cpu"])
    assert code == 1 and "LATE" in out and "aftermath" in out


def test_cli_fuzz_patched_exits_unknown() -> None:
    code, out, _ = _cli(["fuzz", str(MODELS / "patched.py"), "--max-examples", "5", "--steps",
                         "10"])
    assert code == 3 and "UNKNOWN" in out and "HOLDS" not in out


BOOL_PARAM_MODEL = '''
import enum
from kvspec import Model, Request, Requests, action, invariant, require


class Phase(enum.Enum):
    NEW = 0
    DONE = 1


class BoolParam(Model):
    requests = Requests(3)
    phase = requests.var(Phase, init=Phase.NEW)
    fast = requests.var(bool, init=False)

    @action
    def start(s, r: Request, b: bool):
        require(s.phase[r] == Phase.NEW and not b)
        s.phase[r] = Phase.DONE
        s.fast[r] = b

    @action
    def speed_up(s, b: bool, r: Request):
        require(s.phase[r] == Phase.DONE and b and not s.fast[r])
        s.fast[r] = b

    @invariant
    def not_all_fast(s):
        return not (s.fast[0] and s.fast[1] and s.fast[2])
'''


def test_bool_parameters_are_drawn_and_passed_as_bools(tmp_path: Path) -> None:
    """``(False,)`` and ``(0,)`` are equal tuples: a cached strategy for one must not
    serve the other (a request drawn as ``False``: "phase[False]: index out of range")."""
    model = tmp_path / "bool_param.py"
    model.write_text(BOOL_PARAM_MODEL)
    system = load(model)
    out = run_fuzz(system, max_examples=60, steps=12, seed=0)
    (v,) = [v for v in out.verdicts if v.prop == "not-all-fast"]
    assert v.status is Status.VIOLATED and len(v.trace) == 6  # type: ignore[arg-type]
    assert all(v.status is Status.UNKNOWN for v in out.verdicts if v.prop != "not-all-fast")

    seen: list[tuple[str, tuple[Any, ...]]] = []

    class Recording(state_machine(system, properties=())):  # type: ignore[misc]
        def after_step(self, result: Any) -> None:
            seen.append((result.instance.action.name, result.instance.args))

    run_state_machine_as_test(Recording, settings=fuzz_settings(max_examples=40, steps=10))
    assert {name for name, _ in seen} == {"start", "speed_up"}
    for name, args in seen:
        flag, request = (args[1], args[0]) if name == "start" else args
        assert type(flag) is bool and type(request) is int
