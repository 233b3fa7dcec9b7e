"""All-sizes proofs of models that tie ranges to the number of ids or whose loops depend
on the order of the ids: sizes and size-dependent bounds are symbols, order-dependent
loops and loose counts are over-approximated. What the proof says must still be true at
every size (checked against the explicit engine at larger sizes), every concrete step
must be one of the reading's steps, and where the looser reading cannot prove a
property the verdict stays size-specific and names the lines it read loosely."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from kvspec.lang.errors import ModelError
from kvspec.lang.system import compile_model
from kvspec.proofs.certificate import check_certificate
from kvspec.proofs.parametric.induction import check_invariant
from kvspec.proofs.parametric.model import parametric_model
from kvspec.runner import run
from kvspec.verdict import Status
from conftest import certificate_system
from test_all_sizes import PARAM_THRESHOLD, SIZED_TYPE, _lockstep, _system, _write

ROOT = Path(__file__).resolve().parent.parent
LOWEST_FREE = ROOT / "models" / "lowest_free.py"

# a loop that numbers the pages in order: the positions reach pages - 1
CARRIED = '''
from kvspec import Int, Model, Pages, Request, Requests, action, invariant, require


class Carried(Model):
    requests = Requests(1)
    pages = Pages(2)
    pos = pages.var(Int(0, 7), init=0)
    done = requests.var(bool, init=False)

    @action
    def number(s, r: Request):
        require(not s.done[r])
        k = 0
        for p in s.pages:
            s.pos[p] = k
            k = k + 1
        s.done[r] = True

    @invariant
    def positions_below_three(s):
        return all(s.pos[p] <= 2 for p in s.pages)
'''

# first-free allocation with `break`: a request holds a page only once it asked for one
FIRST_FREE = '''
from kvspec import Model, Pages, Request, Requests, action, emit, invariant, require


class FirstFree(Model):
    properties = ()
    requests = Requests(2)
    pages = Pages(2)
    asked = requests.var(bool, init=False)
    owner = pages.var(requests.optional, init=None)

    @action
    def grab(s, r: Request):
        require(not s.asked[r])
        s.asked[r] = True
        for p in s.pages:
            if s.owner[p] is None:
                s.owner[p] = r
                emit.alloc(r, p)
                break

    @invariant
    def owners_asked(s):
        return all(s.owner[p] is None or s.asked[s.owner[p]] for p in s.pages)
'''

# the alarm fires only with more than nine free pages (a count beyond the exact range)
BIG_COUNT = '''
from kvspec import Model, Pages, Request, Requests, action, invariant, require, var


class BigCount(Model):
    properties = ()
    requests = Requests(1)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)
    alarm = var(bool, init=False)

    @action
    def ring(s):
        require(s.owner.is_none().count() > 9)
        s.alarm = True

    @invariant
    def quiet(s):
        return not s.alarm
'''

# two bound functions that share a name are two symbols: `low` is below `high`, so
# copying x (up to high) into y (up to low) leaves y's range at every size
SAME_NAME = '''
from kvspec import Int, Model, Pages, Requests, action, var


def bound(extra):
    def top(sizes):
        return sizes["pages"] + extra
    return top


high, low = bound(3), bound(0)


class SameName(Model):
    requests = Requests(1)
    pages = Pages(2)
    x = var(Int(0, high), init=0)
    y = var(Int(0, low), init=0)

    @action
    def set_x(s, n: Int(0, high)):
        s.x = n

    @action
    def copy(s):
        s.y = s.x
'''


def _all_sizes(path: Path, tmp_path: Path, **kw: object) -> dict[str, object]:
    res = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False, **kw)  # type: ignore[arg-type]
    return {v.prop: v for v in res.verdicts}


def _explicit(path: Path, sizes: dict[str, int]) -> dict[str, Status]:
    res = run(_system(path, sizes), "explicit", coverage=False, max_states=200_000)
    return {v.prop: v.status for v in res.verdicts}


def test_a_carried_counter_is_read_loosely_and_proves_nothing_false(tmp_path: Path) -> None:
    path = _write(tmp_path, "carried", CARRIED)
    model = parametric_model(_system(path))
    assert [a.where.rsplit("/", 1)[-1] for a in model.approximations] == ["carried.py:15"]
    assert "carries 'k'" in model.approximations[0].what
    v = _all_sizes(path, tmp_path)["positions-below-three"]
    assert v.status is Status.PROVED and v.method != "all sizes"  # type: ignore[attr-defined]
    assert "carried.py:15" in v.detail  # type: ignore[attr-defined]
    assert _explicit(path, {"pages": 4})["positions-below-three"] is Status.VIOLATED


def test_first_free_allocation_with_break_is_proved_for_every_size(tmp_path: Path) -> None:
    path = _write(tmp_path, "first_free", FIRST_FREE)
    v = _all_sizes(path, tmp_path)["owners-asked"]
    assert v.method == "all sizes", v.headline()  # type: ignore[attr-defined]
    assert "over-approximating first_free.py:16" in v.detail  # type: ignore[attr-defined]
    for sizes in ({"requests": 3, "pages": 2}, {"requests": 2, "pages": 4}):
        assert _explicit(path, sizes)["owners-asked"] is Status.HOLDS


def test_a_count_beyond_the_exact_range_is_read_as_either_outcome(tmp_path: Path) -> None:
    path = _write(tmp_path, "big_count", BIG_COUNT)
    v = _all_sizes(path, tmp_path)["quiet"]
    assert v.status is Status.PROVED and v.method != "all sizes"  # type: ignore[attr-defined]
    assert "big_count.py:14" in v.detail  # type: ignore[attr-defined]
    assert _explicit(path, {"pages": 10})["quiet"] is Status.VIOLATED


def test_a_range_up_to_the_pool_size_is_a_symbol(tmp_path: Path) -> None:
    path = _write(tmp_path, "sized", SIZED_TYPE)
    verdicts = _all_sizes(path, tmp_path)
    assert verdicts and all(v.method == "all sizes" for v in verdicts.values())  # type: ignore[attr-defined]
    # one more step would leave the range of a one-page pool: not for every size
    grows = _write(tmp_path, "grows", SIZED_TYPE.replace("< 1)", "< 2)"))
    assert all(v.method != "all sizes" for v in _all_sizes(grows, tmp_path).values())  # type: ignore[attr-defined]
    with pytest.raises(ModelError):
        run(_system(grows, {"pages": 1}), "explicit", coverage=False)


def test_a_bound_computed_from_the_sizes_is_a_symbol(tmp_path: Path) -> None:
    path = _write(tmp_path, "param", PARAM_THRESHOLD)
    v = _all_sizes(path, tmp_path)["no-decode-after-rejection"]
    assert v.status is Status.PROVED and v.method != "all sizes"  # type: ignore[attr-defined]
    assert _explicit(path, {"requests": 4})["no-decode-after-rejection"] is Status.VIOLATED


def test_bound_functions_with_one_name_are_different_symbols(tmp_path: Path) -> None:
    path = _write(tmp_path, "same_name", SAME_NAME)
    model = parametric_model(_system(path))
    assert sorted(model.sizes.terms) == ["bound.top", "bound.top2"]  # type: ignore[union-attr]
    res = check_invariant(model, [], [], houdini=False)
    assert res.problems == ["type: y in 0..bound.top2: not preserved by copy"]
    with pytest.raises(ModelError, match="same_name.py:26: write y"):
        run(_system(path), "explicit", coverage=False)


def test_lowest_free_is_proved_for_every_size_with_a_certificate(tmp_path: Path) -> None:
    # from the shipped size-specific certificate, as `kvspec verify --engine all-sizes` does
    own = "lowest_free.LowestFreePD.requests=2,pages=4.json"
    (tmp_path / own).write_text((ROOT / "proofs" / own).read_text())
    res = run(_system(LOWEST_FREE), "all-sizes", proofs_dir=tmp_path, coverage=False,
              save_proof=True)
    for v in res.verdicts:
        assert v.method == "all sizes", v.headline()
        assert "over-approximating lowest_free.py:90, lowest_free.py:92" in v.detail
    (cert,) = tmp_path.glob("*requests=all,pages=all.json")
    for sizes in ({"requests": 2, "pages": 4}, {"requests": 3, "pages": 8}):
        check = check_certificate(cert, _system(LOWEST_FREE, sizes))
        assert check.ok and check.kind == "all-sizes", check


@pytest.mark.parametrize("sizes", [{"requests": 2, "pages": 3}, {"requests": 2, "pages": 4}])
def test_every_concrete_step_of_lowest_free_is_a_parametric_step(sizes: dict[str, int]) -> None:
    assert _lockstep(_system(LOWEST_FREE, sizes), random.Random(3), 8, per_state=6) > 10


def test_every_concrete_step_with_break_is_a_parametric_step(tmp_path: Path) -> None:
    path = _write(tmp_path, "first_free", FIRST_FREE)
    assert _lockstep(_system(path, {"requests": 2, "pages": 3}), random.Random(5), 10, per_state=6) > 10


# holds while `limit` is at most 2: proved for every number of ids at limit=2, never
# for every value of limit
LIMIT = '''
from kvspec import Int, Model, Pages, Request, Requests, Size, action, invariant, require


class Limit(Model):
    properties = ()
    requests = Requests(2)
    pages = Pages(1)
    limit = Size(2)
    used = requests.var(Int(0, 5), init=0)

    @action
    def grow(s, r: Request):
        require(s.used[r] < s.limit)
        s.used[r] = s.used[r] + 1

    @invariant
    def at_most_two(s):
        return all(s.used[r] <= 2 for r in s.requests)
'''


def test_other_size_parameters_are_proved_for_every_value_where_they_can_be(
        tmp_path: Path) -> None:
    single = ROOT / "models" / "single_node.py"
    res = run(_system(single), "all-sizes", proofs_dir=tmp_path, coverage=False,
              save_proof=True)
    for v in res.verdicts:
        assert v.method == "all sizes" and "every capacity, max_need" in v.detail, v.headline()
    (cert,) = tmp_path.glob("*requests=all,pages=all,capacity=all,max_need=all.json")
    for sizes in ({"capacity": 2, "max_need": 3}, {"capacity": 5, "max_need": 7, "pages": 9}):
        check = check_certificate(cert, _system(single, sizes))
        assert check.ok and check.kind == "all-sizes", check


def test_a_property_that_needs_a_small_parameter_keeps_its_value(tmp_path: Path) -> None:
    path = _write(tmp_path, "limit", LIMIT)
    res = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False,
              save_proof=True)
    (v,) = res.verdicts
    assert v.method == "all sizes" and "every limit" not in v.detail, v.headline()
    assert [p.name for p in tmp_path.glob("*.json") if "=all" in p.name] == \
        ["limit.Limit.requests=all,pages=all,limit=2.json"]
    assert _explicit(path, {"limit": 3})["at-most-two"] is Status.VIOLATED


ALL_SIZES_STORED = sorted((ROOT / "proofs").glob("*=all*.json"))


@pytest.mark.parametrize("cert", ALL_SIZES_STORED, ids=[p.name.split(".")[0]
                                                        for p in ALL_SIZES_STORED])
def test_stored_all_sizes_certificates_re_check_at_other_sizes(cert: Path) -> None:
    system = certificate_system(cert)
    more = {k: v + 2 for k, v in system.sizes.items() if k in ("requests", "pages")}
    for sizes in ({}, more):
        other = compile_model(system.loaded, {**system.sizes, **sizes} if sizes else None)
        check = check_certificate(cert, other)
        assert check.ok and check.kind == "all-sizes", check.problems
        assert check.properties == [p.name for p in other.properties]


# each decides at compile time what changes with the sizes: a folded comparison of a
# size parameter, a folded len() next to one that is kept, a derived size's threshold
THRESHOLDS = """
from kvspec import Int, Model, Pages, Request, Requests, Size, action, emit, require


class Threshold(Model):
    properties = ("no-decode-after-rejection",)
    requests = Requests(2)
    pages = Pages(2)
    limit = Size(2)
    big = Size(derived=lambda sz: 1 if sz["pages"] >= 6 else 0)
    rej = requests.var(bool, init=False)
    n = requests.var(Int(0, 3), init=0)

    @action
    def reject(s, r: Request):
        require(not s.rej[r])
        s.rej[r] = True
        emit.reject(r)

    @action
    def decode(s, r: Request):
        require(not s.rej[r] or CONDITION)
        emit.decode(r)
"""


@pytest.mark.parametrize("condition, larger, every", [
    ("s.limit >= 4", {"limit": 4}, False),
    ("len(s.requests) >= 4 or s.n[r] > len(s.pages)", {"requests": 4}, False),
    ("s.big == 1", {"pages": 6}, False),
])
def test_a_size_decided_at_compile_time_is_never_read_for_every_value(
        tmp_path: Path, condition: str, larger: dict[str, int], every: bool) -> None:
    path = _write(tmp_path, "threshold", THRESHOLDS.replace("CONDITION", condition))
    (v,) = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False).verdicts
    assert "every limit" not in v.detail, v.headline()
    if "big" in condition:  # the derived size is read for every value only where unused
        assert "every big" not in v.detail, v.headline()
    if "limit" not in condition:  # the other two change with the number of ids
        assert v.method != "all sizes", v.headline()
        assert "threshold.py:22" in v.detail and "decided at compile time" in v.detail
    assert _explicit(path, larger)["no-decode-after-rejection"] is Status.VIOLATED


@pytest.mark.parametrize("cls, sizes", [("LeaseValidated", {"requests": 3, "pages": 4}),
                                        ("SlotHeldUntilDrained", {"requests": 3, "pages": 3})])
def test_at_most_one_page_per_request_lifts_to_every_size(
        tmp_path: Path, cls: str, sizes: dict[str, int]) -> None:
    """`count(reading == r) <= 1` of a size-specific invariant (a relation between two
    pages) becomes `for all distinct p, q: not (reading[p] == r and reading[q] == r)`."""
    from conftest import system_of

    file = "source_free.py" if cls == "LeaseValidated" else "aux_slot.py"
    res = run(system_of(file, model_class=cls), "all-sizes", proofs_dir=tmp_path,
              coverage=False, save_proof=True)
    assert all(v.method == "all sizes" for v in res.verdicts), [v.headline()
                                                                for v in res.verdicts]
    (cert,) = tmp_path.glob("*=all*.json")
    bigger = system_of(file, sizes, model_class=cls)
    check = check_certificate(cert, bigger)
    assert check.ok, check.problems
    explicit = run(bigger, "explicit", coverage=False)
    assert all(v.status is Status.HOLDS for v in explicit.verdicts)
