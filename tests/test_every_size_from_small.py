"""A proof for every size learnt at the small size.

At a size larger than the small one (two requests, four pages), ``--engine all-sizes``
and ``auto``'s stage 2a learn the size-specific invariant at the small size and
generalise it: the cost does not grow with the run's size and the certificate
re-checks at every size. What it does not prove gets its verdict at the run's size —
in particular a property that holds at the small size but fails at the run's size is
VIOLATED there, never PROVED."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvspec.engines.auto as auto
from kvspec.proofs.certificate import KIND_ALL_SIZES, check_certificate
from kvspec.runner import run
from kvspec.verdict import Status
# LITERAL_ID has a literal page id: no reading for every size
from test_all_sizes import LITERAL_ID, POOL_CAP, _system, _write

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "models" / "single_node.py"

# holds while the pool has at most four pages (the small size), fails with five
POOL_OF_FOUR = POOL_CAP.replace("Pages(3)", "Pages(4)").replace("<= 3", "<= 4").replace(
    "at_most_three", "at_most_four")

# holds with at most two requests (the small size), fails with three
TWO_ACTIVE = '''
from kvspec import Model, Pages, Request, Requests, action, invariant, require


class TwoActive(Model):
    requests = Requests(2)
    pages = Pages(1)
    active = requests.var(bool, init=False)

    @action
    def start(s, r: Request):
        require(not s.active[r])
        s.active[r] = True

    @invariant
    def at_most_two_active(s):
        return s.active.count() <= 2
'''


@pytest.mark.parametrize("source, sizes, prop, steps", [
    (POOL_OF_FOUR, {"pages": 5}, "at-most-four-allocated", 5),
    (TWO_ACTIVE, {"requests": 3}, "at-most-two-active", 3),
])
@pytest.mark.parametrize("engine", ["all-sizes", "auto"])
def test_a_property_that_holds_at_the_small_size_only_is_violated_at_the_run_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, sizes: dict[str, int],
        prop: str, steps: int, engine: str) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 3)  # auto: past the explicit stage
    path = _write(tmp_path, "grows", source)
    small = run(_system(path), "explicit", coverage=False)
    assert [v.status for v in small.verdicts if v.prop == prop] == [Status.HOLDS]
    result = run(_system(path, sizes), engine, save_proof=True, proofs_dir=tmp_path,
                 coverage=False)
    (v,) = [v for v in result.verdicts if v.prop == prop]
    assert v.status is Status.VIOLATED and v.trace is not None and len(v.trace) == steps
    for cert in tmp_path.glob("*all*.json"):  # the other properties may be
        assert prop not in json.loads(cert.read_text())["properties"]
    if engine == "auto":
        stages = {s["stage"]: s for s in result.stats.extra["auto"]}
        assert prop not in stages["all-sizes"]["proved"]


def test_all_sizes_at_a_larger_size_learns_at_the_small_size(tmp_path: Path) -> None:
    system = _system(SINGLE, {"requests": 3, "pages": 6})
    result = run(system, "all-sizes", save_proof=True, proofs_dir=tmp_path, coverage=False)
    assert result.exit_code == 0
    assert all(v.headline().startswith("PROVED (all sizes") for v in result.verdicts)
    extra = result.stats.extra["all-sizes"]
    assert extra["learnt_at"] == {"requests": 2, "pages": 4, "capacity": 2, "max_need": 3}
    # only the all-sizes certificate is written: not the small size's, not this size's
    (cert,) = tmp_path.glob("*.json")
    assert "requests=all,pages=all" in cert.name
    for sizes in ({"requests": 3, "pages": 6}, {"requests": 7, "pages": 40}, None):
        check = check_certificate(cert, _system(SINGLE, sizes))
        assert check.ok and check.kind == KIND_ALL_SIZES, check.problems


def test_auto_beyond_small_state_spaces_proves_for_every_size_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 50)
    system = _system(SINGLE, {"requests": 3, "pages": 5})
    result = run(system, "auto", save_proof=True, proofs_dir=tmp_path, coverage=False)
    stages = [s["stage"] for s in result.stats.extra["auto"]]
    assert stages == ["explicit", "all-sizes"]
    assert all(v.status is Status.PROVED and v.method == "all sizes" for v in result.verdicts)
    (cert,) = tmp_path.glob("*.json")
    assert "requests=all,pages=all" in cert.name
    again = run(_system(SINGLE, {"requests": 5, "pages": 12}), "auto", proofs_dir=tmp_path,
                coverage=False)
    assert {v.headline() for v in again.verdicts} == {
        "PROVED (certificate re-checked, all sizes)"}


def test_auto_at_the_small_size_or_with_the_stage_off_goes_on_size_specific(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 50)
    at_small = run(_system(SINGLE), "auto", proofs_dir=tmp_path, coverage=False)
    assert "all-sizes" not in [s["stage"] for s in at_small.stats.extra["auto"]]
    monkeypatch.setattr(auto, "EVERY_SIZE_SECONDS", 0)
    off = run(_system(SINGLE, {"requests": 3, "pages": 5}), "auto", proofs_dir=tmp_path,
              coverage=False)
    assert "all-sizes" not in [s["stage"] for s in off.stats.extra["auto"]]
    assert all(v.status is Status.PROVED and v.method != "all sizes" for v in off.verdicts)


def test_auto_says_which_line_has_no_reading_for_every_size_and_proves_size_specific(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "SMALL_STATES", 1)
    path = _write(tmp_path, "outside", LITERAL_ID)
    result = run(_system(path, {"requests": 3}), "auto", proofs_dir=tmp_path, coverage=False)
    stages = {s["stage"]: s for s in result.stats.extra["auto"]}
    assert stages["all-sizes"]["proved"] == []
    assert "outside.py:12" in stages["all-sizes"]["why_not"]
    assert all(v.status is Status.PROVED and v.method != "all sizes" for v in result.verdicts)


# fails with four pages (the small size), holds from five on
SOME_PAGE_FREE = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, invariant, require


class CapFour(Model):
    requests = Requests(1)
    pages = Pages(5)
    owner = pages.var(requests.optional, init=None)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None and (s.owner != None).count() < 4)  # noqa: E711
        s.owner[p] = r
        emit.alloc(r, p)

    @invariant
    def some_page_free(s):
        return (s.owner == None).any()  # noqa: E711
'''


def test_a_property_violated_at_the_small_size_is_decided_at_the_run_size_and_says_why(
        tmp_path: Path) -> None:
    path = _write(tmp_path, "cap", SOME_PAGE_FREE)
    result = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False)
    (v,) = [v for v in result.verdicts if v.prop == "some-page-free"]
    assert v.status is Status.PROVED and v.method != "all sizes"
    assert "not for all sizes: violated at requests=1, pages=4" in v.detail
    assert result.stats.extra["all-sizes"]["small_verdicts"]["some-page-free"] == "VIOLATED"


# the action read before the invariant has monitor violation conditions (the
# property monitors' checks at alloc): the invariant's reading must not inherit them
AFTER_A_VIOLATING_ACTION = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, invariant, require


class AfterViolating(Model):
    requests = Requests(2)
    pages = Pages(3)
    owner = pages.var(requests.optional, init=None)
    used = pages.var(bool, init=False)

    @action
    def alloc(s, r: Request, p: Page):
        s.owner[p] = r
        s.used[p] = True
        emit.alloc(r, p)

    @invariant
    def owned_pages_are_used(s):
        return all(s.owner[p] is None or s.used[p] for p in s.pages)
'''


def test_an_invariant_is_read_without_the_last_actions_monitor_violations(
        tmp_path: Path) -> None:
    path = _write(tmp_path, "after", AFTER_A_VIOLATING_ACTION)
    result = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False)
    by_prop = {v.prop: v for v in result.verdicts}
    assert by_prop["owned-pages-are-used"].headline().startswith("PROVED (all sizes"), \
        by_prop["owned-pages-are-used"].headline()
    assert all(v.method == "all sizes" for v in result.verdicts)
