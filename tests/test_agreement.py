"""Every engine on every model in models/: the verdicts must be the same.

The explicit engine (exhaustive, shortest counterexamples) is the reference, with
and without symmetry reduction. BMC must find every violation with a trace of the
same length and otherwise say "bounded"; k-induction may prove or give up but
never contradict; PDR and the auto portfolio must decide every property exactly
as the exhaustive search does. Counterexamples replay concretely inside every
engine (``concretize``), so a disagreement here is a real one.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from conftest import ALL_MODELS, system_of

from kvspec.engines.auto import run_auto
from kvspec.engines.bmc import run_bmc
from kvspec.engines.explicit import explore
from kvspec.engines.kind import run_kind
from kvspec.engines.pdr import run_pdr
from kvspec.verdict import Status, Verdict

SIZES = {"requests": 2, "pages": 3}


def _sizes(model: str) -> dict[str, int]:
    system = system_of(model)
    return {k: v for k, v in SIZES.items() if k in system.sizes}


def _summary(v: Verdict) -> tuple[str, int | None]:
    if v.status is Status.VIOLATED:
        assert v.trace is not None and v.trace.violation is not None
        return "violated", len(v.trace)
    if v.status in (Status.PROVED, Status.HOLDS):
        return "holds", None
    return "unknown", None


@cache
def reference(model: str) -> dict[str, tuple[str, int | None]]:
    out = explore(system_of(model, _sizes(model)))
    assert out.complete
    ref = {v.prop: _summary(v) for v in out.verdicts}
    plain = explore(system_of(model, _sizes(model)), symmetry=False)
    assert {v.prop: _summary(v) for v in plain.verdicts} == ref
    return ref


def _bound(ref: dict[str, tuple[str, int | None]]) -> int:
    return max([n for _, n in ref.values() if n is not None], default=6)


@pytest.mark.parametrize("model", ALL_MODELS)
def test_bmc_agrees(model: str) -> None:
    ref = reference(model)
    depth = _bound(ref)
    out = run_bmc(system_of(model, _sizes(model)), depth=depth, timeout=300)
    for v in out.verdicts:
        if ref[v.prop][0] == "violated":
            assert _summary(v) == ref[v.prop], v.prop
        else:
            assert (v.status, v.method) == (Status.HOLDS, "bounded"), v.prop


@pytest.mark.parametrize("model", ALL_MODELS)
def test_kind_never_contradicts(model: str) -> None:
    ref = reference(model)
    out = run_kind(system_of(model, _sizes(model)), max_k=_bound(ref), timeout=300)
    for v in out.verdicts:
        got = _summary(v)
        if ref[v.prop][0] == "violated":
            assert got == ref[v.prop], v.prop
        else:
            assert got[0] in ("holds", "unknown"), v.prop


@pytest.mark.parametrize("model", ALL_MODELS)
def test_pdr_agrees(model: str, tmp_path: Path) -> None:
    ref = reference(model)
    out = run_pdr(system_of(model, _sizes(model)), timeout=300, save_proof=False,
                  proofs_dir=tmp_path)
    assert {v.prop: _summary(v) for v in out.verdicts} == ref
    assert all(v.status is not Status.HOLDS for v in out.verdicts)  # PDR proves


@pytest.mark.parametrize("model", ALL_MODELS)
def test_auto_agrees(model: str, tmp_path: Path) -> None:
    ref = reference(model)
    out = run_auto(system_of(model, _sizes(model)), timeout=300, max_states=None,
                   symmetry=True, save_proof=False, proofs_dir=tmp_path)
    assert {v.prop: _summary(v) for v in out.verdicts} == ref
    assert all(v.is_success or v.status is Status.VIOLATED for v in out.verdicts)
