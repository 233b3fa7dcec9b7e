"""Tests for kvspec.testing, the helpers for checking models inside a test suite."""

from __future__ import annotations

import unittest
from pathlib import Path

import pytest
from hypothesis import Verbosity

from kvspec.engines.fuzz import PropertyViolation
from kvspec.testing import (assert_holds, assert_violates, check, fuzz_test, load,
                            random_schedule, schedule_trace)
from kvspec.trace import Trace
from kvspec.verdict import Status

MODELS = Path(__file__).resolve().parents[1] / "models"
NRBW = "no-read-beyond-written"

# what a user writes: pytest collects this class and runs the model's state machine
TestSingleNodeFuzz = fuzz_test(MODELS / "single_node.py", max_examples=15, steps=20)


def test_assert_holds_passes_on_safe_models() -> None:
    result = assert_holds(MODELS / "single_node.py")
    assert all(v.status is Status.HOLDS for v in result.verdicts)
    assert_holds(str(MODELS / "patched.py"), properties=[NRBW])


def test_assert_holds_reports_each_failing_property_with_its_counterexample() -> None:
    with pytest.raises(AssertionError) as info:
        assert_holds(MODELS / "buggy_pd.py")
    text = str(info.value)
    assert text.startswith("BuggyPD (requests=2, pages=4, prefill_capacity=2, max_need=3), engine "
                           "explicit: 3 of 4 properties not shown to hold")
    assert "no-read-beyond-written: VIOLATED (explicit, 9 steps)" in text
    assert "  9. decode(r0)" in text and "no-reuse-before-drain" not in text


def test_assert_holds_rejects_unknown() -> None:
    with pytest.raises(AssertionError, match=r"UNKNOWN \(explicit, state limit"):
        assert_holds(MODELS / "patched.py", max_states=50)


def test_assert_violates_returns_the_trace() -> None:
    trace = assert_violates(MODELS / "buggy_pd.py", NRBW, max_steps=9)
    assert isinstance(trace, Trace) and len(trace) == 9 and trace.prop == NRBW
    with pytest.raises(AssertionError, match="has 9 steps, more than 5"):
        assert_violates(MODELS / "buggy_pd.py", NRBW, max_steps=5)
    with pytest.raises(AssertionError, match=f"expected {NRBW} to be VIOLATED, got HOLDS"):
        assert_violates(MODELS / "single_node.py", NRBW)


def test_check_with_the_fuzz_engine_and_bad_arguments() -> None:
    result = check(MODELS / "free_before_drain.py", engine="fuzz", max_examples=20, steps=20,
                   seed=1, properties=["no-reuse-before-drain"])
    assert result.engine == "fuzz" and result.verdicts[0].status is Status.VIOLATED
    with pytest.raises(ValueError, match="unknown engine"):
        check(MODELS / "patched.py", engine="magic")
    system = load(MODELS / "patched.py")
    assert load(system) is system
    bigger = load(system, sizes={"requests": 3}, properties=[NRBW])
    assert bigger.sizes["requests"] == 3 and [p.name for p in bigger.properties] == [NRBW]
    with pytest.raises(ValueError, match="applies to a model path"):
        load(system, model_class="PatchedPD")


def test_fuzz_test_case_fails_with_the_concrete_schedule() -> None:
    case = fuzz_test(MODELS / "buggy_pd.py", properties=["rejection-is-terminal"],
                     max_examples=40, steps=15, seed=3, verbosity=Verbosity.quiet)
    assert issubclass(case, unittest.TestCase)
    result = unittest.TestResult()
    case("runTest").run(result)
    assert len(result.failures) == 1
    text = result.failures[0][1]
    assert PropertyViolation.__name__ in text
    assert "violates rejection-is-terminal: alloc(" in text and "schedule (" in text


def test_schedule_trace_of_any_run() -> None:
    system = load(MODELS / "patched.py")
    schedule = random_schedule(system, 30, seed=1)
    assert schedule == random_schedule(system, 30, seed=1) and len(schedule) > 5
    doc = schedule_trace(system, schedule)
    assert doc["format"] == "kvspec-trace/1" and doc["property"] is None and doc["reason"] is None
    assert [s["label"] for s in doc["steps"]] == [i.label() for i in schedule]
    assert all(s["violation"] is None for s in doc["steps"])

    buggy = load(MODELS / "buggy_pd.py")
    trace = assert_violates(buggy, "rejection-is-terminal")
    doc = schedule_trace(buggy, [s.instance for s in trace.steps])
    assert doc["property"] == "rejection-is-terminal" and doc["steps"][-1]["violation"] is not None
    with pytest.raises(ValueError, match="step 1: prealloc"):
        schedule_trace(buggy, [trace.steps[-1].instance])
