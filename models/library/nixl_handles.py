"""NIXL: an error on one transfer handle while its siblings still write (SGLang
``nixl/conn.py`` L1121-1406, engines.md §2.3, §2.4 B4; vLLM #56104; NIXL
``releaseXferReq``).

The sender posts one NIXL WRITE handle per slice (``agent.transfer(handle)``) and
polls ``check_xfer_state`` until every handle is ``DONE``. On ``ERR`` the DONE
barrier bails at once and the room is marked ``Failed``: "No ack here on purpose: the
DONE barrier bails on the first ERR, so siblings may still be writing; fall back to
the timeout" — and decode then frees the pages on that failure/timeout. NIXL's own
rule: a transfer is quiescent iff its status is ``DONE`` or ``releaseXferReq``
returned success ("calls to releaseXferReq would return error until the transfer is
completed").

Each request has ``len(s.handles)`` handles (an index space, ``handles = Handles(2)``,
``--size handles=3`` for three), one destination page each. A handle's state lives
on its page (``hstate``): the handles map one-to-one to pages, and a handle that is
still writing outlives its request's ownership of the page (the stale write the bug
is about), so its state belongs to the page, not to the (request, handle) pair — a
``requests.by(handles)`` variable would have to name the page each handle writes,
and a variable holding page ids turns page symmetry off.

* :class:`ReleaseOnFirstError` — the first ``ERR`` releases every page of the request.
* :class:`ReleaseWhenEveryHandleQuiescent` — release once every handle is ``DONE``
  or ``ERR`` with ``releaseXferReq`` returned (no handle still ``PROC``).

They differ only in ``may_release``.

Expected at requests=2, pages=4 (every other library property HOLDS):
ReleaseOnFirstError — no-reuse-before-drain and both halves VIOLATED (7 steps),
no-read-beyond-written (13: the sibling's late write lands in the next request's page,
which reads it); ReleaseWhenEveryHandleQuiescent — all HOLD.
"""
import enum

from kvspec import Handles, Model, Page, Pages, Request, Requests, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    TRANSFER = 1
    FAILED = 2
    RUNNING = 3
    DONE = 4


class Handle(enum.Enum):
    IDLE = 0         # not posted
    PROC = 1         # posted, in progress
    DONE = 2
    ERR = 3          # failed; this handle is quiescent (releaseXferReq succeeded)


class ReleaseOnFirstError(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-read-beyond-written", "no-reuse-before-drain", "no-reuse-under-write",
        "no-land-after-free",
    )
    requests = Requests(2)
    pages = Pages(4)
    handles = Handles(2)        # NIXL WRITE handles per request, one page each

    phase = requests.var(Phase, init=Phase.NEW)
    owner = pages.var(requests.optional, init=None)
    hstate = pages.var(Handle, init=Handle.IDLE)   # the handle writing into the page
    writer = pages.var(requests.optional, init=None)  # whose handle it is
    landed = pages.var(bool, init=False)

    def may_release(s, r) -> bool:  # type: ignore[no-untyped-def]
        """The DONE barrier bailed on the first ERR: release now."""
        return True

    @action
    def prealloc(s, r: Request, p: Page):
        require(s.phase[r] == Phase.NEW and s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        if s.hstate[p] != Handle.PROC:      # a stale handle still writing keeps its state
            s.hstate[p] = Handle.IDLE
        emit.alloc(r, p)
        if (s.owner == r).count() == len(s.handles):
            s.phase[r] = Phase.TRANSFER
            emit.admit(r)

    @action
    def post(s, r: Request, p: Page):
        """postXferReq of the page's handle: NIXL_IN_PROG."""
        require(s.phase[r] == Phase.TRANSFER and s.owner[p] == r)
        require(s.hstate[p] == Handle.IDLE)
        s.hstate[p] = Handle.PROC
        s.writer[p] = r
        emit.post_write(r, p)

    @action
    def complete(s, p: Page):
        """The handle's WRITE finishes (DONE), possibly after the page was freed."""
        w = s.writer[p]
        require(s.hstate[p] == Handle.PROC and w is not None)
        s.hstate[p] = Handle.DONE
        s.writer[p] = None
        s.landed[p] = s.owner[p] == w
        emit.land_write(w, p)

    @action
    def error(s, p: Page):
        """check_xfer_state returns ERR for this handle; the room is Failed."""
        w = s.writer[p]
        require(s.hstate[p] == Handle.PROC and w is not None)
        s.hstate[p] = Handle.ERR
        s.writer[p] = None
        emit.drain(w, p)
        if s.phase[w] == Phase.TRANSFER:
            s.phase[w] = Phase.FAILED
            emit.abort(w)

    @action
    def transfer_done(s, r: Request):
        """Every handle DONE: the transfer succeeded."""
        require(s.phase[r] == Phase.TRANSFER)
        require(((s.owner == r) & (s.hstate != Handle.DONE)).count() == 0)
        s.phase[r] = Phase.RUNNING

    @action
    def release(s, r: Request):
        """Decode's Failed branch: release_kv_cache of the request's pages."""
        require(s.phase[r] == Phase.FAILED and s.may_release(r))
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
        s.owner[mine] = None
        s.landed[mine] = False
        emit.finish(r)
        s.phase[r] = Phase.DONE


class ReleaseWhenEveryHandleQuiescent(ReleaseOnFirstError):
    def may_release(s, r) -> bool:  # type: ignore[no-untyped-def]
        """No handle of the request is still in progress."""
        return not ((s.writer == r) & (s.hstate == Handle.PROC)).any()
