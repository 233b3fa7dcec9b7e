"""Lockstep model-based test: a model and the tensor page pool, driven together.

A Hypothesis state machine generated from the model (``kvspec.engines.fuzz``) runs the
model; after every step its events go to a ``PoolDriver`` (the engine of ``kvspec
replay``).  For every pool operation that can show a leak, the pool's evidence must
coincide with the model's monitors *for that very event*:

* a read finds foreign bytes (or a write in flight)  <=>  no-read-beyond-written fires;
* a write lands in a page its writer no longer owns   <=>  no-reuse-before-drain fires;
* a page is allocated with another's write in flight  <=>  no-reuse-before-drain fires;

and an attention deviates from the own-KV output exactly when it read a foreign page.
On the buggy models the evidence must occur; on the patched ones never.

The correspondence is exact for these models, where a request never gets back a page
it once freed and at most one write per page is in flight (the monitor tracks only the
latest writer of a page).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import ClassVar, cast

import pytest

torch = pytest.importorskip("torch")

from hypothesis import Verbosity  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from kvspec.engines.fuzz import ModelMachine, fuzz_settings, state_machine  # noqa: E402
from kvspec.lang.system import StepResult  # noqa: E402
from kvspec.pool import PoolConfig, PoolDriver  # noqa: E402
from kvspec.props.events import Event  # noqa: E402
from kvspec.testing import load  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / "models"
NRBW, NRBD = "no-read-beyond-written", "no-reuse-before-drain"

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda",
                 marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")),
]


class PoolLockstep(ModelMachine):
    """Drives a fresh tensor pool with the events of every model step."""

    device: ClassVar[str] = "cpu"
    tally: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        schema = type(self).system.schema
        config = PoolConfig(pages=schema.pages, requests=schema.requests + 1,
                            device=type(self).device, earlier_tenant=True)
        self.driver = PoolDriver(config, requests=schema.requests)

    def after_step(self, result: StepResult) -> None:
        tally = type(self).tally
        events = [(e.kind, e.request, e.page) for e in result.events]
        record = self.driver.step(len(self.schedule), result.instance.label(), events)
        flagged = {(prop, ev) for prop, _reason, ev in result.violations}
        tally["flags"] += sum(p in (NRBW, NRBD) for p, _ in flagged)
        for op in record.ops:
            event = Event(op.op, op.request, op.page)
            if op.op == "read":
                assert op.detail["content_ok"], op.text
                tally["reads"] += 1
                pool_bad = op.detail["foreign"] or bool(op.detail["inflight_writers"])
                model_bad = (NRBW, event) in flagged
                tally["foreign_reads"] += op.detail["foreign"]
            elif op.op == "land_write":
                pool_bad = op.detail["late"]
                model_bad = (NRBD, event) in flagged
                tally["late_writes"] += pool_bad
            elif op.op == "alloc":
                pool_bad = bool(op.detail["inflight_writers"])
                model_bad = (NRBD, event) in flagged
                tally["reuse_hazards"] += pool_bad
            elif op.op == "attend":
                deviates = op.detail["max_abs_dev"] > 1e-5
                assert deviates == bool(op.detail["foreign_pages"]), op.text
                continue
            else:
                continue
            tally["evidence"] += pool_bad
            assert pool_bad == model_bad, (
                f"step {len(self.schedule)} {result.instance.label()}: pool says {op.text!r} "
                f"but the monitors {'flagged' if model_bad else 'did not flag'} {event.text()}; "
                f"schedule: {[i.label() for i in self.schedule]}")


def run_lockstep(model: str, device: str, *, examples: int = 20, steps: int = 40) -> Counter[str]:
    system = load(MODELS / model, sizes={"requests": 3, "pages": 6})
    machine = cast(type[PoolLockstep], state_machine(system, properties=(), base=PoolLockstep,
                                                     name=f"{system.name}PoolLockstep"))
    machine.device = device
    machine.tally = Counter()
    run_state_machine_as_test(machine, settings=fuzz_settings(max_examples=examples, steps=steps,
                                                              verbosity=Verbosity.normal))
    return machine.tally


@pytest.mark.parametrize("device", DEVICES)
def test_buggy_pd_foreign_reads_exactly_when_flagged(device: str) -> None:
    tally = run_lockstep("buggy_pd.py", device)
    assert tally["reads"] > 0 and tally["foreign_reads"] > 0 and tally["flags"] > 0


@pytest.mark.parametrize("device", DEVICES)
def test_free_before_drain_late_writes_exactly_when_flagged(device: str) -> None:
    tally = run_lockstep("free_before_drain.py", device)
    assert tally["late_writes"] > 0 and tally["flags"] > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["patched.py", "single_node.py"])
def test_patched_models_never_show_evidence(model: str, device: str) -> None:
    tally = run_lockstep(model, device)
    assert tally["reads"] > 0
    assert tally["evidence"] == 0 and tally["flags"] == 0
