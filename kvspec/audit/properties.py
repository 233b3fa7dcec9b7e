"""The library properties audited directly on a log's event stream.

**The monitor is the library's, not a re-implementation.** A host model
(:mod:`kvspec.audit.monitor_host`) is compiled with every monitor variable stored;
its generated ``_dispatch`` — the handlers of :mod:`kvspec.props.library`, lowered
by the same checker and code generator as for every verified model — is run on a
flat state list, one log event at a time. So the audit and the model checker cannot
read a property differently (``tests/test_audit.py`` also checks it on random event
sequences against a monitor that never recycles an id).

**Id renaming.** Logs name thousands of requests and pages; the host has a bounded
pool of model ids, mapped on the fly. Model request id 0 is reserved (the *ghost*,
see below); live ids get 1..R-1, pages 0..P-1.

* A **page** id is retired as soon as the page has no owner and no write of anybody
  in flight (after a ``free``, ``land_write`` or ``drain`` of it). Its monitor state
  is then equivalent to a fresh page's: ``page_written`` is only consulted by a
  ``read`` of a page owned by the reader, which needs an ``alloc`` first, and
  ``alloc`` resets it; a ``read`` or ``land_write`` of an unowned page violates
  whatever ``page_written`` holds. The page's ``page_written`` is reset to None.
* A **request** id is retired after the request's terminal event (``reject``,
  ``abort``, ``timeout``, ``finish``) once it owns no page and has no write in flight
  (checked at each of its later events, and for every request when the pool runs
  out). Its remaining footprint is (a) ``rejected[r]`` — kept in
  :class:`~kvspec.audit.rejected.RejectedIds` (shared with the acceptance checks) and
  restored if the request ever shows up again, which is exactly the bug
  ``rejection-is-terminal`` looks for, so no violation is missed — unless a
  ``retire`` of the id came after that rejection (the id then names a new request,
  as the library monitor reads it). An id only the
  Bloom filter of old rejected ids remembers is audited as a new request (not
  rejected); each of its events is also run on a copy of the monitor state with
  ``rejected[r]`` set, and what only that copy reports is a POSSIBLE finding;
  (b) ``page_written[p] == r`` for pages it wrote — replaced by the ghost id 0, which
  never acts, so every check compares the same way (the ghost is neither None nor any
  live request) and messages still name the writer.
* When the pool runs out, the host is recompiled with twice the ids and the state is
  copied over; past 4,096 live ids of a kind (or 1,000,000 monitor slots) the audit
  stops with :class:`AuditLimit` (exit 3, unknown).

Memory is therefore O(live requests x live pages) plus the bounded
:class:`~kvspec.audit.rejected.RejectedIds`.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kvspec.audit.logformat import LogEvent, PageKey, page_text
from kvspec.audit.rejected import EXACT, RejectedIds
from kvspec.lang.loader import LoadedModel, load_model
from kvspec.lang.system import MAX_IDS, MAX_SLOTS, System, compile_model
from kvspec.props import library
from kvspec.props.events import Event

#: the monitor's in-flight count is exact up to this many writes of one request into
#: one page (then "more than K": over-approximated, reported as a warning)
INFLIGHT_EXACT = 4095
GHOST = 0
TERMINAL_KINDS = frozenset({"reject", "abort", "timeout", "finish"})
_NO_HITS: list["Hit"] = []  # shared, never appended to


class AuditLimit(Exception):
    """The audit cannot go on soundly (too many live ids): the verdict is unknown."""


@lru_cache(maxsize=1)
def _host_model() -> LoadedModel:
    from kvspec.audit import monitor_host
    return load_model(Path(monitor_host.__file__))


@dataclass
class Hit:
    prop: str
    reason: str
    possible: bool = False  # only if the request was the old rejected one (Bloom filter)


class _Host:
    """The compiled monitor for R request ids and P page ids, and its state."""

    def __init__(self, requests: int, pages: int, properties: list[str] | None) -> None:
        self.R, self.P = requests, pages
        self.system: System = compile_model(_host_model(), {"requests": requests, "pages": pages},
                                            properties, inflight_bound=INFLIGHT_EXACT,
                                            prune_monitor=False)
        by = self.system.schema.by_name
        self.rej = by["rejected"].offset if "rejected" in by else None
        self.own = by["page_owner"].offset if "page_owner" in by else None
        self.wri = by["page_written"].offset if "page_written" in by else None
        self.inf = by["page_inflight_by"].offset if "page_inflight_by" in by else None
        self.flags = dict(self.system.flags)
        self.W: list[Any] = list(self.system.initial)
        self.dispatch = self.system.generated["_dispatch"]

    def migrate_from(self, old: "_Host") -> None:
        W, O = self.W, old.W
        if self.rej is not None:
            W[self.rej:self.rej + old.R] = O[old.rej:old.rej + old.R]
        for off, ooff in ((self.own, old.own), (self.wri, old.wri)):
            if off is not None:
                W[off:off + old.P] = O[ooff:ooff + old.P]
        if self.inf is not None:
            for q in range(old.P):
                W[self.inf + q * self.R:self.inf + q * self.R + old.R] = \
                    O[old.inf + q * old.R:old.inf + (q + 1) * old.R]
        for name, off in self.flags.items():
            W[off] = O[old.flags[name]]


class PropertyAudit:
    """Streams log events through the library monitor with id renaming."""

    def __init__(self, properties: list[str] | None = None, *, requests: int = 16,
                 pages: int = 64, rejected: RejectedIds | None = None) -> None:
        self.properties = list(properties) if properties else list(library.LIBRARY)
        self.host = _Host(max(2, requests), max(1, pages), self.properties)
        self._install_formatter()
        self.req_of: dict[str, int] = {}
        self.req_name: list[str | None] = [None] * self.host.R
        self.free_req: list[int] = list(range(self.host.R - 1, 0, -1))
        self.touched: dict[int, set[int]] = {}
        self.page_of: dict[PageKey, int] = {}
        self.page_key: list[PageKey | None] = [None] * self.host.P
        self.free_page: list[int] = list(range(self.host.P - 1, -1, -1))
        self.ghost_writer: dict[int, str] = {}
        self.rejected = rejected if rejected is not None else RejectedIds()
        #: ids the table remembers as rejected whose ``retire`` event came later: the line
        #: of that event (a rejection remembered from before it is not restored)
        self.cleared: dict[str, int] = {}
        self.reject_line: dict[int, int] = {}  # model request -> line of its reject
        self.possible: set[int] = set()  # model requests the Bloom filter says may be rejected
        self.candidates: set[str] = set()
        self.warnings: list[str] = []
        self.peak_requests = 0
        self.peak_pages = 0

    # -- the monitor's messages, with the log's ids ---------------------------------------
    def _install_formatter(self) -> None:
        self.host.system.generated["_fmt"] = self._format

    def _req_text(self, v: int, page: int | None) -> str:
        if v is None or v < 0:
            return "None"
        if v == GHOST:
            return self.ghost_writer.get(page, "a retired request") if page is not None \
                else "a retired request"
        return self.req_name[v] or f"model request {v}"

    def _format(self, fmt: str, args: dict[str, Any]) -> str:
        specs, plain = _specs(fmt)
        page = args.get("p")
        out: dict[str, Any] = {}
        for k, v in args.items():
            spec = specs.get(k, "")
            if spec == "req":
                out[k] = self._req_text(v, page)
            elif spec == "reqs":  # by name, not by the pool ids they happen to have now
                names = sorted((self._req_text(i, page) for i, b in enumerate(v) if b),
                               key=_natural)
                out[k] = ", ".join(names) or "none"
            elif k == "p":
                key = self.page_key[v]
                out[k] = page_text(key) if key is not None else str(v)
            else:
                out[k] = v
        return plain.format(**out)

    # -- renaming ---------------------------------------------------------------------------
    def _request(self, live: str) -> int:
        k = self.req_of.get(live)
        if k is not None:
            return k
        if not self.free_req:
            self._sweep()
        if not self.free_req:
            self._grow(requests=True)
        k = self.free_req.pop()
        self.req_of[live] = k
        self.req_name[k] = live
        self.touched[k] = set()
        back = self.rejected.lookup(live) if self.rejected else None
        cleared = self.cleared.get(live)
        if back is not None and cleared is not None and (back.how != EXACT
                                                         or (back.line or 0) < cleared):
            back = None  # a retire(live) event since that rejection: a new request
        if back is not None and self.host.rej is not None:
            if back.how == EXACT:
                self.host.W[self.host.rej + k] = True
                self.reject_line[k] = back.line or 0
            else:
                self.possible.add(k)
        self.peak_requests = max(self.peak_requests, len(self.req_of))
        return k

    def _page(self, key: PageKey) -> int:
        q = self.page_of.get(key)
        if q is not None:
            return q
        if not self.free_page:
            self._grow(requests=False)
        q = self.free_page.pop()
        self.page_of[key] = q
        self.page_key[q] = key
        self.peak_pages = max(self.peak_pages, len(self.page_of))
        return q

    def _sweep(self) -> None:
        for live in list(self.candidates):
            self._try_retire(live)
        if not self.free_req:  # any request that holds nothing can go (exact, see module doc)
            for live in list(self.req_of):
                self._try_retire(live)

    def _grow(self, requests: bool) -> None:
        R, P = self.host.R, self.host.P
        R2, P2 = (R * 2, P) if requests else (R, P * 2)
        if R2 > MAX_IDS or P2 > MAX_IDS or R2 * P2 + R2 + 2 * P2 + 8 > MAX_SLOTS:
            what = f"{R - 1} requests" if requests else f"{P} pages"
            raise AuditLimit(f"more than {what} live at once (the property monitor holds at "
                             f"most {MAX_IDS} ids per kind and {MAX_SLOTS:,} state slots)")
        new = _Host(R2, P2, self.properties)
        new.migrate_from(self.host)
        self.host = new
        self._install_formatter()
        if requests:
            self.req_name.extend([None] * (R2 - R))
            self.free_req = list(range(R2 - 1, R - 1, -1)) + self.free_req
        else:
            self.page_key.extend([None] * (P2 - P))
            self.free_page = list(range(P2 - 1, P - 1, -1)) + self.free_page

    def _holds_nothing(self, k: int) -> bool:
        h = self.host
        W, R = h.W, h.R
        for q in self.touched.get(k, ()):
            if h.own is not None and W[h.own + q] == k:
                return False
            if h.inf is not None and W[h.inf + q * R + k] > 0:
                return False
        return True

    def _try_retire(self, live: str) -> bool:
        k = self.req_of.get(live)
        if k is None:
            self.candidates.discard(live)
            return True
        if not self._holds_nothing(k):
            return False
        h = self.host
        W = h.W
        if h.wri is not None:
            for q in self.touched.get(k, ()):
                if W[h.wri + q] == k:
                    W[h.wri + q] = GHOST
                    self.ghost_writer[q] = live
        if h.rej is not None and W[h.rej + k]:
            self.rejected.add(live, self.reject_line.get(k, 0))
            W[h.rej + k] = False
        self.reject_line.pop(k, None)
        self.possible.discard(k)
        del self.req_of[live]
        self.req_name[k] = None
        self.touched.pop(k, None)
        self.free_req.append(k)
        self.candidates.discard(live)
        return True

    def _maybe_retire_page(self, q: int) -> None:
        h = self.host
        W = h.W
        if h.own is not None and W[h.own + q] != -1:
            return
        if h.inf is not None and any(W[h.inf + q * h.R:h.inf + (q + 1) * h.R]):
            return
        if h.wri is not None:
            W[h.wri + q] = -1
        self.ghost_writer.pop(q, None)
        key = self.page_key[q]
        if key is not None:
            del self.page_of[key]
        self.page_key[q] = None
        self.free_page.append(q)

    # -- one event ---------------------------------------------------------------------------
    def feed(self, ev: LogEvent) -> list[Hit]:
        k = self._request(ev.request)
        q = None
        if ev.page is not None:
            q = self._page(ev.page)
            self.touched[k].add(q)
        kind = ev.kind
        if kind == "reject" and k not in self.reject_line:
            self.reject_line[k] = ev.line
        event = (Event(kind, k, q),)
        before = list(self.host.W) if k in self.possible else None
        V: list[Any] = []
        self.host.dispatch(self.host.W, V, event)
        hits = [Hit(prop, reason) for prop, reason, _ in V] if V else _NO_HITS
        if before is not None:
            hits = self._possible_hits(before, k, event, hits)
        if kind == "retire":  # a later event of this id is a new request's, rejected or not
            self.possible.discard(k)
            self.reject_line.pop(k, None)
            if self.rejected and self.rejected.lookup(ev.request) is not None:
                # the (shared) table still remembers an earlier rejection of this id:
                # it no longer applies to this monitor
                self.cleared[ev.request] = ev.line
                if len(self.cleared) > 2 * self.rejected.capacity:
                    # bounded as the table is: what only the Bloom filter still holds
                    # goes (a later event of such an id is at most a POSSIBLE finding)
                    self.cleared = {rid: line for rid, line in self.cleared.items()
                                    if rid in self.rejected.exact}
        if kind == "post_write" and self.host.inf is not None:
            if self.host.W[self.host.inf + q * self.host.R + k] > INFLIGHT_EXACT:
                self.warnings.append(
                    f"line {ev.line}: more than {INFLIGHT_EXACT} writes of {ev.request} into "
                    f"page {page_text(ev.page)} in flight; from here on the page counts as "
                    "written to forever (over-approximation: may add violations)")
        if q is not None and kind in ("free", "land_write", "drain"):
            self._maybe_retire_page(q)
        if kind in TERMINAL_KINDS:
            self.candidates.add(ev.request)
        if ev.request in self.candidates:
            self._try_retire(ev.request)
        return hits

    def _possible_hits(self, before: list[Any], k: int, event: tuple[Event, ...],
                       hits: list[Hit]) -> list[Hit]:
        """``hits`` plus what the monitor reports on ``event`` had request ``k`` been the
        old rejected request the Bloom filter may remember (labelled possible)."""
        assert self.host.rej is not None
        before[self.host.rej + k] = True
        V: list[Any] = []
        self.host.dispatch(before, V, event)
        seen = {h.prop for h in hits}
        extra = [Hit(prop, f"{reason} — if {self.req_name[k]} is the request of that id "
                       "rejected long before (Bloom filter of old rejected ids: possibly a "
                       "false alarm)", possible=True)
                 for prop, reason, _ in V if prop not in seen]
        return hits + extra if extra else hits

    @property
    def live_requests(self) -> int:
        return len(self.req_of)

    @property
    def live_pages(self) -> int:
        return len(self.page_of)


@lru_cache(maxsize=256)
def _specs(fmt: str) -> tuple[dict[str, str], str]:
    """Field -> format spec of a reason format, and the format without the specs."""
    specs = {name: spec for _, name, spec, _ in string.Formatter().parse(fmt)
             if name is not None and spec}
    return specs, re.sub(r"\{(\w+):reqs?\}", r"{\1}", fmt)


def _natural(name: str) -> list[Any]:
    """Sort key that orders ``req-2`` before ``req-10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
