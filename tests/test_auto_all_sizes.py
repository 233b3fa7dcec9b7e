"""``auto`` and the stored certificates of a model: an all-sizes certificate is
re-checked first and its properties say "all sizes"; what it does not cover, or
everything when it does not re-check, comes from the size-specific one, which never
says "all sizes"."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.proofs.certificate import invariant_digest
from kvspec.runner import run
from kvspec.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "patched.py"
PROOFS = ROOT / "proofs"
EVERY = "patched.PatchedPD.requests=all,pages=all,prefill_capacity=all,max_need=all.json"
OWN = "patched.PatchedPD.requests=2,pages=4,prefill_capacity=2,max_need=3.json"


def _auto(proofs: Path, sizes: dict[str, int] | None = None) -> tuple[dict[str, str], list]:
    system = compile_model(load_model(MODEL), sizes or {})
    res = run(system, "auto", proofs_dir=proofs, coverage=False)
    assert all(v.status is Status.PROVED for v in res.verdicts), \
        [v.headline() for v in res.verdicts]
    return {v.prop: v.headline() for v in res.verdicts}, res.stats.extra["auto"]


def _store(tmp_path: Path, *names: str) -> Path:
    proofs = tmp_path / "proofs"
    proofs.mkdir()
    for name in names:
        shutil.copyfile(PROOFS / name, proofs / name)
    return proofs


def test_the_all_sizes_certificate_comes_first(tmp_path: Path) -> None:
    heads, stages = _auto(_store(tmp_path, EVERY, OWN))
    assert all("certificate re-checked, all sizes" in h for h in heads.values()), heads
    assert [Path(st["path"]).name for st in stages] == [EVERY]


def test_what_it_does_not_cover_comes_from_the_size_specific_one(tmp_path: Path) -> None:
    proofs = _store(tmp_path, EVERY, OWN)
    doc = json.loads((proofs / EVERY).read_text())
    doc["properties"] = doc["properties"][:2]
    (proofs / EVERY).write_text(json.dumps(doc))
    heads, stages = _auto(proofs)
    every = [p for p, h in heads.items() if "all sizes" in h]
    assert every == doc["properties"]
    assert [Path(st["path"]).name for st in stages] == [EVERY, OWN]


def test_an_all_sizes_certificate_that_does_not_re_check_is_passed_over(
        tmp_path: Path) -> None:
    """A needed clause removed (checksum recomputed): rejected, and every property is
    proved by the size-specific certificate, without "all sizes"."""
    proofs = _store(tmp_path, EVERY, OWN)
    doc = json.loads((proofs / EVERY).read_text())
    inv = doc["invariant"]
    lines = inv["smtlib2"].splitlines()
    asserts = [k for k, line in enumerate(lines) if line.startswith("(assert")]
    # drop the clause the first property's proof cannot do without: try each in turn
    for k in asserts:
        smt = "\n".join(line for j, line in enumerate(lines) if j != k) + "\n"
        readable = [r for j, r in enumerate(inv["readable"]) if j != asserts.index(k)]
        forged = dict(doc, invariant={"clauses": len(readable), "readable": readable,
                                      "smtlib2": smt, "sha256": invariant_digest(smt, readable)})
        (proofs / EVERY).write_text(json.dumps(forged))
        heads, stages = _auto(proofs)
        if not stages[0]["ok"]:
            break
    else:
        raise AssertionError("no clause of the stored invariant is needed")
    assert not any("all sizes" in h for h in heads.values()), heads
    assert [Path(st["path"]).name for st in stages] == [EVERY, OWN]
    assert stages[1]["ok"]


def test_at_another_size_only_the_all_sizes_certificate_applies(tmp_path: Path) -> None:
    heads, stages = _auto(_store(tmp_path, EVERY, OWN), {"requests": 3, "pages": 6})
    assert all("all sizes" in h for h in heads.values()), heads
    assert [Path(st["path"]).name for st in stages] == [EVERY]
