"""The all-sizes invariant cut down to what the properties need: each proved property
says how many clauses it needs, the stored invariant is the cut one only when that
re-checks from scratch, and a cut that is not inductive is never what gets stored."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.proofs.certificate import check_certificate, load_certificate
from kvspec.proofs.parametric import engine as all_sizes_engine
from kvspec.proofs.parametric.needs import Needs
from kvspec.runner import run
from kvspec.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "single_node.py"


def _prove(tmp_path: Path) -> tuple[dict[str, object], Path]:
    system = compile_model(load_model(MODEL))
    res = run(system, "all-sizes", proofs_dir=tmp_path, save_proof=True, coverage=False)
    assert all(v.status is Status.PROVED and v.method == "all sizes" for v in res.verdicts), \
        [v.headline() for v in res.verdicts]
    (cert,) = tmp_path.glob("*requests=all*.json")
    return res.stats.extra["all-sizes"]["all_sizes"], cert


def test_each_property_says_how_many_clauses_it_needs(tmp_path: Path) -> None:
    info, cert = _prove(tmp_path)
    n = info["clauses"]
    assert set(info["needs"]) == set(info["proved"])
    assert all(1 <= k <= n for k in info["needs"].values())
    doc = load_certificate(cert)
    assert doc.clauses == n
    check = check_certificate(cert, compile_model(load_model(MODEL)))
    assert check.ok, check.problems


def test_the_cut_is_smaller_than_what_houdini_kept(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The same proof with and without the cut: both start from the same size-specific
    invariant (the first run's certificate, re-checked by the second), so they differ
    only in the cut, not in what PDR happened to learn at the small size."""
    cut, _ = _prove(tmp_path / "cut")
    (tmp_path / "full").mkdir()
    (small,) = [p for p in (tmp_path / "cut").glob("*.json") if "requests=all" not in p.name]
    shutil.copy(small, tmp_path / "full" / small.name)
    monkeypatch.setattr(all_sizes_engine, "find_needs", lambda *a, **k: None)
    full, _ = _prove(tmp_path / "full")
    assert full["needs"] == {}
    assert cut["clauses"] < full["clauses"]


def test_a_cut_that_does_not_re_check_is_not_stored(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong cut (here: one clause only, not inductive on its own) is caught by the
    re-check from scratch; the whole invariant is stored and proves every property."""
    real = all_sizes_engine.find_needs

    def wrong(model, clauses, properties, **kw):  # type: ignore[no-untyped-def]
        needs = real(model, clauses, properties, **kw)
        assert needs is not None and len(needs.kept) > 1
        return Needs(kept=needs.kept[:1], by_property={p: [0] for p in properties})

    monkeypatch.setattr(all_sizes_engine, "find_needs", wrong)
    info, cert = _prove(tmp_path)
    assert info["clauses"] > 1 and info["needs"] == {}
    check = check_certificate(cert, compile_model(load_model(MODEL)))
    assert check.ok, check.problems
