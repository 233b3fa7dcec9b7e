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


MANY_WRITES = """
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require, var


class ManyWrites(Model):
    requests = Requests(1)
    pages = Pages(1)
    posted = var(Int(0, 4), init=0)
    landed = var(Int(0, 4), init=0)

    @action
    def post(s, r: Request, p: Page):
        require(s.posted < 4)
        s.posted = s.posted + 1
        emit.post_write(r, p)

    @action
    def land(s, r: Request, p: Page):
        require(s.landed < s.posted)
        s.landed = s.landed + 1
        emit.land_write(r, p)
"""


def test_a_saturated_write_count_never_gives_a_violation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Four writes in flight (more than the counted three) that all land: the lasso that
    ends after the landings is not a leak, and neither engine may call it one."""
    from kvspec.liveness import check_liveness_bmc

    path = tmp_path / "many_writes.py"
    path.write_text(MANY_WRITES)
    system = compile_for_liveness(load_model(path), {})
    (explicit,), _ = check_liveness(system, properties=[WEQ], deadlock=False)
    (symbolic,), _ = check_liveness_bmc(system, properties=[WEQ], depth=10)
    for v in (explicit, symbolic):
        assert v.status is Status.UNKNOWN, v.headline()
        assert "not counted exactly" in v.detail
