"""The picture of the first violating window of a log (``kvspec audit --picture``).

The audit streams the log and keeps nothing of it; the picture reads the log a second
time up to the first violating event (the earliest definite finding, else the first
event the model cannot produce, else the earliest POSSIBLE finding), keeping the last
:data:`BUFFER` events. From those it takes the *involved* requests and pages — the
violating request, the pages it touched, the requests that touched those pages — and
draws the last :data:`WINDOW` of their events as a replay-style picture: it is turned
into a ``kvspec-trace/1`` document (requests ``r0..``, pages ``0..``; the title and
every step label give the log's own names and line numbers) and drawn by
:mod:`kvspec.render.trace_graph`, the renderer of ``kvspec render``/``replay``: request
swimlanes (last lifecycle event), the page pool (owner, whose write landed, writes in
flight) and the violating event highlighted in red.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from kvspec.audit.logformat import LogEvent, compile_validator, page_text, read_records
from kvspec.audit.mapping import Mapping
from kvspec.audit.run import AuditResult

#: events of the log kept while looking for the violating one
BUFFER = 4096
#: steps drawn (events of the involved requests and pages, the violating one last)
WINDOW = 16
#: requests drawn at most (the violating one and the most recent others)
MAX_REQUESTS = 6

TRACE_FORMAT = "kvspec-trace/1"


def first_violation(result: AuditResult) -> tuple[LogEvent, str, str] | None:
    """(event, check, reason) of the first violating event, or None."""
    found = sorted(result.findings.values(), key=lambda f: f.event.line)
    if found:
        return found[0].event, found[0].check, found[0].reason
    c = result.conformance
    if c is not None and c.event.line:
        return c.event, "conformance", c.reason
    maybe = sorted(result.possible.values(), key=lambda f: f.event.line)
    if maybe:
        return maybe[0].event, maybe[0].check, "POSSIBLE: " + maybe[0].reason
    return None


def window_events(log: str | Path, mapping: Mapping, target: LogEvent) -> list[LogEvent]:
    """The last :data:`BUFFER` events of ``log`` up to and including ``target``."""
    buf: deque[LogEvent] = deque(maxlen=BUFFER)
    validate = compile_validator(mapping.fields)
    name = str(log)
    with Path(log).open("r", encoding="utf-8") as stream:
        for number, record in read_records(stream, name, validate):
            if number < target.line:
                buf.extend(mapping.events(number, record, name))
                continue
            for ev in mapping.events(number, record, name):
                buf.append(ev)
                if ev == target:
                    return list(buf)
            break
    return list(buf)


def involved(events: list[LogEvent], target: LogEvent) -> list[LogEvent]:
    """The events of the requests and pages involved in ``target``, the last
    :data:`WINDOW` of them (``target`` last)."""
    mine = [e for e in events if e.request == target.request]
    pages = {e.page for e in mine[-WINDOW:] if e.page is not None}
    if target.page is not None:
        pages.add(target.page)
    others: list[str] = []
    for e in reversed(events):
        if e.page in pages and e.request != target.request and e.request not in others:
            others.append(e.request)
    requests = {target.request, *others[:MAX_REQUESTS - 1]}
    chosen = [e for e in events if e.request in requests or e.page in pages]
    return chosen[-WINDOW:]


class _Pool:
    """Owner, landed writer and writes in flight per page, as the events say."""

    def __init__(self) -> None:
        self.owner: dict[Any, str] = {}
        self.written: dict[Any, str] = {}
        self.inflight: dict[Any, dict[str, int]] = {}

    def apply(self, ev: LogEvent) -> None:
        p, r, kind = ev.page, ev.request, ev.kind
        if p is None:
            return
        fl = self.inflight.setdefault(p, {})
        if kind == "alloc":
            self.owner[p] = r
            self.written.pop(p, None)
        elif kind == "free":
            if self.owner.get(p) == r:
                del self.owner[p]
            self.written.pop(p, None)
        elif kind == "post_write":
            fl[r] = fl.get(r, 0) + 1
        elif kind in ("land_write", "drain"):
            if fl.get(r):
                fl[r] -= 1
            if kind == "land_write":
                self.written[p] = r


def window_trace(log: str | Path, mapping: Mapping, result: AuditResult) -> dict[str, Any] | None:
    """The ``kvspec-trace/1`` document of the first violating window (None: no violation)."""
    first = first_violation(result)
    if first is None:
        return None
    target, check, reason = first
    events = window_events(log, mapping, target)
    shown = involved(events, target)
    first_shown = events.index(shown[0]) if shown else len(events)
    names = list(dict.fromkeys(e.request for e in shown))
    page_keys = list(dict.fromkeys(e.page for e in shown if e.page is not None))
    rid = {n: f"r{i}" for i, n in enumerate(names)}
    pid = {k: i for i, k in enumerate(page_keys)}
    pool = _Pool()
    last: dict[str, str] = {}
    for e in events[:first_shown]:  # the state before the window, from what was read
        pool.apply(e)
        last[e.request] = e.kind

    def state() -> dict[str, Any]:
        owner = [rid.get(pool.owner.get(k, ""), None) for k in page_keys]
        written = [rid.get(pool.written.get(k, ""), None) for k in page_keys]
        inflight = [sum(pool.inflight.get(k, {}).values()) for k in page_keys]
        writer = [next((rid.get(r) for r, n in pool.inflight.get(k, {}).items() if n), None)
                  for k in page_keys]
        phase = [last.get(n, "-") for n in names]
        return {"phase": phase, "page_owner": owner, "page_written": written,
                "page_inflight": inflight, "page_writer": writer}

    initial = state()
    steps = []
    for i, e in enumerate(shown, 1):
        pool.apply(e)
        last[e.request] = e.kind
        ev: dict[str, Any] = {"kind": e.kind, "request": rid[e.request]}
        if e.page is not None:
            ev["page"] = pid[e.page]
        step: dict[str, Any] = {"index": i, "action": e.kind,
                                "label": f"line {e.line}: {e.text()}",
                                "events": [ev], "state": state(), "violation": None}
        steps.append(step)
    if steps:
        steps[-1]["violation"] = {"property": check, "reason": reason,
                                  "event": dict(steps[-1]["events"][0])}
    legend = {f"r{i}": n for i, n in enumerate(names)}
    legend.update({f"page {i}": page_text(k) for i, k in enumerate(page_keys)})
    return {
        "format": TRACE_FORMAT,
        "model": {"name": f"audit of {Path(log).name}: first violating window",
                  "file": f"{log}, lines {shown[0].line}-{target.line}" if shown else str(log)},
        "sizes": legend,
        "property": check,
        "reason": f"line {target.line}: {reason}",
        "schema": {"requests": len(names), "pages": len(page_keys), "vars": [
            {"name": "phase", "dim": "request", "type": "last logged event", "owner": "model"},
            {"name": "page_owner", "dim": "page", "type": "request?", "owner": "monitor"},
            {"name": "page_written", "dim": "page", "type": "request?", "owner": "monitor"},
            {"name": "page_inflight", "dim": "page", "type": "int", "owner": "monitor"},
            {"name": "page_writer", "dim": "page", "type": "request?", "owner": "monitor"}]},
        "initial": initial,
        "steps": steps,
    }


def write_picture(log: str | Path, mapping: Mapping, result: AuditResult, path: Path) -> bool:
    """Draw the first violating window of ``log`` to ``path`` (.svg .png .pdf .dot);
    False when the log has no violation (nothing is written)."""
    from kvspec.render.trace_graph import render_trace
    trace = window_trace(log, mapping, result)
    if trace is None:
        return False
    render_trace(trace, path)
    return True
