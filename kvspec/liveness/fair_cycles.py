"""Fair cycles in a finite labelled graph: the Emerson–Lei style SCC decomposition.

The graph's edges carry labels (action instances); ``enabled[n]`` is the set of
labels with an edge out of node ``n``. A *fair cycle* inside a node set ``N`` over
the allowed edges ``E`` is a closed walk using only edges of ``E`` between nodes of
``N`` such that, for every label ``l``:

* weakly fair ``l``: the walk takes ``l``, or passes a node where ``l`` is not
  enabled (``l`` is not enabled *continuously*);
* strongly fair ``l``: the walk takes ``l``, or ``l`` is enabled at none of its
  nodes (``l`` is not enabled *infinitely often*).

These are the conditions on the edges and nodes an infinite path visits infinitely
often, which always form a strongly connected set; so a fair infinite path
exists iff some strongly connected set of allowed edges satisfies them.

Algorithm (Emerson–Lei; as in SPIN's and TLC's fair-cycle checks). Work list of
node sets, initially ``N``. For each set, compute its SCCs over the allowed
edges; skip an SCC without an internal edge. In an SCC ``C``, let ``taken`` be the
labels of its internal edges:

1. a strongly fair label not in ``taken`` but enabled somewhere in ``C`` cannot be
   enabled on a fair cycle inside ``C`` (it would have to be taken, and no edge of
   ``C`` takes it): remove every node of ``C`` where such a label is enabled and
   put the rest back on the work list (each round removes a node: termination);
2. a weakly fair label not in ``taken`` but enabled at *every* node of ``C`` rules
   out every cycle inside ``C``: drop ``C``;
3. otherwise ``C`` is fair: a closed walk through all of ``C`` takes every label of
   ``taken`` and visits every node, so every weak label is taken or disabled
   somewhere, and every strong label not taken is disabled throughout (step 1).

If a fair cycle lies inside ``N``, it lies inside one SCC; steps 1 and 2 only
remove nodes no fair cycle of that SCC can visit, so the algorithm finds a
component containing it. Conversely every component reported contains the fair
closed walk built by :func:`fair_cycle`, which takes one edge of every fair label
of ``taken`` and visits one node where each weak label not taken is disabled.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

CheckFn = Callable[[], None]


@dataclass
class Graph:
    """Edges ``k``: ``src[k] -> dst[k]`` labelled ``label[k]``; ``out[n]``: edge ids."""

    out: list[list[int]] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    label: list[int] = field(default_factory=list)

    def add_node(self) -> int:
        self.out.append([])
        return len(self.out) - 1

    def add_edge(self, a: int, b: int, label: int) -> int:
        k = len(self.src)
        self.src.append(a)
        self.dst.append(b)
        self.label.append(label)
        self.out[a].append(k)
        return k

    def enabled(self, n: int) -> frozenset[int]:
        return frozenset(self.label[k] for k in self.out[n])


@dataclass
class Component:
    """A fair strongly connected set: its nodes and its internal allowed edges."""

    nodes: frozenset[int]
    edges: list[int]


def sccs(nodes: Iterable[int], succ: Callable[[int], Iterable[int]]) -> list[list[int]]:
    """Strongly connected components of the subgraph on ``nodes`` (iterative Tarjan);
    ``succ(n)`` may name nodes outside ``nodes``, which are ignored."""
    members = set(nodes)
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in members:
        if root in index:
            continue
        work: list[tuple[int, Iterable[int]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(succ(root))))
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in members:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ(w))))
                    advanced = True
                    break
                if w in on_stack and index[w] < low[v]:
                    low[v] = index[w]
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def fair_components(g: Graph, nodes: Iterable[int], allowed: Callable[[int], bool],
                    weak: set[int], strong: set[int], enabled: Callable[[int], frozenset[int]],
                    check: CheckFn | None = None,
                    enabled_any: Callable[[int], frozenset[int]] | None = None
                    ) -> list[Component]:
    """Every fair component inside ``nodes`` over the edges ``allowed(k)``.

    ``enabled(n)`` is read as "the label is enabled at ``n``" by the weak test (enabled
    at every node) and, unless ``enabled_any`` is given, by the strong test (enabled at
    some node). Labels that stand for a *class* of instances (the symmetry quotient,
    :mod:`kvspec.liveness.quotient`) pass "every member enabled" as ``enabled`` and
    "some member enabled" as ``enabled_any``: the result then over-approximates."""
    some = enabled if enabled_any is None else enabled_any
    found: list[Component] = []
    work: list[set[int]] = [set(nodes)]
    while work:
        part = work.pop()
        if check is not None:
            check()

        def succ(n: int, part: set[int] = part) -> Iterable[int]:
            return (g.dst[k] for k in g.out[n] if g.dst[k] in part and allowed(k))

        for comp in sccs(part, succ):
            cset = set(comp)
            internal = [k for n in comp for k in g.out[n] if g.dst[k] in cset and allowed(k)]
            if not internal:
                continue
            taken = {g.label[k] for k in internal}
            bad_strong = {lab for lab in strong - taken if any(lab in some(n) for n in comp)}
            if bad_strong:
                rest = {n for n in comp if not (some(n) & bad_strong)}
                if rest:
                    work.append(rest)
                continue
            if any(all(lab in enabled(n) for n in comp) for lab in weak - taken):
                continue
            found.append(Component(frozenset(cset), internal))
    return found


def _walk(g: Graph, comp: Component, start: int, allowed: Callable[[int], bool],
          goal_node: Callable[[int], bool] | None, goal_edge: Callable[[int], bool] | None
          ) -> tuple[list[int], int]:
    """Shortest walk inside ``comp`` from ``start`` ending at a node with
    ``goal_node`` (length 0 allowed) or ending with an edge with ``goal_edge``."""
    if goal_node is not None and goal_node(start):
        return [], start
    prev: dict[int, tuple[int, int] | None] = {start: None}
    queue = deque([start])
    nodes = comp.nodes
    while queue:
        n = queue.popleft()
        for k in g.out[n]:
            m = g.dst[k]
            if m not in nodes or not allowed(k):
                continue
            if goal_edge is not None and goal_edge(k):
                return _unwind(prev, n) + [k], m
            if m in prev:
                continue
            prev[m] = (n, k)
            if goal_node is not None and goal_node(m):
                return _unwind(prev, m), m
            queue.append(m)
    raise AssertionError("fair_cycle: the component is not strongly connected")


def _unwind(prev: dict[int, tuple[int, int] | None], n: int) -> list[int]:
    path: list[int] = []
    step = prev[n]
    while step is not None:
        path.append(step[1])
        step = prev[step[0]]
    path.reverse()
    return path


def fair_cycle(g: Graph, comp: Component, entry: int, allowed: Callable[[int], bool],
               weak: set[int], strong: set[int], enabled: Callable[[int], frozenset[int]]
               ) -> list[int]:
    """A non-empty closed walk from ``entry`` (a node of ``comp``) back to it over
    allowed edges, fair for ``weak``/``strong``: it takes one edge of every fair
    label taken in ``comp`` and visits a node where every weak label it does not
    take is disabled."""
    taken_in_comp = {g.label[k] for k in comp.edges}
    path: list[int] = []
    cur = entry
    visited = {entry}
    for lab in sorted((weak | strong) & taken_in_comp):
        if any(g.label[k] == lab for k in path):
            continue
        seg, cur = _walk(g, comp, cur, allowed, None, lambda k, lab=lab: g.label[k] == lab)
        path += seg
        visited.update(g.dst[k] for k in seg)
    for lab in sorted(weak - taken_in_comp):
        if any(lab not in enabled(n) for n in visited):
            continue
        seg, cur = _walk(g, comp, cur, allowed, lambda n, lab=lab: lab not in enabled(n), None)
        path += seg
        visited.update(g.dst[k] for k in seg)
    if cur != entry or not path:
        seg, cur = _walk(g, comp, cur, allowed, None, lambda k: g.dst[k] == entry)
        path += seg
    return path


def is_fair_walk(g: Graph, cycle: list[int], weak: set[int], strong: set[int],
                 enabled: Callable[[int], frozenset[int]]) -> bool:
    """Whether repeating the closed walk ``cycle`` forever is fair."""
    nodes = [g.src[k] for k in cycle]
    taken = {g.label[k] for k in cycle}
    for lab in weak - taken:
        if all(lab in enabled(n) for n in nodes):
            return False
    for lab in strong - taken:
        if any(lab in enabled(n) for n in nodes):
            return False
    return True


def shortest_lasso(cands: list[tuple[int, int, Any]], best_key: tuple[int, int] | None,
                   g: Any, allowed: Any, fair: Any, enabled: Any
                   ) -> tuple[tuple[int, int], int, list[Any]] | None:
    """Among ``(depth, entry, fair component or None for a run that stops)`` candidates,
    the lasso with the shallowest entry and then the shortest fair cycle, if it beats
    ``best_key``: ``((depth, cycle length), entry, cycle)``; None otherwise."""
    if not cands:
        return None
    depth0 = min(c[0] for c in cands)
    if best_key is not None and depth0 > best_key[0]:
        return None
    out = None
    for depth, entry, comp in cands:
        if depth != depth0:
            continue
        cycle = [] if comp is None else fair_cycle(g, comp, entry, allowed, fair.weak,
                                                   fair.strong, enabled)
        key = (depth, len(cycle))
        if (best_key is None or key < best_key) and (out is None or key < out[0]):
            out = (key, entry, cycle)
    return out
