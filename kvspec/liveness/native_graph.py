"""The liveness product graph built on the model graph of the native backend.

:func:`kvspec.engines.native.run.native_state_graph` gives every reachable model
state and every transition (source, target, instance, events) of the compiled
search, in the Python search's order; the events come from the guards and arguments
of the same encoding the successors come from, in emission order. The product with
the obligation monitor is then the breadth-first walk of
:func:`kvspec.liveness.graph.explore_product` over those edges: the same nodes,
numbered alike, the same edges in the same order, the same discharged obligations
(``tests/test_liveness_native.py``), without running a Python step.

:func:`explore_product_native` answers None — the caller then builds the graph in
Python, and ``warn`` gets one line where a backend is missing — when there is no C
compiler, the lowering refuses the model, or the compiled search did not finish (a
limit or a model error: the Python construction reports those as it always does).
"""
from __future__ import annotations

import time
from typing import Callable

from kvspec.engines.native import available
from kvspec.engines.native.build import BuildError
from kvspec.engines.native.run import StateGraph, native_state_graph
from kvspec.engines.native.terms import Unsupported
from kvspec.lang.system import System
from kvspec.liveness.graph import STATE_LIMIT, TIMEOUT, ProductGraph
from kvspec.liveness.obligations import Monitor, MonitorStep, Obligation, ObligationMonitor
from kvspec.props.events import Event

NONE: frozenset[Obligation] = frozenset()

__all__ = ["explore_product_native"]


def explore_product_native(system: System, monitor: ObligationMonitor, *,
                           max_states: int | None, deadline: float | None,
                           warn: Callable[[str], None] | None = None) -> ProductGraph | None:
    """The product graph of :func:`~kvspec.liveness.graph.explore_product`, on the
    native model graph; None when the Python construction must run instead."""
    if not available():
        if warn is not None:
            warn("no C compiler found (cc, gcc or clang; or set CC); using the Python "
                 "liveness graph")
        return None
    start = time.monotonic()
    left = None if deadline is None else deadline - start
    if left is not None and left <= 0:
        return None
    try:
        found = native_state_graph(system, max_states=max_states, timeout=left)
    except (BuildError, Unsupported) as exc:
        if warn is not None:
            first = str(exc).splitlines()[0]
            warn(f"native backend unavailable ({first}); using the Python liveness graph")
        return None
    if isinstance(found, str):
        return None
    return _product(system, monitor, found, max_states=max_states, deadline=deadline,
                    start=start)


def _product(system: System, monitor: ObligationMonitor, found: StateGraph, *,
             max_states: int | None, deadline: float | None, start: float) -> ProductGraph:
    """The breadth-first walk of :func:`explore_product` over the model graph."""
    states, edges, events = found.states, found.edges, found.events
    first = [0] * (len(states) + 1)  # edges of model state m: first[m] .. first[m + 1]
    for src, _dst, _inst in edges:
        first[src + 1] += 1
    for m in range(len(states)):
        first[m + 1] += first[m]
    pg = ProductGraph(system, monitor)
    g = pg.graph
    init = (0, monitor.initial())
    index: dict[tuple[int, Monitor], int] = {init: 0}
    model: list[int] = [0]  # the model state of each product node
    pg.states.append(states[0])
    pg.monitors.append(init[1])
    pg.parent_edge.append(-1)
    pg.depth.append(0)
    pg._enabled.append(None)
    g.add_node()
    advance = monitor.advance
    seen: dict[tuple[Monitor, tuple[Event, ...]], MonitorStep] = {}
    head = 0
    while head < len(model):
        m = model[head]
        mon = pg.monitors[head]
        d = pg.depth[head]
        for k in range(first[m], first[m + 1]):
            dst, inst = edges[k][1], edges[k][2]
            evs = events[k]
            if evs:  # the monitor's step depends on (monitor, events) only: kept
                ms = seen.get((mon, evs))
                if ms is None:
                    ms = seen[(mon, evs)] = advance(mon, evs)
                    if ms.saturated:
                        pg.saturated = True
                nmon, discharged = ms.monitor, ms.discharged
            else:
                nmon, discharged = mon, NONE
            key = (dst, nmon)
            idx = index.get(key)
            if idx is None:
                idx = len(model)
                index[key] = idx
                model.append(dst)
                pg.states.append(states[dst])
                pg.monitors.append(nmon)
                pg.depth.append(d + 1)
                pg._enabled.append(None)
                g.add_node()
                pg.parent_edge.append(len(g.src))
            g.add_edge(head, idx, inst)
            pg.discharged.append(discharged)
        head += 1
        pg.expanded = head
        if head < len(model):
            if deadline is not None and time.monotonic() >= deadline:
                pg.stopped = TIMEOUT
                break
            if max_states is not None and len(model) > max_states:
                pg.stopped = STATE_LIMIT
                break
    pg.seconds = time.monotonic() - start
    return pg
