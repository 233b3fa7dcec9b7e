"""PDR: proofs by inferred invariants (and Spacer), shortest counterexamples,
honest UNKNOWN."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, system_of

from kvspec.engines.bmc import Deadline
from kvspec.engines.explicit import explore
from kvspec.engines.selection import Strengthener, goal_templates
from kvspec.engines.inference import (
    StateTable,
    enumerate_candidates,
    sample_states,
)
from kvspec.engines.pdr import run_pdr
from kvspec.engines.transition import TransitionSystem
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.proofs.certificate import certificate_name, check_certificate
from kvspec.verdict import Status

TOKEN_MODEL = '''
from kvspec import Model, Request, Requests, action, invariant, require


class Token(Model):
    """One token passed around three requests. "r0 and r1 never both hold it" needs
    "at most one holder" — a relation between two requests, beyond the templates."""
    requests = Requests(3)
    token = requests.var(bool, init=[True, False, False])

    @action
    def pass_on(s, r: Request, q: Request):
        require(s.token[r] and r != q)
        s.token[r] = False
        s.token[q] = True

    @invariant
    def not_both(s):
        return not (s.token[0] and s.token[1])
'''


def test_pdr_proves_patched_and_saves_a_certificate(tmp_path: Path) -> None:
    system = system_of("patched.py", {"requests": 2, "pages": 3})
    out = run_pdr(system, timeout=120, save_proof=True, proofs_dir=tmp_path)
    assert all(v.status is Status.PROVED and v.method == "pdr" for v in out.verdicts)
    assert "inductive invariant" in out.verdicts[0].detail
    cert = tmp_path / certificate_name(system)
    assert cert.exists()
    check = check_certificate(cert, system_of("patched.py", {"requests": 2, "pages": 3}))
    assert check.ok, check.problems


def test_pdr_counterexamples_match_explicit() -> None:
    sizes = {"requests": 2, "pages": 3}
    ref = {v.prop: v for v in explore(system_of("buggy_pd.py", sizes)).verdicts}
    out = run_pdr(system_of("buggy_pd.py", sizes), timeout=120, save_proof=False,
                  proofs_dir=Path("proofs"))
    for v in out.verdicts:
        if ref[v.prop].status is Status.VIOLATED:
            assert v.status is Status.VIOLATED and v.trace is not None
            assert len(v.trace) == len(ref[v.prop].trace)  # type: ignore[arg-type]
        else:
            assert v.status is Status.PROVED


@pytest.mark.parametrize("fallback", ["spacer", "ic3"])
def test_fallback_completes_what_templates_cannot_express(write_model, tmp_path: Path,
                                                          fallback: str) -> None:
    """"r0 and r1 never both hold the token" needs "no two requests hold it", a
    relation between two requests that no single-request template states."""
    path = write_model(TOKEN_MODEL, "token.py")
    for inference in (True, False):
        system = compile_model(load_model(path), properties=["not-both"])
        out = run_pdr(system, timeout=120, save_proof=True, proofs_dir=tmp_path,
                      inference=inference, fallback=fallback)
        (v,) = out.verdicts
        assert v.status is Status.PROVED, v
        cert = tmp_path / certificate_name(system)
        assert ("IC3" if fallback == "ic3" else "Spacer") in cert.read_text()
        check = check_certificate(cert, compile_model(load_model(path),
                                                      properties=["not-both"]))
        assert check.ok, check.problems


def test_ic3_alone_finds_shortest_violations() -> None:
    system = system_of("free_before_drain.py", {"requests": 1, "pages": 2},
                       ["no-reuse-before-drain"])
    out = run_pdr(system, timeout=120, save_proof=False, proofs_dir=Path("proofs"),
                  inference=False, fallback="ic3", quick_depth=0)
    (v,) = out.verdicts
    assert v.status is Status.VIOLATED and v.trace is not None and len(v.trace) == 6


def test_timeout_is_unknown() -> None:
    out = run_pdr(system_of("patched.py", {"requests": 2, "pages": 3}), timeout=0.05,
                  save_proof=False, proofs_dir=Path("proofs"))
    assert all(v.status is Status.UNKNOWN for v in out.verdicts)


def test_inferred_invariant_is_size_independent() -> None:
    """Clauses chosen at (2, 3) are inductive at (3, 5) without a single change."""
    small = system_of("patched.py", {"requests": 2, "pages": 3})
    schema, states = sample_states(small)
    templates = enumerate_candidates(schema, StateTable(schema, states))
    first = Strengthener(TransitionSystem(small, "bv"), templates,
                         goal_templates(small, templates), (True, True), Deadline(60)).run()
    assert not first.open and first.errors_excluded
    big = system_of("patched.py", {"requests": 3, "pages": 5})
    again = Strengthener(TransitionSystem(big, "bv"), templates, goal_templates(big, templates),
                         (True, True), Deadline(60), seed=first.chosen).run()
    assert sorted(again.chosen) == sorted(first.chosen) and again.dropped == 0


def test_cli_pdr_save_proof(tmp_path: Path) -> None:
    res = run_cli("verify", "models/single_node.py", "--engine", "pdr", "--save-proof",
                  "--proofs-dir", str(tmp_path), "--size", "requests=2,pages=2")
    assert res.code == 0, res.out + res.err
    assert "PROVED (pdr, inductive invariant" in res.out
    (cert,) = tmp_path.glob("single_node.*.json")
    res = run_cli("check-proof", str(cert), "models/single_node.py", "--size",
                  "requests=2,pages=2")
    assert res.code == 0 and "certificate re-checked" in res.out
