"""A metadata/aux buffer slot reused across rooms (engines.md §2.4 B7, S9; invariant 8
"MetadataOwnership"; issue #22716 "metadata buffer index collision causes context
corruption").

Decode's ``_pre_alloc`` takes ``metadata_buffer_index := alloc()`` with the pages and
sends it to prefill, whose ``transfer_worker`` writes the aux record (first token,
``bootstrap_room``, …) into that slot with the last chunk; decode reads the slot in
``_commit_transfer_to_req``. On an abort the request's slot is returned to the slot
allocator like its pages, while prefill may still be writing the aux record: the slot
is handed to the next room and the late record lands in it.

The slots use the page id space (``slot_*`` events; this model has no KV pages).

* :class:`SlotFreedOnAbort` — the slot is freed with the abort, and commit takes
  whatever record is in the slot (before the #22716 mitigation).
* :class:`SlotRoomChecked` — the engine's mitigation: ``_commit_transfer_to_req``
  checks that the record's ``bootstrap_room`` is the request's and fails the request
  closed otherwise (the slot is zeroed on free). The design's own invariant
  ``commit_reads_own_record`` (S9) now holds, but a late record still lands in the
  next room's slot, which ``no-slot-reuse-before-drain`` reports: the library watches
  the slot's lifetime, S9 only the reader.
* :class:`SlotHeldUntilDrained` — the slot is held until no aux write is in flight,
  like the pages of ``DrainAck`` in ``abort_release.py``: both hold.

Each differs from the previous one in one guard (``record_accepted``,
``slot_may_free``).

Expected at requests=2, pages=4 (every other library property HOLDS):
SlotFreedOnAbort — no-slot-reuse-before-drain VIOLATED (5 steps),
commit-reads-own-record (7); SlotRoomChecked — no-slot-reuse-before-drain (5),
commit-reads-own-record HOLDS; SlotHeldUntilDrained — all HOLD.
"""
import enum

from kvspec import Model, Page, Pages, Request, Requests, action, emit, invariant, require


class Phase(enum.Enum):
    NEW = 0
    TRANSFER = 1     # slot allocated, prefill will write the aux record
    HELD = 2         # aborted, slot not yet returned
    RUNNING = 3
    DONE = 4


class SlotFreedOnAbort(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-slot-reuse-before-drain",
    )
    requests = Requests(2)
    pages = Pages(4)             # metadata slots

    phase = requests.var(Phase, init=Phase.NEW)
    holder = pages.var(requests.optional, init=None)   # the slot allocator
    writing = pages.var(requests.optional, init=None)  # aux write in flight into the slot
    record = pages.var(requests.optional, init=None)   # whose aux record the slot holds
    foreign = requests.var(bool, init=False)           # committed on another room's record

    def slot_may_free(s, r) -> bool:  # type: ignore[no-untyped-def]
        return True

    def record_accepted(s, r, m) -> bool:  # type: ignore[no-untyped-def]
        """Before the mitigation: any record that arrived is taken."""
        return s.record[m] is not None

    def free_slot(s, r):  # type: ignore[no-untyped-def]
        mine = s.holder == r
        emit.slot_free(r, pages=mine)
        s.holder[mine] = None
        s.record[mine] = None
        s.phase[r] = Phase.DONE

    @action
    def prealloc(s, r: Request, m: Page):
        require(s.phase[r] == Phase.NEW and s.holder[m] is None)
        s.holder[m] = r
        s.phase[r] = Phase.TRANSFER
        emit.admit(r)
        emit.slot_alloc(r, m)

    @action
    def send_aux(s, r: Request, m: Page):
        """Prefill posts the aux record of r's last chunk into the slot it was given."""
        require(s.phase[r] == Phase.TRANSFER and s.holder[m] == r)
        require(s.writing[m] is None and s.record[m] is None)
        s.writing[m] = r
        emit.slot_write(r, m)

    @action
    def land(s, m: Page):
        w = s.writing[m]
        require(w is not None)
        s.writing[m] = None
        s.record[m] = w
        emit.slot_land(w, m)

    @action
    def commit(s, r: Request, m: Page):
        """_commit_transfer_to_req: a record arrived in the slot (poll Success)."""
        require(s.phase[r] == Phase.TRANSFER and s.holder[m] == r and s.record[m] is not None)
        if s.record_accepted(r, m):
            emit.slot_read(r, m)
            s.foreign[r] = s.record[m] != r
            emit.finish(r)
        else:
            emit.abort(r)            # bootstrap_room mismatch: prepare_abort
        s.free_slot(r)

    @invariant
    def commit_reads_own_record(s):
        """S9: a request commits only on the aux record written for its own room."""
        return not s.foreign.any()

    @action
    def abort(s, r: Request):
        require(s.phase[r] == Phase.TRANSFER)
        emit.abort(r)
        s.phase[r] = Phase.HELD

    @action
    def release(s, r: Request):
        """The aborted request's slot goes back to the allocator."""
        require(s.phase[r] == Phase.HELD and s.slot_may_free(r))
        s.free_slot(r)


class SlotRoomChecked(SlotFreedOnAbort):
    def record_accepted(s, r, m) -> bool:  # type: ignore[no-untyped-def]
        """#22716 mitigation: the record's bootstrap_room must be the request's."""
        return s.record[m] == r


class SlotHeldUntilDrained(SlotRoomChecked):
    def slot_may_free(s, r) -> bool:  # type: ignore[no-untyped-def]
        """No aux write of r is in flight."""
        return not (s.writing == r).any()
