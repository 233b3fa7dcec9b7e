"""``auto`` budgets its stages by work (depth, solver resources, states), not seconds:
the same command gives the same verdicts on an idle and on a loaded machine."""
from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from conftest import system_of

import kvspec.engines.auto as auto
from kvspec.proofs.certificate import certificate_path, check_certificate
from kvspec.runner import run


def _verdicts(model: str, **kw: object) -> list[tuple[str, str, str, str]]:
    result = run(system_of(model, **kw), "auto", proofs_dir=None, coverage=False)  # type: ignore[arg-type]
    return [(v.prop, v.status.value, v.method, v.detail) for v in result.verdicts]


@pytest.mark.parametrize("model", ["buggy_pd.py", "single_node.py"])
def test_a_slow_clock_does_not_change_the_verdicts(model: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine so loaded that every clock reading is 5 s after the previous one: the
    old 5 s BMC / 10 s explicit stages gave up at once; work budgets do not notice."""
    idle = _verdicts(model, properties=None)
    real = time.monotonic
    ticks = itertools.count()
    monkeypatch.setattr(time, "monotonic", lambda: real() + 5.0 * next(ticks))
    loaded = _verdicts(model, properties=None)
    monkeypatch.undo()
    assert loaded == idle
    assert all(status != "UNKNOWN" for _, status, _, _ in loaded)


def test_a_small_model_is_decided_by_the_explicit_stage_alone() -> None:
    result = run(system_of("buggy_pd.py"), "auto", coverage=False)
    stages = {s["stage"]: s for s in result.stats.extra["auto"]}
    assert stages["explicit"]["complete"] is True and "bmc" not in stages
    assert [(v.status.value, v.method) for v in result.verdicts] == [
        ("VIOLATED", "explicit"), ("VIOLATED", "explicit"), ("VIOLATED", "explicit"),
        ("HOLDS", "exhaustive")]
    by_prop = {v.prop: v for v in result.verdicts}
    assert by_prop["rejection-is-terminal"].trace is not None
    assert len(by_prop["rejection-is-terminal"].trace) == 3  # shortest, as BMC's


def test_stages_report_their_work_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    # an explicit stage too small to finish: the quick BMC stage decides the shallow bugs
    monkeypatch.setattr(auto, "SMALL_STATES", 5)
    result = run(system_of("buggy_pd.py"), "auto", coverage=False)
    stages = {s["stage"]: s for s in result.stats.extra["auto"]}
    assert stages["explicit"]["complete"] is False
    bmc = stages["bmc"]
    assert bmc["work_budget"] == auto.QUICK_BMC_WORK and 0 < bmc["work"] <= auto.QUICK_BMC_WORK
    assert bmc["depth"] <= auto.QUICK_BMC_DEPTH
    by_prop = {v.prop: v for v in result.verdicts}
    assert by_prop["rejection-is-terminal"].headline() == "VIOLATED (bmc, depth 3)"
    assert by_prop["no-reuse-before-drain"].status.value == "PROVED"


def test_an_exhausted_bmc_budget_stops_the_stage_soundly(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 5)
    monkeypatch.setattr(auto, "QUICK_BMC_WORK", 1)
    result = run(system_of("buggy_pd.py"), "auto", coverage=False)
    stages = {s["stage"]: s for s in result.stats.extra["auto"]}
    assert "solver gave up" in stages["bmc"]["stopped"]
    # PDR decides instead (its own BMC finds the violations): same statuses and lengths
    assert [v.status.value for v in result.verdicts] == [
        "VIOLATED", "VIOLATED", "VIOLATED", "PROVED"]
    assert [len(v.trace) for v in result.verdicts if v.trace is not None] == [9, 3, 9]


def test_the_explicit_stage_is_capped_by_states(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond SMALL_STATES the explicit stage stops (never by seconds) and PDR decides."""
    monkeypatch.setattr(auto, "SMALL_STATES", 5)
    result = run(system_of("single_node.py", {"requests": 1, "pages": 2}), "auto",
                 coverage=False, proofs_dir=None)
    stages = {s["stage"]: s for s in result.stats.extra["auto"]}
    assert stages["explicit"]["complete"] is False and stages["explicit"]["stopped"] == \
        "state-limit"
    assert {v.method for v in result.verdicts} <= {"pdr", "certificate re-checked"}
    assert all(v.status.value == "PROVED" for v in result.verdicts)


def test_the_bmc_stage_starts_where_the_explicit_search_left_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every trace as long as the depth the explicit stage explored completely was
    already checked: BMC starts past it, and the shortest counterexamples stay shortest."""
    monkeypatch.setattr(auto, "SMALL_STATES", 60)
    result = run(system_of("buggy_pd.py"), "auto", coverage=False)
    stages = {s["stage"]: s for s in result.stats.extra["auto"]}
    assert stages["explicit"]["complete"] is False
    bmc = stages["bmc"]
    assert bmc["from_depth"] >= 2  # the explicit stage went past the first levels
    lengths = {v.prop: len(v.trace) for v in result.verdicts if v.trace is not None}
    assert lengths == {"no-decode-after-rejection": 9, "rejection-is-terminal": 3,
                       "no-read-beyond-written": 9}
    methods = {v.prop: v.method for v in result.verdicts}
    assert methods["rejection-is-terminal"] == "explicit"  # found within the explored depth
    assert methods["no-decode-after-rejection"] == "bmc"


def test_beyond_small_state_spaces_a_symmetric_model_is_proved_one_orbit_at_a_time(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """When the explicit stage stops at its budget, the small size's clauses are checked
    one orbit at a time before the whole transition system is built for BMC: a proof
    that needs neither BMC nor the full encoding, re-checked and saved as a certificate."""
    monkeypatch.setattr(auto, "SMALL_STATES", 50)
    monkeypatch.setattr(auto, "EVERY_SIZE_SECONDS", 0)  # the stage before, tested apart
    system = system_of("patched.py", {"requests": 3, "pages": 4})
    result = run(system, "auto", coverage=False, save_proof=True, proofs_dir=tmp_path)
    stages = [s["stage"] for s in result.stats.extra["auto"]]
    assert stages == ["explicit", "orbits"]
    assert all(v.status.value == "PROVED" and "orbit representatives" in v.detail
               for v in result.verdicts)
    assert check_certificate(certificate_path(system, tmp_path), system).ok


def test_the_orbit_stage_leaves_violations_to_bmc_with_their_shortest_lengths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 50)
    monkeypatch.setattr(auto, "EVERY_SIZE_SECONDS", 0)
    result = run(system_of("buggy_pd.py", {"requests": 3, "pages": 4}), "auto", coverage=False)
    stages = {s["stage"]: s for s in result.stats.extra["auto"]}
    assert stages["orbits"]["proved"] == ["no-reuse-before-drain"]
    by_prop = {v.prop: v for v in result.verdicts}
    assert by_prop["no-reuse-before-drain"].status.value == "PROVED"
    assert [(p, by_prop[p].status.value, len(by_prop[p].trace or []))
            for p in ("no-decode-after-rejection", "rejection-is-terminal",
                      "no-read-beyond-written")] == [
        ("no-decode-after-rejection", "VIOLATED", 9), ("rejection-is-terminal", "VIOLATED", 3),
        ("no-read-beyond-written", "VIOLATED", 9)]
