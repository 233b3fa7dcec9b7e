"""The reachable graph of a model in product with the obligation monitor.

A node is (model state, monitor state); an edge is one enabled action instance,
labelled with the instance's index and the obligations its events discharged.
Breadth-first, so the parent links give shortest paths. No symmetry reduction:
the states are the concrete states (sound and simple; a lasso is a concrete run).

A search stopped early (state limit, timeout) keeps what it explored: the first
``expanded`` nodes have all their successors, so a cycle or a deadlock among
them is real (only HOLDS needs the whole graph).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from kvspec.lang.schema import State
from kvspec.lang.system import ActionInstance, System
from kvspec.liveness.fair_cycles import Graph
from kvspec.liveness.obligations import Monitor, MonitorStep, Obligation, ObligationMonitor

TIMEOUT = "timeout"
STATE_LIMIT = "state-limit"


@dataclass
class ProductGraph:
    system: System
    monitor: ObligationMonitor
    states: list[State] = field(default_factory=list)
    monitors: list[Monitor] = field(default_factory=list)
    graph: Graph = field(default_factory=Graph)
    discharged: list[frozenset[Obligation]] = field(default_factory=list)  # per edge
    parent_edge: list[int] = field(default_factory=list)  # -1 for the initial node
    depth: list[int] = field(default_factory=list)
    expanded: int = 0
    stopped: str | None = None
    saturated: bool = False  # some write count went beyond the bound
    seconds: float = 0.0
    _enabled: list[frozenset[int] | None] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.stopped is None

    def __len__(self) -> int:
        return len(self.states)

    def enabled(self, n: int) -> frozenset[int]:
        """The action instances (indices) enabled in node ``n``'s model state."""
        cached = self._enabled[n]
        if cached is None:
            cached = self.graph.enabled(n)
            self._enabled[n] = cached
        return cached

    def terminal(self, n: int) -> bool:
        """Expanded and nothing is enabled: the run stays here forever."""
        return n < self.expanded and not self.graph.out[n]

    def path_to(self, n: int) -> list[int]:
        """The edges of a shortest path from the initial node to ``n``."""
        path: list[int] = []
        while self.parent_edge[n] >= 0:
            k = self.parent_edge[n]
            path.append(k)
            n = self.graph.src[k]
        path.reverse()
        return path


def explore_product(system: System, monitor: ObligationMonitor, *, max_states: int | None,
                    deadline: float | None, backend: str = "python",
                    warn: Callable[[str], None] | None = None) -> ProductGraph:
    """Breadth-first search of the product (``deadline``: a ``time.monotonic()`` value).
    ``backend="native"``: on the model graph of the compiled search
    (:mod:`kvspec.liveness.native_graph`; the same graph), falling back to Python."""
    if backend == "native":
        from kvspec.liveness.native_graph import explore_product_native
        pg = explore_product_native(system, monitor, max_states=max_states, deadline=deadline,
                                    warn=warn)
        if pg is not None:
            return pg
    elif backend != "python":
        raise ValueError(f"unknown backend {backend!r} (native or python)")
    start = time.monotonic()
    pg = ProductGraph(system, monitor)
    g = pg.graph
    init = (system.initial, monitor.initial())
    index: dict[tuple[State, Monitor], int] = {init: 0}
    pg.states.append(init[0])
    pg.monitors.append(init[1])
    pg.parent_edge.append(-1)
    pg.depth.append(0)
    pg._enabled.append(None)
    g.add_node()
    expand = product_successors(system, monitor)
    head = 0
    with system.machine.session():
        while head < len(pg.states):
            d = pg.depth[head]
            for inst, nxt, ms in expand(pg.states[head], pg.monitors[head]):
                if ms.saturated:
                    pg.saturated = True
                key = (nxt, ms.monitor)
                idx = index.get(key)
                if idx is None:
                    idx = len(pg.states)
                    index[key] = idx
                    pg.states.append(nxt)
                    pg.monitors.append(ms.monitor)
                    pg.depth.append(d + 1)
                    pg._enabled.append(None)
                    g.add_node()
                    pg.parent_edge.append(len(g.src))
                g.add_edge(head, idx, inst.index)
                pg.discharged.append(ms.discharged)
            head += 1
            pg.expanded = head
            if head < len(pg.states):
                pg.stopped = limit_reached(len(pg.states), max_states, deadline)
                if pg.stopped:
                    break
    pg.seconds = time.monotonic() - start
    return pg


def product_successors(system: System, monitor: ObligationMonitor
                       ) -> Callable[[State, Monitor],
                                     Iterator[tuple[ActionInstance, State, MonitorStep]]]:
    """The transitions of the product out of a node (state, monitor): each enabled
    action instance with its next state and the monitor's step. Instances that share a
    false leading guard are skipped together. Both breadth-first searches (this
    module's and :mod:`kvspec.liveness.quotient`'s) expand nodes with it."""
    batches = system.batches()
    step = system.machine.step
    guard_ok = system.machine.guard
    advance = monitor.advance

    def expand(s: State, mon: Monitor) -> Iterator[tuple[ActionInstance, State, MonitorStep]]:
        for guard, groups in batches:
            for gkey, group in groups:
                if guard is not None and not guard_ok(s, guard, gkey):
                    continue
                for inst in group:
                    out = step(s, inst.action.fn, inst.args)
                    if out is not None:
                        yield inst, out[0], advance(mon, out[1])

    return expand


def limit_reached(states: int, max_states: int | None, deadline: float | None) -> str | None:
    """Why a search with ``states`` nodes and more to expand stops now (None: it goes on)."""
    if deadline is not None and time.monotonic() >= deadline:
        return TIMEOUT
    if max_states is not None and states > max_states:
        return STATE_LIMIT
    return None
