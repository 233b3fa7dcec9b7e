"""Counterexample traces: built by re-executing a schedule concretely.

Every engine hands back a schedule (a list of action instances); :func:`concretize`
runs it on the concrete interpretation from the initial state and checks that it
really ends by violating the property. A schedule that does not replay is a bug in
kvspec, never shown to a user as a counterexample.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvspec.lang.schema import State, VarInfo
from kvspec.lang.system import ActionInstance, System
from kvspec.props.events import Event

TRACE_FORMAT = "kvspec-trace/1"
#: the deepest nesting of arrays and objects a kvspec JSON document may have (traces,
#: results and certificates need fewer than 10 levels)
MAX_JSON_DEPTH = 64
#: the most requests or pages a trace document may describe: kvspec checks small
#: configurations, and readers (render, replay) allocate per request and per page
MAX_TRACE_IDS = 4096


class InternalError(RuntimeError):
    """kvspec contradicted itself (e.g. a solver counterexample did not replay)."""


@dataclass
class Violation:
    prop: str
    reason: str
    event: Event | None


@dataclass
class TraceStep:
    index: int
    instance: ActionInstance
    events: list[Event]
    state: State
    changes: list[tuple[VarInfo, int | None, Any, Any]]
    violation: Violation | None = None


@dataclass
class Trace:
    system: System
    prop: str
    initial: State
    steps: list[TraceStep] = field(default_factory=list)
    #: a lasso (liveness counterexample): ``steps[loop_start:]`` repeat forever, the
    #: last step returning to the state before ``steps[loop_start]`` (the initial
    #: state when 0); ``len(steps)``: the last state repeats (nothing is enabled).
    #: None for a finite (safety) counterexample. See ``docs/liveness.md``.
    loop_start: int | None = None

    @property
    def violation(self) -> Violation | None:
        if self.steps:
            return self.steps[-1].violation
        return None

    @property
    def reason(self) -> str:
        v = self.violation
        if v is not None:
            return v.reason
        return f"the initial state violates {self.prop}"

    def __len__(self) -> int:
        return len(self.steps)

    def to_json(self) -> dict[str, Any]:
        schema = self.system.schema
        loaded = self.system.loaded
        steps = []
        for st in self.steps:
            viol = None
            if st.violation is not None:
                viol = {"property": st.violation.prop, "reason": st.violation.reason,
                        "event": st.violation.event.to_json() if st.violation.event else None}
            steps.append({
                "index": st.index,
                "action": st.instance.name,
                "args": st.instance.args_json(),
                "label": st.instance.label(),
                "events": [e.to_json() for e in st.events],
                "changes": [{"var": v.name, "index": _json_index(v, i),
                             "before": v.type.to_json(a), "after": v.type.to_json(b)}
                            for v, i, a, b in st.changes],
                "state": schema.to_json_state(st.state),
                "violation": viol,
            })
        doc = {
            "format": TRACE_FORMAT,
            "model": {"name": self.system.name, "file": loaded.file, "sha256": loaded.sha256},
            "sizes": dict(self.system.sizes),
            "property": self.prop,
            "reason": self.reason,
            "schema": schema.to_json(),
            "initial": schema.to_json_state(self.initial),
            "steps": steps,
        }
        if self.loop_start is not None:
            doc["loop_start"] = self.loop_start
        return doc

    def _repr_svg_(self) -> str | None:  # Jupyter
        try:
            from kvspec.render.trace_graph import trace_svg
        except ImportError:
            return None
        try:
            return trace_svg(self.to_json())
        except Exception:
            return None


def _json_index(v: VarInfo, i: int | None) -> Any:
    if i is None:
        return None
    return f"r{i}" if v.dim == "request" else i


def concretize(system: System, prop: str, schedule: list[ActionInstance],
               engine: str = "engine") -> Trace:
    """Re-execute ``schedule`` from the initial state; it must end violating ``prop``."""
    state = system.initial
    trace = Trace(system, prop, state)
    if not schedule:
        if prop in system.failed_invariants(state) or prop in system.violated_flags(state):
            return trace
        raise InternalError(f"{engine}: empty counterexample for {prop} does not violate it")
    for i, inst in enumerate(schedule, 1):
        res = system.step(state, inst)
        if res is None:
            raise InternalError(f"{engine}: counterexample step {i} {inst.label()} is not enabled "
                                "when re-executed concretely")
        changes = system.schema.diff(state, res.state)
        violation = None
        if i == len(schedule):
            for p, reason, ev in res.violations:
                if p == prop:
                    violation = Violation(p, reason, ev)
                    break
            if violation is None and prop in system.failed_invariants(res.state):
                violation = Violation(prop, f"invariant {prop} fails after {inst.label()}", None)
            if violation is None:
                raise InternalError(f"{engine}: counterexample for {prop} does not violate it "
                                    "when re-executed concretely")
        elif any(p == prop for p, _, _ in res.violations):
            raise InternalError(f"{engine}: counterexample for {prop} violates it already at "
                                f"step {i}, so it is not a shortest one")
        trace.steps.append(TraceStep(i, inst, res.events, res.state, changes, violation))
        state = res.state
    return trace


def instance_by_label(system: System, name: str, args: dict[str, Any]) -> ActionInstance:
    """Find the action instance with this name and JSON arguments."""
    for inst in system.instances:
        if inst.name == name and inst.args_json() == args:
            return inst
    raise ValueError(f"the model has no action instance {name}({args})")


def schedule_from_json(system: System, data: Any) -> list[ActionInstance]:
    """The action instances of a ``kvspec-trace/1`` document, for re-execution.
    A document that is not a trace raises ``ValueError`` (one line)."""
    if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
        raise ValueError(f"not a kvspec trace (expected format {TRACE_FORMAT})")
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise ValueError("not a kvspec trace: 'steps' must be a list")
    schedule = []
    for n, step in enumerate(steps, 1):
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            raise ValueError(f"not a kvspec trace: step {n} has no 'action'")
        args = step.get("args", {})
        if not isinstance(args, dict):
            raise ValueError(f"not a kvspec trace: step {n}: 'args' must be an object")
        schedule.append(instance_by_label(system, step["action"], args))
    return schedule


# -- reading JSON documents -------------------------------------------------------------

class DocumentError(ValueError):
    """A file that cannot be read as the kvspec JSON document it should be (one line)."""


def json_depth(data: Any) -> int:
    """How deeply arrays and objects nest in ``data`` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            break
        stack.extend((child, depth) for child in children)
    return deepest


def load_json_document(path: str | Path, what: str = "a kvspec trace") -> Any:
    """The JSON value in the file ``path``.

    Raises :class:`DocumentError` with one line when the file is missing, a directory,
    unreadable, not UTF-8, not JSON, or nested deeper than ``MAX_JSON_DEPTH`` (then it is
    not ``what``).  What the value must look like is for the caller to check."""
    file = Path(path)
    if not file.exists():
        raise DocumentError(f"no such file: {path}")
    if file.is_dir():
        raise DocumentError(f"{path} is a directory, not {what}")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DocumentError(f"{path} is not {what}: not UTF-8 text") from None
    except OSError as exc:
        raise DocumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{path} is not JSON: {exc}") from None
    except RecursionError:
        raise DocumentError(f"{path} is not {what}: its JSON nests too deeply") from None
    if json_depth(data) > MAX_JSON_DEPTH:
        raise DocumentError(f"{path} is not {what}: its JSON nests deeper than "
                            f"{MAX_JSON_DEPTH} levels")
    return data
