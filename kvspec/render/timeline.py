"""A counterexample trace as a grid of cells: the picture, before any drawing.

:func:`build_timeline` turns a ``kvspec-trace/1`` document (see ``docs/formats.md``)
into one :class:`Column` per step (plus one for the initial state), each holding a
:class:`RequestCell` per request (lifecycle phase, flags that changed, request
events) and a :class:`PageCell` per page (owner, whose KV data the page holds,
writes in flight, the page events of the step). Drawing code
(:mod:`kvspec.render.trace_graph`) only decides how cells look.

The page pool comes from the model-independent monitor variables (``page_owner``,
``page_inflight``, ``page_writer``, ``page_written``, ``rejected``) when the trace
carries them, and from the events otherwise. *Whose data a page holds* is not a
state variable: it is computed here from the events, as the request of the last
``land_write`` into the page; it survives ``free`` and ``alloc`` (freeing a page
does not wipe it) and is ``None`` — stale KV from before the trace — until the
first landing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kvspec.trace import MAX_TRACE_IDS

TRACE_FORMAT = "kvspec-trace/1"
RESULT_FORMAT = "kvspec-result/1"

#: monitor variables the pool row is drawn from (docs/formats.md)
MONITOR_PAGE_VARS = ("page_owner", "page_data", "page_written", "page_inflight", "page_writer")
MONITOR_VARS = MONITOR_PAGE_VARS + ("rejected",)
PHASE_NAMES = ("phase", "state", "status", "stage")


class TraceFormatError(ValueError):
    """The JSON is not a usable kvspec trace; the message says what is wrong, in one line."""


# -- reading the document ------------------------------------------------------------

def extract_trace(data: Any, prop: str | None = None) -> dict[str, Any]:
    """The ``kvspec-trace/1`` dict in ``data``: ``data`` itself, or (for a
    ``kvspec-result/1`` document) the trace of the first violated property, or of
    ``prop`` when given. Raises :class:`TraceFormatError` for anything else."""
    if not isinstance(data, Mapping):
        raise TraceFormatError(f"expected a JSON object ({TRACE_FORMAT} or {RESULT_FORMAT}), "
                               f"got {type(data).__name__}")
    fmt = data.get("format")
    if fmt == RESULT_FORMAT:
        verdicts = data.get("verdicts")
        if not isinstance(verdicts, list):
            raise TraceFormatError(f"{RESULT_FORMAT}: 'verdicts' must be a list")
        traces: list[Mapping[str, Any]] = [v["trace"] for v in verdicts
                  if isinstance(v, Mapping) and isinstance(v.get("trace"), Mapping)
                  and (prop is None or v.get("property") == prop)]
        if not traces:
            what = f"property {prop!r}" if prop else "any property"
            raise TraceFormatError(f"{RESULT_FORMAT}: no counterexample for {what} "
                                   "(nothing is violated): nothing to draw")
        trace = dict(traces[0])
    elif fmt == TRACE_FORMAT:
        trace = dict(data)
    else:
        raise TraceFormatError(f"unsupported format {fmt!r} (expected {TRACE_FORMAT!r} or "
                               f"{RESULT_FORMAT!r})")
    validate_trace(trace)
    return trace


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _check_state(where: str, state: Mapping[str, Any]) -> None:
    """A state maps variable names to a value or a list of values (docs/formats.md)."""
    for name, value in state.items():
        if isinstance(value, list):
            if not all(_is_scalar(x) for x in value):
                raise TraceFormatError(f"{where}: variable {name!r} must hold a list of values")
        elif not _is_scalar(value):
            raise TraceFormatError(f"{where}: variable {name!r} must hold a value or a list")


def _check_counts(trace: Mapping[str, Any]) -> None:
    for section in ("sizes", "schema"):
        block = trace.get(section) or {}
        for name in ("requests", "pages"):
            if name in block and block[name] is not None and not (
                    _is_int(block[name]) and 0 <= block[name] <= MAX_TRACE_IDS):
                raise TraceFormatError(f"'{section}.{name}' must be an integer from 0 to "
                                       f"{MAX_TRACE_IDS}, got {block[name]!r}")
    vars_ = (trace.get("schema") or {}).get("vars", [])
    if vars_ is not None and not isinstance(vars_, list):
        raise TraceFormatError("'schema.vars' must be a list")


def validate_trace(trace: Mapping[str, Any]) -> None:
    """Check the parts of a trace the renderers rely on; raise TraceFormatError."""
    if trace.get("format") != TRACE_FORMAT:
        raise TraceFormatError(f"expected format {TRACE_FORMAT!r}, got {trace.get('format')!r}")
    steps = trace.get("steps")
    if not isinstance(steps, list):
        raise TraceFormatError("'steps' must be a list")
    for key in ("schema", "initial", "sizes", "model"):
        if key in trace and trace[key] is not None and not isinstance(trace[key], Mapping):
            raise TraceFormatError(f"'{key}' must be an object")
    _check_counts(trace)
    loop = trace.get("loop_start")
    if loop is not None and not (_is_int(loop) and 0 <= loop <= len(steps)):
        raise TraceFormatError(f"'loop_start' must be a step index from 0 to {len(steps)}, "
                               f"got {loop!r}")
    _check_state("'initial'", trace.get("initial") or {})
    for n, step in enumerate(steps, 1):
        if not isinstance(step, Mapping):
            raise TraceFormatError(f"step {n} must be an object")
        if not isinstance(step.get("action", step.get("label")), str):
            raise TraceFormatError(f"step {n} has no 'action' or 'label'")
        if "label" in step and step["label"] is not None and not isinstance(step["label"], str):
            raise TraceFormatError(f"step {n}: 'label' must be a string")
        events = step.get("events", [])
        if not isinstance(events, list):
            raise TraceFormatError(f"step {n}: 'events' must be a list")
        for ev in events:
            if not isinstance(ev, Mapping) or not isinstance(ev.get("kind"), str):
                raise TraceFormatError(f"step {n}: every event needs a 'kind'")
            r = _rnum(ev.get("request"))
            if r is None or r >= MAX_TRACE_IDS:
                raise TraceFormatError(f"step {n}: event {ev.get('kind')} has request "
                                       f"{ev.get('request')!r}, expected 'r<N>'")
            page = ev.get("page")
            if page is not None and not (_is_int(page) and 0 <= page < MAX_TRACE_IDS):
                raise TraceFormatError(f"step {n}: event {ev['kind']} has page {page!r}")
        for key in ("state", "args"):
            if key in step and step[key] is not None and not isinstance(step[key], Mapping):
                raise TraceFormatError(f"step {n}: '{key}' must be an object")
        _check_state(f"step {n}: 'state'", step.get("state") or {})
        changes = step.get("changes")
        if changes is not None and not isinstance(changes, list):
            raise TraceFormatError(f"step {n}: 'changes' must be a list")
        for ch in changes or []:
            if not isinstance(ch, Mapping) or not isinstance(ch.get("var"), str):
                raise TraceFormatError(f"step {n}: every change needs a 'var'")
            if not all(_is_scalar(ch.get(k)) for k in ("index", "before", "after")):
                raise TraceFormatError(f"step {n}: change of {ch['var']!r} must hold values")
        violation = step.get("violation")
        if violation is not None and not (isinstance(violation, Mapping) and isinstance(
                violation.get("event") or {}, Mapping)):
            raise TraceFormatError(f"step {n}: 'violation' must be an object with an 'event' "
                                   "object")


def _rnum(ref: Any) -> int | None:
    if isinstance(ref, str) and ref.startswith("r") and ref[1:].isdigit():
        return int(ref[1:])
    return None


# -- the picture model ---------------------------------------------------------------

@dataclass
class Mark:
    """One event drawn on a cell."""

    kind: str
    request: str
    page: int | None
    violating: bool = False
    #: for ``read``: whose data the page held when it was not the reader's ("stale" if
    #: from before the trace); for ``land_write``: the page's owner when the writer did
    #: not own it (a late landing)
    foreign: str | None = None
    inflight: bool = False  # read while a write into the page was in flight

    @property
    def bad(self) -> bool:
        return self.violating or self.foreign is not None or self.inflight

    def text(self) -> str:
        if self.page is None:
            return f"{self.kind}({self.request})"
        return f"{self.kind}({self.request}, page {self.page})"


@dataclass
class PageCell:
    page: int
    owner: str | None        # request the page is allocated to, or None (free)
    data: str | None         # request whose KV the page holds; None: stale, from before
    written: str | None      # write landed since the page was last allocated (monitor)
    inflight: int            # posted writes not yet landed or drained
    writer: str | None       # request of the latest posted write
    writers: list[str] = field(default_factory=list)  # requests of the writes in flight
    marks: list[Mark] = field(default_factory=list)
    changed: bool = False
    violating: bool = False

    @property
    def mismatch(self) -> bool:
        """The page is owned by a request but holds someone else's (or stale) data."""
        return self.owner is not None and self.data != self.owner


@dataclass
class Change:
    var: str
    before: Any
    after: Any


@dataclass
class RequestCell:
    request: str
    phase: str | None
    phase_changed: bool = False
    changes: list[Change] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    rejected: bool = False
    rejected_now: bool = False
    violating: bool = False
    #: the violating page event of this request, shown in its lane too
    culprit: Mark | None = None

    @property
    def changed(self) -> bool:
        return self.phase_changed or bool(self.changes) or bool(self.marks) or self.rejected_now


@dataclass
class Column:
    index: int              # 0: the initial state
    label: str              # "initial" or the action label
    requests: list[RequestCell]
    pages: list[PageCell]
    scalars: list[Change] = field(default_factory=list)
    events: list[Mark] = field(default_factory=list)
    violating: bool = False
    reason: str | None = None
    #: lasso only: the column's step repeats forever (it is part of the loop)
    in_loop: bool = False
    #: lasso only: the state the loop returns to (the state before its first step)
    loop_anchor: bool = False

    @property
    def is_initial(self) -> bool:
        return self.index == 0


@dataclass
class Leak:
    """A read of a page whose data was not the reader's (or a write landing late)."""

    step: int
    page: int
    request: str             # the reader (or late writer)
    holder: str | None       # whose data was there; None: stale from before the trace
    kind: str = "read"       # "read", "read_inflight" or "late_landing"
    violating: bool = False

    def text(self) -> str:
        if self.kind == "late_landing":
            return (f"step {self.step}: a write of {self.request} landed in page {self.page}, "
                    f"which {self.holder or 'nobody'} owns now")
        if self.kind == "read_inflight":
            return (f"step {self.step}: {self.request} read page {self.page} while a write "
                    "into it was in flight")
        held = "stale KV from before the trace" if self.holder is None else \
            f"{self.holder}'s KV"
        return f"step {self.step}: {self.request} read page {self.page}, which held {held}"


@dataclass
class HeldPage:
    """A page whose obligation stays pending forever in a lasso: allocated to
    ``request`` and never freed (``kind == "held"``), or holding a write of
    ``request`` that never lands nor is drained (``kind == "write"``)."""

    page: int
    request: str
    kind: str                # "held" or "write"
    since: int               # the step of the alloc (or post_write); 0: the initial state
    data: str | None         # whose KV the page holds at the end of the loop (None: stale)
    obligation: bool = False  # the violated obligation is this page's

    def text(self) -> str:
        since = "in the initial state" if self.since == 0 else f"at step {self.since}"
        held = f"KV {self.data}" if self.data else "stale KV"
        if self.kind == "write":
            return (f"page {self.page}: the write {self.request} posted {since} never lands "
                    f"nor is drained (the page holds {held})")
        return (f"page {self.page}: allocated to {self.request} {since}, never freed "
                f"(holds {held})")


@dataclass
class Timeline:
    model: str
    file: str
    sizes: dict[str, Any]
    prop: str
    reason: str
    requests: list[str]
    pages: list[int]
    columns: list[Column]
    phase_var: str | None
    untouched_pages: list[int]
    leaks: list[Leak]
    violation_step: int | None
    violation_event: Mark | None
    #: a lasso (docs/liveness.md): steps ``loop_start + 1 ..`` repeat forever; equal to
    #: ``steps``: the last state repeats (nothing is enabled); None: a safety trace
    loop_start: int | None = None
    #: lasso only: the pages whose obligation stays pending across the loop
    held: list[HeldPage] = field(default_factory=list)

    @property
    def is_lasso(self) -> bool:
        return self.loop_start is not None

    @property
    def stops(self) -> bool:
        """A lasso whose run stops in its last state (nothing enabled)."""
        return self.loop_start is not None and self.loop_start == self.steps

    @property
    def shown_pages(self) -> list[int]:
        return [p for p in self.pages if p not in self.untouched_pages]

    @property
    def steps(self) -> int:
        return len(self.columns) - 1


def _var_table(trace: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    schema = trace.get("schema") or {}
    out: dict[str, dict[str, Any]] = {}
    for v in schema.get("vars", []) or []:
        if isinstance(v, Mapping) and isinstance(v.get("name"), str):
            out[v["name"]] = dict(v)
    return out


def _owner_of(name: str, vars_: Mapping[str, Mapping[str, Any]]) -> str:
    if name in vars_:
        return str(vars_[name].get("owner", "model"))
    if name in MONITOR_VARS:
        return "monitor"
    if name.startswith("violated:"):
        return "flag"
    return "model"


def _phase_var(vars_: Mapping[str, Mapping[str, Any]], initial: Mapping[str, Any]) -> str | None:
    req = [n for n, v in vars_.items() if v.get("dim") == "request" and
           v.get("owner", "model") == "model"]
    for name in PHASE_NAMES:
        if name in req:
            return name
    for name in req:
        if any(p in name.lower() for p in PHASE_NAMES):
            return name
    for name in req:
        if str(vars_[name].get("type", "")).startswith("enum"):
            return name
    if not vars_ and "phase" in initial:
        return "phase"
    return None


def _counts(trace: Mapping[str, Any]) -> tuple[int, int]:
    schema = trace.get("schema") or {}
    sizes = trace.get("sizes") or {}
    nreq = schema.get("requests") or sizes.get("requests") or 0
    npages = schema.get("pages") or sizes.get("pages") or 0
    for step in trace.get("steps", []):
        for ev in step.get("events", []):
            r = _rnum(ev.get("request"))
            if r is not None:
                nreq = max(nreq, r + 1)
            if isinstance(ev.get("page"), int):
                npages = max(npages, ev["page"] + 1)
    init = trace.get("initial") or {}
    for name, value in init.items():
        if name in MONITOR_PAGE_VARS and isinstance(value, list):
            npages = max(npages, len(value))
    return int(nreq), int(npages)


def _full_states(trace: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The state before the first step and after every step; a step without a full
    ``state`` gets the previous state with its ``changes`` applied."""
    prev: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v)
                            for k, v in (trace.get("initial") or {}).items()}
    states = [prev]
    for step in trace["steps"]:
        cur = {k: (list(v) if isinstance(v, list) else v) for k, v in prev.items()}
        for ch in step.get("changes", []) or []:
            if not isinstance(ch, Mapping) or ch.get("var") not in cur:
                continue
            idx = ch.get("index")
            value = cur[ch["var"]]
            if idx is None:
                cur[ch["var"]] = ch.get("after")
            elif isinstance(value, list):
                i = _rnum(idx) if isinstance(idx, str) else idx
                if isinstance(i, int) and 0 <= i < len(value):
                    value[i] = ch.get("after")
        for k, v in (step.get("state") or {}).items():
            cur[k] = list(v) if isinstance(v, list) else v
        states.append(cur)
        prev = cur
    return states


def _count(value: Any) -> int:
    return value if _is_int(value) else 0


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    return str(value)


def _same_event(ev: Mapping[str, Any], target: Mapping[str, Any] | None) -> bool:
    if not target:
        return False
    return (ev.get("kind"), ev.get("request"), ev.get("page")) == \
        (target.get("kind"), target.get("request"), target.get("page"))


class _Pool:
    """Page-pool bookkeeping from events alone (the monitor, plus who holds the data)."""

    def __init__(self, pages: int) -> None:
        self.owner: list[str | None] = [None] * pages
        self.data: list[str | None] = [None] * pages
        self.written: list[str | None] = [None] * pages
        self.inflight: list[int] = [0] * pages
        self.writer: list[str | None] = [None] * pages
        self.writers: list[list[str]] = [[] for _ in range(pages)]

    def apply(self, kind: str, r: str, p: int) -> Mark:
        mark = Mark(kind, r, p)
        if kind == "alloc":
            self.owner[p] = r
            self.written[p] = None
        elif kind == "free":
            self.owner[p] = None
        elif kind == "post_write":
            self.inflight[p] += 1
            self.writer[p] = r
            self.writers[p].append(r)
        elif kind == "land_write":
            if self.owner[p] != r:
                mark.foreign = self.owner[p] or "nobody"
            self.inflight[p] = max(0, self.inflight[p] - 1)
            self._retire(r, p)
            self.data[p] = r
            self.written[p] = r
        elif kind == "drain":
            self.inflight[p] = max(0, self.inflight[p] - 1)
            self._retire(r, p)
        elif kind == "read":
            if self.data[p] != r:
                mark.foreign = self.data[p] or "stale"
            if self.inflight[p] > 0:
                mark.inflight = True
        return mark

    def _retire(self, r: str, p: int) -> None:
        """One write of ``r`` into ``p`` is no longer in flight."""
        if r in self.writers[p]:
            self.writers[p].remove(r)
        elif self.writers[p]:
            self.writers[p].pop(0)


def build_timeline(trace: Mapping[str, Any]) -> Timeline:
    """The grid of cells for a validated ``kvspec-trace/1`` dict."""
    validate_trace(trace)
    vars_ = _var_table(trace)
    nreq, npages = _counts(trace)
    requests = [f"r{i}" for i in range(nreq)]
    pages = list(range(npages))
    states = _full_states(trace)
    phase = _phase_var(vars_, states[0])
    pool = _Pool(npages)
    touched: set[int] = set()
    leaks: list[Leak] = []
    columns: list[Column] = []
    violation = trace["steps"][-1].get("violation") if trace["steps"] else None
    viol_event = violation.get("event") if isinstance(violation, Mapping) else None
    viol_mark: Mark | None = None
    viol_step: int | None = None
    loop_start = trace.get("loop_start")
    # the step whose event is drawn as the violating one: the last step of a safety
    # trace; the step that opened the pending obligation of a lasso
    mark_at = len(trace["steps"]) if loop_start is None else \
        _opening_step(trace["steps"], viol_event, loop_start)

    def page_value(state: Mapping[str, Any], name: str, p: int, fallback: Any) -> Any:
        value = state.get(name)
        if isinstance(value, list) and p < len(value):
            return value[p]
        return fallback

    def make_pages(state: Mapping[str, Any]) -> list[PageCell]:
        cells = []
        for p in pages:
            cells.append(PageCell(
                p,
                owner=page_value(state, "page_owner", p, pool.owner[p]),
                data=pool.data[p],
                written=page_value(state, "page_written", p, pool.written[p]),
                inflight=_count(page_value(state, "page_inflight", p, pool.inflight[p])),
                writer=page_value(state, "page_writer", p, pool.writer[p]),
                writers=list(pool.writers[p])))
        return cells

    def make_requests(state: Mapping[str, Any]) -> list[RequestCell]:
        cells = []
        rej = state.get("rejected")
        ph = state.get(phase) if phase else None
        for i, r in enumerate(requests):
            cells.append(RequestCell(
                r, phase=_fmt(ph[i]) if isinstance(ph, list) and i < len(ph) else None,
                rejected=bool(rej[i]) if isinstance(rej, list) and i < len(rej) else False))
        return cells

    columns.append(Column(0, "initial", make_requests(states[0]), make_pages(states[0])))
    rejected_seen: set[str] = {c.request for c in columns[0].requests if c.rejected}
    for n, step in enumerate(trace["steps"], 1):
        index = int(step.get("index", n)) if isinstance(step.get("index", n), int) else n
        state = states[n]
        label = step.get("label") or step.get("action") or f"step {index}"
        marks: list[Mark] = []
        page_marks: dict[int, list[Mark]] = {}
        req_marks: dict[str, list[Mark]] = {}
        is_last = n == len(trace["steps"])
        found_violating = False
        for ev in step.get("events", []) or []:
            kind, r, p = ev["kind"], ev["request"], ev.get("page")
            if p is not None and p < npages:
                mark = pool.apply(kind, r, p)
                touched.add(p)
            else:
                mark = Mark(kind, r, p)
            if kind == "reject":
                rejected_seen.add(r)
            if n == mark_at and not found_violating and _same_event(ev, viol_event):
                mark.violating = True
                found_violating = True
                viol_mark = mark
                viol_step = index
            if mark.foreign is not None or mark.inflight:
                if kind == "read":
                    leaks.append(Leak(index, p if p is not None else -1, r,
                                      None if mark.foreign in (None, "stale") else mark.foreign,
                                      "read" if mark.foreign is not None else "read_inflight",
                                      mark.violating))
                elif kind == "land_write":
                    leaks.append(Leak(index, p if p is not None else -1, r,
                                      None if mark.foreign == "nobody" else mark.foreign,
                                      "late_landing", mark.violating))
            marks.append(mark)
            if p is not None:
                page_marks.setdefault(p, []).append(mark)
            else:
                req_marks.setdefault(r, []).append(mark)
        page_cells = make_pages(state)
        prev_pages = columns[-1].pages
        for cell, before in zip(page_cells, prev_pages):
            cell.marks = page_marks.get(cell.page, [])
            cell.changed = bool(cell.marks) or (cell.owner, cell.data, cell.writers) != \
                (before.owner, before.data, before.writers)
            cell.violating = any(m.violating for m in cell.marks)
            if cell.changed:
                touched.add(cell.page)
        req_cells = make_requests(state)
        prev_reqs = columns[-1].requests
        for rcell, rbefore in zip(req_cells, prev_reqs):
            rcell.phase_changed = rcell.phase != rbefore.phase
            rcell.marks = req_marks.get(rcell.request, [])
            rcell.rejected = rcell.rejected or rcell.request in rejected_seen
            rcell.rejected_now = rcell.rejected and not rbefore.rejected
            rcell.violating = any(m.violating for m in rcell.marks)
            if viol_mark is not None and viol_mark.page is not None and \
                    viol_mark.request == rcell.request and n == mark_at:
                rcell.culprit = viol_mark
                rcell.violating = True
        scalars: list[Change] = []
        for ch in step.get("changes", []) or []:
            if not isinstance(ch, Mapping) or not isinstance(ch.get("var"), str):
                continue
            name = ch["var"]
            if _owner_of(name, vars_) != "model" or name == phase:
                continue
            dim = vars_.get(name, {}).get("dim")
            idx = ch.get("index")
            change = Change(name, ch.get("before"), ch.get("after"))
            if dim == "request" or (dim is None and isinstance(idx, str)):
                i = _rnum(idx)
                if i is not None and i < len(req_cells):
                    req_cells[i].changes.append(change)
            elif dim == "page" or (dim is None and isinstance(idx, int)):
                continue  # the pool row shows pages through the monitor variables
            elif isinstance(dim, str) and "*" in dim and _is_int(idx):
                _grid_change(change, dim, idx, trace.get("sizes") or {}, req_cells, scalars)
            else:
                scalars.append(change)
        col = Column(index, str(label), req_cells, page_cells, scalars, marks)
        if is_last and loop_start is None and isinstance(violation, Mapping):
            col.violating = True
            col.reason = str(violation.get("reason") or trace.get("reason") or "")
            if viol_step is None:
                viol_step = index
        columns.append(col)
    if violation is None and not trace["steps"]:
        viol_step = 0
    held: list[HeldPage] = []
    if loop_start is not None:
        columns[loop_start].loop_anchor = True
        for col in columns[loop_start + 1:]:
            col.in_loop = True
        held = _held_pages(columns, loop_start, str(trace.get("property", "")), viol_mark)
    untouched = [p for p in pages if p not in touched]
    model = trace.get("model") or {}
    return Timeline(
        model=str(model.get("name", "model")), file=str(model.get("file", "")),
        sizes=dict(trace.get("sizes") or {}), prop=str(trace.get("property", "")),
        reason=str(trace.get("reason", "")), requests=requests, pages=pages, columns=columns,
        phase_var=phase, untouched_pages=untouched, leaks=leaks, violation_step=viol_step,
        violation_event=viol_mark, loop_start=loop_start, held=held)


def _grid_change(change: Change, dim: str, idx: int, sizes: Mapping[str, Any],
                 req_cells: list[Any], scalars: list[Change]) -> None:
    """A change of a two-dimensional variable (``idx``: its row-by-row position): on the
    lane of its request when one axis is requests, named with the other index."""
    outer, inner = dim.split("*", 1)
    n1 = _count(sizes.get({"request": "requests", "page": "pages"}.get(inner, inner)))
    if n1 <= 0:
        scalars.append(change)
        return
    i, j = divmod(idx, n1)
    if outer == "request" and i < len(req_cells):
        req_cells[i].changes.append(Change(f"{change.var}[{j}]", change.before, change.after))
    elif inner == "request" and j < len(req_cells):
        req_cells[j].changes.append(Change(f"{change.var}[{i}]", change.before, change.after))
    else:
        scalars.append(Change(f"{change.var}[{i},{j}]", change.before, change.after))


# -- lassos ----------------------------------------------------------------------------

#: the liveness property whose obligations are writes (docs/liveness.md)
WRITES_QUIESCE = "writes-eventually-quiesce"


def _opening_step(steps: Sequence[Mapping[str, Any]], event: Mapping[str, Any] | None,
                  loop_start: int) -> int | None:
    """The 1-based position of the step that opened a lasso's pending obligation: the
    last step of the prefix emitting ``event`` (else the last step anywhere)."""
    found = [n for n, step in enumerate(steps, 1)
             if any(_same_event(ev, event) for ev in step.get("events", []) or [])]
    before = [n for n in found if n <= loop_start]
    chosen = before or found
    return chosen[-1] if chosen else None


def _last_mark(columns: Sequence[Column], upto: int, kind: str, request: str,
               page: int) -> int:
    """The step of the last ``kind(request, page)`` event in columns ``1..upto``; 0 if none."""
    for col in reversed(columns[1:upto + 1]):
        if any(m.kind == kind and m.request == request and m.page == page for m in col.events):
            return col.index
    return 0


def _held_pages(columns: Sequence[Column], loop_start: int, prop: str,
                culprit: Mark | None) -> list[HeldPage]:
    """The pages whose obligation stays pending on the loop (every state from
    ``columns[loop_start]`` to the last): held by the same request and never freed on
    the loop or, for write obligations, with a write in flight that never lands nor is
    drained on it. The violated obligation's page comes first."""
    loop_cols = columns[loop_start:]
    loop_marks = [m for col in columns[loop_start + 1:] for m in col.events]
    writes = prop == WRITES_QUIESCE or (culprit is not None and culprit.kind == "post_write")
    out: list[HeldPage] = []
    for cell in columns[-1].pages:
        p = cell.page
        if writes:
            for w in dict.fromkeys(cell.writers):
                if all(w in col.pages[p].writers for col in loop_cols) and not any(
                        m.kind in ("land_write", "drain") and m.request == w and m.page == p
                        for m in loop_marks):
                    out.append(HeldPage(p, w, "write",
                                        _last_mark(columns, loop_start, "post_write", w, p),
                                        cell.data))
        elif cell.owner is not None and all(col.pages[p].owner == cell.owner
                                            for col in loop_cols) and not any(
                m.kind == "free" and m.request == cell.owner and m.page == p
                for m in loop_marks):
            out.append(HeldPage(p, cell.owner, "held",
                                _last_mark(columns, loop_start, "alloc", cell.owner, p),
                                cell.data))
    for h in out:
        h.obligation = culprit is not None and (culprit.request, culprit.page) == \
            (h.request, h.page)
    return sorted(out, key=lambda h: not h.obligation)


def page_ranges(pages: Sequence[int]) -> str:
    """``[3, 5, 6, 7]`` -> ``"3, 5–7"``."""
    out: list[str] = []
    start: int | None = None
    prev: int | None = None
    for p in sorted(pages):
        if start is None:
            start = prev = p
        elif prev is not None and p == prev + 1:
            prev = p
        else:
            out.append(str(start) if start == prev else f"{start}–{prev}")
            start = prev = p
    if start is not None:
        out.append(str(start) if start == prev else f"{start}–{prev}")
    return ", ".join(out)
