"""Drive a tensor page pool with lifecycle events and collect leak evidence.

:class:`PoolDriver` maps every event of ``docs/formats.md`` to a pool operation (the
table in ``docs/replay.md``), records what each operation found (``OpRecord``), and
tracks what the report needs: foreign reads, late writes (with the step at which the
writer freed the page), pages reused while another request's write was in flight, and
the deviation of each decode attention from the output over the reader's own K/V.
For a lasso it also snapshots the pool at the loop's boundaries and summarises what
the loop holds forever (:meth:`PoolDriver.finish_lasso`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvspec.pool.lasso import PoolSnapshot, lasso_summary, snapshot
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

__all__ = ["EVENT_KINDS", "PoolDriver"]

PAGE_EVENTS = frozenset({"alloc", "free", "post_write", "land_write", "drain", "read"})
BOOKKEEPING = frozenset({"admit", "reject", "abort", "timeout", "finish"})
EVENT_KINDS = PAGE_EVENTS | BOOKKEEPING | {"decode"}
_KINDS = EVENT_KINDS
_BOOKKEEPING = BOOKKEEPING


def _names(rs: Sequence[int] | tuple[int, ...]) -> str:
    return ", ".join(request_name(r) for r in rs)


def _rid(r: int | None) -> str | None:
    return None if r is None else request_name(r)


class PoolDriver:
    """Runs lifecycle events on a :class:`PagePool`, step by step, and collects the
    evidence in a :class:`ReplayReport`.  It is the engine of :func:`replay_trace` and
    can drive a pool in lockstep with a model (``tests/test_lockstep.py``).

    ``requests`` is the number of requests the events may name (``r0 .. r{requests-1}``);
    the pool gets one more id for the aftermath's fresh request.  Pool errors raise
    ``PoolError`` (replay turns them into ``ReplayError`` naming the step).
    """

    def __init__(self, config: PoolConfig, *, requests: int, model: str | None = None,
                 property_name: str | None = None, reason: str | None = None) -> None:
        if config.requests is not None and config.requests < requests + 1:
            raise PoolError(f"PoolConfig.requests must be at least {requests + 1} "
                            "(the trace's requests and a fresh one for the aftermath)")
        self.pool = PagePool(config)
        self.report = ReplayReport(model=model, property_name=property_name, reason=reason,
                                   device=str(self.pool.device), config=config)
        self.requests = requests
        self.freed_at: dict[tuple[int, int], int] = {}
        self.late_data: dict[int, LateWrite] = {}  # page -> late landing whose bytes sit there unread
        self.alloc_at: dict[tuple[int, int], int] = {}  # (request, page) -> step of its last alloc
        self.posted_at: dict[int, int] = {}  # write ticket seq -> step that posted it

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
            self.alloc_at[(r, p)] = step.index
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
            self.posted_at[t.seq] = step.index
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

    # ------------------------------------------------------------------- lassos
    def snapshot(self) -> PoolSnapshot:
        """Owners and in-flight writes now (taken at a lasso's loop boundaries)."""
        return snapshot(self.pool)

    def finish_lasso(self, *, loop_start: int, steps: int, iterations: int,
                     snapshots: Sequence[PoolSnapshot],
                     loop_events: Iterable[tuple[str, int, int | None]],
                     obligation: tuple[str, int, int | None] | None) -> ReplayReport:
        """End the replay of a lasso: no aftermath (the run never ends); the report's
        ``lasso`` says which pages the loop holds forever and which writes never
        quiesce (:mod:`kvspec.pool.lasso`)."""
        self.pool.synchronize()
        self.report.lasso = lasso_summary(
            self.pool, loop_start=loop_start, steps=steps, iterations=iterations,
            snapshots=snapshots, loop_events=loop_events, obligation=obligation,
            alloc_at=self.alloc_at, posted_at=self.posted_at)
        return self.report

    # ---------------------------------------------------------------- aftermath
    def step(self, index: int, label: str,
             events: Iterable[tuple[str, int, int | None]]) -> StepRecord:
        """Run the events ``(kind, request, page)`` of one step, in program order: the
        reads of a request are followed by one attention, at its ``decode`` event or at
        the end of the step.  The record is appended to ``report.steps`` and returned."""
        record = StepRecord(index, label)
        reads: dict[int, list[PageRead]] = {}
        for kind, r, p in events:
            if kind not in _KINDS:
                raise PoolError(f"unknown event kind {kind!r}")
            if not 0 <= r < self.requests:
                raise PoolError(f"{kind}: request r{r} out of range (requests={self.requests})")
            self.apply(record, kind, r, p, reads)
        for r, pending in reads.items():  # reads not followed by a decode event
            self.attention(record, self.pool.attend(r, pending, index), whole_table=False)
        self.report.steps.append(record)
        return record

    def initial_owners(self, owners: Sequence[int | None]) -> None:
        """Allocate the pages an initial state already hands out, in a step 0."""
        record = StepRecord(0, "initial state")
        for page, owner in enumerate(owners):
            if owner is not None:
                if not 0 <= owner < self.requests:
                    raise PoolError(f"request r{owner} out of range (requests={self.requests})")
                self.apply(record, "alloc", owner, page, {})
        if record.ops:
            self.report.steps.append(record)

    def finish(self, *, aftermath: bool = True) -> ReplayReport:
        """End the run: optionally the aftermath, then wait for the device."""
        if aftermath:
            last = max((s.index for s in self.report.steps), default=0)
            self.aftermath(last + 1)
        self.pool.synchronize()
        return self.report

    def aftermath(self, index: int) -> None:
        """After the trace: writes still in flight into pages their writer no longer owns
        land, and each page holding unread late-written bytes is read by its next holder
        (its owner, or a fresh request that is allocated the free page).  Recorded in
        ``report.aftermath``, apart from the trace."""
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
