"""``kvspec show``: what a model declares, resolved for the chosen sizes."""
from __future__ import annotations

import inspect

from kvspec.lang.declare import SCALAR
from kvspec.lang.symmetry import analyse_symmetry, breaking_actions
from kvspec.lang.system import System
from kvspec.lang.types import PAGE, REQUEST


def describe_model(system: System, path: str) -> str:
    decl = system.loaded.decl
    lines = [f"{system.name} ({path})"]
    doc = inspect.getdoc(decl.cls)
    if doc:
        lines.append("  " + doc.splitlines()[0])
    lines.append("")
    lines.append("sizes (override with --size name=value):")
    for s in decl.sizes:
        kind = {"request": "request ids", "page": "page ids"}.get(
            s.dim or "", "parameter" if s.dim is None else f"{s.dim} ids, index space")
        default = "derived from the other sizes" if s.derived is not None \
            else f"default {s.default}"
        lines.append(f"  {s.name:<20} = {system.sizes[s.name]:<4} ({kind}; {default})")
    lines.append("")
    lines.append("state variables:")
    for v in system.schema.vars:
        if v.owner != "model":
            continue
        dim = "" if v.dim == SCALAR else f"per ({', '.join(v.axes)})" if v.two_d \
            else f"per {v.dim}"
        init = system.schema.values(system.initial, v)
        shown = init if v.dim == SCALAR or len(set(map(str, init))) > 1 else f"all {init[0]}"
        lines.append(f"  {v.name:<20} {v.type.describe():<18} {dim:<12} init {shown}")
    lines.append("")
    lines.append("monitor variables (maintained from events by the property library):")
    for v in system.schema.vars:
        if v.owner == "monitor":
            lines.append(f"  {v.name:<20} {v.type.describe():<18} per {v.dim}")
    lines.append("")
    lines.append("actions:")
    for a in system.actions:
        params = ", ".join(f"{n}: {t.describe()}" for n, t in a.params)
        count = sum(1 for i in system.instances if i.action is a)
        doc = (inspect.getdoc(a.fn) or "").splitlines()
        lines.append(f"  {a.name}({params})  [{count} instances]" + (f"  — {doc[0]}" if doc else ""))
    lines.append("")
    lines.append("properties:")
    for p in system.properties:
        lines.append(f"  {p.name:<28} {p.kind:<9} {p.summary}")
    lines.append("")
    lines.extend(_liveness_lines(system))
    report = analyse_symmetry(system)
    lines.append(report.summary())
    for reason in report.reasons:
        lines.append(f"  {reason}")
    for dim, on in ((REQUEST, report.requests), (PAGE, report.pages)):
        partial = None if on or not report.enabled else breaking_actions(system, dim)
        if partial:
            lines.append(f"  proofs one orbit at a time rename {dim}s in every action but "
                         f"{', '.join(sorted(partial))} (checked at every {dim})")
    return "\n".join(lines) + "\n"


def _liveness_lines(system: System) -> list[str]:
    """What ``kvspec live`` checks: the library's liveness properties, deadlock freedom,
    the model's own temporal properties, and the fairness it declares."""
    from kvspec.liveness.check import declared_fairness
    from kvspec.liveness.obligations import LIVENESS
    from kvspec.liveness.temporal import temporal_properties

    out = ["liveness (kvspec live):"]
    for info in LIVENESS.values():
        out.append(f"  {info.name:<28} library   {info.summary}")
    out.append(f"  {'deadlock-freedom':<28} library   no reachable state where nothing is "
               "enabled while a request has not terminated")
    for t in temporal_properties(system):
        out.append(f"  {t.name:<28} temporal  {t.summary}")
    out.append(f"  fairness: {declared_fairness(system, True).text()}")
    out.append("")
    return out
