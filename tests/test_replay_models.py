"""Replay the real models' counterexamples (and patched runs) on the tensor page pool.

CI runs these on the CPU; the ``cuda`` variants run when a GPU is present.  Each buggy
model's counterexample must show the leak in the data; runs of the patched model must
show none.
"""

from __future__ import annotations

import io
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from kvspec.cli import main  # noqa: E402
from kvspec.engines.explicit import explore  # noqa: E402
from kvspec.lang.system import System  # noqa: E402
from kvspec.pool import EARLIER_TENANT, Tag, replay_trace  # noqa: E402
from kvspec.testing import load, random_schedule, schedule_trace  # noqa: E402
from kvspec.trace import concretize, instance_by_label  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda",
                 marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")),
]

NDAR, RIT, NRBW, NRBD = ("no-decode-after-rejection", "rejection-is-terminal",
                         "no-read-beyond-written", "no-reuse-before-drain")


@cache
def counterexamples(model: str) -> dict[str, dict[str, Any]]:
    """property -> kvspec-trace/1 of the explicit engine's shortest counterexample."""
    system = load(MODELS / model)
    out = explore(system)
    return {v.prop: v.trace.to_json() for v in out.verdicts if v.trace is not None}


def test_every_buggy_counterexample_replays_on_cpu() -> None:
    """Every VIOLATED verdict of every buggy model maps onto the pool, and each one
    that moves data shows it."""
    seen = {}
    for model in ("buggy_pd.py", "free_before_drain.py"):
        for prop, trace in counterexamples(model).items():
            report = replay_trace(trace, device="cpu")
            seen[(model, prop)] = report
            assert report.steps and all(s.index >= 1 for s in report.steps)
    assert set(seen) == {("buggy_pd.py", NDAR), ("buggy_pd.py", RIT), ("buggy_pd.py", NRBW),
                         ("free_before_drain.py", NRBD)}
    # rejection-is-terminal breaks at the first alloc: a lifecycle violation, no bytes moved
    rit = seen[("buggy_pd.py", RIT)]
    assert not rit.leaked and "violated by the lifecycle alone" in rit.render_text()
    assert all(seen[k].leaked for k in seen if k[1] != RIT)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prop", [NDAR, NRBW])
def test_buggy_pd_decode_reads_the_earlier_tenants_pages(device: str, prop: str) -> None:
    report = replay_trace(counterexamples("buggy_pd.py")[prop], device=device)
    assert report.leaked and report.leaked_in_trace and not report.aftermath
    foreign = report.trace_foreign_reads
    # r0 was rejected, preallocated three pages, one chunk landed: two pages never written
    assert len(foreign) == 2 and {f.reader for f in foreign} == {0}
    for f in foreign:
        assert f.tag == Tag(EARLIER_TENANT, f.page) and f.tag.earlier_tenant
    assert report.max_deviation > 1e-3 and report.attentions == 1
    text = report.render_text()
    assert "holds tenant T block" in text and "(FOREIGN)" in text
    assert "LEAK: a request read foreign KV data in the trace" in text


@pytest.mark.parametrize("device", DEVICES)
def test_free_before_drain_late_write_lands_in_a_freed_page(device: str) -> None:
    report = replay_trace(counterexamples("free_before_drain.py")[NRBD], device=device)
    (late,) = report.late_writes
    assert (late.writer, late.page, late.owner, late.freed_step, late.aftermath) == (0, 0, None, 5, False)
    assert late.overwrote == Tag(EARLIER_TENANT, 0)
    assert report.trace_foreign_reads == [] and report.max_deviation == 0
    # aftermath: the freed page goes to a fresh request, which finds r0's KV in it
    (after,) = report.aftermath
    (fresh,) = report.aftermath_foreign_reads
    assert (fresh.reader, fresh.page, fresh.tag) == (2, 0, Tag(0, 0))
    assert report.aftermath_max_deviation > 1e-3 and report.leaked
    text = report.render_text()
    assert "LATE: page free (r0 freed it at step 5)" in text
    assert "aftermath (NOT part of the trace" in text and "r2, a fresh request" in text
    assert report.aftermath and after.aftermath


def _free_before_drain_alloc_schedule(system: System) -> list[Any]:
    labels: list[tuple[str, dict[str, Any]]] = [("arrive", {"r": "r0", "n": 1}), ("admission", {"r": "r0"}),
              ("prealloc", {"r": "r0", "p": 0}), ("send_chunk", {"r": "r0", "p": 0}),
              ("abort", {"r": "r0"}), ("arrive", {"r": "r1", "n": 1}),
              ("admission", {"r": "r1"}), ("prealloc", {"r": "r1", "p": 0})]
    return [instance_by_label(system, name, args) for name, args in labels]


@pytest.mark.parametrize("device", DEVICES)
def test_alloc_while_a_write_is_in_flight(device: str) -> None:
    """The other face of no-reuse-before-drain: the trace ends at the alloc; the
    aftermath lands the stale write in r1's page and r1 reads r0's KV."""
    system = load(MODELS / "free_before_drain.py")
    trace = concretize(system, NRBD, _free_before_drain_alloc_schedule(system)).to_json()
    assert "still in flight" in trace["reason"]
    report = replay_trace(trace, device=device)
    (hazard,) = report.reuse_hazards
    assert (hazard.step, hazard.request, hazard.page, hazard.writers) == (8, 1, 0, (0,))
    assert not report.leaked_in_trace and report.leaked
    (late,) = report.late_writes
    assert late.aftermath and late.owner == 1 and late.clobbered_owner
    (read,) = report.aftermath_foreign_reads
    assert (read.reader, read.page, read.tag) == (1, 0, Tag(0, 0))
    text = report.render_text()
    assert "REUSE BEFORE DRAIN" in text and "the writes still in flight land late" in text
    assert "r1, the owner of page 0, decodes" in text


PATCHED_REUSE: list[tuple[str, dict[str, Any]]] = [  # r0 serves and frees pages 0-1; r1 aborts mid-transfer (held, drained,
    # released); r2 then reuses pages 0 and 1 and decodes
    ("arrive", {"r": "r0", "n": 2}), ("admission", {"r": "r0"}), ("prealloc", {"r": "r0", "p": 0}),
    ("prealloc", {"r": "r0", "p": 1}), ("send_chunk", {"r": "r0", "p": 0}), ("land", {"p": 0}),
    ("send_chunk", {"r": "r0", "p": 1}), ("land", {"p": 1}), ("transfer_success", {"r": "r0"}),
    ("decode", {"r": "r0"}), ("finish", {"r": "r0"}),
    ("arrive", {"r": "r1", "n": 1}), ("admission", {"r": "r1"}), ("prealloc", {"r": "r1", "p": 0}),
    ("send_chunk", {"r": "r1", "p": 0}), ("abort", {"r": "r1"}), ("timeout", {"r": "r1"}),
    ("drain_ack", {"r": "r1", "p": 0}), ("release", {"r": "r1"}),
    ("arrive", {"r": "r2", "n": 2}), ("admission", {"r": "r2"}), ("prealloc", {"r": "r2", "p": 1}),
    ("prealloc", {"r": "r2", "p": 0}), ("send_chunk", {"r": "r2", "p": 0}),
    ("send_chunk", {"r": "r2", "p": 1}), ("land", {"p": 1}), ("land", {"p": 0}),
    ("transfer_success", {"r": "r2"}), ("decode", {"r": "r2"}),
]


@pytest.mark.parametrize("device", DEVICES)
def test_patched_runs_never_leak(device: str) -> None:
    system = load(MODELS / "patched.py", sizes={"requests": 3, "pages": 6})
    schedules = [[instance_by_label(system, name, args) for name, args in PATCHED_REUSE]]
    for seed in range(10):
        exclude = ("abort", "timeout") if seed % 2 else ()  # some runs get further
        schedules.append(random_schedule(system, 60, seed=seed, exclude=exclude))
    reads = 0
    for schedule in schedules:
        doc = schedule_trace(system, schedule)
        assert doc["property"] is None  # the patched model violates nothing
        report = replay_trace(doc, device=device)
        assert not report.leaked, report.render_text()
        assert report.foreign_reads == [] and report.late_writes == [] and report.aftermath == []
        assert report.max_deviation == 0.0
        reads += sum(op.op == "read" for s in report.steps for op in s.ops)
    reuse = replay_trace(schedule_trace(system, schedules[0]), device=device)
    assert "read(r2, page 1): holds r2 block 0 (own)" in reuse.render_text()
    assert reads >= 5


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out, err)
    return code, out.getvalue(), err.getvalue()


def test_cli_verify_then_replay(tmp_path: Path) -> None:
    """The issue's acceptance commands (explicit engine), through the CLI functions."""
    cex = tmp_path / "cex.json"
    code, out, _ = _run(["verify", str(MODELS / "buggy_pd.py"), "--engine", "explicit", "--json"])
    assert code == 1
    cex.write_text(out)
    code, out, err = _run(["replay", str(cex), "--device", "cpu"])
    assert code == 1, err
    assert "read(r0, page 0): holds tenant T block 0 (FOREIGN)" in out
    assert "foreign pages read: 2" in out and "max |attn - own| = 0." in out
    code, out, _ = _run(["verify", str(MODELS / "free_before_drain.py"), "--engine", "explicit",
                         "--json"])
    cex.write_text(out)
    code, out, _ = _run(["replay", str(cex), "--device", "cpu", "--json"])
    doc = json.loads(out)
    assert code == 1 and doc["summary"]["leaked"] and doc["summary"]["late_writes"][0]["freed_step"] == 5
    assert doc["aftermath"] and doc["summary"]["aftermath_max_abs_dev"] > 0


def test_cli_replay_of_an_unmappable_trace_is_a_clear_error(tmp_path: Path) -> None:
    trace = dict(counterexamples("buggy_pd.py")[NRBW])
    trace["steps"] = [dict(s) for s in trace["steps"]]
    trace["steps"][2]["events"] = [{"kind": "free", "request": "r0", "page": 3}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(trace))
    code, out, err = _run(["replay", str(path), "--device", "cpu"])
    assert code == 2 and out == ""
    assert "free(r0, page 3): page 3 is free" in err
