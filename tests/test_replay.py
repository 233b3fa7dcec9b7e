"""Tests for kvspec.pool.replay: replaying kvspec-trace/1 and kvspec-result/1 documents."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from kvspec.pool import ReplayError, ReplayReport, Tag, replay_trace  # noqa: E402

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available"),
    ),
]


def ev(kind: str, r: int, page: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "request": f"r{r}", "page": page}


def make_trace(steps: list[tuple[str, list[dict[str, Any]]]], *, requests: int = 2, pages: int = 4,
               prop: str = "no-read-beyond-written") -> dict[str, Any]:
    return {
        "format": "kvspec-trace/1",
        "model": {"name": "HandWritten", "file": "tests/test_replay.py", "sha256": "0"},
        "sizes": {"requests": requests, "pages": pages},
        "property": prop,
        "reason": "hand-written schedule",
        "schema": {"requests": requests, "pages": pages, "vars": []},
        "initial": {"page_owner": [None] * pages},
        "steps": [
            {"index": i, "action": label.split("(")[0], "args": {}, "label": label, "events": copy.deepcopy(events),
             "changes": [], "state": {}, "violation": None}
            for i, (label, events) in enumerate(steps, start=1)
        ],
    }


# free-before-drain: r0's write is still in flight when its page is freed and reused
FREE_BEFORE_DRAIN = [
    ("prealloc(r0, page 0)", [ev("admit", 0), ev("alloc", 0, 0)]),
    ("send(r0, page 0)", [ev("post_write", 0, 0)]),
    ("timeout(r0)", [ev("timeout", 0), ev("abort", 0), ev("free", 0, 0)]),
    ("prealloc(r1, page 0)", [ev("admit", 1), ev("alloc", 1, 0)]),
    ("transfer(r1, page 0)", [ev("post_write", 1, 0), ev("land_write", 1, 0)]),
    ("late_landing(r0, page 0)", [ev("land_write", 0, 0)]),
    ("decode(r1)", [ev("read", 1, 0), ev("decode", 1)]),
]

# the patched design drains r0's write before the page is freed
DRAIN_BEFORE_FREE = [
    FREE_BEFORE_DRAIN[0],
    FREE_BEFORE_DRAIN[1],
    ("abort(r0)", [ev("abort", 0), ev("drain", 0, 0), ev("free", 0, 0)]),
    FREE_BEFORE_DRAIN[3],
    FREE_BEFORE_DRAIN[4],
    FREE_BEFORE_DRAIN[6],
]

# rejected-but-continues: r1 was rejected, allocates 4 pages, only one transfer lands
REJECTED_CONTINUES = [
    ("serve(r0)", [ev("admit", 0)] + [ev(k, 0, p) for p in range(4) for k in ("alloc", "post_write", "land_write")]),
    ("finish(r0)", [ev("finish", 0)] + [ev("free", 0, p) for p in range(4)]),
    ("reject(r1)", [ev("reject", 1)]),
    ("prealloc(r1)", [ev("alloc", 1, p) for p in range(4)]),
    ("transfer(r1, 1 of 4 pages)", [ev("post_write", 1, 0), ev("land_write", 1, 0)]),
    ("decode(r1)", [ev("read", 1, p) for p in range(4)] + [ev("decode", 1)]),
]


@pytest.mark.parametrize("device", DEVICES)
def test_free_before_drain_shows_late_write_and_foreign_read(device: str) -> None:
    report = replay_trace(make_trace(FREE_BEFORE_DRAIN, prop="no-reuse-before-drain"), device=device)
    assert isinstance(report, ReplayReport) and report.leaked
    assert report.device.startswith(device)
    (late,) = report.late_writes
    assert (late.step, late.writer, late.page, late.owner, late.overwrote) == (6, 0, 0, 1, Tag(1, 0))
    assert late.clobbered_owner
    (hazard,) = report.reuse_hazards
    assert (hazard.step, hazard.request, hazard.page, hazard.writers) == (4, 1, 0, (0,))
    (foreign,) = report.foreign_reads
    assert (foreign.step, foreign.reader, foreign.page, foreign.tag) == (7, 1, 0, Tag(0, 0))
    assert report.max_deviation > 0 and report.attentions == 1
    text = report.render_text()
    assert "read(r1, page 0): holds r0 block 0 (FOREIGN)" in text
    assert "LATE: page owned by r1, overwrote r1 block 0" in text
    assert "REUSE BEFORE DRAIN" in text and "max |attn - own| = " in text and "LEAK" in text


@pytest.mark.parametrize("device", DEVICES)
def test_patched_schedule_shows_no_leak(device: str) -> None:
    report = replay_trace(make_trace(DRAIN_BEFORE_FREE), device=device)
    assert not report.leaked
    assert report.foreign_reads == [] and report.late_writes == [] and report.reuse_hazards == []
    assert report.max_deviation < 1e-5 and report.attentions == 1
    assert "no leak" in report.render_text()


def test_rejected_but_continues_reads_three_foreign_pages() -> None:
    report = replay_trace(make_trace(REJECTED_CONTINUES, prop="no-decode-after-rejection"), device="cpu")
    assert [(f.page, f.tag) for f in report.foreign_reads] == [(1, Tag(0, 1)), (2, Tag(0, 2)), (3, Tag(0, 3))]
    assert {f.reader for f in report.foreign_reads} == {1}
    assert report.max_deviation > 0 and report.leaked
    attend = report.steps[-1].ops[-1]
    assert attend.op == "attend" and attend.detail["foreign_pages"] == [1, 2, 3]


def test_to_json_is_serialisable_and_complete() -> None:
    report = replay_trace(make_trace(FREE_BEFORE_DRAIN), device="cpu")
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["format"] == "kvspec-replay/1" and doc["model"] == "HandWritten"
    assert doc["pool"] == {"pages": 4, "page_size": 4, "heads": 2, "head_dim": 16, "dtype": "float32",
                           "earlier_tenant": True}
    assert [s["index"] for s in doc["steps"]] == list(range(1, 8))
    summary = doc["summary"]
    assert summary["leaked"] is True and summary["max_abs_dev"] > 0
    assert summary["foreign_reads"][0]["tag"] == {"request": "r0", "block": 0}
    assert summary["late_writes"][0]["owner"] == "r1"
    read_op = doc["steps"][-1]["ops"][0]
    assert read_op["op"] == "read" and read_op["foreign"] is True and read_op["content_ok"] is True


def test_result_document_uses_first_violated_trace() -> None:
    violated = make_trace(FREE_BEFORE_DRAIN, prop="no-reuse-before-drain")
    result = {
        "format": "kvspec-result/1",
        "model": violated["model"], "sizes": violated["sizes"], "engine": "explicit",
        "verdicts": [
            {"property": "no-decode-after-rejection", "status": "HOLDS", "method": "exhaustive",
             "detail": "", "trace": None},
            {"property": "no-reuse-before-drain", "status": "VIOLATED", "method": "exhaustive",
             "detail": "depth 7", "trace": violated},
            {"property": "no-read-beyond-written", "status": "VIOLATED", "method": "exhaustive",
             "detail": "depth 6", "trace": make_trace(DRAIN_BEFORE_FREE)},
        ],
        "stats": {}, "exit_code": 1,
    }
    report = replay_trace(result, device="cpu")
    assert report.property_name == "no-reuse-before-drain" and report.leaked
    result["verdicts"] = result["verdicts"][:1]
    with pytest.raises(ReplayError, match="no VIOLATED verdict"):
        replay_trace(result, device="cpu")


def test_reads_without_decode_attend_at_end_of_step_and_decode_without_reads_uses_table() -> None:
    trace = make_trace([
        ("setup", [ev("alloc", 0, 2), ev("alloc", 0, 3), ev("post_write", 0, 2), ev("land_write", 0, 2),
                   ev("post_write", 0, 3), ev("land_write", 0, 3)]),
        ("peek(r0)", [ev("read", 0, 3)]),  # page 3 is block 1: own
        ("decode(r0)", [ev("decode", 0)]),
    ])
    report = replay_trace(trace, device="cpu")
    peek, dec = report.steps[1], report.steps[2]
    assert [o.op for o in peek.ops] == ["read", "attend"] and peek.ops[1].detail["whole_table"] is False
    assert [o.op for o in dec.ops] == ["read", "read", "attend"] and dec.ops[-1].detail["pages"] == [2, 3]
    assert not report.leaked and report.attentions == 2


def test_sizes_fall_back_to_schema_and_initial_owners_are_allocated() -> None:
    trace = make_trace([("decode(r1)", [ev("post_write", 1, 1), ev("land_write", 1, 1), ev("read", 1, 1)])])
    del trace["sizes"]
    trace["initial"]["page_owner"] = [None, "r1", None, None]
    report = replay_trace(trace, device="cpu")
    assert report.steps[0].index == 0 and report.steps[0].ops[0].text == "alloc(r1, page 1)"
    assert not report.leaked


def test_overrides_shape_the_pool() -> None:
    report = replay_trace(make_trace(FREE_BEFORE_DRAIN), device="cpu", page_size=2, heads=1, head_dim=8,
                          dtype=torch.float64)
    assert report.config.page_size == 2 and report.config.dtype == torch.float64 and report.leaked


def _broken(mutate: Any) -> dict[str, Any]:
    trace = make_trace(FREE_BEFORE_DRAIN)
    mutate(trace)
    return trace


def _add(step: int, event: Any, at: int | None = None) -> Any:
    """A mutation adding ``event`` to step ``step`` (1-based), at the end or at ``at``."""

    def mutate(trace: dict[str, Any]) -> None:
        events = trace["steps"][step - 1]["events"]
        events.insert(len(events) if at is None else at, event)

    return mutate


MALFORMED = [
    (_add(2, ev("teleport", 0, 0)), r"step 2 \(send\(r0, page 0\)\): unknown event kind 'teleport'"),
    (_add(2, ev("read", 0, 9)), r"step 2 .*page 9 out of range \(pages=4\)"),
    (_add(1, ev("alloc", 5, 1)), r"step 1 .*request r5 out of range \(requests=2\)"),
    (_add(2, {"kind": "read", "request": "x1", "page": 0}), r"step 2 .*bad request id 'x1'"),
    (_add(2, {"kind": "read", "request": "r0", "page": None}), r"step 2 .*needs an integer page"),
    (_add(2, "alloc r0 0"), r"step 2 .*event must be an object"),
    (lambda t: t["steps"][1].pop("events"), r"step 2 .*'events' must be a list"),
    (_add(1, ev("land_write", 0, 0)), r"step 1 .*no write of r0 into page 0 is in flight"),
    (_add(3, ev("free", 1, 0)), r"step 3 .*free\(r1, page 0\)"),
    (_add(1, ev("alloc", 1, 0)), r"step 1 .*page 0 is owned by r0"),
    (_add(3, ev("free", 0, 0)), r"step 3 .*free\(r0, page 0\): page 0 is free"),
    (lambda t: t.update(steps={"1": []}), r"'steps' must be a list"),
    (lambda t: t.update(format="kvspec-trace/9"), r"unsupported format 'kvspec-trace/9'"),
    (lambda t: (t.pop("sizes"), t.pop("schema")), r"no sizes.pages"),
    (lambda t: t["sizes"].update(pages=0), r"sizes.pages must be a positive int"),
]


@pytest.mark.parametrize(("mutate", "message"), MALFORMED)
def test_malformed_traces_raise_one_line_replay_error(mutate: Any, message: str) -> None:
    with pytest.raises(ReplayError, match=message) as info:
        replay_trace(_broken(mutate), device="cpu")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_non_mapping_input_and_unknown_device() -> None:
    with pytest.raises(ReplayError, match="expected a JSON object"):
        replay_trace([1, 2], device="cpu")  # type: ignore[arg-type]
    with pytest.raises(ReplayError, match="device"):
        replay_trace(make_trace(FREE_BEFORE_DRAIN), device="npu")


def test_replay_does_not_mutate_the_trace() -> None:
    trace = make_trace(REJECTED_CONTINUES)
    before = copy.deepcopy(trace)
    replay_trace(trace, device="cpu")
    assert trace == before


# ------------------------------------------------------ tenant and aftermath
# r0's write is still in flight when r0 frees the page; the trace ends there
FREED_IN_FLIGHT = FREE_BEFORE_DRAIN[:3]
# ... and here the late write lands in the free page before the trace ends
LANDED_IN_FREE_PAGE = FREE_BEFORE_DRAIN[:3] + [("late_landing(r0, page 0)", [ev("land_write", 0, 0)])]


def test_unwritten_pages_hold_the_earlier_tenant_unless_disabled() -> None:
    stale = [("prealloc(r1)", [ev("alloc", 1, 2)]), ("decode(r1)", [ev("read", 1, 2), ev("decode", 1)])]
    seeded = replay_trace(make_trace(stale), device="cpu")
    (f,) = seeded.foreign_reads
    assert f.tag is not None and f.tag.earlier_tenant and f.tag.block == 2
    assert "read(r1, page 2): holds tenant T block 2 (FOREIGN)" in seeded.render_text()
    assert seeded.to_json()["summary"]["foreign_reads"][0]["tag"] == {"request": "T", "block": 2}
    plain = replay_trace(make_trace(stale), device="cpu", earlier_tenant=False)
    (g,) = plain.foreign_reads
    assert g.tag is None and "never written (FOREIGN)" in plain.render_text()
    assert plain.max_deviation > 0 and "earlier tenant" not in plain.render_text()


def test_late_write_into_a_free_page_is_read_by_a_fresh_request_in_the_aftermath() -> None:
    report = replay_trace(make_trace(LANDED_IN_FREE_PAGE, prop="no-reuse-before-drain"), device="cpu")
    (late,) = report.late_writes
    assert (late.step, late.owner, late.freed_step, late.aftermath) == (4, None, 3, False)
    assert report.leaked and report.leaked_in_trace and report.trace_foreign_reads == []
    (after,) = report.aftermath
    assert after.aftermath and after.index == 5 and [o.op for o in after.ops] == ["alloc", "read", "attend"]
    (read,) = report.aftermath_foreign_reads
    assert (read.reader, read.page, read.tag) == (2, 0, Tag(0, 0)) and str(read).startswith("aftermath:")
    assert report.aftermath_attentions == 1 and report.aftermath_max_deviation > 0
    doc = report.to_json()
    assert doc["aftermath"][0]["aftermath"] is True and doc["summary"]["late_writes"][0]["freed_step"] == 3
    assert doc["summary"]["foreign_reads"][0]["aftermath"] is True
    text = report.render_text()
    assert "LATE: page free (r0 freed it at step 3)" in text and "page 0 now holds r0's KV" in text
    assert "after 1  page 0 to r2, a fresh request (not in the trace)" in text
    assert "foreign pages read: 0 in the trace, 1 in the aftermath" in text


def test_write_still_in_flight_at_the_end_lands_in_the_aftermath() -> None:
    report = replay_trace(make_trace(FREED_IN_FLIGHT), device="cpu")
    assert not report.leaked_in_trace and report.leaked
    land, read = report.aftermath
    assert land.label == "the writes still in flight land late: r0 into page 0"
    (late,) = report.late_writes
    assert late.aftermath and late.owner is None and late.freed_step == 3
    assert read.ops[1].detail["tag"] == {"request": "r0", "block": 0}
    assert "the trace leaves a write in flight" in report.render_text()


def test_aftermath_can_be_turned_off_and_stays_out_of_clean_runs() -> None:
    report = replay_trace(make_trace(LANDED_IN_FREE_PAGE), device="cpu", aftermath=False)
    assert report.aftermath == [] and report.leaked  # the late write itself is evidence
    clean = replay_trace(make_trace(DRAIN_BEFORE_FREE), device="cpu")
    assert clean.aftermath == [] and "aftermath" not in clean.render_text()


def test_replay_selects_a_property_from_a_result_document() -> None:
    first = make_trace(FREE_BEFORE_DRAIN, prop="no-reuse-before-drain")
    second = make_trace(REJECTED_CONTINUES, prop="no-decode-after-rejection")
    result = {"format": "kvspec-result/1", "verdicts": [
        {"property": "no-reuse-before-drain", "status": "VIOLATED", "trace": first},
        {"property": "no-decode-after-rejection", "status": "VIOLATED", "trace": second}]}
    assert replay_trace(result, device="cpu").property_name == "no-reuse-before-drain"
    chosen = replay_trace(result, device="cpu", prop="no-decode-after-rejection")
    assert chosen.property_name == "no-decode-after-rejection"
    with pytest.raises(ReplayError, match="no VIOLATED verdict for 'rejection-is-terminal'"):
        replay_trace(result, device="cpu", prop="rejection-is-terminal")
    with pytest.raises(ReplayError, match="not 'rejection-is-terminal'"):
        replay_trace(first, device="cpu", prop="rejection-is-terminal")
