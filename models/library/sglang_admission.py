"""SGLang PD admission rejection, three generations of the same code path.

``scheduler.handle_generate_request`` calls ``validate_input_length``; an over-long
prompt gets ``req.set_finish_with_abort(msg)``, which records the rejection in
``to_finish`` (not ``finished_reason``) and swaps the prompt for a 1-token stub
(``schedule_batch.py`` ``Req.set_finish_with_abort`` L1809, ``Req.finished()``
L1261; engines.md §1, §2.4 B1). Then ``_add_request_to_queue`` puts it into the
prefill bootstrap queue and the decode prealloc queue (``pop_preallocated`` L991
reads only ``finished_reason``), so decode preallocates ``need`` pages from its own
view of the prompt, prefill sends the stub's single page, and decode commits on
"last chunk arrived" (B2).

* :class:`Before36988` — the 08-20 snapshot: ``process_batch_result_disagg_prefill``
  (L658) checks ``is_aborted`` only for middle chunks, so the stub's last chunk is
  sent and decode reads stale pages (issues #30233, #34208, #35421).
* :class:`After36988` — #36988 "Retire aborted disaggregated prefill results":
  prefill retires an aborted request when its final prefill result comes back,
  the last chunk is not sent; decode "sits on it until the transfer timeout"
  (``test_admission_abort_not_enqueued.py``) — the request still entered both queues
  and holds decode pages: not a correctness bug any more, a waste-and-latency one.
* :class:`After38935` — #38935: the rejection is recorded where every gate reads it
  and the request is retired before any queue.

The three differ only in two guards: ``send_last_chunk_of_aborted`` (is the stub's
last chunk sent) and ``enqueues_rejected`` (does a rejected request enter the
queues).

Expected at requests=2, pages=4 (every other library property, opt-in ones too, HOLDS):
Before36988 — no-decode-after-rejection VIOLATED (9 steps), rejection-is-terminal (2:
``enqueue`` right after ``reject``), no-read-beyond-written (9); After36988 —
rejection-is-terminal (2); After38935 — all HOLD.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Phase(enum.Enum):
    NEW = 0          # not yet arrived
    QUEUED = 1       # arrived, admission not yet decided
    BOOTSTRAP = 2    # in the bootstrap/prealloc queues of both sides
    TRANSFER = 3     # decode pages preallocated, metadata sent
    RUNNING = 4      # transfer committed
    DONE = 5


class Before36988(Model):
    #: the library properties whose events this design emits (the others hold vacuously)
    properties = (
        "no-decode-after-rejection", "rejection-is-terminal", "no-read-beyond-written",
        "no-reuse-before-drain", "no-reuse-under-write", "no-land-after-free",
    )
    requests = Requests(2)
    pages = Pages(4)
    prefill_capacity = Size(2)   # max_total_num_tokens, in pages
    max_need = Size(3)           # longest prompt, in pages

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, "max_need"), init=0)        # decode's view of the prompt
    to_finish = requests.var(bool, init=False)             # FINISH_ABORT in to_finish
    retired = requests.var(bool, init=False)               # prefill retired the result
    sent = requests.var(Int(0, "max_need"), init=0)        # chunks prefill posted
    owner = pages.var(requests.optional, init=None)
    inflight = pages.var(requests.optional, init=None)
    landed = pages.var(bool, init=False)

    def send_last_chunk_of_aborted(s) -> bool:
        """Before #36988: is_aborted is checked for middle chunks only."""
        return True

    def enqueues_rejected(s) -> bool:
        """Before #38935: a rejected request is still added to the queues."""
        return True

    def chunks(s, r):  # type: ignore[no-untyped-def]
        """Prefill's page count: the stub has one page."""
        return 1 if s.to_finish[r] else s.need[r]

    @action
    def arrive(s, r: Request, n: Int(1, "max_need")):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        s.phase[r] = Phase.QUEUED

    @action
    def admission(s, r: Request):
        """validate_input_length, then _add_request_to_queue."""
        require(s.phase[r] == Phase.QUEUED)
        if s.need[r] > s.prefill_capacity:
            s.to_finish[r] = True
            emit.reject(r)
            if not s.enqueues_rejected():
                s.phase[r] = Phase.DONE
                return
        else:
            emit.admit(r)
        s.phase[r] = Phase.BOOTSTRAP
        emit.enqueue(r)

    @action
    def prealloc(s, r: Request, p: Page):
        """pop_preallocated/_pre_alloc: reads finished_reason only, never to_finish."""
        require(s.phase[r] == Phase.BOOTSTRAP and s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        emit.alloc(r, p)
        if (s.owner == r).count() == s.need[r]:
            s.phase[r] = Phase.TRANSFER

    @action
    def send_chunk(s, r: Request, p: Page):
        """Prefill posts its next chunk; the last one of an aborted request only if
        the guard lets it (#36988 retires the result instead)."""
        require(s.phase[r] == Phase.TRANSFER and s.sent[r] < s.chunks(r))
        require(s.owner[p] == r and s.inflight[p] is None and not s.landed[p])
        require(not s.retired[r])
        if s.to_finish[r] and not s.send_last_chunk_of_aborted():
            s.retired[r] = True
            return
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
    def transfer_success(s, r: Request):
        """Success once prefill's last chunk landed (no coverage check, B2)."""
        require(s.phase[r] == Phase.TRANSFER and s.sent[r] == s.chunks(r))
        require(not (s.inflight == r).any())
        s.phase[r] = Phase.RUNNING

    @action
    def transfer_timeout(s, r: Request):
        """Decode's waiting timeout for a request whose result prefill retired."""
        require(s.phase[r] == Phase.TRANSFER and s.retired[r])
        mine = s.owner == r
        emit.deadline(r)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        emit.abort(r)
        s.phase[r] = Phase.DONE

    @action
    def decode(s, r: Request):
        """Attention over every preallocated page, then the response; pages freed."""
        require(s.phase[r] == Phase.RUNNING)
        mine = s.owner == r
        emit.read(r, pages=mine)
        emit.decode(r)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        emit.finish(r)
        s.phase[r] = Phase.DONE


class After36988(Before36988):
    def send_last_chunk_of_aborted(s) -> bool:
        """#36988: the aborted request's final prefill result is retired, not sent."""
        return False


class After38935(After36988):
    def enqueues_rejected(s) -> bool:
        """#38935: the rejection is terminal before any queue."""
        return False
