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


TWO_MODELS = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class Safe(Model):
    requests = Requests(2)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)
    inflight = pages.var(requests.optional, init=None)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None and not (s.owner == r).any())
        s.owner[p] = r
        emit.alloc(r, p)

    @action
    def post(s, r: Request, p: Page):
        require(s.owner[p] == r and s.inflight[p] is None)
        s.inflight[p] = r
        emit.post_write(r, p)

    @action
    def land(s, p: Page):
        w = s.inflight[p]
        require(w is not None)
        s.inflight[p] = None
        emit.land_write(w, p)

    @action
    def free(s, r: Request, p: Page):
        require(s.owner[p] == r and s.inflight[p] is None)
        s.owner[p] = None
        emit.free(r, p)


class Unsafe(Safe):
    @action
    def free(s, r: Request, p: Page):
        """Frees the page while the write posted into it can still land."""
        require(s.owner[p] == r)
        s.owner[p] = None
        emit.free(r, p)
'''
NRBD = "no-reuse-before-drain"


def test_helpers_take_model_class_sizes_and_engine(tmp_path: Path) -> None:
    path = tmp_path / "two.py"
    path.write_text(TWO_MODELS)
    result = assert_holds(path, model_class="Safe", sizes={"requests": 1}, engine="auto",
                          proofs_dir=tmp_path / "proofs")
    assert result.system.name == "Safe" and result.system.sizes == {"requests": 1, "pages": 2}
    trace = assert_violates(path, NRBD, model_class="Unsafe", engine="bmc", max_steps=4)
    # the write lands in the freed page, or another request is handed the page first
    assert [s.instance.name for s in trace.steps][:3] == ["alloc", "post", "free"]
    assert len(trace) == 4 and trace.steps[-1].instance.name in ("land", "alloc")
    result = check(path, model_class="Unsafe", sizes={"pages": 1}, engine="explicit",
                   properties=[NRBD])
    assert result.system.sizes == {"requests": 2, "pages": 1}
    assert result.verdicts[0].status is Status.VIOLATED and len(result.verdicts[0].trace) == 4
    with pytest.raises(AssertionError, match=f"{NRBD}: VIOLATED"):
        assert_holds(path, model_class="Unsafe", engine="explicit")
    case = fuzz_test(path, model_class="Unsafe", properties=[NRBD], engine="fuzz",
                     max_examples=60, steps=10, seed=2, verbosity=Verbosity.quiet)
    outcome = unittest.TestResult()
    case("runTest").run(outcome)
    assert len(outcome.failures) == 1 and f"violates {NRBD}" in outcome.failures[0][1]
    with pytest.raises(ValueError, match="fuzz_test runs the fuzz engine, not 'explicit'"):
        fuzz_test(path, model_class="Safe", engine="explicit")
    from kvspec.lang.errors import ModelError
    with pytest.raises(ModelError, match="defines several models"):
        assert_holds(path)
