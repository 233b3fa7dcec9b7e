"""The library liveness properties, as obligations opened and discharged by events.

Every property is "every obligation it opens is eventually discharged"; an
obligation belongs to one request (and one page). The monitor that tracks which
obligations are *pending* runs beside the model in the product the liveness
search explores (:mod:`kvspec.liveness.graph`), so a pending bit is exact along
every path, whatever the model stores.

* ``pages-eventually-freed`` — ``alloc(r, p)`` opens (r, p); ``free(r, p)``
  discharges it. "Every alloc(r, p) is eventually followed by free(r, p)": one
  free discharges every earlier alloc of the same page by the same request.
* ``request-terminates`` — ``admit(r)`` opens r; a terminal event of r discharges
  it: ``finish``, ``abort``, ``timeout`` or ``reject``. A rejected request is
  answered by its rejection, so ``reject(r)`` is itself terminal (a request that is
  rejected without being admitted opens nothing). A request that is never admitted
  (or never arrives) owes nothing.
* ``writes-eventually-quiesce`` — ``post_write(r, p)`` opens one write of r into
  p; ``land_write(r, p)`` or ``drain(r, p)`` discharges one (writes of the same
  request into the same page are indistinguishable: the oldest is the one that
  lands). The count is exact up to :data:`WRITE_BOUND`; a run that posts more
  writes of one request into one page than that without a landing decides nothing
  for this property (``UNKNOWN``), never a verdict from an approximate count.

For the deadlock check the monitor also remembers which requests have had a
terminal event (``finish``, ``abort``, ``timeout``, ``reject``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kvspec.props.events import Event

PEF = "pages-eventually-freed"
RT = "request-terminates"
WEQ = "writes-eventually-quiesce"
DEADLOCK = "deadlock-freedom"

#: writes of one request into one page counted exactly; one more makes the count
#: "saturated" and the property UNKNOWN
WRITE_BOUND = 3

TERMINAL_EVENTS = ("finish", "abort", "timeout", "reject")


@dataclass(frozen=True)
class LivenessInfo:
    name: str
    summary: str
    opens: tuple[str, ...]       # events that open an obligation
    discharges: tuple[str, ...]  # events that discharge one


LIVENESS: dict[str, LivenessInfo] = {
    PEF: LivenessInfo(PEF, "every alloc(r, p) is eventually followed by free(r, p)",
                      ("alloc",), ("free",)),
    RT: LivenessInfo(RT, "every admitted request eventually finishes, aborts, times out or is "
                         "rejected", ("admit",), TERMINAL_EVENTS),
    WEQ: LivenessInfo(WEQ, "every post_write(r, p) eventually lands or is drained",
                      ("post_write",), ("land_write", "drain")),
}


class Obligation(NamedTuple):
    """One obligation: its property, request and page (None for a request's)."""

    prop: str
    request: int
    page: int | None = None

    def text(self) -> str:
        if self.prop == PEF:
            return f"alloc(r{self.request}, page {self.page}) is never followed by " \
                   f"free(r{self.request}, page {self.page})"
        if self.prop == WEQ:
            return f"a write posted by r{self.request} into page {self.page} never lands " \
                   "and is never drained"
        return f"r{self.request} was admitted and never finishes, aborts, times out or is " \
               "rejected"

    def opened_by(self, ev: Event) -> bool:
        info = LIVENESS[self.prop]
        return ev.kind in info.opens and ev.request == self.request and ev.page == self.page


#: the monitor state: (alloc bits, admit bits, write counts, terminated bits)
Monitor = tuple[int, int, tuple[int, ...], int]


class MonitorStep(NamedTuple):
    monitor: Monitor
    discharged: frozenset[Obligation]
    saturated: bool  # a write count went beyond WRITE_BOUND


_NONE: frozenset[Obligation] = frozenset()


class ObligationMonitor:
    """Pending obligations of the selected properties, for ``requests`` x ``pages``."""

    def __init__(self, props: list[str], requests: int, pages: int, terminated: bool) -> None:
        self.props = list(props)
        self.requests = requests
        self.pages = pages
        self.pef = PEF in props
        self.rt = RT in props
        self.weq = WEQ in props and pages > 0
        self.terminated = terminated  # track terminal events (deadlock check)

    def initial(self) -> Monitor:
        counts = (0,) * (self.requests * self.pages) if self.weq else ()
        return (0, 0, counts, 0)

    def advance(self, mon: Monitor, events: list[Event]) -> MonitorStep:
        """The monitor after ``events`` (in order), the obligations they discharged."""
        if not events:
            return MonitorStep(mon, _NONE, False)
        allocs, admits, counts, done = mon
        discharged: set[Obligation] | None = None
        saturated = False
        clist: list[int] | None = None
        P = self.pages
        for ev in events:
            kind, r, p = ev.kind, ev.request, ev.page
            if kind == "alloc" and self.pef and p is not None:
                allocs |= 1 << (r * P + p)
            elif kind == "free" and self.pef and p is not None:
                bit = 1 << (r * P + p)
                if allocs & bit:
                    allocs &= ~bit
                    discharged = discharged or set()
                    discharged.add(Obligation(PEF, r, p))
            elif kind == "admit":
                if self.rt:
                    admits |= 1 << r
            elif kind in TERMINAL_EVENTS:
                if self.rt and admits & (1 << r):
                    admits &= ~(1 << r)
                    discharged = discharged or set()
                    discharged.add(Obligation(RT, r))
                if self.terminated:
                    done |= 1 << r
            elif self.weq and p is not None and kind in ("post_write", "land_write", "drain"):
                if clist is None:
                    clist = list(counts)
                k = r * P + p
                if kind == "post_write":
                    if clist[k] >= WRITE_BOUND:
                        clist[k] = WRITE_BOUND + 1
                        saturated = True
                    else:
                        clist[k] += 1
                elif clist[k] > 0:
                    if clist[k] <= WRITE_BOUND:  # a saturated count stays saturated
                        clist[k] -= 1
                    discharged = discharged or set()
                    discharged.add(Obligation(WEQ, r, p))
        if clist is not None:
            counts = tuple(clist)
        return MonitorStep((allocs, admits, counts, done),
                           frozenset(discharged) if discharged else _NONE, saturated)

    def saturated(self, mon: Monitor, ob: Obligation) -> bool:
        """Whether ``ob``'s write count is saturated in ``mon`` (more than WRITE_BOUND
        writes in flight: not counted exactly, so its pending state is not exact)."""
        if ob.prop != WEQ or not self.weq or ob.page is None:
            return False
        return mon[2][ob.request * self.pages + ob.page] > WRITE_BOUND

    def pending(self, mon: Monitor) -> list[Obligation]:
        """The obligations pending in ``mon``."""
        allocs, admits, counts, _ = mon
        out: list[Obligation] = []
        P = self.pages
        if allocs:
            for k in range(self.requests * P):
                if allocs >> k & 1:
                    out.append(Obligation(PEF, k // P, k % P))
        if admits:
            for r in range(self.requests):
                if admits >> r & 1:
                    out.append(Obligation(RT, r))
        for k, c in enumerate(counts):
            if c:
                out.append(Obligation(WEQ, k // P, k % P))
        return out

    def is_pending(self, mon: Monitor, ob: Obligation) -> bool:
        allocs, admits, counts, _ = mon
        if ob.prop == PEF:
            return bool(allocs >> (ob.request * self.pages + (ob.page or 0)) & 1)
        if ob.prop == RT:
            return bool(admits >> ob.request & 1)
        return counts[ob.request * self.pages + (ob.page or 0)] > 0

    def all_terminated(self, mon: Monitor) -> bool:
        return mon[3] == (1 << self.requests) - 1

    def unterminated(self, mon: Monitor) -> list[int]:
        return [r for r in range(self.requests) if not mon[3] >> r & 1]
