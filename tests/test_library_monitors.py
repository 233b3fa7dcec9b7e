"""The opt-in library monitors (the halves of no-reuse-before-drain, source pages,
metadata slots, acks) and ``retire``, against a direct reading of their sentences.

Hypothesis draws an event script; a model that emits exactly that script, one event per
step, is checked with the explicit engine; each property must fail exactly at the first
event its sentence forbids (the shortest counterexample is that prefix), or hold."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvspec.engines.explicit import explore
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.props import library
from kvspec.props.events import EVENT_KINDS
from kvspec.verdict import Status

R, P = 2, 2
K = library.INFLIGHT_BOUND
TOP = K + 1
CHECKED = [library.NRUW, library.NLAF, library.NSRR, library.NSRD, library.AAD,
           library.NDAR, library.NRBD]
KINDS = ["alloc", "free", "post_write", "land_write", "drain", "ack", "retire", "reject",
         "read", "src_alloc", "src_read", "src_read_done", "src_free", "slot_alloc",
         "slot_write", "slot_land", "slot_read", "slot_free"]

Script = list[tuple[str, int, int]]


def reference(script: Script) -> dict[str, int | None]:
    """Property -> the 1-based index of the first event that violates it (None: holds)."""
    owner: list[int | None] = [None] * P
    infl = [[0] * R for _ in range(P)]
    src_owner: list[int | None] = [None] * P
    reading = [[0] * R for _ in range(P)]
    slot_owner: list[int | None] = [None] * P
    slot_written: list[int | None] = [None] * P
    slot_infl = [[0] * R for _ in range(P)]
    acked = [False] * R
    rejected = [False] * R
    first: dict[str, int | None] = {p: None for p in CHECKED}

    def fail(prop: str, i: int) -> None:
        if first[prop] is None:
            first[prop] = i

    def up(c: list[int], r: int) -> None:
        if c[r] < TOP:
            c[r] += 1

    def down(c: list[int], r: int) -> None:
        if 0 < c[r] < TOP:
            c[r] -= 1

    for i, (kind, r, p) in enumerate(script, 1):
        others = any(infl[p][w] > 0 for w in range(R) if w != r)
        if kind == "alloc":
            if others:
                fail(library.NRUW, i)
                fail(library.NRBD, i)
            owner[p] = r
        elif kind == "free":
            owner[p] = None
        elif kind == "post_write":
            if acked[r]:
                fail(library.AAD, i)
            up(infl[p], r)
        elif kind in ("land_write", "drain"):
            if kind == "land_write" and owner[p] != r:
                fail(library.NLAF, i)
                fail(library.NRBD, i)
            down(infl[p], r)
        elif kind == "ack":
            if any(infl[q][r] > 0 for q in range(P)):
                fail(library.AAD, i)
            acked[r] = True
        elif kind == "retire":
            acked[r] = False
            rejected[r] = False
        elif kind == "reject":
            rejected[r] = True
        elif kind == "read":
            if rejected[r]:
                fail(library.NDAR, i)
        elif kind in ("src_alloc", "src_free"):
            if any(reading[p]):
                fail(library.NSRR, i)
            src_owner[p] = r if kind == "src_alloc" else None
        elif kind == "src_read":
            if src_owner[p] != r:
                fail(library.NSRR, i)
            up(reading[p], r)
        elif kind == "src_read_done":
            down(reading[p], r)
        elif kind == "slot_alloc":
            if any(slot_infl[p][w] > 0 for w in range(R) if w != r):
                fail(library.NSRD, i)
            slot_owner[p] = r
            slot_written[p] = None
        elif kind == "slot_free":
            slot_owner[p] = None
        elif kind == "slot_write":
            up(slot_infl[p], r)
        elif kind == "slot_land":
            if slot_owner[p] != r:
                fail(library.NSRD, i)
            down(slot_infl[p], r)
            slot_written[p] = r
        elif kind == "slot_read":
            if slot_owner[p] != r or any(slot_infl[p]) or slot_written[p] != r:
                fail(library.NSRD, i)
    return first


def script_model(script: Script) -> str:
    lines = ["from kvspec import Int, Model, Pages, Requests, action, emit, require, var", "",
             "", "class Script(Model):", "    requests = Requests(2)", "    pages = Pages(2)",
             f"    step = var(Int(0, {len(script)}), init=0)"]
    for i, (kind, r, p) in enumerate(script):
        args = f"{r}, {p}" if EVENT_KINDS[kind] else f"{r}"
        lines += ["", "    @action", f"    def e{i}(s):", f"        require(s.step == {i})",
                  f"        s.step = {i + 1}", f"        emit.{kind}({args})"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def every_property() -> Iterator[None]:
    with mock.patch.object(library, "LIBRARY", library.ALL):
        yield


def verdicts(path: Path) -> dict[str, int | None]:
    system = compile_model(load_model(path), {}, CHECKED)
    out = explore(system)
    got: dict[str, int | None] = {}
    for v in out.verdicts:
        assert v.status in (Status.HOLDS, Status.VIOLATED), v
        got[v.prop] = len(v.trace.steps) if v.status is Status.VIOLATED else None
    return got


EVENTS = st.tuples(st.sampled_from(KINDS), st.integers(0, R - 1), st.integers(0, P - 1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(EVENTS, min_size=1, max_size=9))
def test_monitors_fail_at_the_first_forbidden_event(script: Script, tmp_path: Path,
                                                    every_property: None) -> None:
    path = tmp_path / "script.py"
    path.write_text(script_model(script))
    assert verdicts(path) == reference(script), script


SCRIPTS: dict[str, Script] = {
    # a write of r0 in flight, the page freed and handed to r1, the write lands
    "reuse-then-land": [("alloc", 0, 0), ("post_write", 0, 0), ("free", 0, 0),
                        ("alloc", 1, 0), ("land_write", 0, 0)],
    # a source page freed under its READ, then reused
    "source": [("src_alloc", 0, 1), ("src_read", 0, 1), ("src_free", 0, 1),
               ("src_alloc", 1, 1), ("src_read_done", 0, 1)],
    # an ack while the write is in flight, a post after the ack, retire forgets it
    "ack": [("alloc", 0, 0), ("post_write", 0, 0), ("ack", 0, 0), ("land_write", 0, 0),
            ("retire", 0, 0), ("post_write", 0, 1)],
    # a slot read for the request whose record did not land in it
    "slot": [("slot_alloc", 0, 0), ("slot_write", 0, 0), ("slot_free", 0, 0),
             ("slot_alloc", 1, 0), ("slot_land", 0, 0), ("slot_read", 1, 0)],
    # a rejected id, retired, decodes again
    "retire": [("reject", 0, 0), ("retire", 0, 0), ("read", 0, 0), ("reject", 1, 0),
               ("read", 1, 0)],
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_hand_written_scripts(name: str, tmp_path: Path, every_property: None) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(script_model(SCRIPTS[name]))
    got = verdicts(path)
    assert got == reference(SCRIPTS[name])
    assert any(n is not None for n in got.values())


def test_halves_fail_where_the_group_does(tmp_path: Path, every_property: None) -> None:
    path = tmp_path / "s.py"
    path.write_text(script_model(SCRIPTS["reuse-then-land"]))
    got = verdicts(path)
    assert got[library.NRUW] == 4 and got[library.NLAF] == 5 and got[library.NRBD] == 4
