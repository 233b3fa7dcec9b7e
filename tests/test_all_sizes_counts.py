"""Counts over every page in the all-sizes reading: ghost counts constrained by
cardinality facts. Every fact the reading states must hold of the real counts of
random finite instances; what it proves must hold at larger sizes (explicit engine,
certificate re-check); designs that break the counting argument must not be proved for
every size; where a count still stands in the way, the verdict names it."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.certificate import check_certificate, load_certificate
from kvspec.proofs.parametric.cardinality import GhostCount, _State, state_facts, step_facts
from kvspec.proofs.parametric.encode import Step
from kvspec.proofs.parametric.engine import AllSizesProof, _needs, _size_specific, \
    prove_all_sizes, recheck, write_all_sizes
from kvspec.proofs.parametric.values import Sorts
from kvspec.runner import run
from kvspec.verdict import Status
from conftest import system_of
from test_all_sizes_loose import _lockstep

ROOT = Path(__file__).resolve().parent.parent
SGLANG = ROOT / "models" / "library" / "sglang_admission.py"
NRBW = "no-read-beyond-written"

# designs that break the counting argument, each only at more pages than its default
VARIANTS = '''

class SendsTwice(After38935):
    """send_chunk may post a chunk to a page whose write already landed."""
    pages = Pages(1)

    @action
    def send_chunk(s, r: Request, p: Page):
        require(s.phase[r] == Phase.TRANSFER and s.sent[r] < s.chunks(r))
        require(s.owner[p] == r and s.inflight[p] is None)
        s.sent[r] = s.sent[r] + 1
        s.inflight[p] = r
        emit.post_write(r, p)


class IgnoresInflight(After38935):
    """Success without waiting for the writes in flight once two chunks were sent."""
    pages = Pages(1)

    @action
    def transfer_success(s, r: Request):
        require(s.phase[r] == Phase.TRANSFER and s.sent[r] == s.chunks(r))
        require(s.sent[r] >= 2 or not (s.inflight == r).any())
        s.phase[r] = Phase.RUNNING


class GrabsExtra(After38935):
    """A page taken after preallocating two, never written."""
    pages = Pages(2)

    @action
    def grab_extra(s, r: Request, p: Page):
        require(s.phase[r] == Phase.TRANSFER and s.owner[p] is None and s.sent[r] == 0)
        require(s.need[r] >= 2)
        s.owner[p] = r
        s.landed[p] = False
        emit.alloc(r, p)
'''


# -- the facts, on random finite instances ----------------------------------------------

class _Instance:
    """A finite universe of pages and requests (plus the None elements), and relations
    over it given as tables."""

    def __init__(self, pages: int, requests: int) -> None:
        self.sorts = Sorts.make()
        self.axioms: list[z3.BoolRef] = []
        P, R = self.sorts.sort[PAGE], self.sorts.sort[REQUEST]
        self.pages = [z3.Const(f"pg{i}", P) for i in range(pages)]
        self.requests = [z3.Const(f"rq{j}", R) for j in range(requests)]
        self.facts: list[z3.BoolRef] = []
        for elems, srt, dim in ((self.pages, P, PAGE), (self.requests, R, REQUEST)):
            nil = self.sorts.nil[dim]
            x = z3.Const(f"all_{dim}", srt)
            self.facts.append(z3.Distinct(*elems, nil))
            self.facts.append(z3.ForAll([x], z3.Or(*[x == e for e in elems], x == nil)))
        self.size = z3.Int("size.pages")
        self.facts.append(self.size == pages)

    def relation(self, name: str, table: list[list[bool]]) -> z3.FuncDeclRef:
        f = z3.Function(name, self.sorts.sort[PAGE], self.sorts.sort[REQUEST], z3.BoolSort())
        for i, p in enumerate(self.pages):
            for j, r in enumerate(self.requests):
                self.facts.append(f(p, r) == table[i][j])
        return f

    def counts(self, name: str, values: list[int]) -> z3.FuncDeclRef:
        c = z3.Function(name, self.sorts.sort[REQUEST], z3.IntSort())
        for r, v in zip(self.requests, values):
            self.facts.append(c(r) == v)
        return c

    def consistent(self, facts: list[z3.BoolRef]) -> z3.CheckSatResult:
        s = z3.Solver()
        s.set("timeout", 20_000)
        s.add(*self.facts, *facts)
        return s.check()


def _cardinalities(table: list[list[bool]]) -> list[int]:
    return [sum(row[j] for row in table) for j in range(len(table[0]))]


@st.composite
def instances(draw: st.DrawFn) -> dict[str, object]:
    pages = draw(st.integers(1, 4))
    requests = draw(st.integers(1, 3))
    tables = st.lists(st.lists(st.booleans(), min_size=requests, max_size=requests),
                      min_size=pages, max_size=pages)
    ghosts = []
    for _ in range(3):
        before = draw(tables)
        mode = draw(st.sampled_from(["same", "point", "pair", "any"]))
        after = draw(tables)
        ghosts.append((before, mode, after))
    # the subset fact needs related sets to matter: make one relation a subset of another
    if draw(st.booleans()):
        b0 = ghosts[0][0]
        ghosts[1] = ([[x and draw(st.booleans()) for x in row] for row in b0],) + ghosts[1][1:]
    return {"pages": pages, "requests": requests, "ghosts": ghosts,
            "p0": draw(st.integers(0, pages - 1)), "p1": draw(st.integers(0, pages - 1))}


def _build(case: dict[str, object], skew: int = 0) -> tuple[_Instance, list[z3.BoolRef]]:
    """The facts of a step on ``case``, with the counts after the step off by ``skew``
    for the first ghost."""
    inst = _Instance(case["pages"], case["requests"])  # type: ignore[arg-type]
    p0 = inst.pages[case["p0"]]  # type: ignore[index]
    p1 = inst.pages[case["p1"]]  # type: ignore[index]
    P, R = inst.sorts.sort[PAGE], inst.sorts.sort[REQUEST]
    gp, gr = z3.Const("p", P), z3.Const("r", R)
    ghosts, post, c_after = [], {}, {}
    for k, (before, mode, after) in enumerate(case["ghosts"]):  # type: ignore[misc]
        phi = inst.relation(f"phi{k}", before)
        if mode == "same":
            table, post_phi = before, (lambda y, r, phi=phi: phi(y, r))
        else:
            psi = inst.relation(f"psi{k}", after)
            if mode == "point":
                table = [after[i] if i == case["p0"] else before[i]
                         for i in range(len(before))]
                post_phi = (lambda y, r, phi=phi, psi=psi: z3.If(y == p0, psi(y, r), phi(y, r)))
            elif mode == "pair":  # changed at the action's two pages (a page moved)
                table = [after[i] if i in (case["p0"], case["p1"]) else before[i]
                         for i in range(len(before))]
                post_phi = (lambda y, r, phi=phi, psi=psi:
                            z3.If(z3.Or(y == p0, y == p1), psi(y, r), phi(y, r)))
            else:
                table, post_phi = after, (lambda y, r, psi=psi: psi(y, r))
        real = inst.counts(f"count{k}", _cardinalities(before))
        g = GhostCount(f"count{k}", phi(gp, gr), gp, gr, real)
        ghosts.append(g)
        post[g.name] = post_phi
        counts = _cardinalities(table)
        if k == 0:
            counts = [v + skew for v in counts]
        c_after[g.name] = inst.counts(f"count{k}'", counts)
    model = inst  # what the facts read: sorts and axioms
    before_state = _State(lambda g, y, r: z3.substitute(g.phi, (g.page, y), (g.request, r)),
                          lambda g, r: g.at(r))
    after_state = _State(lambda g, y, r: post[g.name](y, r), lambda g, r: c_after[g.name](r))
    step = Step(z3.BoolVal(True), {}, [], [p0, p1], [inst.sorts.real(p0), inst.sorts.real(p1)])
    facts = state_facts(model, ghosts, before_state, inst.size)
    facts += state_facts(model, ghosts, after_state, inst.size)
    for g in ghosts:
        facts += step_facts(model, g, before_state, after_state, step)
    return inst, facts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_every_cardinality_fact_holds_of_real_counts(case: dict[str, object]) -> None:
    """Random finite page/request relations before and after a step (unchanged, changed
    at the action's page only or at its two pages only, changed anywhere), counts
    computed here: every fact the reading states (range, emptiness, subset, unchanged,
    up or down by what changed at the action's pages) is satisfied."""
    inst, facts = _build(case)
    assert inst.consistent(facts) == z3.sat


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(), st.sampled_from([-1, 1]), st.sampled_from(["point", "pair"]))
def test_a_count_off_by_one_contradicts_the_facts(case: dict[str, object], skew: int,
                                                  mode: str) -> None:
    """The facts pin a count down: after a step that changes the condition at one page,
    at two (a page moved), or nowhere, a post-state count off by one is inconsistent
    with them."""
    ghost = case["ghosts"][0]  # type: ignore[index]
    case["ghosts"][0] = (ghost[0], mode, ghost[2])  # type: ignore[index]
    inst, facts = _build(case, skew)
    assert inst.consistent(facts) == z3.unsat


def test_the_subset_fact_rejects_equal_counts_of_unequal_sets() -> None:
    inst = _Instance(3, 1)
    P, R = inst.sorts.sort[PAGE], inst.sorts.sort[REQUEST]
    gp, gr = z3.Const("p", P), z3.Const("r", R)
    small = inst.relation("small", [[True], [False], [False]])
    big = inst.relation("big", [[True], [True], [False]])
    gs = [GhostCount("small", small(gp, gr), gp, gr, inst.counts("c_small", [2])),
          GhostCount("big", big(gp, gr), gp, gr, inst.counts("c_big", [2]))]
    state = _State(lambda g, y, r: z3.substitute(g.phi, (g.page, y), (g.request, r)),
                   lambda g, r: g.at(r))
    assert inst.consistent(state_facts(inst, gs, state, inst.size)) == z3.unsat


# -- models ------------------------------------------------------------------------------

def _verdicts(system: object, tmp_path: Path, engine: str = "all-sizes", **kw: object
              ) -> dict[str, object]:
    res = run(system, engine, proofs_dir=tmp_path, coverage=False, **kw)  # type: ignore[arg-type]
    return {v.prop: v for v in res.verdicts}


@pytest.fixture(scope="module")
def after38935(tmp_path_factory: pytest.TempPathFactory) -> tuple[AllSizesProof, Path]:
    """After38935's all-sizes proof (other sizes at their values) and its certificate."""
    where = tmp_path_factory.mktemp("proofs")
    system = system_of(SGLANG, model_class="After38935")
    verdicts, clauses, extra = _size_specific(system, None, False, where, None, True, None)
    holding = [v.prop for v in verdicts if v.status is Status.PROVED]
    proof = prove_all_sizes(system, clauses, holding, needs=_needs(extra))
    return proof, write_all_sizes(system, proof, where, {})


def test_no_read_beyond_written_of_after38935_is_proved_for_every_size(
        tmp_path: Path, after38935: tuple[AllSizesProof, Path]) -> None:
    """The counting argument (every page preallocated was written once the chunks sent
    equal the pages needed and none is in flight) is proved for every number of
    requests and pages with ghost counts, and the certificate declaring them re-checks
    at more requests and pages."""
    proof, cert = after38935
    assert NRBW in proof.proved, proof.why_not_for or proof.why_not
    assert "count{p: (= (owner p) r)}" in proof.counts
    assert "|count{p: (= (inflight p) r)}|" in load_certificate(cert).smtlib2
    bigger = system_of(SGLANG, {"requests": 3, "pages": 6}, model_class="After38935")
    check = check_certificate(cert, bigger)
    assert check.ok, check.problems
    assert NRBW in check.properties


@pytest.mark.slow
def test_after38935_verdict_and_the_explicit_engine_at_more_pages(tmp_path: Path) -> None:
    v = _verdicts(system_of(SGLANG, model_class="After38935"), tmp_path)
    nrbw = v[NRBW]
    assert nrbw.status is Status.PROVED and nrbw.method == "all sizes", nrbw.headline()
    assert "counting pages with count{p: (= (inflight p) r)}" in nrbw.detail
    bigger = system_of(SGLANG, {"requests": 3, "pages": 6}, model_class="After38935")
    explicit = _verdicts(bigger, tmp_path, "explicit", max_states=200_000)
    assert explicit[NRBW].status is Status.HOLDS


def test_a_certificate_clause_on_a_count_is_checked_not_assumed(
        after38935: tuple[AllSizesProof, Path]) -> None:
    """A count of pages a certificate declares is only a name: a false clause about it
    (every request owns no page, ever) does not re-check."""
    _, cert = after38935
    text = load_certificate(cert).smtlib2
    system = system_of(SGLANG, model_class="After38935")
    good, _ = recheck(system, text, None, [NRBW])
    assert good.proved == [NRBW] and not good.problems
    false = text + ("(assert (forall ((r Request)) "
                    "(= (|count{p: (= (owner p) r)}| r) 0)))\n")
    bad, _ = recheck(system, false, None, [NRBW])
    assert bad.problems and not bad.proved


@pytest.mark.slow
def test_no_read_beyond_written_of_after36988_is_proved_for_every_size(tmp_path: Path) -> None:
    v = _verdicts(system_of(SGLANG, model_class="After36988"), tmp_path)
    assert v[NRBW].method == "all sizes", v[NRBW].headline()
    bigger = system_of(SGLANG, {"requests": 3, "pages": 6}, model_class="After36988")
    assert _verdicts(bigger, tmp_path, "explicit", max_states=200_000)[NRBW].status \
        is Status.HOLDS


def _variant(tmp_path: Path) -> Path:
    path = tmp_path / "sglang_variants.py"
    path.write_text(SGLANG.read_text() + VARIANTS)
    return path


@pytest.mark.parametrize("cls, bigger", [
    ("SendsTwice", {"pages": 2}),
    pytest.param("IgnoresInflight", {"pages": 2}, marks=pytest.mark.slow),
])
def test_designs_that_break_the_counting_argument_are_not_proved_for_every_size(
        tmp_path: Path, cls: str, bigger: dict[str, int]) -> None:
    path = _variant(tmp_path)
    v = _verdicts(system_of(path, model_class=cls), tmp_path)
    assert v[NRBW].status is Status.PROVED and v[NRBW].method != "all sizes", \
        v[NRBW].headline()
    larger = _verdicts(system_of(path, bigger, model_class=cls), tmp_path, "explicit")
    assert larger[NRBW].status is Status.VIOLATED


@pytest.mark.slow
def test_a_count_that_fails_with_more_pages_is_named_not_proved(tmp_path: Path) -> None:
    """GrabsExtra's size-specific proof needs `count(owner == r) == need[r]` while
    running, which no longer holds with three pages: the ghost counts are tried and
    prove nothing false, and the verdict names that clause and the model line that
    counts the owner."""
    path = _variant(tmp_path)
    v = _verdicts(system_of(path, model_class="GrabsExtra"), tmp_path)
    assert v[NRBW].status is Status.PROVED and v[NRBW].method != "all sizes"
    detail = v[NRBW].detail
    assert "not for all sizes: needs " in detail and "count(owner == r)" in detail
    assert "sglang_variants.py:107" in detail and "ghost counts" in detail
    larger = _verdicts(system_of(path, {"pages": 3}, model_class="GrabsExtra"), tmp_path,
                       "explicit")
    assert larger[NRBW].status is Status.VIOLATED


def test_every_concrete_step_of_after38935_is_a_parametric_step() -> None:
    system = system_of(SGLANG, {"requests": 2, "pages": 3}, model_class="After38935")
    assert _lockstep(system, random.Random(7), 20, per_state=6) > 0


# a page's contents move to a free page (defragmentation): the count of the owner's
# pages changes at the two pages of the action only, and stays the same
MOVE = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, invariant, require


class Move(Model):
    properties = ("empty-holds-nothing",)
    requests = Requests(2)
    pages = Pages(4)
    owner = pages.var(requests.optional, init=None)
    held = requests.var(Int(0, "pages"), init=0)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None and s.held[r] < len(s.pages))
        s.owner[p] = r
        s.held[r] = s.held[r] + 1
        emit.alloc(r, p)

    @action
    def move(s, p: Page, q: Page):
        require(s.owner[p] is not None and s.owner[q] is None)
        s.owner[q] = s.owner[p]
        s.owner[p] = None

    @action
    def release(s, r: Request, p: Page):
        require(s.owner[p] == r)
        s.owner[p] = None
        s.held[r] = s.held[r] - 1
        emit.free(r, p)

    @invariant
    def empty_holds_nothing(s):
        return all(s.held[r] > 0 or not (s.owner == r).any() for r in s.requests)
'''

# the move forgets to clear the source page: a request owns more pages than it counts
COPY = MOVE.replace("        s.owner[p] = None\n\n    @action\n    def release",
                    "\n    @action\n    def release")


def test_a_page_move_keeps_a_count_for_every_size(tmp_path: Path) -> None:
    """`move(p, q)` changes who owns two pages at once: the count moves by what changed
    at both (one down at p, one up at q), so `count(owner == r) == held[r]` is
    inductive for every size."""
    path = tmp_path / "move.py"
    path.write_text(MOVE)
    (v,) = run(system_of(path), "all-sizes", proofs_dir=tmp_path, save_proof=True,
               coverage=False).verdicts
    assert v.method == "all sizes" and "count{p: (= (owner p) r)}" in v.detail, v.headline()
    (cert,) = tmp_path.glob("*requests=all*.json")
    bigger = system_of(path, {"requests": 3, "pages": 7})
    assert check_certificate(cert, bigger).ok
    (w,) = run(system_of(path, {"requests": 3, "pages": 5}), "explicit",
               coverage=False).verdicts
    assert w.status is Status.HOLDS


def test_a_move_that_copies_is_violated_not_proved(tmp_path: Path) -> None:
    path = tmp_path / "copy.py"
    path.write_text(COPY)
    assert COPY != MOVE
    (v,) = run(system_of(path), "all-sizes", proofs_dir=tmp_path, coverage=False).verdicts
    assert v.status is Status.VIOLATED
