"""Proofs that generalise from the small size: constants read against the ends of a
size-dependent range, counterexamples of the orbit check proposing new clauses, and
the report of which clauses each property needs.

The main model here is not a shipped one: a pool where a request may need the
whole pool (``need`` over ``0..pages + 1``, a written-pages counter over
``0..pages``), symmetric in its pages, unlike ``lowest_free``.
"""
from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import pytest
import z3
from conftest import MODELS, ROOT, run_cli, system_of
from hypothesis import given, settings
from hypothesis import strategies as st

from kvspec.engines.bmc import Deadline
from kvspec.engines.inference import StateTable, Template, atoms_for
from kvspec.engines.orbit_route import (
    OrbitProposals,
    orbit_houdini,
    representatives_by_template,
)
from kvspec.engines.pdr import run_pdr, select_small
from kvspec.engines.selection import goal_templates
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.proofs.certificate import check_certificate
from kvspec.verdict import Status

WHOLE_POOL = '''
import enum

from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require


def beyond_pool(sizes):
    return sizes["pages"] + 1


class Phase(enum.Enum):
    NEW = 0
    QUEUED = 1
    FILLING = 2
    READY = 3
    DONE = 4


class WholePool(Model):
    requests = Requests(2)
    pages = Pages(4)

    phase = requests.var(Phase, init=Phase.NEW)
    need = requests.var(Int(0, beyond_pool), init=0)
    written = requests.var(Int(0, "pages"), init=0)
    owner = pages.var(requests.optional, init=None)

    @action
    def arrive(s, r: Request, n: Int(1, beyond_pool)):
        require(s.phase[r] == Phase.NEW)
        s.need[r] = n
        s.phase[r] = Phase.QUEUED

    @action
    def admission(s, r: Request):
        require(s.phase[r] == Phase.QUEUED)
        if s.need[r] > len(s.pages):
            s.phase[r] = Phase.DONE
            emit.reject(r)
            return
        s.phase[r] = Phase.FILLING
        emit.admit(r)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.phase[r] == Phase.FILLING and s.owner[p] is None)
        require((s.owner == r).count() < s.need[r])
        s.owner[p] = r
        emit.alloc(r, p)

    @action
    def write(s, r: Request, p: Page):
        require(s.phase[r] == Phase.FILLING and s.owner[p] == r)
        require(s.written[r] < s.need[r])
        s.written[r] = s.written[r] + 1
        emit.post_write(r, p)
        emit.land_write(r, p)

    @action
    def ready(s, r: Request):
        require(s.phase[r] == Phase.FILLING and s.written[r] == s.need[r])
        require((s.owner == r).count() == s.need[r])
        s.phase[r] = Phase.READY

    @action
    def finish(s, r: Request):
        require(s.phase[r] == Phase.READY)
        emit.decode(r)
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.phase[r] = Phase.DONE
        emit.finish(r)
'''

SYM = (True, True)
TARGET = {"requests": 2, "pages": 6}


@pytest.fixture(scope="module")
def whole_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "whole_pool.py"
    path.write_text(WHOLE_POOL)
    return path


def _system(path: Path, sizes: dict[str, int]) -> System:
    return compile_model(load_model(path), sizes, None)


def test_constants_near_a_size_dependent_bound_keep_their_meaning(whole_pool: Path) -> None:
    """An atom enumerated at four pages means the same at six: ``need == 5`` (one
    more than the pool) becomes ``need == 7``, ``need <= 1`` stays; a range that does
    not depend on the sizes keeps every constant."""
    small, big = _system(whole_pool, {"pages": 4}).schema, _system(whole_pool, TARGET).schema
    atoms = {(a.kind, a.constant(small)): a for a in atoms_for(small, ("r",))
             if a.var == "need" and a.kind in ("eq", "le")}
    assert atoms[("eq", 5)].constant(big) == 7  # the top of 0..pages+1
    assert atoms[("eq", 4)].constant(big) == 6  # the pool
    assert atoms[("le", 4)].constant(big) == 6
    assert atoms[("eq", 1)].constant(big) == 1  # near the bottom: an absolute constant
    assert atoms[("le", 2)].constant(big) == 2  # a tie reads from the bottom
    assert Template(("r",), ((atoms[("eq", 5)], False),)).render(big) == \
        "for all r: need[r] != 7"
    fixed3 = system_of("patched.py", {"requests": 2, "pages": 4}).schema
    fixed8 = system_of("patched.py", {"requests": 2, "pages": 8}).schema
    for a in atoms_for(fixed3, ("r",)):
        assert a.constant(fixed3) == a.constant(fixed8)


@functools.lru_cache(maxsize=None)
def _lowest_free(pages: int) -> System:
    return system_of("lowest_free.py", {"requests": 2, "pages": pages})


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 32))
def test_anchored_atoms_mean_the_same_in_numpy_and_in_z3(seed: int) -> None:
    """Atoms enumerated at a small size, evaluated at a larger one on arbitrary
    type-correct states, agree between the sample evaluation (numpy) and the solver
    encoding (z3)."""
    rng = random.Random(seed)
    small, big = _lowest_free(3).schema, _lowest_free(5)
    state = tuple(rng.choice(list(t.domain())) for t in big.slot_types())
    table = StateTable(big.schema, [state])
    cur = big.state_vars()
    values = [z3.BoolVal(bool(x)) if z3.is_bool(v) else z3.IntVal(int(x))
              for v, x in zip(cur, state)]
    atoms = [a for a in atoms_for(small, ("r",)) if a.top]
    assert atoms
    mat = table.matrix(atoms, ("r",))  # rows: one per request
    for k, a in enumerate(atoms):
        for r in range(big.schema.requests):
            term = Template(("r",), ((a, True),)).instance(big.schema, cur, {"r": r})
            got = z3.is_true(z3.simplify(z3.substitute(term, *zip(cur, values))))
            assert got == bool(mat[r, k]), (a, r)


def test_a_whole_pool_model_is_proved_at_a_larger_size(whole_pool: Path, tmp_path: Path
                                                       ) -> None:
    """The clauses selected at four pages prove every property at six, one orbit at a
    time; the one that rules out the counter's overflow names the top of ``need``'s
    range at six pages; the certificate re-checks, and ``--json`` says which clauses
    each property needs."""
    system = _system(whole_pool, TARGET)
    out = run_pdr(system, timeout=300, save_proof=True, proofs_dir=tmp_path)
    assert [v.status for v in out.verdicts] == [Status.PROVED] * len(out.verdicts), \
        out.verdicts
    assert all("orbit representatives" in v.detail and "needs" in v.detail
               for v in out.verdicts)
    notes = out.stats.extra["pdr"]["inference"]
    errors = notes["needs"]["(no model error)"]
    assert any("need[r] != 7" in c or "need[r] <= 6" in c for c in errors), errors
    assert not any("need[r] != 5" in c for c in errors)
    (cert,) = tmp_path.glob("*.json")
    assert check_certificate(cert, system).ok


def test_orbit_counterexamples_propose_the_clauses_the_small_size_lacks(whole_pool: Path
                                                                        ) -> None:
    """Take away every small-size clause that names the top of a range: the orbit
    check then finds an invariant state where ``write`` overflows its counter. Without
    proposals the route gives up; with them the state is excluded by a new clause
    (false on it, true on the small size's sample) and every property is proved."""
    system = _system(whole_pool, TARGET)
    small = select_small(system, SYM, Deadline(120))
    seed = [k for k in small.seed
            if not any(a.top for a, _ in small.templates[k].literals)]
    assert len(seed) < len(small.seed)
    goals = goal_templates(system, small.templates)
    own = {g.name: small.templates[g.template].render(system.schema) for g in goals}
    props = list(system.properties)
    formulas, labels, origin = representatives_by_template(system, small.templates, seed, SYM)
    assert orbit_houdini(system, formulas, labels, props, own, SYM, Deadline(120)) is None
    proposals = OrbitProposals(system, small.sample, small.templates,
                               {lb: small.templates[k] for lb, k in zip(labels, origin)}, SYM)
    proof = orbit_houdini(system, formulas, labels, props, own, SYM, Deadline(120), proposals)
    assert proof is not None and set(proof.proved) == {p.name for p in props}
    assert proof.notes["proposed"] > 0
    added = [lb for lb in proof.labels if lb not in labels]
    assert added and proposals.needed(["(no model error)"], set(proof.labels))


# -- lowest_free at eight pages ---------------------------------------------------------

LOWEST_FREE_28 = ROOT / "proofs" / "lowest_free.LowestFreePD.requests=2,pages=8.json"


@pytest.mark.skipif(not LOWEST_FREE_28.exists(), reason="no stored (2,8) certificate")
def test_the_stored_eight_page_lowest_free_certificate_rechecks() -> None:
    system = system_of("lowest_free.py", {"requests": 2, "pages": 8})
    check = check_certificate(LOWEST_FREE_28, system)
    assert check.ok, check.problems
    assert set(check.checked_properties) == {p.name for p in system.properties}
    assert json.loads(LOWEST_FREE_28.read_text())["symmetry"] == ["requests"]


@pytest.mark.slow
@pytest.mark.parametrize("requests", [2, 3])
def test_lowest_free_is_proved_at_eight_pages(requests: int, tmp_path: Path) -> None:
    """The clauses of four pages carry over to eight (ordered pages: every page
    instance is listed, requests one orbit at a time)."""
    res = run_cli("verify", str(MODELS / "lowest_free.py"), "--engine", "pdr",
                  "--size", f"requests={requests},pages=8", "--save-proof",
                  "--proofs-dir", str(tmp_path), "--json")
    assert res.code == 0, res.out + res.err
    (cert,) = tmp_path.glob("*.json")
    check = run_cli("check-proof", str(cert), str(MODELS / "lowest_free.py"),
                    "--size", f"requests={requests},pages=8")
    assert check.code == 0, check.out + check.err
