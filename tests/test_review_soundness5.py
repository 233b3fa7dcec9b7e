"""All-sizes proofs learnt at the small size (two requests, four pages) for a run at a
larger size: the small size is only where an invariant is learnt. A model that does not
compile at the small size, or has a model error reachable only there, still gets its
verdicts at the run's size (never a model error of a size nobody asked for), and what is
proved for every size is never violated at the run's size."""
from __future__ import annotations

from pathlib import Path

import pytest

import kvspec.engines.auto as auto
from kvspec.lang.errors import ModelError
from kvspec.lang.system import System
from kvspec.runner import run
from kvspec.verdict import Status
from conftest import system_of
from test_all_sizes import SIZE_THRESHOLD, _write

POOL = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, require


class Pool(Model):
    properties = ("no-read-beyond-written",)
    requests = Requests(2)
    pages = Pages(6)
    owner = pages.var(requests.optional, init=None)
EXTRA

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r
        emit.alloc(r, p)

    @action
    def free(s, p: Page):
        require(s.owner[p] is not None)
        emit.free(s.owner[p], p)
        s.owner[p] = None
'''

# compiles from five pages on: at four its derived size is below its minimum
NO_SMALL_SIZE = POOL.replace(
    "EXTRA", "    spare = Size(derived=lambda sz: sz.pages - 4, minimum=1)")

# a write that leaves the range of `used` with four pages, not with six
ERROR_AT_SMALL_SIZE = POOL.replace("EXTRA", '''    used = requests.var(Int(0, "pages"), init=0)

    @action
    def bump(s, r: Request):
        require(s.used[r] == 0)
        s.used[r] = s.used[r] + 5''')


# a count of pages as an index of `slots`: always an index with four pages, not with six
# (the compiler checks it from five pages on; the small size's reading has no check)
SLOT_OF_COUNT = POOL.replace("from kvspec import", "from kvspec import Slots,").replace(
    "EXTRA", """    slots = Slots(5)
    mark = slots.var(bool, init=False)""").replace(
    "        emit.alloc(r, p)", "        s.mark[COORD] = True\n        emit.alloc(r, p)")


def _system(tmp_path: Path, source: str, sizes: dict[str, int] | None = None) -> System:
    return system_of(_write(tmp_path, "model", source), sizes)


@pytest.mark.parametrize("source, why", [
    (NO_SMALL_SIZE, "does not compile at the small size"),
    (ERROR_AT_SMALL_SIZE, "model error at requests=2, pages=4"),
])
@pytest.mark.parametrize("engine", ["all-sizes", "auto"])
def test_a_model_error_only_at_the_small_size_leaves_the_run_size_to_decide(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, why: str,
        engine: str) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 3)  # auto: past the explicit stage
    system = _system(tmp_path, source)
    explicit = run(system, "explicit", coverage=False)
    assert [v.status for v in explicit.verdicts] == [Status.HOLDS]
    result = run(system, engine, proofs_dir=tmp_path, coverage=False)
    assert result.exit_code == 0
    (v,) = result.verdicts
    assert v.status is Status.PROVED and v.method != "all sizes", v.headline()
    if engine == "all-sizes":
        assert why in v.detail and "model.py:" in v.detail
    else:
        stage = {s["stage"]: s for s in result.stats.extra["auto"]}["all-sizes"]
        assert stage["proved"] == [] and why in stage["why_not"]


@pytest.mark.parametrize("engine", ["all-sizes", "auto"])
def test_a_check_the_small_size_does_not_need_is_not_proved_away_at_the_run_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 3)
    source = SLOT_OF_COUNT.replace("COORD", "(s.owner != None).count() + 0")
    system = _system(tmp_path, source)
    with pytest.raises(ModelError, match=r"mark\[5\]: index out of range 0..4"):
        run(system, "explicit", coverage=False)
    with pytest.raises(ModelError, match=r"mark\[5\]: index out of range 0..4"):
        run(system, engine, save_proof=True, proofs_dir=tmp_path, coverage=False)
    assert not list(tmp_path.glob("*all*.json"))


@pytest.mark.parametrize("coord", ["(s.owner != None).count()", "(s.owner != None).count() + 0"])
def test_a_count_as_an_index_of_an_index_space_is_read_as_any_number(
        tmp_path: Path, coord: str) -> None:
    system = _system(tmp_path, SLOT_OF_COUNT.replace("COORD", coord), {"pages": 4})
    (v,) = run(system, "all-sizes", proofs_dir=tmp_path, coverage=False).verdicts
    # no internal error; at six pages the index is out of range, so not for every size
    assert v.status is Status.PROVED and v.method != "all sizes", v.headline()
    assert "write mark[...]: not an index" in v.detail
    assert "read loosely: model.py:17: a count of ids used as a number" in v.detail


# id spaces named otherwise, and a size that is neither (kept at its value)
RENAMED = '''
from kvspec import Model, Page, Pages, Request, Requests, Size, action, emit, invariant, require


class Renamed(Model):
    properties = ("no-reuse-before-drain",)
    reqs = Requests(3)
    blocks = Pages(6)
    cap = Size(2, maximum=5)
    owner = blocks.var(reqs.optional, init=None)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        require((s.owner != None).count() < s.cap)  # noqa: E711
        s.owner[p] = r
        emit.alloc(r, p)

    @action
    def free(s, r: Request, p: Page):
        require(s.owner[p] == r)
        emit.free(r, p)
        s.owner[p] = None

    @invariant
    def within_cap(s):
        return (s.owner != None).count() <= s.cap  # noqa: E711
'''


def test_a_certificate_learnt_at_the_small_size_holds_where_it_says_and_nowhere_else(
        tmp_path: Path) -> None:
    from kvspec.proofs.certificate import check_certificate

    system = _system(tmp_path, RENAMED)
    result = run(system, "all-sizes", save_proof=True, proofs_dir=tmp_path, coverage=False)
    assert result.stats.extra["all-sizes"]["learnt_at"] == {"reqs": 2, "blocks": 4, "cap": 2}
    assert {v.method for v in result.verdicts} == {"all sizes"}
    (cert,) = tmp_path.glob("*.json")
    assert "reqs=all,blocks=all,cap=2" in cert.name
    for sizes, ok in (({}, True), ({"reqs": 1, "blocks": 1}, True),
                      ({"reqs": 5, "blocks": 9}, True), ({"cap": 4}, False)):
        check = check_certificate(cert, _system(tmp_path, RENAMED, sizes))
        assert check.ok is ok, (sizes, check.problems)
    assert "not at {'cap': 4}" in " ".join(check.problems)


def test_proved_for_every_size_at_a_size_means_its_certificate_re_checks_there(
        tmp_path: Path) -> None:
    """At its maximum number of requests the model has no reading for every size (it
    cannot be compiled with one more), though the small size has one."""
    from kvspec.proofs.certificate import check_certificate

    system = _system(tmp_path, RENAMED.replace("Requests(3)", "Requests(3, maximum=3)"))
    result = run(system, "all-sizes", save_proof=True, proofs_dir=tmp_path, coverage=False)
    assert {v.status for v in result.verdicts} == {Status.PROVED}
    every = list(tmp_path.glob("*all*.json"))
    assert bool(every) == any(v.method == "all sizes" for v in result.verdicts)
    for cert in every:
        check = check_certificate(cert, system)
        assert check.ok, check.problems


# decode after reject is allowed from four requests on, through a derived size
DERIVED_GATE = SIZE_THRESHOLD.replace("import Model,", "import Model, Size,").replace(
    "    rej = requests.var(bool, init=False)\n",
    "    gate = Size(derived=lambda sz: 1 if sz.requests >= 4 else 0)\n"
    "    rej = requests.var(bool, init=False)\n").replace("len(s.requests) >= 4", "s.gate + 0 >= 1")


@pytest.mark.parametrize("engine", ["all-sizes", "auto"])
def test_a_derived_size_that_opens_a_violation_above_the_small_size_is_violated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 3)
    small = run(_system(tmp_path, DERIVED_GATE), "explicit", coverage=False)
    assert [v.status for v in small.verdicts] == [Status.HOLDS]
    result = run(_system(tmp_path, DERIVED_GATE, {"requests": 4}), engine, save_proof=True,
                 proofs_dir=tmp_path, coverage=False)
    (v,) = result.verdicts
    assert v.status is Status.VIOLATED and v.trace is not None and len(v.trace) == 2
    assert not list(tmp_path.glob("*all*.json"))


def test_a_check_the_compiled_size_omits_is_read_at_every_size(tmp_path: Path) -> None:
    """At four pages the compiler leaves out the range check of `mark[count]` (a count of
    four pages is an index of five slots); from six pages on the same write is a model
    error. The reading for every size checks the index, so nothing is PROVED for every
    size at four pages either, and no certificate says so."""
    source = SLOT_OF_COUNT.replace("COORD", "(s.owner != None).count() + 0")
    at_four = run(_system(tmp_path, source, {"pages": 4}), "all-sizes", save_proof=True,
                  proofs_dir=tmp_path, coverage=False)
    (v,) = at_four.verdicts
    assert v.status is Status.PROVED and v.method != "all sizes", v.headline()
    assert "not for all sizes" in v.detail
    assert not list(tmp_path.glob("*all*.json"))
    with pytest.raises(ModelError, match=r"mark\[5\]: index out of range 0..4"):
        run(_system(tmp_path, source, {"pages": 6}), "explicit", coverage=False)
