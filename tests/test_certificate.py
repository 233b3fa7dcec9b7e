"""Certificates: written by PDR, re-checked independently, rejected with a clear
message when they belong to another model version or size, were edited, or are
not inductive (then with a counterexample to induction)."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from conftest import MODELS, run_cli, system_of

from kvspec.engines.auto import run_auto
from kvspec.engines.explicit import explore
from kvspec.engines.pdr import run_pdr
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.proofs.certificate import (
    Invariant,
    certificate_name,
    check_certificate,
    load_invariant,
    verify_invariant,
)
from kvspec.report.text import make_console
from kvspec.verdict import Status

SIZES = {"requests": 2, "pages": 2}
SIZE_ARG = "requests=2,pages=2"


@pytest.fixture(scope="module")
def proof(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A private copy of models/patched.py and its certificate."""
    root = tmp_path_factory.mktemp("proof")
    model = root / "patched.py"
    shutil.copy(MODELS / "patched.py", model)
    system = compile_model(load_model(model), SIZES)
    out = run_pdr(system, timeout=120, save_proof=True, proofs_dir=root / "proofs")
    assert all(v.status is Status.PROVED for v in out.verdicts)
    return model, root / "proofs" / certificate_name(system)


def _render(check) -> str:  # type: ignore[no-untyped-def]
    buf = io.StringIO()
    check.print(make_console(buf, color=False, width=120))
    return buf.getvalue()


def test_certificate_holds_hash_sizes_properties_and_both_renderings(proof) -> None:
    model, cert = proof
    assert cert.name == "patched.PatchedPD.requests=2,pages=2,prefill_capacity=2,max_need=3.json"
    doc = json.loads(cert.read_text())
    system = compile_model(load_model(model), SIZES)
    assert doc["format"] == "kvspec-proof/1"
    assert doc["model"]["sha256"] == system.loaded.sha256
    assert doc["sizes"] == system.sizes
    assert doc["properties"] == [p.name for p in system.properties]
    inv = doc["invariant"]
    assert "(assert" in inv["smtlib2"] and "|owner[0]|" in inv["smtlib2"]
    assert any(r.startswith("for all p, r:") for r in inv["readable"])
    assert len(inv["readable"]) == inv["clauses"] == len(load_invariant(inv["smtlib2"], system))


def test_check_accepts_the_certificate(proof) -> None:
    model, cert = proof
    check = check_certificate(cert, compile_model(load_model(model), SIZES))
    assert check.ok, check.problems
    text = _render(check)
    assert "PROVED (certificate re-checked" in text and "inductive" in text
    res = run_cli("check-proof", str(cert), str(model), "--size", SIZE_ARG)
    assert res.code == 0


def test_another_model_version_is_rechecked_not_rejected(proof, tmp_path: Path) -> None:
    model, cert = proof
    edited = tmp_path / "patched.py"
    edited.write_text(model.read_text() + "\n# a harmless comment\n")
    check = check_certificate(cert, compile_model(load_model(edited), SIZES))
    assert check.ok, check.problems
    assert any("another version of the model" in n for n in check.notes)


def test_a_design_change_that_breaks_the_invariant_is_rejected(proof, tmp_path: Path) -> None:
    model, cert = proof
    edited = tmp_path / "patched.py"
    source = model.read_text()
    # release frees the pages without waiting for the writes to drain
    guard = ("require(s.phase[r] == Phase.HELD)\n"
             "        require(not (s.inflight == r).any())")
    assert source.count(guard) == 1
    changed = source.replace(guard, "require(s.phase[r] == Phase.HELD)")
    edited.write_text(changed)
    system = compile_model(load_model(edited), SIZES)
    check = check_certificate(cert, system)
    assert not check.ok
    assert check.cti is not None
    # and the change really does break the design
    verdicts = {v.prop: v.status for v in explore(system).verdicts}
    assert verdicts["no-reuse-before-drain"] is Status.VIOLATED


def test_other_sizes_are_rejected(proof) -> None:
    model, cert = proof
    check = check_certificate(cert, compile_model(load_model(model),
                                                  {"requests": 2, "pages": 3}))
    assert not check.ok and any("is for sizes" in p for p in check.problems)


def test_check_proof_reads_the_sizes_from_a_size_specific_certificate(proof) -> None:
    """Without ``--size`` the certificate is re-checked at its own sizes (the model's
    defaults are requests=2, pages=4; this one is for pages=2); ``--size`` may repeat
    them, and one that contradicts them is a usage error in one line."""
    model, cert = proof
    assert run_cli("check-proof", str(cert), str(model)).code == 0
    assert run_cli("check-proof", str(cert), str(model), "--size", "pages=2").code == 0
    res = run_cli("check-proof", str(cert), str(model), "--size", "pages=3")
    assert res.code == 2 and res.out == ""
    assert res.err.strip().splitlines() == [
        f"kvspec: error: {cert} is a certificate for requests=2, pages=2, prefill_capacity=2, "
        "max_need=3, not pages=3; "
        "leave --size out to re-check it at its own sizes"]


def test_tampered_invariant_is_rejected(proof, tmp_path: Path) -> None:
    model, cert = proof
    doc = json.loads(cert.read_text())
    smt = doc["invariant"]["smtlib2"]
    # drop every clause but the properties themselves: no longer inductive
    kept = [line for line in smt.splitlines() if not line.startswith("(assert")
            or "violated:" in line]
    doc["invariant"]["smtlib2"] = "\n".join(kept) + "\n"
    bad = tmp_path / cert.name
    bad.write_text(json.dumps(doc))
    check = check_certificate(bad, compile_model(load_model(model), SIZES))
    assert not check.ok
    assert any("edited after the certificate was written" in p for p in check.problems)
    # what is left of the invariant is also logically insufficient, and the check says how
    assert check.cti is not None or check.bad_state is not None
    assert "REJECTED" in _render(check)


def test_unsafe_edit_fails_with_a_counterexample_to_induction(proof, tmp_path: Path) -> None:
    """Release pages before every write into them drained: the stored invariant is
    no longer inductive, and the check shows the step that breaks it."""
    model, cert = proof
    source = model.read_text()
    guard = "        require(s.phase[r] == Phase.HELD)\n        require(not (s.inflight == r).any())\n"
    assert guard in source
    unsafe = tmp_path / "patched.py"
    unsafe.write_text(source.replace(guard, "        require(s.phase[r] == Phase.HELD)\n"))
    system = compile_model(load_model(unsafe), SIZES)
    check = check_certificate(cert, system)
    assert not check.ok
    assert check.cti is not None
    step = check.cti.trace.steps[0]
    assert step.instance.name == "release"
    text = _render(check)
    assert "Counterexample to induction" in text and "release(" in text
    assert "broken:" in text
    res = run_cli("check-proof", str(cert), str(unsafe), "--size", SIZE_ARG)
    assert res.code == 1 and "REJECTED" in res.out


def test_weakened_invariant_shows_cti_and_property_gaps() -> None:
    system = system_of("patched.py", SIZES)
    prop_only = [f for f in system.state_vars() if str(f).startswith("violated:")]
    import z3

    inv = Invariant([z3.Not(v) for v in prop_only], [f"not {v}" for v in prop_only])
    check = verify_invariant(system, inv, [p.name for p in system.properties])
    # the monitor flags alone are not inductive: some step from a state they allow
    # sets a flag
    assert not check.ok and check.cti is not None
    assert "counterexample to induction" in _render(check).lower()
    empty = verify_invariant(system, Invariant([z3.BoolVal(True)], ["true"]),
                             ["no-reuse-before-drain"])
    assert not empty.ok and empty.bad_state is not None
    assert any("does not exclude violations" in p for p in empty.problems)


COUNTER = """
from kvspec import Int, Model, Requests, action, require, var


class Counter(Model):
    requests = Requests(1)
    n = var(Int(0, 2), init=0)
    armed = var(bool, init=False)
    properties = ("no-decode-after-rejection",)

    @action
    def inc(s):
        require(s.n < 2 or s.armed)
        s.n = s.n + 1
"""


def test_an_invariant_that_allows_a_model_error_is_rejected(tmp_path: Path) -> None:
    import z3

    path = tmp_path / "counter.py"
    path.write_text(COUNTER)
    system = compile_model(load_model(path), {})
    flags = [f for f in system.state_vars() if str(f).startswith("violated:")]
    # n == 2 with armed set is allowed by this invariant, and inc then overflows n
    check = verify_invariant(system, Invariant([z3.Not(f) for f in flags], ["no flag"]),
                             ["no-decode-after-rejection"])
    assert not check.ok and check.bad_state is not None
    assert any("model errors" in p for p in check.problems)
    assert "raises a model error" in _render(check)


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    system = system_of("patched.py", SIZES)
    assert "no such certificate" in check_certificate(tmp_path / "x.json", system).problems[0]
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    assert "not a JSON certificate" in check_certificate(junk, system).problems[0]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "kvspec-trace/1"}))
    assert "not a kvspec certificate" in check_certificate(other, system).problems[0]


def test_auto_reuses_a_certificate_for_this_exact_model(proof) -> None:
    model, cert = proof
    out = run_auto(compile_model(load_model(model), SIZES), timeout=60, max_states=None,
                   symmetry=True, save_proof=False, proofs_dir=cert.parent)
    assert [v.headline() for v in out.verdicts] == ["PROVED (certificate re-checked)"] * 4


def test_quantified_conjuncts_are_checked_like_any_other() -> None:
    """verify_invariant checks the SMT-LIB2 text a certificate would hold: a conjunct
    under a quantifier takes part in every check (issue 8: it used to be skipped)."""
    import z3

    system = system_of("buggy_pd.py")
    k = z3.Int("k")
    frozen = [z3.ForAll([k], v == (z3.BoolVal(bool(x)) if z3.is_bool(v) else z3.IntVal(x)))
              for v, x in zip(system.state_vars(), system.initial)]
    check = verify_invariant(system, Invariant(frozen, [f"{v} frozen" for v in frozen]),
                             [p.name for p in system.properties])
    assert not check.ok and check.cti is not None
    assert check.quantified_clauses == len(frozen)
    assert "Counterexample to induction" in _render(check)
    odd = verify_invariant(system, Invariant([z3.ToReal(system.state_vars()[0]) >= 0], ["x"]),
                           ["rejection-is-terminal"])
    assert not odd.ok and any("cannot be checked" in p for p in odd.problems)
    unknown = verify_invariant(system, Invariant([z3.BoolVal(True)], ["true"]), ["no-such"])
    assert not unknown.ok and any("no such property" in p for p in unknown.problems)
