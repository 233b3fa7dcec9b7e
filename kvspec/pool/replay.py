"""Replay a counterexample trace on a tensor page pool and show the leak in the data.

``replay_trace`` takes a ``kvspec-trace/1`` dict (or a ``kvspec-result/1`` dict, from
which the trace of the first VIOLATED verdict is taken), maps every event of every step
to a ``PagePool`` operation and returns a ``ReplayReport``: per-step evidence (the tag
found in every page read, late landings, reuse of pages with writes in flight, the
deviation of each decode attention from the output over the reader's own K/V) and a
summary.  See ``docs/replay.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kvspec.pool.page_pool import (
    DEVIATION_TOLERANCE,
    Attention,
    PagePool,
    PageRead,
    PoolConfig,
    PoolError,
    Tag,
)

__all__ = [
    "ForeignRead",
    "LateWrite",
    "OpRecord",
    "ReplayError",
    "ReplayReport",
    "ReuseHazard",
    "StepRecord",
    "extract_trace",
    "replay_trace",
]

REPLAY_FORMAT = "kvspec-replay/1"
_PAGE_EVENTS = frozenset({"alloc", "free", "post_write", "land_write", "drain", "read"})
_BOOKKEEPING = frozenset({"admit", "reject", "abort", "timeout", "finish"})
_KINDS = _PAGE_EVENTS | _BOOKKEEPING | {"decode"}
_REQUEST_RE = re.compile(r"r(\d+)")


class ReplayError(ValueError):
    """The trace cannot be mapped onto the pool; the message is one line naming the step."""


def _rid(r: int | None) -> str | None:
    return None if r is None else f"r{r}"


def _tag_json(tag: Tag | None) -> dict[str, Any] | None:
    return None if tag is None else {"request": f"r{tag.request}", "block": tag.block}


@dataclass(frozen=True)
class OpRecord:
    """One pool operation (or an attention computation) and its evidence."""

    op: str
    request: int
    page: int | None
    text: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "request": f"r{self.request}", "page": self.page, "text": self.text, **self.detail}


@dataclass
class StepRecord:
    index: int
    label: str
    ops: list[OpRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "label": self.label, "ops": [o.to_json() for o in self.ops]}


@dataclass(frozen=True)
class ForeignRead:
    """``reader`` read ``page`` as its block ``block`` but the page held ``tag``."""

    step: int
    reader: int
    page: int
    block: int
    tag: Tag | None
    inflight_writers: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "reader": f"r{self.reader}", "page": self.page, "block": self.block,
            "tag": _tag_json(self.tag), "inflight_writers": [f"r{w}" for w in self.inflight_writers],
        }

    def __str__(self) -> str:
        held = "never written" if self.tag is None else f"holds {self.tag}"
        return f"step {self.step}: r{self.reader} read page {self.page} as its block {self.block}; {held}"


@dataclass(frozen=True)
class LateWrite:
    """A write landed in a page its writer no longer owned."""

    step: int
    writer: int
    page: int
    block: int
    owner: int | None
    overwrote: Tag | None

    @property
    def clobbered_owner(self) -> bool:
        return self.owner is not None and self.owner != self.writer

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "writer": f"r{self.writer}", "page": self.page, "block": self.block,
            "owner": _rid(self.owner), "overwrote": _tag_json(self.overwrote),
            "clobbered_owner": self.clobbered_owner,
        }

    def __str__(self) -> str:
        who = "a free page" if self.owner is None else f"page of r{self.owner}"
        old = "nothing" if self.overwrote is None else str(self.overwrote)
        return (f"step {self.step}: r{self.writer} block {self.block} landed in page {self.page} ({who}), "
                f"overwrote {old}")


@dataclass(frozen=True)
class ReuseHazard:
    """``request`` was allocated ``page`` while writes of ``writers`` into it were in flight."""

    step: int
    request: int
    page: int
    writers: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "request": f"r{self.request}", "page": self.page,
                "writers": [f"r{w}" for w in self.writers]}

    def __str__(self) -> str:
        ws = ", ".join(f"r{w}" for w in self.writers)
        return f"step {self.step}: page {self.page} allocated to r{self.request} with a write of {ws} in flight"


@dataclass
class ReplayReport:
    """Evidence of one replay.  ``leaked``: a foreign page was read, a late write clobbered
    another request's page, or some attention output differs from the own-KV output."""

    model: str | None
    property_name: str | None
    reason: str | None
    device: str
    config: PoolConfig
    steps: list[StepRecord] = field(default_factory=list)
    foreign_reads: list[ForeignRead] = field(default_factory=list)
    late_writes: list[LateWrite] = field(default_factory=list)
    reuse_hazards: list[ReuseHazard] = field(default_factory=list)
    attentions: int = 0
    max_deviation: float = 0.0

    @property
    def leaked(self) -> bool:
        return (
            bool(self.foreign_reads)
            or any(w.clobbered_owner for w in self.late_writes)
            or self.max_deviation > DEVIATION_TOLERANCE
        )

    def to_json(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "format": REPLAY_FORMAT,
            "model": self.model,
            "property": self.property_name,
            "reason": self.reason,
            "device": self.device,
            "pool": {"pages": cfg.pages, "page_size": cfg.page_size, "heads": cfg.heads,
                     "head_dim": cfg.head_dim, "dtype": str(cfg.dtype).removeprefix("torch.")},
            "steps": [s.to_json() for s in self.steps],
            "summary": {
                "leaked": self.leaked,
                "foreign_reads": [f.to_json() for f in self.foreign_reads],
                "late_writes": [w.to_json() for w in self.late_writes],
                "reuse_hazards": [h.to_json() for h in self.reuse_hazards],
                "attentions": self.attentions,
                "max_abs_dev": self.max_deviation,
            },
        }

    def render_text(self) -> str:
        cfg = self.config
        dtype = str(cfg.dtype).removeprefix("torch.")
        title = f"replay of {self.model or 'trace'}"
        if self.property_name:
            title += f" — {self.property_name}"
        lines = [title]
        if self.reason:
            lines.append(f"  violation: {self.reason}")
        lines.append(
            f"pool: {cfg.pages} decode pages x [page_size={cfg.page_size}, heads={cfg.heads}, "
            f"head_dim={cfg.head_dim}] {dtype} on {self.device}"
        )
        for step in self.steps:
            head = f"step {step.index}"
            lines.append(f"{head}  {step.label}")
            lines.extend(f"{' ' * len(head)}  {op.text}" for op in step.ops)
        lines.append("summary:")
        lines.append(f"  foreign pages read: {len(self.foreign_reads)}")
        lines.extend(f"    {f}" for f in self.foreign_reads)
        lines.append(f"  late writes: {len(self.late_writes)}")
        lines.extend(f"    {w}" for w in self.late_writes)
        if self.reuse_hazards:
            lines.append(f"  pages reused with a write in flight: {len(self.reuse_hazards)}")
            lines.extend(f"    {h}" for h in self.reuse_hazards)
        lines.append(f"  max |attn - own| = {self.max_deviation:.4g} over {self.attentions} attention(s)")
        if self.leaked:
            lines.append("  LEAK: foreign KV data reached a request's pages or attention")
        else:
            lines.append("  no leak: every page read held the reader's own data")
        return "\n".join(lines)


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


def _event(ev: Any, where: str) -> tuple[str, int, int | None]:
    if not isinstance(ev, Mapping):
        raise ReplayError(f"{where}: event must be an object, got {ev!r}")
    kind = ev.get("kind")
    if kind not in _KINDS:
        raise ReplayError(f"{where}: unknown event kind {kind!r}")
    request = _request(ev.get("request"), f"{where} {kind}")
    page = ev.get("page")
    if kind in _PAGE_EVENTS:
        if isinstance(page, bool) or not isinstance(page, int):
            raise ReplayError(f"{where}: {kind}(r{request}) needs an integer page, got {page!r}")
        return kind, request, page
    return kind, request, None


# ----------------------------------------------------------------------- replay
class _Replayer:
    def __init__(self, pool: PagePool, report: ReplayReport) -> None:
        self.pool = pool
        self.report = report

    def attention(self, step: StepRecord, att: Attention, *, whole_table: bool) -> None:
        r = att.request
        if whole_table:
            for rd in att.reads:
                self.page_read(step, rd)
        pages = list(att.pages)
        foreign = list(att.foreign_pages)
        what = "whole page table " if whole_table else ""
        text = f"decode(r{r}) over {what}pages {pages}: "
        text += f"{len(foreign)} foreign {foreign}, " if foreign else "all own, "
        text += f"max |attn - own| = {att.max_abs_dev:.4g}"
        step.ops.append(OpRecord("attend", r, None, text, {
            "pages": pages, "foreign_pages": foreign, "max_abs_dev": att.max_abs_dev,
            "whole_table": whole_table,
        }))
        self.report.attentions += 1
        self.report.max_deviation = max(self.report.max_deviation, att.max_abs_dev)

    def page_read(self, step: StepRecord, rd: PageRead) -> None:
        step.ops.append(OpRecord("read", rd.request, rd.page, rd.describe(), {
            "block": rd.block, "tag": _tag_json(rd.tag), "foreign": rd.foreign,
            "inflight_writers": [f"r{w}" for w in rd.inflight_writers], "content_ok": rd.content_ok,
        }))
        if rd.foreign:
            self.report.foreign_reads.append(
                ForeignRead(step.index, rd.request, rd.page, rd.block, rd.tag, rd.inflight_writers))

    def apply(self, step: StepRecord, kind: str, r: int, p: int | None,
              reads: dict[int, list[PageRead]]) -> None:
        pool = self.pool
        if kind in _BOOKKEEPING:
            step.ops.append(OpRecord(kind, r, None, f"{kind}(r{r})"))
            return
        if kind == "decode":
            pending = reads.pop(r, None)
            if pending is None:
                self.attention(step, pool.decode(r, step.index), whole_table=True)
            else:
                self.attention(step, pool.attend(r, pending, step.index), whole_table=False)
            return
        assert p is not None
        op = f"{kind}(r{r}, page {p})"
        if kind == "alloc":
            writers = tuple(t.request for t in pool.inflight(p) if t.request != r) if 0 <= p < pool.config.pages else ()
            pool.alloc(r, p)
            text = op
            if writers:
                text += f": write of {', '.join(f'r{w}' for w in writers)} still in flight (REUSE BEFORE DRAIN)"
                self.report.reuse_hazards.append(ReuseHazard(step.index, r, p, writers))
            step.ops.append(OpRecord(kind, r, p, text, {"inflight_writers": [f"r{w}" for w in writers]}))
        elif kind == "free":
            pool.free(r, p)
            step.ops.append(OpRecord(kind, r, p, f"{op}: data kept"))
        elif kind == "post_write":
            t = pool.post_write(r, p)
            text = f"{op}: block {t.block} in flight"
            if t.owner != r:
                text += " (writer does not own the page)"
            step.ops.append(OpRecord(kind, r, p, text, {"block": t.block, "owner": _rid(t.owner)}))
        elif kind == "land_write":
            land = pool.land_write(r, p)
            text = f"{op}: block {land.block} landed"
            if land.late:
                held = "free" if land.owner is None else f"owned by r{land.owner}"
                old = "nothing" if land.previous is None else str(land.previous)
                text += f", LATE: page {held}, overwrote {old}"
                self.report.late_writes.append(
                    LateWrite(step.index, r, p, land.block, land.owner, land.previous))
            step.ops.append(OpRecord(kind, r, p, text, {
                "block": land.block, "owner": _rid(land.owner), "overwrote": _tag_json(land.previous),
                "late": land.late}))
        elif kind == "drain":
            t = pool.drain(r, p)
            step.ops.append(OpRecord(kind, r, p, f"{op}: write of block {t.block} cancelled unlanded"))
        elif kind == "read":
            rd = pool.read(r, p)
            reads.setdefault(r, []).append(rd)
            self.page_read(step, rd)


def replay_trace(
    trace: Mapping[str, Any],
    device: str = "auto",
    *,
    page_size: int = 4,
    heads: int = 2,
    head_dim: int = 16,
    dtype: torch.dtype = torch.float32,
    land_delay_cycles: int = 0,
) -> ReplayReport:
    """Replay ``trace`` (a kvspec-trace/1 or kvspec-result/1 dict) on a fresh ``PagePool``."""
    doc = extract_trace(trace)
    pages, requests = _size(doc, "pages"), _size(doc, "requests")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise ReplayError("trace 'steps' must be a list")
    try:
        config = PoolConfig(pages=pages, page_size=page_size, heads=heads, head_dim=head_dim,
                            dtype=dtype, device=device, requests=requests,
                            land_delay_cycles=land_delay_cycles)
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
    replayer = _Replayer(pool, report)
    _initial_owners(doc, replayer)
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
                kind, r, p = _event(ev, where)
                replayer.apply(record, kind, r, p, reads)
            for r, pending in reads.items():  # reads not followed by a decode event
                replayer.attention(record, pool.attend(r, pending, index), whole_table=False)
        except PoolError as exc:
            raise ReplayError(f"{where}: {exc}") from None
        report.steps.append(record)
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
                replayer.apply(record, "alloc", _request(owner, "initial page_owner"), page, {})
    except PoolError as exc:
        raise ReplayError(f"initial state: {exc}") from None
    if record.ops:
        replayer.report.steps.append(record)
