"""Re-checking a size-specific orbit certificate through its exact reading for every
size (:mod:`kvspec.proofs.lifted`): what it accepts the orbit-by-orbit check accepts
too (checked on mutated invariants), it refuses the readings that are not exact, and
a certificate re-checks this way at large sizes, where a forgery is still rejected
by the orbit check with a counterexample to induction."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import z3
from conftest import run_cli, system_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvspec.lang.system import System
from kvspec.proofs.certificate import check_certificate, invariant_digest
from kvspec.proofs.clauses import parse_invariant
from kvspec.proofs.orbits import NotSymmetric, check_orbits

SMALL = {"requests": 3, "pages": 8}
BOTH = (True, True)


@pytest.fixture(scope="module")
def learnt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An orbit certificate of ``patched`` at (3,8), written by PDR's orbit route."""
    folder = tmp_path_factory.mktemp("proofs")
    run = run_cli("verify", "models/patched.py", "--size", "requests=3,pages=8",
                  "--engine", "pdr", "--save-proof", "--proofs-dir", str(folder))
    assert run.code == 0, run.out + run.err
    (cert,) = folder.glob("*.json")
    assert json.loads(cert.read_text())["symmetry"] == ["requests", "pages"]
    return cert


@pytest.fixture(scope="module")
def small() -> System:
    return system_of("patched.py", SMALL)


def _representatives(cert: Path, system: System) -> tuple[list[z3.BoolRef], list[str]]:
    inv = json.loads(cert.read_text())["invariant"]
    clauses = parse_invariant(inv["smtlib2"], system.state_vars())
    return [c.formula for c in clauses], list(inv["readable"])


def _at(cert: Path, folder: Path, **sizes: int) -> Path:
    """The certificate with other sizes (its representatives name only small ids)."""
    doc = json.loads(cert.read_text())
    doc["sizes"].update(sizes)
    out = folder / cert.name.replace("requests=3,pages=8",
                                     f"requests={sizes['requests']},pages={sizes['pages']}")
    out.write_text(json.dumps(doc))
    return out


def _without(cert: Path, folder: Path, label: str) -> Path:
    """The certificate without the clause ``label``, its counts and checksum redone."""
    doc = json.loads(cert.read_text())
    inv = doc["invariant"]
    k = inv["readable"].index(label)
    lines = inv["smtlib2"].splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("(assert")][k]
    first = at - 1 if lines[at - 1].startswith(";") else at  # the assert and its comment
    del lines[first:at + 1]
    smt = "\n".join(lines) + "\n"
    readable = inv["readable"][:k] + inv["readable"][k + 1:]
    inv.update(smtlib2=smt, readable=readable, clauses=len(readable),
               sha256=invariant_digest(smt, readable))
    out = folder / ("without-" + cert.name)
    out.write_text(json.dumps(doc))
    return out


# -- the route at work ---------------------------------------------------------------------

@pytest.mark.parametrize("requests,pages,lifted", [(3, 8, False), (8, 64, True),
                                                    (16, 256, True)])
def test_a_certificate_rechecks_through_its_reading_for_every_size(
        learnt: Path, tmp_path: Path, requests: int, pages: int, lifted: bool) -> None:
    """From LIFTED_FROM clause instances on (688 at (3,8), 12,068 at (8,64)), where
    the orbit check is the slower one."""
    cert = _at(learnt, tmp_path, requests=requests, pages=pages)
    run = run_cli("check-proof", str(cert), "models/patched.py")
    assert run.code == 0, run.out
    text = " ".join(run.out.split())
    assert ("checked through its reading for every size" in text) == lifted
    assert ("orbit check over" in text) == (not lifted)
    assert f"PROVED (certificate re-checked at requests={requests}, pages={pages}" in text


def test_a_forgery_at_a_large_size_is_rejected_by_the_orbit_check(
        learnt: Path, tmp_path: Path) -> None:
    """Without a clause the invariant needs, the reading for every size is not
    inductive; the orbit check then decides, and finds a real counterexample."""
    system = system_of("patched.py", {"requests": 8, "pages": 64})
    labels = json.loads(learnt.read_text())["invariant"]["readable"]
    rejected = None
    for label in labels:
        if label.startswith("not violated"):
            continue
        forged = _without(_at(learnt, tmp_path, requests=8, pages=64), tmp_path, label)
        check = check_certificate(forged, system)
        if not check.ok:
            rejected = check
            break
    assert rejected is not None, "no clause of the invariant is needed"
    assert rejected.cti is not None
    assert any("not checked through its reading for every size" in n for n in rejected.notes)
    # the counterexample's state satisfies the invariant and its step breaks it
    assert rejected.cti.broken


# -- never more than the orbit check -------------------------------------------------------

def _mutants(formulas: list[z3.BoolRef],
             kinds: tuple[str, ...] = ("drop", "negate", "number", "slot")
             ) -> st.SearchStrategy[list[z3.BoolRef]]:
    """The representatives with one change a forger (or a bug) might make: a clause
    dropped, a literal negated, a number moved by one, a slot replaced by another (of
    ``kinds``; a kind listed twice is drawn twice as often)."""

    @st.composite
    def draw(data: Any) -> list[z3.BoolRef]:
        k = data(st.integers(0, len(formulas) - 1))
        kind = data(st.sampled_from(list(kinds)))
        out = list(formulas)
        if kind == "drop":
            del out[k]
            return out
        f = formulas[k]
        terms = _subterms(f)
        if kind == "negate":
            atoms = [t for t in terms if z3.is_bool(t) and not z3.is_and(t)
                     and not z3.is_or(t) and not z3.is_not(t)]
            if atoms:
                a = data(st.sampled_from(atoms))
                out[k] = z3.substitute(f, (a, z3.Not(a)))
        elif kind == "number":
            nums = [t for t in terms if z3.is_int_value(t)]
            if nums:
                a = data(st.sampled_from(nums))
                out[k] = z3.substitute(f, (a, z3.IntVal(a.as_long() + data(
                    st.sampled_from([-1, 1])))))
        else:
            consts = [t for t in terms if z3.is_const(t) and not z3.is_int_value(t)
                      and not z3.is_true(t) and not z3.is_false(t)]
            if consts:
                a = data(st.sampled_from(consts))
                name = a.decl().name()
                others = [v for v in _slots_of_same_var(name) if v.decl().name() != name
                          and v.sort() == a.sort()]
                if others:
                    out[k] = z3.substitute(f, (a, data(st.sampled_from(others))))
        return out

    return draw()


_STATE: dict[str, list[z3.ExprRef]] = {}


def _slots_of_same_var(name: str) -> list[z3.ExprRef]:
    return _STATE.get(name.split("[")[0], [])


def _subterms(f: z3.ExprRef) -> list[z3.ExprRef]:
    out, stack, seen = [], [f], set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        out.append(t)
        stack.extend(t.children())
    return out


@pytest.fixture(scope="module")
def representatives(learnt: Path, small: System) -> tuple[list[z3.BoolRef], list[str]]:
    for v in small.state_vars():
        _STATE.setdefault(v.decl().name().split("[")[0], []).append(v)
    return _representatives(learnt, small)


@settings(max_examples=14, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(data=st.data())
def test_what_the_lifted_route_accepts_the_orbit_check_accepts(
        small: System, representatives: tuple[list[z3.BoolRef], list[str]],
        data: st.DataObject) -> None:
    formulas, _ = representatives
    assert_lifted_agrees(small, data.draw(_mutants(formulas)))


def assert_lifted_agrees(system: System, mutated: list[z3.BoolRef]) -> None:
    """What the lifted route accepts for ``mutated`` (orbit representatives over requests
    and pages), the orbit check accepts too; the two agree unless one is undecided."""
    labels = [f"clause {i + 1}" for i in range(len(mutated))]
    props = list(system.properties)
    try:
        lifted = check_orbits(system, mutated, labels, props, BOTH, lifted_from=0, timeout=20)
    except NotSymmetric:
        return
    orbit = check_orbits(system, mutated, labels, props, BOTH, timeout=20)
    assert lifted.lifted is not None
    if lifted.lifted.proved:
        assert orbit.ok, (lifted.lifted, orbit.problems)
    assert lifted.ok == orbit.ok or (orbit.undecided or lifted.undecided)


def test_the_unchanged_invariant_passes_both_ways(
        small: System, representatives: tuple[list[z3.BoolRef], list[str]]) -> None:
    formulas, labels = representatives
    props = list(small.properties)
    lifted = check_orbits(small, formulas, labels, props, BOTH, lifted_from=0)
    assert lifted.ok and lifted.lifted is not None and lifted.lifted.proved
    assert check_orbits(small, formulas, labels, props, BOTH).ok


# -- readings that are not exact are refused -----------------------------------------------

def _cur(system: System) -> dict[str, z3.ExprRef]:
    return {v.decl().name(): v for v in system.state_vars()}


@pytest.mark.parametrize("make,why", [
    # an owner compared with a number that is no request at three requests: the clause
    # holds at this size (owners are -1..2), its lifting would say no page has an owner
    (lambda c: c["owner[0]"] != 5, "5 compared with a request id is not one at this size"),
    (lambda c: c["owner[0]"] != -2, "-2 compared with a request id is not one"),
    # every page at once, not through a count ('r0 does not own every page'): one
    # instance per request here, but 'for all distinct p0..p7' is another clause at
    # other sizes
    (lambda c: z3.Or([c[f"owner[{p}]"] != 0 for p in range(8)]),
     "names page 0 among every page"),
])
def test_a_reading_that_is_not_exact_is_left_to_the_orbit_check(
        small: System, representatives: tuple[list[z3.BoolRef], list[str]],
        make: Any, why: str) -> None:
    formulas, labels = representatives
    extra = make(_cur(small))
    report = check_orbits(small, formulas + [extra], labels + ["extra"],
                          list(small.properties), BOTH, lifted_from=0)
    assert report.lifted is not None and not report.lifted.proved
    assert why in report.lifted.why_not
    orbit = check_orbits(small, formulas + [extra], labels + ["extra"],
                         list(small.properties), BOTH)
    assert report.ok == orbit.ok


def test_a_certificate_not_symmetric_in_pages_is_left_to_the_orbit_check() -> None:
    from conftest import ROOT

    cert = ROOT / "proofs" / "lowest_free.LowestFreePD.requests=3,pages=8.json"
    system = system_of("lowest_free.py", {"requests": 3, "pages": 8})
    formulas, labels = _representatives(cert, system)
    report = check_orbits(system, formulas, labels, list(system.properties), (True, False),
                          lifted_from=0)
    assert report.ok
    assert report.lifted is not None and not report.lifted.proved
    assert "and the certificate does not rename pages" in report.lifted.why_not


# -- the review's forgeries: each passed the lifted route once ------------------------------

def _free_count(cur: dict[str, z3.ExprRef], pages: int) -> z3.ArithRef:
    return z3.Sum([z3.If(cur[f"owner[{p}]"] == -1, 1, 0) for p in range(pages)])


@pytest.mark.parametrize("after", [True, False])
def test_an_id_named_around_a_count_keeps_one_variable(
        small: System, representatives: tuple[list[z3.BoolRef], list[str]],
        after: bool) -> None:
    """``owner[2] == r0 or (at most one free page) or inflight[2] == r0``: false in
    the initial state (every page is free). The count's own variable once replaced
    page 2's, so page 2 became two variables required distinct and the clause was read
    as always true (or, without the second mention, the lifting crashed)."""
    formulas, labels = representatives
    cur = _cur(small)
    # page 2 named before the count (owner[2] is one of the count's slots too, so
    # without a second mention it is inflight[2] that names it)
    first = cur["owner[2]"] if after else cur["inflight[2]"]
    parts = [first == 0, _free_count(cur, SMALL["pages"]) <= 1]
    if after:
        parts.append(cur["inflight[2]"] == 0)
    report = check_orbits(small, formulas + [z3.Or(*parts)], labels + ["extra"],
                          list(small.properties), BOTH, lifted_from=0)
    assert not report.ok
    assert "the initial state violates clause" in report.problems[0]
    assert report.lifted is not None and not report.lifted.proved


CAPTURE = '''
from kvspec import Model, Pages, Request, Requests, action, invariant, require, var


class Capture(Model):
    requests = Requests(3)
    pages = Pages(2)
    r0 = var(requests.optional, init=None)   # the leader, named like a request
    done = requests.var(bool, init=False)

    @action
    def elect(s, r: Request):
        require(s.r0 is None)
        s.r0 = r

    @action
    def finish(s, r: Request):
        s.done[r] = True

    @invariant
    def trivially(s):
        return True
'''


def test_a_model_variable_named_like_a_request_is_not_bound_by_the_quantifier(
        tmp_path: Path) -> None:
    """``leader == r0 or not done[r1]`` is broken by finish(r1); the lifting's variable
    for request 0 once had the name ``r0`` and bound the model's ``r0`` with it."""
    path = tmp_path / "capture.py"
    path.write_text(CAPTURE)
    system = system_of(path, {"requests": 3, "pages": 2})
    cur = _cur(system)
    clause = z3.Or(cur["r0"] == 0, z3.Not(cur["done[r1]"]))
    report = check_orbits(system, [clause], ["leader is r0 or r1 not done"], [], BOTH,
                          lifted_from=0)
    assert not report.ok and "breaks it" in report.problems[0]
    assert report.lifted is not None and not report.lifted.proved


NIL_NAME = '''
from kvspec import Model, Pages, Request, Requests, action, invariant, require, var


class NilName(Model):
    requests = Requests(2)
    pages = Pages(1)
    none_request = var(requests.optional, init=None)   # the picked request
    tripped = var(bool, init=False)

    @action
    def pick(s, r: Request):
        s.none_request = r

    @action
    def trip(s):
        require(s.none_request is not None)
        s.tripped = True

    @invariant
    def never_tripped(s):
        return not s.tripped
'''


def test_a_variable_named_like_the_readings_none_has_no_reading_for_every_size(
        tmp_path: Path) -> None:
    """``none_request`` was the reading's None request itself: always None, so
    ``trip`` never ran and a violated property was PROVED, through a size-specific
    certificate's lifted route and through an all-sizes certificate."""
    from kvspec.proofs.parametric.model import parametric_model
    from kvspec.proofs.parametric.values import Unsupported

    path = tmp_path / "nilname.py"
    path.write_text(NIL_NAME)
    system = system_of(path, {"requests": 2, "pages": 1})
    with pytest.raises(Unsupported, match="'none_request' names the None request"):
        parametric_model(system)
    cur = _cur(system)
    report = check_orbits(system, [z3.Not(cur["tripped"])], ["not tripped"],
                          list(system.properties), (True, False), lifted_from=0)
    assert not report.ok
    assert report.lifted is not None and not report.lifted.proved
    assert "no reading for every size" in report.lifted.why_not
    run = run_cli("verify", str(path), "--engine", "bmc", "--size", "requests=2,pages=1")
    assert run.code == 1


def test_a_lifting_that_reads_a_clause_wrongly_is_caught_at_its_own_ids(
        small: System, representatives: tuple[list[z3.BoolRef], list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the lifter does, each lifted clause instantiated at its representative's
    ids is compared with the representative: a lifting that reads every literal id as
    None is refused there, before any induction query."""
    from kvspec.proofs import lifted

    def as_none(self: Any, t: Any, dim: str) -> z3.ExprRef:
        return t if self.is_ref(t) else self.sorts.nil[dim]

    monkeypatch.setattr(lifted._ExactLifter, "as_ref", as_none)
    formulas, labels = representatives
    report = check_orbits(small, formulas, labels, list(small.properties), BOTH,
                          lifted_from=0)
    assert report.ok  # the orbit check decided
    assert report.lifted is not None and not report.lifted.proved
    assert "its quantified reading differs from it at its own ids" in report.lifted.why_not


def test_a_clause_that_is_only_a_count_is_compared_without_a_crash(
        small: System, representatives: tuple[list[z3.BoolRef], list[str]]) -> None:
    """``no free page has landed`` names no id of its own: its lifting is the count's
    quantifier itself, which the comparison at the representative's ids once stripped
    (a crash, exit 70, on a valid certificate)."""
    formulas, labels = representatives
    cur = _cur(small)
    landed_free = z3.Sum([z3.If(z3.And(cur[f"owner[{p}]"] == -1, cur[f"landed[{p}]"]), 1, 0)
                          for p in range(SMALL["pages"])]) <= 0
    args = (formulas + [landed_free], labels + ["no free page has landed"],
            list(small.properties), BOTH)
    report = check_orbits(small, *args, lifted_from=0)
    assert report.lifted is not None
    assert report.ok == check_orbits(small, *args).ok
