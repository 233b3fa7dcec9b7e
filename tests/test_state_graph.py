"""Tests for kvspec.render.state_graph: the reachable state graph of small configurations."""
from __future__ import annotations

import io
import re
from pathlib import Path

import networkx as nx
import pytest

from kvspec.cli import main
from kvspec.engines.explicit import explore
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.render.state_graph import (GraphTooLarge, build_state_graph, graph_summary,
                                       render_state_graph, state_graph_dot)
from kvspec.render.style import VIOLATION, dot_available

MODELS = Path(__file__).resolve().parents[1] / "models"
SMALLEST = {"requests": 1, "pages": 2}


def system(name: str, sizes: dict[str, int] | None = None) -> System:
    return compile_model(load_model(MODELS / name), sizes or {})


@pytest.fixture(scope="module")
def patched() -> System:
    return system("patched.py", SMALLEST)


@pytest.fixture(scope="module")
def buggy() -> System:
    return system("buggy_pd.py", {"requests": 1, "pages": 3})


@pytest.mark.parametrize("symmetry", [True, False])
def test_patched_graph_matches_the_explicit_engine(patched: System, symmetry: bool) -> None:
    sg = build_state_graph(patched, symmetry=symmetry)
    g = sg.graph
    assert isinstance(g, nx.DiGraph)
    out = explore(patched, symmetry=symmetry, keep_graph=True)
    assert sg.states == len(out.states)
    assert sg.transitions == len(out.edges)
    assert not sg.paths  # the patched design violates nothing
    assert not any(d["violated"] for _, d in g.nodes(data=True))
    # BFS layers: depth is the shortest distance from the initial state
    dist = nx.single_source_shortest_path_length(g, 0)
    assert len(dist) == sg.states
    assert all(g.nodes[n]["depth"] == d for n, d in dist.items())


def test_symmetry_merges_states(patched: System) -> None:
    merged = build_state_graph(patched, symmetry=True)
    full = build_state_graph(patched, symmetry=False)
    assert merged.symmetry.pages and merged.states < full.states
    dot = state_graph_dot(merged).source
    assert "symmetric states merged" in dot


def test_buggy_graph_marks_violations_and_shortest_paths(buggy: System) -> None:
    sg = build_state_graph(buggy)
    traces = {v.prop: v.trace for v in explore(buggy).verdicts if v.trace}
    assert set(sg.paths) == set(traces)
    for prop, path in sg.paths.items():
        assert path[0] == 0
        assert len(path) - 1 == len(traces[prop])          # as short as the engine's
        assert prop in sg.graph.nodes[path[-1]]["first"]
        assert all(sg.graph.edges[a, b]["bold"] for a, b in zip(path, path[1:]))
    assert graph_summary(sg)["violated"] == {p: len(t) for p, t in traces.items()}
    graph = state_graph_dot(sg)
    dot = graph.source

    def statement(head: str) -> str:
        """The one DOT statement (node or edge) that starts with ``head``."""
        found = [str(b) for b in graph.body if str(b).strip().startswith(head + " [")]
        assert len(found) == 1, head
        return found[0]

    for prop, path in sg.paths.items():
        node = statement(f"s{path[-1]}")
        assert f'color="{VIOLATION}"' in node and f"✘ {prop}" in node
        for a, b in zip(path, path[1:]):
            assert "penwidth=3" in statement(f"s{a} -> s{b}")
    assert "initial" in statement("s0") and "penwidth=2.5" in statement("s0")
    assert re.search(r"^\s*start -> s0", dot, re.M)
    # every BFS layer is one rank
    assert dot.count("rank=same") == graph_summary(sg)["depth"] + 1


def test_too_large_is_refused_with_advice() -> None:
    big = system("patched.py")
    with pytest.raises(GraphTooLarge) as info:
        build_state_graph(big, max_states=40)
    msg = str(info.value)
    assert "more than 40 states" in msg and "--max-states" in msg and "kvspec render" in msg


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def test_cli_graph(tmp_path: Path) -> None:
    target = tmp_path / "g.dot"
    code, out, err = run_cli("graph", str(MODELS / "patched.py"), "--size", "requests=1,pages=2",
                             "-o", str(target))
    assert code == 0, err
    assert target.read_text().startswith("digraph") and str(target) in out
    code, out, err = run_cli("graph", str(MODELS / "patched.py"), "--max-states", "30",
                             "-o", str(tmp_path / "h.dot"))
    assert code == 2 and "more than 30 states" in err and "kvspec render" in err


@pytest.mark.skipif(not dot_available(), reason="Graphviz 'dot' is not installed "
                    "(apt-get install graphviz); SVG not checked")
def test_svg(patched: System, tmp_path: Path) -> None:
    svg = render_state_graph(patched, tmp_path / "g.svg").read_text()
    assert "<svg" in svg and "NEW" in svg
