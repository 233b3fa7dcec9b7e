"""Text rendering of liveness verdicts and lasso counterexamples.

A lasso prints its prefix step by step, then a ``loop:`` marker, the loop's steps
each marked ``↻``, and a last line saying where the loop returns to (or that the
run stops there, nothing being enabled). Each step shows the action instance,
the variables it changed and its events, as the safety traces do.
"""
from __future__ import annotations

from typing import IO, Any

from kvspec.trace import Trace
from kvspec.verdict import Stats, Status, Verdict

_MARK = {Status.HOLDS: "✔", Status.PROVED: "✔", Status.VIOLATED: "✘", Status.UNKNOWN: "?"}


def _value(v: Any, i: Any, value: Any) -> str:
    return str(v.type.fmt(value)) if hasattr(v.type, "fmt") else str(value)


def _step_line(step: Any, marker: str) -> list[str]:
    lines = [f"  {marker}{step.index:>3}. {step.instance.label()}"]
    for v, i, before, after in step.changes:
        if v.owner != "model":
            continue
        where = v.name if i is None else (f"{v.name}[r{i}]" if v.dim == "request"
                                          else f"{v.name}[{i}]")
        lines.append(f"         {where}: {_value(v, i, before)} → {_value(v, i, after)}")
    if step.events:
        lines.append("         events: " + ", ".join(e.text() for e in step.events))
    return lines


def render_trace(trace: Trace) -> str:
    """A lasso (prefix, loop marked) or a path into a deadlock, as text."""
    lines: list[str] = []
    loop = trace.loop_start
    steps = trace.steps
    prefix = steps if loop is None else steps[:loop]
    if prefix:
        lines.append("  prefix:" if loop is not None else "  path:")
    for st in prefix:
        lines.extend(_step_line(st, " "))
    if loop is not None:
        if loop == len(steps):
            lines.append("  loop: the last state repeats forever (no action is enabled)")
        else:
            span = f"step {loop + 1}" if loop + 1 == len(steps) else \
                f"steps {loop + 1}-{len(steps)}"
            lines.append(f"  loop ({span}, repeated forever):")
            for st in steps[loop:]:
                lines.extend(_step_line(st, "↻"))
            back = "the initial state" if loop == 0 else f"the state after step {loop}"
            lines.append(f"  ↻ back to {back}")
    lines.append(f"  why: {trace.reason}")
    return "\n".join(lines) + "\n"


def _symmetry_text(stats: Stats) -> str:
    sym = stats.symmetry or {}
    on = [d for d in ("requests", "pages") if sym.get(d)]
    if on:
        return "symmetry reduction over " + " and ".join(on) + "; states are orbits"
    reasons = sym.get("reasons") or []
    if sym.get("enabled") and reasons:
        return f"no symmetry reduction: {reasons[0]}"
    return "no symmetry reduction"


def render_verdicts(verdicts: list[Verdict], stats: Stats, title: str) -> str:
    """One line per verdict, then each counterexample."""
    width = max((len(v.prop) for v in verdicts), default=0)
    out = [title,
           f"  liveness: {stats.states:,} states, {stats.transitions:,} transitions, "
           f"depth {stats.depth}, {stats.seconds:.2f} s ({_symmetry_text(stats)})"]
    for v in verdicts:
        out.append(f"  {_MARK[v.status]} {v.prop:<{width}}  {v.headline()}")
    text = "\n".join(out) + "\n"
    for v in verdicts:
        if v.trace is not None:
            kind = "lasso" if v.trace.loop_start is not None else "path"
            text += f"\n{v.prop}: {kind} of {len(v.trace)} steps\n" + render_trace(v.trace)
    return text


def print_verdicts(out: IO[str], verdicts: list[Verdict], stats: Stats, title: str) -> None:
    out.write(render_verdicts(verdicts, stats, title))
