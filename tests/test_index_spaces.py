"""Declared index spaces (``Ranks``, ``Handles``, ``Slots``, ``Index``) and
two-dimensional state (``requests.by(ranks)``) in every interpretation.

On random models over them (:mod:`indexgen`): the concrete and the symbolic steps
agree state by state (the integer and the bit-vector images), the native search
reports exactly what the Python search reports, symmetry reduction changes only
the number of stored states (the concrete count it reconstructs, the verdicts and
the shortest lengths are those of the search without it), and BMC finds every
violation at the explicit search's length. The rejections name file and line.
"""
from __future__ import annotations

import ctypes
import json
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from indexgen import random_index_model
from test_differential import (check_bv_steps, check_steps, compile_source, forget,
                               sample_states)
from test_native import _canon_lib, both

from kvspec.engines.bmc import run_bmc
from kvspec.engines.explicit import Limits, explore
from kvspec.engines.native import available
from kvspec.lang.errors import ModelError
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.verdict import Status

LIMITS = Limits(max_states=5_000)


def _verdicts(out: Any) -> dict[str, tuple[str, int | None]]:
    return {v.prop: (v.status.value, None if v.trace is None else len(v.trace))
            for v in out.verdicts}


@pytest.mark.parametrize("seed", range(10))
def test_concrete_and_symbolic_steps_agree(seed: int, tmp_path: Path) -> None:
    model = random_index_model(seed)
    _, system = compile_source(model.source, tmp_path, model.class_name)
    try:
        states = sample_states(system, random.Random(seed), 6, 10)
        check_steps(system, states)
        check_bv_steps(system, states[::2])
    finally:
        forget(system)


@pytest.mark.parametrize("seed", range(12))
def test_symmetry_changes_only_the_stored_states(seed: int, tmp_path: Path) -> None:
    model = random_index_model(seed)
    _, system = compile_source(model.source, tmp_path, model.class_name)
    try:
        plain = explore(system, symmetry=False, limits=LIMITS)
        if not plain.complete:
            pytest.skip("state space above the test's limit")
        reduced = explore(system, limits=LIMITS)
        assert _verdicts(reduced) == _verdicts(plain), model.source
        sym = reduced.stats.symmetry
        if sym.get("concrete_states_exact"):
            assert sym["concrete_states"] == plain.stats.states, model.source
    finally:
        forget(system)


def test_request_symmetry_stays_on_with_the_extra_axes(tmp_path: Path) -> None:
    """A requests x ranks variable does not turn request symmetry off; rows move
    with their request (a sampled alarm would turn it off if they did not)."""
    _, system = compile_source(TP_MODEL, tmp_path, "TP")
    report = analyse_symmetry(system)
    assert report.requests, report.reasons
    plain = explore(system, symmetry=False)
    reduced = explore(system)
    assert plain.stats.states == 121 and reduced.stats.states == 66
    assert reduced.stats.symmetry["concrete_states"] == 121


PAGES_MODEL = textwrap.dedent('''\
    from kvspec import Model, Page, Pages, Request, Requests, Slots, action, emit, require


    class PS(Model):
        requests = Requests(2)
        pages = Pages(3)
        slots = Slots(2)
        owner = pages.var(requests.optional, init=None)
        seg = pages.by(slots).var(bool, init=False)
        hold = slots.by(pages).var(bool, init=False)

        @action
        def alloc(s, r: Request, p: Page):
            require(s.owner[p] is None)
            s.owner[p] = r
            emit.alloc(r, p)

        @action
        def fill(s, p: Page, j: slots.id):
            require(s.owner[p] is not None and not s.seg[p, j])
            s.seg[p, j] = True
            s.hold[j, p] = not s.hold[j, p]

        @action
        def free(s, r: Request, p: Page):
            require(s.owner[p] == r and s.seg[p, :].all())
            s.owner[p] = None
            s.seg[p] = False
            s.hold[:, p] = False
            emit.free(r, p)
    ''')


def test_page_symmetry_carries_the_slot_axis(tmp_path: Path) -> None:
    """pages.by(slots) and slots.by(pages) keep page symmetry: the reduced search
    reconstructs the plain search's exact state count."""
    _, system = compile_source(PAGES_MODEL, tmp_path, "PS")
    report = analyse_symmetry(system)
    assert report.requests and report.pages, report.reasons
    plain = explore(system, symmetry=False)
    reduced = explore(system)
    assert (plain.stats.states, reduced.stats.states) == (729, 85)
    assert reduced.stats.symmetry["concrete_states"] == 729
    assert _verdicts(reduced) == _verdicts(plain)


@pytest.mark.skipif(not available(), reason="no C compiler (cc, gcc or clang)")
@pytest.mark.parametrize("seed", range(4))
def test_native_search_agrees(seed: int, tmp_path: Path) -> None:
    model = random_index_model(seed)
    _, system = compile_source(model.source, tmp_path, model.class_name)
    try:
        for symmetry in (True, False):
            native, python = both(system, tmp_path / "cache", symmetry=symmetry,
                                  limits=Limits(max_states=1_500))
            assert native == python, f"seed {seed}, symmetry {symmetry}\n{model.source}"
    finally:
        forget(system)


_CANON: dict[str, Any] = {}


@pytest.mark.skipif(not available(), reason="no C compiler (cc, gcc or clang)")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(["TP", "PS"]))
def test_native_canonical_form_is_the_python_one(data: Any, which: str,
                                                 tmp_path_factory: Any) -> None:
    """canon.c and canon.py pick the same representative of random states of models with
    a requests x ranks, a pages x slots and a slots x pages variable."""
    if which not in _CANON:
        source = TP_MODEL.replace("Requests(2)", "Requests(3)") if which == "TP" \
            else PAGES_MODEL
        directory = tmp_path_factory.mktemp("canon")
        _, system = compile_source(source, directory, which)
        _CANON[which] = (system, *_canon_lib(system, directory))
    system, lib, canon = _CANON[which]
    state = tuple(data.draw(st.sampled_from(t.domain()[:2] if data.draw(st.booleans())
                                            else t.domain())) for t in system.slot_types())
    n = len(state)
    buf, out = (ctypes.c_int64 * n)(*[int(x) for x in state]), (ctypes.c_int64 * n)()
    lib.kv_canon_state(buf, out)
    assert [int(x) for x in canon.key(state)] == list(out)


@pytest.mark.parametrize("seed", range(8))
def test_bmc_finds_every_violation_at_its_shortest_length(seed: int, tmp_path: Path) -> None:
    model = random_index_model(seed)
    _, system = compile_source(model.source, tmp_path, model.class_name)
    try:
        ref = explore(system, limits=Limits(max_states=1_500))
        if not ref.complete:
            pytest.skip("state space above the test's limit")
        expect = _verdicts(ref)
        depth = max([n for _, n in expect.values() if n is not None], default=4)
        got = run_bmc(system, depth=depth, timeout=120)
        for v in got.verdicts:
            status, length = expect[v.prop]
            if status == Status.VIOLATED.value:
                assert v.status is Status.VIOLATED and v.trace is not None \
                    and len(v.trace) == length, (v.prop, model.source)
            else:
                assert v.status is not Status.VIOLATED, (v.prop, model.source)
    finally:
        forget(system)


# -- a user's model, through the command line ------------------------------------------------

TP_MODEL = textwrap.dedent('''\
    import enum
    from kvspec import Model, Ranks, Request, Requests, action, invariant, require, var


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

        @invariant
        def done_means_clear(s) -> bool:
            return all(s.phase[r] != Phase.DONE or s.sent[r].count() == 0 for r in s.requests)
    ''')

#: the bug: only rank 0 is cleared when a request finishes
TP_BUGGY = TP_MODEL.replace("s.sent[r, :] = False", "s.sent[r, 0] = False")


@pytest.mark.parametrize("engine", [["--engine", "explicit", "--backend", "python"],
                                    ["--engine", "explicit", "--backend", "native"],
                                    ["--engine", "bmc", "--depth", "8"],
                                    ["--engine", "pdr"], ["--engine", "all-sizes"]])
@pytest.mark.parametrize("buggy", [False, True])
def test_every_engine_gives_the_same_verdict(engine: list[str], buggy: bool,
                                             tmp_path: Path) -> None:
    if "native" in engine and not available():
        pytest.skip("no C compiler")
    path = tmp_path / "tp.py"
    path.write_text(TP_BUGGY if buggy else TP_MODEL)
    run = run_cli("verify", str(path), *engine, "--property", "done-means-clear", "--json")
    data = json.loads(run.out)
    (v,) = data["properties"] if "properties" in data else data["verdicts"]
    if buggy:
        assert run.code == 1 and v["status"] == "VIOLATED"
        assert len(v["trace"]["steps"]) == 4
    elif "bmc" in engine:  # bounded only: exit 3 (unknown), never a violation
        assert run.code == 3 and v["status"] != "VIOLATED"
    else:
        assert run.code == 0 and v["status"] in ("HOLDS", "PROVED")


def test_size_override_and_trace_text(tmp_path: Path) -> None:
    path = tmp_path / "tp.py"
    path.write_text(TP_BUGGY)
    run = run_cli("verify", str(path), "--size", "ranks=3", "--engine", "explicit",
                  "--backend", "python", "--property", "done-means-clear")
    assert run.code == 1
    assert "ranks=3" in run.out
    assert "VIOLATED (explicit, 5 steps)" in run.out
    assert "sent[r0,1]" in run.out or "sent[r1,1]" in run.out
    assert "send(r0, ranks 1)" in run.out or "send(r1, ranks 1)" in run.out


def test_state_json_lists_a_grid_row_by_row(tmp_path: Path) -> None:
    _, system = compile_source(TP_MODEL, tmp_path, "TP")
    schema = system.schema
    state = list(system.initial)
    sent = schema.by_name["sent"]
    state[sent.offset + sent.slot(1, 0)] = True
    data = schema.to_json_state(tuple(state))
    assert data["sent"] == [False, False, True, False]  # [r0,0], [r0,1], [r1,0], [r1,1]
    assert data["leader"] == [None, None]
    assert schema.from_json_state(data) == tuple(state)
    assert sent.label(sent.logical(sent.slot(1, 0))) == "sent[r1,0]"
    changes = schema.diff(system.initial, tuple(state))
    assert [(v.name, i) for v, i, _, _ in changes] == [("sent", 2)]


# -- rejections --------------------------------------------------------------------------

HEAD = textwrap.dedent('''\
    from kvspec import (Index, Model, Pages, Ranks, Request, Requests, Slots, action, require,
                        var)


    class M(Model):
        requests = Requests(2)
        pages = Pages(2)
        ranks = Ranks(2)
        x = requests.by(ranks).var(bool, init=False)
    ''')

BODY = '''
    @action
    def go(s, r: Request, k: ranks.id):
        {stmt}
'''


def _line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.mark.parametrize("stmt, message", [
    ("s.x[k, r] = True", "x[i, _] needs a request id here"),
    ("s.x[r, 2] = True", "or a constant 0..1"),
    ("s.x[r, k, k] = True", "x has two dimensions"),
    ("s.x[r, 0:1] = True", "only a bare `:`"),
    ("require(s.x[0, k])", "x[i, _] needs a request id here"),
    ("require(s.x[r][0:1].any())", "slices are not supported"),
    ("s.x[r, k] = 3", "cannot store"),
    ("require(s.x[r, k] == k)", "cannot compare"),
    ("require(s.x[r, :].min())", ".min() applies to an array of ints"),
    ("require(s.x[:, k].max(1))", ".max() takes no arguments"),
    ("s.x[r][s.x[r]] = False", "into a row or column (s.x[r][m] = v) is not supported"),
    ("require(s.x.any(axis=s.pages).any())", "takes one of the id spaces"),
    ("require(s.x.count(axis=s.ranks) > 0)", "the only keyword is axis="),
    ("require(s.x[r].any(axis=s.ranks))", "takes no keyword arguments"),
])
def test_misuse_is_rejected_with_file_and_line(stmt: str, message: str, tmp_path: Path) -> None:
    source = HEAD + BODY.replace("{stmt}", stmt)
    with pytest.raises(ModelError) as exc:
        compile_source(source, tmp_path, "M")
    assert message in str(exc.value)
    assert exc.value.line == _line_of(source, stmt), str(exc.value)


def test_a_variable_over_requests_and_pages_is_rejected(tmp_path: Path) -> None:
    source = HEAD + "    y = requests.by(pages).var(bool, init=False)\n" + BODY.replace(
        "{stmt}", "pass")
    with pytest.raises(ModelError) as exc:
        compile_source(source, tmp_path, "M")
    assert "at most one of its axes may be requests or pages" in str(exc.value)
    assert exc.value.line == _line_of(source, "y = ")


def test_a_wrong_initial_grid_is_rejected(tmp_path: Path) -> None:
    source = HEAD + "    y = requests.by(ranks).var(bool, init=[[True]])\n" + BODY.replace(
        "{stmt}", "pass")
    with pytest.raises(ModelError) as exc:
        compile_source(source, tmp_path, "M")
    assert "expected 2 lists of 2 values" in str(exc.value)
    assert exc.value.line == _line_of(source, "y = ")


def test_the_all_sizes_engine_reads_a_variable_over_an_index_space(tmp_path: Path) -> None:
    path = tmp_path / "tp.py"
    path.write_text(TP_MODEL)
    run = run_cli("verify", str(path), "--engine", "all-sizes", "--property",
                  "done-means-clear")
    text = " ".join((run.out + run.err).split())
    assert "done-means-clear PROVED (all sizes" in text, text


def test_an_index_space_the_model_only_counts_keeps_its_size_for_every_size(
        tmp_path: Path) -> None:
    from conftest import system_of

    from kvspec.runner import run as run_engine

    system = system_of("nixl_handles.py", model_class="ReleaseWhenEveryHandleQuiescent")
    res = run_engine(system, "all-sizes", proofs_dir=tmp_path, coverage=False,
                     save_proof=True)
    assert all(v.method == "all sizes" for v in res.verdicts), [v.headline()
                                                                for v in res.verdicts]
    (cert,) = tmp_path.glob("*=all*.json")
    assert "requests=all,pages=all,handles=2" in cert.name
