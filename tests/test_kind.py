"""k-induction: PROVED (k-inductive, k=N), violations from the base case, and an
honest UNKNOWN when the properties are not k-inductive within the bound."""
from __future__ import annotations

from conftest import run_cli, system_of

from kvspec.engines.kind import run_kind
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.verdict import Status

TOGGLE = '''
from kvspec import Model, Request, Requests, action, invariant


class Latch(Model):
    """b is only ever set once a is set: "b implies a" is 1-inductive."""
    requests = Requests(1)
    a = requests.var(bool, init=False)
    b = requests.var(bool, init=False)

    @action
    def step(s, r: Request):
        if s.a[r]:
            s.b[r] = True
        s.a[r] = True

    @invariant
    def b_implies_a(s):
        return s.a[0] or not s.b[0]
'''

TWO_STEP = '''
from kvspec import Int, Model, Request, Requests, action, invariant, require


class Ladder(Model):
    """x flips between 0 and 1. The unreachable state x == 2 loops on itself and
    falls to x == 3: "x != 3" is not 1-inductive, and k-induction without the
    simple-path constraint would never prove it (2, 2, ..., 2, 3 is a bad path)."""
    requests = Requests(1)
    x = requests.var(Int(0, 3), init=0)

    @action
    def flip(s, r: Request):
        require(s.x[r] <= 1)
        s.x[r] = 1 - s.x[r]

    @action
    def stay(s, r: Request):
        require(s.x[r] == 2)
        s.x[r] = 2

    @action
    def fall(s, r: Request):
        require(s.x[r] == 2)
        s.x[r] = 3

    @invariant
    def never_three(s):
        return s.x[0] != 3
'''


def test_k_induction_proves_a_one_inductive_property(write_model) -> None:
    system = compile_model(load_model(write_model(TOGGLE, "latch.py")),
                           properties=["b-implies-a"])
    out = run_kind(system, max_k=5, timeout=60)
    (v,) = out.verdicts
    assert (v.status, v.method, v.detail) == (Status.PROVED, "k-inductive", "k=1")
    assert v.headline() == "PROVED (k-inductive, k=1)"


def test_k_induction_proves_with_a_simple_path(write_model) -> None:
    system = compile_model(load_model(write_model(TWO_STEP, "ladder.py")),
                           properties=["never-three"])
    (v,) = run_kind(system, max_k=5, timeout=60).verdicts
    assert (v.status, v.detail) == (Status.PROVED, "k=2")


def test_base_case_finds_shortest_violations() -> None:
    out = run_kind(system_of("buggy_pd.py", {"requests": 1, "pages": 3}), max_k=10, timeout=120)
    lengths = {v.prop: len(v.trace) for v in out.verdicts if v.trace is not None}
    assert lengths == {"no-decode-after-rejection": 9, "rejection-is-terminal": 3,
                       "no-read-beyond-written": 9}


def test_not_k_inductive_is_unknown_not_success() -> None:
    out = run_kind(system_of("patched.py", {"requests": 1, "pages": 2}), max_k=2, timeout=60)
    for v in out.verdicts:
        assert v.status in (Status.UNKNOWN, Status.PROVED)
    unknown = [v for v in out.verdicts if v.status is Status.UNKNOWN]
    assert unknown and all("not k-inductive up to k=2" in v.detail for v in unknown)
    res = run_cli("verify", "models/patched.py", "--engine", "kind", "--depth", "2",
                  "--size", "requests=1,pages=2")
    assert res.code == 3
