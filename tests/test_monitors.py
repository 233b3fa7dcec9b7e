"""The library monitors are exact: in-flight writes are tracked per (writer, page), a
violation names only requests whose writes really are in flight, and monitor state
exists only for the properties selected."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, system_of

from kvspec.engines.bmc import run_bmc
from kvspec.engines.explicit import explore
from kvspec.engines.pdr import run_pdr
from kvspec.verdict import Status

TWO_WRITERS = 'import enum\nfrom kvspec import Model, Page, Pages, Request, Requests, action, emit, require, var, Int\n\n\nclass TwoWriters(Model):\n    """r0 posts into page 0, r1 posts into it too, the page is freed and handed to\n    r1 while r0\'s write is still in flight."""\n    requests = Requests(2)\n    pages = Pages(1)\n    step = var(Int(0, 5), init=0)\n    properties = ("no-reuse-before-drain",)\n\n    @action\n    def alloc0(s, p: Page):\n        require(s.step == 0)\n        emit.alloc(0, p)\n        s.step = 1\n\n    @action\n    def post0(s, p: Page):\n        require(s.step == 1)\n        emit.post_write(0, p)\n        s.step = 2\n\n    @action\n    def post1(s, p: Page):\n        require(s.step == 2)\n        emit.post_write(1, p)\n        s.step = 3\n\n    @action\n    def free0(s, p: Page):\n        require(s.step == 3)\n        emit.free(0, p)\n        s.step = 4\n\n    @action\n    def alloc1(s, p: Page):\n        require(s.step == 4)\n        emit.alloc(1, p)\n        s.step = 5\n'

THREE_WRITERS = """
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require, var


class Three(Model):
    requests = Requests(3)
    pages = Pages(1)
    posted = requests.var(bool, init=False)
    freed = var(bool, init=False)
    properties = ("no-reuse-before-drain", "no-read-beyond-written")

    @action
    def alloc(s, r: Request, p: Page):
        require(not s.posted.any() and not s.freed)
        emit.alloc(r, p)

    @action
    def post(s, r: Request, p: Page):
        require(not s.posted[r] and not s.freed)
        s.posted[r] = True
        emit.post_write(r, p)

    @action
    def land(s, r: Request, p: Page):
        require(s.posted[r])
        s.posted[r] = False
        emit.land_write(r, p)

    @action
    def free_and_take(s, r: Request, p: Page):
        require(not s.freed)
        s.freed = True
        emit.free(r, p)
        emit.alloc(r, p)
"""


def test_reuse_while_an_earlier_writer_is_in_flight_is_found(write_model, tmp_path: Path) -> None:
    path = write_model(TWO_WRITERS)
    for out in (explore(system_of(path)), run_bmc(system_of(path), depth=6, timeout=60),
                run_pdr(system_of(path), timeout=60, save_proof=False, proofs_dir=tmp_path)):
        (v,) = out.verdicts
        assert v.status is Status.VIOLATED and len(v.trace) == 5, v
        assert "r0" in v.trace.violation.reason  # r0's write is the one still in flight


def test_a_violation_names_only_requests_with_writes_in_flight(write_model) -> None:
    out = explore(system_of(write_model(THREE_WRITERS)), symmetry=False)
    v = {x.prop: x for x in out.verdicts}["no-reuse-before-drain"]
    assert v.status is Status.VIOLATED
    reason = v.trace.violation.reason
    inflight = system_of(write_model(THREE_WRITERS)).schema.by_name["page_inflight_by"]
    named = [f"r{r}" for r in range(3) if f"r{r}" in reason.split("from")[-1]]
    assert named, reason
    # every request the reason names had a write in flight into the page
    prev = v.trace.steps[-2].state if len(v.trace.steps) >= 2 else system_of(
        write_model(THREE_WRITERS)).initial
    for name in named:
        r = int(name[1:])
        assert prev[inflight.offset + r] > 0, (reason, prev)  # page 0: slots 0..R-1


def test_symmetry_stays_exact_with_per_writer_state(write_model) -> None:
    path = write_model(THREE_WRITERS)
    reduced = explore(system_of(path))
    full = explore(system_of(path), symmetry=False)
    assert reduced.symmetry.requests
    assert [(v.prop, v.status, len(v.trace) if v.trace else None) for v in reduced.verdicts] == \
        [(v.prop, v.status, len(v.trace) if v.trace else None) for v in full.verdicts]


def test_monitor_state_exists_only_for_selected_properties() -> None:
    names = {v.name for v in system_of("patched.py", properties=["no-decode-after-rejection"])
             .schema.vars if v.owner == "monitor"}
    assert names == {"rejected"}
    names = {v.name for v in system_of("patched.py", properties=["no-reuse-before-drain"])
             .schema.vars if v.owner == "monitor"}
    assert names == {"page_owner", "page_inflight_by"}


def test_property_that_watches_pages_on_a_model_without_pages_is_a_usage_error(
        write_model) -> None:
    path = write_model("""
from kvspec import Model, Request, Requests, action, require, var

class NoPages(Model):
    requests = Requests(1)
    x = var(bool, init=False)

    @action
    def go(s, r: Request):
        s.x = True
""")
    r = run_cli("verify", str(path), "--property", "no-reuse-before-drain")
    assert r.code == 2 and "declares no pages" in r.err, r.err


def _script_model(events: list[tuple[str, int]]) -> str:
    """Three requests, one page: the model emits ``events`` (kind, request), one per step."""
    steps = "".join(f"""
    @action
    def e{i}(s):
        require(s.step == {i})
        emit.{kind}({r}, 0)
        s.step = {i + 1}
""" for i, (kind, r) in enumerate(events))
    return f"""
from kvspec import Int, Model, Pages, Requests, action, emit, require, var


class Script(Model):
    requests = Requests(3)
    pages = Pages(1)
    step = var(Int(0, {len(events)}), init=0)
    properties = ("no-reuse-under-write",)
{steps}"""


@pytest.mark.parametrize("events, violated", [
    ([("post_write", 0), ("alloc", 0)], False),                      # its own write only
    ([("post_write", 2), ("alloc", 0)], True),                       # the third request's
    ([("post_write", 0), ("post_write", 1), ("alloc", 1)], True),    # its own and r0's
    ([("post_write", 2), ("land_write", 2), ("alloc", 0)], False),   # landed: none left
    ([("post_write", 1)] * 4 + [("alloc", 0)], True),                # past the count's bound
    ([("post_write", 0)] * 4 + [("alloc", 0)], False),               # its own, saturated
])
def test_alloc_under_another_requests_write_with_three_requests(
        events: list[tuple[str, int]], violated: bool, write_model, tmp_path: Path) -> None:
    """``alloc(r, p)`` violates no-reuse-under-write exactly when a request other than
    ``r`` has a write in flight into ``p`` — any of the others, its count saturated or
    not — in the explicit search, BMC and PDR alike (the Python and the symbolic
    reading of the monitor). PDR proves the holding cases through Spacer, whose run on
    such a small system propagates no lemma to its fixpoint level: the invariant is
    its answer (this stopped with an internal error when only the lemmas were read)."""
    path = write_model(_script_model(events))
    n = len(events)
    for engine, out in (
            ("explicit", explore(system_of(path))),
            ("bmc", run_bmc(system_of(path), depth=n + 1, timeout=60)),
            ("pdr", run_pdr(system_of(path), timeout=60, save_proof=False, proofs_dir=tmp_path))):
        (v,) = out.verdicts
        if violated:
            assert v.status is Status.VIOLATED and len(v.trace) == n, (engine, v)
        else:
            holds = {"explicit": {Status.HOLDS}, "bmc": {Status.HOLDS, Status.UNKNOWN},
                     "pdr": {Status.PROVED}}[engine]
            assert v.status in holds, (engine, v)
