"""The lifted re-check (:mod:`kvspec.proofs.lifted`) of a size-specific certificate whose
constants are tied to the pool's size, for a model that orders its pages in one action
(``lowest_free``: ``prealloc`` takes the lowest free pages): read literally,
``need[r] != pages + 1`` at six pages says ``need[r] != 7`` at every size, which
``admission`` does not preserve; read relative to ``size.pages`` (checked to be the same
clause at the certificate's size) it is inductive for every size, so the certificate
re-checks at once. What the lifted route accepts, the orbit-by-orbit check accepts too,
on invariants a forger (or a bug) might write."""
from __future__ import annotations

from pathlib import Path

import pytest
import z3
from conftest import run_cli, system_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_lifted_recheck import _mutants, assert_lifted_agrees

from kvspec.lang.system import System
from kvspec.proofs.certificate import check_certificate, load_certificate
from kvspec.proofs.clauses import parse_invariant
from kvspec.proofs.orbits import check_orbits

SIZES = {"requests": 3, "pages": 6}
BOTH = (True, True)


@pytest.fixture(scope="module")
def system() -> System:
    return system_of("lowest_free.py", SIZES)


#: ``kvspec verify models/lowest_free.py --size requests=3,pages=6 --engine pdr
#: --save-proof``, kept (PDR's clauses vary from run to run; these stay put)
CERT = Path(__file__).parent / "certificates" / "lowest_free.LowestFreePD.requests=3,pages=6.json"


def test_the_kept_certificate_still_rechecks(system: System) -> None:
    check = check_certificate(CERT, system)
    assert check.ok, check.problems


def test_check_proof_at_64_pages_reads_constants_as_sizes() -> None:
    """Above 5,000 clause instances ``check-proof`` tries the lifted route first: the
    (8,64) certificate of PDR re-checks through it, with ``need[r] != 65`` read as
    ``need[r] != size.pages + 1``, though the orbit check leaves prealloc unrenamed."""
    cert = CERT.parent / "lowest_free.LowestFreePD.requests=8,pages=64.json"
    res = run_cli("check-proof", str(cert), "models/lowest_free.py")
    assert res.code == 0, res.out + res.err
    text = " ".join(res.out.split())
    assert "checked through its reading for every size" in text, text
    assert "with constants read relative to a size" in text, text


@pytest.fixture(scope="module")
def representatives(system: System) -> tuple[list[z3.BoolRef], list[str]]:
    """The representatives of ``lowest_free``'s PDR certificate at (3,6)."""
    doc = load_certificate(CERT)
    assert doc.symmetry == ["requests", "pages"]
    clauses = parse_invariant(doc.smtlib2, system.state_vars())
    return [c.formula for c in clauses], list(doc.readable)


def test_constants_tied_to_the_pool_are_read_as_sizes(
        system: System, representatives: tuple[list[z3.BoolRef], list[str]]) -> None:
    formulas, labels = representatives
    assert any("need[r] != 7" in label for label in labels), labels  # pages + 1 at 6 pages
    props = list(system.properties)
    report = check_orbits(system, formulas, labels, props, BOTH, lifted_from=0)
    lifted = report.lifted
    assert report.ok and lifted is not None and lifted.proved, lifted
    assert lifted.readings > 0
    # prealloc orders the pages: the orbit check leaves it unrenamed, the lifted route
    # does not need it renamed
    assert report.unrenamed == {"page": ["prealloc"]}
    assert check_orbits(system, formulas, labels, props, BOTH).ok


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(data=st.data())
def test_what_the_lifted_route_accepts_with_size_readings_the_orbit_check_accepts(
        system: System, representatives: tuple[list[z3.BoolRef], list[str]],
        data: st.DataObject) -> None:
    formulas, _ = representatives
    # numbers moved by one twice as often: next to the pool's size they change the readings
    assert_lifted_agrees(system, data.draw(_mutants(formulas,
                                                    ("drop", "negate", "number", "number"))))
