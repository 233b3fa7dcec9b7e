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
rejected request's id is remembered (one entry per rejected request) so that events
after its rejection are still caught, however late they come.
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from kvspec.audit.logformat import LogEvent, PageKey, page_text

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
#: events of a retired rejected request kept for its history, should it come back
RETIRED_HISTORY = 4


@dataclass
class _Req:
    first_line: int
    rejected_line: int | None = None
    terminal: bool = False
    owned: set[PageKey] = field(default_factory=set)
    landed: set[PageKey] = field(default_factory=set)
    inflight: dict[PageKey, list[int]] = field(default_factory=dict)  # lines of posts
    history: deque[str] = field(default_factory=lambda: deque(maxlen=HISTORY))
    events: int = 0
    revived: bool = False


@dataclass
class CheckHit:
    check: str
    reason: str


class Acceptance:
    def __init__(self) -> None:
        self.live: dict[str, _Req] = {}
        #: live id -> (line of its reject, its last events): kept after retirement
        self.retired_rejected: dict[str, tuple[int, tuple[str, ...], int]] = {}
        self.counts: Counter[str] = Counter()
        self.peak_live = 0
        self.holder: dict[PageKey, str] = {}  # page -> the live request it was allocated to

    def history(self, request: str) -> list[str]:
        r = self.live.get(request)
        if r is None:
            return []
        lines = list(r.history)
        if r.events > len(lines):
            lines.insert(0, f"({r.events - len(lines)} earlier events not kept)")
        return lines

    def feed(self, ev: LogEvent) -> list[CheckHit]:
        live = self.live.get(ev.request)
        if live is None:
            live = _Req(ev.line)
            self.live[ev.request] = live
            self.peak_live = max(self.peak_live, len(self.live))
            back = self.retired_rejected.pop(ev.request, None)
            if back is not None:
                live.rejected_line, kept, live.events = back
                live.history.extend(kept)
                live.history.append("(retired after its terminal event: it held nothing; "
                                    "the request came back)")
                live.terminal = True
                live.revived = True
            else:
                self.counts["requests"] += 1
        live.events += 1
        live.history.append(f"line {ev.line}: {ev.text()}")
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
            self.counts["violations"] += 1
            self.counts[f"violations:{h.check}"] += 1
        return hits

    def retire_if_done(self, request: str) -> None:
        """Drop a request's state after its terminal event once it holds nothing."""
        live = self.live.get(request)
        if live is None or not live.terminal or live.owned or live.inflight:
            return
        if live.rejected_line is not None:
            kept = tuple(live.history)[-RETIRED_HISTORY:]
            self.retired_rejected[request] = (live.rejected_line, kept, live.events)
        del self.live[request]

    def summary(self) -> dict[str, Any]:
        c = self.counts
        return {"events": c["events"], "requests": c["requests"], "rejections": c["rejections"],
                "aborts": c["aborts"], "timeouts": c["timeouts"], "finished": c["finished"],
                "violations": c["violations"],
                "live_at_end": len(self.live), "peak_live_requests": self.peak_live}
