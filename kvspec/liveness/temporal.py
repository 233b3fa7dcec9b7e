"""The model's own temporal properties: ``@eventually``, ``@always_eventually`` and
``leads_to(p, q)`` over state predicates, compiled for one system.

A predicate takes the state and at most one ``Request`` or ``Page``; it is checked
like an invariant (read-only, returns a bool on every path, the closed language of
``docs/modelling.md``) into the system's IR and compiled by the concrete code
generator into a module of its own, as ``@final_state`` predicates are
(:mod:`kvspec.liveness.final`). A property whose predicates take an id is
quantified over every id of that space: one obligation per id.

Semantics on runs (infinite; a run that stops stays in its last state forever):

* ``eventually p``: some state of the run satisfies ``p`` (F p). Violated by a
  fair lasso on which ``p`` is false at every state.
* ``always_eventually p``: ``p`` holds at infinitely many states (G F p).
  Violated by a fair lasso on which ``p`` is false at every state of the loop.
* ``leads_to(p, q)``: whenever ``p`` holds, ``q`` holds then or later
  (G (p → F q)). Violated by a fair lasso with a state where ``p`` holds, after
  which (that state included, the loop included) ``q`` never holds.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Callable

from kvspec.lang import ir
from kvspec.lang.check import build_function, parse_body
from kvspec.lang.declare import ALWAYS_EVENTUALLY, EVENTUALLY, LEADS_TO, TemporalDecl
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.pygen import PyGen
from kvspec.lang.schema import State
from kvspec.lang.system import System
from kvspec.lang.types import PAGE, REQUEST, Page, Request
from kvspec.liveness.obligations import DEADLOCK, LIVENESS
from kvspec.props.events import format_reason

_DECORATOR = {EVENTUALLY: "@eventually", ALWAYS_EVENTUALLY: "@always_eventually",
              LEADS_TO: "leads_to"}


@dataclass
class Predicate:
    """One compiled state predicate: ``(state, id) -> bool`` (id None: no parameter)."""

    name: str
    dim: str | None  # REQUEST, PAGE or None
    ir: ir.Function
    fn: Callable[..., Any] | None = None  # the generated code: (W, E, V[, id]) -> bool

    def __call__(self, state: State, i: int | None) -> bool:
        assert self.fn is not None
        if self.dim is None:
            return bool(self.fn(state, None, None))
        return bool(self.fn(state, None, None, i))

    def text(self, i: int | None) -> str:
        if self.dim is None:
            return f"{self.name}(s)"
        return f"{self.name}(s, {'r' if self.dim == REQUEST else 'page '}{i})"


@dataclass
class TemporalProperty:
    """A model's temporal property, its predicates compiled."""

    name: str
    kind: str  # EVENTUALLY, ALWAYS_EVENTUALLY or LEADS_TO
    p: Predicate
    q: Predicate | None
    dim: str | None  # the id space the property is quantified over (None: none)
    file: str | None
    line: int | None

    @property
    def summary(self) -> str:
        over = "" if self.dim is None else f" for every {self.dim}"
        if self.kind == EVENTUALLY:
            return f"{self.p.name} eventually holds{over}"
        if self.kind == ALWAYS_EVENTUALLY:
            return f"{self.p.name} holds infinitely often{over}"
        assert self.q is not None
        return f"{self.p.name} leads to {self.q.name}{over}"

    def ids(self, system: System) -> list[int | None]:
        """The obligations: one per id of the quantified space (or one, None)."""
        if self.dim is None:
            return [None]
        return list(range(system.schema.length_of(self.dim)))

    def at(self, pred: Predicate, state: State, i: int | None) -> bool:
        """``pred`` on ``state`` for obligation ``i`` (a predicate without an id
        parameter ignores it)."""
        return pred(state, i if pred.dim is not None else None)

    def obligation_text(self, i: int | None) -> str:
        who = "" if i is None else (f" for r{i}" if self.dim == REQUEST else f" for page {i}")
        return f"{self.name}{who}"


def _reword(exc: ModelError, kind: str, name: str) -> ModelError:
    """The invariant checker's messages, naming the temporal predicate instead."""
    what = f"{_DECORATOR[kind]} predicate {name}"
    msg = exc.message
    if msg.startswith(f"invariant {name} "):
        msg = what + msg[len(f"invariant {name}"):]
    msg = msg.replace("an invariant must be read-only", "a temporal predicate must be read-only")
    msg = msg.replace("an invariant can reach its end", f"{what} can reach its end")
    return ModelError(msg, exc.file, exc.line)


def _build(system: System, fn: Callable[..., Any], kind: str) -> Predicate:
    """Check one predicate body (signature, types, read-only, bool) and build its IR."""
    assert system.scope is not None
    body = parse_body(fn)
    name = fn.__name__
    what = f"{_DECORATOR[kind]} predicate {name}"
    where = (body.file, body.tree.lineno)
    params = body.params
    if not 1 <= len(params) <= 2:
        raise ModelError(f"{what} must take the state and at most one Request or Page "
                         f"(it takes {len(params)} parameters)", *where)
    try:
        hints = typing.get_type_hints(fn, globalns=getattr(fn, "__globals__", None))
    except Exception as exc:
        raise ModelError(f"{what}: cannot resolve its annotations: {exc}", *where) from None
    if "return" in hints and hints["return"] is not bool:
        raise ModelError(f"{what} must return a bool, not {hints['return']!r}", *where)
    types: list[Any] = [ir.StateT()]
    dim: str | None = None
    if len(params) == 2:
        hint = hints.get(params[1])
        if hint is Request:
            dim = REQUEST
        elif hint is Page:
            dim = PAGE
        else:
            shown = "no annotation" if hint is None else repr(hint)
            raise ModelError(f"{what}: parameter {params[1]!r} must be annotated Request or "
                             f"Page ({shown}); the property is quantified over those ids",
                             *where)
        if system.schema.length_of(dim) == 0:
            raise ModelError(f"{what}: parameter {params[1]!r}: the model declares no "
                             f"{dim}s", *where)
        types.append(ir.RefT(dim, False))
    try:
        f_ir = build_function(system.scope, fn, "invariant", types)
    except ModelError as exc:
        raise _reword(exc, kind, name) from None
    return Predicate(name, dim, f_ir)


def temporal_properties(system: System) -> list[TemporalProperty]:
    """The model's temporal properties, checked and compiled (a mistake in one is a
    :class:`ModelError` at file:line)."""
    decls: list[TemporalDecl] = list(system.loaded.decl.temporal)
    if not decls:
        return []
    out: list[TemporalProperty] = []
    seen: dict[str, TemporalDecl] = {}
    for d in decls:
        name = d.prop
        if name in LIVENESS or name == DEADLOCK:
            raise ModelError(f"{_DECORATOR[d.kind]} {d.name}: {name!r} is the name of a "
                             "library liveness property; rename it", d.file, d.line)
        if name in seen:
            raise ModelError(f"{d.name}: two temporal properties are named {name!r}",
                             d.file, d.line)
        seen[name] = d
        p = _build(system, d.p, d.kind)
        q = _build(system, d.q, d.kind) if d.kind == LEADS_TO else None
        dim = p.dim
        if q is not None and q.dim is not None:
            if dim is not None and dim != q.dim:
                raise ModelError(f"leads_to {d.name}: {p.name} takes a {p.dim} and {q.name} "
                                 f"a {q.dim}; both must be quantified over the same ids",
                                 d.file, d.line)
            dim = q.dim
        out.append(TemporalProperty(name, d.kind, p, q, dim, d.file, d.line))
    _compile(system, out)
    return out


def _compile(system: System, props: list[TemporalProperty]) -> None:
    preds = [pr for t in props for pr in (t.p, t.q) if pr is not None]
    gen = PyGen(system.schema, format_reason, system.flags)
    for f in ir.reachable([pr.ir for pr in preds]):
        gen.function(f)
    ns: dict[str, Any] = gen.compile(f"{system.name}.temporal")
    for pr in preds:
        pr.fn = ns[pr.ir.key]


def property_names(system: System) -> list[str]:
    """The names of the model's temporal properties (without compiling them)."""
    return [d.prop for d in system.loaded.decl.temporal]


def select(system: System, properties: list[str] | None
           ) -> tuple[list[str], list[TemporalProperty]]:
    """The library properties and the model's temporal properties to check (default:
    all of both); an unknown name is a usage error listing what is available."""
    user = property_names(system)
    available = list(LIVENESS) + user
    wanted = available if properties is None else list(properties)
    for name in wanted:
        if name not in available:
            raise UsageError(f"unknown liveness property {name!r} (available: "
                             f"{', '.join(available)})")
    lib = [n for n in wanted if n in LIVENESS]
    chosen = [n for n in wanted if n in user]
    temporal = [t for t in temporal_properties(system) if t.name in chosen] if chosen else []
    return lib, temporal
