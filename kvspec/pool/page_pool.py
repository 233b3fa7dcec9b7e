"""An executable paged KV pool on torch: prefill pages, decode pages, async writes.

The pool mirrors the lifecycle events of ``docs/formats.md``:

* ``alloc(r, p)``  — decode page ``p`` is handed to ``r`` and appended to ``r``'s page
  table.  The i-th page of a table must hold the request's block i (tokens
  ``i*page_size .. (i+1)*page_size - 1``).
* ``free(r, p)``   — ``p`` leaves ``r``'s table and has no owner.  Data and tag are kept:
  freeing never zeroes memory, like real allocators.
* ``post_write(r, p)`` — an asynchronous copy of ``r``'s block (the block index ``p``
  has in ``r``'s table) from ``r``'s prefill pages into ``p``.  The source is staged at
  post time; nothing reaches ``p`` until the write lands.  Several writes may be in flight.
* ``land_write(r, p)`` — the oldest posted write of ``r`` into ``p`` lands (copy + tag).
* ``drain(r, p)``  — the oldest posted write of ``r`` into ``p`` is cancelled unlanded.
* ``read(r, p)`` / ``attend(r, reads)`` / ``decode(r)`` — decode attention of ``r`` with
  ``scaled_dot_product_attention`` over what its pages hold, compared with the output
  over ``r``'s own K/V; every page read comes with the tag found there.

On CUDA writes are staged and landed on a side stream, ordered with events (the main
stream waits on a landing's event; the side stream waits on the main stream before it
touches a page), and ``PoolConfig.land_delay_cycles`` makes each landing spin on the
GPU first, so a landing really is late relative to the host.  On CPU the same code runs
with a deferred queue and no streams.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.nn.functional import scaled_dot_product_attention

from kvspec.pool.kv_data import request_kv, request_query

__all__ = [
    "DEVIATION_TOLERANCE",
    "EARLIER_TENANT",
    "Attention",
    "Landing",
    "PagePool",
    "PageRead",
    "PoolConfig",
    "PoolError",
    "Tag",
    "WriteTicket",
    "resolve_device",
]


DEVIATION_TOLERANCE = 1e-5
"""Attention outputs further apart than this count as a leak (own data gives exactly 0)."""


EARLIER_TENANT = 1 << 30
"""Request id of ``T``, the fictitious earlier tenant whose KV fills a seeded pool.

With ``PoolConfig(earlier_tenant=True)`` page ``p`` starts out holding ``T``'s block ``p``
(like the seed tutorial's ``A_ONLY_p`` strings): T finished before the trace began, its
pages were freed, and — as in real allocators — its bytes stayed.  A page nobody wrote
during a trace is then recognisably *someone else's* KV instead of zeros.  T never acts."""


def request_name(r: int | None) -> str:
    """``r3`` for a request, ``T`` for the earlier tenant, ``-`` for none."""
    if r is None:
        return "-"
    return "T" if r == EARLIER_TENANT else f"r{r}"


class PoolError(ValueError):
    """An operation that is impossible on the pool (bad id, no such write, not owned, ...)."""


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` picks ``cuda`` when ``torch.cuda.is_available()``, else ``cpu``."""
    name = str(device)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError as exc:
        raise PoolError(f"unknown device {name!r} (use auto, cpu or cuda)") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise PoolError(f"device {name!r} requested but torch.cuda.is_available() is False")
    if dev.type not in ("cpu", "cuda"):
        raise PoolError(f"unsupported device {name!r} (use auto, cpu or cuda)")
    return dev


def _rid(r: int) -> str:
    return request_name(r)


@dataclass(frozen=True)
class PoolConfig:
    """Shape and placement of a pool.  ``prefill_pages=None`` means as many as ``pages``;
    ``requests=None`` accepts any non-negative request id; ``earlier_tenant=True`` seeds
    every page with the KV of the earlier tenant ``T`` (see ``EARLIER_TENANT``)."""

    pages: int
    page_size: int = 4
    heads: int = 2
    head_dim: int = 16
    dtype: torch.dtype = torch.float32
    device: str = "auto"
    prefill_pages: int | None = None
    requests: int | None = None
    land_delay_cycles: int = 0
    earlier_tenant: bool = False

    def __post_init__(self) -> None:
        for name in ("pages", "page_size", "heads", "head_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PoolError(f"PoolConfig.{name} must be a positive int, got {value!r}")
        for name in ("prefill_pages", "requests"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise PoolError(f"PoolConfig.{name} must be None or a positive int, got {value!r}")
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise PoolError(f"PoolConfig.dtype must be a floating torch dtype, got {self.dtype!r}")
        if self.land_delay_cycles < 0:
            raise PoolError("PoolConfig.land_delay_cycles must be >= 0")

    @property
    def page_shape(self) -> tuple[int, int, int]:
        return (self.page_size, self.heads, self.head_dim)


@dataclass(frozen=True)
class Tag:
    """Whose data a decode page holds: ``request``'s block ``block``."""

    request: int
    block: int

    @property
    def earlier_tenant(self) -> bool:
        """The data is the fictitious earlier tenant's (a seeded pool)."""
        return self.request == EARLIER_TENANT

    def __str__(self) -> str:
        who = "tenant T" if self.earlier_tenant else _rid(self.request)
        return f"{who} block {self.block}"


@dataclass(frozen=True)
class WriteTicket:
    """A posted write: ``request``'s block ``block`` on its way into ``page``."""

    seq: int
    request: int
    page: int
    block: int
    owner: int | None  # owner of the page when the write was posted


@dataclass(frozen=True)
class Landing:
    """A write that landed.  ``previous`` is the tag it overwrote; ``owner`` the page's
    owner at landing time."""

    request: int
    page: int
    block: int
    owner: int | None
    previous: Tag | None

    @property
    def late(self) -> bool:
        """The writer no longer owns the page it landed in."""
        return self.owner != self.request

    @property
    def clobbered_owner(self) -> bool:
        """The landing overwrote a page that another request currently owns."""
        return self.owner is not None and self.owner != self.request


@dataclass(frozen=True)
class PageRead:
    """Evidence of ``request`` reading ``page`` (its block ``block``).

    ``foreign``: the page does not hold the reader's block (other request, other block,
    or never written).  ``inflight_writers``: requests with a write into the page still
    in flight.  ``content_ok``: the bytes equal what the tag says (zeros if never written).
    """

    request: int
    page: int
    block: int
    tag: Tag | None
    foreign: bool
    inflight_writers: tuple[int, ...]
    content_ok: bool
    k: Tensor = field(repr=False, compare=False)
    v: Tensor = field(repr=False, compare=False)

    @property
    def inflight(self) -> bool:
        return bool(self.inflight_writers)

    def describe(self) -> str:
        held = "never written" if self.tag is None else f"holds {self.tag}"
        verdict = "FOREIGN" if self.foreign else "own"
        extra = ""
        if self.inflight_writers:
            extra += ", write in flight by " + ", ".join(_rid(w) for w in self.inflight_writers)
        if not self.content_ok:
            extra += ", BYTES DO NOT MATCH TAG"
        return f"read({_rid(self.request)}, page {self.page}): {held} ({verdict}{extra})"


@dataclass(frozen=True)
class Attention:
    """Decode attention of ``request`` at ``step`` over ``reads``; ``max_abs_dev`` is the
    max |output - output over the request's own K/V for the same blocks|."""

    request: int
    step: int
    reads: tuple[PageRead, ...]
    max_abs_dev: float

    @property
    def pages(self) -> tuple[int, ...]:
        return tuple(rd.page for rd in self.reads)

    @property
    def foreign_pages(self) -> tuple[int, ...]:
        return tuple(rd.page for rd in self.reads if rd.foreign)

    @property
    def leaked(self) -> bool:
        return bool(self.foreign_pages) or self.max_abs_dev > DEVIATION_TOLERANCE


@dataclass
class _Pending:
    ticket: WriteTicket
    k: Tensor
    v: Tensor


class PagePool:
    """Prefill and decode page pools with per-page tags and asynchronous writes."""

    def __init__(self, config: PoolConfig) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        shape = (config.pages, *config.page_shape)
        dev, dt = self.device, config.dtype
        self.k = torch.zeros(shape, dtype=dt, device=dev)
        self.v = torch.zeros(shape, dtype=dt, device=dev)
        self.tags = torch.full((config.pages, 2), -1, dtype=torch.int64, device=dev)
        n_prefill = config.prefill_pages if config.prefill_pages is not None else config.pages
        self.prefill_k = torch.zeros((n_prefill, *config.page_shape), dtype=dt, device=dev)
        self.prefill_v = torch.zeros((n_prefill, *config.page_shape), dtype=dt, device=dev)
        self._prefill_slots: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._owner: list[int | None] = [None] * config.pages
        self._host_tags: list[Tag | None] = [None] * config.pages  # what the queued landings leave
        self._tables: dict[int, list[int]] = {}
        self._last_block: dict[tuple[int, int], int] = {}
        self._pending: list[deque[_Pending]] = [deque() for _ in range(config.pages)]
        self._seq = 0
        self._side: torch.cuda.Stream | None = (
            torch.cuda.Stream(device=dev) if dev.type == "cuda" else None
        )
        if config.earlier_tenant:
            self._seed_earlier_tenant()

    # ------------------------------------------------------------------ queries
    def owner(self, page: int) -> int | None:
        self._check_page(page, "owner")
        return self._owner[page]

    def page_table(self, request: int) -> tuple[int, ...]:
        self._check_request(request, "page_table")
        return tuple(self._tables.get(request, ()))

    def inflight(self, page: int) -> tuple[WriteTicket, ...]:
        """Writes into ``page`` posted and not yet landed or drained, oldest first."""
        self._check_page(page, "inflight")
        return tuple(w.ticket for w in self._pending[page])

    def tag(self, page: int) -> Tag | None:
        """Whose data ``page`` holds (``None``: never written).  Read from the device."""
        self._check_page(page, "tag")
        req, block = (int(x) for x in self.tags[page].tolist())
        return None if req < 0 else Tag(req, block)

    def synchronize(self) -> None:
        """Wait for every queued copy (no-op on CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # --------------------------------------------------------------- lifecycle
    def alloc(self, request: int, page: int) -> None:
        op = f"alloc({_rid(request)}, page {page})"
        self._check_request(request, op)
        self._check_page(page, op)
        owner = self._owner[page]
        if owner is not None:
            raise PoolError(f"{op}: page {page} is owned by {_rid(owner)}")
        self._owner[page] = request
        self._tables.setdefault(request, []).append(page)

    def free(self, request: int, page: int) -> None:
        op = f"free({_rid(request)}, page {page})"
        self._check_request(request, op)
        self._check_page(page, op)
        owner = self._owner[page]
        if owner != request:
            held = "free" if owner is None else f"owned by {_rid(owner)}"
            raise PoolError(f"{op}: page {page} is {held}")
        table = self._tables[request]
        self._last_block[(request, page)] = table.index(page)
        table.remove(page)
        self._owner[page] = None

    def post_write(self, request: int, page: int) -> WriteTicket:
        """Stage ``request``'s block for ``page``; it reaches ``page`` at ``land_write``.

        The block is ``page``'s index in ``request``'s table; a request that no longer
        owns ``page`` writes the block the page had when it freed it.
        """
        op = f"post_write({_rid(request)}, page {page})"
        self._check_request(request, op)
        self._check_page(page, op)
        table = self._tables.get(request, [])
        if page in table:
            block = table.index(page)
        elif (request, page) in self._last_block:
            block = self._last_block[(request, page)]
        else:
            raise PoolError(f"{op}: {_rid(request)} never owned page {page}")
        slot = self._prefill_slot(request, block)
        with self._on_side():
            k = self.prefill_k[slot].clone()
            v = self.prefill_v[slot].clone()
        self._seq += 1
        ticket = WriteTicket(self._seq, request, page, block, self._owner[page])
        self._pending[page].append(_Pending(ticket, k, v))
        return ticket

    def land_write(self, request: int, page: int) -> Landing:
        """The oldest in-flight write of ``request`` into ``page`` lands: copy + tag."""
        op = f"land_write({_rid(request)}, page {page})"
        pending = self._take_pending(request, page, op)
        previous = self._host_tags[page]  # no device sync: landings stay asynchronous
        block = pending.ticket.block
        with self._on_side():
            if self._side is not None and self.config.land_delay_cycles:
                torch.cuda._sleep(self.config.land_delay_cycles)
            self.k[page].copy_(pending.k, non_blocking=True)
            self.v[page].copy_(pending.v, non_blocking=True)
            self.tags[page, 0].fill_(request)
            self.tags[page, 1].fill_(block)
        self._join_side()
        self._host_tags[page] = Tag(request, block)
        return Landing(request, page, block, self._owner[page], previous)

    def drain(self, request: int, page: int) -> WriteTicket:
        """The oldest in-flight write of ``request`` into ``page`` is cancelled unlanded."""
        op = f"drain({_rid(request)}, page {page})"
        return self._take_pending(request, page, op).ticket

    # ----------------------------------------------------------------- decode
    def read(self, request: int, page: int) -> PageRead:
        """Snapshot ``page`` as ``request`` reads it, with the tag found there."""
        op = f"read({_rid(request)}, page {page})"
        self._check_request(request, op)
        self._check_page(page, op)
        table = self._tables.get(request, [])
        if page not in table:
            raise PoolError(f"{op}: page {page} is not in {_rid(request)}'s page table {table}")
        block = table.index(page)
        tag = self.tag(page)  # from the device, after every landing queued before this read
        if tag != self._host_tags[page]:
            raise RuntimeError(f"{op}: device tag {tag} != queued tag {self._host_tags[page]} (stream ordering bug)")
        k = self.k[page].clone()
        v = self.v[page].clone()
        return PageRead(
            request=request,
            page=page,
            block=block,
            tag=tag,
            foreign=tag != Tag(request, block),
            inflight_writers=tuple(w.ticket.request for w in self._pending[page]),
            content_ok=self._content_matches(tag, k, v),
            k=k,
            v=v,
        )

    def attend(self, request: int, reads: list[PageRead] | tuple[PageRead, ...], step: int = 0) -> Attention:
        """Attention of ``request``'s step-``step`` query over the pages in ``reads``."""
        self._check_request(request, f"attend({_rid(request)})")
        reads = tuple(reads)
        for rd in reads:
            if rd.request != request:
                raise PoolError(f"attend({_rid(request)}): read of page {rd.page} belongs to {_rid(rd.request)}")
        if not reads:
            return Attention(request, step, (), 0.0)
        cfg = self.config
        k = torch.cat([rd.k for rd in reads])
        v = torch.cat([rd.v for rd in reads])
        positions = torch.cat(
            [torch.arange(rd.block * cfg.page_size, (rd.block + 1) * cfg.page_size) for rd in reads]
        )
        own_k, own_v = request_kv(request, positions, cfg.heads, cfg.head_dim, cfg.dtype, self.device)
        q = request_query(request, step, cfg.heads, cfg.head_dim, cfg.dtype, self.device)
        out = self._sdpa(q, k, v)
        own = self._sdpa(q, own_k, own_v)
        dev = float((out.float() - own.float()).abs().max().item())
        return Attention(request, step, reads, dev)

    def decode(self, request: int, step: int = 0) -> Attention:
        """Read every page of ``request``'s table, in order, and attend over them."""
        reads = [self.read(request, p) for p in self.page_table(request)]
        return self.attend(request, reads, step)

    # ---------------------------------------------------------------- helpers
    def _seed_earlier_tenant(self) -> None:
        """Page ``p`` holds ``T``'s block ``p``: K/V, tag and host tag (no owner)."""
        cfg = self.config
        positions = range(cfg.pages * cfg.page_size)
        k, v = request_kv(EARLIER_TENANT, positions, cfg.heads, cfg.head_dim, cfg.dtype, self.device)
        self.k.copy_(k.view(cfg.pages, *cfg.page_shape))
        self.v.copy_(v.view(cfg.pages, *cfg.page_shape))
        self.tags[:, 0] = EARLIER_TENANT
        self.tags[:, 1] = torch.arange(cfg.pages, dtype=torch.int64, device=self.device)
        self._host_tags = [Tag(EARLIER_TENANT, p) for p in range(cfg.pages)]

    @staticmethod
    def _sdpa(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        # q [H, D]; k, v [S, H, D]  ->  [H, D]
        qh = q.unsqueeze(0).unsqueeze(2)  # [1, H, 1, D]
        kh = k.permute(1, 0, 2).unsqueeze(0)  # [1, H, S, D]
        vh = v.permute(1, 0, 2).unsqueeze(0)
        return scaled_dot_product_attention(qh, kh, vh)[0, :, 0, :]

    def _content_matches(self, tag: Tag | None, k: Tensor, v: Tensor) -> bool:
        if tag is None:
            return not bool(k.any()) and not bool(v.any())
        cfg = self.config
        pos = range(tag.block * cfg.page_size, (tag.block + 1) * cfg.page_size)
        ek, ev = request_kv(tag.request, pos, cfg.heads, cfg.head_dim, cfg.dtype, self.device)
        return bool(torch.equal(k, ek)) and bool(torch.equal(v, ev))

    def _prefill_slot(self, request: int, block: int) -> int:
        """Prefill slot holding ``request``'s ``block``, filled on first use (LRU reuse)."""
        key = (request, block)
        slot = self._prefill_slots.get(key)
        if slot is not None:
            self._prefill_slots.move_to_end(key)
            return slot
        if len(self._prefill_slots) < self.prefill_k.shape[0]:
            slot = len(self._prefill_slots)
        else:
            _, slot = self._prefill_slots.popitem(last=False)
            if self._side is not None:  # staging copies may still read the evicted slot
                torch.cuda.current_stream(self.device).wait_stream(self._side)
        cfg = self.config
        pos = range(block * cfg.page_size, (block + 1) * cfg.page_size)
        k, v = request_kv(request, pos, cfg.heads, cfg.head_dim, cfg.dtype, self.device)
        self.prefill_k[slot].copy_(k)
        self.prefill_v[slot].copy_(v)
        self._prefill_slots[key] = slot
        return slot

    def _on_side(self) -> AbstractContextManager[object]:
        """Enter the side stream after it has caught up with the main stream (CPU: no-op)."""
        if self._side is None:
            return nullcontext()
        self._side.wait_stream(torch.cuda.current_stream(self.device))
        return torch.cuda.stream(self._side)

    def _join_side(self) -> None:
        """Make the main stream wait for what was just queued on the side stream."""
        if self._side is not None:
            event = torch.cuda.Event()
            event.record(self._side)
            torch.cuda.current_stream(self.device).wait_event(event)

    def _take_pending(self, request: int, page: int, op: str) -> _Pending:
        self._check_request(request, op)
        self._check_page(page, op)
        queue = self._pending[page]
        for i, pending in enumerate(queue):
            if pending.ticket.request == request:
                del queue[i]
                return pending
        raise PoolError(f"{op}: no write of {_rid(request)} into page {page} is in flight")

    def _check_request(self, request: int, op: str) -> None:
        if isinstance(request, bool) or not isinstance(request, int) or request < 0:
            raise PoolError(f"{op}: bad request id {request!r}")
        limit = self.config.requests
        if limit is not None and request >= limit:
            raise PoolError(f"{op}: request {_rid(request)} out of range (requests={limit})")

    def _check_page(self, page: int, op: str) -> None:
        if isinstance(page, bool) or not isinstance(page, int):
            raise PoolError(f"{op}: bad page id {page!r}")
        if not 0 <= page < self.config.pages:
            raise PoolError(f"{op}: page {page} out of range (pages={self.config.pages})")
