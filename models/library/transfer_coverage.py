"""Transfer success without coverage (engines.md §2.4 B2) and the coverage check.

Decode ``_pre_alloc`` sizes the destination by its own ``kv_committed_len``; the
Mooncake ``transfer_worker`` writes only the slices prefill sends
(``mooncake/conn.py`` L1720-1745) and reports ``Success`` once the last chunk and the
aux record are out (L1899); decode's ``_commit_transfer_to_req`` checks only
``bootstrap_room``. Nothing compares prefill's page count with decode's: with
asymmetric pools (#35421, "decode pool > prefill pool") prefill sends fewer pages than
decode allocated, and decode reads the rest, stale (#30233, #34208).

* :class:`SuccessWithoutCoverage` — commit on "last chunk arrived".
* :class:`CoverageCheck` — #38704 ("publish logical KV sequence coverage … validate
  against the preallocated decode length"): commit only when every preallocated page
  received its write; otherwise the request fails closed (pages freed, nothing read).

They differ only in ``covered``. Expected at requests=2, pages=4 (every other library
property HOLDS): SuccessWithoutCoverage — no-read-beyond-written VIOLATED (7 steps);
CoverageCheck — all HOLD.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    PREALLOC = 1     # decode is preallocating
    TRANSFER = 2     # metadata sent, prefill writing
    RUNNING = 3      # committed
    DONE = 4


class SuccessWithoutCoverage(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-read-beyond-written", "no-reuse-before-drain", "no-reuse-under-write",
        "no-land-after-free",
    )
    requests = Requests(2)
    pages = Pages(4)
    prefill_capacity = Size(1)   # pages the prefill side holds for one request
    max_need = Size(2)

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, "max_need"), init=0)
    sent = requests.var(Int(0, "max_need"), init=0)
    owner = pages.var(requests.optional, init=None)
    inflight = pages.var(requests.optional, init=None)
    landed = pages.var(bool, init=False)

    def covered(s, r) -> bool:  # type: ignore[no-untyped-def]
        """Before #38704: the last chunk arrived, nothing more is checked."""
        return True

    def chunks(s, r):  # type: ignore[no-untyped-def]
        """What prefill sends: at most what its pool holds."""
        return min(s.need[r], s.prefill_capacity)

    @action
    def arrive(s, r: Request, n: Int(1, "max_need")):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        s.phase[r] = Phase.PREALLOC
        emit.admit(r)

    @action
    def prealloc(s, r: Request, p: Page):
        require(s.phase[r] == Phase.PREALLOC and s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        emit.alloc(r, p)
        if (s.owner == r).count() == s.need[r]:
            s.phase[r] = Phase.TRANSFER

    @action
    def send_chunk(s, r: Request, p: Page):
        require(s.phase[r] == Phase.TRANSFER and s.sent[r] < s.chunks(r))
        require(s.owner[p] == r and s.inflight[p] is None and not s.landed[p])
        s.sent[r] = s.sent[r] + 1
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
    def last_chunk_arrived(s, r: Request):
        """poll == Success: commit if covered, else fail closed."""
        require(s.phase[r] == Phase.TRANSFER and s.sent[r] == s.chunks(r))
        require(not (s.inflight == r).any())
        if s.covered(r):
            s.phase[r] = Phase.RUNNING
            return
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        emit.abort(r)
        s.phase[r] = Phase.DONE

    @action
    def decode(s, r: Request):
        require(s.phase[r] == Phase.RUNNING)
        mine = s.owner == r
        emit.read(r, pages=mine)
        emit.decode(r)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        emit.finish(r)
        s.phase[r] = Phase.DONE


class CoverageCheck(SuccessWithoutCoverage):
    def covered(s, r) -> bool:  # type: ignore[no-untyped-def]
        """#38704: every preallocated page received its write."""
        return ((s.owner == r) & ~s.landed).count() == 0
