"""Tests for kvspec.render.trace_graph / timeline: the counterexample picture.

The DOT is checked at the structure level: every table cell the picture is made of
carries an ``ID`` (``h<step>`` headers, ``s<step>_r<n>`` swimlane cells,
``s<step>_p<page>`` page cells), so the cells are parsed out of the DOT and their
colours and borders asserted.
"""
from __future__ import annotations

import copy
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import graphviz
import pytest

from kvspec.cli import main
from kvspec.engines.explicit import explore
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.render import style
from kvspec.render.style import VIOLATION, GraphvizMissing, RenderError, dot_available
from kvspec.render.timeline import TraceFormatError, build_timeline, extract_trace
from kvspec.render.trace_graph import build_trace_graph, render_trace, trace_dot, trace_svg
from kvspec.verdict import Result

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
NO_DOT = "Graphviz 'dot' is not installed (apt-get install graphviz); SVG/PNG not checked"
needs_dot = pytest.mark.skipif(not dot_available(), reason=NO_DOT)


# -- helpers ---------------------------------------------------------------------------

def ev(kind: str, r: int, page: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "request": f"r{r}", "page": page}


def hand_trace(steps: list[tuple[str, list[dict[str, Any]]]], *, requests: int = 2,
               pages: int = 4, prop: str = "no-read-beyond-written",
               reason: str = "hand-written") -> dict[str, Any]:
    """A trace with events only (no state variables): the pool comes from the events."""
    out: list[dict[str, Any]] = [
        {"index": i, "action": label.split("(")[0], "args": {}, "label": label,
         "events": copy.deepcopy(events), "changes": [], "state": {}, "violation": None}
        for i, (label, events) in enumerate(steps, 1)]
    if out:
        bad = [e for e in out[-1]["events"] if e["page"] is not None][-1]
        out[-1]["violation"] = {"property": prop, "reason": reason, "event": bad}
    return {"format": "kvspec-trace/1",
            "model": {"name": "HandWritten", "file": "tests/test_render.py", "sha256": "0"},
            "sizes": {"requests": requests, "pages": pages}, "property": prop,
            "reason": reason, "schema": {"requests": requests, "pages": pages, "vars": []},
            "initial": {}, "steps": out}


# r0's write is still in flight when its page is freed and handed to r1
FREE_BEFORE_DRAIN = [
    ("prealloc(r0, page 0)", [ev("admit", 0), ev("alloc", 0, 0)]),
    ("send(r0, page 0)", [ev("post_write", 0, 0)]),
    ("timeout(r0)", [ev("timeout", 0), ev("abort", 0), ev("free", 0, 0)]),
    ("prealloc(r1, page 0)", [ev("admit", 1), ev("alloc", 1, 0)]),
    ("transfer(r1, page 0)", [ev("post_write", 1, 0), ev("land_write", 1, 0)]),
    ("late_landing(r0, page 0)", [ev("land_write", 0, 0)]),
    ("decode(r1)", [ev("read", 1, 0), ev("decode", 1)]),
]


def long_trace(steps: int, pages: int, requests: int = 3) -> dict[str, Any]:
    schedule = []
    for i in range(steps - 1):
        r, p = i % requests, i % pages
        schedule.append((f"work(r{r}, page {p})",
                         [ev("alloc", r, p), ev("post_write", r, p), ev("land_write", r, p),
                          ev("free", r, p)]))
    schedule.append(("decode(r0)", [ev("alloc", 0, 0), ev("read", 0, 0)]))
    return hand_trace(schedule, requests=requests, pages=pages)


def cells(dot: str) -> dict[str, dict[str, str]]:
    """Every table cell with an ID in the DOT: id -> its attributes."""
    out: dict[str, dict[str, str]] = {}
    for m in re.finditer(r"<TD ([^>]*)>", dot):
        attrs = dict(re.findall(r'([A-Z-]+)="([^"]*)"', m.group(1)))
        if "ID" in attrs:
            out[attrs["ID"]] = attrs
    return out


def cell_text(dot: str, cell_id: str) -> str:
    """The text inside the cell with this ID (tags stripped), up to the next ID'd cell."""
    start = dot.index(f'ID="{cell_id}"')
    nxt = dot.find(' ID="', start + 5)
    chunk = dot[start: nxt if nxt >= 0 else len(dot)]
    return html.unescape(re.sub(r"<[^>]+>", " ", chunk.split(">", 1)[1]))


SMALL = {"requests": 1, "pages": 3}  # the same counterexamples as the defaults, faster


@pytest.fixture(scope="module")
def buggy_run() -> tuple[Any, Any]:
    """models/buggy_pd.py explored at a small size: (system, outcome)."""
    system = compile_model(load_model(MODELS / "buggy_pd.py"), SMALL)
    return system, explore(system)


@pytest.fixture(scope="module")
def buggy(buggy_run: tuple[Any, Any]) -> dict[str, dict[str, Any]]:
    """The counterexamples of models/buggy_pd.py, by property."""
    return {v.prop: v.trace.to_json() for v in buggy_run[1].verdicts if v.trace}


@pytest.fixture(scope="module")
def buggy_result(buggy_run: tuple[Any, Any]) -> dict[str, Any]:
    system, out = buggy_run
    return Result(system, "explicit", out.verdicts, out.stats).to_json()


# -- the grid (no Graphviz involved) --------------------------------------------------------

def test_timeline_of_buggy_pd_shows_the_stale_read(buggy: dict[str, dict[str, Any]]) -> None:
    trace = buggy["no-read-beyond-written"]
    tl = build_timeline(trace)
    assert len(tl.columns) == len(trace["steps"]) + 1
    assert [c.label for c in tl.columns[1:]] == [s["label"] for s in trace["steps"]]
    bad = trace["steps"][-1]["violation"]["event"]
    assert bad["kind"] == "read"
    assert tl.violation_step == len(trace["steps"])
    assert tl.violation_event is not None and tl.violation_event.page == bad["page"]
    last = tl.columns[-1]
    assert last.violating
    assert last.pages[bad["page"]].violating
    assert sum(p.violating for p in last.pages) == 1
    # the page read was never written in the trace: it holds stale KV (data None)
    leak = [lk for lk in tl.leaks if lk.violating]
    assert len(leak) == 1 and leak[0].page == bad["page"] and leak[0].holder is None
    # a page the request wrote holds its data from the landing on
    landed = [(s["index"], e["page"]) for s in trace["steps"] for e in s["events"]
              if e["kind"] == "land_write"]
    assert landed
    step, page = landed[0]
    assert tl.columns[step].pages[page].data == "r0"
    assert tl.columns[step - 1].pages[page].data is None
    # the request lane shows the rejection and, later, the violating read
    assert tl.phase_var == "phase"
    lane = [c.requests[0] for c in tl.columns]
    assert any(c.rejected_now for c in lane)
    assert lane[-1].violating and lane[-1].culprit is not None


def test_timeline_from_events_only_free_before_drain() -> None:
    tl = build_timeline(hand_trace(FREE_BEFORE_DRAIN))
    page0 = [c.pages[0] for c in tl.columns]
    assert page0[2].writers == ["r0"]              # posted, in flight
    assert page0[3].owner is None and page0[3].writers == ["r0"]   # freed while in flight
    assert page0[4].owner == "r1"                  # re-allocated to r1
    assert page0[5].writers == ["r0"] and page0[5].data == "r1"  # r1 landed, r0 still flying
    assert page0[6].owner == "r1" and page0[6].data == "r0"      # r0's late landing
    assert page0[6].writers == []
    kinds = [(lk.kind, lk.step) for lk in tl.leaks]
    assert ("late_landing", 6) in kinds and ("read", 7) in kinds
    read = [lk for lk in tl.leaks if lk.kind == "read"][0]
    assert read.holder == "r0" and read.request == "r1" and read.violating
    assert tl.untouched_pages == [1, 2, 3]


def test_result_documents_and_malformed_traces(buggy_result: dict[str, Any]) -> None:
    first = [v for v in buggy_result["verdicts"] if v["trace"]][0]
    assert extract_trace(buggy_result)["property"] == first["property"]
    assert extract_trace(buggy_result, "no-read-beyond-written")["property"] == \
        "no-read-beyond-written"
    clean = dict(buggy_result, verdicts=[dict(v, trace=None) for v in buggy_result["verdicts"]])
    with pytest.raises(TraceFormatError, match="nothing to draw"):
        extract_trace(clean)
    with pytest.raises(TraceFormatError, match="unsupported format"):
        extract_trace({"format": "something-else"})
    with pytest.raises(TraceFormatError, match="JSON object"):
        extract_trace([1, 2])
    broken = hand_trace(FREE_BEFORE_DRAIN)
    broken["steps"][1]["events"][0]["request"] = 3
    with pytest.raises(TraceFormatError, match="step 2"):
        extract_trace(broken)
    with pytest.raises(TraceFormatError, match="steps"):
        extract_trace({"format": "kvspec-trace/1", "steps": "nope"})


# -- the DOT ---------------------------------------------------------------------------------

def test_dot_of_buggy_pd_has_steps_cells_and_the_red_violation(
        buggy: dict[str, dict[str, Any]]) -> None:
    trace = buggy["no-decode-after-rejection"]
    graph = build_trace_graph(trace)
    assert isinstance(graph, graphviz.Digraph)
    dot = graph.source
    assert dot == trace_dot(trace)
    for name in ("title", "strip0", "verdict", "legend"):
        assert re.search(rf"^\s*{name} \[label=<", dot, re.M), name
    got = cells(dot)
    n = len(trace["steps"])
    tl = build_timeline(trace)
    # one header per step, labelled with the action and its arguments
    for k, step in enumerate(trace["steps"], 1):
        assert f"h{k}" in got
        name, _, args = step["label"].partition("(")
        text = cell_text(dot, f"h{k}")
        assert name in text and args.rstrip(")") in text
    # a swimlane cell per request and step; a pool cell per shown page and step
    for k in range(n + 1):
        for r in range(trace["schema"]["requests"]):
            assert f"s{k}_r{r}" in got
        for p in tl.shown_pages:
            assert f"s{k}_p{p}" in got
    # the violation: red header, red-bordered page cell, and only there
    bad = trace["steps"][-1]["violation"]["event"]
    assert got[f"h{n}"]["BGCOLOR"] == VIOLATION
    assert got[f"s{n}_p{bad['page']}"]["COLOR"] == VIOLATION
    assert got[f"s{n}_p{bad['page']}"]["BORDER"] == "3"
    red = {i for i, a in got.items() if a.get("COLOR") == VIOLATION}
    assert red == {f"s{n}_p{bad['page']}", f"s{n}_r0"}
    assert "✘ read by r0: stale KV" in cell_text(dot, f"s{n}_p{bad['page']}")
    # the one-line reason is in the verdict banner
    assert html.escape(trace["reason"]) in cell_text(dot, "verdict") or \
        trace["reason"] in cell_text(dot, "verdict")
    assert "verdict" in got
    # changed cells are highlighted; unchanged ones are not
    alloc_step, alloc_page = [(s["index"], e["page"]) for s in trace["steps"]
                              for e in s["events"] if e["kind"] == "alloc"][0]
    assert got[f"s{alloc_step}_p{alloc_page}"]["BORDER"] == "2"
    assert got[f"s{alloc_step - 1}_p{alloc_page}"]["BORDER"] == "1"
    # the rejection is visible in r0's lane
    reject_step = [s["index"] for s in trace["steps"]
                   if any(e["kind"] == "reject" for e in s["events"])][0]
    assert "REJECT" in cell_text(dot, f"s{reject_step}_r0")
    assert "to_finish = True" in cell_text(dot, f"s{reject_step}_r0")


def test_dot_of_free_before_drain_shows_late_write_and_foreign_data() -> None:
    dot = trace_dot(hand_trace(FREE_BEFORE_DRAIN, prop="no-reuse-before-drain"))
    got = cells(dot)
    assert "⇢ r0 write" in cell_text(dot, "s3_p0")       # freed with r0's write in flight
    assert "⇢ r0 write" in cell_text(dot, "s4_p0")       # re-allocated to r1 mid-write
    assert "r0's write landed late" in cell_text(dot, "s6_p0")
    assert "KV r0" in cell_text(dot, "s6_p0") and got["s6_p0"]["BGCOLOR"] != "#FFFFFF"
    assert got["s7_p0"]["COLOR"] == VIOLATION
    assert "✘ read by r1: r0's KV" in cell_text(dot, "s7_p0")
    assert got["untouched"] and "pages 1–3" in dot


def test_long_traces_wrap_into_strips() -> None:
    dot = trace_dot(long_trace(15, 8))
    assert "strip0" in dot and "strip1" not in dot     # 8 pages × 15 steps: one strip
    assert all(f"s15_p{p}" in cells(dot) for p in range(8))
    dot = trace_dot(long_trace(40, 12))
    assert re.findall(r"^\s*(strip\d+) \[", dot, re.M) == ["strip0", "strip1", "strip2"]
    got = cells(dot)
    assert all(f"h{k}" in got for k in range(41))
    assert got["h40"]["BGCOLOR"] == VIOLATION
    assert len(trace_dot(long_trace(40, 12), columns_per_row=10).split("strip")) > 5


# -- files, formats, Graphviz missing ----------------------------------------------------------

def test_dot_output_needs_no_graphviz(buggy: dict[str, dict[str, Any]], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(style, "dot_available", lambda: False)
    path = render_trace(buggy["no-read-beyond-written"], tmp_path / "cex.dot")
    assert path.read_text().startswith("digraph")
    with pytest.raises(GraphvizMissing, match="dot.*install Graphviz"):
        render_trace(buggy["no-read-beyond-written"], tmp_path / "cex.svg")
    with pytest.raises(RenderError, match="unknown picture format"):
        render_trace(buggy["no-read-beyond-written"], tmp_path / "cex.jpeg")


@needs_dot
def test_svg_png_pdf_are_produced(buggy: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    trace = buggy["no-read-beyond-written"]
    svg = render_trace(trace, tmp_path / "cex.svg").read_text()
    assert "<svg" in svg and "stale KV" in svg and "decode" in svg
    assert render_trace(trace, tmp_path / "cex.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert render_trace(trace, tmp_path / "cex.pdf").read_bytes()[:4] == b"%PDF"
    assert trace_svg(trace).lstrip().startswith("<?xml")


@needs_dot
def test_jupyter_reprs(buggy_run: tuple[Any, Any]) -> None:
    system, out = buggy_run
    trace = [v.trace for v in out.verdicts if v.trace][0]
    svg = trace._repr_svg_()
    assert svg is not None and "<svg" in svg and "step" in svg
    html = Result(system, "explicit", out.verdicts, out.stats)._repr_html_()
    assert "VIOLATED" in html and "no-read-beyond-written" in html


# -- the command line ------------------------------------------------------------------------

def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_render_errors_are_clear(tmp_path: Path, buggy_result: dict[str, Any]) -> None:
    out = str(tmp_path / "x.dot")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run_cli("render", str(bad), "-o", out)
    assert code == 2 and "kvspec: error:" in err and "not JSON" in err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    code, _, err = run_cli("render", str(other), "-o", out)
    assert code == 2 and "not a kvspec trace" in err
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"format": "kvspec-trace/1", "steps": [{"events": 3}]}))
    code, _, err = run_cli("render", str(broken), "-o", out)
    assert code == 2 and "broken.json" in err and "step 1" in err and "Traceback" not in err
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(dict(buggy_result, verdicts=[
        dict(v, trace=None) for v in buggy_result["verdicts"]])))
    code, _, err = run_cli("render", str(clean), "-o", out)
    assert code == 2 and "nothing to draw" in err
    assert run_cli("render", str(tmp_path / "missing.json"), "-o", out)[0] == 2


def test_cli_render_and_verify_render(tmp_path: Path, buggy_result: dict[str, Any]) -> None:
    result = tmp_path / "result.json"
    result.write_text(json.dumps(buggy_result))
    code, out, err = run_cli("render", str(result), "-o", str(tmp_path / "a.dot"))
    assert code == 0, err
    assert 'ID="h1"' in (tmp_path / "a.dot").read_text()
    code, out, err = run_cli("verify", str(MODELS / "buggy_pd.py"), "--engine", "explicit",
                             "--size", "requests=1,pages=3", "--render", str(tmp_path / "b.dot"))
    assert code == 1 and "counterexample picture written" in err
    dot = (tmp_path / "b.dot").read_text()
    assert f'COLOR="{VIOLATION}"' in dot and "legend" in dot


@pytest.mark.skipif(not (MODELS / "free_before_drain.py").is_file(),
                    reason="models/free_before_drain.py is not written yet")
def test_free_before_drain_model_picture() -> None:
    system = compile_model(load_model(MODELS / "free_before_drain.py"))
    traces = [v.trace.to_json() for v in explore(system).verdicts if v.trace]
    assert traces, "free_before_drain.py should violate a property"
    tl = build_timeline(traces[0])
    kinds = {e["kind"] for s in traces[0]["steps"] for e in s["events"]}
    assert {"post_write", "free", "alloc"} <= kinds
    # a page is freed while a write into it is still in flight
    assert any(c.owner is None and c.writers for col in tl.columns for c in col.pages)
    assert tl.columns[-1].violating


def test_cli_render_without_graphviz(tmp_path: Path, buggy_result: dict[str, Any],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(style, "dot_available", lambda: False)
    result = tmp_path / "result.json"
    result.write_text(json.dumps(buggy_result))
    code, _, err = run_cli("render", str(result), "-o", str(tmp_path / "a.svg"))
    assert code == 2 and "Graphviz 'dot' program" in err and "-o out.dot" in err
    assert run_cli("render", str(result), "-o", str(tmp_path / "a.dot"))[0] == 0
