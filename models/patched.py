"""SGLang-style PD disaggregation, fail-closed: the design every property must hold for.

Follows ``shared/research/engines.md``:

* **Rejection is terminal before any handoff** (#38935, S6 "RejectedNeverHandsOff"):
  admission records the rejection in ``finished_reason`` — the field every later
  gate (``finished()``, ``pop_preallocated``) reads — and retires the request
  before it reaches the bootstrap or prealloc queues. No pages, no sender, no
  transfer, no decode.
* **Commit requires coverage** (B2, #38704, invariant 5 "CommitRequiresCoverage"):
  decode commits a transfer only when every preallocated page received its write.
* **Release only after drain** (B3/B4, #24527, #35049, #38961; S3/S8
  "failure ≠ drain"): an abort or transfer failure marks the room Failed and closes
  admission of new chunks (#27372); the destination pages are *held*
  (``_defer_release``) until every posted write into them has landed or has been
  acknowledged as drained (an ABORT_ACK sent only at ``outstanding == 0``, S7).
  A timeout only warns — "Timeout only warns and retries; it never authorizes
  reuse" (quarantine design, §2.5) — it never frees pages.
* A running request that is aborted finishes its current step and frees pages it
  fully owns ("abort method 3", §2.2); that is not a rejection.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Phase(enum.Enum):
    NEW = 0          # not yet arrived
    QUEUED = 1       # arrived, admission not yet decided
    BOOTSTRAP = 2    # admitted: bootstrap/prealloc queues on both sides
    TRANSFER = 3     # decode pages preallocated, metadata sent, prefill may write
    HELD = 4         # aborted during transfer: pages held until drained
    RUNNING = 5      # transfer committed, decoding
    DECODED = 6      # ran its decode step, response not yet sent
    DONE = 7


class Reason(enum.Enum):
    NONE = 0
    ABORT = 1        # FINISH_ABORT (rejection, abort, transfer failure)
    LENGTH = 2       # finished normally


class PatchedPD(Model):
    requests = Requests(2)
    pages = Pages(4)
    prefill_capacity = Size(2)   # pages of KV the prefill node can hold for one request
    max_need = Size(3)           # longest prompt, in pages

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, "max_need"), init=0)
    finished_reason = requests.var(Reason, init=Reason.NONE)
    timed_out = requests.var(bool, init=False)            # a warning, never a release
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
        Failed, prefill admits no new chunk, decode defers the release."""
        require(s.phase[r] == Phase.TRANSFER or s.phase[r] == Phase.BOOTSTRAP)
        s.finished_reason[r] = Reason.ABORT
        s.phase[r] = Phase.HELD
        emit.abort(r)

    @action
    def drain_ack(s, r: Request, p: Page):
        """Prefill cancelled the posted write and acknowledged the drain
        (ABORT_ACK only once nothing is outstanding for the room)."""
        require(s.phase[r] == Phase.HELD and s.inflight[p] == r)
        s.inflight[p] = None
        emit.drain(r, p)

    @action
    def timeout(s, r: Request):
        """The hold deadline passes: warn, keep holding (timeout is not drain)."""
        require(s.phase[r] == Phase.HELD and not s.timed_out[r])
        s.timed_out[r] = True
        emit.timeout(r)

    @action
    def release(s, r: Request):
        """_do_release once every write into the request's pages is quiescent."""
        require(s.phase[r] == Phase.HELD)
        require(not (s.inflight == r).any())
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
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
