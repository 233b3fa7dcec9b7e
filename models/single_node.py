"""A single serving node (no PD split): an over-long request is rejected at entry.

Follows ``shared/research/engines.md`` §1 (``scheduler.handle_generate_request`` →
``validate_input_length``) and the seed tutorial's "oversize request on one node"
case: the rejection happens before the request is queued, so no page is
allocated, no KV is written and no decode step runs for it — the pool is left
untouched. Prefill and decode share the node's page pool; prefill writes its KV
pages locally (a write is posted and lands within the forward pass) and decode
reads exactly the pages prefill wrote.

Expected: every property HOLDS.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    QUEUED = 1
    ALLOCATING = 2
    PREFILLED = 3
    DECODED = 4
    DONE = 5


class SingleNode(Model):
    requests = Requests(2)
    pages = Pages(4)
    capacity = Size(2)     # the longest prompt the node accepts, in pages
    max_need = Size(3)     # longest prompt a client may send, in pages

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, "max_need"), init=0)
    refused = requests.var(bool, init=False)
    owner = pages.var(requests.optional, init=None)
    written = pages.var(bool, init=False)

    @action
    def arrive(s, r: Request, n: Int(1, "max_need")):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        s.phase[r] = Phase.QUEUED

    @action
    def admission(s, r: Request):
        """validate_input_length before the request is queued."""
        require(s.phase[r] == Phase.QUEUED)
        if s.need[r] > s.capacity:
            s.refused[r] = True
            s.phase[r] = Phase.DONE
            emit.reject(r)
        else:
            s.phase[r] = Phase.ALLOCATING
            emit.admit(r)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.phase[r] == Phase.ALLOCATING)
        require(s.owner[p] is None and (s.owner == r).count() < s.need[r])
        s.owner[p] = r
        s.written[p] = False
        emit.alloc(r, p)

    @action
    def prefill(s, r: Request):
        """The forward pass writes the KV of every allocated page."""
        require(s.phase[r] == Phase.ALLOCATING and (s.owner == r).count() == s.need[r])
        for p in s.pages:
            if s.owner[p] == r:
                emit.post_write(r, p)
                emit.land_write(r, p)
                s.written[p] = True
        s.phase[r] = Phase.PREFILLED

    @action
    def decode(s, r: Request):
        require(s.phase[r] == Phase.PREFILLED)
        emit.read(r, pages=(s.owner == r) & (s.written == True))  # noqa: E712
        emit.decode(r)
        s.phase[r] = Phase.DECODED

    @action
    def finish(s, r: Request):
        require(s.phase[r] == Phase.DECODED)
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.written[mine] = False
        s.phase[r] = Phase.DONE
        emit.finish(r)
