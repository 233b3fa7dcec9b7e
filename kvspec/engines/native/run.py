"""Running the compiled search in-process (ctypes) and mapping its result back.

The compiled library keeps the states, parents and instance indices; the outcome
is built by :func:`kvspec.engines.explicit.outcome_of` from lazy views of them, so
every counterexample is re-executed concretely exactly as for the Python search.
A model error the search meets is re-executed concretely and raised as the
:class:`~kvspec.lang.errors.ModelError` the concrete interpretation raises.
"""
from __future__ import annotations

import ctypes
import json
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from kvspec.coverage import CoverageRecorder
from kvspec.engines.canon import Canonicalizer
from kvspec.engines.explicit import (ALL_VIOLATED, FIRST_VIOLATION, OUT_OF_MEMORY, STATE_LIMIT,
                                     TIMEOUT, Deadline, ExplicitOutcome, Limits, OutOfTime,
                                     ProgressFn, _cut_short, _Found, _run_deadline, _schedule,
                                     outcome_of, time_limit)
from kvspec.engines.native.build import Built, cache_key, cached, compile_source, find_compiler
from kvspec.engines.native.codegen import generate
from kvspec.lang.schema import State
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import ActionInstance, System
from kvspec.props.events import Event
from kvspec.trace import InternalError
from kvspec.verdict import Status, Verdict

__all__ = ["NativeRun", "StateGraph", "explore_native", "native_state_graph", "omission_bound"]

_STOPPED = {0: None, 1: ALL_VIOLATED, 2: TIMEOUT, 3: STATE_LIMIT, 5: FIRST_VIOLATION,
            6: OUT_OF_MEMORY}
_INTERRUPTED = 4
I64 = ctypes.c_int64


class _Params(ctypes.Structure):
    _fields_ = [("max_states", I64), ("timeout_s", ctypes.c_double), ("stop_first", I64),
                ("fingerprint", I64), ("init_found", I64), ("edges", I64), ("workers", I64),
                ("dfs", I64), ("chunk", I64)]


class _Result(ctypes.Structure):
    _fields_ = [(name, I64) for name in
                ("states", "transitions", "head", "depth", "stopped", "err_kind", "err_state",
                 "err_inst", "stored_bytes", "table_bytes", "cpu_ns", "found_count")] + \
               [("found_state", I64 * 64), ("found_inst", I64 * 64), ("wall_ns", I64)]


_Progress = ctypes.CFUNCTYPE(ctypes.c_int, I64, I64, ctypes.c_double)
_LIBS: dict[Path, ctypes.CDLL] = {}


def _load(path: Path) -> ctypes.CDLL:
    lib = _LIBS.get(path)
    if lib is None:
        lib = ctypes.CDLL(str(path))
        lib.kv_run.restype = ctypes.c_void_p
        lib.kv_run.argtypes = [ctypes.POINTER(I64), ctypes.POINTER(_Params),
                               ctypes.POINTER(_Result), ctypes.POINTER(I64),
                               ctypes.POINTER(I64), _Progress]
        lib.kv_state.argtypes = [ctypes.c_void_p, I64, ctypes.POINTER(I64)]
        lib.kv_state.restype = ctypes.c_int
        for fn in (lib.kv_parent, lib.kv_via):
            fn.argtypes = [ctypes.c_void_p, I64]
            fn.restype = I64
        lib.kv_edges.argtypes = [ctypes.c_void_p, ctypes.POINTER(I64)]
        lib.kv_edges.restype = ctypes.POINTER(ctypes.c_uint32)
        lib.kv_events.argtypes = [ctypes.c_void_p, ctypes.POINTER(I64)]
        lib.kv_events.restype = ctypes.POINTER(ctypes.c_int32)
        lib.kv_states.argtypes = [ctypes.c_void_p, ctypes.POINTER(I64)]
        lib.kv_states.restype = ctypes.c_int
        lib.kv_free.argtypes = [ctypes.c_void_p]
        lib.kv_free.restype = None
        _LIBS[path] = lib
    return lib


class _Stored(Sequence[State]):
    """The stored states of a finished native search, unpacked on demand."""

    def __init__(self, lib: ctypes.CDLL, handle: int, count: int, bools: list[bool],
                 first: State) -> None:
        self.lib, self.handle, self.count, self.bools, self.first = lib, handle, count, bools, first
        self.buf = (I64 * len(bools))()

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, i: int) -> State: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[State]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.count))]
        if i < 0:
            i += self.count
        if i == 0:
            return self.first
        if not 0 <= i < self.count or not self.lib.kv_state(self.handle, i, self.buf):
            raise IndexError(i)
        return tuple(bool(x) if b else int(x) for x, b in zip(self.buf, self.bools))


class _Links(Sequence[int]):
    """Parent (or instance) index per stored state."""

    def __init__(self, fn: Any, handle: int, count: int) -> None:
        self.fn, self.handle, self.count = fn, handle, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.count))]
        return int(self.fn(self.handle, i))


@dataclass
class NativeRun:
    """What a native search reports beyond the common statistics."""

    meta: dict[str, Any]  # the layout description kept beside the compiled search
    built: Built
    generate_seconds: float  # CPU time of loading the cache or generating the C code
    cpu_seconds: float
    stored_bytes: int
    table_bytes: int
    wall_seconds: float = 0.0

    def to_json(self, states: int, fingerprint: bool, workers: int = 1) -> dict[str, Any]:
        total = self.stored_bytes + self.table_bytes
        return {"backend": "native", "workers": workers,
                "cpu_seconds": round(self.cpu_seconds, 4),
                "wall_seconds": round(self.wall_seconds, 4),
                "states_per_cpu_s": round(states / self.cpu_seconds, 1) if self.cpu_seconds else 0,
                "bytes_per_state": round(total / states, 1) if states else 0.0,
                "state_bytes": self.meta["state_bytes"], "state_bits": self.meta["state_bits"],
                "fingerprint": fingerprint,
                "build": {"generate_cpu_seconds": round(self.generate_seconds, 3),
                          "compile_seconds": round(self.built.seconds, 3),
                          "compile_cpu_seconds": round(self.built.cpu_seconds, 3),
                          "cached": self.built.cached, "compiler": self.built.compiler}}


def _build(system: System, canon: Canonicalizer, cache: Path | None
           ) -> tuple[Built, dict[str, Any]]:
    """The compiled search for ``system`` (from the cache when it is there) and its
    layout description."""
    sym = (canon.req_sym, canon.page_sym) if canon.active else (False, False)
    key = cache_key(system, sym)
    hit = cached(key, cache)
    if hit is not None:
        try:
            meta = json.loads(hit[1].read_text())
            return Built(hit[0], True, 0.0, meta["compiler"]), meta
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry is rebuilt
    gen = generate(system, canon if canon.active else None)
    meta = {"kinds": gen.kinds, "state_bytes": gen.layout.state_bytes,
            "state_bits": gen.layout.bits, "symmetry": list(gen.symmetry), **gen.notes}
    found = find_compiler()
    meta["compiler"] = found[1] if found is not None else ""
    built = compile_source(gen.units or gen.source, key, json.dumps(meta), directory=cache)
    return built, meta


def omission_bound(states: int) -> float:
    """Probability that 64-bit hash compaction merged two of ``states`` distinct states
    (birthday bound n(n-1)/2 / 2^64): the chance a fingerprint run missed a state."""
    return min(1.0, states * (states - 1) / 2 / 2.0 ** 64)


def explore_native(system: System, *, symmetry: bool = True, limits: Limits | None = None,
                   progress: ProgressFn | None = None, deadline: Deadline | None = None,
                   coverage: bool = True, count_orbits: bool = True, stop_at_first: bool = False,
                   fingerprint: bool = False, cache: Path | None = None, workers: int = 1,
                   dfs: bool = False, chunk: int = 0) -> ExplicitOutcome:
    """The search of :func:`kvspec.engines.explicit.explore`, compiled to C: the same
    states in the same order, the same verdicts and counterexamples. ``workers``:
    threads computing successors (the results are those of one). ``dfs``: depth-first
    instead, stopping at the first violation, whose counterexample is not a shortest
    one (without one, the same states as breadth-first). ``chunk``: states a worker
    expands at a time (1-64; 0: 64; small values spread small models over the
    threads). Raises
    :class:`~kvspec.engines.native.terms.Unsupported` or
    :class:`~kvspec.engines.native.build.BuildError` when it cannot run."""
    limits = limits or Limits()
    start = time.monotonic()
    dl = _run_deadline(limits, deadline)
    try:
        with time_limit(dl, "symmetry analysis"):
            report = analyse_symmetry(system, enabled=symmetry)
        canon = Canonicalizer(system.schema, report.requests, report.pages)
        with time_limit(dl, "native build"):
            t0 = time.process_time()
            built, meta = _build(system, canon, cache)
            gen_s = time.process_time() - t0
    except OutOfTime as exc:
        out = _cut_short(system, symmetry, str(exc), time.monotonic() - start)
        out.stopped_during = exc.phase
        return out
    use_canon = canon.active
    props = system.properties
    init_found = 0
    failed = system.failed_invariants(system.initial)  # a model error here is raised as it is
    for k, p in enumerate(props):
        if (p.kind == "invariant" and p.name in failed) or \
                (p.flag is not None and system.initial[p.flag]):
            init_found |= 1 << k
    init = canon.canon(system.initial)[0] if use_canon else system.initial
    lib = _load(built.path)
    left = dl.left()
    if left is not None and left <= 0:
        out = _cut_short(system, symmetry, "timeout", time.monotonic() - start)
        out.stopped_during = "native build"
        return out
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    params = _Params(limits.max_states or 0, left or 0.0, int(stop_at_first or dfs),
                     int(fingerprint), init_found, 0, workers, int(dfs), chunk)
    result = _Result()
    kinds: list[str] = meta["kinds"]
    ninst, nkinds = len(system.instances), max(len(kinds), 1)
    cov_inst, cov_ev = (I64 * ninst)(), (I64 * nkinds)()
    interrupted = [False]

    def on_progress(states: int, depth: int, seconds: float) -> int:
        if interrupted[0]:
            return 1
        try:
            if progress is not None:
                progress(states, depth, seconds, "explicit")
        except KeyboardInterrupt:
            interrupted[0] = True
            return 1
        return 0

    callback = _Progress(on_progress)
    c_init = (I64 * len(init))(*[int(x) for x in init])
    with _ctrl_c_noted(interrupted):
        handle = lib.kv_run(c_init, ctypes.byref(params), ctypes.byref(result), cov_inst,
                            cov_ev, callback)
    if not handle:
        raise MemoryError("native search: cannot allocate its tables")
    try:
        if interrupted[0] or result.stopped == _INTERRUPTED:
            raise KeyboardInterrupt
        bools = [t.kind == "bool" for t in system.slot_types()]
        states = _Stored(lib, handle, result.states, bools, tuple(init))
        parent = _Links(lib.kv_parent, handle, result.states)
        via = _Links(lib.kv_via, handle, result.states)
        if result.err_kind:
            _raise_model_error(system, canon if use_canon else None, states, parent, via, result)
        found = {p.name: _Found(result.found_state[k],
                                None if result.found_inst[k] < 0 else result.found_inst[k])
                 for k, p in enumerate(props) if result.found_state[k] >= 0}
        recorder = None
        if coverage:
            recorder = CoverageRecorder(system)
            recorder.counts = [int(x) for x in cov_inst]
            recorder.events = {k: int(cov_ev[i]) for i, k in enumerate(kinds) if cov_ev[i]}
        stopped = _STOPPED.get(result.stopped)
        exhausted = result.head >= result.states
        count = count_orbits and use_canon and system.schema.requests <= 6 and not fingerprint
        out = outcome_of(system, report, canon if use_canon else None, found, states, parent, via,
                         transitions=result.transitions, depth=result.depth, stopped=stopped,
                         exhausted=exhausted, elapsed=time.monotonic() - start, deadline=dl,
                         count_orbits=count, recorder=recorder)
    finally:
        lib.kv_free(handle)
    run = NativeRun(meta, built, gen_s, result.cpu_ns / 1e9, result.stored_bytes,
                    result.table_bytes, result.wall_ns / 1e9)
    out.stats.extra["native"] = run.to_json(result.states, fingerprint, workers)
    if dfs:  # (breadth-first, the default, says nothing: its counterexamples are shortest)
        out.stats.extra["explicit"].update(order="depth-first", shortest=False)
        _depth_first_verdicts(out.verdicts)
    if fingerprint:
        _fingerprint_verdicts(out.verdicts, result.states)
    return out


#: how the verdict of a depth-first counterexample says it may not be a shortest one
NOT_SHORTEST = "depth-first: not claimed shortest"


def _depth_first_verdicts(verdicts: list[Verdict]) -> None:
    """A depth-first trail is a path of the search tree, not a shortest one: say so."""
    for v in verdicts:
        if v.status == Status.VIOLATED:
            v.detail = f"{v.detail}, {NOT_SHORTEST}"


def _fingerprint_verdicts(verdicts: list[Verdict], states: int) -> None:
    """HOLDS under hash compaction is not exhaustive: say so, with the omission bound."""
    bound = omission_bound(states)
    for v in verdicts:
        if v.status == Status.HOLDS:
            v.method = "fingerprint"
            v.detail = (f"{v.detail}; 64-bit hash compaction of {states:,} states, "
                        f"omission probability <= {bound:.1e}").lstrip("; ")


def _raise_model_error(system: System, canon: Canonicalizer | None, states: Sequence[State],
                       parent: Sequence[int], via: Sequence[int], result: _Result) -> None:
    """Re-execute the path to the model error the search met, and raise it."""
    invariant = result.err_kind == 2
    found = _Found(result.err_state, None if invariant else result.err_inst)
    schedule: list[ActionInstance] = _schedule(system, canon, states, parent, via, found)
    state = system.initial
    for i, inst in enumerate(schedule, 1):
        res = system.step(state, inst)  # the model error is raised here (last step) ...
        if res is None:
            raise InternalError(f"native: step {i} {inst.label()} of a model-error path is not "
                                "enabled when re-executed concretely")
        state = res.state
    system.failed_invariants(state)  # ... or here (an invariant errs on the state reached)
    raise InternalError("native: a model error found by the compiled search does not happen "
                        "when the path is re-executed concretely")




@dataclass
class StateGraph:
    """The whole reachable graph of the model's states (no symmetry), breadth-first:
    ``states[i]`` in the Python search's order, ``edges`` every transition as
    (source, target, instance index) in the order the search tries them, ``events[k]``
    what edge ``k`` emits, in order."""

    states: list[State]
    edges: list[tuple[int, int, int]]
    events: list[tuple[Event, ...]]
    cpu_seconds: float


@contextmanager
def _ctrl_c_noted(interrupted: list[bool]) -> Iterator[None]:
    """While the C loop runs, Ctrl-C only sets ``interrupted[0]``; the progress callback
    then stops the loop and the caller raises KeyboardInterrupt. (A KeyboardInterrupt
    raised inside a ctypes callback would be printed as "Exception ignored" and lost.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        interrupted[0] = True

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def native_state_graph(system: System, *, max_states: int | None = None,
                       timeout: float | None = None, cache: Path | None = None
                       ) -> StateGraph | str:
    """Every state and every transition of ``system``, by the compiled search in edge
    mode; or why the graph is not whole (``"timeout"``, ``"state-limit"``,
    ``"out-of-memory"``, ``"model-error"``: the caller builds it in Python instead).
    Raises :class:`~kvspec.engines.native.terms.Unsupported` or
    :class:`~kvspec.engines.native.build.BuildError` when it cannot run."""
    canon = Canonicalizer(system.schema, False, False)
    built, meta = _build(system, canon, cache)
    lib = _load(built.path)
    params = _Params(max_states or 0, timeout or 0.0, 0, 0, 0, 1)
    result = _Result()
    ninst = len(system.instances)
    cov_inst, cov_ev = (I64 * ninst)(), (I64 * max(len(meta["kinds"]), 1))()
    interrupted = [False]
    callback = _Progress(lambda states, depth, seconds: int(interrupted[0]))
    init = system.initial
    c_init = (I64 * len(init))(*[int(x) for x in init])
    with _ctrl_c_noted(interrupted):
        handle = lib.kv_run(c_init, ctypes.byref(params), ctypes.byref(result), cov_inst,
                            cov_ev, callback)
    if not handle:
        raise MemoryError("native search: cannot allocate its tables")
    try:
        if interrupted[0]:
            raise KeyboardInterrupt
        if result.err_kind:
            return "model-error"
        if result.stopped != 0 or result.head < result.states:
            return _STOPPED.get(result.stopped) or "stopped"
        states = _all_states(lib, handle, system, result.states)
        count = I64()
        ptr = lib.kv_edges(handle, ctypes.byref(count))
        flat = _copy(ptr, ctypes.c_uint32, 4 * count.value)
        edges = list(zip(flat[0::4], flat[1::4], flat[2::4]))
        ends = flat[3::4]
        ptr_ev = lib.kv_events(handle, ctypes.byref(count))
        ev_flat = _copy(ptr_ev, ctypes.c_int32, 3 * count.value)
    finally:
        lib.kv_free(handle)
    kinds: list[str] = meta["kinds"]
    made: dict[tuple[int, int, int], Event] = {}
    evs = []
    for k, r, p in zip(ev_flat[0::3], ev_flat[1::3], ev_flat[2::3]):
        ev = made.get((k, r, p))
        if ev is None:
            ev = made[(k, r, p)] = Event(kinds[k], r, None if p < 0 else p)
        evs.append(ev)
    events: list[tuple[Event, ...]] = []
    prev = 0
    for end in ends:
        events.append(tuple(evs[prev:end]) if end > prev else ())
        prev = end
    return StateGraph(states, edges, events, result.cpu_ns / 1e9)


def _copy(ptr: Any, ctype: Any, count: int) -> list[int]:
    """``count`` values of C type ``ctype`` at ``ptr``, as a list."""
    if not count:
        return []
    return list((ctype * count).from_address(ctypes.addressof(ptr.contents)))


def _all_states(lib: ctypes.CDLL, handle: int, system: System, count: int) -> list[State]:
    """The ``count`` stored states, unpacked as the Python search's state tuples."""
    types = system.slot_types()
    width = len(types)
    buf = (I64 * (count * width))()
    if not lib.kv_states(handle, buf):
        raise InternalError("native: the stored states are no longer all in memory")
    flat = buf[:]
    bools = [j for j, t in enumerate(types) if t.kind == "bool"]
    states: list[State] = []
    for i in range(0, count * width, width):
        row = flat[i:i + width]
        for j in bools:
            row[j] = bool(row[j])
        states.append(tuple(row))
    return states
