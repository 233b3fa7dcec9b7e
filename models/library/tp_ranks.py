"""Multi-rank (TP) transfers: release after the MIN of the ranks' polls vs after every
rank drained (engines.md §2.1 ``poll_and_all_reduce``, §2.4 B4; S8).

Decode polls each TP rank's receiver and reduces with ``poll_and_all_reduce(...,
MIN)`` (``disaggregation/utils.py`` L205). ``KVPoll.Failed`` is 0, so one rank's
``Failed`` becomes the consensus on every rank, which then takes the ``Failed``
branch of ``DecodeTransferQueue`` and releases its pages, "including ranks whose
local writer is still running" (B4, "a consensus Failed reached through the MIN
all-reduce").

The model declares the TP ranks as an index space (``ranks = Ranks(2)``); each
request gets one destination page per rank (the rank is a value stored with the page,
so pages stay interchangeable), and each (request, rank) pair has its own poll result
(``failed = requests.by(ranks).var(bool, ...)``, read ``s.failed[r, k]``): see
``docs/modelling.md`` "Index spaces and two-dimensional state". ``prealloc`` takes one
page per rank by name, so the model is written for two ranks (``maximum=2``).

* :class:`ReleaseAfterMinOfRanks` — the consensus Failed releases every rank's pages.
* :class:`ReleaseAfterEveryRankDrained` — a rank releases only once its own writes
  are quiescent (every rank drained).

They differ only in ``rank_may_release``.

Expected at requests=2, pages=4 (every other library property HOLDS):
ReleaseAfterMinOfRanks — no-reuse-before-drain and both halves VIOLATED (6 steps);
ReleaseAfterEveryRankDrained — all HOLD.
"""
import enum

from kvspec import Model, Page, Pages, Ranks, Request, Requests, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    TRANSFER = 1
    FAILED = 2       # consensus Failed, pages being released rank by rank
    RUNNING = 3
    DONE = 4


class ReleaseAfterMinOfRanks(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-read-beyond-written", "no-reuse-before-drain", "no-reuse-under-write",
        "no-land-after-free",
    )
    requests = Requests(2)
    pages = Pages(4)
    ranks = Ranks(2, maximum=2)

    phase = requests.var(Phase, init=Phase.NEW)
    failed = requests.by(ranks).var(bool, init=False)  # rank k's receiver polled Failed
    owner = pages.var(requests.optional, init=None)
    rank = pages.var(ranks.id, init=0)             # the TP rank whose pool holds the page
    inflight = pages.var(requests.optional, init=None)
    landed = pages.var(bool, init=False)

    def rank_may_release(s, r, k) -> bool:  # type: ignore[no-untyped-def]
        """The MIN consensus is Failed: every rank releases."""
        return True

    def rank_pages(s, r, k):  # type: ignore[no-untyped-def]
        return (s.owner == r) & (s.rank == k)

    @action
    def prealloc(s, r: Request, p0: Page, p1: Page):
        """_pre_alloc on both ranks: page p0 in rank 0's pool, p1 in rank 1's."""
        require(s.phase[r] == Phase.NEW and p0 != p1)
        require(s.owner[p0] is None and s.owner[p1] is None)
        s.owner[p0] = r
        s.owner[p1] = r
        s.rank[p0] = 0
        s.rank[p1] = 1
        s.landed[p0] = False
        s.landed[p1] = False
        s.phase[r] = Phase.TRANSFER
        emit.admit(r)
        emit.alloc(r, p0)
        emit.alloc(r, p1)

    @action
    def send_chunk(s, r: Request, p: Page):
        """The prefill rank paired with the page's rank writes its slice."""
        require(s.phase[r] == Phase.TRANSFER and s.owner[p] == r)
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
    def rank_fails(s, r: Request, k: ranks.id):
        """Rank k's transfer fails (its own write errored out and is quiescent)."""
        require(s.phase[r] == Phase.TRANSFER)
        require(not (s.rank_pages(r, k) & (s.inflight == r)).any())
        s.failed[r, k] = True

    @action
    def all_reduce(s, r: Request):
        """poll_and_all_reduce(MIN): Success needs every rank, one Failed is global."""
        require(s.phase[r] == Phase.TRANSFER)
        if s.failed[r, :].any():
            s.phase[r] = Phase.FAILED
            s.failed[r, :] = False    # the consensus is all that is left of the polls
            emit.abort(r)
            return
        require(not (s.inflight == r).any() and ((s.owner == r) & ~s.landed).count() == 0)
        s.phase[r] = Phase.RUNNING

    @action
    def rank_release(s, r: Request, k: ranks.id):
        """Rank k takes the Failed branch: release_kv_cache of its pages."""
        require(s.phase[r] == Phase.FAILED and s.rank_pages(r, k).any())
        require(s.rank_may_release(r, k))
        mine = s.rank_pages(r, k)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.rank[mine] = 0
        s.landed[mine] = False
        if not ((s.owner == r) & (s.rank != k)).any():
            s.phase[r] = Phase.DONE

    @action
    def decode(s, r: Request):
        require(s.phase[r] == Phase.RUNNING)
        mine = s.owner == r
        emit.read(r, pages=mine)
        emit.decode(r)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.rank[mine] = 0
        s.landed[mine] = False
        emit.finish(r)
        s.phase[r] = Phase.DONE


class ReleaseAfterEveryRankDrained(ReleaseAfterMinOfRanks):
    def rank_may_release(s, r, k) -> bool:  # type: ignore[no-untyped-def]
        """Release only once no write into this rank's pages is in flight."""
        return not (s.rank_pages(r, k) & (s.inflight == r)).any()
