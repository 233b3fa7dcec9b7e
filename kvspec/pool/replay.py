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
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from kvspec.pool.page_pool import Attention, PagePool, PageRead, PoolConfig, PoolError, request_name
from kvspec.pool.report import (
    ForeignRead,
    LateWrite,
    OpRecord,
    ReplayReport,
    ReuseHazard,
    StepRecord,
    tag_json,
)

__all__ = ["ReplayError", "extract_trace", "replay_trace"]

_PAGE_EVENTS = frozenset({"alloc", "free", "post_write", "land_write", "drain", "read"})
_BOOKKEEPING = frozenset({"admit", "reject", "abort", "timeout", "finish"})
_KINDS = _PAGE_EVENTS | _BOOKKEEPING | {"decode"}
_REQUEST_RE = re.compile(r"r(\d+)")


class ReplayError(ValueError):
    """The trace cannot be mapped onto the pool; the message is one line naming the step."""


def _names(rs: Sequence[int] | tuple[int, ...]) -> str:
    return ", ".join(request_name(r) for r in rs)


# ---------------------------------------------------------------------- parsing
def extract_trace(doc: Any) -> Mapping[str, Any]:
    """The trace in ``doc``: itself if a trace, else the first VIOLATED verdict's trace."""
    if not isinstance(doc, Mapping):
        raise ReplayError(f"expected a JSON object (kvspec-trace/1 or kvspec-result/1), got {type(doc).__name__}")
    fmt = doc.get("format")
    if fmt == "kvspec-trace/1":
        return doc
    if fmt == "kvspec-result/1":
        verdicts = doc.get("verdicts")
        if not isinstance(verdicts, list):
            raise ReplayError("kvspec-result/1: 'verdicts' must be a list")
        for verdict in verdicts:
            if isinstance(verdict, Mapping) and verdict.get("status") == "VIOLATED":
                trace = verdict.get("trace")
                if not isinstance(trace, Mapping) or trace.get("format") != "kvspec-trace/1":
                    name = verdict.get("property")
                    raise ReplayError(f"verdict {name!r} is VIOLATED but carries no kvspec-trace/1 trace")
                return trace
        raise ReplayError("kvspec-result/1 has no VIOLATED verdict: nothing to replay")
    raise ReplayError(f"unsupported format {fmt!r} (expected 'kvspec-trace/1' or 'kvspec-result/1')")


def _size(trace: Mapping[str, Any], name: str) -> int:
    for section in ("sizes", "schema"):
        block = trace.get(section)
        if isinstance(block, Mapping) and name in block:
            value = block[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ReplayError(f"trace {section}.{name} must be a positive int, got {value!r}")
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
    if kind not in _KINDS:
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


# ----------------------------------------------------------------------- replay
class _Replayer:
    def __init__(self, pool: PagePool, report: ReplayReport, requests: int) -> None:
        self.pool = pool
        self.report = report
        self.requests = requests
        self.freed_at: dict[tuple[int, int], int] = {}
        self.late_data: dict[int, LateWrite] = {}  # page -> late landing whose bytes sit there unread

    def attention(self, step: StepRecord, att: Attention, *, whole_table: bool) -> None:
        r = att.request
        if whole_table:
            for rd in att.reads:
                self.page_read(step, rd)
        pages = list(att.pages)
        foreign = list(att.foreign_pages)
        what = "whole page table " if whole_table else ""
        text = f"decode({request_name(r)}) over {what}pages {pages}: "
        text += f"{len(foreign)} foreign {foreign}, " if foreign else "all own, "
        text += f"max |attn - own| = {att.max_abs_dev:.4g}"
        step.ops.append(OpRecord("attend", r, None, text, {
            "pages": pages, "foreign_pages": foreign, "max_abs_dev": att.max_abs_dev,
            "whole_table": whole_table,
        }))
        rep = self.report
        if step.aftermath:
            rep.aftermath_attentions += 1
            rep.aftermath_max_deviation = max(rep.aftermath_max_deviation, att.max_abs_dev)
        else:
            rep.attentions += 1
            rep.max_deviation = max(rep.max_deviation, att.max_abs_dev)

    def page_read(self, step: StepRecord, rd: PageRead) -> None:
        step.ops.append(OpRecord("read", rd.request, rd.page, rd.describe(), {
            "block": rd.block, "tag": tag_json(rd.tag), "foreign": rd.foreign,
            "inflight_writers": [request_name(w) for w in rd.inflight_writers],
            "content_ok": rd.content_ok,
        }))
        self.late_data.pop(rd.page, None)  # the late bytes reached a reader: evidence shown
        if rd.foreign:
            self.report.foreign_reads.append(ForeignRead(
                step.index, rd.request, rd.page, rd.block, rd.tag, rd.inflight_writers,
                aftermath=step.aftermath))

    def apply(self, step: StepRecord, kind: str, r: int, p: int | None,
              reads: dict[int, list[PageRead]]) -> None:
        pool = self.pool
        if kind in _BOOKKEEPING:
            step.ops.append(OpRecord(kind, r, None, f"{kind}({request_name(r)})"))
            return
        if kind == "decode":
            pending = reads.pop(r, None)
            if pending is None:
                self.attention(step, pool.decode(r, step.index), whole_table=True)
            else:
                self.attention(step, pool.attend(r, pending, step.index), whole_table=False)
            return
        assert p is not None
        op = f"{kind}({request_name(r)}, page {p})"
        if kind == "alloc":
            writers: tuple[int, ...] = ()
            if 0 <= p < pool.config.pages:
                writers = tuple(t.request for t in pool.inflight(p) if t.request != r)
            pool.alloc(r, p)
            late = self.late_data.get(p)
            if late is not None and late.writer == r:
                del self.late_data[p]
            text = op
            if writers:
                text += f": write of {_names(writers)} still in flight (REUSE BEFORE DRAIN)"
                self.report.reuse_hazards.append(ReuseHazard(step.index, r, p, writers))
            step.ops.append(OpRecord(kind, r, p, text,
                                     {"inflight_writers": [request_name(w) for w in writers]}))
        elif kind == "free":
            pool.free(r, p)
            self.freed_at[(r, p)] = step.index
            step.ops.append(OpRecord(kind, r, p, f"{op}: data kept"))
        elif kind == "post_write":
            t = pool.post_write(r, p)
            text = f"{op}: block {t.block} in flight"
            if t.owner != r:
                text += " (writer does not own the page)"
            step.ops.append(OpRecord(kind, r, p, text, {"block": t.block, "owner": _rid(t.owner)}))
        elif kind == "land_write":
            self._land(step, r, p, op)
        elif kind == "drain":
            t = pool.drain(r, p)
            step.ops.append(OpRecord(kind, r, p, f"{op}: write of block {t.block} cancelled unlanded"))
        elif kind == "read":
            rd = pool.read(r, p)
            reads.setdefault(r, []).append(rd)
            self.page_read(step, rd)

    def _land(self, step: StepRecord, r: int, p: int, op: str) -> None:
        land = self.pool.land_write(r, p)
        text = f"{op}: block {land.block} landed"
        old = "nothing" if land.previous is None else str(land.previous)
        if land.late:
            freed = self.freed_at.get((r, p))
            if land.owner is not None:
                text += f", LATE: page owned by {request_name(land.owner)}, overwrote {old}"
            else:
                since = f" ({request_name(r)} freed it at step {freed})" if freed is not None else ""
                text += (f", LATE: page free{since}, overwrote {old}; page {p} now holds "
                         f"{request_name(r)}'s KV")
            late = LateWrite(step.index, r, p, land.block, land.owner, land.previous, freed,
                             aftermath=step.aftermath)
            self.report.late_writes.append(late)
            self.late_data[p] = late
        else:
            self.late_data.pop(p, None)
        step.ops.append(OpRecord("land_write", r, p, text, {
            "block": land.block, "owner": _rid(land.owner), "overwrote": tag_json(land.previous),
            "late": land.late}))

    # ---------------------------------------------------------------- aftermath
    def aftermath(self, index: int) -> None:
        """Run what the state left by the trace permits next (see the module docstring)."""
        pool = self.pool
        stale = [(p, t.request) for p in range(pool.config.pages) for t in pool.inflight(p)
                 if t.request != pool.owner(p)]
        if stale:
            what = ", ".join(f"{request_name(w)} into page {p}" for p, w in stale)
            record = StepRecord(index, f"the writes still in flight land late: {what}",
                                aftermath=True)
            for p, w in stale:
                self.apply(record, "land_write", w, p, {})
            self.report.aftermath.append(record)
            index += 1
        readers: dict[int, list[int]] = {}
        fresh = self.requests  # the first id the trace does not use
        for p in sorted(self.late_data):
            owner = pool.owner(p)
            readers.setdefault(fresh if owner is None else owner, []).append(p)
        for reader, pages in readers.items():
            name = request_name(reader)
            what = f"page {pages[0]}" if len(pages) == 1 else f"pages {pages}"
            if reader == fresh:
                label = (f"{what} to {name}, a fresh request (not in the trace), which decodes "
                         "before a write of its own lands")
            else:
                label = f"{name}, the owner of {what}, decodes"
            record = StepRecord(index, label, aftermath=True)
            if reader == fresh:
                for p in pages:
                    self.apply(record, "alloc", reader, p, {})
            reads = [pool.read(reader, p) for p in pages]
            for rd in reads:
                self.page_read(record, rd)
            self.attention(record, pool.attend(reader, reads, index), whole_table=False)
            self.report.aftermath.append(record)
            index += 1


def _rid(r: int | None) -> str | None:
    return None if r is None else request_name(r)


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
) -> ReplayReport:
    """Replay ``trace`` (a kvspec-trace/1 or kvspec-result/1 dict) on a fresh ``PagePool``.

    ``earlier_tenant``: seed every page with the KV of the fictitious earlier tenant ``T``
    (else never-written pages hold zeros).  ``aftermath``: after the trace, land the writes
    still in flight into pages their writer no longer owns and let the next holder of
    every page with late-written bytes read it (reported separately from the trace).
    """
    doc = extract_trace(trace)
    pages, requests = _size(doc, "pages"), _size(doc, "requests")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise ReplayError("trace 'steps' must be a list")
    try:
        config = PoolConfig(pages=pages, page_size=page_size, heads=heads, head_dim=head_dim,
                            dtype=dtype, device=device, requests=requests + 1,
                            land_delay_cycles=land_delay_cycles, earlier_tenant=earlier_tenant)
        pool = PagePool(config)
    except PoolError as exc:
        raise ReplayError(str(exc)) from None
    model = doc.get("model")
    report = ReplayReport(
        model=str(model.get("name")) if isinstance(model, Mapping) and model.get("name") else None,
        property_name=doc.get("property") if isinstance(doc.get("property"), str) else None,
        reason=doc.get("reason") if isinstance(doc.get("reason"), str) else None,
        device=str(pool.device),
        config=config,
    )
    replayer = _Replayer(pool, report, requests)
    _initial_owners(doc, replayer)
    last = 0
    for position, step in enumerate(steps, start=1):
        if not isinstance(step, Mapping):
            raise ReplayError(f"step {position}: must be an object, got {type(step).__name__}")
        index = step.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ReplayError(f"step {position}: bad index {index!r}")
        label = step.get("label") or step.get("action") or ""
        record = StepRecord(index, str(label))
        where = f"step {index}" + (f" ({label})" if label else "")
        events = step.get("events")
        if not isinstance(events, list):
            raise ReplayError(f"{where}: 'events' must be a list")
        reads: dict[int, list[PageRead]] = {}
        try:
            for ev in events:
                kind, r, p = _event(ev, where, requests)
                replayer.apply(record, kind, r, p, reads)
            for r, pending in reads.items():  # reads not followed by a decode event
                replayer.attention(record, pool.attend(r, pending, index), whole_table=False)
        except PoolError as exc:
            raise ReplayError(f"{where}: {exc}") from None
        report.steps.append(record)
        last = max(last, index)
    if aftermath:
        try:
            replayer.aftermath(last + 1)
        except PoolError as exc:  # pragma: no cover - the aftermath only does possible operations
            raise ReplayError(f"aftermath: {exc}") from None
    pool.synchronize()
    return report


def _initial_owners(doc: Mapping[str, Any], replayer: _Replayer) -> None:
    """Pages that the trace's initial state already hands out are allocated in a step 0."""
    initial = doc.get("initial")
    owners: Sequence[Any] = ()
    if isinstance(initial, Mapping) and isinstance(initial.get("page_owner"), list):
        owners = initial["page_owner"]
    record = StepRecord(0, "initial state")
    try:
        for page, owner in enumerate(owners):
            if owner is not None:
                r = _request(owner, "initial page_owner")
                if r >= replayer.requests:
                    raise ReplayError(f"initial page_owner: request r{r} out of range "
                                      f"(requests={replayer.requests})")
                replayer.apply(record, "alloc", r, page, {})
    except PoolError as exc:
        raise ReplayError(f"initial state: {exc}") from None
    if record.ops:
        replayer.report.steps.append(record)
