"""Coverage and vacuity: what a run actually exercised of the model.

A verdict says nothing about a design whose interesting actions never fire: a
property "holds" trivially when the ``abort`` that would break it is unreachable.
Every run therefore reports, next to its verdicts,

* per action and per action instance (``abort(r1)``) how many transitions fired it,
* per event kind how often it was emitted on those transitions,
* per selected library property the events it watches that never occurred,
* the model invariants that are true in *every* type-correct state (decided by Z3
  over the typed state): they constrain nothing, so "holds" says nothing.

``complete`` says whether every reachable state was seen; only then does a zero
count mean "never fires in any reachable state". Otherwise it means "not seen in
the states explored". Coverage is information, never a verdict.

:func:`coverage_of` explores without symmetry reduction (instance labels are real
ones). The explicit engine records the same counts while it searches
(:class:`CoverageRecorder`); under symmetry reduction an instance's count is the
number of transitions between representatives that fired an instance of its
*orbit* (the instances equal to it up to renaming interchangeable ids): an
instance fires in some reachable state iff a symmetric image of it fires on a
representative, so zero counts are exact either way.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang.errors import ModelError
from kvspec.lang.schema import State
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.symvalues import domain_constraint
from kvspec.lang.system import ActionInstance, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.props.events import Event
from kvspec.props.library import ALL as LIBRARY_ALL

__all__ = ["Coverage", "CoverageRecorder", "DEFAULT_MAX_STATES", "RUNNER_MAX_SECONDS",
           "RUNNER_MAX_STATES", "VACUITY_RLIMIT", "coverage_of", "vacuous_invariants"]

#: the default state budget of :func:`coverage_of`
DEFAULT_MAX_STATES = 200_000
#: the budget ``kvspec.runner.run`` gives it after a symbolic engine (bmc, kind, pdr)
RUNNER_MAX_STATES = 20_000
#: and at most this many seconds: coverage is information, it must not outlast a proof
RUNNER_MAX_SECONDS = 15.0
#: with a budget, the most seconds the first search gets (before any walk)
SEARCH_FIRST_S = 2.0
#: Z3 resource limit of one vacuity query (work, not seconds: the same answer on any machine)
VACUITY_RLIMIT = 5_000_000


@dataclass
class Coverage:
    complete: bool                 # every reachable state was seen: "never fires" is proven
    actions: dict[str, int]        # action name -> transitions seen firing it
    instances: dict[str, int]      # action instance label, e.g. "abort(r1)" -> count
    events: dict[str, int]         # event kind -> times emitted on the transitions seen
    unseen_events: dict[str, list[str]]  # selected property -> watched kinds never emitted
    vacuous_invariants: list[str]  # model invariants true in EVERY state of the types
    states: int = 0                # states explored (representatives under symmetry)
    symmetry: bool = False         # instance counts are per orbit (see the module docstring)

    @property
    def dead_actions(self) -> list[str]:
        return [name for name, n in self.actions.items() if n == 0]

    @property
    def dead_instances(self) -> list[str]:
        return [label for label, n in self.instances.items() if n == 0]

    def to_json(self) -> dict[str, Any]:
        return {"complete": self.complete, "states": self.states,
                "symmetry_orbits": self.symmetry,
                "actions": dict(self.actions), "instances": dict(self.instances),
                "events": dict(self.events),
                "dead_actions": self.dead_actions, "dead_instances": self.dead_instances,
                "unseen_events": {k: list(v) for k, v in self.unseen_events.items()},
                "vacuous_invariants": list(self.vacuous_invariants)}


def _orbit_key(inst: ActionInstance, requests: bool, pages: bool) -> tuple[Any, ...]:
    """The instance up to renaming of the interchangeable ids: an equality pattern."""
    seen: dict[tuple[str, int], int] = {}
    key: list[Any] = [inst.action.name]
    for (_, vtype), a in zip(inst.action.params, inst.args):
        dim = vtype.ref_dim
        if (dim == REQUEST and requests) or (dim == PAGE and pages):
            key.append((dim, seen.setdefault((dim, a), len(seen))))
        else:
            key.append(a)
    return tuple(key)


@dataclass
class CoverageRecorder:
    """Counts, per instance index and per event kind, during an exploration (hot path:
    :meth:`fired` is one list increment plus one per event)."""

    system: System
    counts: list[int] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.system.instances)

    def fired(self, index: int, events: list[Event]) -> None:
        self.counts[index] += 1
        ev = self.events
        for e in events:
            ev[e.kind] = ev.get(e.kind, 0) + 1

    def result(self, *, complete: bool, states: int, symmetry: tuple[bool, bool] = (False, False),
               vacuity: bool = True) -> Coverage:
        """The coverage; with symmetry, instance counts are summed over orbits."""
        system = self.system
        actions = {a.name: 0 for a in system.actions}
        for inst, n in zip(system.instances, self.counts):
            actions[inst.name] += n
        requests, pages = symmetry
        if requests or pages:
            per_orbit: dict[tuple[Any, ...], int] = {}
            keys = [_orbit_key(i, requests, pages) for i in system.instances]
            for k, n in zip(keys, self.counts):
                per_orbit[k] = per_orbit.get(k, 0) + n
            instances = {i.label(): per_orbit[k] for i, k in zip(system.instances, keys)}
        else:
            instances = {i.label(): n for i, n in zip(system.instances, self.counts)}
        events = dict(sorted(self.events.items()))
        unseen = {}
        for p in system.properties:
            info = LIBRARY_ALL.get(p.name)
            if p.kind == "monitor" and info is not None:
                missing = [k for k in info.events if not events.get(k)]
                if missing:
                    unseen[p.name] = missing
        vacuous = vacuous_invariants(system) if vacuity else []
        return Coverage(complete, actions, instances, events, unseen, vacuous, states,
                        requests or pages)


def vacuous_invariants(system: System, *, rlimit: int = VACUITY_RLIMIT) -> list[str]:
    """The model invariants whose negation is unsatisfiable over every type-correct
    state (Z3 over the symbolic encoding). An undecided query (resource limit) does
    not count as vacuous."""
    invariants = [p for p in system.properties if p.kind == "invariant" and p.ir is not None]
    if not invariants:
        return []
    cur = system.state_vars()
    domain = [domain_constraint(v, t) for v, t in zip(cur, system.slot_types())]
    out = []
    for p in invariants:
        solver = z3.Solver()
        solver.set("rlimit", rlimit)
        solver.add(*domain)
        solver.add(z3.Not(system.encode_invariant(p, cur)))
        if solver.check() == z3.unsat:
            out.append(p.name)
    return out


def coverage_of(system: System, *, max_states: int | None = DEFAULT_MAX_STATES,
                timeout: float | None = None) -> Coverage:
    """Coverage by a breadth-first exploration up to ``max_states`` states and
    ``timeout`` seconds (None: no limit); ``complete`` is False when a budget (or a
    model error on the way) stopped it. An incomplete coverage counts ``states`` as the
    states of the searches plus the steps of the walks.

    First a search with symmetry reduction (the explicit engine records coverage per
    orbit, exact for "never fires"), for ``SEARCH_FIRST_S`` at most when there is a
    budget: most models are explored completely within it, and its coverage is the
    answer. Otherwise random walks from the initial state (:func:`_walks`, a quarter
    of what is left at most): at a large size a search may never get past the first
    steps, a walk reaches the last action in tens of steps. When the walks leave an
    action or watched event unseen, the search runs again with all that is left. If
    the search ended early (once every property is violated), a plain exploration
    without reduction that ignores the properties. A complete search's coverage is
    the answer; otherwise what any stage saw."""
    start = time.monotonic()

    def left(part: int = 1) -> float | None:
        if timeout is None:
            return None
        return max(timeout - (time.monotonic() - start), 0.001) / part

    first = left()
    if first is not None:
        first = min(first, SEARCH_FIRST_S)
    reduced, stopped = _reduced(system, max_states, first)
    if reduced is not None and reduced.complete:
        return reduced
    rec = CoverageRecorder(system)
    walked = _walks(system, rec, left(4), min(WALK_STEPS, max_states or WALK_STEPS))
    # an instance a walk fires fires in a reachable state, so does every symmetric image
    sym = analyse_symmetry(system)
    orbits = (sym.requests and system.schema.requests > 1, sym.pages and system.schema.pages > 1)
    out = rec.result(complete=False, states=walked, symmetry=orbits, vacuity=False)
    if stopped == "timeout" and first is not None and (out.dead_actions or out.unseen_events):
        # the first search stopped at its time share: the rest of the budget to it
        reduced, stopped = _reduced(system, max_states, left())
        if reduced is not None and reduced.complete:
            return reduced
    if reduced is not None:
        out = _merged(reduced, out)
    if reduced is None or stopped == "all-violated":
        # it stopped before its budget: the states a plain search sees are new
        plain = _breadth_first(system, max_states, left())
        if plain.complete:
            return plain
        out = _merged(plain, out)
    return out


def _reduced(system: System, max_states: int | None, timeout: float | None
             ) -> tuple[Coverage | None, str | None]:
    """The coverage the explicit engine records in a search with symmetry reduction,
    and why that search ended early (None: it did not); no coverage when a model error
    stopped it."""
    from kvspec.engines.explicit import Limits, explore
    try:
        run = explore(system, symmetry=True, limits=Limits(max_states, timeout))
    except ModelError:
        return None, None
    return run.coverage, run.stopped


def _merged(a: Coverage, b: Coverage) -> Coverage:
    """What either of two incomplete explorations saw (counts added)."""
    def add(x: dict[str, int], y: dict[str, int]) -> dict[str, int]:
        return {k: x.get(k, 0) + y.get(k, 0) for k in dict.fromkeys([*x, *y])}

    unseen = {}
    for prop, kinds in a.unseen_events.items():
        missing = [k for k in kinds if k in b.unseen_events.get(prop, ())]
        if missing:
            unseen[prop] = missing
    return Coverage(False, add(a.actions, b.actions), add(a.instances, b.instances),
                    dict(sorted(add(a.events, b.events).items())), unseen,
                    a.vacuous_invariants or b.vacuous_invariants, a.states + b.states,
                    a.symmetry or b.symmetry)


def _breadth_first(system: System, max_states: int | None, timeout: float | None) -> Coverage:
    """A plain breadth-first exploration (no symmetry reduction, properties ignored)."""
    start = time.monotonic()
    rec = CoverageRecorder(system)
    index: set[State] = {system.initial}
    frontier: list[State] = [system.initial]
    batches = system.batches()
    step = system.machine.step
    guard_ok = system.machine.guard
    complete = True
    try:
        with system.machine.session():
            head = 0
            while head < len(frontier):
                if (max_states is not None and len(index) >= max_states) or \
                        (timeout is not None and time.monotonic() - start >= timeout):
                    complete = False
                    break
                s = frontier[head]
                head += 1
                for guard, groups in batches:
                    for gkey, group in groups:
                        if guard is not None and not guard_ok(s, guard, gkey):
                            continue
                        for inst in group:
                            out = step(s, inst.action.fast or inst.action.fn, inst.args)
                            if out is None:
                                continue
                            nxt, events, _violations = out
                            rec.fired(inst.index, events)
                            if nxt not in index:
                                index.add(nxt)
                                frontier.append(nxt)
                if head & 1023 == 0:  # drop the explored prefix: memory stays O(frontier)
                    del frontier[:head]
                    head = 0
    except ModelError:  # a reachable model error is the engines' finding, not coverage's
        complete = False
    return rec.result(complete=complete, states=len(index))


#: the longest random walk :func:`_walks` takes before it starts again from the start
WALK_LENGTH = 200
#: and the most steps of all its walks together
WALK_STEPS = 20_000


def _walks(system: System, rec: CoverageRecorder, timeout: float | None,
           max_states: int | None, seed: int = 0) -> int:
    """Random walks from the initial state, recorded in ``rec``, until every action
    fired and every watched event was emitted, or ``timeout`` seconds or
    ``max_states`` steps; the steps taken. Each step picks a random action among
    those with an enabled instance, then a random enabled instance of it (rare
    actions are not drowned by ones with many instances)."""
    import random

    rng = random.Random(seed)
    start = time.monotonic()
    batches = system.batches()
    step = system.machine.step
    guard_ok = system.machine.guard
    watched = {k for p in system.properties if p.kind == "monitor"
               for k in (LIBRARY_ALL[p.name].events if p.name in LIBRARY_ALL else ())}
    unseen_actions = {a.name for a in system.actions}
    taken = 0

    def everything_seen() -> bool:
        return not unseen_actions and all(rec.events.get(k) for k in watched)

    try:
        with system.machine.session():
            while not everything_seen():
                s = system.initial
                for _ in range(WALK_LENGTH):
                    if (timeout is not None and time.monotonic() - start >= timeout) or \
                            (max_states is not None and taken >= max_states):
                        return taken
                    order = list(range(len(batches)))
                    rng.shuffle(order)
                    moved = None
                    for b in order:
                        guard, groups = batches[b]
                        insts = [i for gkey, group in groups
                                 if guard is None or guard_ok(s, guard, gkey) for i in group]
                        rng.shuffle(insts)
                        for inst in insts:
                            out = step(s, inst.action.fast or inst.action.fn, inst.args)
                            if out is not None:
                                moved = (inst, out)
                                break
                        if moved is not None:
                            break
                    if moved is None:
                        break  # no action enabled: start again
                    inst, (s, events, _violations) = moved
                    rec.fired(inst.index, events)
                    unseen_actions.discard(inst.action.name)
                    taken += 1
    except ModelError:  # a reachable model error is the engines' finding, not coverage's
        pass
    return taken
