"""``kvspec audit --picture``: the first violating window of a log, drawn by the
replay/render renderer (kvspec/audit/picture.py)."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from kvspec.audit.mapping import Mapping
from kvspec.audit.picture import WINDOW, window_trace
from kvspec.audit.run import audit_file
from kvspec.render.style import dot_available
from kvspec.render.timeline import validate_trace
from kvspec.render.trace_graph import trace_dot

from test_audit import MODELS, cli, write_log


def test_dot_picture_names_the_requests_pages_and_violating_event(tmp_path: Path) -> None:
    log = write_log(tmp_path / "fbd.jsonl", "free_before_drain", 60, seed=3)
    out = tmp_path / "window.dot"
    code, text, err = cli(str(log), "--model", str(MODELS / "free_before_drain.py"),
                          "--size", "requests=8,pages=32", "--picture", str(out))
    assert code == 1, err
    assert f"picture of the first violating window: {out}" in text
    dot = out.read_text()
    result = audit_file(log, Mapping())
    first = min(result.findings.values(), key=lambda f: f.event.line)
    ev = first.event
    assert f"line {ev.line}" in dot and ev.request in dot
    assert "decode-0:" in dot  # the log's page names
    assert first.check in dot and "violated" in dot
    assert "#D62728" in dot  # the violating event in the renderer's violation red


def test_window_is_the_involved_requests_and_pages_ending_at_the_violation(tmp_path: Path
                                                                           ) -> None:
    log = write_log(tmp_path / "buggy.jsonl", "buggy_pd", 40, seed=3)
    result = audit_file(log, Mapping())
    trace = window_trace(log, Mapping(), result)
    assert trace is not None
    validate_trace(trace)  # a well-formed kvspec-trace/1
    steps = trace["steps"]
    assert 1 <= len(steps) <= WINDOW
    first = min(result.findings.values(), key=lambda f: f.event.line)
    assert steps[-1]["label"] == f"line {first.event.line}: {first.event.text()}"
    assert steps[-1]["violation"]["property"] == first.check
    lines = [int(re.match(r"line (\d+):", s["label"]).group(1)) for s in steps]
    assert lines == sorted(lines)
    names = {v for k, v in trace["sizes"].items() if k.startswith("r")}
    assert first.event.request in names
    # every drawn event is of a drawn request; its pages are named in the legend
    legend_pages = {k for k in trace["sizes"] if k.startswith("page ")}
    for s in steps:
        (ev,) = s["events"]
        assert ev["request"] in trace["sizes"]
        if "page" in ev:
            assert f"page {ev['page']}" in legend_pages
    assert trace_dot(trace) == trace_dot(window_trace(log, Mapping(), result))  # stable


def test_no_violation_no_picture(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ok.jsonl", "patched", 30, seed=3)
    out = tmp_path / "none.svg"
    code, text, _ = cli(str(log), "--model", str(MODELS / "patched.py"), "--size",
                        "requests=8,pages=32", "--picture", str(out))
    assert code == 0 and not out.exists()
    assert "no violation: no picture written" in text


def test_picture_suffix_is_checked_like_render(tmp_path: Path) -> None:
    log = write_log(tmp_path / "ok.jsonl", "patched", 5)
    with pytest.raises(SystemExit) as exc:
        cli(str(log), "--model", str(MODELS / "patched.py"), "--picture",
            str(tmp_path / "x.txt"))
    assert exc.value.code == 2


@pytest.mark.skipif(not dot_available(), reason="Graphviz dot not installed")
def test_svg_picture(tmp_path: Path) -> None:
    log = write_log(tmp_path / "buggy.jsonl", "buggy_pd", 30, seed=3)
    out = tmp_path / "w.svg"
    code, _, _ = cli(str(log), "--model", str(MODELS / "buggy_pd.py"), "--no-conformance",
                     "--picture", str(out))
    assert code == 1
    svg = html.unescape(out.read_text())
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "req-" in svg
