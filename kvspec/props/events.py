"""The lifecycle event vocabulary shared by models, monitors, replay and logs.

See ``docs/formats.md`` for the meaning of each kind.
"""
from __future__ import annotations

import string
from typing import Any, NamedTuple

#: kind -> does the event name a page
EVENT_KINDS: dict[str, bool] = {
    "admit": False,
    "reject": False,
    "alloc": True,
    "post_write": True,
    "land_write": True,
    "drain": True,
    "read": True,
    "decode": False,
    "free": True,
    "abort": False,
    "timeout": False,
    "finish": False,
    # queues, ids, messages and deadlines
    "enqueue": False,
    "retire": False,
    "ack": False,
    "abort_msg": False,
    "deadline": False,
    # source-side pages (read by a remote transfer); ids of the page id space
    "src_alloc": True,
    "src_read": True,
    "src_read_done": True,
    "src_free": True,
    # metadata/aux slots; ids of the page id space
    "slot_alloc": True,
    "slot_write": True,
    "slot_land": True,
    "slot_read": True,
    "slot_free": True,
}

EVENT_HELP: dict[str, str] = {
    "admit": "admission accepted the request",
    "reject": "admission refused the request (whatever flag the engine recorded it in)",
    "alloc": "a page of the decode pool was handed to the request",
    "post_write": "a KV write of the request's data into the page was posted (in flight)",
    "land_write": "a posted write of the request's data landed in the page",
    "drain": "a posted write into the page was proven quiescent without landing",
    "read": "attention of the request read the page",
    "decode": "the request ran a decode step",
    "free": "the page was returned to the allocator",
    "abort": "the request was aborted",
    "timeout": "a timer of the request fired",
    "finish": "the request finished and was answered",
    "enqueue": "the request entered a queue or was handed off (bootstrap, prealloc, transfer, "
               "waiting queue)",
    "retire": "the request id was retired: its next use is a new request (a recycled slot, "
              "room or generation)",
    "ack": "the peer acknowledged that the request's transfer work has stopped (a drain ack, "
           "as the receiver counts it)",
    "abort_msg": "an abort notification for the request was sent to the peer",
    "deadline": "a deadline of the request passed (hold deadline, lease expiry, waiting "
                "timeout)",
    "src_alloc": "a page of the source (prefill) pool was handed to the request",
    "src_read": "a remote transfer of the request's KV reading the source page was posted",
    "src_read_done": "a posted remote read of the source page completed (or was proven "
                     "quiescent)",
    "src_free": "the source page was returned to its allocator",
    "slot_alloc": "a metadata/aux slot was handed to the request",
    "slot_write": "a write of the request's metadata into the slot was posted (in flight)",
    "slot_land": "a posted metadata write of the request landed in the slot",
    "slot_read": "the receiver read the slot's metadata for the request",
    "slot_free": "the slot was returned to its allocator",
}

#: the noun an event's page id stands for (default: a page of the decode pool)
EVENT_NOUN: dict[str, str] = {
    **{k: "source page" for k in ("src_alloc", "src_read", "src_read_done", "src_free")},
    **{k: "slot" for k in ("slot_alloc", "slot_write", "slot_land", "slot_read", "slot_free")},
}


class Event(NamedTuple):
    """A concrete event: kind, request id, page id (or None)."""

    kind: str
    request: int
    page: int | None = None

    def text(self) -> str:
        if self.page is None:
            return f"{self.kind}(r{self.request})"
        return f"{self.kind}(r{self.request}, {EVENT_NOUN.get(self.kind, 'page')} {self.page})"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "request": f"r{self.request}", "page": self.page}


class _ReasonFormatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "req":
            return "None" if value is None or value == -1 else f"r{value}"
        if format_spec == "reqs":  # a mask over requests
            return ", ".join(f"r{i}" for i, bit in enumerate(value) if bit) or "none"
        return super().format_field(value, format_spec)


_FORMATTER = _ReasonFormatter()


def format_reason(fmt: str, args: dict[str, Any]) -> str:
    """A violation message; ``{x:req}`` prints a request id as ``r0`` (-1 as None)."""
    return _FORMATTER.format(fmt, **args)
