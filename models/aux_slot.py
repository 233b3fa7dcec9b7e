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

* :class:`SlotFreedOnAbort` — the slot is freed with the abort.
* :class:`SlotHeldUntilDrained` — the slot is held until the aux write landed (or was
  never posted), like the pages of ``DrainAck`` in ``abort_release.py``.

They differ only in ``slot_may_free``. The engine's own mitigation (check
``bootstrap_room`` in the slot on commit, zero it on free) keeps S9 for the reader
but still lets a late record land in the next room's slot, which
``no-slot-reuse-before-drain`` reports (see its documentation).
"""
import enum

from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    TRANSFER = 1     # slot allocated, prefill will write the aux record
    HELD = 2         # aborted, slot not yet returned
    RUNNING = 3
    DONE = 4


class SlotFreedOnAbort(Model):
    requests = Requests(2)
    pages = Pages(4)             # metadata slots

    phase = requests.var(Phase, init=Phase.NEW)
    holder = pages.var(requests.optional, init=None)   # the slot allocator
    writing = pages.var(requests.optional, init=None)  # aux write in flight into the slot
    filled = pages.var(bool, init=False)               # the holder's record landed

    def slot_may_free(s, r) -> bool:  # type: ignore[no-untyped-def]
        return True

    def free_slot(s, r):  # type: ignore[no-untyped-def]
        mine = s.holder == r
        emit.slot_free(r, pages=mine)
        s.holder[mine] = None
        s.filled[mine] = False
        s.phase[r] = Phase.DONE

    @action
    def prealloc(s, r: Request, m: Page):
        require(s.phase[r] == Phase.NEW and s.holder[m] is None)
        s.holder[m] = r
        s.filled[m] = False
        s.phase[r] = Phase.TRANSFER
        emit.admit(r)
        emit.slot_alloc(r, m)

    @action
    def send_aux(s, r: Request, m: Page):
        """Prefill posts the aux record of r's last chunk into the slot it was given."""
        require(s.phase[r] == Phase.TRANSFER and s.holder[m] == r)
        require(s.writing[m] is None and not s.filled[m])
        s.writing[m] = r
        emit.slot_write(r, m)

    @action
    def land(s, m: Page):
        w = s.writing[m]
        require(w is not None)
        s.writing[m] = None
        s.filled[m] = s.holder[m] == w
        emit.slot_land(w, m)

    @action
    def commit(s, r: Request, m: Page):
        """_commit_transfer_to_req reads the slot; the request runs and finishes."""
        require(s.phase[r] == Phase.TRANSFER and s.holder[m] == r and s.filled[m])
        emit.slot_read(r, m)
        emit.finish(r)
        s.free_slot(r)

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


class SlotHeldUntilDrained(SlotFreedOnAbort):
    def slot_may_free(s, r) -> bool:  # type: ignore[no-untyped-def]
        """No aux write of r is in flight."""
        return not (s.writing == r).any()
