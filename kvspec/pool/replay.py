"""Replay a counterexample trace on a tensor page pool and show the leak in the data.

``replay_trace`` takes a ``kvspec-trace/1`` dict (or a ``kvspec-result/1`` dict, from
which the trace of the first VIOLATED verdict is taken), maps every event of every step
to a ``PagePool`` operation and returns a ``ReplayReport``: per-step evidence (the tag
found in every page read, late landings, reuse of pages with writes in flight, the
deviation of each decode attention from the output over the reader's own K/V) and a
summary.

Two things are added to what the trace says, both on by default, both labelled as such
in the report (see ``docs/replay.md``):

* ``earlier_tenant``: the pool starts seeded with the KV of ``T``, a fictitious tenant
  that used every page before the trace began, so a page nobody wrote during the trace
  is recognisably foreign data (not zeros) when it is read;
* ``aftermath``: after the last step, writes still in flight into pages their writer no
  longer owns land, and every page that holds such a late write's bytes unread is read
  by whoever gets it next (its owner, or a fresh request ``rN`` with ``N = requests``
  that is allocated the free page and decodes before a write of its own lands).

A ``read(r, p)`` of a page that is not in ``r``'s page table (another request owns it, or
nobody does) is exactly such a leak, not an impossible operation: the request reads
whatever bytes the page holds.  It is read as the block ``r`` last held in ``p`` (a stale
page-table entry) or else as the next block after ``r``'s table, and recorded as a read
outside the page table with the page's owner at that time.

A lasso (a liveness counterexample, ``loop_start`` set) is replayed as its prefix, then
its loop twice (``loop_iterations``), and reported with what the loop holds forever
(:mod:`kvspec.pool.lasso`); it gets no aftermath, since its run never ends.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from kvspec.pool.driver import EVENT_KINDS, PAGE_EVENTS, PoolDriver
from kvspec.pool.kv_data import request_kv
from kvspec.pool.page_pool import PageRead, PoolConfig, PoolError, Tag, request_name
from kvspec.pool.report import ReplayReport, StepRecord
from kvspec.trace import MAX_TRACE_IDS

__all__ = ["ReplayError", "extract_trace", "replay_trace"]

_KINDS = EVENT_KINDS
_PAGE_EVENTS = PAGE_EVENTS
_REQUEST_RE = re.compile(r"r(\d+)")


class ReplayError(ValueError):
    """The trace cannot be mapped onto the pool; the message is one line naming the step."""


# ---------------------------------------------------------------------- parsing
def extract_trace(doc: Any, prop: str | None = None) -> Mapping[str, Any]:
    """The trace in ``doc``: itself if a trace, else the trace of the first VIOLATED
    verdict (of property ``prop`` when given)."""
    if not isinstance(doc, Mapping):
        raise ReplayError(f"expected a JSON object (kvspec-trace/1 or kvspec-result/1), got {type(doc).__name__}")
    fmt = doc.get("format")
    if fmt == "kvspec-trace/1":
        if prop is not None and doc.get("property") != prop:
            raise ReplayError(f"the trace is a counterexample for {doc.get('property')!r}, not {prop!r}")
        return doc
    if fmt == "kvspec-result/1":
        verdicts = doc.get("verdicts")
        if not isinstance(verdicts, list):
            raise ReplayError("kvspec-result/1: 'verdicts' must be a list")
        for verdict in verdicts:
            if not isinstance(verdict, Mapping) or verdict.get("status") != "VIOLATED":
                continue
            if prop is not None and verdict.get("property") != prop:
                continue
            trace = verdict.get("trace")
            if not isinstance(trace, Mapping) or trace.get("format") != "kvspec-trace/1":
                name = verdict.get("property")
                raise ReplayError(f"verdict {name!r} is VIOLATED but carries no kvspec-trace/1 trace")
            return trace
        if prop is not None:
            raise ReplayError(f"kvspec-result/1 has no VIOLATED verdict for {prop!r}: nothing to replay")
        raise ReplayError("kvspec-result/1 has no VIOLATED verdict: nothing to replay")
    raise ReplayError(f"unsupported format {fmt!r} (expected 'kvspec-trace/1' or 'kvspec-result/1')")


def _size(trace: Mapping[str, Any], name: str) -> int:
    for section in ("sizes", "schema"):
        block = trace.get(section)
        if isinstance(block, Mapping) and name in block:
            value = block[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ReplayError(f"trace {section}.{name} must be a positive int, got {value!r}")
            if value > MAX_TRACE_IDS:
                raise ReplayError(f"trace {section}.{name} = {value} is more than a replay "
                                  f"pool holds (at most {MAX_TRACE_IDS})")
            return value
    raise ReplayError(f"trace has no sizes.{name} (nor schema.{name})")


def _request(value: Any, where: str) -> int:
    if isinstance(value, str):
        match = _REQUEST_RE.fullmatch(value)
        if match:
            return int(match.group(1))
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ReplayError(f"{where}: bad request id {value!r} (expected 'r0', 'r1', ...)")


def _event(ev: Any, where: str, requests: int) -> tuple[str, int, int | None]:
    if not isinstance(ev, Mapping):
        raise ReplayError(f"{where}: event must be an object, got {ev!r}")
    kind = ev.get("kind")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise ReplayError(f"{where}: unknown event kind {kind!r}")
    request = _request(ev.get("request"), f"{where} {kind}")
    if request >= requests:
        raise ReplayError(f"{where}: {kind}: request r{request} out of range (requests={requests})")
    page = ev.get("page")
    if kind in _PAGE_EVENTS:
        if isinstance(page, bool) or not isinstance(page, int):
            raise ReplayError(f"{where}: {kind}(r{request}) needs an integer page, got {page!r}")
        return kind, request, page
    return kind, request, None


# ------------------------------------------------------- reads outside the table
class _TraceDriver(PoolDriver):
    """The replay's driver: a ``read`` of a page outside the reader's page table reads
    the bytes the page holds (see the module docstring) instead of failing."""

    def __init__(self, config: PoolConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.freed_block: dict[tuple[int, int], int] = {}  # (request, page) -> block it held

    def apply(self, step: StepRecord, kind: str, r: int, p: int | None,
              reads: dict[int, list[PageRead]]) -> None:
        pool = self.pool
        if p is not None and 0 <= p < pool.config.pages and 0 <= r < self.requests:
            table = pool.page_table(r)
            if kind == "free" and p in table:
                self.freed_block[(r, p)] = table.index(p)
            elif kind == "read" and p not in table:
                pending = reads.setdefault(r, [])
                pending.append(self._outside_read(step, r, p, table, pending))
                return
        super().apply(step, kind, r, p, reads)

    def _outside_read(self, step: StepRecord, r: int, p: int, table: tuple[int, ...],
                      pending: list[PageRead]) -> PageRead:
        pool = self.pool
        cfg = pool.config
        block = self.freed_block.get((r, p))
        if block is None:  # the next block after the table (and this step's other such reads)
            block = len(table) + sum(1 for rd in pending if rd.page not in table)
        tag = pool.tag(p)  # from the device, after every landing queued before this read
        k, v = pool.k[p].clone(), pool.v[p].clone()
        if tag is None:
            content_ok = not bool(k.any()) and not bool(v.any())
        else:
            positions = range(tag.block * cfg.page_size, (tag.block + 1) * cfg.page_size)
            ek, ev = request_kv(tag.request, positions, cfg.heads, cfg.head_dim, cfg.dtype,
                                pool.device)
            content_ok = bool(torch.equal(k, ek)) and bool(torch.equal(v, ev))
        rd = PageRead(request=r, page=p, block=block, tag=tag, foreign=tag != Tag(r, block),
                      inflight_writers=tuple(t.request for t in pool.inflight(p)),
                      content_ok=content_ok, k=k, v=v)
        owner = pool.owner(p)
        if owner is not None:
            held = f"owned by {request_name(owner)}"
        elif (r, p) in self.freed_block:
            held = f"free since {request_name(r)} freed it at step {self.freed_at.get((r, p))}"
        else:
            held = "free"
        text = (f"{rd.describe()}; page {p} is NOT in {request_name(r)}'s page table "
                f"({held})")
        self.page_read(step, rd)
        record = step.ops[-1]
        step.ops[-1] = dataclasses.replace(record, text=text, detail={
            **record.detail, "outside_table": True,
            "owner": None if owner is None else request_name(owner)})
        if rd.foreign:
            last = self.report.foreign_reads[-1]
            self.report.foreign_reads[-1] = dataclasses.replace(
                last, outside_table=True, owner=owner)
        return rd


# ----------------------------------------------------------------------- replay
def replay_trace(
    trace: Mapping[str, Any],
    device: str = "auto",
    *,
    page_size: int = 4,
    heads: int = 2,
    head_dim: int = 16,
    dtype: torch.dtype = torch.float32,
    land_delay_cycles: int = 0,
    earlier_tenant: bool = True,
    aftermath: bool = True,
    prop: str | None = None,
    loop_iterations: int = 2,
) -> ReplayReport:
    """Replay ``trace`` (a kvspec-trace/1 or kvspec-result/1 dict) on a fresh ``PagePool``.

    ``earlier_tenant``: seed every page with the KV of the fictitious earlier tenant ``T``
    (else never-written pages hold zeros).  ``aftermath``: after the trace, land the writes
    still in flight into pages their writer no longer owns and let the next holder of
    every page with late-written bytes read it (reported separately from the trace).
    ``prop``: from a result document, replay that property's counterexample.

    A lasso (``loop_start`` in the trace, from ``kvspec live``) replays its prefix, then
    its loop ``loop_iterations`` times, without an aftermath (the run never ends); the
    report's ``lasso`` names the pages the loop holds forever (whose KV, how many bytes)
    and the writes that never quiesce, and ``leaked`` is true when there is one.
    """
    doc = extract_trace(trace, prop)
    pages, requests = _size(doc, "pages"), _size(doc, "requests")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise ReplayError("trace 'steps' must be a list")
    model = doc.get("model")
    try:
        config = PoolConfig(pages=pages, page_size=page_size, heads=heads, head_dim=head_dim,
                            dtype=dtype, device=device, requests=requests + 1,
                            land_delay_cycles=land_delay_cycles, earlier_tenant=earlier_tenant)
        driver = _TraceDriver(
            config, requests=requests,
            model=str(model.get("name")) if isinstance(model, Mapping) and model.get("name") else None,
            property_name=doc.get("property") if isinstance(doc.get("property"), str) else None,
            reason=doc.get("reason") if isinstance(doc.get("reason"), str) else None)
    except PoolError as exc:
        raise ReplayError(str(exc)) from None
    driver.report.violation_in_trace = any(
        isinstance(st, Mapping) and isinstance(st.get("violation"), Mapping) for st in steps)
    loop_start = _loop_start(doc, len(steps))
    if isinstance(loop_iterations, bool) or not isinstance(loop_iterations, int) \
            or loop_iterations < 1:
        raise ReplayError(f"loop_iterations must be a positive int, got {loop_iterations!r}")
    _initial_owners(doc, driver)
    parsed = [_step(step, position, requests) for position, step in enumerate(steps, start=1)]
    if loop_start is None:
        for step in parsed:
            _run(driver, step)
        try:
            return driver.finish(aftermath=aftermath)
        except PoolError as exc:  # pragma: no cover - the aftermath only does possible operations
            raise ReplayError(f"aftermath: {exc}") from None
    for step in parsed[:loop_start]:
        _run(driver, step)
    loop = parsed[loop_start:]
    snapshots = [driver.snapshot()]
    iterations = loop_iterations if loop else 0
    for iteration in range(1, iterations + 1):
        for step in loop:
            _run(driver, step, iteration)
        snapshots.append(driver.snapshot())
    try:
        return driver.finish_lasso(
            loop_start=loop_start, steps=len(steps), iterations=iterations,
            snapshots=snapshots, loop_events=[ev for step in loop for ev in step[3]],
            obligation=_obligation(steps, requests))
    except PoolError as exc:  # pragma: no cover - the summary only reads the pool
        raise ReplayError(f"end of the loop: {exc}") from None


_Parsed = tuple[int, str, str, list[tuple[str, int, int | None]]]


def _step(step: Any, position: int, requests: int) -> _Parsed:
    """(index, label, where, events) of one trace step."""
    if not isinstance(step, Mapping):
        raise ReplayError(f"step {position}: must be an object, got {type(step).__name__}")
    index = step.get("index", position)
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ReplayError(f"step {position}: bad index {index!r}")
    label = step.get("label") or step.get("action") or ""
    where = f"step {index}" + (f" ({label})" if label else "")
    events = step.get("events")
    if not isinstance(events, list):
        raise ReplayError(f"{where}: 'events' must be a list")
    return index, str(label), where, [_event(ev, where, requests) for ev in events]


def _run(driver: PoolDriver, step: _Parsed, iteration: int | None = None) -> None:
    index, label, where, events = step
    if iteration is not None and iteration > 1:
        where += f", loop iteration {iteration}"
    try:
        record = driver.step(index, label, events)
    except PoolError as exc:
        raise ReplayError(f"{where}: {exc}") from None
    record.loop_iteration = iteration


def _loop_start(doc: Mapping[str, Any], steps: int) -> int | None:
    """The trace's ``loop_start`` (a lasso), or None (a finite trace)."""
    value = doc.get("loop_start")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= steps:
        raise ReplayError(f"trace 'loop_start' must be a step index from 0 to {steps}, "
                          f"got {value!r}")
    return value


def _obligation(steps: Sequence[Any], requests: int) -> tuple[str, int, int | None] | None:
    """The violating event of the last step (for a lasso: the one that opened the
    obligation that stays pending), or None."""
    last = steps[-1] if steps else None
    violation = last.get("violation") if isinstance(last, Mapping) else None
    event = violation.get("event") if isinstance(violation, Mapping) else None
    if not isinstance(event, Mapping):
        return None
    try:
        return _event(event, "violation", requests)
    except ReplayError:
        return None


def _initial_owners(doc: Mapping[str, Any], driver: PoolDriver) -> None:
    """Pages that the trace's initial state already hands out are allocated in a step 0."""
    initial = doc.get("initial")
    owners: Sequence[Any] = ()
    if isinstance(initial, Mapping) and isinstance(initial.get("page_owner"), list):
        owners = initial["page_owner"]
    parsed: list[int | None] = []
    for owner in owners:
        if owner is None:
            parsed.append(None)
            continue
        r = _request(owner, "initial page_owner")
        if r >= driver.requests:
            raise ReplayError(f"initial page_owner: request r{r} out of range "
                              f"(requests={driver.requests})")
        parsed.append(r)
    try:
        driver.initial_owners(parsed)
    except PoolError as exc:
        raise ReplayError(f"initial state: {exc}") from None
