"""The product exploration of two designs: the shortest behaviour one allows and the
other does not.

A *behaviour* is a sequence of action-instance labels (``admit(r0)``,
``prealloc(r0, page 1)``) together with the events each step emits. Both designs are
compiled at the same sizes; the search is a breadth-first search over pairs
(old state, new state) from the pair of initial states, without symmetry reduction.
At each pair, for every label enabled in at least one design:

* enabled in exactly one design — a distinguishing behaviour (an action that exists
  in only one design is a label the other never enables);
* enabled in both, but the steps emit different events, violate different
  properties (among the properties both designs check), or exactly one of them
  stops with a model error — a distinguishing behaviour;
* otherwise the search continues with the pair of successor states (when both
  steps stop with a model error, the behaviour ends there in both).

Breadth-first order makes the first distinguishing behaviour found a shortest one;
the search then finishes that layer and keeps a few other distinguishing behaviours
of the same length that differ in the design, the kind of difference or the action.
The search respects a limit on state pairs (pairs whose steps were compared) and a
deadline; a search stopped by
either has found no difference *within what it explored*, which is not a proof of
equivalence (``ProductOutcome.complete`` is False).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kvspec.lang.errors import ModelError
from kvspec.lang.schema import State
from kvspec.lang.system import ActionInstance, System
from kvspec.props.events import Event
from kvspec.trace import Trace, TraceStep, Violation

__all__ = ["BehaviourTrace", "Distinction", "ProductOutcome", "StepOutcome",
           "explore_product"]

OLD = "old"
NEW = "new"
#: how a distinguishing step differs
ENABLED = "enabled"      # the label is enabled in one design only
EVENTS = "events"        # both take it, with different events
VIOLATION = "violation"  # both take it, violating different properties
ERROR = "error"          # exactly one of them stops with a model error
#: at most this many other shortest distinguishing behaviours are kept
MAX_OTHERS = 5
#: why a search stopped early
STATE_LIMIT = "state-limit"
TIMEOUT = "timeout"


@dataclass
class StepOutcome:
    """One design taking one label from one state."""

    instance: ActionInstance
    state: State | None  # None when the step stopped with a model error
    events: tuple[Event, ...] = ()
    violated: dict[str, tuple[str, Event | None]] = field(default_factory=dict)
    error: str | None = None  # the model error (file:line: message)

    def same_as(self, other: "StepOutcome") -> bool:
        if (self.error is None) != (other.error is None):
            return False
        if self.error is not None:
            return True
        return self.events == other.events and set(self.violated) == set(other.violated)


@dataclass
class BehaviourTrace(Trace):
    """A trace of one design that is not a counterexample to one of its properties but
    a behaviour the other design does not have. ``prop`` names that comparison
    (``equivalence with OLD (old.py)``) and ``note`` says why the last step differs."""

    note: str = ""

    @property
    def reason(self) -> str:
        return self.note or super().reason


@dataclass
class Distinction:
    """The shortest behaviour found: ``prefix`` (labels both designs take with the
    same events) then ``label``, where the designs differ as ``kind`` says.
    ``allowed_by`` is the design that allows the behaviour as reported (for
    ``events``: NEW; for ``violation``: the design that violates; for ``error``:
    the design without the error)."""

    prefix: list[str]
    prefix_events: list[tuple[Event, ...]]
    label: str
    kind: str
    allowed_by: str
    old: StepOutcome | None  # None: OLD does not enable the label
    new: StepOutcome | None
    trace: BehaviourTrace | None = None       # of the design in ``allowed_by``
    other_trace: BehaviourTrace | None = None  # of the other design (prefix, and its step)

    def __len__(self) -> int:
        return len(self.prefix) + 1


@dataclass
class ProductOutcome:
    complete: bool           # every reachable state pair was explored
    pairs: int               # state pairs whose steps were all compared
    transitions: int         # joint steps taken
    depth: int
    seconds: float
    distinction: Distinction | None = None
    stopped: str | None = None  # STATE_LIMIT / TIMEOUT when the search ended early
    #: other distinguishing behaviours of the same length (one per design, kind of
    #: difference and action; without traces)
    others: list[Distinction] = field(default_factory=list)


def _events(raw: list[Any]) -> tuple[Event, ...]:
    return tuple(e if isinstance(e, Event) else Event(*e) for e in raw)


class _Side:
    """One design's stepping, restricted to the properties both designs check."""

    def __init__(self, system: System, common: set[str]) -> None:
        self.system = system
        self.common = common
        self.labels = {inst.index: inst.label() for inst in system.instances}
        self.by_label = {self.labels[i.index]: i for i in system.instances}
        self.invariants = [p for p in system.properties
                           if p.kind == "invariant" and p.name in common and p.fn is not None]

    def outcomes(self, state: State) -> dict[str, StepOutcome]:
        """Every enabled label from ``state`` and what taking it does."""
        out: dict[str, StepOutcome] = {}
        guard_ok = self.system.machine.guard
        for guard, groups in self.system.batches():
            for gkey, group in groups:
                if guard is not None and not guard_ok(state, guard, gkey):
                    continue
                for inst in group:
                    res = self.take(state, inst)
                    if res is not None:
                        out[self.labels[inst.index]] = res
        return out

    def take(self, state: State, inst: ActionInstance) -> StepOutcome | None:
        try:
            raw = inst.action.fn(state, *inst.args)
        except ModelError as exc:
            return StepOutcome(inst, None, error=str(exc))
        if raw is None:
            return None
        nxt, events, violations = raw
        nxt = tuple(nxt)
        violated: dict[str, tuple[str, Event | None]] = {}
        for prop, reason, ev in violations:
            if prop in self.common and prop not in violated:
                violated[prop] = (reason, ev)
        for p in self.invariants:
            try:
                ok = p.fn(nxt, None, None)  # type: ignore[misc]
            except ModelError as exc:
                return StepOutcome(inst, None, error=str(exc))
            if not ok and p.name not in violated:
                violated[p.name] = (f"invariant {p.name} fails after {inst.label()}", None)
        return StepOutcome(inst, nxt, _events(events), violated)


def explore_product(old: System, new: System, *, max_states: int | None = None,
                    timeout: float | None = None,
                    deadline: float | None = None,
                    progress: Callable[[int, int, float], None] | None = None
                    ) -> ProductOutcome:
    """Breadth-first search of the product of ``old`` and ``new`` (module docstring).
    ``max_states``: stop after this many state pairs; ``timeout``: seconds;
    ``deadline``: an absolute ``time.monotonic()`` end, whichever comes first."""
    start = time.monotonic()
    end = deadline
    if timeout is not None:
        end = start + timeout if end is None else min(end, start + timeout)
    common = {p.name for p in old.properties} & {p.name for p in new.properties}
    so, sn = _Side(old, common), _Side(new, common)
    order = list(sn.by_label) + [lb for lb in so.by_label if lb not in sn.by_label]
    rank = {lb: k for k, lb in enumerate(order)}

    init = (old.initial, new.initial)
    index: dict[tuple[State, State], int] = {init: 0}
    pairs: list[tuple[State, State]] = [init]
    parent: list[int] = [-1]
    via: list[str] = [""]
    depth: list[int] = [0]
    head = 0
    transitions = 0
    stopped: str | None = None
    last = start
    found: Distinction | None = None
    others: list[Distinction] = []
    kinds: set[tuple[str, str, str]] = set()
    while head < len(pairs):
        if found is not None and depth[head] > len(found.prefix):
            break  # the layer of the shortest distinguishing behaviours is done
        s_old, s_new = pairs[head]
        o_out, n_out = so.outcomes(s_old), sn.outcomes(s_new)
        labels = sorted(set(o_out) | set(n_out), key=lambda lb: rank.get(lb, len(rank)))
        for label in labels:
            a, b = o_out.get(label), n_out.get(label)
            if a is not None and b is not None and a.same_as(b):
                transitions += 1
                if a.state is None or b.state is None or found is not None:
                    continue  # both stopped with a model error: the behaviour ends
                key = (a.state, b.state)
                if key not in index:
                    index[key] = len(pairs)
                    pairs.append(key)
                    parent.append(head)
                    via.append(label)
                    depth.append(depth[head] + 1)
                continue
            kind, allowed = _classify(a, b)
            action = label.split("(", 1)[0]
            if found is None:
                found = _distinction(old, new, so, sn, parent, via, head, label, a, b)
                kinds.add((allowed, kind, action))
            elif (allowed, kind, action) not in kinds and len(others) < MAX_OTHERS:
                kinds.add((allowed, kind, action))
                others.append(_distinction(old, new, so, sn, parent, via, head, label, a, b,
                                           traces=False))
        head += 1
        now = time.monotonic()
        if progress is not None and now - last >= 0.2:
            progress(head, depth[head - 1], now - start)
            last = now
        if head < len(pairs):
            if end is not None and now >= end:
                stopped = TIMEOUT
                break
            if max_states is not None and head >= max_states:
                stopped = STATE_LIMIT
                break
    seconds = time.monotonic() - start
    if found is not None:
        return ProductOutcome(False, head, transitions, len(found), seconds, found,
                              others=others)
    complete = head >= len(pairs)
    return ProductOutcome(complete, head, transitions, max(depth[:head] or [0]), seconds,
                          None, None if complete else stopped)


def _classify(a: StepOutcome | None, b: StepOutcome | None) -> tuple[str, str]:
    """How two outcomes of one label differ, and which design allows the behaviour."""
    if a is None or b is None:
        return ENABLED, (NEW if a is None else OLD)
    if (a.error is None) != (b.error is None):
        return ERROR, (OLD if a.error is None else NEW)
    if a.events != b.events:
        return EVENTS, NEW
    return VIOLATION, (NEW if set(b.violated) - set(a.violated) else OLD)


def _distinction(old: System, new: System, so: _Side, sn: _Side, parent: list[int],
                 via: list[str], head: int, label: str, a: StepOutcome | None,
                 b: StepOutcome | None, traces: bool = True) -> Distinction:
    path: list[int] = []
    i = head
    while i > 0:
        path.append(i)
        i = parent[i]
    path.reverse()
    kind, allowed = _classify(a, b)
    found = Distinction([via[k] for k in path], [], label, kind, allowed, a, b)
    mine, side = (old, so) if allowed == OLD else (new, sn)
    trace, found.prefix_events = _trace(found, mine, side, old, new)
    if traces:
        found.trace = trace
        other_sys, other_side = (new, sn) if allowed == OLD else (old, so)
        found.other_trace, _ = _trace(found, other_sys, other_side, old, new)
    return found


def _name(system: System, which: str) -> str:
    return f"{which.upper()} ({system.loaded.path.name})"


def _trace(found: Distinction, system: System, side: _Side, old: System, new: System
           ) -> tuple[BehaviourTrace, list[tuple[Event, ...]]]:
    """Re-execute the behaviour on ``system`` (the prefix, and the last label where
    ``system`` enables it without a model error)."""
    which = OLD if system is old else NEW
    other = NEW if which == OLD else OLD
    other_sys = new if which == OLD else old
    trace = BehaviourTrace(system, f"equivalence with {_name(other_sys, other)}",
                           system.initial)
    state = system.initial
    prefix_events: list[tuple[Event, ...]] = []
    labels = found.prefix + [found.label]
    for n, label in enumerate(labels, 1):
        last = n == len(labels)
        inst = side.by_label.get(label)
        if inst is None:
            break
        res = side.take(state, inst)
        if res is None or res.state is None:
            break
        changes = system.schema.diff(state, res.state)
        violation = None
        if res.violated:
            prop, (reason, ev) = next(iter(res.violated.items()))
            violation = Violation(prop, reason, ev)
        if last:
            note = describe(found)
            event = violation.event if violation is not None else _first_difference(found)
            violation = Violation(trace.prop, note, event)
            trace.note = note
        else:
            prefix_events.append(res.events)
        trace.steps.append(TraceStep(n, inst, list(res.events), res.state, changes, violation))
        state = res.state
    if not trace.note:
        trace.note = describe(found)
    return trace, prefix_events


def _first_difference(found: Distinction) -> Event | None:
    a = found.old.events if found.old is not None else ()
    b = found.new.events if found.new is not None else ()
    for x, y in zip(a, b):
        if x != y:
            return y if found.allowed_by == NEW else x
    longer = b if found.allowed_by == NEW else a
    shorter = a if found.allowed_by == NEW else b
    return longer[len(shorter)] if len(longer) > len(shorter) else None


def events_text(events: tuple[Event, ...] | list[Event]) -> str:
    return ", ".join(e.text() for e in events) if events else "no events"


def describe(found: Distinction) -> str:
    """One line: how the two designs differ at the last step."""
    label = found.label
    a, b = found.old, found.new
    if found.kind == ENABLED:
        taker = a if b is None else b
        assert taker is not None
        who, not_who = ("NEW", "OLD") if b is not None else ("OLD", "NEW")
        return (f"{not_who} does not enable {label} here; {who} does "
                f"({events_text(taker.events)})")
    assert a is not None and b is not None
    if found.kind == ERROR:
        bad, good = ("NEW", b) if b.error is not None else ("OLD", a)
        err = b.error if b.error is not None else a.error
        return f"{bad} stops with a model error at {label}: {err}"
    if found.kind == EVENTS:
        return (f"at {label} OLD emits {events_text(a.events)}; "
                f"NEW emits {events_text(b.events)}")
    extra_new = sorted(set(b.violated) - set(a.violated))
    extra_old = sorted(set(a.violated) - set(b.violated))
    parts = []
    if extra_new:
        p = extra_new[0]
        parts.append(f"NEW violates {', '.join(extra_new)} at {label} ({b.violated[p][0]})")
    if extra_old:
        p = extra_old[0]
        parts.append(f"OLD violates {', '.join(extra_old)} at {label} ({a.violated[p][0]})")
    return "; ".join(parts) + (", the other design does not" if len(parts) == 1 else "")
