"""Stale drain acks: acks keyed by room vs by (room, generation) (engines.md §2.4 B5, S7).

Decode's ``register_deferred_abort_room(room)`` re-creates an empty ack set keyed by
``room`` (``common/conn.py`` ``_deferred_abort_ack_tracker[room]``), and
``is_abort_release_safe(room, required_acks)`` releases the held pages once the
expected prefill ranks acked. Rooms are reused; prefill acks every ``ABORT`` frame it
gets for a closed, drained room (§2.3 ABORT handling step 2), so an ack of an earlier
use of the room can arrive after the room was handed to a new request, which aborts
and is held with a write in flight: the stale ack releases its pages under the write.
A later upstream test keys the acks by ``(room, generation)``:
``register_deferred_abort_room(41, 4, expected_ranks={0,1})``.

Request ids are rooms: a room's uses are generations of the same id (``retire``
ends one). The generation is a bounded counter that does not wrap: a room has
``max_gen + 1`` uses, then it is retired for good (``docs/modelling.md``,
"Generations and epochs": a counter that wraps at 2 makes the fixed design fail
with an ABA ack after two reuses, which is the model's artefact, not the design's).

* :class:`AckKeyedByRoom` — any ack of the room releases its held pages.
* :class:`AckKeyedByRoomGeneration` — an ack whose generation is not the room's
  current one is dropped.

They differ only in ``ack_is_current``.

Expected at requests=2, pages=4 (every other library property HOLDS): AckKeyedByRoom —
ack-after-drain VIOLATED (9 steps), no-reuse-before-drain and both halves (10);
AckKeyedByRoomGeneration — all HOLD.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Phase(enum.Enum):
    IDLE = 0         # the room is free
    TRANSFER = 1     # a page allocated, prefill may write
    HELD = 2         # aborted, pages held until a drain ack
    RUNNING = 3
    DONE = 4         # the room used all its generations


class AckKeyedByRoom(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-read-beyond-written", "no-reuse-before-drain", "no-reuse-under-write",
        "no-land-after-free", "ack-after-drain",
    )
    requests = Requests(2)       # rooms
    pages = Pages(4)
    max_gen = Size(1)            # a room is used max_gen + 1 times

    phase = requests.var(Phase, init=Phase.IDLE)
    gen = requests.var(Int(0, "max_gen"), init=0)           # the room's current use (no wrap)
    closed = requests.var(bool, init=False)         # prefill marked the room Failed
    closed_gen = requests.var(Int(0, "max_gen"), init=0)    # ... for this generation
    ack_sent = requests.var(bool, init=False)       # an ABORT_ACK in transit
    ack_gen = requests.var(Int(0, "max_gen"), init=0)       # the generation it acks
    owner = pages.var(requests.optional, init=None)
    inflight = pages.var(requests.optional, init=None)
    landed = pages.var(bool, init=False)

    def ack_is_current(s, r) -> bool:  # type: ignore[no-untyped-def]
        """Keyed by room: every ack of the room counts."""
        return True

    def release(s, r):  # type: ignore[no-untyped-def]
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        emit.retire(r)
        if s.gen[r] == s.max_gen:
            s.phase[r] = Phase.DONE
        else:
            s.phase[r] = Phase.IDLE
            s.gen[r] = s.gen[r] + 1

    @action
    def prealloc(s, r: Request, p: Page):
        """A new request in room r: one destination page."""
        require(s.phase[r] == Phase.IDLE and s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        s.closed[r] = False
        s.phase[r] = Phase.TRANSFER
        emit.admit(r)
        emit.alloc(r, p)

    @action
    def send_chunk(s, r: Request, p: Page):
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
        """receiver.abort(); prefill marks the room Failed (this generation)."""
        require(s.phase[r] == Phase.TRANSFER)
        s.phase[r] = Phase.HELD
        s.closed[r] = True
        s.closed_gen[r] = s.gen[r]
        emit.abort(r)
        emit.abort_msg(r)

    @action
    def send_ack(s, r: Request):
        """Prefill acks an ABORT of a closed room with nothing outstanding (also a
        repeated ABORT: the ack is idempotent on prefill's side)."""
        require(s.closed[r] and not s.ack_sent[r] and not (s.inflight == r).any())
        s.ack_sent[r] = True
        s.ack_gen[r] = s.closed_gen[r]

    @action
    def receive_ack(s, r: Request):
        """is_abort_release_safe for the room."""
        require(s.ack_sent[r])
        s.ack_sent[r] = False
        if s.phase[r] == Phase.HELD and s.ack_is_current(r):
            emit.ack(r)
            s.release(r)


class AckKeyedByRoomGeneration(AckKeyedByRoom):
    def ack_is_current(s, r) -> bool:  # type: ignore[no-untyped-def]
        """Keyed by (room, generation): a stale ack is dropped."""
        return s.ack_gen[r] == s.gen[r]
