"""The evidence of a replay (``ReplayReport``) and its text and JSON forms.

A report has the trace's steps, each with the pool operations it mapped to and what
they found, then an optional **aftermath**: pool operations that are *not* in the
trace, run after it to show what the state it leaves behind means (a late write's
bytes being read by the page's next owner).  Every record says which part it belongs
to.  A lasso (a liveness counterexample) has no aftermath: its steps are the prefix
and the loop, replayed once or more (``StepRecord.loop_iteration``), and ``lasso``
says which pages the loop holds forever.  See ``docs/replay.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvspec.pool.lasso import LassoSummary
from kvspec.pool.page_pool import DEVIATION_TOLERANCE, EARLIER_TENANT, PoolConfig, Tag, request_name

__all__ = [
    "REPLAY_FORMAT",
    "ForeignRead",
    "LateWrite",
    "OpRecord",
    "ReplayReport",
    "ReuseHazard",
    "StepRecord",
    "tag_json",
]

REPLAY_FORMAT = "kvspec-replay/1"


def _rid(r: int | None) -> str | None:
    return None if r is None else request_name(r)


def tag_json(tag: Tag | None) -> dict[str, Any] | None:
    """``{"request": "r0", "block": 1}`` (``"T"`` for the earlier tenant), or None."""
    return None if tag is None else {"request": request_name(tag.request), "block": tag.block}


@dataclass(frozen=True)
class OpRecord:
    """One pool operation (or an attention computation) and its evidence."""

    op: str
    request: int
    page: int | None
    text: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "request": request_name(self.request), "page": self.page,
                "text": self.text, **self.detail}


@dataclass
class StepRecord:
    """The operations of one trace step (``aftermath=False``) or one aftermath step."""

    index: int
    label: str
    ops: list[OpRecord] = field(default_factory=list)
    aftermath: bool = False
    #: a lasso's loop step: which replay of the loop (1, 2, ...); None: not in the loop
    loop_iteration: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "label": self.label,
                               "ops": [o.to_json() for o in self.ops]}
        if self.aftermath:
            out["aftermath"] = True
        if self.loop_iteration is not None:
            out["loop_iteration"] = self.loop_iteration
        return out


@dataclass(frozen=True)
class ForeignRead:
    """``reader`` read ``page`` as its block ``block`` but the page held ``tag``.

    ``outside_table``: the page was not in the reader's page table at all; ``owner`` is
    then the page's owner at the time (None: free)."""

    step: int
    reader: int
    page: int
    block: int
    tag: Tag | None
    inflight_writers: tuple[int, ...]
    aftermath: bool = False
    outside_table: bool = False
    owner: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "reader": request_name(self.reader), "page": self.page,
            "block": self.block, "tag": tag_json(self.tag),
            "inflight_writers": [request_name(w) for w in self.inflight_writers],
            "aftermath": self.aftermath, "outside_table": self.outside_table,
            "owner": _rid(self.owner),
        }

    def __str__(self) -> str:
        held = "never written" if self.tag is None else f"holds {self.tag}"
        where = "aftermath" if self.aftermath else f"step {self.step}"
        page = f"page {self.page}"
        if self.outside_table:
            owner = "free" if self.owner is None else f"owned by {request_name(self.owner)}"
            page += f" (not in its page table: {owner})"
        return (f"{where}: {request_name(self.reader)} read {page} as its block "
                f"{self.block}; {held}")


@dataclass(frozen=True)
class LateWrite:
    """A write landed in a page its writer no longer owned.

    ``owner`` is the page's owner at landing time (None: the page was free);
    ``freed_step`` the step at which the writer had freed the page, when known."""

    step: int
    writer: int
    page: int
    block: int
    owner: int | None
    overwrote: Tag | None
    freed_step: int | None = None
    aftermath: bool = False

    @property
    def clobbered_owner(self) -> bool:
        """The landing overwrote a page that another request owned."""
        return self.owner is not None and self.owner != self.writer

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step, "writer": request_name(self.writer), "page": self.page,
            "block": self.block, "owner": _rid(self.owner), "overwrote": tag_json(self.overwrote),
            "clobbered_owner": self.clobbered_owner, "freed_step": self.freed_step,
            "aftermath": self.aftermath,
        }

    def __str__(self) -> str:
        if self.owner is not None:
            who = f"page of {request_name(self.owner)}"
        elif self.freed_step is not None:
            who = f"free since {request_name(self.writer)} freed it at step {self.freed_step}"
        else:
            who = "a free page"
        old = "nothing" if self.overwrote is None else str(self.overwrote)
        where = "aftermath" if self.aftermath else f"step {self.step}"
        return (f"{where}: {request_name(self.writer)} block {self.block} landed in page "
                f"{self.page} ({who}), overwrote {old}")


@dataclass(frozen=True)
class ReuseHazard:
    """``request`` was allocated ``page`` while writes of ``writers`` into it were in flight."""

    step: int
    request: int
    page: int
    writers: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "request": request_name(self.request), "page": self.page,
                "writers": [request_name(w) for w in self.writers]}

    def __str__(self) -> str:
        ws = ", ".join(request_name(w) for w in self.writers)
        return (f"step {self.step}: page {self.page} allocated to {request_name(self.request)} "
                f"with a write of {ws} in flight")


@dataclass
class ReplayReport:
    """Evidence of one replay.

    ``leaked``: a foreign page was read, a write landed in a page its writer no longer
    owned, or an attention output differs from the own-KV output by more than
    ``DEVIATION_TOLERANCE`` — in the trace or in its aftermath (each record says which).
    """

    model: str | None
    property_name: str | None
    reason: str | None
    device: str
    config: PoolConfig
    steps: list[StepRecord] = field(default_factory=list)
    aftermath: list[StepRecord] = field(default_factory=list)
    foreign_reads: list[ForeignRead] = field(default_factory=list)
    late_writes: list[LateWrite] = field(default_factory=list)
    reuse_hazards: list[ReuseHazard] = field(default_factory=list)
    attentions: int = 0
    max_deviation: float = 0.0
    aftermath_attentions: int = 0
    aftermath_max_deviation: float = 0.0
    violation_in_trace: bool = False  # some step of the trace carries a violation
    #: a lasso's replay: what the loop holds forever (None: a finite trace)
    lasso: LassoSummary | None = None

    @property
    def trace_foreign_reads(self) -> list[ForeignRead]:
        return [f for f in self.foreign_reads if not f.aftermath]

    @property
    def aftermath_foreign_reads(self) -> list[ForeignRead]:
        return [f for f in self.foreign_reads if f.aftermath]

    @property
    def leaked_in_trace(self) -> bool:
        """Evidence from the trace's own steps alone."""
        return (bool(self.trace_foreign_reads)
                or any(not w.aftermath for w in self.late_writes)
                or self.max_deviation > DEVIATION_TOLERANCE)

    @property
    def leaked(self) -> bool:
        """Evidence in the trace or its aftermath or, for a lasso, pages held forever or
        a write that never quiesces."""
        return (self.leaked_in_trace or bool(self.foreign_reads) or bool(self.late_writes)
                or self.aftermath_max_deviation > DEVIATION_TOLERANCE
                or (self.lasso is not None and self.lasso.leaked))

    @property
    def overall_max_deviation(self) -> float:
        return max(self.max_deviation, self.aftermath_max_deviation)

    def to_json(self) -> dict[str, Any]:
        cfg = self.config
        doc = {
            "format": REPLAY_FORMAT,
            "model": self.model,
            "property": self.property_name,
            "reason": self.reason,
            "device": self.device,
            "pool": {"pages": cfg.pages, "page_size": cfg.page_size, "heads": cfg.heads,
                     "head_dim": cfg.head_dim, "dtype": str(cfg.dtype).removeprefix("torch."),
                     "earlier_tenant": cfg.earlier_tenant},
            "steps": [s.to_json() for s in self.steps],
            "aftermath": [s.to_json() for s in self.aftermath],
            "summary": {
                "leaked": self.leaked,
                "leaked_in_trace": self.leaked_in_trace,
                "foreign_reads": [f.to_json() for f in self.foreign_reads],
                "late_writes": [w.to_json() for w in self.late_writes],
                "reuse_hazards": [h.to_json() for h in self.reuse_hazards],
                "attentions": self.attentions,
                "max_abs_dev": self.max_deviation,
                "aftermath_attentions": self.aftermath_attentions,
                "aftermath_max_abs_dev": self.aftermath_max_deviation,
            },
        }
        if self.lasso is not None:
            doc["lasso"] = self.lasso.to_json()
        return doc

    # ------------------------------------------------------------------ text
    def render_text(self) -> str:
        cfg = self.config
        dtype = str(cfg.dtype).removeprefix("torch.")
        title = f"replay of {self.model or 'trace'}"
        if self.property_name:
            title += f" — {self.property_name}"
        lines = [title]
        if self.reason:
            lines.append(f"  violation: {self.reason}")
        if self.lasso is not None:
            lasso = self.lasso
            times = "" if lasso.stops else \
                f"; replayed: the prefix, then the loop {_times(lasso.iterations)}"
            lines.append(f"  lasso: {lasso.shape()}{times}")
        lines.append(
            f"pool: {cfg.pages} decode pages x [page_size={cfg.page_size}, heads={cfg.heads}, "
            f"head_dim={cfg.head_dim}] {dtype} on {self.device}"
        )
        if cfg.earlier_tenant:
            lines.append("  before step 1 every page p holds tenant T block p: T is a fictitious "
                         "earlier tenant that")
            lines.append("  finished and freed its pages; the bytes stayed, as real allocators "
                         "leave them")
        iteration: int | None = None
        for step in self.steps:
            if step.loop_iteration is not None and step.loop_iteration != iteration:
                iteration = step.loop_iteration
                lines.append(f"loop, iteration {iteration} (repeats forever):")
            lines.extend(_step_lines(f"step {step.index}", step))
        if self.lasso is not None:
            lines.extend(self.lasso.text_lines())
        if self.aftermath:
            lines.append("aftermath (NOT part of the trace: what the pool state it leaves permits "
                         "next):")
            for i, step in enumerate(self.aftermath, start=1):
                lines.extend(_step_lines(f"after {i}", step))
        lines.extend(self._summary_lines())
        return "\n".join(lines)

    def _summary_lines(self) -> list[str]:
        lines = ["summary:"]
        in_trace, after = self.trace_foreign_reads, self.aftermath_foreign_reads
        count = f"{len(in_trace)}"
        if self.aftermath:
            count += f" in the trace, {len(after)} in the aftermath"
        lines.append(f"  foreign pages read: {count}")
        lines.extend(f"    {f}" for f in self.foreign_reads)
        lines.append(f"  late writes: {len(self.late_writes)}")
        lines.extend(f"    {w}" for w in self.late_writes)
        if self.reuse_hazards:
            lines.append(f"  pages reused with a write in flight: {len(self.reuse_hazards)}")
            lines.extend(f"    {h}" for h in self.reuse_hazards)
        dev = f"  max |attn - own| = {self.max_deviation:.4g} over {self.attentions} attention(s)"
        if self.aftermath_attentions:
            dev += (f" in the trace; {self.aftermath_max_deviation:.4g} over "
                    f"{self.aftermath_attentions} in the aftermath")
        lines.append(dev)
        trace_late = [w for w in self.late_writes if not w.aftermath]
        if self.lasso is not None and (self.lasso.leaked or not self.leaked):
            lines.append(self.lasso.verdict_line(self.property_name))
            if self.leaked_in_trace:
                lines.append("  LEAK: the run also moves KV across requests (foreign reads or "
                             "late writes, above)")
        elif self.trace_foreign_reads or self.max_deviation > DEVIATION_TOLERANCE:
            lines.append("  LEAK: a request read foreign KV data in the trace")
        elif trace_late:
            line = "  LEAK: a write landed in a page its writer no longer owned"
            if self.aftermath_foreign_reads:
                line += "; the aftermath shows the page's next reader getting those bytes"
            lines.append(line)
        elif self.leaked:
            lines.append("  LEAK: the trace leaves a write in flight into a page its writer no "
                         "longer owns; the aftermath shows it landing and being read")
        else:
            lines.append("  no leak: every page read held the reader's own data")
            if self.property_name and self.violation_in_trace:
                lines.append(f"  ({self.property_name} is violated by the lifecycle alone: "
                             "the trace moves no foreign bytes)")
        return lines


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def _step_lines(head: str, step: StepRecord) -> list[str]:
    pad = " " * len(head)
    return [f"{head}  {step.label}"] + [f"{pad}  {op.text}" for op in step.ops]


def is_earlier_tenant(tag: Tag | None) -> bool:
    return tag is not None and tag.request == EARLIER_TENANT
