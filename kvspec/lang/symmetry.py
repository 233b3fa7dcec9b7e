"""Deciding, from the model itself, whether request ids and page ids are
interchangeable, so that symmetry reduction is sound.

The decision is static: the checker (:mod:`kvspec.lang.check`) types every
body a model runs — actions, invariants, the functions they call, the property
monitors — over the closed grammar, and records each use of an id that is not
opaque: arithmetic, ordering, a literal id, an int used as an id or an index, a
loop over ids whose result depends on their order (a carried local, ``break``,
``return``, a write at another index). Any such use, or initial values that
single out an id, turns that id space off, with the reason.

A sampled check (successors of a permuted state must be the permuted
successors) runs as an extra alarm only; it never is the reason to accept.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvspec.lang.errors import ModelError
from kvspec.lang.types import PAGE, REQUEST

if TYPE_CHECKING:
    from kvspec.lang.system import System

_DIMS = (REQUEST, PAGE)
#: the sampled alarm runs only at sizes where canonicalising is cheap
ALARM_MAX_REQUESTS = 4
ALARM_MAX_PAGES = 8


@dataclass
class SymmetryReport:
    enabled: bool
    requests: bool
    pages: bool
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "requests": self.requests, "pages": self.pages,
                "reasons": list(self.reasons)}

    def summary(self) -> str:
        if not self.enabled:
            return "symmetry reduction off (--no-symmetry)"
        on = [d for d, ok in (("requests", self.requests), ("pages", self.pages)) if ok]
        text = "symmetry reduction over " + (" and ".join(on) if on else "nothing")
        return text


def static_breaks(system: "System") -> dict[str, list[str]]:
    """Reasons, per id space, why the model does not treat its ids interchangeably:
    what the checker recorded while typing every body (:mod:`kvspec.lang.check`),
    plus the initial state."""
    breaks: dict[str, list[str]] = {REQUEST: [], PAGE: []}
    for dim, reasons in system.symmetry_breaks.items():
        breaks.setdefault(dim, []).extend(reasons)
    s0 = system.initial
    for v in system.schema.vars:
        values = s0[v.offset:v.offset + v.length]
        for dim in v.axes:
            if dim not in _DIMS:
                continue
            n = system.schema.counts[dim]
            lines = {tuple(values[k] for k in v.slots_of(dim, i)) for i in range(n)}
            if len(lines) > 1:
                breaks[dim].append(f"variable {v.name!r} starts with different values for "
                                   f"different {dim}s")
        if v.type.ref_dim in _DIMS and any(x >= 0 for x in values):
            breaks[v.type.ref_dim].append(f"variable {v.name!r} starts holding a {v.type.ref_dim} id")
        if v.type.ref_dim == PAGE:
            breaks[PAGE].append(f"variable {v.name!r} holds page ids (page symmetry is only "
                                "applied to models whose state does not name pages)")
    return breaks


def breaking_actions(system: "System", dim: str) -> frozenset[str] | None:
    """The actions whose code, with the functions it calls, does not treat the ids of
    ``dim`` interchangeably, when every reason the model as a whole does not (see
    :func:`static_breaks`) lies in such code: then every *other* action commutes with
    renaming those ids. An empty set: the model is symmetric in ``dim``. None: some
    reason lies elsewhere (the initial state, a variable holding such ids, an
    invariant or a monitor handler), or the model's code is unknown."""
    reasons = static_breaks(system)[dim]
    if not reasons:
        return frozenset()
    scope = system.scope
    if scope is None:
        return None
    from kvspec.lang import ir

    def breaks_in(root: "ir.Function") -> set[str]:
        return {r for fn in ir.reachable([root]) for r in fn.breaks.get(dim, ())}

    out = set()
    in_actions: set[str] = set()
    for a in system.actions:
        mine = breaks_in(a.ir)
        if mine:
            out.add(a.name)
            in_actions |= mine
    others = [p.ir for p in system.properties if p.ir is not None]
    others += [h for hs in system.handlers.values() for h in hs]
    if any(breaks_in(fn) for fn in others) or not set(reasons) <= in_actions:
        return None
    return frozenset(out)


def partial_alarm(system: "System", dim: str, unrenamed: frozenset[str]) -> list[str]:
    """The sampled check of :func:`dynamic_check` for renaming ``dim`` in every action
    but ``unrenamed``, at sizes where it is cheap (else nothing); kept per system."""
    small = (system.schema.requests <= ALARM_MAX_REQUESTS
             and system.schema.pages <= ALARM_MAX_PAGES)
    if not small:
        return []
    cache: dict[tuple[str, frozenset[str]], list[str]] = system.__dict__.setdefault(
        "_partial_alarm_cache", {})
    key = (dim, unrenamed)
    if key not in cache:
        renamed = frozenset(a.name for a in system.actions) - unrenamed
        cache[key] = dynamic_check(system, dim == REQUEST, dim == PAGE, only=renamed)
    return cache[key]


def dynamic_check(system: "System", requests: bool, pages: bool, *, walks: int = 4,
                  depth: int = 12, seed: int = 0,
                  only: frozenset[str] | None = None) -> list[str]:
    """Sampled check that transitions commute with the permutations. Returns problems.
    ``only``: compare the successors by these actions alone (those a symmetry of some
    actions renames, :func:`breaking_actions`)."""
    from kvspec.engines.canon import Canonicalizer

    canon = Canonicalizer(system.schema, requests, pages)
    if not canon.active:
        return []
    rng = random.Random(seed)
    R, P = system.schema.requests, system.schema.pages
    perms = []
    if canon.req_sym:
        perms.append(((1, 0) + tuple(range(2, R)), tuple(range(P))))
        perms.append((tuple((i + 1) % R for i in range(R)), tuple(range(P))))
    if canon.page_sym:
        perms.append((tuple(range(R)), (1, 0) + tuple(range(2, P))))
        perms.append((tuple(range(R)), tuple((i + 1) % P for i in range(P))))

    def signature(state: Any) -> set[Any] | None:
        try:
            return {(canon.canon(res.state)[0], tuple(sorted(v[0] for v in res.violations)))
                    for res in system.successors(state)
                    if only is None or res.instance.action.name in only}
        except ModelError:
            return None  # the engines report it; the alarm only compares behaviour

    for _ in range(walks):
        state = system.initial
        for _ in range(depth):
            try:
                succ = list(system.successors(state))
            except ModelError:
                break  # the engines report the model error
            mine = signature(state)
            for perm in perms:
                if signature(canon.apply(state, perm)) != mine:
                    dims = [d for d, moved in (("requests", perm[0] != tuple(range(R))),
                                               ("pages", perm[1] != tuple(range(P)))) if moved]
                    where = "" if only is None else (
                        f" in {', '.join(sorted(only))}")
                    return [f"internal alarm: a sampled state behaves differently when its "
                            f"{dims[0]} are renamed{where}, although the static analysis found "
                            "the ids opaque there (please report this model)"]
            if not succ:
                break
            state = rng.choice(succ).state
    return []


def analyse_symmetry(system: "System", enabled: bool = True) -> SymmetryReport:
    if not enabled:
        return SymmetryReport(False, False, False, ["disabled on the command line"])
    cached = getattr(system, "_symmetry_cache", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    breaks = static_breaks(system)
    req_ok = not breaks[REQUEST] and system.schema.requests > 1
    page_ok = not breaks[PAGE] and system.schema.pages > 1
    reasons = [f"request symmetry off: {r}" for r in breaks[REQUEST][:3]]
    reasons += [f"page symmetry off: {r}" for r in breaks[PAGE][:3]]
    small = system.schema.requests <= ALARM_MAX_REQUESTS and system.schema.pages <= ALARM_MAX_PAGES
    if (req_ok or page_ok) and small:
        problems = dynamic_check(system, req_ok, page_ok)
        if problems:
            reasons += problems
            req_ok = page_ok = False
    report = SymmetryReport(True, req_ok, page_ok, reasons)
    system._symmetry_cache = report  # type: ignore[attr-defined]
    return report
