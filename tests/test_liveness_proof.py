"""Liveness proofs (``kvspec live --engine proof``, k-liveness with Spacer): HOLDS only
with a re-checked invariant, never on a leaking design, and in agreement with the
explicit search on shipped and generated models."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import z3
from hypothesis import given, settings
from test_liveness import by_prop, gen_model, live_cli, live_system, planted

from kvspec.engines.explicit import Deadline
from kvspec.liveness import PEF, RT, check_liveness
from kvspec.liveness.check import declared_fairness
from kvspec.liveness.obligations import Obligation
from kvspec.liveness.proof import KLiveness, check_liveness_proof, encode
from kvspec.verdict import Status

TIMEOUT = 120.0


SMALL = {"requests": 1, "pages": 1}


def test_merged_fix_is_proved_under_its_fairness_and_says_which() -> None:
    system = live_system("vllm_async_load_fixed.py", SMALL)
    verdicts, _ = check_liveness_proof(system, properties=[PEF], timeout=TIMEOUT)
    v = by_prop(verdicts)[PEF]
    assert v.status is Status.HOLDS, v.detail
    assert "inductive invariant re-checked" in v.detail
    assert "weak fairness: finished_recving" in v.detail


@pytest.mark.slow
def test_merged_fix_is_proved_beyond_the_default_size() -> None:
    # the model's default is requests=2, pages=3; about 100 s of CPU
    # the model's default is requests=2, pages=3
    system = live_system("vllm_async_load_fixed.py", {"requests": 3, "pages": 3})
    verdicts, _ = check_liveness_proof(system, properties=[PEF], timeout=600)
    assert by_prop(verdicts)[PEF].status is Status.HOLDS, by_prop(verdicts)[PEF].detail


def test_merged_fix_without_fairness_is_never_proved() -> None:
    system = live_system("vllm_async_load_fixed.py", {"requests": 1})
    verdicts, _ = check_liveness_proof(system, properties=[PEF], fairness=False,
                                       timeout=TIMEOUT)
    v = by_prop(verdicts)[PEF]
    assert v.status is Status.UNKNOWN
    assert "can stay pending" in v.detail and "no fairness assumed" in v.detail


def test_leaking_first_cut_is_never_proved() -> None:
    system = live_system("vllm_async_load_leak.py", SMALL)
    verdicts, _ = check_liveness_proof(system, properties=[PEF], timeout=TIMEOUT)
    assert by_prop(verdicts)[PEF].status is Status.UNKNOWN


def test_an_invariant_that_does_not_re_check_is_not_trusted(monkeypatch: Any) -> None:
    # Spacer's answer replaced by "true": the re-check must refuse it
    def fake(self: KLiveness, timeout_ms: int | None) -> tuple[Any, Any, str]:
        return z3.unsat, z3.BoolVal(True), ""

    monkeypatch.setattr(KLiveness, "spacer", fake)
    system = live_system("vllm_async_load_fixed.py", SMALL)
    verdicts, _ = check_liveness_proof(system, properties=[PEF], timeout=TIMEOUT)
    v = by_prop(verdicts)[PEF]
    assert v.status is Status.UNKNOWN and "not trusted" in v.detail


@pytest.mark.slow  # every HOLDS above passes the same re-check
def test_recheck_accepts_the_invariant_spacer_found() -> None:
    system = live_system("vllm_async_load_fixed.py", SMALL)
    enc = encode(system, Deadline(None))
    kl = KLiveness(enc, Obligation(RT, 0), declared_fairness(system), 4)
    res, inv, _ = kl.spacer(int(TIMEOUT * 1000))
    assert res == z3.unsat and inv is not None
    assert kl.recheck(inv, Deadline(TIMEOUT)) is None
    # and a weakened invariant (dropping one lemma) is refused
    if z3.is_and(inv) and len(inv.children()) > 1:
        weaker = [z3.And(*[c for j, c in enumerate(inv.children()) if j != i])
                  for i in range(len(inv.children()))]
        assert any(kl.recheck(w, Deadline(TIMEOUT)) is not None for w in weaker)


@pytest.mark.slow  # the generated models below cover the same agreement quickly
@pytest.mark.parametrize("name,sizes", [("buggy_pd.py", {"requests": 1, "pages": 2}),
                                        ("single_node.py", {"requests": 1, "pages": 2})])
def test_shipped_models_agree_with_the_explicit_engine(name: str, sizes: dict[str, int]) -> None:
    system = live_system(name, sizes)
    explicit = by_prop(check_liveness(system, deadlock=False)[0])
    proved = by_prop(check_liveness_proof(system, timeout=TIMEOUT)[0])
    for prop, v in proved.items():
        if v.status is Status.HOLDS:
            assert explicit[prop].status is Status.HOLDS, prop
        if explicit[prop].status is Status.VIOLATED:
            assert v.status is Status.UNKNOWN, prop


@settings(max_examples=12, deadline=None)
@given(planted())
def test_generated_leaks_agree_with_explicit(tmp_path_factory: Any, case: Any) -> None:
    phases, moves = case
    path = tmp_path_factory.mktemp("gen") / "gen.py"
    path.write_text(gen_model(phases, moves))
    system = live_system(path)
    explicit = by_prop(check_liveness(system, properties=[PEF], deadlock=False)[0])[PEF]
    v = by_prop(check_liveness_proof(system, properties=[PEF], timeout=60)[0])[PEF]
    if explicit.status is Status.VIOLATED:
        assert v.status is Status.UNKNOWN
    elif not any(fair == "strong" for *_, fair in moves):
        # weak fairness only: k-liveness is complete here (the rounds are bounded)
        assert v.status is Status.HOLDS, v.detail


def test_live_command_engine_proof(tmp_path: Path) -> None:
    code, out, _ = live_cli("live", "models/vllm_async_load_fixed.py", "--engine", "proof",
                            "--size", "requests=1", "--size", "pages=1", "--property", PEF,
                            "--no-deadlock")
    assert code == 0, out
    assert "k-liveness" in out and "HOLDS" in out


def test_auto_engine_proves_what_the_explicit_search_left_open() -> None:
    code, out, _ = live_cli("live", "models/vllm_async_load_fixed.py", "--engine", "auto",
                            "--size", "requests=1", "--size", "pages=1", "--property", PEF,
                            "--no-deadlock", "--max-states", "3")
    assert code == 0, out
    assert "k-liveness" in out

