"""What a change to a lifecycle design changed: structure, verdicts and behaviour.

:func:`diff_designs` compares two compiled designs (``OLD`` and ``NEW``, both at the
same sizes) in three ways:

1. **Structure** — actions, invariants, selected properties, state variables and
   sizes added, removed or changed. Bodies are compared by the canonical dump of
   their typed IR (:mod:`kvspec.gate.ir_dump`): comments, formatting, line numbers,
   the names of locals and of helper functions do not count; any change of meaning
   does. A changed action says whether its guard (the leading ``require``\\ s), its
   effects (the rest of the body, with every helper it calls) or its parameter types
   changed.
2. **Verdicts** — both designs are verified (:func:`kvspec.runner.run`) and the
   properties whose verdict changed are listed (``PROVED → VIOLATED (9 steps)``).
3. **Behaviour** — the product exploration (:mod:`kvspec.gate.product`) finds the
   shortest behaviour one design allows and the other does not, as a trace of the
   design that allows it, or says there is none (exhaustively, or within a limit).

Exit code of a diff (:attr:`DesignDiff.exit_code`): 1 when a distinguishing
behaviour was found or a property decided in both designs changed between holding
and violated; otherwise 3 when the product search stopped at a limit or a verdict
is UNKNOWN in either design; otherwise 0 — even when the structure changed: a
refactoring that keeps every behaviour is not a difference.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kvspec.gate.ir_dump import action_dump, describe_type, function_dump
from kvspec.gate.product import (
    ENABLED,
    NEW,
    OLD,
    STATE_LIMIT,
    Distinction,
    ProductOutcome,
    describe,
    events_text,
    explore_product,
)
from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import VarInfo
from kvspec.lang.system import System
from kvspec.verdict import EXIT_HOLDS, EXIT_UNKNOWN, EXIT_VIOLATED, Result, Status, Verdict

__all__ = ["DIFF_FORMAT", "ActionChange", "DesignDiff", "Structure", "VerdictChange",
           "VerdictComparison", "compare_structure", "compare_verdicts", "diff_designs",
           "distinction_json", "distinction_lines", "short_verdict"]

DIFF_FORMAT = "kvspec-diff/1"


# -- structure -------------------------------------------------------------------------

@dataclass
class ActionChange:
    """An action present in both designs whose meaning changed."""

    name: str
    guard: bool
    effects: bool
    params: tuple[list[str], list[str]] | None = None  # parameter types OLD, NEW
    helpers: list[str] = field(default_factory=list)  # called functions whose body changed

    def parts(self) -> list[str]:
        out = []
        if self.params is not None:
            out.append(f"parameters ({', '.join(self.params[0])}) → "
                       f"({', '.join(self.params[1])})")
        if self.guard:
            out.append("guard")
        if self.effects:
            what = "effects"
            if self.helpers:
                what += " (via " + ", ".join(f"{h}()" for h in self.helpers) + ")"
            out.append(what)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "guard": self.guard, "effects": self.effects,
                "params": None if self.params is None else
                {"old": self.params[0], "new": self.params[1]},
                "helpers": list(self.helpers)}


@dataclass
class Structure:
    actions_added: list[str] = field(default_factory=list)    # signatures
    actions_removed: list[str] = field(default_factory=list)
    actions_changed: list[ActionChange] = field(default_factory=list)
    invariants_added: list[str] = field(default_factory=list)
    invariants_removed: list[str] = field(default_factory=list)
    invariants_changed: list[str] = field(default_factory=list)
    properties_added: list[str] = field(default_factory=list)  # library properties selected
    properties_removed: list[str] = field(default_factory=list)
    vars_added: list[str] = field(default_factory=list)        # "name: type per dim"
    vars_removed: list[str] = field(default_factory=list)
    vars_retyped: list[tuple[str, str, str]] = field(default_factory=list)
    vars_init_changed: list[tuple[str, Any, Any]] = field(default_factory=list)
    sizes_added: list[str] = field(default_factory=list)
    sizes_removed: list[str] = field(default_factory=list)
    sizes_changed: list[tuple[str, int, int]] = field(default_factory=list)  # defaults

    @property
    def unchanged(self) -> bool:
        return not any(getattr(self, f) for f in self.__dataclass_fields__)

    def lines(self) -> list[str]:
        out: list[str] = []

        def listing(title: str, items: list[str]) -> None:
            if items:
                out.append(f"{title}: {', '.join(items)}")

        listing("actions added", [f"+ {a}" for a in self.actions_added])
        listing("actions removed", [f"- {a}" for a in self.actions_removed])
        if self.actions_changed:
            out.append("actions changed:")
            width = max(len(c.name) for c in self.actions_changed)
            for c in self.actions_changed:
                out.append(f"  ~ {c.name.ljust(width)}  {', '.join(c.parts())} changed")
        listing("invariants added", [f"+ {x}" for x in self.invariants_added])
        listing("invariants removed", [f"- {x}" for x in self.invariants_removed])
        listing("invariants changed", [f"~ {x}" for x in self.invariants_changed])
        listing("properties added", [f"+ {x}" for x in self.properties_added])
        listing("properties removed", [f"- {x}" for x in self.properties_removed])
        listing("state variables added", [f"+ {x}" for x in self.vars_added])
        listing("state variables removed", [f"- {x}" for x in self.vars_removed])
        for name, a, b in self.vars_retyped:
            out.append(f"state variable retyped: ~ {name}: {a} → {b}")
        for name, a, b in self.vars_init_changed:
            out.append(f"initial value changed: ~ {name}: {_value(a)} → {_value(b)}")
        listing("sizes added", [f"+ {x}" for x in self.sizes_added])
        listing("sizes removed", [f"- {x}" for x in self.sizes_removed])
        for size, was, now in self.sizes_changed:
            out.append(f"size default changed: ~ {size}: {was} → {now}")
        return out or ["no structural change"]

    def to_json(self) -> dict[str, Any]:
        return {
            "unchanged": self.unchanged,
            "actions": {"added": self.actions_added, "removed": self.actions_removed,
                        "changed": [c.to_json() for c in self.actions_changed]},
            "invariants": {"added": self.invariants_added, "removed": self.invariants_removed,
                           "changed": self.invariants_changed},
            "properties": {"added": self.properties_added, "removed": self.properties_removed},
            "state_vars": {"added": self.vars_added, "removed": self.vars_removed,
                           "retyped": [{"name": n, "old": a, "new": b}
                                       for n, a, b in self.vars_retyped],
                           "initial_changed": [{"name": n, "old": a, "new": b}
                                               for n, a, b in self.vars_init_changed]},
            "sizes": {"added": self.sizes_added, "removed": self.sizes_removed,
                      "changed": [{"name": n, "old": a, "new": b}
                                  for n, a, b in self.sizes_changed]},
        }


def _value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return "None" if v is None else str(v)


def _var_type(v: VarInfo) -> str:
    text = describe_type(v.type)
    return text if v.dim == SCALAR else f"{text} per {v.dim.replace('_', ' ')}"


def _signature(system: System, name: str) -> str:
    action = next(a for a in system.actions if a.name == name)
    return f"{name}({', '.join(describe_type(t) for _, t in action.params)})"


def compare_structure(old: System, new: System) -> Structure:
    """The structural differences of ``new`` from ``old`` (module docstring)."""
    st = Structure()
    helpers: dict[int, tuple[str, str, str]] = {}
    a_old = {a.name: a for a in old.actions}
    a_new = {a.name: a for a in new.actions}
    st.actions_added = [_signature(new, n) for n in a_new if n not in a_old]
    st.actions_removed = [_signature(old, n) for n in a_old if n not in a_new]
    for name, an in a_new.items():
        ao = a_old.get(name)
        if ao is None:
            continue
        do = action_dump(ao.ir, [t for _, t in ao.params], helpers)
        dn = action_dump(an.ir, [t for _, t in an.params], helpers)
        params = (do.params, dn.params) if do.params != dn.params else None
        guard = do.guard != dn.guard
        effects = do.effects != dn.effects
        if params is None and not guard and not effects:
            continue
        changed_helpers = sorted(h for h in set(do.helpers) & set(dn.helpers)
                                 if do.helpers[h] != dn.helpers[h])
        st.actions_changed.append(ActionChange(name, guard, effects, params, changed_helpers))

    inv_old = {p.name: p for p in old.properties if p.kind == "invariant"}
    inv_new = {p.name: p for p in new.properties if p.kind == "invariant"}
    st.invariants_added = [n for n in inv_new if n not in inv_old]
    st.invariants_removed = [n for n in inv_old if n not in inv_new]
    for name, pn in inv_new.items():
        po = inv_old.get(name)
        if po is None or po.ir is None or pn.ir is None:
            continue
        if function_dump(po.ir, helpers) != function_dump(pn.ir, helpers):
            st.invariants_changed.append(name)
    mon_old = [p.name for p in old.properties if p.kind != "invariant"]
    mon_new = [p.name for p in new.properties if p.kind != "invariant"]
    st.properties_added = [n for n in mon_new if n not in mon_old]
    st.properties_removed = [n for n in mon_old if n not in mon_new]

    v_old = {v.name: v for v in old.schema.vars if v.owner == "model"}
    v_new = {v.name: v for v in new.schema.vars if v.owner == "model"}
    st.vars_added = [f"{n}: {_var_type(v)}" for n, v in v_new.items() if n not in v_old]
    st.vars_removed = [f"{n}: {_var_type(v)}" for n, v in v_old.items() if n not in v_new]
    for name, vn in v_new.items():
        vo = v_old.get(name)
        if vo is None:
            continue
        to, tn = _var_type(vo), _var_type(vn)
        if to != tn:
            st.vars_retyped.append((name, to, tn))
            continue
        io = old.schema.values(old.initial, vo)
        in_ = new.schema.values(new.initial, vn)
        if io != in_:
            st.vars_init_changed.append((name, io, in_))

    s_old = {s.name: s.default for s in old.loaded.decl.sizes}
    s_new = {s.name: s.default for s in new.loaded.decl.sizes}
    st.sizes_added = [f"{n}={d}" for n, d in s_new.items() if n not in s_old]
    st.sizes_removed = [f"{n}={d}" for n, d in s_old.items() if n not in s_new]
    st.sizes_changed = [(n, s_old[n], d) for n, d in s_new.items()
                        if n in s_old and s_old[n] != d]
    return st


# -- verdicts --------------------------------------------------------------------------

def _class(v: Verdict | None) -> str:
    if v is None:
        return "absent"
    if v.status is Status.VIOLATED:
        return "violated"
    return "holds" if v.is_success else "unknown"


def short_verdict(v: Verdict | None) -> str:
    """``PROVED``, ``HOLDS``, ``HOLDS (bounded)``, ``VIOLATED (9 steps)``, ``UNKNOWN``,
    ``absent`` (the design does not check the property)."""
    if v is None:
        return "absent"
    if v.status is Status.VIOLATED:
        return f"VIOLATED ({len(v.trace)} steps)" if v.trace is not None else "VIOLATED"
    if v.status is Status.HOLDS and not v.is_success:
        return f"HOLDS ({v.method})"
    return v.status.value


@dataclass
class VerdictChange:
    prop: str
    old: Verdict | None
    new: Verdict | None

    def text(self) -> str:
        return f"{self.prop}: {short_verdict(self.old)} → {short_verdict(self.new)}"

    def to_json(self) -> dict[str, Any]:
        return {"property": self.prop,
                "old": None if self.old is None else self.old.headline(),
                "new": None if self.new is None else self.new.headline(),
                "old_status": short_verdict(self.old), "new_status": short_verdict(self.new)}


@dataclass
class VerdictComparison:
    engine: str
    old: Result | None
    new: Result | None
    changed: list[VerdictChange] = field(default_factory=list)
    unchanged: list[tuple[str, str]] = field(default_factory=list)  # (property, verdict)

    @property
    def decided_change(self) -> bool:
        """A property checked by both designs went from holding to violated or back."""
        return any({_class(c.old), _class(c.new)} == {"holds", "violated"}
                   for c in self.changed)

    @property
    def any_unknown(self) -> bool:
        return any("unknown" in (_class(c.old), _class(c.new)) for c in self.changed) or \
            any(v.startswith("UNKNOWN") or "bounded" in v for _, v in self.unchanged)

    def lines(self) -> list[str]:
        out = [c.text() for c in self.changed]
        if not out:
            out.append(f"no verdict changed ({len(self.unchanged)} properties)")
        if self.unchanged and self.changed:
            out.append("unchanged: " + ", ".join(f"{p} ({v})" for p, v in self.unchanged))
        elif self.unchanged:
            out.append("  " + ", ".join(f"{p} ({v})" for p, v in self.unchanged))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "changed": [c.to_json() for c in self.changed],
                "unchanged": [{"property": p, "status": v} for p, v in self.unchanged]}


def compare_verdicts(old: Result, new: Result, engine: str) -> VerdictComparison:
    by_old = {v.prop: v for v in old.verdicts}
    by_new = {v.prop: v for v in new.verdicts}
    cmp = VerdictComparison(engine, old, new)
    names = list(by_old) + [n for n in by_new if n not in by_old]
    for name in names:
        vo, vn = by_old.get(name), by_new.get(name)
        if short_verdict(vo) == short_verdict(vn) and _class(vo) == _class(vn):
            cmp.unchanged.append((name, short_verdict(vo)))
        else:
            cmp.changed.append(VerdictChange(name, vo, vn))
    return cmp


# -- the whole diff --------------------------------------------------------------------

@dataclass
class DesignDiff:
    old: System
    new: System
    old_name: str
    new_name: str
    structure: Structure
    behaviour: ProductOutcome
    verdicts: VerdictComparison | None = None
    max_states: int | None = None

    @property
    def distinction(self) -> Distinction | None:
        return self.behaviour.distinction

    @property
    def status(self) -> str:
        """``different``, ``equivalent`` (exhaustive) or ``unknown`` (a limit was hit)."""
        if self.behaviour.distinction is not None:
            return "different"
        return "equivalent" if self.behaviour.complete else "unknown"

    @property
    def exit_code(self) -> int:
        if self.status == "different" or (self.verdicts is not None
                                          and self.verdicts.decided_change):
            return EXIT_VIOLATED
        if self.status == "unknown" or (self.verdicts is not None and self.verdicts.any_unknown):
            return EXIT_UNKNOWN
        return EXIT_HOLDS

    # -- behaviour text ------------------------------------------------------------------
    def behaviour_lines(self) -> list[str]:
        b = self.behaviour
        d = b.distinction
        if d is None:
            if b.complete:
                return [f"no behavioural difference (exhaustive, {b.pairs:,} state pairs)"]
            why = "the state-pair limit" if b.stopped == STATE_LIMIT else "the timeout"
            return [f"UNKNOWN: no difference within {b.pairs:,} state pairs ({why} was hit; "
                    "this is not a proof of equivalence)"]
        lines = distinction_lines(d)
        if b.others:
            lines.append("other distinguishing behaviours of the same length:")
            for o in b.others:
                lines.append(f"  {_headline(o)}: {describe(o)}")
        return lines

    def headline(self) -> str:
        return (f"kvspec diff: OLD {self.old_name} ({self.old.name}) → "
                f"NEW {self.new_name} ({self.new.name})")

    def to_text(self) -> str:
        lines = [self.headline()]
        so, sn = _sizes(self.old), _sizes(self.new)
        lines.append(f"sizes: {sn}" if so == sn else f"sizes: OLD {so}; NEW {sn}")
        lines.append("")
        lines.append("Structure")
        lines += ["  " + x for x in self.structure.lines()]
        if self.verdicts is not None:
            lines.append("")
            lines.append(f"Verdicts ({self.verdicts.engine})")
            lines += ["  " + x for x in self.verdicts.lines()]
        lines.append("")
        b = self.behaviour
        lines.append(f"Behaviour (product exploration without symmetry reduction: "
                     f"{b.pairs:,} state pairs, {b.seconds:.2f} s)")
        lines += ["  " + x for x in self.behaviour_lines()]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        b = self.behaviour
        d = b.distinction
        behaviour: dict[str, Any] = {
            "status": self.status, "complete": b.complete, "stopped": b.stopped,
            "pairs": b.pairs, "transitions": b.transitions, "depth": b.depth,
            "seconds": round(b.seconds, 4), "max_states": self.max_states,
            "summary": self.behaviour_lines()[0],
            "distinction": None if d is None else distinction_json(d),
            "others": [distinction_json(o) for o in b.others]}
        return {
            "format": DIFF_FORMAT,
            "old": _design_json(self.old, self.old_name),
            "new": _design_json(self.new, self.new_name),
            "structure": self.structure.to_json(),
            "verdicts": None if self.verdicts is None else self.verdicts.to_json(),
            "behaviour": behaviour,
            "exit_code": self.exit_code,
        }


def _sizes(system: System) -> str:
    return ", ".join(f"{k}={v}" for k, v in system.sizes.items())


def _design_json(system: System, display: str) -> dict[str, Any]:
    return {"name": system.name, "file": display, "sha256": system.loaded.sha256,
            "sizes": dict(system.sizes)}


def _who(which: str) -> str:
    return which.upper()


def _headline(d: Distinction) -> str:
    """``NEW allows, OLD does not: a, b then c``."""
    allowed = _who(d.allowed_by)
    other = _who(OLD if d.allowed_by == NEW else NEW)
    steps = ", ".join(d.prefix)
    return f"{allowed} allows, {other} does not: " + \
        (f"{steps} then {d.label}" if d.prefix else f"{d.label} (from the initial state)")


def distinction_lines(d: Distinction) -> list[str]:
    """``NEW allows, OLD does not: a, b then c``, the numbered steps with their events,
    and one line on how the last step differs."""
    allowed = _who(d.allowed_by)
    out = [_headline(d) + f"  ({len(d)} step{'s' if len(d) != 1 else ''})"]
    taker = d.new if d.allowed_by == NEW else d.old
    last_events = taker.events if taker is not None else ()
    labels = d.prefix + [d.label]
    events = list(d.prefix_events) + [last_events]
    width = max(len(x) for x in labels)
    for n, (label, evs) in enumerate(zip(labels, events), 1):
        mark = ""
        if n == len(labels):
            mark = f"   ← {allowed} only" if d.kind == ENABLED else f"   ← {allowed}; differs"
        out.append(f"  {n:>2}. {label.ljust(width)}  {events_text(evs)}{mark}")
    out.append("  " + describe(d))
    return out


def _outcome_json(o: Any) -> dict[str, Any] | None:
    if o is None:
        return None
    return {"events": [e.to_json() for e in o.events],
            "violated": {p: r for p, (r, _) in o.violated.items()},
            "error": o.error}


def distinction_json(d: Distinction) -> dict[str, Any]:
    return {
        "allowed_by": d.allowed_by, "kind": d.kind, "length": len(d),
        "prefix": [{"label": lb, "events": [e.to_json() for e in evs]}
                   for lb, evs in zip(d.prefix, d.prefix_events)],
        "label": d.label,
        "old": _outcome_json(d.old), "new": _outcome_json(d.new),
        "old_enables": d.old is not None, "new_enables": d.new is not None,
        "summary": describe(d),
        "trace": d.trace.to_json() if d.trace is not None else None,
    }


ProgressFn = Callable[[int, int, float], None]


def diff_designs(old: System, new: System, *, max_states: int | None = None,
                 timeout: float | None = None, verdicts: bool = True, engine: str = "auto",
                 old_name: str | None = None, new_name: str | None = None,
                 warn: Callable[[str], None] | None = None,
                 progress: ProgressFn | None = None) -> DesignDiff:
    """Compare two designs compiled at the same sizes (module docstring).

    ``max_states`` bounds the state pairs of the product exploration (and the states
    of each verification); ``timeout`` (seconds) bounds the whole diff: the product
    exploration gets up to half of it when verdicts are compared, each verification
    half of what is then left. ``verdicts=False`` skips the verification."""
    start = time.monotonic()
    end = None if timeout is None else start + timeout
    structure = compare_structure(old, new)
    product_end = end
    if timeout is not None and verdicts:
        product_end = start + timeout / 2
    behaviour = explore_product(old, new, max_states=max_states, deadline=product_end,
                                progress=progress)
    comparison = None
    if verdicts:
        from kvspec.runner import run
        results: list[Result | None] = []
        for k, system in enumerate((old, new)):
            left = None if end is None else (end - time.monotonic()) / (2 - k)
            if left is not None and left <= 0.01:
                results.append(None)
                continue
            results.append(run(system, engine, timeout=left, max_states=max_states,
                               warn=warn))
        comparison = _comparison(old, new, results[0], results[1], engine)
    return DesignDiff(old, new, old_name or str(old.loaded.path), new_name or
                      str(new.loaded.path), structure, behaviour, comparison, max_states)


def _comparison(old: System, new: System, ro: Result | None, rn: Result | None,
                engine: str) -> VerdictComparison:
    from kvspec.verdict import Stats
    if ro is None:
        ro = Result(old, engine, [Verdict(p.name, Status.UNKNOWN, engine, "timeout")
                                  for p in old.properties], Stats())
    if rn is None:
        rn = Result(new, engine, [Verdict(p.name, Status.UNKNOWN, engine, "timeout")
                                  for p in new.properties], Stats())
    return compare_verdicts(ro, rn, engine)

