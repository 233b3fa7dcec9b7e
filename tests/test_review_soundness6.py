"""Guards for the exact count fact across a page move, the range checks of the reading for
every size and division: the two-page fact holds of real counts whichever two of three
page parameters change (equal ones included) and pins the count down; a move that may
lose a page is violated, never proved for every size; floor division is proved for every
size and re-checks at a larger one; what only a larger size breaks (a `%` by the pages, a
masked write's range, a count compared with a rank variable) stays size-specific."""
from __future__ import annotations

from pathlib import Path

import pytest
import z3
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.certificate import check_certificate
from kvspec.proofs.parametric.cardinality import GhostCount, _State, state_facts, step_facts
from kvspec.proofs.parametric.encode import Step
from kvspec.runner import run
from kvspec.verdict import Status
from conftest import system_of
from test_all_sizes_counts import MOVE, _cardinalities, _Instance


@st.composite
def moves(draw: st.DrawFn) -> dict[str, object]:
    """A relation before a step with three page parameters, the parameters (maybe equal)
    and the two of them where the relation changes (maybe the same one twice)."""
    pages = draw(st.integers(1, 4))
    requests = draw(st.integers(1, 2))
    table = st.lists(st.lists(st.booleans(), min_size=requests, max_size=requests),
                     min_size=pages, max_size=pages)
    params = draw(st.lists(st.integers(0, pages - 1), min_size=3, max_size=3))
    i, j = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    return {"pages": pages, "requests": requests, "before": draw(table),
            "after": draw(table), "params": params, "changed": (params[i], params[j])}


def _move_facts(case: dict[str, object], skew: int = 0, steps: bool = True
                ) -> tuple[_Instance, list[z3.BoolRef]]:
    inst = _Instance(case["pages"], case["requests"])  # type: ignore[arg-type]
    before, after = case["before"], case["after"]
    changed = set(case["changed"])  # type: ignore[arg-type]
    table = [after[i] if i in changed else before[i]  # type: ignore[index]
             for i in range(len(before))]  # type: ignore[arg-type]
    phi, psi = inst.relation("phi", before), inst.relation("psi", after)  # type: ignore[arg-type]
    at = [inst.pages[k] for k in changed]
    P, R = inst.sorts.sort[PAGE], inst.sorts.sort[REQUEST]
    gp, gr = z3.Const("p", P), z3.Const("r", R)
    g = GhostCount("count", phi(gp, gr), gp, gr, inst.counts("count", _cardinalities(before)))
    post = inst.counts("count'", [v + skew for v in _cardinalities(table)])
    pre_state = _State(lambda g, y, r: phi(y, r), lambda g, r: g.at(r))
    post_state = _State(lambda g, y, r: z3.If(z3.Or(*[y == p for p in at]), psi(y, r),
                                             phi(y, r)),
                        lambda g, r: post(r))
    params = [inst.pages[k] for k in case["params"]]  # type: ignore[attr-defined]
    step = Step(z3.BoolVal(True), {}, [], params, [inst.sorts.real(p) for p in params])
    facts = state_facts(inst, [g], pre_state, inst.size)
    facts += state_facts(inst, [g], post_state, inst.size)
    return inst, facts + (step_facts(inst, g, pre_state, post_state, step) if steps else [])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(moves())
def test_the_move_facts_of_three_page_parameters_hold_of_real_counts(
        case: dict[str, object]) -> None:
    inst, facts = _move_facts(case)
    assert inst.consistent(facts) == z3.sat


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(moves(), st.sampled_from([-1, 1]))
def test_a_moved_count_off_by_one_contradicts_the_facts(case: dict[str, object],
                                                        skew: int) -> None:
    """Where the range and emptiness facts alone allow the wrong count, the step's facts
    (the two-page one where two distinct pages changed) rule it out."""
    inst, facts = _move_facts(case, skew, steps=False)
    assume(inst.consistent(facts) == z3.sat)
    inst, facts = _move_facts(case, skew)
    assert inst.consistent(facts) == z3.unsat


# variants of the move of test_all_sizes_counts that claim the count exactly
MOVES = MOVE + '''

class Exact(Move):
    properties = ("exact",)

    @invariant
    def exact(s):
        return all((s.owner == r).count() == s.held[r] for r in s.requests)


class MoveToItself(Exact):
    @action
    def move(s, p: Page, q: Page):
        require(s.owner[p] is not None and (s.owner[q] is None or p == q))
        s.owner[q] = s.owner[p]
        s.owner[p] = None


class DropsAThird(Exact):
    @action
    def shuffle(s, p: Page, q: Page, t: Page):
        require(s.owner[p] is not None and s.owner[q] is None and t != p and t != q)
        s.owner[q] = s.owner[p]
        s.owner[p] = None
        s.owner[t] = None
'''


@pytest.mark.parametrize("cls", ["MoveToItself", "DropsAThird"])
def test_a_move_that_loses_a_page_is_violated_for_every_size(tmp_path: Path, cls: str) -> None:
    path = tmp_path / "moves.py"
    path.write_text(MOVES)
    res = run(system_of(path, model_class=cls), "all-sizes", proofs_dir=tmp_path,
              coverage=False)
    (v,) = [v for v in res.verdicts if v.prop == "exact"]
    assert v.status is Status.VIOLATED, v.headline()


DIVISION = '''
from kvspec import var, Int, Model, Pages, Requests, action, invariant, require


class Halves(Model):
    properties = ("floor",)
    requests = Requests(2)
    pages = Pages(4)
    x = var(Int(-7, 7), init=0)
    y = var(Int(-7, 7), init=0)

    @action
    def dec(s):
        require(s.x > -7)
        s.x = s.x - 1

    @action
    def halve(s):
        s.y = s.x // 2
        s.x //= 3

    @action
    def modulo(s):
        s.y = (s.x - 1) % 4

    @invariant
    def floor(s):
        return s.y >= BOUND
'''


def test_floor_division_of_negative_numbers_is_proved_for_every_size(tmp_path: Path) -> None:
    """-7 // 2 is -4 (floor, as z3's div with a positive divisor): `y >= -4` is proved for
    every size and the certificate re-checks at more requests and pages; `y >= -3` is
    violated."""
    path = tmp_path / "halves.py"
    path.write_text(DIVISION.replace("BOUND", "-4"))
    (v,) = run(system_of(path), "all-sizes", proofs_dir=tmp_path, save_proof=True,
               coverage=False).verdicts
    assert v.status is Status.PROVED and v.method == "all sizes", v.headline()
    (cert,) = tmp_path.glob("*requests=all*.json")
    assert check_certificate(cert, system_of(path, {"requests": 3, "pages": 6})).ok
    (p,) = run(system_of(path), "pdr", proofs_dir=tmp_path, save_proof=True,
               coverage=False).verdicts
    assert p.status is Status.PROVED
    (small,) = tmp_path.glob("*requests=2,pages=4.json")
    assert check_certificate(small, system_of(path)).ok  # the orbit check reads `div`
    path.write_text(DIVISION.replace("BOUND", "-3"))
    for engine in ("all-sizes", "explicit"):
        (w,) = run(system_of(path), engine, proofs_dir=tmp_path / engine,
                   coverage=False).verdicts
        assert w.status is Status.VIOLATED, (engine, w.headline())


SHARE = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, invariant, require


class Share(Model):
    properties = ("ok",)
    requests = Requests(2)
    pages = Pages(4)
    owner = pages.var(requests.optional, init=None)
    held = requests.var(Int(0, "pages"), init=0)
    share = requests.var(Int(0, 1), init=0)
    rest = requests.var(Int(0, "pages"), init=0)
    mark = pages.var(Int(0, 5), init=0)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None and s.held[r] < len(s.pages))
        s.owner[p] = r
        s.held[r] = s.held[r] + 1
        s.share[r] = s.held[r] // len(s.pages)
        s.rest[r] = (s.held[r] - len(s.pages)) % len(s.pages)
        emit.alloc(r, p)
STAMP
    @invariant
    def ok(s):
        return all(CLAIM for r in s.requests)
'''
STAMP = """
    @action
    def stamp(s, r: Request):
        s.mark[s.owner == r] = s.held[r]
"""


@pytest.mark.parametrize("claim, stamp, proved", [
    ("s.share[r] == 0 or s.held[r] == len(s.pages)", "", True),
    ("s.rest[r] <= 3", "", False),  # (held - pages) % pages reaches 4 with five pages
    ("s.share[r] <= 1", STAMP, False),  # mark[mask] = 6 is a model error with six pages
])
def test_the_number_of_pages_as_a_divisor(tmp_path: Path, claim: str, stamp: str,
                                          proved: bool) -> None:
    """`x // len(pages)` and `(x - len(pages)) % len(pages)` read for every size (the
    size is positive there, as at every size the model compiles at): a claim true at
    every size is proved and its certificate re-checks at seven pages; one true only up
    to four pages, or a masked write whose range check only a larger size needs, keeps
    the property size-specific."""
    path = tmp_path / "share.py"
    path.write_text(SHARE.replace("CLAIM", claim).replace("STAMP", stamp))
    (v,) = run(system_of(path), "all-sizes", proofs_dir=tmp_path, save_proof=True,
               coverage=False).verdicts
    assert (v.method == "all sizes") is proved, v.headline()
    if proved:
        (cert,) = tmp_path.glob("*requests=all*.json")
        assert check_certificate(cert, system_of(path, {"requests": 3, "pages": 7})).ok
    else:
        assert "not for all sizes" in v.detail


TALLY = '''
from kvspec import (Int, Model, Page, Pages, Ranks, Request, Requests, action, emit,
                    invariant, require, var)


class Tally(Model):
    properties = ("never-hit",)
    requests = Requests(1)
    pages = Pages(4)
    ranks = Ranks(1)
    owner = pages.var(requests.optional, init=None)
    n = ranks.var(Int(0, "pages"), init=0)
    hit = var(bool, init=False)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r
        emit.alloc(r, p)

    @action
    def grow(s, k: ranks.id):
        require(s.n[k] < len(s.pages))
        s.n[k] = s.n[k] + 1

    @action
    def check(s, r: Request, k: ranks.id):
        require((s.owner == r).count() == s.n[k] and s.n[k] >= 5)
        s.hit = True

    @invariant
    def never_hit(s):
        return not s.hit
'''


def test_a_count_compared_with_a_rank_variable_bounded_by_the_pages(tmp_path: Path) -> None:
    """`n[k]` (over ranks, `Int(0, "pages")`) is one symbol per rank whose range the
    reading takes at the compiled size, both where it expands `count == n[k]` over the
    values of that range and in the type clause it must prove: so the comparison is
    exact in every state the invariant allows. With five pages the count reaches
    `n[k] == 5`; at four it cannot: never PROVED (all sizes) at four pages."""
    path = tmp_path / "tally.py"
    path.write_text(TALLY)
    (v,) = run(system_of(path), "all-sizes", proofs_dir=tmp_path, coverage=False).verdicts
    assert v.method != "all sizes" and "not for all sizes" in v.detail, v.headline()
    (w,) = run(system_of(path, {"pages": 5}), "explicit", coverage=False).verdicts
    assert w.status is Status.VIOLATED
