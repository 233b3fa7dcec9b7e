"""What the statistics claim: a search that stopped early says so (text and JSON), and
an estimated concrete-state count is labelled as an estimate."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import MODELS, run_cli, system_of

import kvspec.engines.explicit as explicit_mod
from kvspec.engines.auto import run_auto
from kvspec.engines.explicit import Limits, explore
from kvspec.report.text import make_console, print_result
from kvspec.verdict import Result, Status

SMALL = {"requests": 2, "pages": 3}


def _text(result: Result) -> str:
    out = io.StringIO()
    print_result(make_console(out), result, "m.py")
    return out.getvalue()


def _explicit(name: str, sizes: dict[str, int] | None = None,
              properties: list[str] | None = None, **kwargs: object) -> Result:
    system = system_of(name, sizes, properties)
    out = explore(system, **kwargs)  # type: ignore[arg-type]
    return Result(system, "explicit", out.verdicts, out.stats)


def test_search_stopped_because_every_property_is_violated_says_so() -> None:
    result = _explicit("buggy_pd.py", properties=["rejection-is-terminal"])
    assert [v.status for v in result.verdicts] == [Status.VIOLATED]
    assert result.stats.extra["explicit"] == {"complete": False, "stopped": "all-violated"}
    line = _text(result).splitlines()[1]
    assert f"explicit: {result.stats.states:,} states explored before every property was " \
           "violated (search stopped early)" in line
    doc = result.to_json()
    assert doc["stats"]["explicit"] == {"complete": False, "stopped": "all-violated"}


def test_complete_search_says_nothing_about_stopping() -> None:
    result = _explicit("buggy_pd.py", SMALL)
    assert result.stats.extra["explicit"] == {"complete": True, "stopped": None}
    assert "stopped early" not in _text(result)
    assert result.to_json()["stats"]["explicit"]["complete"] is True


def test_state_limit_and_timeout_stops_are_named() -> None:
    result = _explicit("patched.py", limits=Limits(max_states=30))
    assert result.stats.extra["explicit"]["stopped"] == "state-limit"
    assert "explored before the state limit (search stopped early)" in _text(result)
    assert all(v.status is Status.UNKNOWN for v in result.verdicts)
    result = _explicit("patched.py", {"requests": 3, "pages": 6}, symmetry=False,
                       limits=Limits(timeout=1.0))
    assert result.stats.extra["explicit"]["stopped"] == "timeout"
    assert result.stats.states > 0
    assert "explored before the timeout (search stopped early)" in _text(result)


def test_timeout_before_the_search_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    def slow(system: object, enabled: bool = True) -> object:
        time.sleep(30)
        raise AssertionError("not reached")

    monkeypatch.setattr(explicit_mod, "analyse_symmetry", slow)
    result = _explicit("patched.py", limits=Limits(timeout=0.3))
    assert result.stats.extra["explicit"] == {"complete": False, "stopped": "timeout"}
    text = _text(result)
    assert "explicit: 0 states explored before the timeout (search stopped early)" in text
    assert "timeout during symmetry analysis" in text


def test_auto_reports_an_explicit_stage_that_stopped_early(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    import kvspec.engines.auto as auto_mod
    import kvspec.engines.pdr as pdr_mod
    from kvspec.verdict import EngineOutcome, Stats, Verdict

    monkeypatch.setattr(auto_mod, "SMALL_STATES", 25)
    monkeypatch.setattr(auto_mod, "QUICK_BMC_WORK", 2_000_000)
    monkeypatch.setattr(pdr_mod, "run_pdr", lambda system, **kw: EngineOutcome(
        [Verdict(p.name, Status.UNKNOWN, "pdr", "skipped") for p in system.properties],
        Stats(), "pdr"))
    system = system_of("patched.py", SMALL)
    out = run_auto(system, timeout=60, max_states=None, symmetry=True, save_proof=False,
                   proofs_dir=Path("no-such-proofs"))
    result = Result(system, "auto", out.verdicts, out.stats)
    assert "auto: " in _text(result)
    assert "explored before the state limit (search stopped early)" in _text(result)


def test_cli_json_and_text_say_the_search_stopped_early() -> None:
    model = str(MODELS / "buggy_pd.py")
    res = run_cli("verify", model, "--engine", "explicit", "--property",
                  "rejection-is-terminal", "--json")
    doc = json.loads(res.out)
    assert doc["stats"]["explicit"] == {"complete": False, "stopped": "all-violated"}
    res = run_cli("verify", model, "--engine", "explicit", "--property", "rejection-is-terminal")
    assert "(search stopped early)" in res.out


def test_estimated_concrete_count_is_labelled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(explicit_mod, "EXACT_ORBIT_LIMIT", 100)
    result = _explicit("buggy_pd.py", SMALL)
    sym = result.stats.symmetry
    assert result.stats.states > 100
    assert sym["concrete_states_exact"] is False
    assert result.to_json()["stats"]["symmetry"]["concrete_states_exact"] is False
    line = _text(result).splitlines()[1]
    assert f"symmetry ×≈{sym['reduction_factor']} (≈{sym['concrete_states']:,} concrete " \
           "states, estimated from a sample)" in line


def test_exact_concrete_count_is_not_labelled() -> None:
    result = _explicit("buggy_pd.py", SMALL)
    sym = result.stats.symmetry
    assert sym["concrete_states_exact"] is True
    no_sym = explore(system_of("buggy_pd.py", SMALL), symmetry=False)
    assert sym["concrete_states"] == no_sym.stats.states
    line = _text(result).splitlines()[1]
    assert f"symmetry ×{sym['reduction_factor']} ({sym['concrete_states']:,} concrete " \
           "states)" in line and "≈" not in line
