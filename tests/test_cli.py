"""The command line: verdict lines, exit codes, JSON shape, show."""
from __future__ import annotations

import json

import pytest
from conftest import MODELS, run_cli

EXPECTED = {
    "patched.py": {"no-decode-after-rejection": "HOLDS", "rejection-is-terminal": "HOLDS",
                   "no-read-beyond-written": "HOLDS", "no-reuse-before-drain": "HOLDS"},
    "single_node.py": {"no-decode-after-rejection": "HOLDS", "rejection-is-terminal": "HOLDS",
                       "no-read-beyond-written": "HOLDS", "no-reuse-before-drain": "HOLDS"},
    "buggy_pd.py": {"no-decode-after-rejection": "VIOLATED", "rejection-is-terminal": "VIOLATED",
                    "no-read-beyond-written": "VIOLATED", "no-reuse-before-drain": "HOLDS"},
    "free_before_drain.py": {"no-decode-after-rejection": "HOLDS",
                             "rejection-is-terminal": "HOLDS",
                             "no-read-beyond-written": "HOLDS",
                             "no-reuse-before-drain": "VIOLATED"},
}


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_json_verdicts_and_exit_codes(model: str) -> None:
    result = run_cli("verify", str(MODELS / model), "--engine", "explicit", "--json")
    doc = json.loads(result.out)
    assert doc["format"] == "kvspec-result/1"
    assert {v["property"]: v["status"] for v in doc["verdicts"]} == EXPECTED[model]
    violated = any(s == "VIOLATED" for s in EXPECTED[model].values())
    assert result.code == doc["exit_code"] == (1 if violated else 0)
    assert result.err == ""  # --json is quiet
    stats = doc["stats"]
    for key in ("states", "transitions", "depth", "seconds", "states_per_s", "peak_memory_mb",
                "symmetry"):
        assert key in stats
    assert stats["symmetry"]["reduction_factor"] > 1
    for v in doc["verdicts"]:
        if v["status"] == "VIOLATED":
            trace = v["trace"]
            assert trace["format"] == "kvspec-trace/1" and trace["property"] == v["property"]
            assert trace["steps"][-1]["violation"]["property"] == v["property"]
            assert trace["reason"] == trace["steps"][-1]["violation"]["reason"]
            for step in trace["steps"]:
                assert {"index", "action", "args", "label", "events", "changes", "state",
                        "violation"} <= set(step)
        else:
            assert v["trace"] is None and v["method"] == "exhaustive"


def test_text_output_shows_a_readable_shortest_trace() -> None:
    result = run_cli("verify", str(MODELS / "free_before_drain.py"), "--engine", "explicit")
    assert result.code == 1
    out = result.out
    assert "✘ no-reuse-before-drain" in out and "VIOLATED (explicit, 6 steps)" in out
    assert "HOLDS (exhaustive, requests=2, pages=4" in out
    assert "abort(r0)" in out and "free(r0, page 0)" in out
    assert "land_write(r0, page 0): the write landed after page 0 was freed" in out
    assert "owner[0] r0 → None" in out  # only what changed
    assert "\x1b[" not in out  # no colour codes when not a terminal


def test_property_filter() -> None:
    result = run_cli("verify", str(MODELS / "buggy_pd.py"), "--engine", "explicit",
                     "--property", "no-reuse-before-drain", "--json")
    doc = json.loads(result.out)
    assert [v["property"] for v in doc["verdicts"]] == ["no-reuse-before-drain"]
    assert result.code == 0


def test_state_limit_is_unknown_never_success() -> None:
    result = run_cli("verify", str(MODELS / "patched.py"), "--engine", "explicit",
                     "--max-states", "50")
    assert result.code == 3
    assert "UNKNOWN" in result.out and "HOLDS" not in result.out


@pytest.mark.parametrize("search", [["--backend", "python"],
                                    ["--backend", "native", "--no-symmetry"]])
def test_timeout_is_unknown(search: list[str]) -> None:
    """Both backends: the search (or the native build) runs past --timeout."""
    result = run_cli("verify", str(MODELS / "patched.py"), "--engine", "explicit",
                     "--size", "requests=3,pages=8", "--timeout", "0.5", "--json", *search)
    doc = json.loads(result.out)
    assert result.code == 3
    assert {v["status"] for v in doc["verdicts"]} == {"UNKNOWN"}
    assert all("timeout" in v["detail"] for v in doc["verdicts"])


def test_sizes_are_reported_and_overridable() -> None:
    result = run_cli("verify", str(MODELS / "single_node.py"), "--engine", "explicit",
                     "--size", "requests=3", "--size", "pages=3")
    assert result.code == 0
    assert "HOLDS (exhaustive, requests=3, pages=3, capacity=2, max_need=3)" in result.out


def test_show_lists_sizes_variables_actions_properties() -> None:
    result = run_cli("show", str(MODELS / "buggy_pd.py"))
    assert result.code == 0
    out = result.out
    for fragment in ("BuggyPD", "prefill_capacity", "to_finish", "finished_reason",
                     "prealloc(r: request, p: page)", "no-read-beyond-written",
                     "page_written", "symmetry reduction over requests and pages"):
        assert fragment in out, fragment


def test_usage_error_exit_code() -> None:
    assert run_cli("verify").code == 2
    assert run_cli("frobnicate").code == 2


def test_malformed_trace_file(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = run_cli("replay", str(bad))
    assert result.code == 2 and "not JSON" in result.err
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}')
    assert "is not a kvspec trace" in run_cli("render", str(other), "-o",
                                              str(tmp_path / "x.svg")).err
