"""SGLang PD disaggregation *before* the admission fix: a rejected request keeps going.

Follows ``shared/research/engines.md`` §1 and §2.4 B1/B2 (SGLang ``ShangmingCai/sglang``
@ a4ffb996db3e, before #36988 and #38935):

* ``scheduler.handle_generate_request`` calls ``validate_input_length`` and, for an
  over-long prompt, ``Req.set_finish_with_abort`` — which sets ``to_finish`` (not
  ``finished_reason``) and swaps the prompt for a one-token stub
  (``origin_input_ids = [0]``), then still enqueues the request (L2631–2638).
* ``Req.finished()`` reads only ``finished_reason``; so do ``pop_preallocated``
  (L991) and the inflight Success branch. Every admission gate lets it through
  (PR #38935 text).
* Decode's ``_pre_alloc`` sizes the destination by *decode's* own
  ``origin_input_ids`` — the full length — while prefill's ``finalize_bootstrap``
  computes ``num_pages`` from the stub: one page.
* Mooncake writes only the slices prefill sends and reports ``Success`` after the
  last chunk; decode's ``_commit_transfer_to_req`` checks only ``bootstrap_room``,
  never coverage (B2).
* Decode attention then reads all preallocated pages — pages that still hold an
  earlier request's KV (#30233, #34208: "may even return results that belong to
  other requests").

Expected: VIOLATED for no-decode-after-rejection, rejection-is-terminal and
no-read-beyond-written.
"""
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Phase(enum.Enum):
    NEW = 0          # not yet arrived
    QUEUED = 1       # arrived, admission not yet decided
    BOOTSTRAP = 2    # admitted to the bootstrap/prealloc queues on both sides
    TRANSFER = 3     # decode pages preallocated, metadata sent, prefill may write
    RUNNING = 4      # transfer reported Success, decoding
    DECODED = 5      # ran its decode step, response not yet sent
    DONE = 6


class Reason(enum.Enum):
    NONE = 0
    ABORT = 1        # FINISH_ABORT
    LENGTH = 2       # finished normally


class BuggyPD(Model):
    requests = Requests(2)
    pages = Pages(4)
    prefill_capacity = Size(2)   # pages of KV the prefill node can hold for one request
    max_need = Size(3)           # longest prompt, in pages

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, "max_need"), init=0)        # decode's view of the prompt
    to_finish = requests.var(bool, init=False)              # set by set_finish_with_abort
    finished_reason = requests.var(Reason, init=Reason.NONE)
    stub = requests.var(bool, init=False)                   # prompt swapped for [0]
    sent = requests.var(Int(0, "max_need"), init=0)         # chunks prefill has posted
    owner = pages.var(requests.optional, init=None)         # decode allocator
    inflight = pages.var(requests.optional, init=None)      # posted write into the page
    landed = pages.var(bool, init=False)                    # a write for the owner landed

    @action
    def arrive(s, r: Request, n: Int(1, "max_need")):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        s.phase[r] = Phase.QUEUED

    @action
    def admission(s, r: Request):
        """validate_input_length; the rejection only sets to_finish."""
        require(s.phase[r] == Phase.QUEUED)
        if s.need[r] > s.prefill_capacity:
            s.to_finish[r] = True      # set_finish_with_abort: to_finish, not finished_reason
            s.stub[r] = True           # origin_input_ids = [0]
            emit.reject(r)
        else:
            emit.admit(r)
        s.phase[r] = Phase.BOOTSTRAP   # _add_request_to_queue runs either way

    @action
    def prealloc(s, r: Request, p: Page):
        """DecodePreallocQueue.pop_preallocated / _pre_alloc: one destination page."""
        require(s.phase[r] == Phase.BOOTSTRAP)
        require(s.finished_reason[r] == Reason.NONE)   # reads finished_reason only
        require(s.owner[p] is None and s.inflight[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        emit.alloc(r, p)
        if (s.owner == r).count() == s.need[r]:        # sized by decode's full prompt
            s.phase[r] = Phase.TRANSFER                # send_metadata(page_indices)

    @action
    def send_chunk(s, r: Request, p: Page):
        """Prefill transfer_worker posts an RDMA write of its next chunk into p."""
        require(s.phase[r] == Phase.TRANSFER)
        require(s.owner[p] == r and s.inflight[p] is None and not s.landed[p])
        prefill_pages = 1 if s.stub[r] else s.need[r]  # finalize_bootstrap on the stub
        require(s.sent[r] < prefill_pages)
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
        """Last chunk sent and acknowledged: Success. _commit_transfer_to_req checks
        only bootstrap_room, not how many pages were written (B2)."""
        require(s.phase[r] == Phase.TRANSFER)
        prefill_pages = 1 if s.stub[r] else s.need[r]
        require(s.sent[r] == prefill_pages)
        require(not (s.inflight == r).any())
        s.phase[r] = Phase.RUNNING

    @action
    def decode(s, r: Request):
        """Decode attention reads req_to_token[:seq_len]: every preallocated page."""
        require(s.phase[r] == Phase.RUNNING)
        emit.read(r, pages=s.owner == r)
        emit.decode(r)
        s.phase[r] = Phase.DECODED

    @action
    def finish(s, r: Request):
        """The response is sent; release_kv_cache frees the pages (data stays in them)."""
        require(s.phase[r] == Phase.DECODED)
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        s.finished_reason[r] = Reason.LENGTH
        s.phase[r] = Phase.DONE
        emit.finish(r)
