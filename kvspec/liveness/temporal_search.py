"""The model's temporal properties (:mod:`kvspec.liveness.temporal`) on the explicit
product graph: fair cycles in the part of the graph where the property's
predicate keeps failing, and the re-execution check of their lassos.

The obligations of these properties are driven by state predicates, not events,
so they need no monitor of their own: the search restricts the product graph
(:mod:`kvspec.liveness.graph`) to a *region* and looks for a fair cycle (or a
state with nothing enabled) inside it with the same Emerson–Lei decomposition as
the library properties (:func:`kvspec.liveness.fair_cycles.fair_components`).
For obligation ``i`` (an id, or the one obligation of an unparameterised
property):

* ``eventually p``: the region is the nodes reachable from the initial node
  through states where ``p`` is false (the initial state included);
* ``always_eventually p``: every reachable node where ``p`` is false;
* ``leads_to(p, q)``: the nodes reachable, through states where ``q`` is false,
  from a reachable node where ``p`` holds and ``q`` does not.

A run violates the property iff its infinite suffix (or its final state) lies in
the region and it entered the region as described, so a fair cycle inside the
region, reached that way, is exactly a violating fair run: the product's other
component (the library monitor) is a function of the path and changes neither
the model states nor which instances are enabled. Predicates are evaluated on
every explored state, so a model error in one is reported wherever it is
reachable.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kvspec.lang.declare import ALWAYS_EVENTUALLY, EVENTUALLY
from kvspec.lang.schema import State
from kvspec.lang.system import ActionInstance, System
from kvspec.liveness.fair_cycles import Component, fair_components, shortest_lasso
from kvspec.liveness.graph import ProductGraph
from kvspec.liveness.lasso import Replayed, build_trace, check_loop, replay_schedule, starvation
from kvspec.liveness.temporal import Predicate, TemporalProperty
from kvspec.trace import InternalError
from kvspec.verdict import Status, Verdict

if TYPE_CHECKING:
    from kvspec.liveness.check import Fairness


@dataclass
class TemporalLasso:
    """A violating lasso of obligation ``ident`` (edges of the product graph)."""

    ident: int | None
    prefix: list[int]
    cycle: list[int]  # [] = the run stops at the end of the prefix


class _Values:
    """Predicate values per model state (product nodes share model states)."""

    def __init__(self, pg: ProductGraph) -> None:
        self.pg = pg
        self.cache: dict[tuple[int, int | None, State], bool] = {}

    def __call__(self, tp: TemporalProperty, pred: Predicate, i: int | None, n: int) -> bool:
        state = self.pg.states[n]
        key = (id(pred), i, state)
        v = self.cache.get(key)
        if v is None:
            v = tp.at(pred, state, i)
            self.cache[key] = v
        return v


def _region(pg: ProductGraph, sources: list[tuple[int, int]], inside: list[bool]
            ) -> tuple[dict[int, int], dict[int, int]]:
    """Shortest distances (a source starts at its given distance) and parent edges
    (-1 at a source) of the expanded nodes reachable from ``sources`` through nodes
    ``inside``."""
    g = pg.graph
    dist: dict[int, int] = {}
    parent: dict[int, int] = {}
    heap: list[tuple[int, int]] = []
    for d, n in sources:
        if d < dist.get(n, d + 1):
            dist[n] = d
            parent[n] = -1
            heap.append((d, n))
    heapq.heapify(heap)
    while heap:
        d, n = heapq.heappop(heap)
        if d > dist[n]:
            continue
        for k in g.out[n]:
            m = g.dst[k]
            if m >= pg.expanded or not inside[m]:
                continue
            if d + 1 < dist.get(m, d + 2):
                dist[m] = d + 1
                parent[m] = k
                heapq.heappush(heap, (d + 1, m))
    return dist, parent


def _prefix(pg: ProductGraph, parent: dict[int, int], n: int) -> list[int]:
    """The path into region node ``n``: a shortest path to its source, then the
    region's edges."""
    inner: list[int] = []
    while parent[n] >= 0:
        k = parent[n]
        inner.append(k)
        n = pg.graph.src[k]
    inner.reverse()
    return pg.path_to(n) + inner


def find_temporal_lasso(pg: ProductGraph, tp: TemporalProperty, fair: "Fairness",
                        check: Callable[[], None] | None) -> TemporalLasso | None:
    """The lasso with the shortest prefix (then the shortest loop) violating ``tp``
    on a fair run, over every obligation of it (module docstring)."""
    g = pg.graph
    values = _Values(pg)
    expanded = pg.expanded
    ids = tp.ids(pg.system)
    best: TemporalLasso | None = None
    best_key: tuple[int, int] | None = None
    for i in ids:
        if check is not None:
            check()
        p_val = [values(tp, tp.p, i, n) for n in range(expanded)]
        if tp.q is not None:
            q_val = [values(tp, tp.q, i, n) for n in range(expanded)]
            inside = [not v for v in q_val]
            sources = [(pg.depth[n], n) for n in range(expanded) if p_val[n] and not q_val[n]]
        else:
            inside = [not v for v in p_val]
            if tp.kind == EVENTUALLY:
                sources = [(0, 0)] if expanded and inside[0] else []
            else:
                sources = [(pg.depth[n], n) for n in range(expanded) if inside[n]]
        inside += [False] * (len(pg) - expanded)
        if not sources:
            continue
        dist, parent = _region(pg, sources, inside)
        region = set(dist)

        def allowed(k: int, region: set[int] = region) -> bool:
            return g.dst[k] in region

        cands: list[tuple[int, int, Component | None]] = []
        stops = [n for n in region if pg.terminal(n)]
        if stops:
            n = min(stops, key=lambda m: (dist[m], m))
            cands.append((dist[n], n, None))
        for comp in fair_components(g, region, allowed, fair.weak, fair.strong, pg.enabled,
                                    check):
            entry = min(comp.nodes, key=lambda m: (dist[m], m))
            cands.append((dist[entry], entry, comp))
        chosen = shortest_lasso(cands, best_key, g, allowed, fair, pg.enabled)
        if chosen is not None:
            best_key, entry, cycle = chosen
            best = TemporalLasso(i, _prefix(pg, parent, entry), cycle)
    return best


# -- re-execution --------------------------------------------------------------------------

def replay_temporal(system: System, tp: TemporalProperty, i: int | None,
                    schedule: list[ActionInstance], loop_start: int, weak: set[int],
                    strong: set[int]) -> tuple[Replayed, int]:
    """Re-execute a lasso claimed to violate obligation ``i`` of ``tp`` and check
    every claim: the loop closes on the model state (or the run stops with nothing
    enabled), the loop is fair, and the predicates fail as the property's kind
    requires. Returns the re-execution and the state where ``p`` holds (for
    ``leads_to``; 0 otherwise). A failed check is an :class:`InternalError`."""
    rp = replay_schedule(system, schedule)
    check_loop(system, rp, schedule, loop_start, weak, strong, with_monitor=False)
    n = len(schedule)
    states = rp.states
    loop = list(range(loop_start, n)) or [n]
    p_at = [tp.at(tp.p, st, i) for st in states]
    if tp.kind == EVENTUALLY:
        if any(p_at):
            raise InternalError(f"liveness: {tp.name}: the predicate holds on the lasso")
        return rp, 0
    if tp.kind == ALWAYS_EVENTUALLY:
        if any(p_at[t] for t in loop):
            raise InternalError(f"liveness: {tp.name}: the predicate holds on the loop")
        return rp, 0
    assert tp.q is not None
    q_at = [tp.at(tp.q, st, i) for st in states]
    for j in range(n + 1):
        if p_at[j] and not any(q_at[min(j, loop_start):]):
            return rp, j
    raise InternalError(f"liveness: {tp.name}: no state of the lasso where {tp.p.name} holds "
                        f"is followed only by states where {tp.q.name} is false")


def explain_temporal(system: System, tp: TemporalProperty, i: int | None,
                     schedule: list[ActionInstance], loop_start: int, fair: "Fairness",
                     rp: Replayed, j: int) -> str:
    """The one-paragraph reason of a re-executed temporal lasso."""
    n = len(schedule)
    k = loop_start
    p = tp.p.text(i)
    if tp.kind == EVENTUALLY:
        head = f"{p} never holds: it is false at every state of the run"
    elif tp.kind == ALWAYS_EVENTUALLY:
        head = (f"{p} holds only finitely often: it is false at every state of the "
                + ("last state" if k == n else "loop"))
    else:
        assert tp.q is not None
        where = "in the initial state" if j == 0 else f"after step {j} ({schedule[j - 1].label()})"
        head = f"{p} holds {where}, and {tp.q.text(i)} never holds from then on"
    if k == n:
        at = f"after step {n}" if n else "in the initial state"
        return (f"{head}; the run stops {at} with nothing enabled and stays there forever "
                f"[{fair.text()}]")
    span = f"steps {k + 1}-{n}" if n - k > 1 else f"step {k + 1}"
    return (f"{head}; the loop ({span}) repeats forever" + starvation(system, schedule, k, rp)
            + f" [{fair.text()}]")


def temporal_verdict(system: System, tp: TemporalProperty, schedule: list[ActionInstance],
                     loop_start: int, fair: "Fairness", method: str, detail: str,
                     ids: list[int | None] | None = None) -> Verdict:
    """Re-execute the lasso for the first obligation (of ``ids``, default all) it
    violates and build the VIOLATED verdict; one it violates for none is an
    :class:`InternalError`."""
    errors: list[str] = []
    for i in tp.ids(system) if ids is None else ids:
        try:
            rp, j = replay_temporal(system, tp, i, schedule, loop_start, fair.weak, fair.strong)
        except InternalError as exc:
            errors.append(str(exc))
            continue
        why = explain_temporal(system, tp, i, schedule, loop_start, fair, rp, j)
        trace = build_trace(system, tp.name, schedule, loop_start, why, None)
        return Verdict(tp.name, Status.VIOLATED, method, detail, trace)
    raise InternalError(f"liveness: the lasso for {tp.name} does not re-execute as a fair "
                        f"violating lasso ({errors[0] if errors else 'no obligation'})")


def lasso_verdict(pg: ProductGraph, tp: TemporalProperty, lasso: TemporalLasso,
                  fair: "Fairness", method: str) -> Verdict:
    """The VIOLATED verdict of a lasso found by :func:`find_temporal_lasso`."""
    g = pg.graph
    schedule = [pg.system.instances[g.label[k]] for k in lasso.prefix + lasso.cycle]
    loop_start = len(lasso.prefix)
    loop = f"loop of {len(lasso.cycle)}" if lasso.cycle else "stops"
    detail = f"{loop_start}-step prefix, {loop}; {fair.text()}"
    return temporal_verdict(pg.system, tp, schedule, loop_start, fair, method, detail,
                            [lasso.ident])
