"""Soundness of the ghost counts of pages in the all-sizes reading: every fact ranges
over the real pages and requests only (the None element of each sort holds junk the
real system does not have); a count that crosses a threshold only with fewer or with
more pages is not proved for every size; a certificate's count declarations are
names, checked and never trusted."""
from __future__ import annotations

from pathlib import Path

import pytest
import z3

from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.clauses import CertificateError
from kvspec.proofs.parametric.cardinality import GhostCount, _State, state_facts, step_facts
from kvspec.proofs.parametric.encode import Step
from kvspec.proofs.parametric.engine import _size_specific, prove_all_sizes, recheck
from kvspec.proofs.parametric.smtlib import to_smtlib2
from kvspec.runner import run
from kvspec.verdict import Status
from test_all_sizes_counts import _Instance

# -- the facts with junk at the None elements -----------------------------------------------


def _junk_case(skew: int) -> z3.CheckSatResult:
    """Two pages, one request. φ holds at page 0 and, as junk, at the None page and for
    the None request; the step makes it hold at page 1 (the action's page) and drops it
    at the None page. ψ is φ without the junk (the same real set). The counts of the
    None request are out of any range. Real counts: 1 before, 2 after (+ ``skew``)."""
    inst = _Instance(2, 1)
    P, R = inst.sorts.sort[PAGE], inst.sorts.sort[REQUEST]
    nil_p, nil_r = inst.sorts.nil[PAGE], inst.sorts.nil[REQUEST]
    phi = inst.relation("phi", [[True], [False]])
    post = inst.relation("post", [[True], [True]])
    psi = inst.relation("psi", [[True], [False]])
    for r in inst.requests + [nil_r]:
        inst.facts += [phi(nil_p, r), z3.Not(post(nil_p, r)), z3.Not(psi(nil_p, r))]
    for p in inst.pages:
        inst.facts += [phi(p, nil_r), z3.Not(psi(p, nil_r))]
    c, c2 = inst.counts("c", [1]), inst.counts("c'", [2 + skew])
    d = inst.counts("d", [1])
    inst.facts += [c(nil_r) == 7, c2(nil_r) == -3, d(nil_r) == 5]
    gp, gr = z3.Const("p", P), z3.Const("r", R)
    g = GhostCount("c", phi(gp, gr), gp, gr, c)
    h = GhostCount("d", psi(gp, gr), gp, gr, d)
    before = _State(lambda k, y, r: z3.substitute(k.phi, (k.page, y), (k.request, r)),
                    lambda k, r: k.at(r))
    after = _State(lambda k, y, r: post(y, r) if k is g else psi(y, r),
                   lambda k, r: c2(r) if k is g else d(r))
    p0 = inst.pages[1]
    step = Step(z3.BoolVal(True), {}, [], [p0], [inst.sorts.real(p0)])
    facts = state_facts(inst, [g, h], before, inst.size)
    facts += state_facts(inst, [g, h], after, inst.size, subsets=False)
    facts += step_facts(inst, g, before, after, step) + step_facts(inst, h, before, after, step)
    return inst.consistent(facts)


def test_junk_at_the_none_page_and_request_does_not_contradict_the_facts() -> None:
    """Range, emptiness, subset (φ and ψ differ only at the None page), unchanged and
    one-up facts all hold of the real counts whatever the None elements hold."""
    assert _junk_case(0) == z3.sat


@pytest.mark.parametrize("skew", [-1, 1])
def test_the_junk_case_still_pins_the_real_count(skew: int) -> None:
    assert _junk_case(skew) == z3.unsat


# -- models --------------------------------------------------------------------------------

TINY = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, invariant, require, var


class M(Model):
    properties = ()
    requests = Requests(2)
    pages = Pages(3)
    owner = pages.var(requests.optional, init=None)
    held = requests.var(Int(0, HELD), init=0)
    bad = var(bool, init=False)

    @action
    def grab(s, r: Request, p: Page):
        require(s.owner[p] is None and s.held[r] < HELD)
        s.owner[p] = r
        s.held[r] = s.held[r] + 1

    @action
    def release(s, r: Request):
        for p in s.pages:
            if s.owner[p] == r:
                s.owner[p] = None

        s.held[r] = 0

    @action
    def check(s, r: Request):
        require((s.owner == r).count() != s.held[r])
        s.bad = True
EXTRA
    @invariant
    def fine(s) -> bool:
        return not s.bad
'''

# reachable with two pages, not with three (each request holds at most one)
NO_FREE_PAGE = '''
    @action
    def exhaust(s):
        require((s.owner != None).count() == len(s.pages))  # noqa: E711
        s.bad = True
'''

# reachable with four pages, not with three
FOUR_OWNED = '''
    @action
    def crowd(s):
        require((s.owner != None).count() == 4)  # noqa: E711
        s.bad = True
'''


def _model(tmp_path: Path, held: int, extra: str = "") -> Path:
    path = tmp_path / "tiny_counts.py"
    path.write_text(TINY.replace("HELD", str(held)).replace("EXTRA", extra))
    return path


def _system(path: Path, sizes: dict[str, int] | None = None) -> System:
    return compile_model(load_model(path, "M"), sizes or {}, None)


def _fine(path: Path, tmp_path: Path, engine: str, sizes: dict[str, int] | None = None
          ) -> object:
    res = run(_system(path, sizes), engine, proofs_dir=tmp_path, coverage=False)  # type: ignore[arg-type]
    return next(v for v in res.verdicts if v.prop == "fine")


def test_a_counted_model_is_proved_for_every_size_and_holds_at_more(tmp_path: Path) -> None:
    """held[r] is the number of pages r owns (a loop releases them): proved for every
    size with the ghost count of owner == r, and it holds at more requests and pages."""
    path = _model(tmp_path, 2)
    v = _fine(path, tmp_path, "all-sizes")
    assert v.status is Status.PROVED and v.method == "all sizes", v.headline()  # type: ignore[attr-defined]
    assert "count{p: (= (owner p) r)}" in v.detail  # type: ignore[attr-defined]
    bigger = _fine(path, tmp_path, "explicit", {"requests": 3, "pages": 5})
    assert bigger.status is Status.HOLDS  # type: ignore[attr-defined]


@pytest.mark.parametrize("extra, sizes", [(NO_FREE_PAGE, {"pages": 2}),
                                          (FOUR_OWNED, {"pages": 4, "requests": 2})])
def test_a_count_threshold_crossed_at_another_number_of_pages_is_not_proved(
        tmp_path: Path, extra: str, sizes: dict[str, int]) -> None:
    """A comparison of a count with the number of pages (a symbol for every size) or
    with a constant the default pages cannot reach: the ghost's range is size.pages,
    never the default's 3, so the all-sizes reading proves nothing the explicit
    engine refutes at that size."""
    path = _model(tmp_path, 1 if extra is NO_FREE_PAGE else 2, extra)
    v = _fine(path, tmp_path, "all-sizes")
    assert v.method != "all sizes", v.headline()  # type: ignore[attr-defined]
    other = _fine(path, tmp_path, "explicit", sizes)
    assert other.status is Status.VIOLATED  # type: ignore[attr-defined]


# -- certificates ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_proof(tmp_path_factory: pytest.TempPathFactory) -> tuple[System, str]:
    where = tmp_path_factory.mktemp("tiny")
    system = _system(_model(where, 2))
    verdicts, clauses, _ = _size_specific(system, None, False, where, None, True, None)
    proof = prove_all_sizes(system, clauses, [v.prop for v in verdicts
                                              if v.status is Status.PROVED])
    assert proof.proved == ["fine"] and proof.counts, proof.why_not
    assert proof.model is not None
    return system, to_smtlib2(proof.model, proof.clauses)


GHOST = "|count{p: (= (owner p) r)}|"


def _decl(name: str, sort: str = "Request") -> str:
    return f"(declare-fun |{name}| ({sort}) Int)\n"


@pytest.mark.parametrize("clause", [
    # the count of the None request is not a count of the real system
    f"(assert (= ({GHOST} none_request) 0))",
    # a condition reading the junk of the None page: a count of the reading's state
    # (0 here, as the junk never changes), not of the pages r owns
    _decl("count{p: (= (owner none_page) r)}")
    + "(assert (forall ((r Request)) (=> (not (= r none_request)) "
      "(= (|count{p: (= (owner none_page) r)}| r) (held r)))))",
    # every real request owns as many pages as it holds is true; one more is not
    f"(assert (forall ((r Request)) (=> (not (= r none_request)) "
    f"(= ({GHOST} r) (+ (held r) 1)))))",
])
def test_a_forged_clause_on_a_count_does_not_recheck(tiny_proof: tuple[System, str],
                                                     clause: str) -> None:
    system, text = tiny_proof
    good, _ = recheck(system, text, None, ["fine"])
    assert good.proved == ["fine"] and not good.problems
    bad, _ = recheck(system, text + clause + "\n", None, ["fine"])
    assert bad.problems and not bad.proved


@pytest.mark.parametrize("decl", [
    _decl("count{p: (= (owner p) r)}", "Page"),                      # not per request
    _decl("count{p: (exists ((q Page)) (= (owner q) r))}"),          # a quantifier
    _decl("count{p: (= (owner p) q)}"),                              # an unknown symbol
    _decl("count{p: (= (owner p) r)}", ""),                          # r without a request
    "(declare-fun |count{p: (> (|count{p: true}| r) 0)}| (Request) Int)\n",  # nested
])
def test_a_count_declaration_outside_the_reading_is_rejected(
        tiny_proof: tuple[System, str], decl: str) -> None:
    system, text = tiny_proof
    head, tail = text.split("(assert", 1)
    with pytest.raises(CertificateError):
        recheck(system, head + decl + "(assert" + tail, None, ["fine"])
