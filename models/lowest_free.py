"""Fail-closed PD disaggregation with a lowest-free-page allocator and needs up to the pool.

The same fail-closed design as ``patched.py`` (terminal rejection before any
handoff, commit only with full coverage, release only after drain; see
``shared/research/engines.md`` §2.2 and the B2/B3/B4 findings), with two
differences in how decode allocates its destination pages:

* **A request may need the whole pool.** An arriving request needs 1 to
  ``pages + 1`` pages (not a small ``max_need``); admission rejects, terminally,
  one that needs more than the whole decode pool (``validate_input_length``
  against the pool's capacity), so an admitted request needs up to ``pages``.
* **Prealloc takes the lowest-numbered free pages, all at once, or waits.**
  Decode's ``_pre_alloc`` (engines.md §2.2: ``pop_preallocated`` → ``_pre_alloc``
  → ``allocator.alloc_extend(fill_len)``, then ``send_metadata(page_indices)``)
  asks the token-to-KV pool allocator for every page of the request in one call.
  SGLang's paged allocator (``mem_cache/allocator.py``,
  ``PagedTokenToKVPoolAllocator.alloc``/``alloc_extend``) hands out the *front* of
  its ``free_pages`` list and returns ``None`` when fewer pages are free than
  asked for — the request then stays in the prealloc queue (fail-closed: no
  partial allocation, no metadata sent). Freed pages are appended to
  ``release_pages`` and merged back *sorted* (``merge_and_sort_free`` when
  ``need_sort`` is set), so the front of the free list is always the
  lowest-numbered free pages. That makes page ids *ordered*: this model is not
  symmetric in its pages (``kvspec show`` says why), only in its requests.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require


def beyond_pool(sizes: dict[str, int]) -> int:
    """The largest need a client may send: one page more than the decode pool."""
    return sizes["pages"] + 1


class Phase(enum.Enum):
    NEW = 0          # not yet arrived
    QUEUED = 1       # arrived, admission not yet decided
    BOOTSTRAP = 2    # admitted: waiting in the prealloc queue for enough free pages
    TRANSFER = 3     # every page preallocated, metadata sent, prefill may write
    HELD = 4         # aborted: pages held until every posted write drained
    RUNNING = 5      # transfer committed, decoding
    DECODED = 6      # ran its decode step, response not yet sent
    DONE = 7


class Reason(enum.Enum):
    NONE = 0
    ABORT = 1        # FINISH_ABORT (rejection, abort, transfer failure)
    LENGTH = 2       # finished normally


class LowestFreePD(Model):
    requests = Requests(2)
    pages = Pages(4)

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, beyond_pool), init=0)
    finished_reason = requests.var(Reason, init=Reason.NONE)
    timed_out = requests.var(bool, init=False)            # a warning, never a release
    sent = requests.var(Int(0, "pages"), init=0)          # chunks prefill has posted
    owner = pages.var(requests.optional, init=None)       # decode allocator
    inflight = pages.var(requests.optional, init=None)    # posted write into the page
    landed = pages.var(bool, init=False)                  # the owner's write landed

    @action
    def arrive(s, r: Request, n: Int(1, beyond_pool)):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        s.phase[r] = Phase.QUEUED

    @action
    def admission(s, r: Request):
        """validate_input_length: a request larger than the whole pool is rejected,
        terminally, before any queue."""
        require(s.phase[r] == Phase.QUEUED)
        if s.need[r] > len(s.pages):
            s.finished_reason[r] = Reason.ABORT
            s.phase[r] = Phase.DONE
            emit.reject(r)
            return
        s.phase[r] = Phase.BOOTSTRAP
        emit.admit(r)

    @action
    def prealloc(s, r: Request):
        """_pre_alloc → alloc_extend: the ``need`` lowest-numbered free pages at once,
        or nothing (the request keeps waiting) when fewer are free."""
        require(s.phase[r] == Phase.BOOTSTRAP and s.finished_reason[r] == Reason.NONE)
        require(s.owner.is_none().count() >= s.need[r])
        taken = 0
        for p in s.pages:
            if s.owner[p] is None and taken < s.need[r]:
                s.owner[p] = r
                s.landed[p] = False
                emit.alloc(r, p)
                taken = taken + 1
        s.phase[r] = Phase.TRANSFER                        # send_metadata(page_indices)

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
        require(not (s.inflight == r).any())
        require(((s.owner == r) & ~s.landed).count() == 0)
        s.phase[r] = Phase.RUNNING

    @action
    def abort(s, r: Request):
        """Client abort or transfer failure before the commit: the room is marked
        Failed, prefill admits no new chunk, decode defers the release."""
        require(s.phase[r] == Phase.TRANSFER or s.phase[r] == Phase.BOOTSTRAP)
        s.finished_reason[r] = Reason.ABORT
        s.phase[r] = Phase.HELD
        emit.abort(r)

    @action
    def drain_ack(s, r: Request, p: Page):
        """Prefill cancelled the posted write and acknowledged the drain."""
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
        """_do_release once every write into the request's pages is quiescent; the
        pages go back to the free list (merged back in sorted order)."""
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
