"""Explicit-state engine: exhaustive breadth-first search, shortest counterexamples.

States are flat tuples; with symmetry reduction on, each successor is replaced by
the canonical representative of its orbit under request/page permutations (only
for the id spaces the model provably treats interchangeably, see
:mod:`kvspec.lang.symmetry`). Counterexamples found on representatives are mapped
back to a concrete schedule and re-executed by :func:`kvspec.trace.concretize`.
"""
from __future__ import annotations

import random
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from kvspec.engines.canon import Canonicalizer, Perm, compose, invert
from kvspec.lang.schema import State
from kvspec.lang.symmetry import SymmetryReport, analyse_symmetry
from kvspec.lang.system import ActionInstance, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.trace import InternalError, Trace, concretize
from kvspec.verdict import Stats, Status, Verdict

ProgressFn = Callable[[int, int, float], None]


@dataclass
class Limits:
    max_states: int | None = None
    timeout: float | None = None


@dataclass
class _Found:
    state: int  # index of the state *before* the violating step (or the state itself)
    instance: int | None  # None: the state itself violates (invariant / initial)


@dataclass
class ExplicitOutcome:
    verdicts: list[Verdict]
    stats: Stats
    symmetry: SymmetryReport
    complete: bool
    states: list[State] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    edges: list[tuple[int, int, int]] = field(default_factory=list)


def _peak_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def explore(system: System, *, symmetry: bool = True, limits: Limits | None = None,
            progress: ProgressFn | None = None, keep_graph: bool = False,
            count_orbits: bool = True) -> ExplicitOutcome:
    limits = limits or Limits()
    report = analyse_symmetry(system, enabled=symmetry)
    canon = Canonicalizer(system.schema, report.requests, report.pages)
    use_canon = canon.active
    props = system.properties
    invariant_props = [p for p in props if p.kind == "invariant"]
    flag_props = [p for p in props if p.flag is not None]
    found: dict[str, _Found] = {}
    start = time.monotonic()
    deadline = start + limits.timeout if limits.timeout else None

    init, _ = canon.canon(system.initial) if use_canon else (system.initial, canon.identity)
    index: dict[State, int] = {init: 0}
    states: list[State] = [init]
    parent: list[int] = [-1]
    via: list[int] = [-1]
    depth_of: list[int] = [0]
    edges: list[tuple[int, int, int]] = []
    count_orbits = count_orbits and use_canon and system.schema.requests <= 6

    for p in invariant_props:
        if p.name in system.failed_invariants(system.initial):
            found[p.name] = _Found(0, None)
    for p in flag_props:
        if system.initial[p.flag]:  # type: ignore[index]
            found[p.name] = _Found(0, None)

    transitions = 0
    head = 0
    last_report = start
    batches = system.batches()
    step = system.machine.step
    guard_ok = system.machine.guard
    canon_key = canon.key
    with system.machine.session():
        while head < len(states):
            if len(found) == len(props):
                break
            s = states[head]
            d = depth_of[head]
            for guard, groups in batches:
                for gkey, group in groups:
                    if guard is not None and not guard_ok(s, guard, gkey):
                        continue
                    for inst in group:
                        out = step(s, inst.action.fast or inst.action.fn, inst.args)
                        if out is None:
                            continue
                        transitions += 1
                        nxt, _events, violations = out
                        for prop, _reason, _ev in violations:
                            if prop not in found:
                                found[prop] = _Found(head, inst.index)
                        key = canon_key(nxt) if use_canon else nxt
                        idx = index.get(key)
                        if idx is None:
                            idx = len(states)
                            index[key] = idx
                            states.append(key)
                            parent.append(head)
                            via.append(inst.index)
                            depth_of.append(d + 1)
                            if invariant_props:
                                for name in system.failed_invariants(key):
                                    if name not in found:
                                        found[name] = _Found(idx, None)
                        if keep_graph:
                            edges.append((head, idx, inst.index))
            head += 1
            if (head & 255) == 0:
                now = time.monotonic()
                if progress is not None and now - last_report >= 0.2:
                    progress(len(states), d, now - start)
                    last_report = now
                if deadline is not None and now > deadline:
                    break
                if limits.max_states is not None and len(states) > limits.max_states:
                    break
            elif limits.max_states is not None and len(states) > limits.max_states:
                break
    elapsed = time.monotonic() - start
    exhausted = head >= len(states)

    verdicts: list[Verdict] = []
    sizes_text = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
    for p in props:
        f = found.get(p.name)
        if f is not None:
            schedule = _schedule(system, canon if use_canon else None, states, parent, via, f)
            trace = concretize(system, p.name, schedule, engine="explicit")
            verdicts.append(Verdict(p.name, Status.VIOLATED, "explicit",
                                    f"{len(trace)} steps", trace))
        elif exhausted:
            verdicts.append(Verdict(p.name, Status.HOLDS, "exhaustive", sizes_text))
        else:
            why = "timeout" if deadline is not None and time.monotonic() > deadline else \
                "state limit"
            verdicts.append(Verdict(p.name, Status.UNKNOWN, "explicit",
                                    f"{why} after {len(states)} states, depth {max(depth_of)}"))
    stats = Stats(states=len(states), transitions=transitions, depth=max(depth_of),
                  seconds=elapsed, peak_memory_mb=_peak_mb())
    stats.symmetry = report.to_json()
    if count_orbits and exhausted:
        concrete, exact = _concrete_count(canon, states)
        stats.symmetry["concrete_states"] = concrete
        stats.symmetry["concrete_states_exact"] = exact
        stats.symmetry["reduction_factor"] = round(concrete / len(states), 2)
    elif not use_canon:
        stats.symmetry["reduction_factor"] = 1.0
    out = ExplicitOutcome(verdicts, stats, report, exhausted)
    if keep_graph:
        out.states, out.parents, out.edges = states, parent, edges
    return out


#: beyond this many representatives the concrete count is estimated from a sample
EXACT_ORBIT_LIMIT = 20000


def _concrete_count(canon: Canonicalizer, states: list[State]) -> tuple[int, bool]:
    """How many concrete states the representatives stand for (exact, or estimated
    from a uniform sample of representatives when there are many)."""
    if len(states) <= EXACT_ORBIT_LIMIT:
        return sum(canon.orbit_size(s) for s in states), True
    rng = random.Random(0)
    sample = rng.sample(states, 2000)
    mean = sum(canon.orbit_size(s) for s in sample) / len(sample)
    return int(mean * len(states)), False


def _schedule(system: System, canon: Canonicalizer | None, states: list[State], parent: list[int],
              via: list[int], found: _Found) -> list[ActionInstance]:
    """The concrete schedule from the initial state to the violation."""
    path: list[int] = []  # instance indices along representatives
    i = found.state
    while i > 0:
        path.append(via[i])
        i = parent[i]
    path.reverse()
    if found.instance is not None:
        path.append(found.instance)
    instances = system.instances
    if canon is None:
        return [instances[k] for k in path]
    # walk representatives, tracking sigma: actual state -> representative
    _, sigma = canon.canon(system.initial)
    rep = states[0]
    schedule: list[ActionInstance] = []
    for k in path:
        inst = instances[k]
        schedule.append(_map_instance(system, inst, invert(sigma)))
        res = system.step(rep, inst)
        if res is None:
            raise InternalError("explicit: a stored transition is not enabled on replay")
        rep, pi = canon.canon(res.state)
        sigma = compose(sigma, pi)
    return schedule


def _map_instance(system: System, inst: ActionInstance, perm: Perm) -> ActionInstance:
    """The instance with request/page arguments renamed by ``perm``."""
    rperm, pperm = perm
    args = []
    for (_, vtype), a in zip(inst.action.params, inst.args):
        if vtype.ref_dim == REQUEST:
            args.append(rperm[a])
        elif vtype.ref_dim == PAGE:
            args.append(pperm[a])
        else:
            args.append(a)
    target = tuple(args)
    if target == inst.args:
        return inst
    for cand in system.instances:
        if cand.action is inst.action and cand.args == target:
            return cand
    raise InternalError(f"explicit: no instance {inst.name}{target}")
