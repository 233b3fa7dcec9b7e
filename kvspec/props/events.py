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
}


class Event(NamedTuple):
    """A concrete event: kind, request id, page id (or None)."""

    kind: str
    request: int
    page: int | None = None

    def text(self) -> str:
        if self.page is None:
            return f"{self.kind}(r{self.request})"
        return f"{self.kind}(r{self.request}, page {self.page})"

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
