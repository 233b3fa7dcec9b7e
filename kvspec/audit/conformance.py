"""Trace validation: is a log a behaviour of the design given by ``--model``?

The checker keeps the *set* of configurations the model can be in after the log read
so far. A configuration is a model state plus the events still owed by the step that
produced the last logged event (a step emits a list of events; they must appear in
the log in order and consecutively — the events of one mask emission, ``free`` or
``read`` of several pages, in any order among themselves). For each log event, every
configuration either consumes it from its owed events, or — when it owes nothing —
takes a bounded number of *silent* steps and then a step whose first logged event is
this one. Steps come from the compiled system's concrete step function
(:meth:`System.step`, the one the explicit engine uses). The monitor part of a state is
reset after every step: conformance is about the model's own variables.

Silent steps are steps whose events are all unlogged: actions declared
``silent_actions`` in the mapping (their events are ignored), actions that emit nothing
(``arrive``) or only kinds the mapping declares ``unlogged_events``, and actions whose
events depend on the state (a ``free`` of a mask that may be empty). Before an event of
request ``r``, silent steps of ``r`` and of actions with no request parameter are tried
(up to ``closure_depth``); only when the event cannot be produced that way are silent
steps of every live request tried. This is exact when one request's silent steps do not
change what other requests' actions can do — true of the shipped models.

**Id renaming.** The model has few request and page ids; the log has many. A log
request is mapped to a free model request id at its first event; it is retired — its
id reset to the initial values and reused — after its terminal event once, in every
configuration, silent steps can bring it to a *dormant* state: no action instance with
it as a parameter is enabled and no variable of another request or of a page refers to
it (configurations are then replaced by those dormant states; every slot the id
indexes, 2-D rows included, is reset). A log page is mapped to a model page whose
slots are all at their initial values and that no variable names; the mapping is
dropped when that holds again in every configuration and a page id is needed. Both
rely on the model treating ids symmetrically (as the checker's symmetry reduction
does) and on dormant requests staying dormant (DONE is absorbing in the shipped
models). A log event of a retired request is checked as a new request's.

**Speed.** The hot path calls the compiled step functions directly, with the call lists
cached per (event kind, request, page); instances that share a request-only leading
guard (:mod:`kvspec.audit.guards`) are skipped together when it is false; state tuples
are hashed only when several configurations must be told apart. Memoising successor
sets per (configuration set, event) was measured and rejected: the sets include every
live request and page, and nearly all of them are distinct.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable

from kvspec.audit.guards import request_guards
from kvspec.audit.logformat import LogEvent, PageKey, page_text
from kvspec.audit.mapping import Mapping
from kvspec.lang import ir
from kvspec.lang.declare import SCALAR
from kvspec.lang.errors import UsageError
from kvspec.lang.schema import State
from kvspec.lang.system import ActionDef, ActionInstance, System, emitted_kinds
from kvspec.lang.types import PAGE, REQUEST, RefType
from kvspec.props.events import Event

Config = tuple[State, tuple[Event, ...]]
#: a compiled step function, its arguments, declared silent, the instance, the request
#: and page ids that must be mapped for it to run
_Call = tuple[Any, tuple[Any, ...], bool, ActionInstance, tuple[int, ...], tuple[int, ...]]
TERMINAL_KINDS = frozenset({"reject", "abort", "timeout", "finish"})
ANY = -1


class ConformanceLimit(Exception):
    """Conformance cannot go on (too many live ids or configurations): unknown."""


@dataclass
class Nonconformance:
    event: LogEvent
    reason: str
    states: list[list[str]] = field(default_factory=list)  # a few states, as assignments
    enabled: list[list[str]] = field(default_factory=list)  # per state: enabled actions
    configs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"line": self.event.line, "event": self.event.to_json(), "reason": self.reason,
                "configurations": self.configs,
                "states": [{"state": s, "enabled": e} for s, e in zip(self.states, self.enabled)]}


@dataclass
class _ActionInfo:
    action: ActionDef
    req_pos: list[int]
    page_pos: list[int]
    may_be_silent: bool
    declared_silent: bool
    sig: dict[str, tuple[int, int]]  # kind -> (request param position | ANY, page position | ANY)


def _must_emit(body: list[ir.Stmt], logged: set[str]) -> bool:
    """Whether every run of ``body`` that completes emits an event of a logged kind
    (conservative: False when unsure)."""
    for st in body:
        if isinstance(st, ir.Emit) and st.pages is None and st.kind in logged:
            return True
        if isinstance(st, ir.If):
            then, orelse = _must_emit(st.body, logged), _must_emit(st.orelse, logged)
            if then and orelse:
                return True
            # a branch that may end the run (return) must itself have emitted
            if not then and any(isinstance(x, ir.Return) for x in ir.walk_stmts(st.body)):
                return False
            if not orelse and any(isinstance(x, ir.Return) for x in ir.walk_stmts(st.orelse)):
                return False
        elif isinstance(st, ir.Return):
            return False
        elif isinstance(st, ir.Do):
            return False
    return False


def _signature(fn: ir.Function, params: list[str]) -> dict[str, tuple[int, int]]:
    """Per event kind: which parameter the emitted request/page always is (ANY if not known)."""
    assigned: set[str] = set()
    for st in ir.walk_stmts(fn.body):
        if isinstance(st, ir.Assign):
            assigned.update(st.names)
        elif isinstance(st, ir.For):
            assigned.add(st.var)
    helper_kinds = emitted_kinds(ir.calls_in(fn))
    sig: dict[str, tuple[int, int]] = {k: (ANY, ANY) for k in helper_kinds}

    def pos(e: ir.Expr | None) -> int:
        if isinstance(e, ir.Local) and e.name in params and e.name not in assigned:
            return params.index(e.name)
        return ANY

    seen: dict[str, list[tuple[int, int]]] = {}
    for st in ir.walk_stmts(fn.body):
        if isinstance(st, ir.Emit):
            seen.setdefault(st.kind, []).append((pos(st.request), pos(st.page)))
    for kind, sigs in seen.items():
        if kind in sig:
            continue
        r = sigs[0][0] if all(s[0] == sigs[0][0] for s in sigs) else ANY
        p = sigs[0][1] if all(s[1] == sigs[0][1] for s in sigs) else ANY
        sig[kind] = (r, p)
    return sig


class Conformance:
    def __init__(self, system: System, mapping: Mapping, *, closure_depth: int = 4,
                 max_configs: int = 10_000) -> None:
        self.system = system
        self.closure_depth = closure_depth
        self.max_configs = max_configs
        self.unlogged = set(mapping.unlogged_events)
        self.ignore = set(mapping.ignore_events)
        self.skip = self.ignore | self.unlogged  # kinds conformance does not look at
        names = {a.name for a in system.actions}
        for s in mapping.silent_actions:
            if s not in names:
                raise UsageError(f"{mapping.file}: conformance.silent_actions: the model "
                                 f"{system.name} has no action {s!r} (it has: "
                                 f"{', '.join(sorted(names))})")
        logged = set(k for k in _all_kinds() if k not in self.unlogged)
        self.infos: list[_ActionInfo] = []
        for a in system.actions:
            params = [n for n, _ in a.params]
            rp = [i for i, (_, t) in enumerate(a.params)
                  if isinstance(t, RefType) and t.ref_dim == REQUEST]
            pp = [i for i, (_, t) in enumerate(a.params)
                  if isinstance(t, RefType) and t.ref_dim == PAGE]
            declared = a.name in mapping.silent_actions
            silent = declared or not _must_emit(a.ir.body, logged)
            self.infos.append(_ActionInfo(a, rp, pp, silent, declared, _signature(a.ir, params)))
        self.info_of = {id(i.action): i for i in self.infos}
        self.guards = request_guards(system)
        self.R = system.schema.requests
        self.P = system.schema.pages
        # the monitor part of a state is reset after every step
        self.reset = [(i, system.initial[i]) for v in system.schema.vars if v.owner != "model"
                      for i in range(v.offset, v.offset + v.length)]
        self.model_vars = [v for v in system.schema.vars if v.owner == "model"]
        # distinct configurations (a list: hashing a state tuple is what costs, so it is
        # done only when there are several to tell apart)
        self.configs: list[Config] = [(self._canon(system.initial), ())]
        self.req_of: dict[str, int] = {}
        self.req_name: dict[int, str] = {}
        self.page_of: dict[PageKey, int] = {}
        self.page_key: dict[int, PageKey] = {}
        self.candidates: set[str] = set()
        self.retired: OrderedDict[str, int] = OrderedDict()  # recent, for messages only
        self.line = 0
        self._cand_cache: dict[tuple[str, int, int], list[ActionInstance]] = {}
        self._silent_cache: dict[int, list[ActionInstance]] = {}
        self._slot_cache: dict[int, list[Any]] = {}
        # the hot path calls the compiled step functions directly (see _call_list)
        self._calls: dict[tuple[str, int, int], list[_Call]] = {}
        self._by_kind: dict[str, list[ActionInstance]] | None = None
        self._calls_by_event: dict[tuple[str, int, int], tuple[list[_Call], bool]] = {}
        self._group_cache: dict[tuple[int | None, int | None], tuple[list[Any], bool]] = {}
        self._ref_vars = [(v.offset, v.length, v.dim == REQUEST) for v in self.model_vars
                          if isinstance(v.type, RefType) and v.type.ref_dim == REQUEST]
        self._page_refs = [(v.offset, v.length) for v in self.model_vars
                           if isinstance(v.type, RefType) and v.type.ref_dim == PAGE]
        self._own_cache: dict[tuple[str, int], list[int]] = {}
        self.failure: Nonconformance | None = None
        self.events = 0
        self.peak_configs = 1

    # -- states ------------------------------------------------------------------------------
    def _canon(self, state: Iterable[Any]) -> State:
        if not self.reset:
            return tuple(state)
        w = list(state)
        for i, v in self.reset:
            w[i] = v
        return tuple(w)

    @staticmethod
    def _step(state: State, inst: ActionInstance) -> tuple[list[Any], list[Event]] | None:
        """The compiled step of ``inst`` (what :meth:`System.step` runs), without the
        wrapping: (next state as a list, events) or None when disabled."""
        out = inst.action.fn(state, *inst.args)
        if out is None:
            return None
        return out[0], out[1]

    def _logged(self, events: list[Event], info: _ActionInfo) -> tuple[Event, ...]:
        if info.declared_silent:
            return ()
        return tuple(e for e in events if e.kind not in self.unlogged)

    def _call_list(self, insts: list[ActionInstance], r: int | None,
                   extra_q: int | None) -> list[_Call]:
        """The step calls of ``insts``; each with the request and page ids (other than
        the event's ``r`` and ``extra_q``) that must be mapped to a log id for it to run."""
        out = []
        for inst in insts:
            info = self.info_of[id(inst.action)]
            reqs = tuple(sorted({inst.args[i] for i in info.req_pos} - {r}))
            pages = tuple(sorted({inst.args[i] for i in info.page_pos} - {extra_q}))
            out.append((inst.action.fn, inst.args, info.declared_silent, inst, reqs, pages))
        return out

    def _runnable(self, reqs: tuple[int, ...], pages: tuple[int, ...]) -> bool:
        req_name, page_key = self.req_name, self.page_key
        return all(k in req_name for k in reqs) and all(q in page_key for q in pages)

    def _silent_calls(self, r: int | None, extra_q: int | None) -> list[_Call]:
        key = ("", -2 if r is None else r, -1 if extra_q is None else extra_q)
        out = self._calls.get(key)
        if out is None:
            out = self._calls[key] = self._call_list(self._silent(r), r, extra_q)
        return out

    def _candidate_calls(self, kind: str, r: int, q: int | None
                         ) -> tuple[list[_Call], bool]:
        """The step calls that may log ``kind`` of (``r``, ``q``) first, and whether any
        of them needs ids other than ``r`` and ``q`` mapped to run."""
        key = (kind, r, -1 if q is None else q)
        out = self._calls_by_event.get(key)
        if out is None:
            calls = self._call_list(self._candidates(kind, r, q), r, q)
            out = self._calls_by_event[key] = (calls, any(c[4] or c[5] for c in calls))
        return out

    # -- instances ---------------------------------------------------------------------------
    def _mapped_args(self, inst: ActionInstance, info: _ActionInfo, extra_q: int | None) -> bool:
        for i in info.req_pos:
            if inst.args[i] not in self.req_name:
                return False
        for i in info.page_pos:
            a = inst.args[i]
            if a not in self.page_key and a != extra_q:
                return False
        return True

    def _candidates(self, kind: str, r: int, q: int | None) -> list[ActionInstance]:
        key = (kind, r, -1 if q is None else q)
        out = self._cand_cache.get(key)
        if out is None:
            out = []
            if self._by_kind is None:
                self._by_kind = {}
                for inst in self.system.instances:
                    info = self.info_of[id(inst.action)]
                    if not info.declared_silent:
                        for k in info.sig:
                            self._by_kind.setdefault(k, []).append(inst)
            for inst in self._by_kind.get(kind, ()):
                info = self.info_of[id(inst.action)]
                rp, pp = info.sig[kind]
                if rp != ANY and inst.args[rp] != r:
                    continue
                if pp != ANY and q is not None and inst.args[pp] != q:
                    continue
                out.append(inst)
            self._cand_cache[key] = out
        return out

    def _silent(self, r: int | None) -> list[ActionInstance]:
        """Silent-capable instances whose request parameters are all ``r`` (None: any)."""
        key = -2 if r is None else r
        out = self._silent_cache.get(key)
        if out is None:
            out = []
            for inst in self.system.instances:
                info = self.info_of[id(inst.action)]
                if not info.may_be_silent:
                    continue
                if r is not None and any(inst.args[i] != r for i in info.req_pos):
                    continue
                out.append(inst)
            self._silent_cache[key] = out
        return out

    def _closure(self, state: State, r: int | None, extra_q: int | None) -> list[State]:
        """``state`` and the states silent steps (of ``r``; None: of any request) reach
        from it within ``closure_depth`` steps, each once."""
        cached = self._group_cache.get((r, extra_q))
        groups = cached[0] if cached is not None and not cached[1] else \
            self._silent_groups(r, extra_q)
        if not groups:
            return [state]
        out = [state]
        seen: set[State] | None = None  # built at the first silent step that fires
        frontier = out
        unlogged = self.unlogged
        reset = self.reset
        for _ in range(self.closure_depth):
            nxt = []
            for s in frontier:
                for guard, gargs, calls in groups:
                    if guard is not None:
                        try:
                            if not guard(s, *gargs):
                                continue
                        except Exception:  # noqa: BLE001 - the step itself reports it
                            pass
                    for fn, args, declared, _inst, _r, _q in calls:
                        step = fn(s, *args)
                        if step is None:
                            continue
                        if not declared:
                            logged = False
                            for e in step[1]:
                                if e[0] not in unlogged:
                                    logged = True
                                    break
                            if logged:
                                continue
                        w = step[0]
                        for i, v in reset:
                            w[i] = v
                        t = tuple(w)
                        if seen is None:
                            seen = {state}
                        if t not in seen:
                            seen.add(t)
                            nxt.append(t)
            if not nxt:
                break
            out.extend(nxt)
            frontier = nxt
        return out

    def _silent_groups(self, r: int | None, extra_q: int | None
                       ) -> list[tuple[Any, tuple[Any, ...], list[_Call]]]:
        """The silent step calls that can run now (their ids mapped), grouped by their
        request-only guard (:mod:`kvspec.audit.guards`)."""
        key = (r, extra_q)
        cached = self._group_cache.get(key)
        if cached is None:
            calls = self._silent_calls(r, extra_q)
            cached = (self._grouped(calls), any(c[4] or c[5] for c in calls))
            self._group_cache[key] = cached
        if not cached[1]:
            return cached[0]
        return self._grouped([c for c in self._silent_calls(r, extra_q)
                              if not (c[4] or c[5]) or self._runnable(c[4], c[5])])

    def _grouped(self, calls: list[_Call]) -> list[tuple[Any, tuple[Any, ...], list[_Call]]]:
        groups: dict[Any, tuple[Any, tuple[Any, ...], list[_Call]]] = {}
        for c in calls:
            inst = c[3]
            guard = self.guards.get(id(inst.action))
            if guard is None:
                groups[inst.index] = (None, (), [c])
            else:
                gargs = tuple(inst.args[p] for p in guard[1])
                groups.setdefault((id(inst.action), gargs), (guard[0], gargs, []))[2].append(c)
        return list(groups.values())

    # -- renaming ----------------------------------------------------------------------------
    def _slot(self, live: str) -> int:
        k = self.req_of.get(live)
        if k is not None:
            return k
        free = [k for k in range(self.R) if k not in self.req_name]
        if not free:
            for c in list(self.candidates):
                self._try_retire(c)
            free = [k for k in range(self.R) if k not in self.req_name]
        if not free:
            raise ConformanceLimit(f"more than {self.R} requests of the log are live at once; "
                                   f"give the model more with --size requests=N")
        k = free[0]
        self.req_of[live] = k
        self.req_name[k] = live
        return k

    def _page(self, key: PageKey) -> int:
        q = self.page_of.get(key)
        if q is not None:
            return q
        free = [q for q in range(self.P) if q not in self.page_key]
        if not free:
            self._sweep_pages()
            free = [q for q in range(self.P) if q not in self.page_key]
        if not free:
            raise ConformanceLimit(f"more than {self.P} pages of the log are in use at once; "
                                   "give the model more with --size pages=N")
        q = free[0]
        self.page_of[key] = q
        self.page_key[q] = key
        return q

    def _own_slots(self, dim: str, i: int) -> list[int]:
        """Every slot of the model variables that id ``i`` of ``dim`` indexes, whatever
        the variable's shape (``phase[r]``, ``page_inflight_by[p, r]``, a request's
        per-rank row ``failed[r, k]``, a page's per-slot row)."""
        key = (dim, i)
        out = self._own_cache.get(key)
        if out is None:
            out = self._own_cache[key] = [v.offset + j for v in self.model_vars
                                          if dim in v.axes for j in v.slots_of(dim, i)]
        return out

    def _page_blank(self, state: State, q: int) -> bool:
        """Whether model page ``q`` is as at the start: every slot it indexes initial,
        and no variable holding it as a value."""
        init = self.system.initial
        if any(state[i] != init[i] for i in self._own_slots(PAGE, q)):
            return False
        return all(q not in state[off:off + length] for off, length in self._page_refs)

    def _sweep_pages(self) -> None:
        for q in list(self.page_key):
            if all(not pend and self._page_blank(s, q) for s, pend in self.configs):
                del self.page_of[self.page_key.pop(q)]

    def _dormant(self, state: State, k: int) -> bool:
        for off, length, own_row in self._ref_vars:
            n = state[off:off + length].count(k)
            if n and not (own_row and n == 1 and state[off + k] == k):
                return False
        for guard, gargs, calls in self._slot_groups(k):
            if guard is not None:
                try:
                    if not guard(state, *gargs):
                        continue
                except Exception:  # noqa: BLE001 - the full step reports it
                    pass
            for fn, args in calls:
                if fn(state, *args) is not None:
                    return False
        return True

    def _slot_groups(self, k: int) -> list[tuple[Any, tuple[Any, ...], list[tuple[Any, Any]]]]:
        """The step calls of the instances with request ``k`` as a parameter, grouped by
        their request-only guard (:mod:`kvspec.audit.guards`; None: no guard)."""
        out = self._slot_cache.get(k)
        if out is None:
            groups: dict[tuple[Any, ...], tuple[Any, tuple[Any, ...], list[tuple[Any, Any]]]] = {}
            for inst in self.system.instances:
                info = self.info_of[id(inst.action)]
                if k not in [inst.args[p] for p in info.req_pos]:
                    continue
                guard = self.guards.get(id(inst.action))
                if guard is None:
                    key: tuple[Any, ...] = (inst.index,)
                    entry = groups.setdefault(key, (None, (), []))
                else:
                    gargs = tuple(inst.args[p] for p in guard[1])
                    entry = groups.setdefault((id(inst.action), gargs), (guard[0], gargs, []))
                entry[2].append((inst.action.fn, inst.args))
            out = self._slot_cache[k] = list(groups.values())
        return out

    def _reset_slot(self, state: State, k: int) -> State:
        """``state`` with every slot that model request ``k`` indexes initial again."""
        w = list(state)
        init = self.system.initial
        for i in self._own_slots(REQUEST, k):
            w[i] = init[i]
        return tuple(w)

    def _try_retire(self, live: str) -> bool:
        k = self.req_of.get(live)
        if k is None:
            self.candidates.discard(live)
            return True
        new: list[Config] = []
        for s, pend in self.configs:
            if pend:
                return False
            dormant = [t for t in self._closure(s, k, None) if self._dormant(t, k)]
            if not dormant:
                return False
            new.extend((self._reset_slot(t, k), ()) for t in dormant)
        self.configs = _distinct(new)
        self.retired[live] = self.line
        if len(self.retired) > 1024:
            self.retired.popitem(last=False)
        del self.req_of[live]
        del self.req_name[k]
        self.candidates.discard(live)
        return True

    # -- one event ---------------------------------------------------------------------------
    def feed(self, ev: LogEvent) -> Nonconformance | None:
        """Advance by one log event; the first event the model cannot produce is returned
        (and kept in ``failure``; later events are not checked)."""
        kind = ev.kind
        if self.failure is not None or kind in self.skip:
            return None
        self.events += 1
        self.line = ev.line
        live = ev.request
        r = self.req_of.get(live)
        if r is None:
            r = self._slot(live)
        page = ev.page
        if page is None:
            q = None
        else:
            q = self.page_of.get(page)
            if q is None:
                q = self._page(page)
        e = Event(kind, r, q)
        new = self._advance(e, r, q, local=True)
        if not new:
            new = self._advance(e, r, q, local=False)
        if not new:
            self.failure = self._explain(ev, e, r, q)
            return self.failure
        n = len(new)
        if n > 1:
            if n > self.max_configs:
                raise ConformanceLimit(f"line {ev.line}: more than {self.max_configs:,} model "
                                       "states are consistent with the log (the log does not "
                                       "say enough about the model's choices)")
            if n > self.peak_configs:
                self.peak_configs = n
        self.configs = new
        if kind in TERMINAL_KINDS:
            self.candidates.add(live)
        if live in self.candidates:
            self._try_retire(live)
        return None

    def _advance(self, e: Event, r: int, q: int | None, local: bool) -> list[Config]:
        new: list[Config] = []
        calls, needs_mapping = self._candidate_calls(e.kind, r, q)
        if needs_mapping:
            calls = [c for c in calls if not (c[4] or c[5]) or self._runnable(c[4], c[5])]
        unlogged = self.unlogged
        reset = self.reset
        closure = self._closure
        for s, pend in self.configs:
            if pend:
                rest = _consume(pend, e)
                if rest is not None:
                    new.append((s, rest))
                continue
            if not calls:
                continue
            for t in closure(s, r if local else None, q):
                for fn, args, declared, _inst, _r, _q in calls:
                    out = fn(t, *args)
                    if out is None or declared:
                        continue
                    events = out[1]
                    if unlogged:
                        logged = tuple([x for x in events if x[0] not in unlogged])
                        if not logged:
                            continue
                    elif not events:
                        continue
                    else:
                        logged = events
                    # the first logged event is the usual case: nothing else to look at
                    if logged[0] == e:
                        rest = tuple(logged[1:])
                    else:
                        rest = _consume(tuple(logged), e)
                        if rest is None:
                            continue
                    w = out[0]
                    for i, v in reset:
                        w[i] = v
                    new.append((tuple(w), rest))
        return _distinct(new)

    def finish(self) -> Nonconformance | None:
        """At the end of the log: some configuration must owe no event."""
        if self.failure is None and self.configs and all(p for _, p in self.configs):
            owed = sorted({self._event_text(p[0]) for _, p in self.configs})
            ev = LogEvent(0, None, "end", "-", None)
            self.failure = Nonconformance(ev, "the log ends in the middle of a model step: "
                                              f"it still owes {', '.join(owed[:4])}")
        return self.failure

    # -- explaining ----------------------------------------------------------------------------
    def _event_text(self, e: Event) -> str:
        name = self.req_name.get(e.request, f"model request {e.request}")
        if e.page is None:
            return f"{e.kind}({name})"
        key = self.page_key.get(e.page)
        return f"{e.kind}({name}, page {page_text(key) if key else f'model page {e.page}'})"

    def _value(self, t: Any, value: Any) -> str:
        if isinstance(t, RefType):
            if value < 0:
                return "None"
            if t.ref_dim == REQUEST:
                return self.req_name.get(value, f"model request {value}")
            key = self.page_key.get(value)
            return f"page {page_text(key)}" if key else f"model page {value}"
        return t.fmt(value)

    def describe(self, state: State, focus: int | None = None) -> list[str]:
        """The model variables of ``state`` in the log's names: every variable of request
        ``focus``, the values of other requests and of pages that are not initial (2-D
        rows too: ``failed[B, 1]``)."""
        out = []
        init = self.system.initial
        for v in self.model_vars:
            if v.dim == SCALAR:
                out.append(f"{v.name} = {self._value(v.type, state[v.offset])}")
                continue
            for j in range(v.length):
                i = v.offset + j
                coords = v.position(j)
                mine = REQUEST in v.axes and coords[v.axes.index(REQUEST)] == focus
                if not mine and state[i] == init[i]:
                    continue
                label = self._slot_label(v.name, v.axes, coords)
                if label is not None:
                    out.append(f"{label} = {self._value(v.type, state[i])}")
        return out

    def _slot_label(self, name: str, axes: tuple[str, ...], coords: tuple[int, ...]) -> str | None:
        """``name[B, page 7]`` in the log's names (None: an id the log has not named)."""
        parts = []
        for axis, c in zip(axes, coords):
            if axis == REQUEST:
                if c not in self.req_name:
                    return None
                parts.append(self.req_name[c])
            elif axis == PAGE:
                key = self.page_key.get(c)
                if key is None:
                    return None
                parts.append(f"page {page_text(key)}")
            else:
                parts.append(str(c))
        return f"{name}[{', '.join(parts)}]"

    def _label(self, inst: ActionInstance) -> str:
        parts = [self._value(t, a) for (_, t), a in zip(inst.action.params, inst.args)]
        return f"{inst.name}({', '.join(parts)})"

    def _explain(self, ev: LogEvent, e: Event, r: int, q: int | None) -> Nonconformance:
        states: list[State] = []
        owed: list[str] = []
        for s, pend in sorted(self.configs, key=lambda c: (len(c[1]), c[0]))[:64]:
            if pend:
                owed.append(self._event_text(pend[0]))
                continue
            for t in self._closure(s, None, q):
                if t not in states:
                    states.append(t)
        report = Nonconformance(ev, f"the model {self.system.name} cannot produce "
                                    f"{ev.text()} here", configs=len(self.configs))
        if ev.request in self.retired:
            report.reason += (f"; {ev.request} was dormant in the model after line "
                              f"{self.retired[ev.request]} (its id was retired), so this event "
                              "is checked as a new request's")
        if owed:
            report.reason += f" (a step in progress owes {', '.join(sorted(set(owed))[:3])})"
        for t in states[:3]:
            report.states.append(self.describe(t, r))
            enabled = []
            for inst in self.system.instances:
                info = self.info_of[id(inst.action)]
                if not self._mapped_args(inst, info, None):
                    continue
                res = self._step(t, inst)
                if res is None:
                    continue
                evs = self._logged(res[1], info)
                shown = ", ".join(self._event_text(x) for x in evs[:4]) or "silent"
                enabled.append(f"{self._label(inst)} -> {shown}")
            report.enabled.append(enabled or ["(nothing enabled)"])
        return report


def _distinct(configs: list[Config]) -> list[Config]:
    """``configs`` without repeats, in order (nothing is hashed for one)."""
    if len(configs) < 2:
        return configs
    return list(dict.fromkeys(configs))


def _consume(pending: tuple[Event, ...], e: Event) -> tuple[Event, ...] | None:
    """``pending`` without ``e``, if ``e`` is its first event or in its leading run of
    same-kind, same-request page events (the pages of one mask emission); else None."""
    if not pending:
        return None
    first = pending[0]
    if first == e:
        return pending[1:]
    if first.page is None or first.kind != e.kind or first.request != e.request:
        return None
    for i in range(1, len(pending)):
        x = pending[i]
        if x.kind != first.kind or x.request != first.request or x.page is None:
            return None
        if x == e:
            return pending[:i] + pending[i + 1:]
    return None


def _all_kinds() -> list[str]:
    from kvspec.props.events import EVENT_KINDS
    return list(EVENT_KINDS)
