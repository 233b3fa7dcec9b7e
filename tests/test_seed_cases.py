"""The seed tutorial's four fake requests, checked with the real tool."""
from __future__ import annotations

from conftest import MODELS, run_cli, system_of

from kvspec.engines.explicit import explore
from kvspec.lang.system import System
from kvspec.props.events import Event
from kvspec.trace import instance_by_label
from kvspec.verdict import Status


def run_schedule(system: System, steps: list[tuple[str, dict]]) -> tuple[tuple, list[Event]]:
    state = system.initial
    events: list[Event] = []
    for name, args in steps:
        res = system.step(state, instance_by_label(system, name, args))
        assert res is not None, f"{name}{args} is not enabled"
        assert not res.violations, res.violations
        state = res.state
        events.extend(res.events)
    return state, events


def test_normal_request_reads_only_its_own_pages() -> None:
    system = system_of("single_node.py")
    state, events = run_schedule(system, [
        ("arrive", {"r": "r1", "n": 2}), ("admission", {"r": "r1"}),
        ("alloc", {"r": "r1", "p": 0}), ("alloc", {"r": "r1", "p": 3}),
        ("prefill", {"r": "r1"}), ("decode", {"r": "r1"})])
    reads = [e for e in events if e.kind == "read"]
    assert {(e.request, e.page) for e in reads} == {(1, 0), (1, 3)}
    written = {e.page for e in events if e.kind == "land_write" and e.request == 1}
    assert {e.page for e in reads} <= written


def test_oversize_request_on_a_single_node_never_touches_the_pool() -> None:
    system = system_of("single_node.py")
    state, events = run_schedule(system, [("arrive", {"r": "r0", "n": 3}),
                                          ("admission", {"r": "r0"})])
    assert [e.kind for e in events] == ["reject"]
    # no action of r0 is enabled afterwards: zero alloc, transfer, decode
    for inst in system.instances:
        if inst.args and inst.args[0] == 0:
            assert system.step(state, inst) is None, inst.label()
    owner = system.schema.by_name["owner"]
    written = system.schema.by_name["written"]
    for var in (owner, written):
        sl = slice(var.offset, var.offset + var.length)
        assert state[sl] == system.initial[sl]
    # and exhaustively: rejection is terminal for every schedule
    verdicts = {v.prop: v for v in explore(system).verdicts}
    assert verdicts["rejection-is-terminal"].status is Status.HOLDS
    assert verdicts["no-decode-after-rejection"].status is Status.HOLDS


def test_rejected_but_continues_reads_pages_it_never_wrote() -> None:
    system = system_of("buggy_pd.py")
    verdicts = {v.prop: v for v in explore(system).verdicts}
    for prop in ("no-decode-after-rejection", "rejection-is-terminal", "no-read-beyond-written"):
        assert verdicts[prop].status is Status.VIOLATED, prop
    trace = verdicts["no-read-beyond-written"].trace
    assert trace is not None
    kinds = [e.kind for st in trace.steps for e in st.events]
    assert "reject" in kinds and kinds.count("land_write") == 1  # one stub page transferred
    reads = [e for e in trace.steps[-1].events if e.kind == "read"]
    assert len(reads) == 3  # decode reads all preallocated pages
    assert "never written" in trace.reason or "last written by" in trace.reason


def test_patched_rejection_holds() -> None:
    result = run_cli("verify", str(MODELS / "patched.py"), "--engine", "explicit")
    assert result.code == 0, result.out + result.err
    assert result.out.count("HOLDS (exhaustive") == 4
