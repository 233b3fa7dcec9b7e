"""The reachable state graph of a small configuration (``kvspec graph``).

Public API::

    build_state_graph(system, max_states=300, symmetry=True) -> StateGraph  # networkx inside
    state_graph_dot(sg) -> graphviz.Digraph
    render_state_graph(system, path, max_states=300, symmetry=True) -> Path

States are explored breadth first (with symmetric states merged into one
representative when symmetry reduction is on and sound for the model, see
:mod:`kvspec.lang.symmetry`). The drawing puts each BFS layer on one rank, marks the
initial state, fills violating states red (pink: a property was already violated
earlier on every path to it), and draws the shortest counterexample path of every
violated property bold. Beyond ``max_states`` it refuses with :class:`GraphTooLarge`:
large state graphs are never drawn whole; draw one counterexample with
``kvspec render`` instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import graphviz
import networkx as nx

from kvspec.engines.canon import Canonicalizer
from kvspec.lang.schema import State, VarInfo
from kvspec.lang.symmetry import SymmetryReport, analyse_symmetry
from kvspec.lang.system import System
from kvspec.render.style import (BORDER, DIM, FONT, VIOLATION, VIOLATION_TINT, RenderError, esc,
                                 request_colour, text_on, tint, write_graph)

__all__ = ["GraphTooLarge", "StateGraph", "build_state_graph", "render_state_graph",
           "state_graph_dot", "DEFAULT_MAX_STATES"]

DEFAULT_MAX_STATES = 300
INITIAL = "#2CA02C"
#: at most this many action labels are written on one edge
EDGE_LABELS = 3


class GraphTooLarge(RenderError):
    """The configuration has more reachable states than the drawing limit."""


@dataclass
class StateGraph:
    """The explored graph: node ids are BFS discovery order (0 is the initial state).

    Node attributes: ``state`` (the flat state tuple), ``depth`` (BFS layer),
    ``violated`` (properties violated in the state), ``first`` (properties whose
    violation happens on entering it, on its BFS-tree edge), ``terminal`` (no
    successor). Edge attributes: ``labels`` (action instances), ``violations``
    (properties the step violates), ``bold`` (on a shortest counterexample path)."""

    system: System
    graph: nx.DiGraph
    symmetry: SymmetryReport
    paths: dict[str, list[int]] = field(default_factory=dict)

    @property
    def states(self) -> int:
        return int(self.graph.number_of_nodes())

    @property
    def transitions(self) -> int:
        return sum(len(d["labels"]) for _, _, d in self.graph.edges(data=True))


def _too_large(system: System, max_states: int, symmetry: bool) -> GraphTooLarge:
    sizes = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
    smaller = ",".join(f"{k}={min(v, 1 if k == 'requests' else 2)}"
                       for k, v in system.sizes.items() if k in ("requests", "pages"))
    hint = "" if symmetry else " or leave symmetry reduction on,"
    return GraphTooLarge(
        f"the state graph of {system.name} ({sizes}) has more than {max_states} states "
        f"(--max-states {max_states}); it is not drawn whole. Draw a smaller configuration "
        f"(e.g. --size {smaller}),{hint} raise --max-states, or draw one counterexample: "
        "kvspec verify MODEL --render cex.svg, or kvspec render TRACE.json -o cex.svg")


def build_state_graph(system: System, *, max_states: int = DEFAULT_MAX_STATES,
                      symmetry: bool = True) -> StateGraph:
    """Explore ``system`` breadth first into a networkx DiGraph (see :class:`StateGraph`).

    Raises GraphTooLarge once more than ``max_states`` states are found."""
    if max_states < 1:
        raise ValueError("max_states must be at least 1")
    report = analyse_symmetry(system, enabled=symmetry)
    canon = Canonicalizer(system.schema, report.requests, report.pages)
    use = canon.active

    def key(s: State) -> State:
        return canon.canon(s)[0] if use else s

    def bad(s: State) -> list[str]:
        return system.violated_flags(s) + system.failed_invariants(s)

    g: nx.DiGraph = nx.DiGraph()
    init = key(system.initial)
    index: dict[State, int] = {init: 0}
    order: list[State] = [init]
    g.add_node(0, state=init, depth=0, violated=bad(init), first=bad(init), parent=None)
    step = system.machine.step
    head = 0
    while head < len(order):
        s = order[head]
        depth = g.nodes[head]["depth"]
        for inst in system.instances:
            out = step(s, inst.action.fn, inst.args)
            if out is None:
                continue
            nxt, _events, violations = out
            k = key(nxt)
            idx = index.get(k)
            if idx is None:
                idx = len(order)
                if idx >= max_states:
                    raise _too_large(system, max_states, symmetry)
                index[k] = idx
                order.append(k)
                was = set(g.nodes[head]["violated"])
                now = bad(k)
                g.add_node(idx, state=k, depth=depth + 1, violated=now,
                           first=[p for p in now if p not in was], parent=head)
            if g.has_edge(head, idx):
                data = g.edges[head, idx]
                data["labels"].append(inst.label())
                data["violations"].update(p for p, _, _ in violations)
            else:
                g.add_edge(head, idx, labels=[inst.label()],
                           violations={p for p, _, _ in violations}, bold=False)
        head += 1
    for n in g.nodes:
        g.nodes[n]["terminal"] = g.out_degree(n) == 0 or \
            all(m == n for m in g.successors(n))
    sg = StateGraph(system, g, report)
    # the shortest counterexample of every violated property: BFS-tree path to the
    # first state (in discovery order) that violates it
    for n in sorted(g.nodes):
        for p in g.nodes[n]["first"]:
            if p in sg.paths:
                continue
            path = [n]
            while g.nodes[path[-1]]["parent"] is not None:
                path.append(g.nodes[path[-1]]["parent"])
            path.reverse()
            sg.paths[p] = path
            for a, b in zip(path, path[1:]):
                g.edges[a, b]["bold"] = True
    return sg


# -- drawing -------------------------------------------------------------------------

def _font(text: str, size: int = 8, colour: str | None = None, bold: bool = False) -> str:
    inner = f"<B>{esc(text)}</B>" if bold else esc(text)
    c = f' COLOR="{colour}"' if colour else ""
    return f'<FONT POINT-SIZE="{size}"{c}>{inner}</FONT>'


def _phase_var(system: System) -> VarInfo | None:
    req = [v for v in system.schema.vars if v.dim == "request" and v.owner == "model"]
    for v in req:
        if v.name == "phase":
            return v
    for v in req:
        if v.type.kind == "enum":
            return v
    return None


def _request_lines(system: System, s: State) -> list[str]:
    """Per request: its phase, then the model variables that differ from their initial
    value (two per line)."""
    schema = system.schema
    phase = _phase_var(system)
    init = system.initial
    span = max(1, schema.pages)
    lines = []
    for r in range(schema.requests):
        extra = []
        for v in schema.vars:
            if v.dim != "request" or v.owner != "model" or v is phase:
                continue
            x = s[v.offset + r]
            if x == init[v.offset + r]:
                continue
            value = v.type.to_json(x)
            extra.append(v.name if value is True else f"{v.name}={value}")
        rej = schema.by_name.get("rejected")
        if rej is not None and s[rej.offset + r]:
            extra.append("rejected")
        head = str(phase.type.to_json(s[phase.offset + r])) if phase is not None else ""
        c = request_colour(r)
        text = [_font(head or "—", 8, bold=True)]
        for i in range(0, len(extra), 2):
            text.append(_font(" ".join(extra[i:i + 2]), 7))
        lines.append(f'<TR><TD BGCOLOR="{c}" VALIGN="TOP">{_font(f"r{r}", 8, text_on(c), True)}'
                     f'</TD><TD ALIGN="LEFT" BALIGN="LEFT" COLSPAN="{span}">'
                     f'{"<BR/>".join(text)}</TD></TR>')
    return lines


def _pages_row(system: System, s: State) -> str:
    schema = system.schema
    if schema.pages == 0:
        return ""
    by = schema.by_name
    owner = by.get("page_owner")
    written = by.get("page_written")
    inflight = by.get("page_inflight")
    cells = []
    for p in range(schema.pages):
        o = owner.type.to_json(s[owner.offset + p]) if owner else None
        w = written.type.to_json(s[written.offset + p]) if written else None
        n = s[inflight.offset + p] if inflight else 0
        fill = tint(request_colour(o)) if o else "#FFFFFF"
        text = o or "·"
        if w:
            text += "✓" if w == o else f" {w}✓"
        if n:
            text += "⇢"
        cells.append(f'<TD BGCOLOR="{fill}" BORDER="1" COLOR="{BORDER}">{_font(text, 8)}</TD>')
    return (f'<TR><TD>{_font("pages", 7, DIM)}</TD>' + "".join(cells) + "</TR>")


def _scalars(system: System, s: State) -> list[str]:
    out = []
    for v in system.schema.vars:
        if v.dim == "scalar" and v.owner == "model" and s[v.offset] != system.initial[v.offset]:
            out.append(f"{v.name}={v.type.to_json(s[v.offset])}")
    if not out:
        return []
    span = system.schema.pages + 1
    return [f'<TR><TD COLSPAN="{span}" ALIGN="LEFT">{_font(" ".join(out), 8)}</TD></TR>']


def _node_label(sg: StateGraph, n: int) -> str:
    data = sg.graph.nodes[n]
    s = data["state"]
    span = sg.system.schema.pages + 1
    head = f"#{n}" + ("  initial" if n == 0 else "")
    rows = [f'<TR><TD COLSPAN="{span}" ALIGN="LEFT">'
            f'{_font(head, 7, INITIAL if n == 0 else DIM, n == 0)}</TD></TR>']
    rows += _request_lines(sg.system, s)
    rows.append(_pages_row(sg.system, s))
    rows += _scalars(sg.system, s)
    for p in data["first"]:
        rows.append(f'<TR><TD COLSPAN="{span}" ALIGN="LEFT">{_font(f"✘ {p}", 8, VIOLATION, True)}'
                    "</TD></TR>")
    return ('<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="1">'
            + "".join(rows) + "</TABLE>>")


def _tooltip(sg: StateGraph, n: int) -> str:
    schema = sg.system.schema
    s = sg.graph.nodes[n]["state"]
    parts = []
    for v in schema.vars:
        if v.owner == "flag":
            continue
        parts.append(f"{v.name} = {schema.values(s, v)}")
    return "\n".join(parts)


def state_graph_dot(sg: StateGraph) -> graphviz.Digraph:
    """The Graphviz drawing of a :class:`StateGraph`."""
    system = sg.system
    g = graphviz.Digraph("states")
    sizes = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
    merged = sg.symmetry.summary() if sg.symmetry.enabled else "symmetry reduction off"
    if sg.symmetry.enabled and (sg.symmetry.requests or sg.symmetry.pages):
        merged += ": symmetric states merged"
    verdict = ("violated: " + ", ".join(sg.paths)) if sg.paths else "no property violated"
    title = (f"<<B>{esc(system.name)}</B> ({esc(sizes)}): {sg.states} states, "
             f"{sg.transitions} transitions<BR/>{esc(merged)} · {esc(verdict)}<BR/>"
             f'<FONT POINT-SIZE="9" COLOR="{DIM}">pages: owner (· free), ✓ written since '
             "allocated, ⇢ write in flight · bold: shortest counterexample · red: the state "
             "where a property is first violated, pink: after it</FONT>>")
    g.attr("graph", rankdir="TB", label=title, labelloc="t", labeljust="l", fontname=FONT,
           fontsize="12", nodesep="0.25", ranksep="0.45", newrank="true")
    g.attr("node", shape="box", style="rounded,filled", fillcolor="#FFFFFF", color="#888888",
           fontname=FONT, margin="0.04")
    g.attr("edge", fontname=FONT, fontsize="7", color="#777777", arrowsize="0.6")
    depth: dict[int, list[int]] = {}
    for n, d in sg.graph.nodes(data="depth"):
        depth.setdefault(int(d), []).append(int(n))
    g.node("start", label="", shape="point", width="0.12", color=INITIAL, fillcolor=INITIAL)
    for d in sorted(depth):
        with g.subgraph(name=f"layer{d}") as sub:
            sub.attr(rank="same")
            sub.node(f"depth{d}", label=f"depth {d}", shape="plaintext", style="",
                     fontcolor=DIM, fontsize="9")
            for n in depth[d]:
                data = sg.graph.nodes[n]
                attrs: dict[str, str] = {"tooltip": _tooltip(sg, n)}
                if data["first"]:
                    attrs.update(fillcolor=VIOLATION_TINT, color=VIOLATION, penwidth="2.5")
                elif data["violated"]:
                    attrs.update(fillcolor="#FBEFEF", color="#E08080")
                if n == 0:
                    attrs.update(color=INITIAL, penwidth="2.5")
                if data["terminal"] and n != 0:
                    attrs["peripheries"] = "2"
                sub.node(f"s{n}", label=_node_label(sg, n), **attrs)
    for d in sorted(depth)[1:]:
        g.edge(f"depth{d - 1}", f"depth{d}", style="invis")
    g.edge("start", "s0", color=INITIAL, penwidth="1.5")
    for a, b, data in sg.graph.edges(data=True):
        labels = data["labels"]
        text = "\n".join(labels[:EDGE_LABELS])
        if len(labels) > EDGE_LABELS:
            text += f"\n+{len(labels) - EDGE_LABELS} more"
        attrs = {"label": text}
        if data["violations"]:
            attrs.update(color=VIOLATION, fontcolor=VIOLATION)
        if data["bold"]:
            attrs.update(penwidth="3", style="bold")
            if not data["violations"]:
                attrs["color"] = "#222222"
        if sg.graph.nodes[b]["depth"] <= sg.graph.nodes[a]["depth"] and a != b:
            attrs["constraint"] = "false"
        g.edge(f"s{a}", f"s{b}", **attrs)
    return g


def render_state_graph(system: System, path: Path | str, *, max_states: int = DEFAULT_MAX_STATES,
                       symmetry: bool = True) -> Path:
    """Explore and draw ``system`` to ``path`` (.svg, .png, .pdf need ``dot``; .dot does not)."""
    sg = build_state_graph(system, max_states=max_states, symmetry=symmetry)
    return write_graph(state_graph_dot(sg), Path(path))


def graph_summary(sg: StateGraph) -> dict[str, Any]:
    """Counts for tests and tools: states, transitions, layers, violated properties."""
    return {"states": sg.states, "transitions": sg.transitions,
            "depth": max((d for _, d in sg.graph.nodes(data="depth")), default=0),
            "violated": {p: len(path) - 1 for p, path in sg.paths.items()}}
