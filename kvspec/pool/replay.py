"""Replay a counterexample trace on a tensor page pool and show the leak in the data.

``replay_trace`` takes a ``kvspec-trace/1`` dict (or a ``kvspec-result/1`` dict, from
which the trace of the first VIOLATED verdict is taken), maps every event of every step
to a ``PagePool`` operation and returns a ``ReplayReport``: per-step evidence (the tag
found in every page read, late landings, reuse of pages with writes in flight, the
deviation of each decode attention from the output over the reader's own K/V) and a
summary.

Two things are added to what the trace says, both on by default, both labelled as such
in the report (see ``docs/replay.md``):

* ``earlier_tenant``: the pool starts seeded with the KV of ``T``, a fictitious tenant
  that used every page before the trace began, so a page nobody wrote during the trace
  is recognisably foreign data (not zeros) when it is read;
* ``aftermath``: after the last step, writes still in flight into pages their writer no
  longer owns land, and every page that holds such a late write's bytes unread is read
  by whoever gets it next (its owner, or a fresh request ``rN`` with ``N = requests``
  that is allocated the free page and decodes before a write of its own lands).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from kvspec.pool.driver import EVENT_KINDS, PAGE_EVENTS, PoolDriver
from kvspec.pool.page_pool import PoolConfig, PoolError
from kvspec.pool.report import ReplayReport

__all__ = ["ReplayError", "extract_trace", "replay_trace"]

_KINDS = EVENT_KINDS
_PAGE_EVENTS = PAGE_EVENTS
_REQUEST_RE = re.compile(r"r(\d+)")


class ReplayError(ValueError):
    """The trace cannot be mapped onto the pool; the message is one line naming the step."""


# ---------------------------------------------------------------------- parsing
def extract_trace(doc: Any, prop: str | None = None) -> Mapping[str, Any]:
    """The trace in ``doc``: itself if a trace, else the trace of the first VIOLATED
    verdict (of property ``prop`` when given)."""
    if not isinstance(doc, Mapping):
        raise ReplayError(f"expected a JSON object (kvspec-trace/1 or kvspec-result/1), got {type(doc).__name__}")
    fmt = doc.get("format")
    if fmt == "kvspec-trace/1":
        if prop is not None and doc.get("property") != prop:
            raise ReplayError(f"the trace is a counterexample for {doc.get('property')!r}, not {prop!r}")
        return doc
    if fmt == "kvspec-result/1":
        verdicts = doc.get("verdicts")
        if not isinstance(verdicts, list):
            raise ReplayError("kvspec-result/1: 'verdicts' must be a list")
        for verdict in verdicts:
            if not isinstance(verdict, Mapping) or verdict.get("status") != "VIOLATED":
                continue
            if prop is not None and verdict.get("property") != prop:
                continue
            trace = verdict.get("trace")
            if not isinstance(trace, Mapping) or trace.get("format") != "kvspec-trace/1":
                name = verdict.get("property")
                raise ReplayError(f"verdict {name!r} is VIOLATED but carries no kvspec-trace/1 trace")
            return trace
        if prop is not None:
            raise ReplayError(f"kvspec-result/1 has no VIOLATED verdict for {prop!r}: nothing to replay")
        raise ReplayError("kvspec-result/1 has no VIOLATED verdict: nothing to replay")
    raise ReplayError(f"unsupported format {fmt!r} (expected 'kvspec-trace/1' or 'kvspec-result/1')")


def _size(trace: Mapping[str, Any], name: str) -> int:
    for section in ("sizes", "schema"):
        block = trace.get(section)
        if isinstance(block, Mapping) and name in block:
            value = block[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ReplayError(f"trace {section}.{name} must be a positive int, got {value!r}")
            return value
    raise ReplayError(f"trace has no sizes.{name} (nor schema.{name})")


def _request(value: Any, where: str) -> int:
    if isinstance(value, str):
        match = _REQUEST_RE.fullmatch(value)
        if match:
            return int(match.group(1))
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ReplayError(f"{where}: bad request id {value!r} (expected 'r0', 'r1', ...)")


def _event(ev: Any, where: str, requests: int) -> tuple[str, int, int | None]:
    if not isinstance(ev, Mapping):
        raise ReplayError(f"{where}: event must be an object, got {ev!r}")
    kind = ev.get("kind")
    if kind not in _KINDS:
        raise ReplayError(f"{where}: unknown event kind {kind!r}")
    request = _request(ev.get("request"), f"{where} {kind}")
    if request >= requests:
        raise ReplayError(f"{where}: {kind}: request r{request} out of range (requests={requests})")
    page = ev.get("page")
    if kind in _PAGE_EVENTS:
        if isinstance(page, bool) or not isinstance(page, int):
            raise ReplayError(f"{where}: {kind}(r{request}) needs an integer page, got {page!r}")
        return kind, request, page
    return kind, request, None


# ----------------------------------------------------------------------- replay
def replay_trace(
    trace: Mapping[str, Any],
    device: str = "auto",
    *,
    page_size: int = 4,
    heads: int = 2,
    head_dim: int = 16,
    dtype: torch.dtype = torch.float32,
    land_delay_cycles: int = 0,
    earlier_tenant: bool = True,
    aftermath: bool = True,
    prop: str | None = None,
) -> ReplayReport:
    """Replay ``trace`` (a kvspec-trace/1 or kvspec-result/1 dict) on a fresh ``PagePool``.

    ``earlier_tenant``: seed every page with the KV of the fictitious earlier tenant ``T``
    (else never-written pages hold zeros).  ``aftermath``: after the trace, land the writes
    still in flight into pages their writer no longer owns and let the next holder of
    every page with late-written bytes read it (reported separately from the trace).
    ``prop``: from a result document, replay that property's counterexample.
    """
    doc = extract_trace(trace, prop)
    pages, requests = _size(doc, "pages"), _size(doc, "requests")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise ReplayError("trace 'steps' must be a list")
    model = doc.get("model")
    try:
        config = PoolConfig(pages=pages, page_size=page_size, heads=heads, head_dim=head_dim,
                            dtype=dtype, device=device, requests=requests + 1,
                            land_delay_cycles=land_delay_cycles, earlier_tenant=earlier_tenant)
        driver = PoolDriver(
            config, requests=requests,
            model=str(model.get("name")) if isinstance(model, Mapping) and model.get("name") else None,
            property_name=doc.get("property") if isinstance(doc.get("property"), str) else None,
            reason=doc.get("reason") if isinstance(doc.get("reason"), str) else None)
    except PoolError as exc:
        raise ReplayError(str(exc)) from None
    driver.report.violation_in_trace = any(
        isinstance(st, Mapping) and isinstance(st.get("violation"), Mapping) for st in steps)
    _initial_owners(doc, driver)
    for position, step in enumerate(steps, start=1):
        if not isinstance(step, Mapping):
            raise ReplayError(f"step {position}: must be an object, got {type(step).__name__}")
        index = step.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ReplayError(f"step {position}: bad index {index!r}")
        label = step.get("label") or step.get("action") or ""
        where = f"step {index}" + (f" ({label})" if label else "")
        events = step.get("events")
        if not isinstance(events, list):
            raise ReplayError(f"{where}: 'events' must be a list")
        parsed = [_event(ev, where, requests) for ev in events]
        try:
            driver.step(index, str(label), parsed)
        except PoolError as exc:
            raise ReplayError(f"{where}: {exc}") from None
    try:
        return driver.finish(aftermath=aftermath)
    except PoolError as exc:  # pragma: no cover - the aftermath only does possible operations
        raise ReplayError(f"aftermath: {exc}") from None


def _initial_owners(doc: Mapping[str, Any], driver: PoolDriver) -> None:
    """Pages that the trace's initial state already hands out are allocated in a step 0."""
    initial = doc.get("initial")
    owners: Sequence[Any] = ()
    if isinstance(initial, Mapping) and isinstance(initial.get("page_owner"), list):
        owners = initial["page_owner"]
    parsed: list[int | None] = []
    for owner in owners:
        if owner is None:
            parsed.append(None)
            continue
        r = _request(owner, "initial page_owner")
        if r >= driver.requests:
            raise ReplayError(f"initial page_owner: request r{r} out of range "
                              f"(requests={driver.requests})")
        parsed.append(r)
    try:
        driver.initial_owners(parsed)
    except PoolError as exc:
        raise ReplayError(f"initial state: {exc}") from None
