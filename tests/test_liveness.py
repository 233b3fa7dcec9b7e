"""Liveness: library obligations, fairness, fair-cycle detection, deadlock, lassos."""
from __future__ import annotations

import argparse
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS
from hypothesis import given, settings
from hypothesis import strategies as st

from kvspec.cli import ParserKit, positive_seconds, size_spec
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.loader import load_model
from kvspec.lang.system import System
from kvspec.liveness import DEADLOCK, PEF, RT, WEQ, check_liveness
from kvspec.liveness.fair_cycles import Graph, fair_components, fair_cycle, is_fair_walk
from kvspec.liveness.graph import explore_product
from kvspec.liveness.lasso import lasso_from_json
from kvspec.liveness.live_cmd import compile_for_liveness, register
from kvspec.liveness.obligations import Obligation, ObligationMonitor
from kvspec.liveness.report import render_trace
from kvspec.verdict import Status, Verdict


def live_system(path: str | Path, sizes: dict[str, int] | None = None) -> System:
    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = MODELS / p
    return compile_for_liveness(load_model(p), sizes or {})


def by_prop(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.prop: v for v in verdicts}


def live_cli(*argv: str) -> tuple[int, str, str]:
    """``kvspec live ...`` through a parser built as kvspec.cli builds its own."""
    parser = argparse.ArgumentParser(prog="kvspec")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        return p

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("model")
        p.add_argument("--size", action="append", type=size_spec)
        p.add_argument("--model-class")

    def timeout_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--timeout", type=positive_seconds, default=None)

    register(ParserKit(command, model_args, timeout_arg))
    out, err = io.StringIO(), io.StringIO()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit:
        return 2, "", ""
    try:
        code = args.func(args, out, err)
    except (ModelError, UsageError) as exc:  # what kvspec.cli.main turns into one line
        return 2, out.getvalue(), str(exc)
    return code, out.getvalue(), err.getvalue()


# -- the vLLM #32255 models -----------------------------------------------------------------

def test_first_cut_of_32255_leaks_pages_even_under_fairness() -> None:
    verdicts, stats = check_liveness(live_system("vllm_async_load_leak.py"))
    v = by_prop(verdicts)
    pef = v[PEF]
    assert pef.status is Status.VIOLATED and pef.method == "fair-cycle"
    assert "weak fairness: finished_recving, update_waiting, finish" in pef.detail
    trace = pef.trace
    assert trace is not None and trace.loop_start is not None
    labels = [s.instance.label() for s in trace.steps]
    # the race: the load is reported, then the abort holds the blocks forever
    assert labels.index("finished_recving(r0)") < labels.index("abort(r0)")
    assert "never followed by free(r0" in trace.reason
    assert v[DEADLOCK].status is Status.HOLDS
    assert stats.extra["liveness"]["complete"]


def test_merged_fix_holds_under_weak_fairness_of_the_completion() -> None:
    verdicts, _ = check_liveness(live_system("vllm_async_load_fixed.py"))
    for v in verdicts:
        assert v.status is Status.HOLDS and v.is_success, v.headline()
    assert "weak fairness: finished_recving" in by_prop(verdicts)[PEF].detail


def test_merged_fix_without_fairness_starves_the_completion() -> None:
    verdicts, _ = check_liveness(live_system("vllm_async_load_fixed.py"), fairness=False)
    pef = by_prop(verdicts)[PEF]
    assert pef.status is Status.VIOLATED
    assert pef.trace is not None and pef.trace.loop_start is not None
    loop = [s.instance.name for s in pef.trace.steps[pef.trace.loop_start:]]
    assert loop and "finished_recving" not in loop
    # the output says why: the completion is enabled on the loop and never taken
    assert "finished_recving(r0)" in pef.trace.reason
    assert "enabled at every state but never taken" in pef.trace.reason
    assert "no fairness assumed" in pef.detail


def test_live_command_exit_codes_and_output() -> None:
    code, out, _ = live_cli("live", str(MODELS / "vllm_async_load_leak.py"))
    assert code == 1
    assert "pages-eventually-freed" in out and "VIOLATED" in out and "loop" in out
    code, out, _ = live_cli("live", str(MODELS / "vllm_async_load_fixed.py"))
    assert code == 0 and "HOLDS" in out
    code, out, _ = live_cli("live", str(MODELS / "vllm_async_load_fixed.py"), "--no-fairness",
                            "--property", PEF)
    assert code == 1 and "↻" in out
    code, out, _ = live_cli("live", str(MODELS / "vllm_async_load_fixed.py"), "--max-states",
                            "5", "--no-deadlock")
    assert code == 3 and "UNKNOWN" in out and "HOLDS" not in out
    code, out, _ = live_cli("live", str(MODELS / "vllm_async_load_leak.py"), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1
    pef = [v for v in doc["verdicts"] if v["property"] == PEF][0]
    assert pef["status"] == "VIOLATED" and isinstance(pef["trace"]["loop_start"], int)
    assert live_cli("live", str(MODELS / "patched.py"), "--property", "bogus")[0] == 2
    assert live_cli("live", str(MODELS / "patched.py"), "--max-states", "0")[0] == 2


# -- deadlock ----------------------------------------------------------------------------------

STUCK = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require
from kvspec.lang.declare import final_state

class Stuck(Model):
    requests = Requests(2)
    pages = Pages(1)
    step = requests.var(Int(0, 3), init=0)
    owner = pages.var(requests.optional, init=None)

    @action
    def start(s, r: Request):
        require(s.step[r] == 0)
        s.step[r] = 1
        emit.admit(r)

    @action
    def grab(s, r: Request, p: Page):
        require(s.step[r] == 1 and s.owner[p] is None)
        s.owner[p] = r
        s.step[r] = 2
        emit.alloc(r, p)

    @action
    def done(s, r: Request, p: Page):
        require(s.step[r] == 2 and s.owner[p] == r)
        s.step[r] = 3
        emit.free(r, p)
        s.owner[p] = None
        emit.finish(r)
'''


def test_planted_deadlock_is_found_with_a_shortest_path(write_model) -> None:
    # planted: ``done`` forgets to hand the only page back, so the other request
    # waits for it forever
    src = STUCK.replace("        s.owner[p] = None\n", "")
    system = live_system(write_model(src))
    verdicts, _ = check_liveness(system, properties=[RT, PEF])
    dl = by_prop(verdicts)[DEADLOCK]
    assert dl.status is Status.VIOLATED and dl.method == "deadlock"
    assert dl.trace is not None and dl.trace.loop_start is None
    # shortest: both start, r0 grabs the page and finishes; r1 is stuck
    assert len(dl.trace) == 4 and dl.detail == "4 steps"
    assert [s.instance.name for s in dl.trace.steps].count("start") == 2
    assert "r1 has had no terminal event" in dl.trace.reason
    assert "no action is enabled" in dl.trace.reason
    # the same run, seen as liveness: r1 was admitted and never terminates
    rt = by_prop(verdicts)[RT]
    assert rt.status is Status.VIOLATED and rt.trace is not None
    assert rt.trace.loop_start == len(rt.trace)  # the run stops there
    assert by_prop(verdicts)[PEF].status is Status.HOLDS  # free(r0, 0) was emitted


def test_no_deadlock_without_the_bug_and_final_states_are_recognised(write_model) -> None:
    system = live_system(write_model(STUCK))
    assert by_prop(check_liveness(system)[0])[DEADLOCK].status is Status.HOLDS
    # a request that never starts: not terminated, nothing enabled -> deadlock ...
    idle = STUCK.replace("        require(s.step[r] == 0)\n",
                         "        require(s.step[r] == 0 and False)\n")
    system = live_system(write_model(idle))
    assert by_prop(check_liveness(system, properties=[])[0])[DEADLOCK].status \
        is Status.VIOLATED
    # ... unless the model declares such a state legitimately final
    final = idle + '''
    @final_state
    def idle(s):
        return all(s.step[r] == 0 for r in s.requests)
'''
    system = live_system(write_model(final))
    assert by_prop(check_liveness(system, properties=[])[0])[DEADLOCK].status is Status.HOLDS


def test_patched_has_no_deadlock_and_no_liveness_violation() -> None:
    verdicts, _ = check_liveness(live_system("patched.py", {"requests": 2, "pages": 3}))
    for v in verdicts:
        assert v.status is Status.HOLDS, v.headline()


# -- fairness ----------------------------------------------------------------------------------

TOGGLE = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require, var

class Toggle(Model):
    requests = Requests(1)
    pages = Pages(1)
    held = requests.var(bool, init=False)
    done = requests.var(bool, init=False)
    phase = var(bool, init=False)

    @action
    def take(s, r: Request, p: Page):
        require(not s.held[r] and not s.done[r])
        s.held[r] = True
        emit.alloc(r, p)

    @action
    def tick(s):
        s.phase = not s.phase

    @action{FAIR}
    def release(s, r: Request, p: Page):
        require(s.held[r] and s.phase)
        s.held[r] = False
        s.done[r] = True
        emit.free(r, p)
'''


@pytest.mark.parametrize("fair, expected", [("", Status.VIOLATED),
                                            ('(fair="weak")', Status.VIOLATED),
                                            ('(fair="strong")', Status.HOLDS)])
def test_weak_and_strong_fairness_differ(write_model, fair: str, expected: Status) -> None:
    system = live_system(write_model(TOGGLE.replace("{FAIR}", fair)))
    verdicts, _ = check_liveness(system, properties=[PEF])
    v = by_prop(verdicts)[PEF]
    assert v.status is expected, v.headline()
    if expected is Status.VIOLATED:
        assert v.trace is not None and v.trace.loop_start is not None
        loop = [s.instance.name for s in v.trace.steps[v.trace.loop_start:]]
        assert "release" not in loop
        if fair:  # weak: the loop passes a state where release is disabled
            assert loop.count("tick") >= 2
    assert by_prop(verdicts)[DEADLOCK].status is Status.HOLDS


def test_bad_fairness_is_one_line_naming_file_and_line(write_model) -> None:
    path = write_model(TOGGLE.replace("{FAIR}", '(fair="wek")'))
    with pytest.raises(ModelError) as info:
        load_model(path)
    line = TOGGLE.splitlines().index("    @action{FAIR}") + 1
    assert f"{path.name}:{line}:" in str(info.value) or \
        (info.value.line == line and str(path) in str(info.value))
    assert "weak" in str(info.value) and "\n" not in str(info.value)
    code, _, err = live_cli("live", str(path))
    assert code == 2 and "wek" in err


def test_plain_action_decorator_still_works(write_model) -> None:
    system = live_system(write_model(TOGGLE.replace("{FAIR}", "")))
    assert system.loaded.decl.fairness == {}
    system = live_system(write_model(TOGGLE.replace("{FAIR}", '(fair="weak")')))
    assert system.loaded.decl.fairness == {"release": "weak"}


# -- lasso traces --------------------------------------------------------------------------------

def test_lasso_json_round_trip() -> None:
    system = live_system("vllm_async_load_fixed.py")
    verdicts, _ = check_liveness(system, properties=[PEF], fairness=False, deadlock=False)
    trace = verdicts[0].trace
    assert trace is not None
    doc = json.loads(json.dumps(trace.to_json()))
    assert doc["format"] == "kvspec-trace/1" and doc["loop_start"] == trace.loop_start
    again = lasso_from_json(system, doc)
    assert again.loop_start == trace.loop_start
    assert [s.instance.label() for s in again.steps] == [s.instance.label()
                                                        for s in trace.steps]
    assert again.to_json()["steps"] == doc["steps"]
    text = render_trace(again)
    assert "loop" in text and "↻ back to" in text
    bad = dict(doc, loop_start=0)
    with pytest.raises(ValueError):
        lasso_from_json(system, bad)


def test_safety_traces_have_no_loop_start() -> None:
    from conftest import system_of

    from kvspec.engines.explicit import explore
    out = explore(system_of("free_before_drain.py"))
    traces = [v.trace for v in out.verdicts if v.trace is not None]
    assert traces and all("loop_start" not in t.to_json() for t in traces)


# -- the fair-cycle algorithm against brute force ---------------------------------------------------

def brute_force(g: Graph, nodes: set[int], allowed: set[int], weak: set[int], strong: set[int],
                terminal: set[int]) -> bool:
    """Is there a strongly connected set of allowed edges inside ``nodes`` meeting the
    fairness conditions (or a terminal node in ``nodes``)?"""
    if nodes & terminal:
        return True
    cand = [k for k in allowed if g.src[k] in nodes and g.dst[k] in nodes]
    for size in range(1, len(cand) + 1):
        for subset in itertools.combinations(cand, size):
            ns = {g.src[k] for k in subset} | {g.dst[k] for k in subset}
            if not all(_reach(g, subset, a) >= ns for a in ns):
                continue
            taken = {g.label[k] for k in subset}
            en = [g.enabled(n) for n in ns]
            if any(lab not in taken and all(lab in e for e in en) for lab in weak):
                continue
            if any(lab not in taken and any(lab in e for e in en) for lab in strong):
                continue
            return True
    return False


def _reach(g: Graph, subset: tuple[int, ...], a: int) -> set[int]:
    seen = {a}
    todo = [a]
    while todo:
        n = todo.pop()
        for k in subset:
            if g.src[k] == n and g.dst[k] not in seen:
                seen.add(g.dst[k])
                todo.append(g.dst[k])
    return seen


@st.composite
def labelled_graphs(draw: Any) -> tuple[Graph, set[int], set[int], set[int], set[int]]:
    n = draw(st.integers(1, 5))
    g = Graph()
    for _ in range(n):
        g.add_node()
    pairs = set()
    for _ in range(draw(st.integers(0, 8))):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        lab = draw(st.integers(0, 2))
        if (a, lab) in pairs:  # deterministic: one edge per (node, instance)
            continue
        pairs.add((a, lab))
        g.add_edge(a, b, lab)
    nodes = {i for i in range(n) if draw(st.booleans()) or i == 0}
    allowed = {k for k in range(len(g.src)) if draw(st.integers(0, 3)) > 0}
    fairness = [draw(st.sampled_from(["none", "weak", "strong"])) for _ in range(3)]
    weak = {i for i, f in enumerate(fairness) if f == "weak"}
    strong = {i for i, f in enumerate(fairness) if f == "strong"}
    return g, nodes, allowed, weak, strong


@settings(max_examples=400, deadline=None)
@given(labelled_graphs())
def test_emerson_lei_agrees_with_brute_force(case: Any) -> None:
    g, nodes, allowed, weak, strong = case
    comps = fair_components(g, nodes, lambda k: k in allowed, weak, strong, g.enabled)
    assert bool(comps) == brute_force(g, nodes, allowed, weak, strong, set())
    for comp in comps:
        entry = min(comp.nodes)
        cycle = fair_cycle(g, comp, entry, lambda k: k in allowed, weak, strong, g.enabled)
        assert cycle and g.src[cycle[0]] == entry and g.dst[cycle[-1]] == entry
        assert all(g.dst[a] == g.src[b] for a, b in zip(cycle, cycle[1:]))
        assert all(k in allowed and g.src[k] in nodes and g.dst[k] in nodes for k in cycle)
        assert is_fair_walk(g, cycle, weak, strong, g.enabled)


# -- generated models with planted leaks: check_liveness against brute force on the graph -----

def gen_model(phases: int, moves: list[tuple[int, int, str, str]]) -> str:
    lines = [
        "from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require",
        "",
        "class Gen(Model):",
        "    requests = Requests(1)",
        "    pages = Pages(1)",
        f"    ph = requests.var(Int(0, {phases - 1}), init=0)",
        "",
    ]
    for k, (a, b, ev, fair) in enumerate(moves):
        deco = "@action" if fair == "none" else f'@action(fair="{fair}")'
        lines += [f"    {deco}", f"    def m{k}(s, r: Request, p: Page):",
                  f"        require(s.ph[r] == {a})", f"        s.ph[r] = {b}"]
        if ev != "none":
            lines.append(f"        emit.{ev}(r, p)")
        lines.append("")
    return "\n".join(lines) + "\n"


@st.composite
def planted(draw: Any) -> tuple[int, list[tuple[int, int, str, str]]]:
    phases = draw(st.integers(2, 4))
    moves = []
    for _ in range(draw(st.integers(1, 5))):
        moves.append((draw(st.integers(0, phases - 1)), draw(st.integers(0, phases - 1)),
                      draw(st.sampled_from(["alloc", "alloc", "free", "none"])),
                      draw(st.sampled_from(["none", "weak", "strong"]))))
    return phases, moves


@settings(max_examples=60, deadline=None)
@given(planted())
def test_generated_leaks_agree_with_brute_force_lassos(tmp_path_factory: Any,
                                                       case: Any) -> None:
    phases, moves = case
    path = tmp_path_factory.mktemp("gen") / "gen.py"
    path.write_text(gen_model(phases, moves))
    system = live_system(path)
    verdicts, _ = check_liveness(system, properties=[PEF], deadlock=False)
    got = verdicts[0].status
    monitor = ObligationMonitor([PEF], 1, 1, False)
    pg = explore_product(system, monitor, max_states=None, deadline=None)
    weak = {i.index for i in system.instances if system.loaded.decl.fairness.get(i.name) == "weak"}
    strong = {i.index for i in system.instances
              if system.loaded.decl.fairness.get(i.name) == "strong"}
    ob = Obligation(PEF, 0, 0)
    nodes = {n for n in range(len(pg)) if monitor.is_pending(pg.monitors[n], ob)}
    allowed = {k for k in range(len(pg.graph.src))
               if pg.graph.dst[k] in nodes and ob not in pg.discharged[k]}
    terminal = {n for n in range(len(pg)) if pg.terminal(n)}
    expect = brute_force(pg.graph, nodes, allowed, weak, strong, terminal)
    assert got is (Status.VIOLATED if expect else Status.HOLDS)
