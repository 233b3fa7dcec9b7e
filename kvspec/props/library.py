"""The engine-neutral property library, written as a monitor in the model language.

The monitor's state is updated by lifecycle events only, so the properties mean
the same for every model that emits the vocabulary of :mod:`kvspec.props.events`.
Its handlers are lowered like action bodies, so every engine (explicit, BMC,
PDR, Hypothesis, replay) checks exactly the same monitor.

Properties (``docs/modelling.md`` has the long form). The default selection
(:data:`LIBRARY`):

* ``no-decode-after-rejection`` — after ``reject(r)`` no ``read``/``decode`` of ``r``
  until ``retire(r)`` (the id recycled for a new request).
* ``rejection-is-terminal`` — after ``reject(r)`` no ``enqueue``, ``alloc``,
  ``post_write``, ``read`` or ``decode`` of ``r`` until ``retire(r)`` (no handoff, no
  wasted pages).
* ``no-read-beyond-written`` — ``read(r, p)`` only if ``p`` is allocated to ``r``,
  the last write that landed in ``p`` since that allocation was ``r``'s, and no
  write into ``p`` is still in flight.
* ``no-reuse-before-drain`` — a named group of its two halves, violated when either is
  (its shortest counterexample is the shorter of theirs):

  * ``no-reuse-under-write`` — ``alloc(r2, p)`` never while a write posted by another
    request into ``p`` has neither landed nor been drained;
  * ``no-land-after-free`` — a write never lands in a page its writer does not own
    (freed, or handed to another request).

Selected by name only (:data:`OPT_IN`; :data:`ALL` is both): the two halves above, and

* ``no-source-reuse-before-read`` — source pages (``src_*`` events).
* ``no-slot-reuse-before-drain`` — metadata/aux slots (``slot_*`` events).
* ``ack-after-drain`` — acks (``ack`` events).

Each property's ``doc`` (below, and ``docs/modelling.md``) says what it watches and
where it may disagree with a design's own invariant.

In-flight writes are counted per (page, writer) — ``page_inflight_by[p, w]`` — so
both properties mean exactly their sentence for any number of concurrent writers;
a violation message lists the requests whose writes are in flight. A ``land_write``
or ``drain`` with no write of that request in flight is a synchronous write (there
is nothing to count down).

The count is exact up to a bound ``K`` (``inflight_bound``, 2 unless the run raises
it); one more post makes it ``K + 1``, which stands for "more than ``K``, no longer
counted" and stays there: such a page is treated as having a write in flight from
then on. That over-approximates (it can only add violations, never hide one), so
a HOLDS or PROVED verdict is exact for any number of posts; a counterexample that
passes through a saturated count is not trusted — the run is repeated with a larger
bound (:mod:`kvspec.engines.refine`) until the counterexample is exact. The source
reads and slot writes are counted the same way (:data:`COUNTED_VARS`; the properties
reading a count are :data:`COUNTING`).

Each property has its own monitor variables (``NEEDS``): only those of the selected
properties are considered, and of those only the ones an event the model emits can
move away from their initial value (``ESCAPES``) are stored. Every other update
keeps a variable at its initial value (freeing a page that was never allocated
leaves its owner ``None``, a synchronous landing leaves the count at 0), so an
unstored variable reads as its initial value everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvspec.lang.declare import VarDecl
from kvspec.lang.runtime import violate
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST, Int, OptionalRef

#: writes of one request into one page counted exactly by default; ``K + 1`` means
#: "more than K" (see the module docstring)
INFLIGHT_BOUND = 2
#: the bounds a run tries in turn while a counterexample passes a saturated count
INFLIGHT_BOUNDS = (2, 6, 14)

NDAR = "no-decode-after-rejection"
RIT = "rejection-is-terminal"
NRBW = "no-read-beyond-written"
NRBD = "no-reuse-before-drain"
NRUW = "no-reuse-under-write"
NLAF = "no-land-after-free"
NSRR = "no-source-reuse-before-read"
NSRD = "no-slot-reuse-before-drain"
AAD = "ack-after-drain"

#: a named group: the property that means "every member holds" (each member is also a
#: property of its own; the group keeps the name and the verdicts it always had)
GROUPS: dict[str, tuple[str, ...]] = {NRBD: (NRUW, NLAF)}


@dataclass(frozen=True)
class PropertyInfo:
    name: str
    summary: str
    events: tuple[str, ...]  # the events that can violate it
    doc: str = ""            # what it watches; where it may disagree with a design's invariant


LIBRARY: dict[str, PropertyInfo] = {
    NDAR: PropertyInfo(NDAR, "once reject(r) happened, no read or decode of r follows",
                       ("reject", "read", "decode")),
    RIT: PropertyInfo(RIT, "once reject(r) happened, no alloc, post_write, read or decode of r",
                      ("reject", "alloc", "post_write", "read", "decode")),
    NRBW: PropertyInfo(NRBW, "read(r, p) only of a page allocated to r whose last landed write "
                             "since that allocation was r's, with no write in flight",
                       ("read",)),
    NRBD: PropertyInfo(NRBD, "no alloc of a page while another request's write into it is in "
                             "flight; no write lands in a page its writer does not own",
                       ("alloc", "land_write"),
                       doc="The named group of no-reuse-under-write and no-land-after-free: "
                           "violated iff one of them is, its shortest counterexample the "
                           "shorter of theirs. Kept with its name and verdicts."),
}

#: properties a model selects by name (``properties = (...)`` or ``--property``); they
#: are not part of the default selection, which stays :data:`LIBRARY`
OPT_IN: dict[str, PropertyInfo] = {
    NRUW: PropertyInfo(NRUW, "no alloc of a page while another request's write into it is in "
                             "flight", ("post_write", "alloc"),
                       doc="Watches post_write/land_write/drain counts per (page, writer) and "
                           "alloc. Half of no-reuse-before-drain. A design whose invariant is "
                           "S3 (no free under a write) fails earlier, at the free; this "
                           "property fails only when the page is handed out again, so a "
                           "quarantined page freed late but never reused holds here."),
    NLAF: PropertyInfo(NLAF, "no write lands in a page its writer does not own (freed or handed "
                             "to another request)", ("land_write",),
                       doc="Watches alloc/free (the owner) and land_write. Half of "
                           "no-reuse-before-drain. A drain event counts as the write having "
                           "stopped: a design that emits drain on a timeout is trusted; "
                           "emit it only where the engine has proof (DONE, a drain ack)."),
    NSRR: PropertyInfo(NSRR, "no source page is freed or reused while a remote read of it is in "
                             "flight; a remote read is posted only from a source page the "
                             "reading request owns", ("src_read", "src_free"),
                       doc="Watches src_alloc/src_free (source owner) and src_read/"
                           "src_read_done counts per (source page, reader). S5 checks the free "
                           "only; this property also fails a READ posted after the free (V1), "
                           "one step later than a design invariant on the free would."),
    NSRD: PropertyInfo(NSRD, "no slot is reused while a metadata write into it is in flight; a "
                             "metadata write lands only in a slot its writer owns; a slot is read "
                             "only for the request whose write last landed in it",
                       ("slot_alloc", "slot_read"),
                       doc="Watches slot_alloc/slot_free, slot_write/slot_land counts and "
                           "slot_read. S9 (and SGLang's bootstrap_room check on commit) only "
                           "constrains the read: a design that checks the room and discards "
                           "a foreign record holds S9 but fails here, at the late slot_land "
                           "into the next room's slot."),
    AAD: PropertyInfo(AAD, "ack(r) only when no write of r is in flight, and no post_write of r "
                           "after ack(r) (until retire(r))", ("ack",),
                      doc="Watches ack/retire and the write counts of r. S7 also asks for the "
                          "current generation; with rooms as request ids and retire ending "
                          "a generation, a stale ack shows here as writes in flight of the "
                          "new generation. An ack that only means 'notification received' "
                          "must not be emitted as ack."),
}

#: every library property, the default ones first
ALL: dict[str, PropertyInfo] = {**LIBRARY, **OPT_IN}

#: monitor variables: name -> declaration (per request, per page, per (page, writer));
#: the in-flight count's type is ``Int(0, K + 1)`` for the run's bound K
MONITOR_VARS: dict[str, VarDecl] = {
    "rejected": VarDecl(bool, False, REQUEST, "rejected"),
    "page_owner": VarDecl(OptionalRef(REQUEST), None, PAGE, "page_owner"),
    "page_written": VarDecl(OptionalRef(REQUEST), None, PAGE, "page_written"),
    "page_inflight_by": VarDecl(Int(0, INFLIGHT_BOUND + 1), 0, PAGE_BY_REQUEST,
                                "page_inflight_by"),
    "ack_received": VarDecl(bool, False, REQUEST, "ack_received"),
    "source_page_owner": VarDecl(OptionalRef(REQUEST), None, PAGE, "source_page_owner"),
    "source_page_reading_by": VarDecl(Int(0, INFLIGHT_BOUND + 1), 0, PAGE_BY_REQUEST, "source_page_reading_by"),
    "aux_slot_owner": VarDecl(OptionalRef(REQUEST), None, PAGE, "aux_slot_owner"),
    "aux_slot_written": VarDecl(OptionalRef(REQUEST), None, PAGE, "aux_slot_written"),
    "aux_slot_inflight_by": VarDecl(Int(0, INFLIGHT_BOUND + 1), 0, PAGE_BY_REQUEST,
                                "aux_slot_inflight_by"),
}

#: the counted (saturating) monitor variables: exact up to the run's bound K, ``K + 1``
#: means "more than K" (see the module docstring)
COUNTED_VARS = ("page_inflight_by", "source_page_reading_by", "aux_slot_inflight_by")

#: the name the in-flight handlers use for the saturated count ``K + 1``
SATURATED = "inflight_saturated"

#: monitor variable -> the events whose update can move it away from its initial value
ESCAPES: dict[str, tuple[str, ...]] = {
    "rejected": ("reject",),
    "page_owner": ("alloc",),
    "page_written": ("land_write",),
    "page_inflight_by": ("post_write",),
    "ack_received": ("ack",),
    "source_page_owner": ("src_alloc",),
    "source_page_reading_by": ("src_read",),
    "aux_slot_owner": ("slot_alloc",),
    "aux_slot_written": ("slot_land",),
    "aux_slot_inflight_by": ("slot_write",),
}

#: the monitor variables each property reads
NEEDS: dict[str, tuple[str, ...]] = {
    NDAR: ("rejected",),
    RIT: ("rejected",),
    NRBW: ("page_owner", "page_written", "page_inflight_by"),
    NRBD: ("page_owner", "page_inflight_by"),
    NRUW: ("page_inflight_by",),
    NLAF: ("page_owner",),
    NSRR: ("source_page_owner", "source_page_reading_by"),
    NSRD: ("aux_slot_owner", "aux_slot_written", "aux_slot_inflight_by"),
    AAD: ("ack_received", "page_inflight_by"),
}

#: the properties that watch pages (a model without ``pages = Pages(n)`` cannot have them)
PAGE_PROPERTIES = tuple(p for p, needs in NEEDS.items()
                        if any(MONITOR_VARS[v].dim != REQUEST for v in needs))

#: the properties whose checks read a counted variable (a counterexample through a
#: saturated count is re-decided at a larger bound)
COUNTING = tuple(p for p, needs in NEEDS.items() if any(v in COUNTED_VARS for v in needs))


# -- checks: (m, r[, p]), run on the state before the event's updates --------------------

def check_rit_alloc(m, r, p):  # type: ignore[no-untyped-def]
    if m.rejected[r]:
        violate(RIT, "alloc({r:req}, page {p}) after reject({r:req})", r=r, p=p)


def check_rit_post(m, r, p):  # type: ignore[no-untyped-def]
    if m.rejected[r]:
        violate(RIT, "post_write({r:req}, page {p}) after reject({r:req})", r=r, p=p)


def check_rit_read(m, r, p):  # type: ignore[no-untyped-def]
    if m.rejected[r]:
        violate(RIT, "read({r:req}, page {p}) after reject({r:req})", r=r, p=p)


def check_rit_decode(m, r):  # type: ignore[no-untyped-def]
    if m.rejected[r]:
        violate(RIT, "decode({r:req}) after reject({r:req})", r=r)


def check_ndar_read(m, r, p):  # type: ignore[no-untyped-def]
    if m.rejected[r]:
        violate(NDAR, "read({r:req}, page {p}) after reject({r:req})", r=r, p=p)


def check_ndar_decode(m, r):  # type: ignore[no-untyped-def]
    if m.rejected[r]:
        violate(NDAR, "decode({r:req}) after reject({r:req})", r=r)


def check_nrbd_alloc(m, r, p):  # type: ignore[no-untyped-def]
    writers = m.page_inflight_by[p] > 0
    if any(m.page_inflight_by[p, w] > 0 for w in m.requests if w != r):
        violate(NRBD, "alloc({r:req}, page {p}): a write of another request into page {p} is "
                      "still in flight (writes in flight from {w:reqs})", r=r, p=p, w=writers)


def check_nrbd_land(m, r, p):  # type: ignore[no-untyped-def]
    if m.page_owner[p] is None:
        violate(NRBD, "land_write({r:req}, page {p}): the write landed after page {p} was "
                      "freed; {r:req} no longer owns it", r=r, p=p)
    elif m.page_owner[p] != r:
        violate(NRBD, "land_write({r:req}, page {p}): the write landed in page {p} after it was "
                      "handed to {o:req}", r=r, p=p, o=m.page_owner[p])


def check_nrbw_read(m, r, p):  # type: ignore[no-untyped-def]
    writers = m.page_inflight_by[p] > 0
    if m.page_owner[p] != r:
        violate(NRBW, "read({r:req}, page {p}): page {p} is not allocated to {r:req} (owner: "
                      "{o:req})", r=r, p=p, o=m.page_owner[p])
    elif writers.any():
        violate(NRBW, "read({r:req}, page {p}): a write into page {p} is still in flight (from "
                      "{w:reqs})", r=r, p=p, w=writers)
    elif m.page_written[p] is None:
        violate(NRBW, "read({r:req}, page {p}): page {p} was never written since it was "
                      "allocated to {r:req}, it holds stale KV", r=r, p=p)
    elif m.page_written[p] != r:
        violate(NRBW, "read({r:req}, page {p}): page {p} last written by {w:req}", r=r, p=p,
                w=m.page_written[p])


def check_rit_enqueue(m, r):  # type: ignore[no-untyped-def]
    if m.rejected[r]:
        violate(RIT, "enqueue({r:req}) after reject({r:req}): the rejected request entered a "
                     "queue", r=r)


def check_nruw_alloc(m, r, p):  # type: ignore[no-untyped-def]
    writers = m.page_inflight_by[p] > 0
    if any(m.page_inflight_by[p, w] > 0 for w in m.requests if w != r):
        violate(NRUW, "alloc({r:req}, page {p}): a write of another request into page {p} is "
                      "still in flight (writes in flight from {w:reqs})", r=r, p=p, w=writers)


def check_nlaf_land(m, r, p):  # type: ignore[no-untyped-def]
    if m.page_owner[p] is None:
        violate(NLAF, "land_write({r:req}, page {p}): the write landed after page {p} was "
                      "freed; {r:req} no longer owns it", r=r, p=p)
    elif m.page_owner[p] != r:
        violate(NLAF, "land_write({r:req}, page {p}): the write landed in page {p} after it was "
                      "handed to {o:req}", r=r, p=p, o=m.page_owner[p])


def check_aad_ack(m, r):  # type: ignore[no-untyped-def]
    if any(m.page_inflight_by[p, r] > 0 for p in m.pages):
        violate(AAD, "ack({r:req}): a write of {r:req} is still in flight", r=r)


def check_aad_post(m, r, p):  # type: ignore[no-untyped-def]
    if m.ack_received[r]:
        violate(AAD, "post_write({r:req}, page {p}) after ack({r:req}): the ack did not close "
                     "the room", r=r, p=p)


def check_nsrr_release(m, r, p):  # type: ignore[no-untyped-def]
    readers = m.source_page_reading_by[p] > 0
    if readers.any():
        violate(NSRR, "source page {p} released for {r:req} while a remote read of it is in "
                      "flight (for {w:reqs})", r=r, p=p, w=readers)


def check_nsrr_read(m, r, p):  # type: ignore[no-untyped-def]
    if m.source_page_owner[p] is None:
        violate(NSRR, "src_read({r:req}, source page {p}): the page was already freed", r=r, p=p)
    elif m.source_page_owner[p] != r:
        violate(NSRR, "src_read({r:req}, source page {p}): the page now holds {o:req}'s KV", r=r,
                p=p, o=m.source_page_owner[p])


def check_nsrd_alloc(m, r, p):  # type: ignore[no-untyped-def]
    writers = m.aux_slot_inflight_by[p] > 0
    if any(m.aux_slot_inflight_by[p, w] > 0 for w in m.requests if w != r):
        violate(NSRD, "slot_alloc({r:req}, slot {p}): a metadata write of another request into "
                      "slot {p} is still in flight (from {w:reqs})", r=r, p=p, w=writers)


def check_nsrd_land(m, r, p):  # type: ignore[no-untyped-def]
    if m.aux_slot_owner[p] != r:
        violate(NSRD, "slot_land({r:req}, slot {p}): the metadata write landed in slot {p}, "
                      "now held by {o:req}", r=r, p=p, o=m.aux_slot_owner[p])


def check_nsrd_read(m, r, p):  # type: ignore[no-untyped-def]
    writers = m.aux_slot_inflight_by[p] > 0
    if m.aux_slot_owner[p] != r:
        violate(NSRD, "slot_read({r:req}, slot {p}): slot {p} is held by {o:req}", r=r, p=p,
                o=m.aux_slot_owner[p])
    elif writers.any():
        violate(NSRD, "slot_read({r:req}, slot {p}): a metadata write into slot {p} is still in "
                      "flight (from {w:reqs})", r=r, p=p, w=writers)
    elif m.aux_slot_written[p] != r:
        violate(NSRD, "slot_read({r:req}, slot {p}): slot {p} holds the metadata of {w:req}",
                r=r, p=p, w=m.aux_slot_written[p])


# -- updates of the monitor variables ----------------------------------------------------------

def mark_rejected(m, r):  # type: ignore[no-untyped-def]
    m.rejected[r] = True


def owner_alloc(m, r, p):  # type: ignore[no-untyped-def]
    m.page_owner[p] = r


def owner_free(m, r, p):  # type: ignore[no-untyped-def]
    m.page_owner[p] = None


def written_alloc(m, r, p):  # type: ignore[no-untyped-def]
    m.page_written[p] = None


def written_land(m, r, p):  # type: ignore[no-untyped-def]
    m.page_written[p] = r


def inflight_post(m, r, p):  # type: ignore[no-untyped-def]
    if m.page_inflight_by[p, r] < m.inflight_saturated:
        m.page_inflight_by[p, r] = m.page_inflight_by[p, r] + 1


def inflight_done(m, r, p):  # type: ignore[no-untyped-def]
    n = m.page_inflight_by[p, r]
    if n > 0 and n < m.inflight_saturated:
        m.page_inflight_by[p, r] = n - 1


def unmark_retired(m, r):  # type: ignore[no-untyped-def]
    m.rejected[r] = False


def mark_acked(m, r):  # type: ignore[no-untyped-def]
    m.ack_received[r] = True


def unmark_acked(m, r):  # type: ignore[no-untyped-def]
    m.ack_received[r] = False


def src_owner_alloc(m, r, p):  # type: ignore[no-untyped-def]
    m.source_page_owner[p] = r


def src_owner_free(m, r, p):  # type: ignore[no-untyped-def]
    m.source_page_owner[p] = None


def src_reading_post(m, r, p):  # type: ignore[no-untyped-def]
    if m.source_page_reading_by[p, r] < m.inflight_saturated:
        m.source_page_reading_by[p, r] = m.source_page_reading_by[p, r] + 1


def src_reading_done(m, r, p):  # type: ignore[no-untyped-def]
    n = m.source_page_reading_by[p, r]
    if n > 0 and n < m.inflight_saturated:
        m.source_page_reading_by[p, r] = n - 1


def slot_owner_alloc(m, r, p):  # type: ignore[no-untyped-def]
    m.aux_slot_owner[p] = r


def slot_owner_free(m, r, p):  # type: ignore[no-untyped-def]
    m.aux_slot_owner[p] = None


def slot_written_alloc(m, r, p):  # type: ignore[no-untyped-def]
    m.aux_slot_written[p] = None


def slot_written_land(m, r, p):  # type: ignore[no-untyped-def]
    m.aux_slot_written[p] = r


def slot_inflight_post(m, r, p):  # type: ignore[no-untyped-def]
    if m.aux_slot_inflight_by[p, r] < m.inflight_saturated:
        m.aux_slot_inflight_by[p, r] = m.aux_slot_inflight_by[p, r] + 1


def slot_inflight_done(m, r, p):  # type: ignore[no-untyped-def]
    n = m.aux_slot_inflight_by[p, r]
    if n > 0 and n < m.inflight_saturated:
        m.aux_slot_inflight_by[p, r] = n - 1


#: property -> event kind -> checks
CHECKS: dict[str, dict[str, tuple[Any, ...]]] = {
    NDAR: {"read": (check_ndar_read,), "decode": (check_ndar_decode,)},
    RIT: {"enqueue": (check_rit_enqueue,), "alloc": (check_rit_alloc,),
          "post_write": (check_rit_post,),
          "read": (check_rit_read,), "decode": (check_rit_decode,)},
    NRBW: {"read": (check_nrbw_read,)},
    NRBD: {"alloc": (check_nrbd_alloc,), "land_write": (check_nrbd_land,)},
    NRUW: {"alloc": (check_nruw_alloc,)},
    NLAF: {"land_write": (check_nlaf_land,)},
    AAD: {"ack": (check_aad_ack,), "post_write": (check_aad_post,)},
    NSRR: {"src_alloc": (check_nsrr_release,), "src_free": (check_nsrr_release,),
           "src_read": (check_nsrr_read,)},
    NSRD: {"slot_alloc": (check_nsrd_alloc,), "slot_land": (check_nsrd_land,),
           "slot_read": (check_nsrd_read,)},
}

#: monitor variable -> event kind -> updates
UPDATES: dict[str, dict[str, tuple[Any, ...]]] = {
    "rejected": {"reject": (mark_rejected,), "retire": (unmark_retired,)},
    "page_owner": {"alloc": (owner_alloc,), "free": (owner_free,)},
    "page_written": {"alloc": (written_alloc,), "land_write": (written_land,)},
    "page_inflight_by": {"post_write": (inflight_post,), "land_write": (inflight_done,),
                         "drain": (inflight_done,)},
    "ack_received": {"ack": (mark_acked,), "retire": (unmark_acked,)},
    "source_page_owner": {"src_alloc": (src_owner_alloc,), "src_free": (src_owner_free,)},
    "source_page_reading_by": {"src_read": (src_reading_post,), "src_read_done": (src_reading_done,)},
    "aux_slot_owner": {"slot_alloc": (slot_owner_alloc,), "slot_free": (slot_owner_free,)},
    "aux_slot_written": {"slot_alloc": (slot_written_alloc,), "slot_land": (slot_written_land,)},
    "aux_slot_inflight_by": {"slot_write": (slot_inflight_post,), "slot_land": (slot_inflight_done,)},
}


def monitor_vars(selected: list[str], inflight_bound: int = INFLIGHT_BOUND) -> list[VarDecl]:
    """The monitor variables the selected properties need (and no others)."""
    names: list[str] = []
    for prop in selected:
        for v in NEEDS.get(prop, ()):
            if v not in names:
                names.append(v)
    out = []
    for n in MONITOR_VARS:
        if n in names:
            decl = MONITOR_VARS[n]
            if n in COUNTED_VARS:
                decl = VarDecl(Int(0, inflight_bound + 1), 0, PAGE_BY_REQUEST, n)
            out.append(decl)
    return out


def stored(var: str, emitted: set[str]) -> bool:
    """Whether a monitor variable can leave its initial value, given the events a model
    can emit (otherwise it is not stored: it reads as its initial value)."""
    return any(kind in emitted for kind in ESCAPES[var])


def handlers(selected: list[str], emitted: set[str] | None = None) -> dict[str, list[Any]]:
    """Event kind -> monitor functions to run, checks before updates; with ``emitted``
    only for those events, and no updates of a variable that is not stored."""
    out: dict[str, list[Any]] = {}
    for prop in selected:
        for kind, fns in CHECKS.get(prop, {}).items():
            if emitted is None or kind in emitted:
                out.setdefault(kind, []).extend(fns)
    for var in monitor_vars(selected):
        if emitted is not None and not stored(var.name, emitted):
            continue
        for kind, fns in UPDATES[var.name].items():
            if emitted is None or kind in emitted:
                out.setdefault(kind, []).extend(fns)
    return out
