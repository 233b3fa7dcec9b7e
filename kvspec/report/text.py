"""Human-readable output: verdict lines and counterexamples as per-step diffs.

Colour is used on a terminal only (rich decides from the output stream); piped
output is plain text with aligned columns.
"""
from __future__ import annotations

from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvspec.coverage import Coverage
from kvspec.lang.schema import Schema
from kvspec.trace import Trace
from kvspec.verdict import Result, Status, Verdict

_STYLE = {Status.PROVED: "bold green", Status.HOLDS: "green", Status.VIOLATED: "bold red",
          Status.UNKNOWN: "bold yellow"}
_MARK = {Status.PROVED: "✔", Status.HOLDS: "✔", Status.VIOLATED: "✘", Status.UNKNOWN: "?"}


def make_console(stream: IO[str], color: bool | None = None, width: int | None = None) -> Console:
    """A console writing to ``stream``; colour only when it is a terminal."""
    tty = stream.isatty() if hasattr(stream, "isatty") else False
    force = color if color is not None else None
    return Console(file=stream, force_terminal=force, no_color=(color is False) or (
        color is None and not tty), width=width or (None if tty else 110), highlight=False,
        soft_wrap=False)


def sizes_text(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def verdict_line(v: Verdict) -> Text:
    text = Text()
    text.append(f"  {_MARK[v.status]} ", style=_STYLE[v.status])
    text.append(f"{v.prop:<28} ")
    text.append(v.headline(), style=_STYLE[v.status])
    if v.status is Status.HOLDS and v.method == "bounded":
        text.append("  (bounded only: not a proof)", style="yellow")
    elif v.status is Status.HOLDS and v.method == "fingerprint":
        text.append("  (hash compaction: not exhaustive)", style="yellow")
    return text


def _value(schema: Schema, var: Any, x: Any) -> str:
    return var.type.fmt(x) if var.type.kind == "ref" else str(var.type.to_json(x))


def trace_table(trace: Trace, show_monitor: bool = False) -> Table:
    """One row per step: action, what changed, events."""
    schema = trace.system.schema
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=False)
    table.add_column("step", justify="right", style="dim")
    table.add_column("action", style="bold cyan", no_wrap=True)
    table.add_column("changed")
    table.add_column("events")
    owners = ("model", "monitor") if show_monitor else ("model",)
    for st in trace.steps:
        changes = [(v, i, a, b) for v, i, a, b in st.changes if v.owner in owners]
        changed = Text()
        for k, (v, i, a, b) in enumerate(changes):
            if k:
                changed.append("\n")
            changed.append(v.label(i))
            changed.append(f" {_value(schema, v, a)} → ", style="dim")
            changed.append(_value(schema, v, b), style="bold")
        events = Text()
        bad = st.violation.event if st.violation else None
        for k, ev in enumerate(st.events):
            if k:
                events.append("\n")
            events.append(ev.text(), style="bold red" if ev == bad else "")
            if ev == bad:
                events.append("  ✘", style="bold red")
        table.add_row(str(st.index), st.instance.label(), changed, events)
    return table


def print_trace(console: Console, trace: Trace, show_monitor: bool = False) -> None:
    console.print(Text.assemble(("Counterexample", "bold"), f" for {trace.prop} "
                                f"({len(trace)} steps, {sizes_text(trace.system.sizes)}):"))
    if trace.steps:
        console.print(trace_table(trace, show_monitor))
    console.print(Text.assemble(("  ✘ ", "bold red"), (trace.reason, "red")))
    console.print()


#: why an explicit search stopped early (``stats.explicit.stopped``), as text
_STOPPED = {"all-violated": "every property was violated", "timeout": "the timeout",
            "state-limit": "the state limit"}


def stats_line(result: Result) -> str:
    """``explicit: 1,234 states, 5,678 transitions, depth 12, 0.40 s (…); symmetry …``.
    A search that stopped early says so: its states are not the whole state space."""
    stats = result.stats
    search = stats.extra.get("explicit")
    stopped = search.get("stopped") if isinstance(search, dict) else None
    if stats.states or stopped:
        states = f"{stats.states:,} states"
        if stopped:
            why = _STOPPED.get(str(stopped), str(stopped))
            states += f" explored before {why} (search stopped early)"
        detail = f"  {result.engine}: {states}, {stats.transitions:,} " \
                 f"transitions, depth {stats.depth}, {stats.seconds:.2f} s"
        if stats.seconds > 0 and result.engine == "explicit":
            detail += f" ({stats.states_per_s:,.0f} states/s)"
    elif stats.depth:  # symbolic engines explore no explicit states
        detail = f"  {result.engine}: depth {stats.depth}, {stats.seconds:.2f} s"
    else:
        detail = f"  {result.engine}: {stats.seconds:.2f} s"
    sym = stats.symmetry
    factor = sym.get("reduction_factor")
    if factor and factor != 1.0:
        if sym.get("concrete_states_exact", True):
            detail += f"; symmetry ×{factor} ({sym.get('concrete_states', 0):,} concrete states)"
        else:
            detail += f"; symmetry ×≈{factor} (≈{sym.get('concrete_states', 0):,} concrete " \
                      "states, estimated from a sample)"
    return detail


#: how many dead instances the coverage section names before "… (+N more)"
DEAD_INSTANCES_SHOWN = 6


def _never(cov: Coverage, plural: bool = False) -> str:
    """How sure a zero count is: proven when the exploration was complete."""
    if cov.complete:
        return "never fire in any reachable state" if plural else \
            "never fires in any reachable state"
    return f"not seen in the {cov.states:,} states explored"


def _listed(items: list[str], shown: int) -> str:
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f", … (+{more} more)" if more > 0 else "")


def coverage_findings(cov: Coverage) -> list[str]:
    """One sentence per finding: dead actions and instances, watched events that never
    occurred, vacuous invariants (what ``kvspec verify`` also warns about)."""
    out = [f"action {name} {_never(cov)}" for name in cov.dead_actions]
    dead_actions = set(cov.dead_actions)
    instances = [label for label in cov.dead_instances
                 if label.split("(", 1)[0] not in dead_actions]
    if instances:
        n = len(instances)
        out.append(f"{n} action instance{'s' if n > 1 else ''} {_never(cov, n > 1)}: "
                   f"{_listed(instances, DEAD_INSTANCES_SHOWN)}")
    for prop, kinds in cov.unseen_events.items():
        if cov.complete:
            when = "never emitted in any reachable state"
        else:
            when = f"not emitted in the {cov.states:,} states explored"
        out.append(f"{prop} watches {', '.join(kinds)}: {when} (the property may hold "
                   "vacuously)")
    for name in cov.vacuous_invariants:
        out.append(f"invariant {name} is true in every state of the types: it constrains "
                   "nothing")
    return out


def print_coverage(console: Console, cov: Coverage) -> None:
    """The coverage section: one headline, then one line per finding."""
    n_states = f"{cov.states:,} state{'' if cov.states == 1 else 's'}"
    scope = f"every reachable state, {n_states}" if cov.complete else \
        f"incomplete: {n_states} explored"
    if cov.symmetry:
        scope += ", up to symmetry"
    findings = coverage_findings(cov)
    head = Text.assemble(("coverage", "bold"), f" ({scope}): ")
    if not findings:
        n = len(cov.actions)
        head.append(f"all {n} action{'s' if n != 1 else ''} fire; every watched event occurs",
                    style="green" if cov.complete else "")
        console.print(head, soft_wrap=True)
        return
    head.append(f"{len(findings)} finding{'s' if len(findings) > 1 else ''}", style="yellow")
    console.print(head, soft_wrap=True)
    for line in findings:
        console.print(Text(f"  ! {line}", style="yellow"), soft_wrap=True)


def print_result(console: Console, result: Result, path: str) -> None:
    system = result.system
    stats = result.stats
    head = Text()
    head.append("kvspec ", style="bold")
    head.append(f"{system.name} ({path})  {sizes_text(system.sizes)}")
    console.print(head, soft_wrap=True)
    console.print(Text(stats_line(result), style="dim"), soft_wrap=True)
    for again in stats.extra.get("rechecked", []):
        console.print(Text(f"  re-checked {', '.join(again['properties'])} counting up to "
                           f"{again['inflight_bound']} writes in flight per page and request "
                           f"(a counterexample passed a saturated count): {again['states']:,} "
                           f"states, depth {again['depth']}, {again['seconds']:.2f} s",
                           style="dim"), soft_wrap=True)
    sym = stats.symmetry
    for reason in sym.get("reasons", []):
        if reason != "disabled on the command line":
            console.print(Text(f"  note: {reason}", style="yellow"))
    for v in result.verdicts:
        console.print(verdict_line(v))
    if result.coverage is not None:
        print_coverage(console, result.coverage)
    console.print()
    for v in result.verdicts:
        if v.trace is not None:
            print_trace(console, v.trace)
