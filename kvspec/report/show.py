"""``kvspec show``: what a model declares, resolved for the chosen sizes."""
from __future__ import annotations

import inspect

from kvspec.lang.declare import SCALAR
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import System


def describe_model(system: System, path: str) -> str:
    decl = system.loaded.decl
    lines = [f"{system.name} ({path})"]
    doc = inspect.getdoc(decl.cls)
    if doc:
        lines.append("  " + doc.splitlines()[0])
    lines.append("")
    lines.append("sizes (override with --size name=value):")
    for s in decl.sizes:
        kind = {"request": "request ids", "page": "page ids"}.get(s.dim or "", "parameter")
        lines.append(f"  {s.name:<20} = {system.sizes[s.name]:<4} ({kind}; default {s.default})")
    lines.append("")
    lines.append("state variables:")
    for v in system.schema.vars:
        if v.owner != "model":
            continue
        dim = "" if v.dim == SCALAR else f"per {v.dim}"
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
    report = analyse_symmetry(system)
    lines.append(report.summary())
    for reason in report.reasons:
        lines.append(f"  {reason}")
    return "\n".join(lines) + "\n"
