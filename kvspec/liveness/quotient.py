"""The liveness search on the symmetry quotient (``kvspec live --symmetry``).

When the model treats request ids (and/or page ids) interchangeably
(:func:`kvspec.lang.symmetry.analyse_symmetry`), the product of the model with the
obligation monitor is explored up to renaming: a node is a representative of
its orbit, ``(canon(s), pi(m))`` where ``pi`` maps the model state ``s`` onto its
representative and ``m`` is the monitor, renamed by the same ``pi``. Every edge
keeps the permutation ``pi_e`` that maps its concrete successor onto the
representative it was stored as.

Fair cycles (the argument is in ``docs/liveness.md``, "Symmetry"):

1. **Tracked obligations.** The search runs on pairs ``(node, ob)``: the
   obligation ``ob`` pending at a representative, named in that representative's
   frame. An edge ``e`` that does not discharge ``ob`` leads to
   ``(dst, pi_e(ob))``. A closed walk of pairs therefore returns to the *same*
   concrete obligation; its permutations compose to a ``Pi`` that fixes it, and
   repeating the walk at most ``|orbit|`` times returns to the same concrete state.
2. **Fairness by classes.** A fair instance is named relative to the tracked
   obligation: its action and, per argument, "the obligation's request", "the
   obligation's page", "another id" or the value. A class is closed under every
   renaming that fixes the obligation, so "every member enabled", "some member
   enabled" and "some member taken" are the same in every frame. The Emerson–Lei
   search of :mod:`kvspec.liveness.fair_cycles` on classes *over-approximates*:
   the image of every concrete fair cycle lies in a component it reports.
3. **Concrete confirmation.** Each reported component is unfolded: the concrete
   states reachable from its entry whose images stay in it, with their real
   instances, searched by the exact (concrete) fair-cycle test. A fair cycle
   found there is a real lasso; when no component confirms, none exists.

So the verdicts equal the unreduced search's; lassos are concrete runs (the
prefix is the representatives' path, renamed step by step) and are re-executed
by :func:`kvspec.liveness.lasso.replay_lasso` like every other lasso. They are
not claimed shortest.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from kvspec.engines.canon import Canonicalizer, Perm, compose, invert
from kvspec.lang.schema import State
from kvspec.lang.system import ActionInstance, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.liveness.fair_cycles import Graph, fair_components, fair_cycle
from kvspec.liveness.graph import limit_reached, product_successors
from kvspec.liveness.obligations import Monitor, Obligation, ObligationMonitor
from kvspec.trace import InternalError

CheckFn = Callable[[], None]


def permute_monitor(mon: Monitor, perm: Perm, requests: int, pages: int) -> Monitor:
    """The monitor ``mon`` with its requests and pages renamed by ``perm``."""
    rperm, pperm = perm
    allocs, admits, counts, done = mon
    P = pages
    new_allocs = 0
    if allocs:
        for k in range(requests * P):
            if allocs >> k & 1:
                new_allocs |= 1 << (rperm[k // P] * P + pperm[k % P])
    new_admits = 0
    new_done = 0
    for r in range(requests):
        if admits >> r & 1:
            new_admits |= 1 << rperm[r]
        if done >> r & 1:
            new_done |= 1 << rperm[r]
    new_counts = counts
    if counts and any(counts):
        lst = [0] * len(counts)
        for k, c in enumerate(counts):
            lst[rperm[k // P] * P + pperm[k % P]] = c
        new_counts = tuple(lst)
    return (new_allocs, new_admits, new_counts, new_done)


def permute_obligation(ob: Obligation, perm: Perm) -> Obligation:
    rperm, pperm = perm
    return Obligation(ob.prop, rperm[ob.request], None if ob.page is None else pperm[ob.page])


class InstanceRenamer:
    """Action instances renamed by permutations (memoised)."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.by_args = {(i.name, i.args): i.index for i in system.instances}
        self._memo: dict[tuple[Perm, int], int] = {}

    def __call__(self, index: int, perm: Perm) -> int:
        key = (perm, index)
        out = self._memo.get(key)
        if out is None:
            inst = self.system.instances[index]
            rperm, pperm = perm
            args = tuple(rperm[a] if t.ref_dim == REQUEST else pperm[a] if t.ref_dim == PAGE
                         else a for (_, t), a in zip(inst.action.params, inst.args))
            out = self.by_args[(inst.name, args)]
            self._memo[key] = out
        return out


@dataclass
class QuotientGraph:
    """The reachable product up to symmetry; the ``ProductGraph`` fields plus, per edge,
    the permutation from the concrete successor onto the stored representative."""

    system: System
    monitor: ObligationMonitor
    canon: Canonicalizer
    states: list[State] = field(default_factory=list)
    monitors: list[Monitor] = field(default_factory=list)
    graph: Graph = field(default_factory=Graph)
    discharged: list[frozenset[Obligation]] = field(default_factory=list)
    perms: list[Perm] = field(default_factory=list)
    parent_edge: list[int] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    index: dict[tuple[State, Monitor], int] = field(default_factory=dict)
    initial_perm: Perm | None = None  # concrete initial state -> node 0
    expanded: int = 0
    stopped: str | None = None
    saturated: bool = False
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return self.stopped is None

    def __len__(self) -> int:
        return len(self.states)

    def enabled(self, n: int) -> frozenset[int]:
        return self.graph.enabled(n)

    def terminal(self, n: int) -> bool:
        return n < self.expanded and not self.graph.out[n]

    def path_to(self, n: int) -> list[int]:
        path: list[int] = []
        while self.parent_edge[n] >= 0:
            k = self.parent_edge[n]
            path.append(k)
            n = self.graph.src[k]
        path.reverse()
        return path

    def key(self, state: State, mon: Monitor) -> tuple[tuple[State, Monitor], Perm]:
        """The representative of the product node ``(state, mon)`` and the permutation
        onto it (a deterministic choice: one orbit may have more than one)."""
        rep, perm = self.canon.canon(state)
        return (rep, permute_monitor(mon, perm, self.canon.R, self.canon.P)), perm

    def unfold(self, edges: list[int]) -> tuple[list[ActionInstance], Perm]:
        """The concrete schedule of the representatives' path ``edges`` from node 0, and
        the permutation from the concrete state it reaches onto the last node."""
        assert self.initial_perm is not None
        rename = InstanceRenamer(self.system)
        sigma = self.initial_perm
        schedule: list[ActionInstance] = []
        g = self.graph
        for k in edges:
            schedule.append(self.system.instances[rename(g.label[k], invert(sigma))])
            sigma = compose(sigma, self.perms[k])
        return schedule, sigma


def explore_quotient(system: System, monitor: ObligationMonitor, canon: Canonicalizer, *,
                     max_states: int | None, deadline: float | None) -> QuotientGraph:
    """Breadth-first search of the product up to symmetry (as
    :func:`kvspec.liveness.graph.explore_product`, on representatives)."""
    start = time.monotonic()
    qg = QuotientGraph(system, monitor, canon)
    g = qg.graph
    init, qg.initial_perm = qg.key(system.initial, monitor.initial())
    qg.index[init] = 0
    qg.states.append(init[0])
    qg.monitors.append(init[1])
    qg.parent_edge.append(-1)
    qg.depth.append(0)
    g.add_node()
    expand = product_successors(system, monitor)
    key = qg.key
    index = qg.index
    head = 0
    with system.machine.session():
        while head < len(qg.states):
            d = qg.depth[head]
            for inst, nxt, ms in expand(qg.states[head], qg.monitors[head]):
                if ms.saturated:
                    qg.saturated = True
                node, perm = key(nxt, ms.monitor)
                idx = index.get(node)
                if idx is None:
                    idx = len(qg.states)
                    index[node] = idx
                    qg.states.append(node[0])
                    qg.monitors.append(node[1])
                    qg.depth.append(d + 1)
                    g.add_node()
                    qg.parent_edge.append(len(g.src))
                g.add_edge(head, idx, inst.index)
                qg.discharged.append(ms.discharged)
                qg.perms.append(perm)
            head += 1
            qg.expanded = head
            if head < len(qg.states):
                qg.stopped = limit_reached(len(qg.states), max_states, deadline)
                if qg.stopped:
                    break
    qg.seconds = time.monotonic() - start
    return qg


@dataclass
class QuotientLasso:
    """A concrete lasso found through the quotient: its schedule, where the loop starts
    and the (concrete) obligation it leaves pending."""

    obligation: Obligation
    schedule: list[ActionInstance]
    loop_start: int


class _Tracked:
    """The graph of pairs (quotient node, pending obligation of one property)."""

    def __init__(self, qg: QuotientGraph, prop: str, weak: set[int], strong: set[int]) -> None:
        self.qg = qg
        self.g = Graph()
        self.pairs: list[tuple[int, Obligation]] = []
        self.ids: dict[tuple[int, Obligation], int] = {}
        self.qedge: list[int] = []  # per tracked edge: the quotient edge
        self.classes: dict[tuple[Any, ...], int] = {}
        self.members: dict[int, int] = {}  # class -> number of instances
        self.weak: set[int] = set()
        self.strong: set[int] = set()
        self._fair_weak = weak
        self._fair_strong = strong
        self._class_memo: dict[tuple[int, Obligation], int] = {}
        self._all: list[frozenset[int]] = []
        self._any: list[frozenset[int]] = []
        mon = qg.monitor
        for n in range(qg.expanded):
            for ob in mon.pending(qg.monitors[n]):
                if ob.prop == prop:
                    self._node(n, ob)
        qgr = qg.graph
        for t, (n, ob) in enumerate(list(self.pairs)):
            for k in qgr.out[n]:
                if ob in qg.discharged[k]:
                    continue
                m = qgr.dst[k]
                ob2 = permute_obligation(ob, qg.perms[k])
                u = self.ids.get((m, ob2))
                if u is None:
                    if m < qg.expanded:
                        raise InternalError("liveness: a renamed obligation is not pending "
                                            "at the representative it leads to")
                    u = self._node(m, ob2)  # m not expanded: a search cut short
                self.g.add_edge(t, u, self.class_of(qgr.label[k], ob))
                self.qedge.append(k)

    def _node(self, n: int, ob: Obligation) -> int:
        t = self.g.add_node()
        self.pairs.append((n, ob))
        self.ids[(n, ob)] = t
        self._all.append(frozenset())
        self._any.append(frozenset())
        return t

    def class_of(self, index: int, ob: Obligation) -> int:
        key = (index, ob)
        c = self._class_memo.get(key)
        if c is not None:
            return c
        inst = self.qg.system.instances[index]
        parts: list[Any] = [inst.name]
        for (_, t), a in zip(inst.action.params, inst.args):
            if t.ref_dim == REQUEST:
                parts.append("R" if a == ob.request else "r*")
            elif t.ref_dim == PAGE:
                parts.append("P" if a == ob.page else "p*")
            else:
                parts.append(a)
        ck = tuple(parts)
        c = self.classes.get(ck)
        if c is None:
            c = len(self.classes)
            self.classes[ck] = c
            self.members[c] = 0
        self._class_memo[key] = c
        return c

    def fairness(self) -> None:
        """The weak/strong classes and, per pair, the classes with every / some fair
        member enabled."""
        fair = self._fair_weak | self._fair_strong
        seen_obs: set[Obligation] = set()
        for _, ob in self.pairs:
            if ob in seen_obs:
                continue
            seen_obs.add(ob)
            for i in fair:
                c = self.class_of(i, ob)
                if i in self._fair_weak:
                    self.weak.add(c)
                if i in self._fair_strong:
                    self.strong.add(c)
        size: dict[tuple[Obligation, int], int] = {}
        for ob in seen_obs:
            for i in fair:
                ck = (ob, self.class_of(i, ob))
                size[ck] = size.get(ck, 0) + 1
        for t, (n, ob) in enumerate(self.pairs):
            counts: dict[int, int] = {}
            for i in self.qg.enabled(n) & fair:
                c = self.class_of(i, ob)
                counts[c] = counts.get(c, 0) + 1
            self._any[t] = frozenset(counts)
            self._all[t] = frozenset(c for c, k in counts.items() if k == size[(ob, c)])

    def enabled_all(self, t: int) -> frozenset[int]:
        return self._all[t]

    def enabled_any(self, t: int) -> frozenset[int]:
        return self._any[t]


def find_quotient_lasso(qg: QuotientGraph, prop: str, weak: set[int], strong: set[int],
                        check: CheckFn | None) -> QuotientLasso | None:
    """A concrete fair lasso that leaves an obligation of ``prop`` pending forever, or
    None when there is none among the explored nodes (module docstring)."""
    tr = _Tracked(qg, prop, weak, strong)
    if not tr.pairs:
        return None
    # a run that stops with the obligation pending: exact on representatives
    stops = [t for t, (n, _) in enumerate(tr.pairs) if qg.terminal(n)]
    best_stop = min(stops, key=lambda t: qg.depth[tr.pairs[t][0]]) if stops else None
    tr.fairness()
    comps = fair_components(tr.g, range(len(tr.pairs)), lambda k: True, tr.weak, tr.strong,
                            tr.enabled_all, check, tr.enabled_any)
    comps.sort(key=lambda c: min(qg.depth[tr.pairs[t][0]] for t in c.nodes))
    for comp in comps:
        if best_stop is not None and qg.depth[tr.pairs[best_stop][0]] <= \
                min(qg.depth[tr.pairs[t][0]] for t in comp.nodes):
            break
        found = _confirm(qg, tr, comp.nodes, weak, strong, check)
        if found is not None:
            return found
    if best_stop is not None:
        n, ob = tr.pairs[best_stop]
        schedule, sigma = qg.unfold(qg.path_to(n))
        return QuotientLasso(permute_obligation(ob, invert(sigma)), schedule, len(schedule))
    return None


def _confirm(qg: QuotientGraph, tr: _Tracked, comp: frozenset[int], weak: set[int],
             strong: set[int], check: CheckFn | None) -> QuotientLasso | None:
    """The concrete states reachable from the component's shallowest pair whose images
    stay in the component, searched exactly; a concrete lasso, or None."""
    system = qg.system
    monitor = qg.monitor
    entry_t = min(comp, key=lambda t: (qg.depth[tr.pairs[t][0]], t))
    n0, ob0 = tr.pairs[entry_t]
    cg = Graph()
    nodes: list[tuple[State, Monitor]] = [(qg.states[n0], qg.monitors[n0])]
    seen = {nodes[0]: 0}
    parent: list[int] = [-1]
    enabled: list[frozenset[int]] = []
    cg.add_node()
    queue = deque([0])
    steps = 0
    while queue:
        x = queue.popleft()
        s, mon = nodes[x]
        en: set[int] = set()
        for res in system.successors(s):
            en.add(res.instance.index)
            ms = monitor.advance(mon, res.events)
            if ob0 in ms.discharged:
                continue
            rep, perm = qg.key(res.state, ms.monitor)
            n = qg.index.get(rep)
            t = None if n is None else tr.ids.get((n, permute_obligation(ob0, perm)))
            if t is None or t not in comp:
                continue
            y = seen.get((res.state, ms.monitor))
            if y is None:
                y = len(nodes)
                seen[(res.state, ms.monitor)] = y
                nodes.append((res.state, ms.monitor))
                parent.append(-1)
                cg.add_node()
                queue.append(y)
                parent[y] = len(cg.src)
            cg.add_edge(x, y, res.instance.index)
        enabled.append(frozenset(en))
        steps += 1
        if check is not None and steps % 256 == 0:
            check()

    def en_of(x: int) -> frozenset[int]:
        return enabled[x]

    found = fair_components(cg, range(len(nodes)), lambda k: True, weak, strong, en_of, check)
    if not found:
        return None
    best = min(found, key=lambda c: min(c.nodes))
    start = min(best.nodes)
    cycle = fair_cycle(cg, best, start, lambda k: True, weak, strong, en_of)
    inner: list[int] = []
    x = start
    while parent[x] >= 0:
        inner.append(parent[x])
        x = cg.src[parent[x]]
    inner.reverse()
    prefix, sigma = qg.unfold(qg.path_to(n0))
    back = invert(sigma)  # the representative's frame -> the concrete run's
    rename = InstanceRenamer(system)
    tail = [system.instances[rename(cg.label[k], back)] for k in inner + cycle]
    return QuotientLasso(permute_obligation(ob0, back), prefix + tail,
                         len(prefix) + len(inner))
