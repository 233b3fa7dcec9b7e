"""Liveness counterexamples as traces: lassos (a prefix, then a loop forever) and
paths into a deadlock, re-executed concretely before anyone sees them.

A lasso is a :class:`~kvspec.trace.Trace` with ``loop_start`` set: ``steps[k:]``
(``k = loop_start``) repeat forever, the last step returning to the state before
``steps[k]``; ``k == len(steps)`` means the last state repeats because nothing is
enabled there. :func:`replay_lasso` re-executes a schedule with the obligation
monitor and checks everything the verdict claims: the loop closes (model state and
monitor), the obligation is pending at every state of the loop and no step of the
loop discharges it, and the loop is fair. A lasso that fails any of these is a bug
in kvspec (:class:`~kvspec.trace.InternalError`), never shown as a counterexample.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvspec.lang.schema import State
from kvspec.lang.system import ActionInstance, System
from kvspec.liveness.obligations import Monitor, Obligation, ObligationMonitor
from kvspec.props.events import Event
from kvspec.trace import InternalError, Trace, TraceStep, Violation, schedule_from_json


@dataclass
class LivenessTrace(Trace):
    """A liveness counterexample; ``explanation`` is its one-paragraph reason."""

    explanation: str = ""

    @property
    def reason(self) -> str:
        return self.explanation or super().reason

    @property
    def prefix_len(self) -> int:
        return len(self.steps) if self.loop_start is None else self.loop_start

    @property
    def loop_len(self) -> int:
        return 0 if self.loop_start is None else len(self.steps) - self.loop_start


@dataclass
class Replayed:
    states: list[State]        # states[i]: before step i (states[-1]: after the last)
    monitors: list[Monitor]
    events: list[list[Event]]
    discharged: list[frozenset[Obligation]]
    enabled: list[set[int]]    # per state: the enabled instance indices


def _replay(system: System, monitor: ObligationMonitor, schedule: list[ActionInstance]
            ) -> Replayed:
    state = system.initial
    mon = monitor.initial()
    rp = Replayed([state], [mon], [], [], [])
    for i, inst in enumerate(schedule, 1):
        res = system.step(state, inst)
        if res is None:
            raise InternalError(f"liveness: lasso step {i} {inst.label()} is not enabled when "
                                "re-executed concretely")
        ms = monitor.advance(mon, res.events)
        state, mon = res.state, ms.monitor
        rp.states.append(state)
        rp.monitors.append(mon)
        rp.events.append(res.events)
        rp.discharged.append(ms.discharged)
    return rp


def enabled_at(system: System, state: State) -> set[int]:
    return {res.instance.index for res in system.successors(state)}


def replay_lasso(system: System, monitor: ObligationMonitor, obligation: Obligation,
                 schedule: list[ActionInstance], loop_start: int, weak: set[int],
                 strong: set[int]) -> Replayed:
    """Re-execute a lasso and check every claim of it (module docstring)."""
    rp = _replay(system, monitor, schedule)
    n = len(schedule)
    check_loop(system, rp, schedule, loop_start, weak, strong, with_monitor=True)
    loop_states = list(range(loop_start, n + 1))
    for i in loop_states:
        if not monitor.is_pending(rp.monitors[i], obligation):
            raise InternalError(f"liveness: {obligation.prop} is not pending on the loop")
    for i in range(loop_start, n):
        if obligation in rp.discharged[i]:
            raise InternalError(f"liveness: the loop of a lasso discharges {obligation.prop}")
    return rp


def replay_schedule(system: System, schedule: list[ActionInstance]) -> Replayed:
    """Re-execute ``schedule`` from the initial state (no obligation monitor)."""
    return _replay(system, ObligationMonitor([], system.schema.requests,
                                             system.schema.pages, False), schedule)


def check_loop(system: System, rp: Replayed, schedule: list[ActionInstance], loop_start: int,
               weak: set[int], strong: set[int], *, with_monitor: bool) -> None:
    """Check that the re-executed lasso ``rp`` closes (on the model state, and the
    monitor ``with_monitor``) or stops with nothing enabled, and that its loop is
    fair; fill in ``rp.enabled`` for the loop's states."""
    n = len(schedule)
    if not 0 <= loop_start <= n:
        raise InternalError(f"liveness: loop_start {loop_start} outside the trace")
    loop_states = list(range(loop_start, n + 1))
    rp.enabled = [set() for _ in rp.states]
    for i in loop_states:
        rp.enabled[i] = enabled_at(system, rp.states[i])
    if loop_start == n:
        if rp.enabled[n]:
            raise InternalError("liveness: a lasso ends in a state where actions are enabled "
                                "without a loop")
    elif rp.states[n] != rp.states[loop_start] or \
            (with_monitor and rp.monitors[n] != rp.monitors[loop_start]):
        raise InternalError("liveness: the loop of a lasso does not return to its start")
    taken = {schedule[i].index for i in range(loop_start, n)}
    on_loop = [rp.enabled[i] for i in range(loop_start, n)] or [rp.enabled[n]]
    for lab in weak - taken:
        if all(lab in e for e in on_loop):
            raise InternalError("liveness: the loop of a lasso is not weakly fair")
    for lab in strong - taken:
        if any(lab in e for e in on_loop):
            raise InternalError("liveness: the loop of a lasso is not strongly fair")


def starvation(system: System, schedule: list[ActionInstance], loop_start: int,
               rp: Replayed) -> str:
    """The instances enabled on the loop of ``rp`` but never taken on it, with the
    fairness that would rule the loop out ("" when there are none)."""
    k = loop_start
    enabled_on_loop = [rp.enabled[i] for i in range(k, len(schedule))]
    taken = {inst.index for inst in schedule[k:]}
    always = set.intersection(*enabled_on_loop) - taken if enabled_on_loop else set()
    sometimes = set.union(*enabled_on_loop) - taken - always if enabled_on_loop else set()
    labels = {i.index: i for i in system.instances}
    text = ""
    if always:
        names = _some(labels, always)
        text += (f"; on the loop, {names} {'is' if len(always) == 1 else 'are'} enabled at every "
                 "state but never taken (weak fairness of "
                 f"{_actions(labels, always)} would rule this loop out)")
    if sometimes:
        names = _some(labels, sometimes)
        text += (f"; {names} {'is' if len(sometimes) == 1 else 'are'} enabled on the loop "
                 f"but never taken (strong fairness of {_actions(labels, sometimes)} would rule "
                 "this loop out)")
    return text


def _some(labels: dict[int, ActionInstance], which: set[int], most: int = 6) -> str:
    names = [labels[i].label() for i in sorted(which)]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _actions(labels: dict[int, ActionInstance], which: set[int]) -> str:
    names: list[str] = []
    for i in sorted(which):
        if labels[i].name not in names:
            names.append(labels[i].name)
    return ", ".join(names)


def build_trace(system: System, prop: str, schedule: list[ActionInstance],
                loop_start: int | None, explanation: str, event: Event | None) -> LivenessTrace:
    """The trace of ``schedule`` (already checked), its last step marked with ``prop``."""
    state = system.initial
    trace = LivenessTrace(system, prop, state, loop_start=loop_start, explanation=explanation)
    for i, inst in enumerate(schedule, 1):
        res = system.step(state, inst)
        if res is None:
            raise InternalError(f"liveness: step {i} {inst.label()} is not enabled on replay")
        changes = system.schema.diff(state, res.state)
        trace.steps.append(TraceStep(i, inst, res.events, res.state, changes))
        state = res.state
    if trace.steps:
        trace.steps[-1].violation = Violation(prop, explanation, event)
    return trace


def lasso_from_json(system: System, data: Any) -> LivenessTrace:
    """Re-execute a ``kvspec-trace/1`` document with ``loop_start``; the loop must
    close (``ValueError``, one line, otherwise)."""
    schedule = schedule_from_json(system, data)
    loop_start = data.get("loop_start")
    if isinstance(loop_start, bool) or not isinstance(loop_start, int) \
            or not 0 <= loop_start <= len(schedule):
        raise ValueError("not a kvspec lasso: 'loop_start' must be a step index "
                         f"0..{len(schedule)}")
    state = system.initial
    states = [state]
    for inst in schedule:
        res = system.step(state, inst)
        if res is None:
            raise ValueError(f"the lasso does not replay: {inst.label()} is not enabled")
        state = res.state
        states.append(state)
    if loop_start == len(schedule):
        if enabled_at(system, state):
            raise ValueError("the lasso does not replay: its last state is not final")
    elif states[loop_start] != state:
        raise ValueError("the lasso does not replay: its loop does not return to its start")
    reason = data.get("reason") if isinstance(data.get("reason"), str) else ""
    event = None
    steps = data.get("steps") or []
    if steps and isinstance(steps[-1], dict) and isinstance(steps[-1].get("violation"), dict):
        ev = steps[-1]["violation"].get("event")
        if isinstance(ev, dict) and isinstance(ev.get("kind"), str):
            req = str(ev.get("request", "r0")).lstrip("r")
            event = Event(ev["kind"], int(req) if req.isdigit() else 0, ev.get("page"))
    return build_trace(system, str(data.get("property", "")), schedule, loop_start, reason,
                       event)
