"""All-sizes proofs of models over a declared index space (``ranks = Ranks(2)``): the
space keeps its size, its ids are the numbers 0..n-1, a variable over it is one symbol
per index. What the proof says must hold at larger numbers of requests and pages (the
explicit engine), every concrete step must be the reading's step, a certificate must
re-check and a tampered one or one checked at another number of ranks must not, a
broken variant must not be proved, and what the reading does not cover keeps its line."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.proofs.certificate import check_certificate
from kvspec.proofs.parametric.model import parametric_model
from kvspec.proofs.parametric.values import Unsupported
from kvspec.runner import run
from kvspec.verdict import Status
from test_all_sizes import _lockstep, _tamper, _write

ROOT = Path(__file__).resolve().parent.parent
TP_RANKS = ROOT / "models" / "library" / "tp_ranks.py"
DRAINED, MIN_OF_RANKS = "ReleaseAfterEveryRankDrained", "ReleaseAfterMinOfRanks"
ALL_SIZES = "all sizes"
LARGER = [{"requests": 3, "pages": 6}, {"requests": 2, "pages": 8}]

# every shape of state over index spaces the reading takes: (request, rank), (rank,
# request), (slot, rank) (no request axis: one constant per pair), a per-rank array of
# request ids, an optional rank, pages holding a rank; element reads and writes at a
# parameter, a constant and a loop's rank, lines over ranks and over requests with
# any/all/count/max, line writes, loops and folds over ranks, masked writes over ranks
GRID = '''
from kvspec import (Int, Model, Page, Pages, Ranks, Request, Requests, Slots, action,
                    invariant, require, var)


class Grid(Model):
    properties = ()
    requests = Requests(2)
    pages = Pages(2)
    ranks = Ranks(2)
    slots = Slots(2)
    st = requests.var(Int(0, 2), init=0)
    g = requests.by(ranks).var(Int(0, 2), init=0)
    q = ranks.by(requests).var(bool, init=False)
    w = slots.by(ranks).var(bool, init=False)
    h = ranks.var(requests.optional, init=None)
    cur = var(ranks.optional, init=None)
    rank = pages.var(ranks.id, init=0)
    owner = pages.var(requests.optional, init=None)

    @action
    def bump(s, r: Request, k: ranks.id):
        require(s.g[r, k] < 2 and not s.q[k, r])
        s.g[r, k] = s.g[r, k] + 1
        if (s.g[r, :] == 2).count() >= 1:
            s.st[r] = min(2, s.st[r] + 1)

    @action
    def clear(s, r: Request):
        require((s.g[r, :] >= 1).all() and any(s.g[r, k3] == 2 for k3 in s.ranks))
        s.g[r, :] = 0
        s.st[r] = s.g[r, 1] + s.g[r].max() + 1

    @action
    def mark(s, k: ranks.id):
        s.cur = k
        s.w[:, k] = True
        s.q[k, :] = False

    @action
    def column(s, k: ranks.id):
        require((s.g[:, k] >= 2).count() == 0 or s.cur == k)
        for r2 in s.requests:
            s.g[r2, k] = min(2, s.g[r2, k] + 1)

    @action
    def hold(s, r: Request, k: ranks.id):
        require(s.h[k] is None and s.q[:, r].count() <= 1)
        s.h[k] = r
        s.q[k, r] = True

    @action
    def drop(s, r: Request):
        require(s.cur is not None)
        for k2 in s.ranks:
            if s.h[k2] == r:
                s.h[k2] = None
        s.h[s.q[:, r]] = None
        s.cur = None

    @action
    def take(s, r: Request, p: Page, k: ranks.id):
        require(s.owner[p] is None and s.w[0, k])
        s.owner[p] = r
        s.rank[p] = k

    @action
    def free(s, r: Request, k: ranks.id):
        mine = (s.owner == r) & (s.rank == k)
        require(mine.any())
        s.owner[mine] = None
        s.rank[mine] = 0

    @action
    def slot(s, j: slots.id):
        require(not s.w[j, :].all() or s.cur == 1)
        s.w[j, 0] = not s.w[j, 0]
'''

# the example of docs/modelling.md, with a size of ranks free to change
TP = '''
import enum

from kvspec import Model, Ranks, Request, Requests, action, invariant, require


class Phase(enum.Enum):
    NEW = 0
    SENDING = 1
    DONE = 2


class TP(Model):
    requests = Requests(2)
    ranks = Ranks(2)
    phase = requests.var(Phase, init=Phase.NEW)
    sent = requests.by(ranks).var(bool, init=False)
    leader = requests.var(ranks.optional, init=None)

    @action
    def start(s, r: Request, k: ranks.id):
        require(s.phase[r] == Phase.NEW)
        s.phase[r] = Phase.SENDING
        s.leader[r] = k

    @action
    def send(s, r: Request, k: ranks.id):
        require(s.phase[r] == Phase.SENDING and not s.sent[r, k])
        s.sent[r, k] = True

    @action
    def finish(s, r: Request):
        require(s.phase[r] == Phase.SENDING and s.sent[r, :].all())
        s.phase[r] = Phase.DONE
        s.sent[r, :] = False
        s.leader[r] = None

    @invariant
    def done_means_clear(s) -> bool:
        return all(s.phase[r] != Phase.DONE or s.sent[r].count() == 0 for r in s.requests)

    @invariant
    def leader_while_sending(s) -> bool:
        return all((s.phase[r] == Phase.SENDING) == (s.leader[r] is not None)
                   for r in s.requests)
'''

# user-style subclasses of the library model with a bug in which rank releases
BROKEN = '''
from tp_ranks import ReleaseAfterEveryRankDrained


class ChecksRankZeroOnly(ReleaseAfterEveryRankDrained):
    """Asks whether rank 0's writes drained, whichever rank releases."""

    def rank_may_release(s, r, k) -> bool:
        return not (s.rank_pages(r, 0) & (s.inflight == r)).any()


class RankOneNeverWaits(ReleaseAfterEveryRankDrained):
    """Rank 1 releases without waiting for its writes."""

    def rank_may_release(s, r, k) -> bool:
        return k == 1 or not (s.rank_pages(r, k) & (s.inflight == r)).any()
'''


def _compile(path: Path, cls: str | None = None, sizes: dict[str, int] | None = None
             ) -> System:
    return compile_model(load_model(path, cls), sizes)


def _explicit(path: Path, cls: str | None, sizes: dict[str, int]) -> dict[str, Status]:
    res = run(_compile(path, cls, sizes), "explicit", coverage=False, max_states=500_000)
    return {v.prop: v.status for v in res.verdicts}


@pytest.fixture(scope="module")
def tp_ranks_proofs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The all-sizes verdicts and saved certificates of both library classes."""
    proofs = tmp_path_factory.mktemp("ranks_proofs")
    out: dict[str, object] = {"dir": proofs}
    for cls in (DRAINED, MIN_OF_RANKS):
        res = run(_compile(TP_RANKS, cls), "all-sizes", save_proof=True, proofs_dir=proofs,
                  coverage=False)
        out[cls] = {v.prop: v for v in res.verdicts}
    return out


def _cert(proofs: dict[str, object], cls: str) -> Path:
    (path,) = Path(str(proofs["dir"])).glob(f"tp_ranks.{cls}.requests=all,*.json")
    return path


def test_every_rank_drained_is_proved_for_every_size(tp_ranks_proofs: dict) -> None:  # type: ignore[type-arg]
    verdicts = tp_ranks_proofs[DRAINED]
    assert len(verdicts) == 4
    for v in verdicts.values():
        assert v.status is Status.PROVED and v.method == ALL_SIZES, (v.prop, v.detail)


def test_min_of_ranks_proves_what_holds_and_keeps_its_violations(
        tp_ranks_proofs: dict) -> None:  # type: ignore[type-arg]
    verdicts = tp_ranks_proofs[MIN_OF_RANKS]
    proved = {p for p, v in verdicts.items() if v.method == ALL_SIZES}
    violated = {p for p, v in verdicts.items() if v.status is Status.VIOLATED}
    assert proved == {"no-read-beyond-written"}
    assert violated == {"no-reuse-before-drain", "no-reuse-under-write", "no-land-after-free"}


@pytest.mark.parametrize("sizes", LARGER, ids=lambda s: f"{s['requests']}r{s['pages']}p")
@pytest.mark.parametrize("cls", [DRAINED, MIN_OF_RANKS])
def test_what_is_proved_for_every_size_holds_at_larger_sizes(
        tp_ranks_proofs: dict, cls: str, sizes: dict[str, int]) -> None:  # type: ignore[type-arg]
    proved = [p for p, v in tp_ranks_proofs[cls].items() if v.method == ALL_SIZES]
    assert proved
    explicit = _explicit(TP_RANKS, cls, sizes)
    assert all(explicit[p] is Status.HOLDS for p in proved), explicit
    check = check_certificate(_cert(tp_ranks_proofs, cls), _compile(TP_RANKS, cls, sizes))
    assert check.ok and sorted(check.properties) == sorted(proved), check.problems


def test_the_certificate_declares_one_symbol_per_rank(tp_ranks_proofs: dict) -> None:  # type: ignore[type-arg]
    doc = json.loads(_cert(tp_ranks_proofs, DRAINED).read_text())
    smt = doc["invariant"]["smtlib2"]
    assert doc["sizes"] == {"ranks": 2} and doc["all_sizes"] == ["requests", "pages"]
    assert "(declare-fun failed@0 (Request) Bool)" in smt
    assert "(declare-fun failed@1 (Request) Bool)" in smt
    assert "(declare-fun rank (Page) Int)" in smt
    assert "rank[p] in 0..1" in " ".join(doc["invariant"]["readable"])
    assert not re.search(r"\(forall \(\([^)]*\bInt\)", smt)  # quantifiers over ids only


def _without(*drop: int) -> object:
    """An edit that removes the clauses numbered ``drop`` (comment, assertion, label)."""
    def edit(doc: dict) -> None:  # type: ignore[type-arg]
        inv = doc["invariant"]
        lines = inv["smtlib2"].splitlines()
        asserts = [i for i, line in enumerate(lines) if line.startswith("(assert")]
        gone = {j for k in drop for j in (asserts[k] - 1, asserts[k])}
        inv["smtlib2"] = "\n".join(x for j, x in enumerate(lines) if j not in gone) + "\n"
        inv["readable"] = [x for k, x in enumerate(inv["readable"]) if k not in drop]
        inv["clauses"] = len(inv["readable"])
    return edit


def test_a_certificate_without_a_needed_clause_is_rejected(
        tp_ranks_proofs: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    cert = _cert(tp_ranks_proofs, DRAINED)
    system = _compile(TP_RANKS, DRAINED)
    assert check_certificate(cert, system).ok
    labels = json.loads(cert.read_text())["invariant"]["readable"]
    first = next(k for k, label in enumerate(labels) if not label.startswith("type:"))
    check = check_certificate(_tamper(cert, tmp_path, _without(first)), system)
    assert not check.ok and check.problems


@pytest.fixture(scope="module")
def tp_proof(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The docs' two-rank model and its all-sizes certificate."""
    tmp = tmp_path_factory.mktemp("tp")
    path = _write(tmp, "tp", TP)
    res = run(_compile(path), "all-sizes", save_proof=True, proofs_dir=tmp, coverage=False)
    assert all(v.method == ALL_SIZES for v in res.verdicts), [v.detail for v in res.verdicts]
    (cert,) = tmp.glob("tp.TP.requests=all,ranks=2.json")
    return path, cert


def test_a_clause_over_each_rank_is_needed(tp_proof: tuple[Path, Path], tmp_path: Path) -> None:
    path, cert = tp_proof
    system = _compile(path)
    assert check_certificate(cert, system).ok
    smt = json.loads(cert.read_text())["invariant"]["smtlib2"]
    asserts = [line for line in smt.splitlines() if line.startswith("(assert")]
    about_rank_one = [k for k, line in enumerate(asserts) if "sent@1" in line]
    assert about_rank_one
    check = check_certificate(_tamper(cert, tmp_path, _without(*about_rank_one)), system)
    assert not check.ok and any("done-means-clear" in p for p in check.problems), check.problems
    # the clauses read about rank 0 twice, not about rank 1, prove nothing about rank 1
    swapped = _tamper(cert, tmp_path, lambda d: d["invariant"].update(
        smtlib2=d["invariant"]["smtlib2"].replace("(sent@1 ", "(sent@0 ")))
    assert swapped.read_text() != cert.read_text()
    check = check_certificate(swapped, system)
    assert not check.ok and any("done-means-clear" in p for p in check.problems), check.problems


def test_a_certificate_is_for_its_number_of_ranks(tp_proof: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    path, cert = tp_proof
    assert check_certificate(cert, _compile(path, None, {"requests": 4})).ok
    check = check_certificate(cert, _compile(path, None, {"ranks": 3}))
    assert not check.ok
    assert any("not at {'ranks': 3}" in p for p in check.problems), check.problems
    # at three ranks the model is proved for every size on its own
    res3 = run(_compile(path, None, {"ranks": 3}), "all-sizes", proofs_dir=tmp_path,
               coverage=False)
    assert all(v.method == ALL_SIZES for v in res3.verdicts)
    explicit = _explicit(path, None, {"requests": 4, "ranks": 3})
    assert all(s is Status.HOLDS for s in explicit.values()), explicit


@pytest.mark.parametrize("cls", ["ChecksRankZeroOnly", "RankOneNeverWaits"])
def test_a_broken_rank_release_is_not_proved_for_every_size(tmp_path: Path, cls: str) -> None:
    import sys
    sys.path.insert(0, str(TP_RANKS.parent))
    try:
        path = _write(tmp_path, "broken", BROKEN)
        verdicts = {v.prop: v for v in run(_compile(path, cls), "all-sizes",
                                           proofs_dir=tmp_path, coverage=False).verdicts}
        base = _explicit(path, cls, {"requests": 2, "pages": 4})
        larger = _explicit(path, cls, {"requests": 3, "pages": 6})
    finally:
        sys.path.remove(str(TP_RANKS.parent))
    assert Status.VIOLATED in base.values()
    for p, v in verdicts.items():
        if base[p] is Status.VIOLATED or larger[p] is Status.VIOLATED:
            assert v.method != ALL_SIZES and v.status is not Status.PROVED, (p, v.detail)
        if v.method == ALL_SIZES:
            assert base[p] is Status.HOLDS and larger[p] is Status.HOLDS


@pytest.mark.parametrize("source, cls", [(GRID, "Grid"), (None, DRAINED), (None, MIN_OF_RANKS)])
def test_every_concrete_step_over_ranks_is_the_parametric_step(
        tmp_path: Path, source: str | None, cls: str) -> None:
    path = _write(tmp_path, "grid", source) if source else TP_RANKS
    sizes = None if source else {"requests": 2, "pages": 3}
    system = _compile(path, cls, sizes)
    assert not parametric_model(system).approximations  # read exactly
    assert _lockstep(system, random.Random(7), 40, per_state=8) > 10


# uses of an index space the reading does not cover: a whole two-dimensional array as
# one vector, a reduction along the requests axis (unrolled over the request ids)
OUTSIDE = ["(s.g == 2).count() <= 1", "(s.g >= 1).any(axis=s.requests).any()"]


@pytest.mark.parametrize("guard", OUTSIDE)
def test_uses_outside_the_reading_name_their_line(tmp_path: Path, guard: str) -> None:
    source = f'''
from kvspec import Int, Model, Ranks, Request, Requests, action, require


class Outside(Model):
    properties = ()
    requests = Requests(2)
    ranks = Ranks(2)
    g = requests.by(ranks).var(Int(0, 2), init=0)

    @action
    def go(s, r: Request, k: ranks.id):
        require({guard})
        s.g[r, k] = 1
'''
    path = _write(tmp_path, "outside", source)
    line = source.splitlines().index(f"        require({guard})") + 1
    system = _compile(path)
    with pytest.raises(Unsupported) as exc:
        parametric_model(system)
    assert exc.value.where == f"{path}:{line}", str(exc.value)
    res = run(system, "all-sizes", proofs_dir=tmp_path, coverage=False)
    assert all(v.method != ALL_SIZES for v in res.verdicts)
    assert all(f"outside.py:{line}" in v.detail for v in res.verdicts
               if v.status is not Status.VIOLATED)


def test_random_models_over_index_spaces_are_read_exactly_or_rejected_at_a_line(
        tmp_path: Path) -> None:
    """The random models of :mod:`indexgen` (every shape of state over two index spaces):
    each is outside the reading with its line, or every concrete step is its step."""
    from indexgen import random_index_model

    accepted = 0
    for seed in range(20, 46):
        gen = random_index_model(seed)
        path = _write(tmp_path, f"gen{seed}", gen.source)
        system = _compile(path, gen.class_name)
        try:
            _lockstep(system, random.Random(seed), 4)
        except Unsupported as exc:
            assert re.search(rf"gen{seed}\.py:\d+$", exc.where), str(exc)
            continue
        accepted += 1
    assert accepted >= 2


def test_size_specific_clauses_over_ranks_lift_with_the_rank_as_a_numeral(
        tp_proof: tuple[Path, Path]) -> None:
    from kvspec.proofs.certificate import load_certificate
    from kvspec.proofs.clauses import parse_invariant
    from kvspec.proofs.parametric.generalise import generalise

    path, cert = tp_proof
    (specific,) = cert.parent.glob("tp.TP.requests=2,ranks=2.json")
    system = _compile(path)
    doc = load_certificate(specific)
    clauses = parse_invariant(doc.smtlib2, system.state_vars(), doc.readable)
    assert any("sent[r1,1]" in c.formula.sexpr() for c in clauses)
    model = parametric_model(system)
    got = generalise(system, model.sorts, model.symbols, [(c.formula, c.label) for c in clauses])
    lifted = [c for c in got.clauses if "sent@1" in c.formula.sexpr()]
    assert lifted and all("sent@0" in c.formula.sexpr() for c in lifted), got.rejected
    assert all(c.instances == 2 for c in lifted)  # one per request at this size
