"""The seed tutorial's acceptance checks (section 4), per request, and the summary.

* ``rejected-stops`` (③): once a request is rejected, none of ``admit``, ``alloc``,
  ``post_write``, ``land_write``, ``read``, ``decode`` or ``finish`` of it follows —
  no bootstrap, no pages, no transfer, no generation, no success answer.
* ``written-covers-read`` (④): a request reads only pages in its written range: pages
  it holds in which its own write landed since it was allocated them (and no other
  request's write landed after it).
* ``release-after-drain`` (⑤): a request frees a page only when every write it posted
  into the page has landed or been drained (acknowledged quiescent).

This module also keeps each live request's recent history (the last
:data:`HISTORY` events) for the reports, and the summary counts. A request's state is
dropped after its terminal event once it holds no page and has no write in flight; a
rejected request's id goes into :class:`~kvspec.audit.rejected.RejectedIds` (bounded:
the recent ones exactly, older ones in a Bloom filter) so that events after its
rejection are still caught, however late they come — definitely for an id still kept
exactly, as a POSSIBLE finding for one only the filter remembers.
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from kvspec.audit.logformat import LogEvent, PageKey, page_text
from kvspec.audit.rejected import EXACT, RejectedIds

REJECTED_STOPS = "rejected-stops"
WRITTEN_COVERS_READ = "written-covers-read"
RELEASE_AFTER_DRAIN = "release-after-drain"
CHECKS: dict[str, str] = {
    REJECTED_STOPS: "a rejected request has no downstream events (no admit, alloc, transfer, "
                    "read, decode or finish after reject)",
    WRITTEN_COVERS_READ: "the pages a request reads are within its written range (pages it "
                         "holds where its own write landed)",
    RELEASE_AFTER_DRAIN: "a page is freed only after every write posted into it landed or "
                         "was drained",
}
DOWNSTREAM = frozenset({"admit", "alloc", "post_write", "land_write", "read", "decode", "finish"})
TERMINAL = frozenset({"reject", "abort", "timeout", "finish"})
HISTORY = 40


@dataclass
class _Req:
    first_line: int
    rejected_line: int | None = None
    terminal: bool = False
    owned: set[PageKey] = field(default_factory=set)
    landed: set[PageKey] = field(default_factory=set)
    inflight: dict[PageKey, list[int]] = field(default_factory=dict)  # lines of posts
    history: deque[LogEvent | str] = field(default_factory=lambda: deque(maxlen=HISTORY))
    events: int = 0
    revived: bool = False
    possibly_rejected: bool = False  # the Bloom filter of old rejected ids says maybe


@dataclass
class CheckHit:
    check: str
    reason: str
    possible: bool = False  # rests on the Bloom filter: may be a false alarm


class Acceptance:
    def __init__(self, rejected: RejectedIds | None = None) -> None:
        self.live: dict[str, _Req] = {}
        #: rejected requests whose state was retired (shared with the property audit)
        self.rejected = rejected if rejected is not None else RejectedIds()
        self.counts: Counter[str] = Counter()
        self.peak_live = 0
        self.holder: dict[PageKey, str] = {}  # page -> the live request it was allocated to

    def history(self, request: str) -> list[str]:
        r = self.live.get(request)
        if r is None:
            return []
        lines = [_history_line(h) for h in r.history]
        if r.events > len(lines):
            lines.insert(0, f"({r.events - len(lines)} earlier events not kept)")
        return lines

    def feed(self, ev: LogEvent) -> list[CheckHit]:
        live = self.live.get(ev.request)
        if live is None:
            live = _Req(ev.line)
            self.live[ev.request] = live
            self.peak_live = max(self.peak_live, len(self.live))
            back = self.rejected.lookup(ev.request) if self.rejected else None
            if back is not None and back.how == EXACT:
                live.rejected_line = back.line
                live.history.append(f"line {back.line}: reject({ev.request})")
                live.history.append("(its other earlier events not kept: retired after its "
                                    "terminal event, it held nothing; the request came back)")
                live.terminal = True
                live.revived = True
            else:
                if back is not None:
                    live.possibly_rejected = True
                    live.history.append("(an id like this one was rejected long ago: only the "
                                        "Bloom filter of old rejected ids remembers it)")
                self.counts["requests"] += 1
        live.events += 1
        live.history.append(ev)  # formatted when a report asks (history())
        hits: list[CheckHit] = []
        kind, page = ev.kind, ev.page
        self.counts["events"] += 1
        if kind == "reject":
            if live.rejected_line is None:
                self.counts["rejections"] += 1
                live.rejected_line = ev.line
        elif kind in ("abort", "timeout", "finish"):
            self.counts[{"abort": "aborts", "timeout": "timeouts", "finish": "finished"}[kind]] += 1
        if live.rejected_line is not None and kind in DOWNSTREAM:
            hits.append(CheckHit(REJECTED_STOPS, f"{ev.text()} after reject({ev.request}) at "
                                                 f"line {live.rejected_line}"))
        elif live.possibly_rejected and kind in DOWNSTREAM:
            hits.append(CheckHit(REJECTED_STOPS, f"{ev.text()}, and {ev.request} may have been "
                                                 "rejected long before (its id is in the Bloom "
                                                 "filter of old rejected ids: possibly a false "
                                                 "alarm)", possible=True))
        if page is not None:
            if kind == "alloc":
                live.owned.add(page)
                live.landed.discard(page)
                self.holder[page] = ev.request
            elif kind == "post_write":
                live.inflight.setdefault(page, []).append(ev.line)
            elif kind in ("land_write", "drain"):
                posts = live.inflight.get(page)
                if posts:
                    posts.pop(0)
                    if not posts:
                        del live.inflight[page]
                if kind == "land_write":
                    if page in live.owned:
                        live.landed.add(page)
                    holder = self.holder.get(page)
                    if holder is not None and holder != ev.request and holder in self.live:
                        self.live[holder].landed.discard(page)  # overwritten by another request
            elif kind == "read":
                if page not in live.landed:
                    held = sorted(page_text(p) for p in live.landed)
                    span = "{" + ", ".join(held[:8]) + (", ..." if len(held) > 8 else "") + "}"
                    why = "it does not hold the page" if page not in live.owned else \
                        "its own write never landed there"
                    hits.append(CheckHit(WRITTEN_COVERS_READ,
                                         f"{ev.text()}: page {page_text(page)} is outside the "
                                         f"written range {span} ({why})"))
            elif kind == "free":
                posts = live.inflight.get(page)
                if posts:
                    n = len(posts)
                    hits.append(CheckHit(RELEASE_AFTER_DRAIN,
                                         f"{ev.text()} while {n} write{'s' if n > 1 else ''} of "
                                         f"{ev.request} into page {page_text(page)} "
                                         f"{'are' if n > 1 else 'is'} in flight (posted at line "
                                         f"{posts[0]}, neither landed nor drained)"))
                live.owned.discard(page)
                live.landed.discard(page)
                if self.holder.get(page) == ev.request:
                    del self.holder[page]
        if kind in TERMINAL:
            live.terminal = True
        for h in hits:
            if h.possible:
                self.counts["possible"] += 1
                continue
            self.counts["violations"] += 1
            self.counts[f"violations:{h.check}"] += 1
        return hits

    def retire_if_done(self, request: str) -> None:
        """Drop a request's state after its terminal event once it holds nothing."""
        live = self.live.get(request)
        if live is None or not live.terminal or live.owned or live.inflight:
            return
        if live.rejected_line is not None:
            self.rejected.add(request, live.rejected_line)
        del self.live[request]

    def summary(self) -> dict[str, Any]:
        c = self.counts
        return {"events": c["events"], "requests": c["requests"], "rejections": c["rejections"],
                "aborts": c["aborts"], "timeouts": c["timeouts"], "finished": c["finished"],
                "violations": c["violations"], "possible": c["possible"],
                "live_at_end": len(self.live), "peak_live_requests": self.peak_live}


def _history_line(h: LogEvent | str) -> str:
    return h if isinstance(h, str) else f"line {h.line}: {h.text()}"
