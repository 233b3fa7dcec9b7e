"""Free on abort before drain: six releases of the destination pages of an aborted
transfer (engines.md §2.4 B3, B4, B5; S3, S4, S7, S8).

Decode's ``scheduler.abort_request`` on a request in the transfer queue calls
``receiver.abort()`` (room ``Failed``, an ``ABORT`` frame to prefill) and, with
``SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE``, ``register_deferred_abort_room``
and ``_defer_release``: the pages are held until ``is_abort_release_safe`` (every
expected prefill rank acked) or the hold deadline (``resolve_deferred_releases``
L2256). Prefill's ``bootstrap_thread`` (L1993) handles the ``ABORT``; its
``transfer_worker`` may still be inside ``batch_transfer_sync`` writing a chunk.

* :class:`ImmediateRelease` — deferred release off (the 08-20 default):
  ``release_kv_cache`` at once, no fence against the write in flight (#24527, #35049).
* :class:`AckOnReceipt` — a 2-frame ``ABORT_ACK`` sent when the frame is received:
  "only confirms that the abort notification was received" (#31357).
* :class:`AckWithoutClosingRoom` — the ack waits for ``_staging_outstanding == 0``
  but the room is not marked ``Failed`` first, so a chunk dequeued after the ack is
  still written (the order of §2.3 ABORT handling step 1 matters; #36707).
* :class:`DrainAck` — mark the room ``Failed`` first, then ack at
  ``outstanding == 0`` (#37077 drain-aware ABORT_ACK; S7).
* :class:`TimeoutRelease` — :class:`DrainAck`, but the hold deadline releases anyway
  ("timed out … without a full drain ack from prefill; releasing anyway"; #38961;
  Mooncake #3508: a ``TIMEOUT`` "does not guarantee that the underlying transport
  operation has stopped").
* :class:`Quarantine` — the deadline only warns ("Timeout only warns and retries; it
  never authorizes reuse", §2.5; Mooncake #3508's deferred-cleanup worker, RFC #3793
  "drain or quarantine").

Each differs from the next only in one guard: ``releases_at_abort``,
``ack_needs_drain``, ``ack_closes_room``, ``releases_at_deadline``.

Expected at requests=2, pages=4 (every other library property HOLDS; the two halves
of no-reuse-before-drain, no-reuse-under-write and no-land-after-free, have its length):
ImmediateRelease — no-reuse-before-drain VIOLATED (4 steps); AckOnReceipt and
AckWithoutClosingRoom — no-reuse-before-drain (7), ack-after-drain (6); DrainAck — all
HOLD; TimeoutRelease — no-reuse-before-drain (5); Quarantine — all HOLD.
"""
import enum

from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    TRANSFER = 1     # destination page allocated, prefill may write
    HELD = 2         # aborted, pages held until released
    RUNNING = 3
    DONE = 4


class ImmediateRelease(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-read-beyond-written", "no-reuse-before-drain", "no-reuse-under-write",
        "no-land-after-free", "ack-after-drain",
    )
    requests = Requests(2)
    pages = Pages(4)

    phase = requests.var(Phase, init=Phase.NEW)
    abort_sent = requests.var(bool, init=False)    # ABORT frame in transit to prefill
    closed = requests.var(bool, init=False)        # prefill marked the room Failed
    ack_due = requests.var(bool, init=False)       # prefill owes an ABORT_ACK
    ack_sent = requests.var(bool, init=False)      # ABORT_ACK in transit to decode
    owner = pages.var(requests.optional, init=None)
    inflight = pages.var(requests.optional, init=None)
    landed = pages.var(bool, init=False)

    def releases_at_abort(s) -> bool:
        return True

    def ack_needs_drain(s) -> bool:
        return False

    def ack_closes_room(s) -> bool:
        return False

    def releases_at_deadline(s) -> bool:
        return False

    def release(s, r):  # type: ignore[no-untyped-def]
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        s.phase[r] = Phase.DONE

    @action
    def prealloc(s, r: Request, p: Page):
        """_pre_alloc of one destination page; send_metadata."""
        require(s.phase[r] == Phase.NEW and s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        s.phase[r] = Phase.TRANSFER
        emit.admit(r)
        emit.alloc(r, p)

    @action
    def send_chunk(s, r: Request, p: Page):
        """transfer_worker: a chunk of a room that is not Failed is written."""
        require(s.owner[p] == r and not s.closed[r])
        require(s.inflight[p] is None and not s.landed[p])
        s.inflight[p] = r
        emit.post_write(r, p)

    @action
    def land(s, p: Page):
        w = s.inflight[p]
        require(w is not None)
        s.inflight[p] = None
        s.landed[p] = s.owner[p] == w
        emit.land_write(w, p)

    @action
    def transfer_success(s, r: Request):
        require(s.phase[r] == Phase.TRANSFER)
        require(not (s.inflight == r).any() and ((s.owner == r) & ~s.landed).count() == 0)
        s.phase[r] = Phase.RUNNING

    @action
    def decode(s, r: Request):
        require(s.phase[r] == Phase.RUNNING)
        emit.read(r, pages=s.owner == r)
        emit.decode(r)
        emit.finish(r)
        s.release(r)

    @action
    def abort(s, r: Request):
        """receiver.abort(): ABORT frame to prefill; release now or hold."""
        require(s.phase[r] == Phase.TRANSFER)
        s.abort_sent[r] = True
        emit.abort(r)
        emit.abort_msg(r)
        if s.releases_at_abort():
            s.release(r)
        else:
            s.phase[r] = Phase.HELD

    @action
    def prefill_abort(s, r: Request):
        """bootstrap_thread receives ABORT: maybe mark the room Failed; owe an ack."""
        require(s.abort_sent[r])
        s.abort_sent[r] = False
        s.closed[r] = s.ack_closes_room()
        s.ack_due[r] = True

    @action
    def send_ack(s, r: Request):
        """_maybe_ack_drained_abort (or the 2-frame ack on receipt)."""
        require(s.ack_due[r])
        if s.ack_needs_drain():
            require(not (s.inflight == r).any())
        s.ack_due[r] = False
        s.ack_sent[r] = True

    @action
    def receive_ack(s, r: Request):
        """is_abort_release_safe: the held pages are released."""
        require(s.ack_sent[r])
        s.ack_sent[r] = False
        if s.phase[r] == Phase.HELD:
            emit.ack(r)
            s.release(r)

    @action
    def hold_deadline(s, r: Request):
        """resolve_deferred_releases: the hold deadline passed."""
        require(s.phase[r] == Phase.HELD)
        emit.deadline(r)
        if s.releases_at_deadline():
            s.release(r)


class AckOnReceipt(ImmediateRelease):
    def releases_at_abort(s) -> bool:
        return False


class AckWithoutClosingRoom(AckOnReceipt):
    def ack_needs_drain(s) -> bool:
        return True


class DrainAck(AckWithoutClosingRoom):
    def ack_closes_room(s) -> bool:
        return True


class TimeoutRelease(DrainAck):
    def releases_at_deadline(s) -> bool:
        return True


class Quarantine(TimeoutRelease):
    def releases_at_deadline(s) -> bool:
        return False
