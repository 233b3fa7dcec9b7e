"""Orbit checks of models that treat their page ids interchangeably in every action but
some (``lowest_free``: all but ``prealloc``, which takes the lowest-numbered free
pages). Those actions are checked at every page; the others one orbit at a time over
requests and pages. The verdicts must agree with the check of every instance."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import z3
from conftest import MODELS, ROOT, run_cli, system_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvspec.engines.bmc import Deadline
from kvspec.engines.orbit_route import representatives_of
from kvspec.engines.pdr import run_pdr, select_small
from kvspec.lang.loader import load_model
from kvspec.lang.symmetry import breaking_actions
from kvspec.lang.system import System, compile_model
from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.certificate import check_certificate, invariant_digest
from kvspec.proofs.clauses import Clause
from kvspec.proofs.orbits import NotSymmetric, Orbits, Renaming, check_orbits
from kvspec.proofs.smt_check import check_clauses

BOTH = (True, True)


def _compile(tmp_path: Path, source: str, sizes: dict[str, int] | None = None) -> System:
    f = tmp_path / "m.py"
    f.write_text(source)
    return compile_model(load_model(f), sizes)


HEAD = '''
from kvspec import Model, Page, Pages, Request, Requests, action, invariant, require


'''

#: the lowest free page but the first: the break is in ``fill``'s own loop
SKIP_FIRST = HEAD + '''
class SkipFirst(Model):
    requests = Requests(2)
    pages = Pages(3)
    taken = pages.var(bool, init=False)
    seen = pages.var(bool, init=False)

    @action
    def fill(s, r: Request):
        first = True
        done = False
        for p in s.pages:
            if first:
                first = False
            elif not s.taken[p] and not done:
                s.taken[p] = True
                done = True

    @action
    def look(s, p: Page):
        require(s.taken[p])
        s.seen[p] = True
'''


def test_the_actions_that_single_out_pages_are_found(tmp_path: Path) -> None:
    assert breaking_actions(system_of("lowest_free.py", {"requests": 2, "pages": 4}),
                            PAGE) == {"prealloc"}
    assert breaking_actions(system_of("lowest_free.py", {"requests": 2, "pages": 4}),
                            REQUEST) == frozenset()
    assert breaking_actions(system_of("patched.py", {"requests": 2, "pages": 3}),
                            PAGE) == frozenset()
    assert breaking_actions(_compile(tmp_path, SKIP_FIRST), PAGE) == {"fill"}


def test_a_helper_that_singles_out_pages_marks_every_action_calling_it(tmp_path: Path) -> None:
    src = HEAD + '''
def lowest_free(s):
    for p in s.pages:
        if not s.taken[p]:
            return p
    return None


class Helper(Model):
    requests = Requests(2)
    pages = Pages(3)
    taken = pages.var(bool, init=False)

    @action
    def one(s, r: Request):
        p = lowest_free(s)
        if p is not None:
            s.taken[p] = True

    @action
    def two(s, r: Request):
        p = lowest_free(s)
        if p is not None:
            s.taken[p] = True

    @action
    def give_back(s, p: Page):
        s.taken[p] = False
'''
    system = _compile(tmp_path, src)
    assert breaking_actions(system, PAGE) == {"one", "two"}


@pytest.mark.parametrize("where, source", [
    ("an invariant", HEAD + '''
class InInvariant(Model):
    requests = Requests(2)
    pages = Pages(3)
    taken = pages.var(bool, init=False)

    @action
    def take(s, p: Page):
        s.taken[p] = True

    @invariant
    def front(s):
        first = True
        ok = True
        for p in s.pages:
            if first:
                ok = not s.taken[p]
                first = False
        return ok
'''),
    ("the initial state", HEAD + '''
class InInit(Model):
    requests = Requests(2)
    pages = Pages(3)
    taken = pages.var(bool, init=[True, False, False])

    @action
    def take(s, p: Page):
        s.taken[p] = True
'''),
])
def test_a_break_outside_the_actions_renames_no_page(tmp_path: Path, where: str,
                                                     source: str) -> None:
    system = _compile(tmp_path, source)
    assert breaking_actions(system, PAGE) is None, where
    with pytest.raises(NotSymmetric, match="page ids"):
        check_orbits(system, [z3.BoolVal(True)], ["true"], list(system.properties), BOTH)


def _taken(system: System) -> list[z3.BoolRef]:
    return [v for v in system.state_vars() if str(v).startswith("taken[")]


def test_an_action_not_renamed_is_checked_at_every_page(tmp_path: Path) -> None:
    """``fill`` breaks "no page is taken" only at page 1 (it skips page 0): reducing it
    to page 0 as if it were symmetric would miss that."""
    system = _compile(tmp_path, SKIP_FIRST)
    none_taken = z3.Not(_taken(system)[0])  # the representative of: no page is taken
    report = check_orbits(system, [none_taken], ["not taken[p]"], [], BOTH)
    assert not report.ok
    assert report.cti is not None and report.cti.trace.steps[0].instance.name == "fill"
    assert report.unrenamed == {PAGE: ["fill"]}
    full = check_clauses(system, [Clause(i + 1, "", z3.Not(t), f"not taken[{i}]")
                                  for i, t in enumerate(_taken(system))], [])
    assert not full.ok


#: the highest free page: the break is at the last page, in the last part of the query
TAKE_LAST = HEAD + '''
class TakeLast(Model):
    requests = Requests(2)
    pages = Pages(7)
    taken = pages.var(bool, init=False)
    owner = pages.var(requests.optional, init=None)

    @action
    def fill(s, r: Request):
        chosen = None
        for p in s.pages:
            if not s.taken[p]:
                chosen = p
        if chosen is not None:
            s.taken[chosen] = True

    @action
    def claim(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r
'''


def test_a_break_in_the_last_part_of_an_unrenamed_action_is_found(tmp_path: Path) -> None:
    """``fill`` (every page) is asked in parts, by stretches of pages; only the last
    part holds the instance it breaks, after parts that hold: the check must go on
    to it, and the counterexample to induction names that instance."""
    system = _compile(tmp_path, TAKE_LAST)
    taken = _taken(system)
    owners = [v for v in system.state_vars() if str(v).startswith("owner[")]
    none_taken = z3.Not(taken[0])
    # a second clause over every page, held by every action: parts before the last hold
    owned = z3.Or(owners[0] == -1, owners[0] == 0, owners[0] == 1)
    report = check_orbits(system, [owned, none_taken], ["owned", "not taken[p]"], [], BOTH)
    assert report.unrenamed == {PAGE: ["fill"]}
    assert not report.ok and report.cti is not None
    assert report.cti.trace.steps[0].instance.name == "fill"
    assert report.broken == [1]
    changed = [(v.name, i, new) for v, i, _, new in report.cti.trace.steps[-1].changes]
    assert changed == [("taken", 6, True)]
    held = check_orbits(system, [owned], ["owned"], [], BOTH)
    assert held.ok, held.problems


@pytest.fixture(scope="module")
def lowest_free_small() -> tuple[System, list[z3.BoolRef], list[str]]:
    """lowest_free at (3,4), with the small size's clauses as representatives over
    requests and pages."""
    system = system_of("lowest_free.py", {"requests": 3, "pages": 4})
    small = select_small(system, (True, False), Deadline(300))
    assert small.ok and small.seed
    formulas, labels = representatives_of(system, small.templates, small.seed, BOTH)
    return system, formulas, labels


def _every_instance(system: System, formulas: list[z3.BoolRef], labels: list[str]
                    ) -> list[Clause]:
    orbits = Orbits(Renaming(system, BOTH), formulas, labels)
    return [Clause(n + 1, "", orbits.term(k, images), f"instance {n + 1}")
            for n, (k, images, _) in enumerate(orbits.every_instance())]


def test_the_small_size_invariant_is_checked_with_prealloc_unrenamed(lowest_free_small) -> None:
    system, formulas, labels = lowest_free_small
    report = check_orbits(system, formulas, labels, list(system.properties), BOTH)
    assert report.ok, report.problems
    assert report.unrenamed == {PAGE: ["prealloc"]}
    prealloc = [i for i in system.instances if i.name == "prealloc"]
    land = [i for i in system.instances if i.name == "land"]
    assert len(land) == 4 and len(prealloc) == 3
    # prealloc once (its request renamed), land once (its page renamed)
    assert report.representatives < len(system.instances)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_the_orbit_check_agrees_with_the_check_of_every_instance(lowest_free_small,
                                                                 data: st.DataObject) -> None:
    """Drop any clauses: the check one orbit at a time (prealloc at every page) and the
    check of every instance on every action instance give the same verdict."""
    system, formulas, labels = lowest_free_small
    keep = data.draw(st.lists(st.booleans(), min_size=len(formulas), max_size=len(formulas)))
    fs = [f for f, k in zip(formulas, keep) if k]
    ls = [lab for lab, k in zip(labels, keep) if k]
    props = list(system.properties)
    orbit = check_orbits(system, fs, ls, props, BOTH)
    full = check_clauses(system, _every_instance(system, fs, ls), props)
    assert orbit.ok == full.ok, (orbit.problems, full.problems)


CERT = ROOT / "proofs" / "lowest_free.LowestFreePD.requests=3,pages=8.json"


def _edited(out: Path, keep: "callable[[str], bool]", extra: list[tuple[str, str]] = ()) -> Path:
    """The (3,8) certificate with only the clauses whose label ``keep`` accepts, plus
    ``extra`` (label, SMT-LIB2 term), its counts and checksum recomputed."""
    doc = json.loads(CERT.read_text())
    inv = doc["invariant"]
    lines = inv["smtlib2"].splitlines()
    asserts = [i for i, line in enumerate(lines) if line.startswith("(assert")]
    drop = {i for k, i in enumerate(asserts) if not keep(inv["readable"][k])}
    smt_lines = [line for i, line in enumerate(lines) if i not in drop and i + 1 not in drop]
    readable = [r for r in inv["readable"] if keep(r)]
    for label, term in extra:
        smt_lines += [f"; {label}", f"(assert {term})"]
        readable.append(label)
    smt = "\n".join(smt_lines) + "\n"
    inv.update(smtlib2=smt, readable=readable, clauses=len(readable),
               sha256=invariant_digest(smt, readable))
    out.write_text(json.dumps(doc))
    return out


def test_the_stored_certificate_rechecks_with_pages_renamed_too() -> None:
    system = system_of("lowest_free.py", {"requests": 3, "pages": 8})
    check = check_certificate(CERT, system)
    assert check.ok, check.problems
    note = next(n for n in check.notes if n.startswith("checked with every renaming"))
    assert "over pages too" in note and "renames requests only" in note
    assert any("prealloc checked at every page" in p for p in check.passed)


NEEDED = "for all p: not landed[p] or owner[p] == page_written[p] @ p="


def test_a_certificate_without_a_needed_clause_at_any_page_is_rejected(tmp_path: Path) -> None:
    """Without the clause at every page, neither the check with pages renamed nor the
    certificate's own (requests only) finds the invariant inductive: REJECTED, with a
    counterexample to induction."""
    system = system_of("lowest_free.py", {"requests": 3, "pages": 8})
    forged = _edited(tmp_path / CERT.name, lambda label: not label.startswith(NEEDED))
    check = check_certificate(forged, system)
    assert not check.ok
    assert any("not inductive" in p for p in check.problems), check.problems
    assert check.cti is not None
    assert any(n.startswith("not checked with the clauses' renamings") for n in check.notes)


def test_a_clause_missing_at_one_page_is_restored_by_renaming_pages(tmp_path: Path) -> None:
    """The check with pages renamed proves an invariant containing the certificate's:
    one page's instance missing is another page's instance renamed, so the properties
    are still proved, and the note says which invariant was checked."""
    system = system_of("lowest_free.py", {"requests": 3, "pages": 8})
    forged = _edited(tmp_path / CERT.name, lambda label: label != NEEDED + "3")
    assert len(json.loads(forged.read_text())["invariant"]["readable"]) == \
        len(json.loads(CERT.read_text())["invariant"]["readable"]) - 1
    check = check_certificate(forged, system)
    assert check.ok, check.problems
    assert any("contains the certificate's" in n for n in check.notes)


def test_a_clause_that_cannot_be_renamed_over_pages_falls_back_to_requests(
        tmp_path: Path) -> None:
    """A clause naming every page unevenly cannot be renamed over pages: the
    certificate's own symmetry (requests) decides, and the note says why."""
    system = system_of("lowest_free.py", {"requests": 3, "pages": 8})
    uneven = "(or |landed[0]| (not |landed[0]|) |landed[1]| |landed[2]| |landed[3]| " \
             "|landed[4]| |landed[5]| |landed[6]| |landed[7]|)"
    forged = _edited(tmp_path / CERT.name, lambda label: True, [("uneven", uneven)])
    check = check_certificate(forged, system)
    assert check.ok, check.problems
    assert any("not the same for all of them" in n for n in check.notes), check.notes
    assert any(n.startswith("orbit check over requests:") for n in check.notes)


def test_pdr_certificates_of_lowest_free_rename_pages(tmp_path: Path) -> None:
    """Above the small size, PDR's orbit route renames pages in every action but
    prealloc: one representative per clause shape, and check-proof accepts it."""
    system = system_of("lowest_free.py", {"requests": 3, "pages": 6})
    out = run_pdr(system, timeout=300, save_proof=True, proofs_dir=tmp_path)
    assert all(v.status.name == "PROVED" for v in out.verdicts), out.verdicts
    cert = next(tmp_path.glob("*.json"))
    doc = json.loads(cert.read_text())
    assert doc["symmetry"] == ["requests", "pages"]
    assert not any("@ p=" in r for r in doc["invariant"]["readable"])
    res = run_cli("check-proof", str(cert), str(MODELS / "lowest_free.py"))
    assert res.code == 0, res.out
    assert "prealloc checked at every page" in res.out


def test_show_names_the_actions_proofs_leave_unrenamed() -> None:
    res = run_cli("show", str(MODELS / "lowest_free.py"))
    assert res.code == 0
    assert ("proofs one orbit at a time rename pages in every action but prealloc "
            "(checked at every page)") in res.out
    res = run_cli("show", str(MODELS / "patched.py"))
    assert "proofs one orbit at a time" not in res.out


def test_the_sampled_alarm_compares_the_renamed_actions_only(tmp_path: Path) -> None:
    """The sampled alarm behind the static analysis also runs for a space some actions
    order: it passes with those actions left out, and fires when an action that orders
    the space would be renamed (here: pretending ``fill`` did not)."""
    from kvspec.lang.symmetry import partial_alarm

    system = _compile(tmp_path, SKIP_FIRST)
    assert partial_alarm(system, PAGE, frozenset({"fill"})) == []
    fired = partial_alarm(system, PAGE, frozenset())
    assert fired and "internal alarm" in fired[0] and "in fill, look" in fired[0]
