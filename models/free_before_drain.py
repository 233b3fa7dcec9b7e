"""PD disaggregation whose abort/timeout path frees destination pages before the
writes into them have drained — the use-after-free window of engines.md §2.4 B3/B4.

Follows ``shared/research/engines.md``:

* Rejection is fail-closed here (as in ``patched.py``), so only the release path
  is at fault.
* Issue #24527: "decode preallocates destination KV pages for request A, prefill
  starts transferring KV data into those pages, decode aborts request A and
  releases the pages, allocator reassigns the same pages to request B, the stale
  writer from request A finishes late and overwrites request B's KV pages";
  reproduced in #35049 ("handed out while A's write to those pages is still in
  flight").
* The abort entry points on decode (``scheduler.abort_request``, §2.2) and the
  ``Failed`` poll path call ``release_kv_cache`` immediately unless the deferred
  release is enabled (off by default in the 08-20 snapshot), and
  ``resolve_deferred_releases`` frees on its deadline anyway: "timed out … without a
  full drain ack from prefill; releasing anyway" (B4; #38961: "the timeout path is
  the common path, and it is itself a use-after-free window"; Mooncake #3508: a
  TIMEOUT "does not guarantee that the underlying transport operation has
  stopped").
* ``release_kv_cache`` is synchronous host bookkeeping with no fence against
  in-flight RDMA (§2.1), and the allocator hands out any page it has freed.

Expected: VIOLATED for no-reuse-before-drain.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Phase(enum.Enum):
    NEW = 0          # not yet arrived
    QUEUED = 1       # arrived, admission not yet decided
    BOOTSTRAP = 2    # admitted: bootstrap/prealloc queues on both sides
    TRANSFER = 3     # decode pages preallocated, metadata sent, prefill may write
    HELD = 4         # unused here: nothing is held
    RUNNING = 5      # transfer committed, decoding
    DECODED = 6      # ran its decode step, response not yet sent
    DONE = 7


class Reason(enum.Enum):
    NONE = 0
    ABORT = 1        # FINISH_ABORT (rejection, abort, transfer failure)
    LENGTH = 2       # finished normally


class FreeBeforeDrain(Model):
    requests = Requests(2)
    pages = Pages(4)
    prefill_capacity = Size(2)   # pages of KV the prefill node can hold for one request
    max_need = Size(3)           # longest prompt, in pages

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, "max_need"), init=0)
    finished_reason = requests.var(Reason, init=Reason.NONE)
    sent = requests.var(Int(0, "max_need"), init=0)       # chunks prefill has posted
    owner = pages.var(requests.optional, init=None)       # decode allocator
    inflight = pages.var(requests.optional, init=None)    # posted write into the page
    landed = pages.var(bool, init=False)                  # the owner's write landed

    @action
    def arrive(s, r: Request, n: Int(1, "max_need")):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        s.phase[r] = Phase.QUEUED

    @action
    def admission(s, r: Request):
        """validate_input_length; a rejection is recorded where every gate reads it
        and the request is retired before any queue."""
        require(s.phase[r] == Phase.QUEUED)
        if s.need[r] > s.prefill_capacity:
            s.finished_reason[r] = Reason.ABORT
            s.phase[r] = Phase.DONE
            emit.reject(r)
            return
        s.phase[r] = Phase.BOOTSTRAP
        emit.admit(r)

    @action
    def prealloc(s, r: Request, p: Page):
        """_pre_alloc: one destination page from the free list."""
        require(s.phase[r] == Phase.BOOTSTRAP and s.finished_reason[r] == Reason.NONE)
        require(s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        emit.alloc(r, p)
        if (s.owner == r).count() == s.need[r]:
            s.phase[r] = Phase.TRANSFER                # send_metadata(page_indices)

    @action
    def send_chunk(s, r: Request, p: Page):
        """Prefill posts the RDMA write of its next chunk into p (room not Failed)."""
        require(s.phase[r] == Phase.TRANSFER)
        require(s.owner[p] == r and s.inflight[p] is None and not s.landed[p])
        require(s.sent[r] < s.need[r])
        s.sent[r] = s.sent[r] + 1
        s.inflight[p] = r
        emit.post_write(r, p)

    @action
    def land(s, p: Page):
        """The write in flight into p completes (possibly after an abort)."""
        w = s.inflight[p]
        require(w is not None)
        s.inflight[p] = None
        s.landed[p] = s.owner[p] == w
        emit.land_write(w, p)

    @action
    def transfer_success(s, r: Request):
        """Commit only with full coverage: every preallocated page landed."""
        require(s.phase[r] == Phase.TRANSFER and s.sent[r] == s.need[r])
        mine = s.owner == r
        require(not (s.inflight == r).any())
        require((mine & ~(s.landed == True)).count() == 0)  # noqa: E712
        s.phase[r] = Phase.RUNNING

    @action
    def abort(s, r: Request):
        """Client abort or transfer failure during the transfer: the room is marked
        Failed and release_kv_cache frees the destination pages at once."""
        require(s.phase[r] == Phase.TRANSFER or s.phase[r] == Phase.BOOTSTRAP)
        mine = s.owner == r
        emit.abort(r)
        emit.free(r, pages=mine)      # no fence against the writes still in flight
        s.owner[mine] = None
        s.landed[mine] = False
        s.finished_reason[r] = Reason.ABORT
        s.phase[r] = Phase.DONE

    @action
    def decode(s, r: Request):
        """Decode attention over the request's pages."""
        require(s.phase[r] == Phase.RUNNING)
        emit.read(r, pages=s.owner == r)
        emit.decode(r)
        s.phase[r] = Phase.DECODED

    @action
    def finish(s, r: Request):
        """Response sent (or a running request aborted after its step): free pages."""
        require(s.phase[r] == Phase.DECODED or s.phase[r] == Phase.RUNNING)
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        if s.phase[r] == Phase.DECODED:
            s.finished_reason[r] = Reason.LENGTH
            emit.finish(r)
        else:
            s.finished_reason[r] = Reason.ABORT
            emit.abort(r)
        s.phase[r] = Phase.DONE
