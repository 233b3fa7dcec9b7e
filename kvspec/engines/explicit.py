"""Explicit-state engine: exhaustive breadth-first search, shortest counterexamples.

States are flat tuples; with symmetry reduction on, each successor is replaced by
the canonical representative of its orbit under request/page permutations (only
for the id spaces the model provably treats interchangeably, see
:mod:`kvspec.lang.symmetry`). Counterexamples found on representatives are mapped
back to a concrete schedule and re-executed by :func:`kvspec.trace.concretize`.

This module also holds the limits every engine shares: :class:`Limits` (state and
time budgets), :class:`Deadline` (one wall-clock budget for all phases of a run)
and :func:`time_limit`, which bounds a phase the engine cannot poll itself (the
symmetry analysis, a certificate check). A run that hits a limit says UNKNOWN for
what it has not decided; it never turns an unfinished search into a success.
"""
from __future__ import annotations

import ctypes
import math
import random
import resource
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

from kvspec.coverage import Coverage, CoverageRecorder
from kvspec.engines.canon import Canonicalizer, Perm, compose, invert
from kvspec.lang.schema import State
from kvspec.lang.symmetry import SymmetryReport, analyse_symmetry
from kvspec.lang.system import ActionInstance, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.trace import InternalError, concretize
from kvspec.verdict import Stats, Status, Verdict

ProgressFn = Callable[[int, int, float, str], None]  # states, depth, seconds, stage

#: why a search ended before every reachable state was explored (``stats.explicit.stopped``)
ALL_VIOLATED = "all-violated"
TIMEOUT = "timeout"
STATE_LIMIT = "state-limit"
WORK_LIMIT = "work-limit"
FIRST_VIOLATION = "first-violation"
OUT_OF_MEMORY = "out-of-memory"
#: how a verdict left UNKNOWN names the reason the search stopped
STOP_WORDS = {TIMEOUT: "timeout", STATE_LIMIT: "state limit",
              WORK_LIMIT: "symmetry-reduction work limit",
              FIRST_VIOLATION: "stopped at the first violation", OUT_OF_MEMORY: "out of memory"}


# -- limits shared by every engine --------------------------------------------------------------

def check_timeout(timeout: float | None) -> None:
    """``None`` is no limit; anything else must be a finite number of seconds > 0."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a number of seconds > 0 (None: no limit), "
                         f"got {timeout!r}")


def check_count(name: str, value: int | None, least: int) -> None:
    """``None`` is no limit; anything else must be an integer >= ``least``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least} (None: no limit), got {value!r}")


@dataclass
class Limits:
    """``max_states``: stop after this many states (>= 1); ``timeout``: seconds (> 0);
    ``max_canon_work``: stop once symmetry reduction has computed more than this many
    state images times the state's length (the Python search's canonical forms; with
    many interchangeable requests one state can have hundreds). ``None`` means no
    limit."""

    max_states: int | None = None
    timeout: float | None = None
    max_canon_work: int | None = None

    def __post_init__(self) -> None:
        check_count("max_states", self.max_states, 1)
        check_count("max_canon_work", self.max_canon_work, 1)
        check_timeout(self.timeout)


class OutOfTime(BaseException):
    """The run's deadline passed during ``phase``. A BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` on the way turns it into
    something else; the engine that set the limit catches it."""

    def __init__(self, phase: str) -> None:
        super().__init__(f"timeout during {phase}" if phase else "timeout")
        self.phase = phase


class Deadline:
    """Wall-clock budget shared by every phase of one run (``None``: no limit)."""

    def __init__(self, timeout: float | None) -> None:
        check_timeout(timeout)
        self.start = time.monotonic()
        self.end = None if timeout is None else self.start + timeout
        self.phase = ""

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float | None:
        """Seconds left (never below 0), None without a limit."""
        return None if self.end is None else max(0.0, self.end - time.monotonic())

    def left_ms(self) -> int | None:
        if self.end is None:
            return None
        return max(1, int((self.end - time.monotonic()) * 1000))

    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def check(self, phase: str | None = None) -> None:
        """Raise :class:`OutOfTime` once the deadline has passed."""
        if self.expired():
            raise OutOfTime(self.phase if phase is None else phase)

    def arm(self, solver: Any) -> None:
        """Give a Z3 solver (or fixedpoint) the time that is left."""
        ms = self.left_ms()
        solver.set("timeout", 4294967295 if ms is None else ms)


#: when the alarm's exception is lost (raised inside a ``__del__``), it fires again after this
_ALARM_REPEAT_S = 0.05


@contextmanager
def time_limit(deadline: Deadline, phase: str) -> Iterator[None]:
    """Run the body as ``phase`` of the run; raise :class:`OutOfTime` in it when the
    deadline passes, even in code that never polls the deadline (a SIGALRM timer on
    the main thread; elsewhere the deadline is checked when the body ends). An alarm
    already pending that fires earlier (an outer limit, a test timeout) is kept."""
    outer = deadline.phase
    deadline.phase = phase
    try:
        left = deadline.left()
        if left is None:
            yield
            return
        if left <= 0:
            raise OutOfTime(phase)
        usable = hasattr(signal, "setitimer") and \
            threading.current_thread() is threading.main_thread()
        pending = signal.getitimer(signal.ITIMER_REAL) if usable else (0.0, 0.0)
        if not usable or (pending[0] and pending[0] <= left):
            yield
            deadline.check(phase)
            return
        with _alarm(deadline, phase, left, pending):
            yield
    finally:
        deadline.phase = outer


@contextmanager
def _alarm(deadline: Deadline, phase: str, left: float, pending: tuple[float, float]
           ) -> Iterator[None]:
    active = [True]

    def on_alarm(signum: int, frame: Any) -> None:
        if active[0]:
            raise OutOfTime(deadline.phase or phase)

    def unraisable(info: Any) -> None:  # the alarm hit a __del__: it fires again shortly
        if not isinstance(info.exc_value, OutOfTime):
            previous_hook(info)

    previous_hook = sys.unraisablehook
    previous = signal.signal(signal.SIGALRM, on_alarm)
    sys.unraisablehook = unraisable
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(left, 1e-4), _ALARM_REPEAT_S)
    try:
        yield
    except ctypes.ArgumentError as exc:
        # the alarm fired while ctypes (under Z3's API) converted a call's arguments:
        # it reports that as ``ArgumentError("argument 1: OutOfTime: ...")``
        if ": OutOfTime:" in f"{exc}:":
            raise OutOfTime(deadline.phase or phase) from exc
        raise
    finally:
        active[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        sys.unraisablehook = previous_hook
        if pending[0]:
            rest = max(1e-3, pending[0] - (time.monotonic() - started))
            signal.setitimer(signal.ITIMER_REAL, rest, pending[1])


# -- the search ----------------------------------------------------------------------------------


@dataclass
class _Found:
    state: int  # index of the state *before* the violating step (or the state itself)
    instance: int | None  # None: the state itself violates (invariant / initial)


@dataclass
class ExplicitOutcome:
    """``complete``: every reachable state was explored; otherwise ``stopped`` says why
    the search ended early (``all-violated``, ``timeout`` or ``state-limit``)."""

    verdicts: list[Verdict]
    stats: Stats
    symmetry: SymmetryReport | None  # None: the analysis did not finish in time
    complete: bool
    states: list[State] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    edges: list[tuple[int, int, int]] = field(default_factory=list)
    stopped: str | None = None
    coverage: Coverage | None = None  # what the search saw fire (exact when complete)
    #: the phase the run's deadline passed in, when it passed before the search began
    stopped_during: str = ""


def peak_mb() -> float:
    """The peak resident memory of this process, in MB (a native search runs in it too)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _run_deadline(limits: Limits, deadline: Deadline | None) -> Deadline:
    """This search's deadline: its own timeout, or the run's deadline if that is earlier."""
    own = Deadline(limits.timeout)
    if deadline is not None and deadline.end is not None and (own.end is None
                                                               or deadline.end < own.end):
        own.end = deadline.end
    return own


def explore(system: System, *, symmetry: bool = True, limits: Limits | None = None,
            progress: ProgressFn | None = None, keep_graph: bool = False,
            count_orbits: bool = True, deadline: Deadline | None = None,
            coverage: bool = True, stop_at_first: bool = False,
            backend: str | None = "python", fingerprint: bool = False, workers: int = 1,
            dfs: bool = False, warn: Callable[[str], None] | None = None) -> ExplicitOutcome:
    """Breadth-first search of every reachable state (up to ``limits``; ``deadline``:
    the deadline of an enclosing run, which bounds this search too). With
    ``coverage`` the outcome records which actions, instances and events fired
    (:mod:`kvspec.coverage`; per orbit under symmetry reduction). ``stop_at_first``:
    stop once some property is violated (its counterexample is still a shortest one).
    ``backend``: ``python`` (this search), ``native`` (:mod:`kvspec.engines.native`: the
    model compiled to C, same results; ``fingerprint`` hash compaction there,
    ``workers`` threads, ``dfs`` depth-first to the first violation) or None (native
    when a C compiler is present); without a compiler, or for a model the native
    lowering does not support, this search runs (breadth-first, one thread) and
    ``warn`` gets one line."""
    if backend != "python":
        from kvspec.engines.native import run_native
        native = run_native(system, backend, symmetry=symmetry, limits=limits,
                            progress=progress, deadline=deadline, coverage=coverage,
                            stop_at_first=stop_at_first, fingerprint=fingerprint,
                            workers=workers, dfs=dfs, warn=warn)
        if native is not None:
            return native
    limits = limits or Limits()
    start = time.monotonic()
    dl = _run_deadline(limits, deadline)
    try:
        with time_limit(dl, "symmetry analysis"):
            report = analyse_symmetry(system, enabled=symmetry)
    except OutOfTime as exc:
        out = _cut_short(system, symmetry, str(exc), time.monotonic() - start)
        out.stopped_during = exc.phase
        return out
    canon = Canonicalizer(system.schema, report.requests, report.pages)
    use_canon = canon.active
    props = system.properties
    invariant_props = [p for p in props if p.kind == "invariant"]
    flag_props = [p for p in props if p.flag is not None]
    found: dict[str, _Found] = {}

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
    max_states = limits.max_states
    max_images = None if limits.max_canon_work is None or not use_canon else \
        max(1, limits.max_canon_work // max(1, len(system.initial)))
    stopped: str | None = None
    recorder = CoverageRecorder(system) if coverage else None
    fired = recorder.fired if recorder is not None else None
    with system.machine.session():
        while head < len(states):
            if len(found) == len(props):
                stopped = ALL_VIOLATED
                break
            if stop_at_first and found:
                stopped = FIRST_VIOLATION
                break
            s = states[head]
            d = depth_of[head]
            cut = False  # the deadline passed while this state was expanded
            for guard, groups in batches:
                if cut:
                    break
                for gkey, group in groups:
                    if cut:
                        break
                    if guard is not None and not guard_ok(s, guard, gkey):
                        continue
                    for inst in group:
                        out = step(s, inst.action.fast or inst.action.fn, inst.args)
                        if out is None:
                            continue
                        transitions += 1
                        if dl.end is not None and time.monotonic() >= dl.end:
                            # one expansion can take seconds (many tied ids at a large
                            # size); the state stays unexpanded, so nothing is complete
                            transitions -= 1
                            cut = True
                            break
                        nxt, events, violations = out
                        if fired is not None:
                            fired(inst.index, events)
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
            if cut:
                stopped = TIMEOUT
                break
            head += 1
            now = time.monotonic()  # every state: one expansion can be slow (many tied ids)
            if progress is not None and (head & 255) == 0 and now - last_report >= 0.2:
                progress(len(states), d, now - start, "explicit")
                last_report = now
            if dl.end is not None and now >= dl.end and head < len(states):
                stopped = TIMEOUT
                break
            if max_states is not None and len(states) > max_states and head < len(states):
                stopped = STATE_LIMIT
                break
            if max_images is not None and canon.images > max_images and head < len(states):
                stopped = WORK_LIMIT
                break
    exhausted = head >= len(states)
    return outcome_of(system, report, canon if use_canon else None, found, states, parent, via,
                      transitions=transitions, depth=max(depth_of), stopped=stopped,
                      exhausted=exhausted, elapsed=time.monotonic() - start, deadline=dl,
                      count_orbits=count_orbits, recorder=recorder,
                      graph=edges if keep_graph else None)


def outcome_of(system: System, report: SymmetryReport, canon: Canonicalizer | None,
               found: dict[str, _Found], states: Sequence[State], parent: Sequence[int],
               via: Sequence[int], *, transitions: int, depth: int, stopped: str | None,
               exhausted: bool, elapsed: float, deadline: Deadline, count_orbits: bool,
               recorder: CoverageRecorder | None,
               graph: list[tuple[int, int, int]] | None = None) -> ExplicitOutcome:
    """The verdicts and statistics of a finished search (either backend): every found
    violation mapped to a concrete schedule and re-executed by :func:`concretize`.
    ``states``/``parent``/``via``: the stored states (representatives), the index of
    each one's parent and of the instance that reached it."""
    if exhausted:
        stopped = None
    verdicts: list[Verdict] = []
    sizes_text = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
    for p in system.properties:
        f = found.get(p.name)
        if f is not None:
            schedule = _schedule(system, canon, states, parent, via, f)
            trace = concretize(system, p.name, schedule, engine="explicit")
            verdicts.append(Verdict(p.name, Status.VIOLATED, "explicit",
                                    f"{len(trace)} steps", trace))
        elif exhausted:
            verdicts.append(Verdict(p.name, Status.HOLDS, "exhaustive", sizes_text))
        else:
            why = STOP_WORDS.get(stopped or "", "state limit")
            verdicts.append(Verdict(p.name, Status.UNKNOWN, "explicit",
                                    f"{why} after {len(states)} states, depth {depth}"))
    stats = Stats(states=len(states), transitions=transitions, depth=depth,
                  seconds=elapsed, peak_memory_mb=peak_mb())
    stats.symmetry = report.to_json()
    stats.extra["explicit"] = {"complete": exhausted, "stopped": stopped}
    counted = _concrete_count(canon, states, deadline) \
        if canon is not None and count_orbits and exhausted else None
    if counted is not None:
        concrete, exact = counted
        stats.symmetry["concrete_states"] = concrete
        stats.symmetry["concrete_states_exact"] = exact
        stats.symmetry["reduction_factor"] = round(concrete / len(states), 2)
    elif canon is None:
        stats.symmetry["reduction_factor"] = 1.0
    out = ExplicitOutcome(verdicts, stats, report, exhausted, stopped=stopped)
    if recorder is not None:
        orbits = (canon.req_sym, canon.page_sym) if canon is not None else (False, False)
        out.coverage = recorder.result(complete=exhausted, states=len(states), symmetry=orbits)
    if graph is not None:
        out.states, out.parents, out.edges = list(states), list(parent), graph
    return out


def _cut_short(system: System, symmetry: bool, why: str, elapsed: float) -> ExplicitOutcome:
    """The outcome of a search that ran out of time before exploring anything."""
    verdicts = [Verdict(p.name, Status.UNKNOWN, "explicit", f"{why}, before the search")
                for p in system.properties]
    stats = Stats(seconds=elapsed, peak_memory_mb=peak_mb())
    stats.symmetry = {"enabled": symmetry, "requests": False, "pages": False,
                      "reasons": ["the symmetry analysis did not finish in time"]}
    stats.extra["explicit"] = {"complete": False, "stopped": TIMEOUT}
    return ExplicitOutcome(verdicts, stats, None, False, stopped=TIMEOUT)


#: beyond this many representatives the concrete count is estimated from a sample ...
EXACT_ORBIT_LIMIT = 20000
#: ... of this many of them
ORBIT_SAMPLE = 2000


def _concrete_count(canon: Canonicalizer, states: Sequence[State], deadline: Deadline
                    ) -> tuple[int, bool] | None:
    """How many concrete states the representatives stand for: exact, or estimated
    from a uniform sample of representatives when there are many (``False`` in the
    second place). None when the deadline passes first."""
    exact = len(states) <= EXACT_ORBIT_LIMIT
    sample = states if exact else \
        random.Random(0).sample(states, min(ORBIT_SAMPLE, len(states)))
    total = 0
    for s in sample:
        if deadline.expired():
            return None
        total += canon.orbit_size(s)
    if exact:
        return total, True
    return int(total / len(sample) * len(states)), False


def _schedule(system: System, canon: Canonicalizer | None, states: Sequence[State],
              parent: Sequence[int], via: Sequence[int], found: _Found) -> list[ActionInstance]:
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
