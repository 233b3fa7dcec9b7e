"""The orbit check renames every slot an id indexes, whatever the array's shape: a
request's per-rank flags (``failed[r, k]``, a ``request*ranks`` array laid out column
by column) move with the request, as ``page_inflight_by[p, r]`` moves with both its
page and its request. A renaming that left them in place made an invariant that is
not inductive pass the check."""
from __future__ import annotations

import re

import pytest
import z3
from conftest import system_of
from hypothesis import given, settings
from hypothesis import strategies as st

from kvspec.lang.system import System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.proofs.clauses import var_names
from kvspec.proofs.orbits import Renaming, check_orbits

SIZES = {"requests": 3, "pages": 4, "ranks": 2}


@pytest.fixture(scope="module")
def tp_ranks() -> System:
    return system_of("tp_ranks.py", SIZES, model_class="ReleaseAfterEveryRankDrained")


def _renamed_label(label: str, system: System, perm: dict[str, tuple[int, ...]]) -> str:
    """``label`` (``failed[r1,0]``, ``page_inflight_by[2,r1]``, ``owner[3]``) with its
    ids renamed, read from the text alone."""
    m = re.fullmatch(r"([^\[]+)\[(.*)\]", label)
    if m is None:
        return label
    name, inside = m.groups()
    axes = system.schema.by_name[name].axes
    parts = []
    for axis, text in zip(axes, inside.split(",")):
        if axis == REQUEST and REQUEST in perm:
            parts.append(f"r{perm[REQUEST][int(text[1:])]}")
        elif axis == PAGE and PAGE in perm:
            parts.append(str(perm[PAGE][int(text)]))
        else:
            parts.append(text)
    return f"{name}[{','.join(parts)}]"


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_slot_moves_as_its_name_says(tp_ranks: System, data: st.DataObject) -> None:
    ren = Renaming(tp_ranks, (True, True))
    perm = {REQUEST: tuple(data.draw(st.permutations(range(SIZES["requests"])))),
            PAGE: tuple(data.draw(st.permutations(range(SIZES["pages"]))))}
    names = var_names(tp_ranks.state_vars())
    index = {n: i for i, n in enumerate(names)}
    for s, name in enumerate(names):
        assert names[ren.slot(s, perm)] == _renamed_label(name, tp_ranks, perm), name
        assert index[_renamed_label(name, tp_ranks, perm)] == ren.slot(s, perm)


def test_a_per_rank_flag_is_renamed_with_its_request(tp_ranks: System) -> None:
    ren = Renaming(tp_ranks, (True, False))
    names = var_names(tp_ranks.state_vars())
    at = names.index("failed[r0,1]")
    assert ren.ids(at) == {REQUEST: 0}
    assert names[ren.slot(at, {REQUEST: (2, 0, 1)})] == "failed[r2,1]"


def test_a_clause_about_one_requests_rank_is_checked_for_every_request(
        tp_ranks: System) -> None:
    """``not failed[r1, 0]`` stands for every request's rank 0; ``rank_fails(r0, 0)``
    makes it false, so the invariant is not inductive (it was accepted when the
    renaming left ``failed`` in place and no representative action wrote r1's flag)."""
    cur = {str(v): v for v in tp_ranks.state_vars()}
    report = check_orbits(tp_ranks, [z3.Not(cur["failed[r1,0]"])], ["not failed[r1,0]"], [],
                          (True, True))
    assert not report.ok
    assert "rank_fails(r0, ranks 0) breaks it" in report.problems[0]
    assert report.cti is not None
    assert report.orbit_instances == SIZES["requests"]


SQUARE = '''
from kvspec import Model, Ranks, Request, Requests, Pages, action, require


class Square(Model):
    properties = ()
    requests = Requests(3)
    pages = Pages(1)
    ranks = Ranks(2)
    link = ranks.by(ranks).var(bool, init=False)
    done = requests.var(bool, init=False)

    @action
    def connect(s, a: ranks.id, b: ranks.id):
        require(not s.link[a, b])
        s.link[a, b] = True

    @action
    def fin(s, r: Request):
        require(s.link[0, 1] and not s.done[r])
        s.done[r] = True
'''


def test_an_array_indexed_twice_by_an_index_space_is_not_renamed(tmp_path) -> None:
    """``ranks.by(ranks)`` names no request or page: it stays, and the orbit check
    applies (it refused such models before)."""
    path = tmp_path / "square.py"
    path.write_text(SQUARE)
    system = system_of(path)
    cur = {str(v): v for v in system.state_vars()}
    holds = z3.Or(z3.Not(cur["done[r0]"]), cur["link[0,1]"])
    report = check_orbits(system, [holds], ["done only after link"], [], (True, False))
    assert report.ok, report.problems
    assert report.orbit_instances == 3
    broken = check_orbits(system, [z3.Not(cur["done[r2]"])], ["never done"], [],
                          (True, False))
    assert not broken.ok and "fin(r0) breaks it" in broken.problems[0]
