"""PDR on the library's buggy and fixed designs at their default size (requests=2,
pages=4): every property that holds is PROVED (an inductive invariant, re-checked by
the certificate checker), every violated one is VIOLATED with the shortest
counterexample of ``test_library_models.EXPECTED``.

These designs need what the basic templates lack: a sum of two counts
(``count(written == r) + count(inflight == r) == sent[r]``), at most one page per
request (``count(reading == r) <= 1``), and goals of violated properties left out of
the selection."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import system_of
from test_library_models import EXPECTED

from kvspec.engines.pdr import run_pdr
from kvspec.verdict import Status

#: (file, class) -> CPU seconds one pdr run took when measured (2 cores shared); the
#: test allows several times that
CASES: dict[tuple[str, str], float] = {
    ("sglang_admission.py", "After36988"): 8,
    ("sglang_admission.py", "After38935"): 6,
    ("abort_release.py", "AckOnReceipt"): 3,
    ("abort_release.py", "AckWithoutClosingRoom"): 3,
    ("abort_release.py", "TimeoutRelease"): 15,
    ("aux_slot.py", "SlotHeldUntilDrained"): 1,
    ("source_free.py", "FreeOnExpiry"): 1,
    ("source_free.py", "LeaseValidated"): 2,
}
SLOW = {("nixl_handles.py", "ReleaseOnFirstError"): 24}


def _check(key: tuple[str, str], seconds: float, tmp_path: Path) -> None:
    system = system_of(key[0], model_class=key[1])
    t0 = time.process_time()
    out = run_pdr(system, timeout=120, save_proof=False, proofs_dir=tmp_path)
    cpu = time.process_time() - t0
    got = {v.prop: v for v in out.verdicts}
    for name, v in got.items():
        if name in EXPECTED[key]:
            assert v.status is Status.VIOLATED, (name, v.status, v.detail)
            assert v.trace is not None and len(v.trace.steps) == EXPECTED[key][name]
        else:
            assert v.status is Status.PROVED, (name, v.status, v.detail)
    assert cpu < max(60.0, 5 * seconds), f"{cpu:.1f}s CPU"


@pytest.mark.parametrize("key", sorted(CASES), ids=lambda k: f"{k[0][:-3]}.{k[1]}")
def test_holding_properties_are_proved_and_violated_ones_shortest(key: tuple[str, str],
                                                                 tmp_path: Path) -> None:
    _check(key, CASES[key], tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(SLOW), ids=lambda k: f"{k[0][:-3]}.{k[1]}")
def test_every_property_violated_gets_its_shortest_counterexample(key: tuple[str, str],
                                                                  tmp_path: Path) -> None:
    _check(key, SLOW[key], tmp_path)
