"""What a lasso (a liveness counterexample) holds forever, seen on the tensor page pool.

A lasso (``docs/liveness.md``) is a prefix and a loop that repeats forever (or a run
that stops, nothing being enabled). Replay runs the prefix, then the loop once or
more, and takes a :class:`PoolSnapshot` at the loop's start and at the end of every
iteration. :func:`lasso_summary` compares them:

* a page **held forever** is owned by the same request in every snapshot and never
  freed by that request on the loop: the infinite run never gives it back. Its bytes
  stay in the pool, so the summary says whose KV they are (the page's tag) and how
  many bytes of K and V that is;
* a write that **never quiesces** is in flight (the same posted write) in every
  snapshot and never lands nor is drained on the loop.

Either is a leak of the infinite run (``LassoSummary.leaked``): ``kvspec replay``
exits 1 for it. A loop that holds neither (e.g. a request that never finishes but
owns no page) is reported, and is not a leak of the pool.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kvspec.pool.kv_data import request_kv
from kvspec.pool.page_pool import PagePool, Tag, request_name

__all__ = ["HeldPage", "LassoSummary", "PendingWrite", "PoolSnapshot", "lasso_summary",
           "snapshot"]

#: page -> (owner, the writes in flight into it as (seq, writer, block), oldest first)
PoolSnapshot = dict[int, tuple[int | None, tuple[tuple[int, int, int], ...]]]


def snapshot(pool: PagePool) -> PoolSnapshot:
    """Who owns each page and which writes are in flight into it."""
    return {p: (pool.owner(p), tuple((t.seq, t.request, t.block) for t in pool.inflight(p)))
            for p in range(pool.config.pages)}


def page_bytes(pool: PagePool) -> int:
    """Bytes of K and V one page holds."""
    cfg = pool.config
    elem = torch.empty((), dtype=cfg.dtype).element_size()
    return 2 * cfg.page_size * cfg.heads * cfg.head_dim * elem


def _tag_text(tag: Tag | None, owner: int) -> str:
    if tag is None:
        return "nothing (never written)"
    if tag.earlier_tenant:
        return f"stale KV of tenant T (block {tag.block})"
    whose = "its own" if tag.request == owner else f"{request_name(tag.request)}'s"
    return f"{whose} KV ({request_name(tag.request)} block {tag.block})"


@dataclass(frozen=True)
class HeldPage:
    """``page`` stays allocated to ``owner`` forever. ``tag``: whose KV it holds at
    the end of the loop; ``nbytes``: bytes of K+V those are; ``content_ok``: the bytes
    equal what the tag says."""

    page: int
    owner: int
    since: int | None           # the step of the alloc (0: the initial state)
    tag: Tag | None
    nbytes: int
    content_ok: bool
    obligation: bool = False     # the violated obligation is this page's

    def short(self) -> str:
        """``page 0 (r0's KV, block 0, 1,024 bytes)``"""
        if self.tag is None:
            held = "never written"
        else:
            who = "tenant T" if self.tag.earlier_tenant else request_name(self.tag.request)
            held = f"{who}'s KV, block {self.tag.block}"
        return f"page {self.page} ({held}, {self.nbytes:,} bytes)"

    def __str__(self) -> str:
        since = "" if self.since is None else \
            " in the initial state" if self.since == 0 else f" at step {self.since}"
        text = (f"page {self.page}: allocated to {request_name(self.owner)}{since}, never "
                f"freed; holds {_tag_text(self.tag, self.owner)}, {self.nbytes:,} bytes of K+V")
        if not self.content_ok:
            text += ", BYTES DO NOT MATCH TAG"
        if self.obligation:
            text += "  [the pending obligation]"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"page": self.page, "owner": request_name(self.owner), "since_step": self.since,
                "tag": None if self.tag is None else
                {"request": request_name(self.tag.request), "block": self.tag.block},
                "bytes": self.nbytes, "content_ok": self.content_ok,
                "obligation": self.obligation}


@dataclass(frozen=True)
class PendingWrite:
    """A write of ``writer``'s block ``block`` into ``page`` that stays in flight forever."""

    writer: int
    page: int
    block: int
    posted: int | None          # the step that posted it
    owner: int | None           # the page's owner at the end of the loop
    obligation: bool = False

    def __str__(self) -> str:
        posted = "" if self.posted is None else f", posted at step {self.posted}"
        owner = "free" if self.owner is None else f"owned by {request_name(self.owner)}"
        text = (f"{request_name(self.writer)} block {self.block} into page {self.page}"
                f"{posted}: in flight forever (page {owner})")
        return text + ("  [the pending obligation]" if self.obligation else "")

    def to_json(self) -> dict[str, Any]:
        return {"writer": request_name(self.writer), "page": self.page, "block": self.block,
                "posted_step": self.posted, "owner": None if self.owner is None
                else request_name(self.owner), "obligation": self.obligation}


@dataclass
class LassoSummary:
    """The replay of a lasso: ``loop_start`` and ``steps`` as in the trace (the loop is
    steps ``loop_start + 1 .. steps``; none when equal: the run stops), how many times
    the loop was replayed, and what it holds forever."""

    loop_start: int
    steps: int
    iterations: int
    held: list[HeldPage]
    pending_writes: list[PendingWrite]
    #: the pool's owners and in-flight writes were the same at the loop's start and at
    #: the end of every iteration (always so for a lasso kvspec found)
    pool_returns: bool = True

    @property
    def stops(self) -> bool:
        return self.loop_start == self.steps

    @property
    def leaked(self) -> bool:
        """The infinite run holds a page forever, or a write never quiesces."""
        return bool(self.held) or bool(self.pending_writes)

    def shape(self) -> str:
        """``step 1 is the prefix, step 2 repeats forever (back to the state after step 1)``"""
        k, n = self.loop_start, self.steps
        prefix = "no prefix" if k == 0 else \
            "step 1 is the prefix" if k == 1 else f"steps 1-{k} are the prefix"
        if self.stops:
            return f"{prefix}; then nothing is enabled and the run stays there forever"
        loop = f"step {n} repeats" if k + 1 == n else f"steps {k + 1}-{n} repeat"
        back = "the initial state" if k == 0 else f"the state after step {k}"
        return f"{prefix}, {loop} forever (back to {back})"

    def text_lines(self) -> list[str]:
        """The end-of-loop section of the text report."""
        if self.stops:
            lines = [f"end of the run: after step {self.steps} nothing is enabled, the run "
                     "stays here forever"]
        else:
            back = "the initial state" if self.loop_start == 0 else \
                f"the state after step {self.loop_start}"
            times = {1: "once", 2: "twice"}.get(self.iterations, f"{self.iterations} times")
            lines = [f"end of the loop (replayed {times}): the run is back in {back} and "
                     "loops forever"]
        if self.held:
            lines.append("  pages held forever: " + ", ".join(h.short() for h in self.held))
            lines.extend(f"    {h}" for h in self.held)
        else:
            lines.append("  pages held forever: none")
        if self.pending_writes:
            lines.append(f"  writes that never quiesce: {len(self.pending_writes)}")
            lines.extend(f"    {w}" for w in self.pending_writes)
        else:
            lines.append("  writes that never quiesce: none")
        if not self.pool_returns:
            lines.append("  note: the pool's owners or in-flight writes differ between "
                         "iterations of the loop")
        return lines

    def verdict_line(self, prop: str | None) -> str:
        """The last line of the summary for a lasso."""
        if not self.leaked:
            what = f" ({prop} is violated by the lifecycle alone)" if prop else ""
            return f"  no leak of the pool: the loop holds no page and no write in flight{what}"
        parts = []
        if self.held:
            pl = "page" if len(self.held) == 1 else "pages"
            parts.append(f"{len(self.held)} {pl} held forever "
                         f"({', '.join(str(h.page) for h in self.held)})")
        if self.pending_writes:
            pl = "write" if len(self.pending_writes) == 1 else "writes"
            parts.append(f"{len(self.pending_writes)} {pl} never quiescing")
        where = "the run stops" if self.stops else "the loop repeats forever"
        return f"  LEAK: {' and '.join(parts)}: {where} without giving them back"

    def to_json(self) -> dict[str, Any]:
        return {"loop_start": self.loop_start, "steps": self.steps,
                "stops": self.stops, "iterations": self.iterations,
                "held_forever": [h.to_json() for h in self.held],
                "writes_never_quiescing": [w.to_json() for w in self.pending_writes],
                "pool_returns": self.pool_returns, "leaked": self.leaked}


def _content_ok(pool: PagePool, page: int, tag: Tag | None) -> bool:
    cfg = pool.config
    k, v = pool.k[page], pool.v[page]
    if tag is None:
        return not bool(k.any()) and not bool(v.any())
    positions = range(tag.block * cfg.page_size, (tag.block + 1) * cfg.page_size)
    ek, ev = request_kv(tag.request, positions, cfg.heads, cfg.head_dim, cfg.dtype, pool.device)
    return bool(torch.equal(k, ek)) and bool(torch.equal(v, ev))


def lasso_summary(pool: PagePool, *, loop_start: int, steps: int, iterations: int,
                  snapshots: Sequence[PoolSnapshot],
                  loop_events: Iterable[tuple[str, int, int | None]],
                  obligation: tuple[str, int, int | None] | None,
                  alloc_at: dict[tuple[int, int], int],
                  posted_at: dict[int, int]) -> LassoSummary:
    """Compare the snapshots taken at the loop's start and after every iteration (one
    snapshot, the last state, for a run that stops). ``loop_events``: the loop's
    events; ``obligation``: the trace's violating event ``(kind, request, page)``;
    ``alloc_at``: (request, page) -> step of its last alloc; ``posted_at``: write
    seq -> step that posted it."""
    events = list(loop_events)
    first = snapshots[0]
    held: list[HeldPage] = []
    pending: list[PendingWrite] = []
    nbytes = page_bytes(pool)
    for p, (owner, writes) in first.items():
        if owner is not None and all(s[p][0] == owner for s in snapshots) and \
                ("free", owner, p) not in events:
            tag = pool.tag(p)
            ob = obligation is not None and obligation[0] != "post_write" and \
                obligation[1:] == (owner, p)
            held.append(HeldPage(p, owner, alloc_at.get((owner, p)), tag, nbytes,
                                 _content_ok(pool, p, tag), ob))
        for seq, writer, block in writes:
            if all(any(w[0] == seq for w in s[p][1]) for s in snapshots) and not any(
                    (kind, writer, p) in events for kind in ("land_write", "drain")):
                ob = obligation is not None and obligation == ("post_write", writer, p)
                pending.append(PendingWrite(writer, p, block, posted_at.get(seq),
                                            snapshots[-1][p][0], ob))
    def shape(snap: PoolSnapshot) -> dict[int, tuple[int | None, tuple[tuple[int, int], ...]]]:
        return {p: (o, tuple((w, b) for _, w, b in ws)) for p, (o, ws) in snap.items()}

    returns = all(shape(s) == shape(first) for s in snapshots)
    return LassoSummary(loop_start, steps, iterations,
                        sorted(held, key=lambda h: not h.obligation),
                        sorted(pending, key=lambda w: not w.obligation), returns)
