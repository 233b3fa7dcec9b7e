"""Bounded model checking: shortest counterexamples that replay, honest bounds,
reachable model errors, encodings."""
from __future__ import annotations

from pathlib import Path

import pytest
import z3
from conftest import run_cli, system_of

from kvspec.engines.bmc import Deadline, Unroller, build, run_bmc
from kvspec.engines.explicit import explore
from kvspec.engines.transition import BitVecImage, EncodingOverflow, TransitionSystem
from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.verdict import Status

SMALL = {"requests": 2, "pages": 3}

ERROR_MODEL = '''
from kvspec import Int, Model, Request, Requests, action, require


class Overflow(Model):
    requests = Requests(1)
    n = requests.var(Int(0, 2), init=0)
    armed = requests.var(bool, init=False)

    @action
    def bump(s, r: Request):
        s.n[r] = s.n[r] + 1          # line 12: out of range once n == 2
        require(not s.armed[r])      # a later require does not stop the error

    @action
    def arm(s, r: Request):
        require(s.n[r] == 1)
        s.armed[r] = True
'''

GUARDED_MODEL = '''
from kvspec import Int, Model, Request, Requests, action, require


class Guarded(Model):
    requests = Requests(1)
    n = requests.var(Int(0, 2), init=0)

    @action
    def bump(s, r: Request):
        require(s.n[r] < 2)          # the guard comes first: never out of range
        s.n[r] = s.n[r] + 1
'''


def test_bmc_counterexamples_are_shortest_and_replay() -> None:
    system = system_of("buggy_pd.py", SMALL)
    explicit = {v.prop: v for v in explore(system, symmetry=False).verdicts}
    out = run_bmc(system_of("buggy_pd.py", SMALL), depth=10, timeout=120)
    for v in out.verdicts:
        ref = explicit[v.prop]
        if ref.status is Status.VIOLATED:
            assert v.status is Status.VIOLATED and v.method == "bmc"
            assert v.trace is not None and ref.trace is not None
            assert len(v.trace) == len(ref.trace)
            assert v.detail == f"depth {len(v.trace)}"
            assert v.trace.violation is not None
        else:
            assert (v.status, v.method, v.detail) == (Status.HOLDS, "bounded", "depth 10")
            assert not v.is_success  # bounded is not a proof


def test_bounded_holds_exits_unknown_on_the_command_line() -> None:
    res = run_cli("verify", "models/single_node.py", "--engine", "bmc", "--depth", "4",
                  "--size", "requests=1,pages=2")
    assert res.code == 3
    assert "HOLDS (bounded, depth 4)" in res.out and "not a proof" in res.out


def test_reachable_model_error_is_reported_with_its_location(write_model) -> None:
    path = write_model(ERROR_MODEL, "overflow.py")
    system = compile_model(load_model(path))
    with pytest.raises(ModelError) as info:
        explore(system)
    with pytest.raises(ModelError) as got:
        run_bmc(compile_model(load_model(path)), depth=5, timeout=60)
    assert got.value.line == info.value.line == 12
    assert "reachable in 3 steps" in got.value.message
    res = run_cli("verify", str(path), "--engine", "bmc", "--depth", "5")
    assert res.code == 2 and "overflow.py:12" in res.err


def test_an_error_behind_a_failing_guard_is_no_error(write_model) -> None:
    path = write_model(GUARDED_MODEL, "guarded.py")
    out = run_bmc(compile_model(load_model(path)), depth=4, timeout=60)
    assert all(v.status is Status.HOLDS for v in out.verdicts)


def test_timeout_is_unknown_never_success() -> None:
    out = run_bmc(system_of("buggy_pd.py", SMALL), depth=30, timeout=0.001)
    assert any(v.status is Status.UNKNOWN for v in out.verdicts)
    assert not any(v.is_success for v in out.verdicts)


@pytest.mark.parametrize("encoding", ["int", "bv"])
@pytest.mark.parametrize("symmetry", [False, True])
def test_encodings_and_symmetry_breaking_agree(encoding: str, symmetry: bool) -> None:
    system = system_of("buggy_pd.py", {"requests": 2, "pages": 2})
    base = build(system, symmetry=False)
    ts = base.twin(encoding, (symmetry, symmetry))
    unroller = Unroller(ts)
    prop = next(p for p in system.properties if p.name == "rejection-is-terminal")
    results = []
    for k in range(1, 4):
        unroller.extend()
        results.append(unroller.check(ts.bad(prop, ts.frame(k)), Deadline(None)))
    assert results == [z3.unsat, z3.unsat, z3.sat]


def test_bit_vector_width_never_overflows() -> None:
    x = z3.Int("x")
    image = BitVecImage({"x": (0, 3)}, 4)  # signed 4 bits: -8..7
    assert image.interval(x + x) == (0, 6)
    with pytest.raises(EncodingOverflow):
        image(x * 3)  # 0..9 does not fit
    ts = TransitionSystem(system_of("patched.py", SMALL), "bv")
    assert ts.encoding == "bv" and ts.bv is not None and ts.bv.width <= 8


def test_cli_bmc_prints_shortest_counterexample() -> None:
    res = run_cli("verify", "models/free_before_drain.py", "--engine", "bmc", "--depth", "7",
                  "--size", "requests=1,pages=2")
    assert res.code == 1
    assert "VIOLATED (bmc, depth 6)" in res.out
    assert Path("models/free_before_drain.py").exists()
