"""vLLM decode side (KV connector v1, NIXL pull): an abort during an async KV load,
with the merged fix of vLLM PR #32255.

Follows ``shared/research/engines.md`` §3.1 and §3.4:

* D allocates local blocks for a ``do_remote_prefill`` request
  (``update_state_after_alloc``), the request goes to ``WAITING_FOR_REMOTE_KVS``
  and the worker's ``start_load_kv`` issues NIXL READs into those blocks (a write
  into D's pages, in flight until the transfer is ``DONE``).
* The worker polls the transfer (``_pop_done_transfers``: still ``PROC``) every
  engine step; when it is ``DONE``, ``get_finished`` reports the request in
  ``finished_recving`` and the scheduler adds it to
  ``finished_recving_kv_req_ids``; the next ``_update_waiting_for_remote_kv``
  moves it on (``num_computed_tokens`` set, request schedulable).
* Before #32255 an abort freed the blocks at once, under the READ (§3.1 "D-side
  abort"). #32255 *"[BugFix] scheduler: Delay freeing blocks of aborted async
  loads"* keeps them pinned until the load completes (V-S2).
* **This model is the merged fix**, as quoted by #46283: ``if request.status ==
  WAITING_FOR_REMOTE_KVS: delay_free_blocks = (request.request_id not in
  self.finished_recving_kv_req_ids)``. An abort delays the free only while the
  READ has not been reported; if the completion was already reported, nothing is
  in flight and the blocks are freed at once. A held request's blocks are freed
  when its ``finished_recving`` arrives. ``models/vllm_async_load_leak.py`` is the
  first cut, which loses the completion in that race.

Safety holds. Liveness (``kvspec live``): every property HOLDS under the declared
weak fairness of the load completion (``finished_recving``) and of the scheduler
steps (``update_waiting``, ``finish``); without fairness (``--no-fairness``)
``pages-eventually-freed`` is VIOLATED by the run that polls the transfer forever
while its completion is enabled and never taken — the assumption V-L1 needs
(#46283: if P never signals, the held blocks are never reclaimed).
"""
import enum

from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class Status(enum.Enum):
    NEW = 0          # not yet scheduled on D
    WAITING = 1      # WAITING_FOR_REMOTE_KVS: blocks allocated, NIXL READ posted
    RUNNING = 2      # load consumed, schedulable
    DECODED = 3      # ran its decode step
    HELD = 4         # aborted, blocks pinned until the load's finished_recving (delay_free)
    DONE = 5         # finished, blocks freed


class VllmAsyncLoadFixed(Model):
    requests = Requests(2)
    pages = Pages(3)
    properties = ("no-read-beyond-written", "no-reuse-before-drain")  # nothing is rejected

    status = requests.var(Status, init=Status.NEW)
    loading = requests.var(bool, init=False)       # the NIXL READ is in flight
    reported = requests.var(bool, init=False)      # in finished_recving_kv_req_ids
    owner = pages.var(requests.optional, init=None)
    landed = pages.var(bool, init=False)           # the READ's data landed in the block

    @action
    def schedule_remote(s, r: Request, p: Page):
        """get_num_new_matched_tokens(async=True) + update_state_after_alloc: one local
        block; the worker's start_load_kv posts the NIXL READ into it."""
        require(s.status[r] == Status.NEW and s.owner[p] is None)
        s.owner[p] = r
        s.landed[p] = False
        s.status[r] = Status.WAITING
        s.loading[r] = True
        emit.admit(r)
        emit.alloc(r, p)
        emit.post_write(r, p)

    @action
    def poll_transfer(s, r: Request):
        """An engine step while the READ is still PROC: nothing changes."""
        require(s.loading[r])

    @action(fair="weak")
    def finished_recving(s, r: Request):
        """The READ is DONE; get_finished reports it and the scheduler records it for
        a waiting request, or frees the blocks of a held (aborted) one."""
        require(s.loading[r])
        mine = s.owner == r
        s.loading[r] = False
        s.landed[mine] = True
        emit.land_write(r, pages=mine)
        if s.status[r] == Status.WAITING:
            s.reported[r] = True
        elif s.status[r] == Status.HELD:
            emit.free(r, pages=mine)
            s.owner[mine] = None
            s.landed[mine] = False
            s.status[r] = Status.DONE

    @action(fair="weak")
    def update_waiting(s, r: Request):
        """_update_waiting_for_remote_kv: a reported load makes the request runnable."""
        require(s.status[r] == Status.WAITING and s.reported[r])
        s.reported[r] = False
        s.status[r] = Status.RUNNING

    @action
    def decode(s, r: Request):
        """Attention over the loaded block."""
        require(s.status[r] == Status.RUNNING)
        emit.read(r, pages=s.owner == r)
        emit.decode(r)
        s.status[r] = Status.DECODED

    @action(fair="weak")
    def finish(s, r: Request):
        """The request finishes (or stops after its step): _free_blocks."""
        require(s.status[r] == Status.RUNNING or s.status[r] == Status.DECODED)
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.landed[mine] = False
        emit.finish(r)
        s.status[r] = Status.DONE

    @action
    def abort(s, r: Request):
        """finish_requests -> _free_request, merged #32255: delay_free_blocks only if
        the request is not in finished_recving_kv_req_ids (the READ is still in
        flight); a reported load has nothing in flight, so its blocks are freed."""
        require(s.status[r] == Status.WAITING)
        emit.abort(r)
        if s.reported[r]:
            mine = s.owner == r
            emit.free(r, pages=mine)
            s.owner[mine] = None
            s.landed[mine] = False
            s.reported[r] = False
            s.status[r] = Status.DONE
            return
        s.status[r] = Status.HELD
