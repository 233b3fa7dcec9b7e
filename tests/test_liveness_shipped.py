"""The shipped models' liveness verdicts, as the README's table states them: no
deadlock anywhere, the leaks exactly where the designs leak."""
from __future__ import annotations

import pytest
from conftest import MODELS

from kvspec.lang.loader import load_model
from kvspec.liveness import DEADLOCK, PEF, RT, WEQ, check_liveness
from kvspec.liveness.live_cmd import compile_for_liveness
from kvspec.verdict import Status

#: model -> the liveness properties it violates (under its declared fairness)
EXPECTED = {
    "single_node.py": set(),
    "buggy_pd.py": {PEF},
    "free_before_drain.py": set(),
    "patched.py": set(),
    "vllm_async_load_leak.py": {PEF},
    "vllm_async_load_fixed.py": set(),
}


@pytest.mark.parametrize("model", sorted(EXPECTED))
def test_shipped_liveness_verdicts(model: str) -> None:
    system = compile_for_liveness(load_model(MODELS / model), {})
    verdicts, stats = check_liveness(system, properties=[PEF, RT, WEQ], deadlock=True)
    by = {v.prop: v for v in verdicts}
    assert set(by) == {PEF, RT, WEQ, DEADLOCK}
    violated = {name for name, v in by.items() if v.status is Status.VIOLATED}
    assert violated == EXPECTED[model], {n: v.headline() for n, v in by.items()}
    for name, v in by.items():
        if name not in violated:
            assert v.status is Status.HOLDS and "exhaustive" in v.headline()
        else:
            assert v.trace is not None and v.trace.loop_start is not None


def test_the_fixed_async_load_design_needs_its_fairness() -> None:
    system = compile_for_liveness(load_model(MODELS / "vllm_async_load_fixed.py"), {})
    verdicts, _ = check_liveness(system, properties=[PEF], deadlock=False, fairness=False)
    (v,) = verdicts
    assert v.status is Status.VIOLATED and "no fairness assumed" in v.detail


def test_show_lists_what_live_checks() -> None:
    from conftest import run_cli

    res = run_cli("show", str(MODELS / "vllm_async_load_fixed.py"))
    assert res.code == 0
    text = res.out[res.out.index("liveness (kvspec live):"):]
    for name in (PEF, RT, WEQ, DEADLOCK):
        assert f"  {name} " in text
    assert "fairness: weak fairness: finished_recving, update_waiting, finish" in text
