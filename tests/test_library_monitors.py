"""The opt-in library monitors (the halves of no-reuse-before-drain, source pages,
metadata slots, acks) and ``retire``, against a direct reading of their sentences.

Hypothesis draws an event script; a model that emits exactly that script, one event per
step, is checked with the explicit engine; each property must fail exactly at the first
event its sentence forbids (the shortest counterexample is that prefix), or hold."""
from __future__ import annotations

import itertools
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


#: per pool: (allocate, free, post, complete, use) event kinds
POOLS = {"decode": ("alloc", "free", "post_write", "land_write", "read"),
         "source": ("src_alloc", "src_free", "src_read", "src_read_done", None),
         "slot": ("slot_alloc", "slot_free", "slot_write", "slot_land", "slot_read")}


@st.composite
def engine_like(draw: st.DrawFn, pool: str) -> Script:
    """A script an engine could emit: pages are allocated before use and freed by their
    owner, writes complete only after they were posted — but frees, reuses and
    completions interleave freely (where the properties bite), with acks, retires and
    rejections mixed in, and now and then an event with no precondition at all."""
    alloc, free, post, done, use = POOLS[pool]
    owner: list[int | None] = [None] * P
    last: list[int] = [0] * P          # the page's previous owner
    posted: list[tuple[int, int]] = []
    script: Script = []
    for _ in range(draw(st.integers(1, 7))):
        # mostly page 0: the interleavings that matter are on one page
        r, p = draw(st.integers(0, R - 1)), 1 if draw(st.integers(0, 3)) == 0 else 0
        options = [("any", None)] if draw(st.integers(0, 9)) == 0 else []
        if owner[p] is None:
            options.append(("alloc", alloc))
        if owner[p] is not None:
            options += [("free", free), ("post", post)] + ([("use", use)] if use else [])
        if posted:
            options.append(("done", done))
        if pool == "decode":
            options += [("ack", "ack"), ("retire", "retire")]
        what, kind = draw(st.sampled_from(options))
        if what == "any":
            kind = draw(st.sampled_from(KINDS))
        elif what == "alloc":
            if draw(st.integers(0, 2)) > 0:     # mostly a reuse by another request
                r = (last[p] + 1) % R
            owner[p] = last[p] = r
        elif what in ("free", "post", "use"):
            r = owner[p]
            if what == "free":
                owner[p] = None
            elif what == "post":
                posted.append((r, p))
        elif what == "done":
            r, p = posted.pop(draw(st.integers(0, len(posted) - 1)))
        assert kind is not None and r is not None
        script.append((kind, r, p))
    return script


SCRIPTS_ANY = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, R - 1),
                                 st.integers(0, P - 1)), min_size=1, max_size=9)


def check_script(script: Script, tmp_path: Path) -> None:
    path = tmp_path / "script.py"
    path.write_text(script_model(script))
    assert verdicts(path) == reference(script), script


@pytest.mark.parametrize("pool", sorted(POOLS))
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_monitors_fail_at_the_first_forbidden_event(pool: str, data: st.DataObject,
                                                    tmp_path: Path,
                                                    every_property: None) -> None:
    check_script(data.draw(engine_like(pool)), tmp_path)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=SCRIPTS_ANY)
def test_monitors_on_arbitrary_event_scripts(script: Script, tmp_path: Path,
                                             every_property: None) -> None:
    check_script(script, tmp_path)


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


#: pool -> the event kinds of a model that may emit any of them at any time
FREE_POOLS = {"decode": ["alloc", "free", "post_write", "land_write", "drain", "ack", "retire"],
              "source": ["src_alloc", "src_free", "src_read", "src_read_done"],
              "slot": ["slot_alloc", "slot_free", "slot_write", "slot_land", "slot_read"]}
#: pool -> the properties it can violate
FREE_PROPS = {"decode": [library.NRUW, library.NLAF, library.AAD, library.NRBD],
              "source": [library.NSRR], "slot": [library.NSRD]}


def free_model(kinds: list[str]) -> str:
    lines = ["from kvspec import Model, Page, Pages, Request, Requests, action, emit, var", "",
             "", "class Free(Model):", "    requests = Requests(2)", "    pages = Pages(1)",
             "    tick = var(bool, init=False)"]
    for kind in kinds:
        args, call = ("r: Request, p: Page", "r, p") if EVENT_KINDS[kind] else ("r: Request",
                                                                              "r")
        lines += ["", "    @action", f"    def {kind}_(s, {args}):",
                  "        s.tick = not s.tick", f"        emit.{kind}({call})"]
    return "\n".join(lines) + "\n"


def shortest_by_reference(kinds: list[str], prop: str, bound: int) -> int | None:
    """Every event script on one page up to ``bound`` events, read by the reference: the
    length of the shortest that violates ``prop``."""
    letters = [(k, r, 0) for k in kinds for r in range(R)]
    for n in range(1, bound + 1):
        if any(reference(list(script))[prop] == n
               for script in itertools.product(letters, repeat=n)):
            return n
    return None


@pytest.mark.parametrize("pool", sorted(FREE_POOLS))
def test_every_counterexample_is_a_real_violation(pool: str, tmp_path: Path,
                                                  every_property: None) -> None:
    """A model that may emit any event of a pool at any time: each property of the pool
    is violated, and the engine's counterexample, read by the reference, violates it
    at its last event and not before."""
    path = tmp_path / "free.py"
    path.write_text(free_model(FREE_POOLS[pool]))
    system = compile_model(load_model(path), {}, FREE_PROPS[pool])
    out = explore(system)
    for v in out.verdicts:
        assert v.status is Status.VIOLATED and v.trace is not None, v.prop
        script = [(e.kind, e.request, e.page if e.page is not None else 0)
                  for step in v.trace.steps for e in step.events]
        first = reference(script)
        assert first[v.prop] == len(script), (v.prop, script, first)
        assert len(v.trace.steps) == shortest_by_reference(FREE_POOLS[pool], v.prop, 4)
