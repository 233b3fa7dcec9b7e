"""A disaggregated KV transfer, fail-closed (the good version of the design).

A request takes one destination page, the prefill side posts an RDMA write into
it, and decode commits only once the write has landed. An abort during the transfer
*holds* the page until every write posted into it has landed or been drained; only
then is it released for reuse.
"""
import enum

from kvspec import Model, Page, Pages, Request, Requests, action, emit, invariant, require


class Phase(enum.Enum):
    NEW = 0
    TRANSFER = 1     # page allocated, the write may be posted
    HELD = 2         # aborted: the page is held until the write is quiescent
    RUNNING = 3      # committed, decoding
    DONE = 4


class Transfer(Model):
    requests = Requests(2)
    pages = Pages(2)

    phase = requests.var(Phase, init=Phase.NEW)
    owner = pages.var(requests.optional, init=None)      # decode allocator
    inflight = pages.var(requests.optional, init=None)   # posted write into the page
    landed = pages.var(bool, init=False)                 # the owner's write landed

    @action
    def alloc(s, r: Request, p: Page):
        require(s.phase[r] == Phase.NEW and s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        s.phase[r] = Phase.TRANSFER
        emit.alloc(r, p)

    @action
    def post(s, r: Request, p: Page):
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
    def commit(s, r: Request):
        require(s.phase[r] == Phase.TRANSFER)
        mine = s.owner == r
        require((mine & ~(s.landed == True)).count() == 0)  # noqa: E712
        s.phase[r] = Phase.RUNNING

    @action
    def abort(s, r: Request):
        require(s.phase[r] == Phase.TRANSFER)
        s.phase[r] = Phase.HELD
        emit.abort(r)

    @action
    def release(s, r: Request):
        require(s.phase[r] == Phase.HELD and not (s.inflight == r).any())
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        s.phase[r] = Phase.DONE

    @action
    def decode(s, r: Request):
        require(s.phase[r] == Phase.RUNNING)
        mine = s.owner == r
        emit.read(r, pages=mine)
        emit.decode(r)
        emit.free(r, pages=mine)
        emit.finish(r)
        s.owner[mine] = None
        s.landed[mine] = False
        s.phase[r] = Phase.DONE

    @invariant
    def writes_target_owned_pages(s):
        """A write in flight goes into a page its writer owns."""
        return all(s.inflight[p] is None or s.inflight[p] == s.owner[p] for p in s.pages)
