"""Source pages freed before the remote read completed, and the lease-validated fix
(engines.md §3.1, §3.2 V1, §2.4 B6; V-S1, S5; invariant 3 "NoReadAfterFree").

vLLM NIXL pull: prefill finishes a ``do_remote_decode`` request and keeps its blocks
(``request_finished`` sets ``delay_free_blocks`` and registers
``_reqs_need_send[req] = now + VLLM_NIXL_ABORT_REQUEST_TIMEOUT``); decode allocates
local blocks and issues NIXL READs from prefill's blocks. Prefill's ``get_finished``
frees the blocks on the READ-completion notification **or when the expiry passes**
("Releasing expired KV blocks for request …"); a later read is "only logged" (aws-do-eks
PR #84: "served 8 of 42 completed requests on KV blocks the prefill side had already
released"). SGLang's prefill has the same shape on the push side:
``handle_inflight_transfer_failure`` calls ``release_kv_cache`` while RDMA reads of the
source pages may still be in flight (B6, #38961).

The prefill pool uses the page id space with the ``src_*`` events; the decode side is
reduced to the READ (its own pages are the subject of the other models).

* :class:`FreeOnExpiry` — the expiry (lease without heartbeat, or a failure
  notification) frees the source blocks, whatever READ is posted or yet to come.
* :class:`LeaseValidated` — #41383's lease, validated on both sides: decode posts a
  READ only under a live lease, a posted READ keeps the lease alive (heartbeats), so
  the expiry frees only blocks no READ is using (V-S1 (b): "expiry and proof that no
  READ of b is posted").

They differ only in ``lease_validated``.

Expected at requests=2, pages=4 (every other library property HOLDS): FreeOnExpiry —
no-source-reuse-before-read VIOLATED (3 steps: prefill, READ posted, expiry frees);
LeaseValidated — all HOLD. The four default properties hold for both: select
``no-source-reuse-before-read`` to see the bug.
"""
import enum

from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class Prefill(enum.Enum):
    NEW = 0
    HELD = 1         # finished, blocks kept for decode (delay_free_blocks)
    FREED = 2


class Decode(enum.Enum):
    WAITING = 0      # WAITING_FOR_REMOTE_KVS: will READ prefill's blocks
    READING = 1      # READ posted
    DONE = 2         # READ complete (or failed closed)


class FreeOnExpiry(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-source-reuse-before-read",
    )
    requests = Requests(2)
    pages = Pages(4)             # prefill (source) blocks

    p_state = requests.var(Prefill, init=Prefill.NEW)
    d_state = requests.var(Decode, init=Decode.WAITING)
    lease = requests.var(bool, init=False)             # prefill still holds the blocks for r
    notified = requests.var(bool, init=False)          # READ-completion notification sent
    prefill_owner = pages.var(requests.optional, init=None)
    remote = pages.var(requests.optional, init=None)   # decode's remote_block_ids reference
    reading = pages.var(requests.optional, init=None)  # a READ of the block is in flight

    def lease_validated(s) -> bool:
        return False

    def free_blocks(s, r):  # type: ignore[no-untyped-def]
        mine = s.prefill_owner == r
        emit.src_free(r, pages=mine)
        s.prefill_owner[mine] = None
        s.p_state[r] = Prefill.FREED
        s.lease[r] = False

    @action
    def prefill(s, r: Request, q: Page):
        """Prefill computes r into block q; request_finished keeps it, the params
        (remote_block_ids) go to decode."""
        require(s.p_state[r] == Prefill.NEW and s.prefill_owner[q] is None)
        s.prefill_owner[q] = r
        s.remote[q] = r
        s.p_state[r] = Prefill.HELD
        s.lease[r] = True
        emit.admit(r)
        emit.src_alloc(r, q)

    @action
    def post_read(s, r: Request, q: Page):
        """Decode's start_load_kv: a NIXL READ of the block it was told about."""
        require(s.d_state[r] == Decode.WAITING and s.remote[q] == r)
        if s.lease_validated():
            require(s.lease[r])
        s.remote[q] = None
        s.reading[q] = r
        s.d_state[r] = Decode.READING
        emit.src_read(r, q)

    @action
    def read_done(s, q: Page):
        """The READ completes; decode notifies prefill."""
        w = s.reading[q]
        require(w is not None)
        s.reading[q] = None
        emit.src_read_done(w, q)
        s.d_state[w] = Decode.DONE
        s.notified[w] = True

    @action
    def notification(s, r: Request):
        """get_finished: consumers_per_producer notifications counted, blocks freed."""
        require(s.notified[r] and s.p_state[r] == Prefill.HELD)
        s.notified[r] = False
        s.free_blocks(r)
        emit.finish(r)

    @action
    def expiry(s, r: Request):
        """The expiry passes (no heartbeat in time, or a failure notification)."""
        require(s.p_state[r] == Prefill.HELD)
        if s.lease_validated():
            require(not (s.reading == r).any())
        emit.deadline(r)
        s.free_blocks(r)


class LeaseValidated(FreeOnExpiry):
    def lease_validated(s) -> bool:
        return True
