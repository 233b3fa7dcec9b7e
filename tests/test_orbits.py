"""Size-specific proofs checked one orbit at a time: the small size's clauses as orbit
representatives at a larger size, their check against the full one, and rejection of
invariants that do not generalise or cannot be renamed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import z3
from conftest import MODELS, system_of

from kvspec.engines.bmc import Deadline
from kvspec.engines.orbit_route import orbit_houdini, representatives_of
from kvspec.engines.pdr import orbit_route, run_pdr, select_small
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.proofs.certificate import check_certificate
from kvspec.proofs.clauses import Clause
from kvspec.proofs.orbits import NotSymmetric, Orbits, Renaming, check_orbits
from kvspec.proofs.smt_check import check_clauses
from kvspec.verdict import Status

SYM = (True, True)


@pytest.fixture(scope="module")
def patched_small():
    """The clauses selected for patched at the small size (2 requests, 4 pages)."""
    system = system_of("patched.py", {"requests": 3, "pages": 4})
    small = select_small(system, SYM, Deadline(300))
    assert small.ok and small.seed
    return small


def _instances(system, formulas, labels):
    orbits = Orbits(Renaming(system, SYM), formulas, labels)
    return [Clause(n + 1, "", orbits.term(k, images), f"instance {n + 1}")
            for n, (k, images, _) in enumerate(orbits.every_instance())]


def test_orbit_check_agrees_with_the_full_check(patched_small):
    """Every renaming of the representatives, checked on every action instance by the
    full checker, gives the same verdict as the check one orbit at a time — for the
    inductive invariant and for weakened ones that are not inductive."""
    system = system_of("patched.py", {"requests": 3, "pages": 4})
    formulas, labels = representatives_of(system, patched_small.templates,
                                           patched_small.seed, SYM)
    props = list(system.properties)
    cases = [list(range(len(formulas)))]
    # drop a clause some action needs: take those whose loss the orbit check notices
    for drop in range(len(formulas)):
        keep = [k for k in range(len(formulas)) if k != drop]
        rep = check_orbits(system, [formulas[k] for k in keep], [labels[k] for k in keep],
                           props, SYM)
        if not rep.ok:
            cases.append(keep)
            break
    assert len(cases) == 2, "no clause is needed: the weakened case would test nothing"
    for keep in cases:
        fs, ls = [formulas[k] for k in keep], [labels[k] for k in keep]
        orbit = check_orbits(system, fs, ls, props, SYM)
        full = check_clauses(system, _instances(system, fs, ls), props)
        assert orbit.ok == full.ok, (orbit.problems, full.problems)
    assert check_orbits(system, formulas, labels, props, SYM).ok


def test_pdr_proves_a_larger_size_with_a_certificate_that_rechecks(tmp_path: Path):
    system = system_of("patched.py", {"requests": 3, "pages": 5})
    out = run_pdr(system, timeout=300, save_proof=True, proofs_dir=tmp_path)
    assert all(v.status == Status.PROVED for v in out.verdicts), out.verdicts
    assert all("orbit representatives" in v.detail for v in out.verdicts)
    (cert,) = tmp_path.glob("*.json")
    doc = json.loads(cert.read_text())
    assert doc["symmetry"] == ["requests", "pages"]
    check = check_certificate(cert, system)
    assert check.ok, check.problems
    # the same invariant at another size is rejected (sizes are part of the claim)
    other = system_of("patched.py", {"requests": 3, "pages": 6})
    assert not check_certificate(cert, other).ok


PLANTED = '''

    @action
    def peek(s, r: Request, p: Page):
        """A read of an unwritten page, possible only once five pages are taken:
        never at four pages or fewer."""
        require((s.owner != None).count() >= 5)  # noqa: E711
        require(s.owner[p] == r and not s.landed[p])
        emit.read(r, pages=s.owner == r)
'''


def _planted(tmp_path: Path, sizes: dict[str, int]):
    src = (MODELS / "patched.py").read_text() + PLANTED
    path = tmp_path / "planted.py"
    path.write_text(src)
    return compile_model(load_model(path), sizes, None)


def test_a_small_size_invariant_that_does_not_generalise_is_rejected(tmp_path: Path):
    """At four pages the planted read can never happen, so the small size's clauses
    prove no-read-beyond-written; at six pages they are not inductive, and neither the
    orbit check nor the engine may say PROVED."""
    sizes = {"requests": 2, "pages": 6, "prefill_capacity": 3}
    system = _planted(tmp_path, sizes)
    small = select_small(system, SYM, Deadline(300))
    formulas, labels = representatives_of(system, small.templates, small.seed, SYM)
    wanted = [p for p in system.properties if p.name == "no-read-beyond-written"]
    assert not check_orbits(system, formulas, labels, wanted, SYM).ok
    own = {"no-read-beyond-written": "not violated:no-read-beyond-written"}
    proof = orbit_houdini(system, formulas, labels, wanted, own, SYM, Deadline(300))
    assert proof is None or "no-read-beyond-written" not in proof.proved
    assert orbit_route(system, small, SYM, wanted, Deadline(300)) is None


def test_symmetry_the_model_lacks_is_not_assumed(tmp_path: Path):
    """lowest_free orders its pages in prealloc only: renaming pages leaves prealloc
    out (checked at every page); tests/test_partial_symmetry.py has the models whose
    order lies elsewhere, which are rejected."""
    system = system_of("lowest_free.py", {"requests": 2, "pages": 3})
    report = check_orbits(system, [z3.BoolVal(True)], ["true"], [], SYM)
    assert report.unrenamed == {"page": ["prealloc"]}


def test_a_clause_using_an_id_in_arithmetic_cannot_be_renamed():
    system = system_of("patched.py", {"requests": 2, "pages": 3})
    owner0 = next(v for v in system.state_vars() if str(v) == "owner[0]")
    with pytest.raises(NotSymmetric, match="other than in = or distinct"):
        check_orbits(system, [owner0 + 1 <= 2], ["arith"], list(system.properties), SYM)


def test_a_clause_naming_every_page_unevenly_is_rejected():
    system = system_of("patched.py", {"requests": 2, "pages": 3})
    landed = [v for v in system.state_vars() if str(v).startswith("landed[")]
    # landed[0] twice, the others once: not the same for every page it does not name
    f = z3.Or(landed[0], z3.And(landed[0], landed[1]), landed[2])
    with pytest.raises(NotSymmetric, match="not the same for all"):
        check_orbits(system, [f], ["uneven"], list(system.properties), SYM)


def test_an_initial_state_that_singles_out_an_id_is_caught():
    """Initiation is checked on the representatives only because renaming fixes the
    initial state: the checker verifies that itself."""
    import dataclasses

    system = system_of("patched.py", {"requests": 2, "pages": 3})
    assert Renaming(system, SYM).moves_initial_state() == ""
    init = list(system.initial)
    owner1 = next(i for i, v in enumerate(system.state_vars()) if str(v) == "owner[1]")
    init[owner1] = 0  # page 1 starts owned by request 0
    odd = dataclasses.replace(system, initial=tuple(init))
    assert "not the same under renaming" in Renaming(odd, SYM).moves_initial_state()


HALVE = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require


class Halve(Model):
    requests = Requests(2)
    pages = Pages(3)
    budget = requests.var(Int(0, 4), init=4)
    owner = pages.var(requests.optional, init=None)

    @action
    def halve(s, r: Request):
        require(s.budget[r] > 0)
        s.budget[r] //= 2

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None and s.budget[r] > 0)
        s.owner[p] = r
        emit.alloc(r, p)
'''


def test_a_step_dividing_by_a_constant_is_checked_one_orbit_at_a_time(tmp_path: Path) -> None:
    """`x //= 2` is an Int division by a numeral in the step: the orbit check reads the
    step's slots through it (it once took the numeral for a non-numeral and stopped with
    an internal error), and the certificate it writes re-checks."""
    path = tmp_path / "halve.py"
    path.write_text(HALVE)
    system = compile_model(load_model(path), {"requests": 4, "pages": 3})
    out = run_pdr(system, timeout=120, save_proof=True, proofs_dir=tmp_path)
    assert all(v.status is Status.PROVED for v in out.verdicts), \
        [v.headline() for v in out.verdicts]
    (cert,) = tmp_path.glob("*.json")
    assert check_certificate(cert, system).ok
