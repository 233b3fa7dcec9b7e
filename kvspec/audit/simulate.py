"""A small simulated PD-disaggregated engine that writes the audit log a real one would.

A seeded discrete-event loop (deterministic for a seed) with a router/admission step,
a prefill worker that posts asynchronous KV writes with random delays into the
decode node's pages, a decode worker that commits, reads and decodes, client aborts,
transfer timeouts and injected faults (writes that land very late, writes that never
land unless cancelled). Pages live in the tensor page pool of :mod:`kvspec.pool`
when torch is installed (real copies, tags; a decode ``read`` record then says
whose KV it found), and in plain bookkeeping otherwise.

Policies follow the shipped models, event for event, so a log of a policy conforms to
its model:

* ``buggy_pd`` (``models/buggy_pd.py``): a rejected request is still queued with a
  one-page stub; decode preallocates the full length, prefill writes one page, the
  commit checks no coverage, decode reads every page (stale KV). No aborts.
* ``free_before_drain`` (``models/free_before_drain.py``): rejection is terminal, but
  an abort or timeout frees the destination pages at once, with writes in flight.
* ``patched`` (``models/patched.py``): rejection is terminal, commit needs coverage,
  an aborted request's pages are held until every write landed or was drained; a
  timeout while held only warns.
"""
from __future__ import annotations

import hashlib
import heapq
import json
import random
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterator

POLICIES = ("buggy_pd", "free_before_drain", "patched")
NAMINGS = ("kvspec", "vllm")
#: the event names of ``naming="vllm"``: the log calls kvspec/audit/mappings/
#: vllm_connector.toml documents, at the vLLM KV connector v1 (NIXL) code paths of
#: shared/research/engines.md section 3.1 (scheduler admission, update_state_after_alloc,
#: allocate_slots, _read_blocks, _pop_done_transfers, _handle_failed_transfer,
#: the forward pass, _free_blocks, finish_requests)
VLLM_EVENTS = {"reject": "request_rejected", "admit": "remote_kvs_waiting",
               "alloc": "blocks_allocated", "post_write": "nixl_read_posted",
               "land_write": "nixl_read_done", "drain": "nixl_read_released",
               "read": "forward_blocks", "decode": "forward_step", "free": "blocks_freed",
               "abort": "request_aborted", "timeout": "kv_lease_expired",
               "finish": "request_finished"}


@dataclass(frozen=True)
class SimConfig:
    policy: str = "patched"
    requests: int = 100          # requests that arrive in total
    pages: int = 32              # decode pages
    max_need: int = 3            # longest prompt, in pages (models: max_need)
    prefill_capacity: int = 2    # longer prompts are rejected (models: prefill_capacity)
    concurrency: int = 4         # requests in the system at once
    abort_rate: float = 0.1      # client aborts during the transfer
    late_write_rate: float = 0.1  # injected: a write lands after the timeout
    lost_write_rate: float = 0.02  # injected: a write never lands unless cancelled
    timeout: float = 4.0         # transfer timeout (seconds of simulated time)
    seed: int = 0
    node: str = "decode-0"
    tensors: bool = True         # drive kvspec.pool when torch is importable
    naming: str = "kvspec"       # "vllm": the records vLLM's KV connector would log

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r} (use {', '.join(POLICIES)})")
        if self.pages < self.max_need:
            raise ValueError("pages must be at least max_need")
        if self.naming not in NAMINGS:
            raise ValueError(f"unknown naming {self.naming!r} (use {', '.join(NAMINGS)})")


@dataclass
class _Req:
    n: int
    rid: str
    need: int
    rejected: bool = False
    phase: str = "NEW"        # NEW BOOTSTRAP TRANSFER HELD RUNNING DECODED DONE
    table: list[int] = field(default_factory=list)
    chunks: int = 0           # chunks prefill will send
    sent: int = 0
    inflight: dict[int, int] = field(default_factory=dict)  # page -> write id
    landed: set[int] = field(default_factory=set)
    aborted: bool = False
    timed_out: bool = False
    start: float = 0.0


@dataclass
class _Write:
    wid: int
    req: _Req
    page: int
    done: bool = False
    lost: bool = False


class _Pool:
    """The decode page pool: kvspec.pool's tensor pool when available, else bookkeeping."""

    def __init__(self, cfg: SimConfig) -> None:
        self.tensor: Any = None
        if cfg.tensors:
            try:
                from kvspec.pool import PagePool, PoolConfig
                self.tensor = PagePool(PoolConfig(pages=cfg.pages, page_size=2, heads=1,
                                                  head_dim=4, device="cpu",
                                                  prefill_pages=4 * cfg.max_need,
                                                  earlier_tenant=True))
            except ImportError:  # torch missing: logs without tensors
                self.tensor = None
        self.owner: list[_Req | None] = [None] * cfg.pages
        self.writes: list[int] = [0] * cfg.pages  # writes in flight per page
        self.free: list[int] = list(range(cfg.pages - 1, -1, -1))  # LIFO: recent first

    def op(self, name: str, req: _Req, page: int) -> Any:
        if self.tensor is None:
            return None
        return getattr(self.tensor, name)(req.n, page)


class Simulator:
    def __init__(self, cfg: SimConfig, emit: Callable[[dict[str, Any]], None]) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.emit = emit
        self.pool = _Pool(cfg)
        self.queue: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0
        self.now = 0.0
        self.started = 0
        self.live = 0
        self.waiting: list[_Req] = []  # admitted, waiting for pages
        self.wid = 0
        self.lines = 0
        self.pending: dict[int, _Write] = {}  # write id -> write in flight

    # -- the loop ---------------------------------------------------------------------------
    def at(self, delay: float, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (self.now + delay, self.seq, fn))

    def run(self) -> int:
        for _ in range(min(self.cfg.concurrency, self.cfg.requests)):
            self._arrive_next()
        while self.queue:
            self.now, _, fn = heapq.heappop(self.queue)
            fn()
        return self.lines

    def log(self, req: _Req, event: str, page: int | None = None,
            pages: list[int] | None = None, **extra: Any) -> None:
        if self.cfg.naming == "vllm":
            self._log_vllm(req, event, page, pages, extra)
            return
        rec: dict[str, Any] = {"ts": round(self.now, 6), "request": req.rid, "event": event}
        if page is not None:
            rec["page"] = page
            rec["node"] = self.cfg.node
        if pages is not None:
            rec["pages"] = pages
            rec["node"] = self.cfg.node
        rec.update(extra)
        self.lines += 1
        self.emit(rec)

    def _log_vllm(self, req: _Req, event: str, page: int | None, pages: list[int] | None,
                  extra: dict[str, Any]) -> None:
        """The record vLLM would write: ``request_id`` as the OpenAI server names it,
        ``block_id``/``block_ids`` of the decode engine's KV cache, ``engine_id`` for the
        pool, vLLM's event names, and now and then a scheduler line the mapping ignores."""
        rid = f"cmpl-{hashlib.md5(f'{self.cfg.seed}/{req.n}'.encode()).hexdigest()}-0"
        rec: dict[str, Any] = {"ts": round(self.now, 6), "request_id": rid,
                               "event": VLLM_EVENTS[event]}
        if page is not None:
            rec["block_id"] = page
        if pages is not None:
            rec["block_ids"] = pages
        if page is not None or pages is not None:
            rec["engine_id"] = self.cfg.node
        rec.update(extra)
        self.lines += 1
        self.emit(rec)
        if event == "decode":
            self.lines += 1
            self.emit({"ts": round(self.now, 6), "request_id": rid, "event": "scheduler_stats",
                       "num_running_reqs": self.live})

    # -- requests ---------------------------------------------------------------------------
    def _arrive_next(self) -> None:
        if self.started >= self.cfg.requests:
            return
        n = self.started
        self.started += 1
        self.live += 1
        req = _Req(n, f"req-{n}", self.rng.randint(1, self.cfg.max_need))
        self.at(self.rng.uniform(0.0, 0.5), lambda: self._admission(req))

    def _done(self, req: _Req) -> None:
        req.phase = "DONE"
        self.live -= 1
        self._arrive_next()
        self._try_prealloc()

    def _admission(self, req: _Req) -> None:
        policy = self.cfg.policy
        if req.need > self.cfg.prefill_capacity:
            req.rejected = True
            self.log(req, "reject", reason="input too long")
            if policy != "buggy_pd":
                self._done(req)
                return
            req.chunks = 1  # set_finish_with_abort: origin_input_ids = [0], still queued
        else:
            self.log(req, "admit")
            req.chunks = req.need
        req.phase = "BOOTSTRAP"
        req.start = self.now
        self.waiting.append(req)
        if policy != "buggy_pd" and self.rng.random() < self.cfg.abort_rate:
            self.at(self.rng.uniform(0.1, 2.0), lambda: self._abort(req, "client"))
        if policy != "buggy_pd":
            self.at(self.cfg.timeout, lambda: self._on_timeout(req))
        self._try_prealloc()

    def _try_prealloc(self) -> None:
        pool = self.pool
        for req in list(self.waiting):
            if req.phase != "BOOTSTRAP":
                self.waiting.remove(req)
                continue
            usable = [p for p in reversed(pool.free)
                      if self.cfg.policy != "buggy_pd" or pool.writes[p] == 0]
            if len(usable) < req.need:
                continue
            self.waiting.remove(req)
            for p in usable[:req.need]:
                pool.free.remove(p)
                pool.owner[p] = req
                pool.op("alloc", req, p)
                req.table.append(p)
                self.log(req, "alloc", page=p)
            req.phase = "TRANSFER"
            self.at(self.rng.uniform(0.01, 0.2), lambda r=req: self._send(r))

    def _send(self, req: _Req) -> None:
        """Prefill posts its next chunk (one write per page, in table order)."""
        if req.phase != "TRANSFER" or req.sent >= req.chunks:
            return
        page = req.table[req.sent]
        if self.pool.writes[page]:  # the transfer engine serialises writes into a page
            self.at(0.05, lambda: self._send(req))
            return
        req.sent += 1
        self.wid += 1
        w = _Write(self.wid, req, page)
        req.inflight[page] = w.wid
        self.pool.writes[page] += 1
        self.pool.op("post_write", req, page)
        self.log(req, "post_write", page=page)
        roll = self.rng.random()
        if roll < self.cfg.lost_write_rate:
            delay = self.cfg.timeout * 10  # "lost": lands only much later, unless cancelled
            w.lost = True
        elif roll < self.cfg.lost_write_rate + self.cfg.late_write_rate:
            delay = self.cfg.timeout * self.rng.uniform(1.2, 2.5)
        else:
            delay = self.rng.expovariate(2.0)
        self.at(delay, lambda: self._land(w))
        self.pending[w.wid] = w
        if req.sent < req.chunks:
            self.at(self.rng.uniform(0.01, 0.2), lambda: self._send(req))

    def _resolve(self, w: _Write, event: str) -> None:
        w.done = True
        self.pending.pop(w.wid, None)
        req, page = w.req, w.page
        self.pool.writes[page] -= 1
        if req.inflight.get(page) == w.wid:
            del req.inflight[page]
        self.pool.op(event, req, page)
        self.log(req, event, page=page)
        if event == "land_write" and self.pool.owner[page] is req:
            req.landed.add(page)

    def _land(self, w: _Write) -> None:
        if w.done:
            return
        self._resolve(w, "land_write")
        req = w.req
        if req.phase == "TRANSFER":
            self._maybe_commit(req)
        elif req.phase == "HELD":
            self._maybe_release(req)
        self._try_prealloc()

    def _maybe_commit(self, req: _Req) -> None:
        if req.sent < req.chunks or req.inflight:
            return
        if self.cfg.policy != "buggy_pd" and len(req.landed) < len(req.table):
            return  # coverage: every page landed
        req.phase = "RUNNING"  # transfer_success (silent)
        self.at(self.rng.uniform(0.01, 0.3), lambda: self._decode(req))

    def _decode(self, req: _Req) -> None:
        if req.phase != "RUNNING":
            return
        for p in sorted(req.table):
            rd = self.pool.op("read", req, p)
            extra = {} if rd is None else {"foreign": bool(rd.foreign),
                                           "found": None if rd.tag is None else
                                           ("earlier-tenant" if rd.tag.earlier_tenant
                                            else f"req-{rd.tag.request}")}
            self.log(req, "read", page=p, **extra)
        if self.pool.tensor is not None and req.table:
            self.pool.tensor.attend(req.n, [], 0)
        self.log(req, "decode")
        req.phase = "DECODED"
        self.at(self.rng.uniform(0.01, 0.3), lambda: self._finish(req))

    def _free_all(self, req: _Req) -> None:
        pages = sorted(req.table)
        for p in pages:
            self.pool.op("free", req, p)
            self.pool.owner[p] = None
            self.pool.free.append(p)
        req.table = []
        req.landed.clear()
        if pages:
            self.log(req, "free", pages=pages)

    def _finish(self, req: _Req) -> None:
        if req.phase not in ("DECODED", "RUNNING"):
            return
        decoded = req.phase == "DECODED"
        self._free_all(req)
        self.log(req, "finish" if decoded else "abort")
        self._done(req)

    def _abort(self, req: _Req, why: str) -> None:
        if req.phase == "RUNNING":  # finishes its step, then frees what it fully owns
            self._finish(req)
            return
        if req.phase not in ("BOOTSTRAP", "TRANSFER"):
            return
        req.aborted = True
        if self.cfg.policy == "free_before_drain":
            self.log(req, "abort", reason=why)
            self._free_all(req)  # release_kv_cache at once: no fence against the writes
            self._done(req)
            return
        # patched: room Failed, no new chunks, pages held until every write is quiescent
        req.phase = "HELD"
        self.log(req, "abort", reason=why)
        for page, wid in list(req.inflight.items()):
            w = self.pending.get(wid)
            if w is not None:
                slow = self.cfg.timeout * self.rng.uniform(1.1, 2.0) if w.lost else 0.0
                self.at(slow + self.rng.uniform(0.05, 1.5), lambda w=w: self._drain(w))
        self.at(self.cfg.timeout, lambda: self._held_timeout(req))
        self._maybe_release(req)

    def _drain(self, w: _Write) -> None:
        if w.done or w.req.phase != "HELD":
            return
        self._resolve(w, "drain")
        self._maybe_release(w.req)

    def _held_timeout(self, req: _Req) -> None:
        if req.phase == "HELD" and not req.timed_out and req.inflight:
            req.timed_out = True
            self.log(req, "timeout")  # a warning: timeout is not drain

    def _maybe_release(self, req: _Req) -> None:
        if req.phase != "HELD" or req.inflight:
            return
        self._free_all(req)
        self._done(req)

    def _on_timeout(self, req: _Req) -> None:
        if req.phase in ("BOOTSTRAP", "TRANSFER"):
            self._abort(req, "timeout")


def simulate(cfg: SimConfig, out: IO[str]) -> int:
    """Run the simulation and write its JSON Lines log to ``out``; the number of lines."""
    dumps = json.dumps

    def emit(rec: dict[str, Any]) -> None:
        out.write(dumps(rec, separators=(",", ":")) + "\n")

    return Simulator(cfg, emit).run()


def records(cfg: SimConfig) -> Iterator[dict[str, Any]]:
    """The log records of a simulation (collected; for small runs and tests)."""
    out: list[dict[str, Any]] = []
    Simulator(cfg, out.append).run()
    return iter(out)
