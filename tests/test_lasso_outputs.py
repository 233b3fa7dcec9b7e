"""Lasso counterexamples (``kvspec live``) in every form a safety counterexample has:
the picture (``kvspec render``), the replay on the tensor page pool (``kvspec
replay``) and the runnable program (``lasso_program``).

The lassos come from the liveness checker itself: ``models/vllm_async_load_leak.py``
(pages-eventually-freed: the run stops with two pages held) and small models written
here whose request allocates a page and then polls forever (the release is unfair).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS, run_cli

from kvspec.lang.loader import load_model
from kvspec.liveness import PEF, RT, WEQ, check_liveness
from kvspec.liveness.live_cmd import compile_for_liveness
from kvspec.render.style import LOOP, dot_available
from kvspec.render.timeline import TraceFormatError, build_timeline
from kvspec.render.trace_graph import trace_dot
from kvspec.report.python_snippet import lasso_program
from kvspec.verdict import Status

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz 'dot' is not installed")

# r0 takes a page and posts a write into it, then polls: each poll flips ``ready``, so
# two polls bring the run back to where it was. Nothing forces the release.
POLLER = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require

class Poller(Model):
    requests = Requests(1)
    pages = Pages(2)
    held = requests.var(bool, init=False)
    done = requests.var(bool, init=False)
    ready = requests.var(bool, init=False)
    owner = pages.var(requests.optional, init=None)

    @action
    def grab(s, r: Request, p: Page):
        require(not s.held[r] and not s.done[r] and s.owner[p] is None)
        s.owner[p] = r
        s.held[r] = True
        emit.admit(r)
        emit.alloc(r, p)
        emit.post_write(r, p)

    @action
    def poll(s, r: Request):
        require(s.held[r])
        s.ready[r] = not s.ready[r]

    @action{FAIR}
    def release(s, r: Request):
        require(s.held[r])
        mine = s.owner == r
        emit.land_write(r, pages=mine)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.held[r] = False
        s.done[r] = True
        emit.finish(r)
'''
POLLER_LEAK = POLLER.replace("{FAIR}", "")
POLLER_FIXED = POLLER.replace("{FAIR}", '(fair="weak")')  # the release is guaranteed

# a request that is admitted and then spins without any page: request-terminates only
SPINNER = '''
from kvspec import Model, Pages, Request, Requests, action, emit, require

class Spinner(Model):
    requests = Requests(1)
    pages = Pages(1)
    started = requests.var(bool, init=False)
    done = requests.var(bool, init=False)

    @action
    def start(s, r: Request):
        require(not s.started[r])
        s.started[r] = True
        emit.admit(r)

    @action
    def spin(s, r: Request):
        require(s.started[r] and not s.done[r])

    @action
    def finish(s, r: Request):
        require(s.started[r] and not s.done[r])
        s.done[r] = True
        emit.finish(r)
'''

# the merged fix of vLLM #32255, keeping the class name of the first cut
LEAK_ABORT = '''        s.reported[r] = False     # the request leaves the waiting queue
        s.status[r] = Status.HELD
        emit.abort(r)'''
FIXED_ABORT = '''        emit.abort(r)
        if s.reported[r]:
            mine = s.owner == r
            emit.free(r, pages=mine)
            s.owner[mine] = None
            s.landed[mine] = False
            s.reported[r] = False
            s.status[r] = Status.DONE
            return
        s.status[r] = Status.HELD'''


def lasso(path: Path, prop: str) -> dict[str, Any]:
    """The lasso ``kvspec live`` finds for ``prop`` in the model at ``path``."""
    system = compile_for_liveness(load_model(path), {})
    verdicts, _ = check_liveness(system, properties=[prop], deadlock=False)
    (verdict,) = verdicts
    assert verdict.status is Status.VIOLATED and verdict.trace is not None
    assert verdict.trace.loop_start is not None
    doc: dict[str, Any] = verdict.trace.to_json()
    return doc


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lasso")


@pytest.fixture(scope="module")
def leak_model(work: Path) -> Path:
    path = work / "vllm_async_load_leak.py"
    shutil.copy(MODELS / "vllm_async_load_leak.py", path)
    return path


@pytest.fixture(scope="module")
def stop_lasso(leak_model: Path) -> dict[str, Any]:
    doc = lasso(leak_model, PEF)
    assert doc["loop_start"] == len(doc["steps"]) == 6  # stops: nothing enabled
    return doc


@pytest.fixture(scope="module")
def poller_model(work: Path) -> Path:
    path = work / "poller.py"
    path.write_text(POLLER_LEAK)
    return path


@pytest.fixture(scope="module")
def loop_lasso(poller_model: Path) -> dict[str, Any]:
    doc = lasso(poller_model, PEF)
    # grab, then poll twice: the loop is steps 2-3, back to the state after step 1
    assert doc["loop_start"] == 1 and len(doc["steps"]) == 3
    assert [s["action"] for s in doc["steps"]] == ["grab", "poll", "poll"]
    return doc


@pytest.fixture(scope="module")
def write_lasso(poller_model: Path) -> dict[str, Any]:
    return lasso(poller_model, WEQ)


def save(work: Path, name: str, doc: dict[str, Any]) -> Path:
    path = work / name
    path.write_text(json.dumps(doc, indent=2))
    return path


def dot_cell(dot: str, cell_id: str) -> dict[str, str]:
    m = re.search(rf'<TD ([^>]*ID="{cell_id}"[^>]*)>', dot)
    assert m, cell_id
    return dict(re.findall(r'([A-Z-]+)="([^"]*)"', m.group(1)))


# -- the picture ---------------------------------------------------------------------------

def test_the_loop_is_drawn_with_a_back_edge_labelled_repeats_forever(
        loop_lasso: dict[str, Any], work: Path) -> None:
    dot = trace_dot(loop_lasso)
    # the back-edge: from the loop's last column (step 3) to its first (step 2)
    edge = re.search(r"strip0:loop3:n -> strip0:loop2:n \[([^\]]*)\]", dot)
    assert edge, dot
    assert "repeats forever" in edge.group(1) and "style=bold" in edge.group(1)
    assert "returns to the state after step 1" in edge.group(1)
    # the loop row: the loop's columns are marked, the state it returns to is named
    assert "loop starts" in dot and "loop ends" in dot
    assert "the loop returns" in dot and "after step 3" in dot
    assert "↻" in dot_text(dot, "h2") and "↻" not in dot_text(dot, "h1")
    # page 0 is held across the loop: purple border and a ⟳ line in the loop's columns
    for step in (1, 2, 3):
        cell = dot_cell(dot, f"s{step}_p0")
        assert cell["COLOR"] == LOOP if step > 1 else cell["COLOR"] != LOOP
    assert "⟳ held forever (pending)" in dot and "page 0: allocated to r0 at step 1" in dot
    assert "s3_p1" not in dot and "page 1" in dot  # never touched: folded, not highlighted
    assert "1-step prefix, then steps 2–3 repeat forever" in dot
    path = save(work, "loop.json", loop_lasso)
    run = run_cli("render", str(path), "-o", str(work / "loop.dot"))
    assert run.code == 0 and (work / "loop.dot").read_text() == dot


def dot_text(dot: str, cell_id: str) -> str:
    start = dot.index(f'ID="{cell_id}"')
    return dot[start: dot.index("</TD>", start)]


def test_a_run_that_stops_is_drawn_with_a_self_loop_and_its_held_pages(
        stop_lasso: dict[str, Any]) -> None:
    dot = trace_dot(stop_lasso)
    edge = re.search(r"strip0:loop6:n -> strip0:loop6:n \[([^\]]*)\]", dot)
    assert edge and "nothing enabled: stays here forever" in edge.group(1)
    assert "stops here" in dot_text(dot, "loop6")
    # both pages stay held; the pending obligation (r0's page 0) is named first
    assert dot_cell(dot, "s6_p0")["COLOR"] == LOOP and dot_cell(dot, "s6_p1")["COLOR"] == LOOP
    assert dot_cell(dot, "s5_p0")["COLOR"] != LOOP
    assert "page 0: allocated to r0 at step 1, never freed (holds KV r0)" in dot
    assert "page 1: allocated to r1 at step 2, never freed (holds KV r1)" in dot
    assert "pending obligation: alloc(r0, page 0), opened at step 1" in dot
    # the step that opened it is marked, not the last step (nothing happens there)
    assert "✘ alloc → r0" in dot[dot.index('ID="s1_p0"'):dot.index('ID="s2_p0"')]
    assert "✘" not in dot_text(dot, "h6")
    tl = build_timeline(stop_lasso)
    assert tl.stops and [(h.page, h.request, h.obligation) for h in tl.held] == \
        [(0, "r0", True), (1, "r1", False)]


def test_write_obligations_highlight_the_pages_with_a_write_in_flight(
        write_lasso: dict[str, Any]) -> None:
    tl = build_timeline(write_lasso)
    assert [(h.page, h.request, h.kind) for h in tl.held] == [(0, "r0", "write")]
    assert "⟳ write never lands" in trace_dot(write_lasso)


@needs_dot
def test_render_writes_an_svg_of_a_lasso(loop_lasso: dict[str, Any],
                                         stop_lasso: dict[str, Any], work: Path) -> None:
    for name, doc in (("loop", loop_lasso), ("stop", stop_lasso)):
        path = save(work, f"{name}.json", doc)
        svg = work / f"{name}.svg"
        run = run_cli("render", str(path), "-o", str(svg))
        assert run.code == 0, run.err
        text = svg.read_text()
        assert "<svg" in text and 'id="back_edge"' in text
        assert "repeats forever" in text or "stays here forever" in text


def test_safety_traces_are_drawn_as_before(loop_lasso: dict[str, Any], work: Path) -> None:
    result = json.loads(run_cli("verify", str(MODELS / "free_before_drain.py"), "--engine",
                                "explicit", "--json").out)
    trace = next(v["trace"] for v in result["verdicts"] if v["trace"])
    dot = trace_dot(trace)
    assert "loop" not in dot and "lasso" not in dot and "->" not in dot.split("strip0")[0]
    assert trace_dot({**trace, "loop_start": None}) == dot
    # a lasso's steps without its loop_start are a plain trace again
    plain = {k: v for k, v in loop_lasso.items() if k != "loop_start"}
    assert "back_edge" not in trace_dot(plain) and "back_edge" in trace_dot(loop_lasso)


def test_a_bad_loop_start_is_one_line_not_a_traceback(loop_lasso: dict[str, Any],
                                                      work: Path) -> None:
    with pytest.raises(TraceFormatError, match="loop_start"):
        build_timeline({**loop_lasso, "loop_start": 9})
    path = save(work, "bad.json", {**loop_lasso, "loop_start": "x"})
    for argv in (("render", str(path), "-o", str(work / "bad.dot")), ("replay", str(path))):
        run = run_cli(*argv)
        assert run.code == 2 and "loop_start" in run.err
        assert "Traceback" not in run.err and len(run.err.strip().splitlines()) == 1


# -- replay on the tensor pool -------------------------------------------------------------

def test_replay_of_a_run_that_stops_names_the_pages_held_forever(
        stop_lasso: dict[str, Any], work: Path) -> None:
    path = save(work, "stop.json", stop_lasso)
    run = run_cli("replay", str(path), "--device", "cpu")
    assert run.code == 1, run.out
    assert "lasso: steps 1-6 are the prefix; then nothing is enabled" in run.out
    assert "end of the run: after step 6 nothing is enabled, the run stays here forever" \
        in run.out
    assert ("pages held forever: page 0 (r0's KV, block 0, 1,024 bytes), "
            "page 1 (r1's KV, block 0, 1,024 bytes)") in run.out
    assert "page 0: allocated to r0 at step 1, never freed; holds its own KV (r0 block 0)" \
        in run.out
    assert "LEAK: 2 pages held forever (0, 1)" in run.out
    assert "aftermath" not in run.out  # the run never ends
    doc = json.loads(run_cli("replay", str(path), "--device", "cpu", "--json").out)
    assert doc["summary"]["leaked"] is True
    held = doc["lasso"]["held_forever"]
    assert [(h["page"], h["owner"], h["tag"], h["bytes"], h["obligation"]) for h in held] == [
        (0, "r0", {"request": "r0", "block": 0}, 1024, True),
        (1, "r1", {"request": "r1", "block": 0}, 1024, False)]
    assert doc["lasso"]["stops"] is True and doc["aftermath"] == []


def test_replay_of_a_loop_runs_it_twice_and_shows_the_page_and_write_held(
        loop_lasso: dict[str, Any], write_lasso: dict[str, Any], work: Path) -> None:
    run = run_cli("replay", str(save(work, "loop.json", loop_lasso)), "--device", "cpu")
    assert run.code == 1
    assert run.out.count("loop, iteration") == 2 and run.out.count("step 3  poll(r0)") == 2
    assert "the run is back in the state after step 1 and loops forever" in run.out
    assert "pages held forever: page 0 (tenant T's KV, block 0, 1,024 bytes)" in run.out
    assert "r0 block 0 into page 0, posted at step 1: in flight forever" in run.out
    doc = json.loads(run_cli("replay", str(save(work, "weq.json", write_lasso)), "--device",
                             "cpu", "--json").out)
    assert [s.get("loop_iteration") for s in doc["steps"]][-2:] == [2, 2]
    (write,) = doc["lasso"]["writes_never_quiescing"]
    assert (write["writer"], write["page"], write["obligation"]) == ("r0", 0, True)
    assert doc["summary"]["leaked"] is True


def test_replay_of_a_loop_holding_nothing_exits_0(work: Path) -> None:
    model = work / "spinner.py"
    model.write_text(SPINNER)
    run = run_cli("replay", str(save(work, "spin.json", lasso(model, RT))), "--device", "cpu")
    assert run.code == 0, run.out
    assert "pages held forever: none" in run.out
    assert "no leak of the pool: the loop holds no page and no write in flight" in run.out


# -- the program ---------------------------------------------------------------------------

def run_program(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=path.parent, timeout=120)


def test_the_program_of_a_stop_lasso_reproduces_until_the_model_is_fixed(
        stop_lasso: dict[str, Any], leak_model: Path) -> None:
    program = leak_model.parent / "stop_program.py"
    source = lasso_program(stop_lasso, str(leak_model))
    imports = set(re.findall(r"^(?:from|import) (\S+)", source, re.M))
    assert imports == {"sys", "pathlib", "kvspec.testing"}
    program.write_text(source)
    done = run_program(program)
    assert done.returncode == 0, done.stderr
    assert "then nothing is enabled: the run stays in this state forever" in done.stdout
    assert "VIOLATED pages-eventually-freed" in done.stdout
    original = leak_model.read_text()
    try:
        assert LEAK_ABORT in original
        leak_model.write_text(original.replace(LEAK_ABORT, FIXED_ABORT))
        done = run_program(program)
        assert done.returncode == 1
        assert "alloc(r0, page 0) is not pending" in done.stderr
        assert "no longer reproduces" in done.stderr
    finally:
        leak_model.write_text(original)


@pytest.mark.parametrize("prop", [PEF, WEQ])
def test_the_program_of_a_loop_reproduces_until_the_release_is_fair(
        prop: str, work: Path) -> None:
    model = work / f"poller_{prop}.py"
    model.write_text(POLLER_LEAK)
    program = work / f"poller_{prop}_program.py"
    program.write_text(lasso_program(lasso(model, prop), str(model)))
    done = run_program(program)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("loop, iteration") == 2
    assert "the loop returns to the state after step 1 and repeats forever" in done.stdout
    model.write_text(POLLER_FIXED)
    done = run_program(program)
    assert done.returncode == 1
    assert "the loop is not fair: release(r0) (weakly fair)" in done.stderr


def test_lasso_program_refuses_a_finite_trace() -> None:
    result = json.loads(run_cli("verify", str(MODELS / "free_before_drain.py"), "--engine",
                                "explicit", "--json").out)
    trace = next(v["trace"] for v in result["verdicts"] if v["trace"])
    with pytest.raises(ValueError, match="not a lasso"):
        lasso_program(trace, str(MODELS / "free_before_drain.py"))


def test_live_writes_the_lasso_program(tmp_path: Path) -> None:
    program = tmp_path / "leak.py"
    res = run_cli("live", str(MODELS / "vllm_async_load_leak.py"), "--property", PEF,
                  "--python", str(program))
    assert res.code == 1, res.out + res.err
    assert f"lasso program for {PEF} written to" in res.err
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "VIOLATED pages-eventually-freed" in run.stdout
    none = run_cli("live", str(MODELS / "vllm_async_load_fixed.py"), "--property", PEF,
                   "--python", str(tmp_path / "none.py"))
    assert none.code == 0 and "no program written" in none.err
    assert not (tmp_path / "none.py").exists()
