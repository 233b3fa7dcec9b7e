"""The native search's other ways to run: several worker threads, and depth-first.

* ``workers``: the same states, transitions, depth, verdicts, counterexample lengths,
  coverage and stopping points as one thread, on every shipped model (the library's
  classes too), on random models, and for every limit and mode (Hypothesis); small
  ``chunk`` values spread even tiny models over the threads.
* ``dfs``: stops at the first violation with a counterexample that re-executes and is
  not claimed shortest; without a violation it stores every state breadth-first does.

The compiled searches are cached in the default cache (``$KVSPEC_CACHE_DIR``), so a
second run of this file compiles nothing. Skipped without a C compiler.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS, run_cli, system_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelgen import random_model
from test_differential import compile_source
from test_native import summary

from kvspec.engines.explicit import Limits, explore
from kvspec.engines.native import available
from kvspec.engines.native.run import NOT_SHORTEST, explore_native
from kvspec.lang.errors import ModelError
from kvspec.lang.system import System
from kvspec.verdict import Status

pytestmark = pytest.mark.skipif(not available(), reason="no C compiler (cc, gcc or clang)")


def _model_classes(path: Path) -> list[str]:
    """The classes of a model file that are not enums."""
    tree = ast.parse(path.read_text())
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef)
            and not any("Enum" in ast.unparse(b) for b in node.bases)]


SHIPPED = [(p.name, None) for p in sorted(MODELS.glob("*.py"))]
LIBRARY = [(f"library/{p.name}", cls) for p in sorted((MODELS / "library").glob("*.py"))
           for cls in _model_classes(p)]


def outcome(system: System, **kw: Any) -> Any:
    try:
        return summary(explore_native(system, **kw))
    except ModelError as exc:
        return ("model error", str(exc))


def assert_workers_agree(system: System, symmetry: bool, **kw: Any) -> None:
    one = outcome(system, symmetry=symmetry, **kw)
    for workers, chunk in ((2, 1), (3, 2)):
        many = outcome(system, symmetry=symmetry, workers=workers, chunk=chunk, **kw)
        assert many == one, f"workers={workers}, chunk={chunk}, symmetry={symmetry}"


@pytest.mark.parametrize("symmetry", [True, False])
@pytest.mark.parametrize("model", [m for m, _ in SHIPPED])
def test_workers_agree_on_shipped_models(model: str, symmetry: bool) -> None:
    assert_workers_agree(system_of(model), symmetry)


@pytest.mark.parametrize("model,cls", LIBRARY, ids=[f"{m}:{c}" for m, c in LIBRARY])
def test_workers_agree_on_library_models(model: str, cls: str) -> None:
    assert_workers_agree(system_of(MODELS / model, model_class=cls), False)


@pytest.mark.parametrize("seed", range(3))
def test_workers_agree_on_random_models(seed: int, tmp_path: Path) -> None:
    model = random_model(seed, small=True)
    _, system = compile_source(model.source, tmp_path, model.class_name)
    for symmetry in (True, False):
        assert_workers_agree(system, symmetry, limits=Limits(max_states=20_000))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["patched.py", "buggy_pd.py", "free_before_drain.py"]),
       symmetry=st.booleans(), workers=st.integers(2, 4), chunk=st.integers(1, 64),
       max_states=st.none() | st.integers(1, 5000), stop_at_first=st.booleans(),
       fingerprint=st.booleans())
def test_workers_stop_where_one_thread_stops(model: str, symmetry: bool, workers: int,
                                             chunk: int, max_states: int | None,
                                             stop_at_first: bool, fingerprint: bool) -> None:
    """Limits and modes cut the search at the same state whatever the threads."""
    system = system_of(model)
    kw: dict[str, Any] = {"symmetry": symmetry, "limits": Limits(max_states=max_states),
                          "stop_at_first": stop_at_first, "fingerprint": fingerprint}
    assert outcome(system, workers=workers, chunk=chunk, **kw) == outcome(system, **kw)


def test_a_model_error_is_met_alike_by_the_workers(write_model: Any) -> None:
    path = write_model("""
from kvspec import Int, Model, Request, Requests, action

class Overflow(Model):
    requests = Requests(3)
    count = requests.var(Int(0, 3), init=0)

    @action
    def bump(s, r: Request):
        s.count[r] = s.count[r] + 1
""")
    system = system_of(path)
    one = outcome(system, symmetry=False)
    assert one[0] == "model error"
    assert outcome(system, symmetry=False, workers=2, chunk=1) == one


def test_the_workers_report_their_number() -> None:
    out = explore_native(system_of("single_node.py"), workers=3)
    assert out.stats.extra["native"]["workers"] == 3
    with pytest.raises(ValueError, match="workers"):
        explore_native(system_of("single_node.py"), workers=0)


# -- depth-first ----------------------------------------------------------------------------

BUGGY = [("buggy_pd.py", None), ("free_before_drain.py", None),
         ("library/sglang_admission.py", "Before36988"),
         ("library/abort_release.py", "ImmediateRelease"),
         ("library/stale_ack.py", "AckKeyedByRoom"), ("library/tp_ranks.py",
                                                      "ReleaseAfterMinOfRanks")]


@pytest.mark.parametrize("symmetry", [True, False])
@pytest.mark.parametrize("model,cls", BUGGY)
def test_dfs_finds_a_violation_whose_trail_re_executes(model: str, cls: str | None,
                                                       symmetry: bool) -> None:
    system = system_of(MODELS / model, model_class=cls)
    bfs = explore_native(system, symmetry=symmetry)
    shortest = {v.prop: len(v.trace) for v in bfs.verdicts if v.trace is not None}
    assert shortest, "the model is meant to violate something"
    dfs = explore_native(system, symmetry=symmetry, dfs=True)
    violated = [v for v in dfs.verdicts if v.status is Status.VIOLATED]
    assert violated
    for v in violated:
        assert v.trace is not None  # concretized: re-executed by the concrete interpretation
        assert NOT_SHORTEST in v.detail
        assert len(v.trace) >= shortest[v.prop]
    assert dfs.stats.extra["explicit"]["order"] == "depth-first"
    assert dfs.stats.extra["explicit"]["shortest"] is False
    if not dfs.complete:  # it stopped at the first violation: the rest is undecided
        assert dfs.stopped == "first-violation"
        assert all(v.status in (Status.VIOLATED, Status.UNKNOWN) for v in dfs.verdicts)


@pytest.mark.parametrize("fingerprint", [False, True])
@pytest.mark.parametrize("model,cls", [("patched.py", None), ("single_node.py", None),
                                       ("vllm_async_load_fixed.py", None),
                                       ("library/abort_release.py", "Quarantine")])
def test_dfs_without_a_violation_stores_every_state(model: str, cls: str | None,
                                                    fingerprint: bool) -> None:
    system = system_of(MODELS / model, model_class=cls)
    for symmetry in (True, False):
        bfs = explore_native(system, symmetry=symmetry)
        dfs = explore_native(system, symmetry=symmetry, dfs=True, fingerprint=fingerprint)
        assert dfs.complete and bfs.complete
        assert dfs.stats.states == bfs.stats.states
        assert dfs.stats.transitions == bfs.stats.transitions
        assert [v.status for v in dfs.verdicts] == [v.status for v in bfs.verdicts]
        assert all(v.status is Status.HOLDS for v in dfs.verdicts)
        assert dfs.stats.depth >= bfs.stats.depth  # the deepest path, not the BFS depth
        assert dfs.coverage is not None and bfs.coverage is not None
        assert dfs.coverage.to_json() == bfs.coverage.to_json()


@pytest.mark.parametrize("symmetry", [True, False])
def test_dfs_with_fingerprints_keeps_no_states_yet_its_trail_re_executes(symmetry: bool) -> None:
    """With fingerprints the depth-first states live on its stack only; the trail is
    rebuilt from the parents and re-executed, and names a property the Python search
    finds violated too."""
    system = system_of("free_before_drain.py")
    python = explore(system, symmetry=symmetry)
    dfs = explore_native(system, symmetry=symmetry, dfs=True, fingerprint=True)
    bad = {v.prop for v in python.verdicts if v.status is Status.VIOLATED}
    violated = [v for v in dfs.verdicts if v.status is Status.VIOLATED]
    assert violated and {v.prop for v in violated} <= bad
    assert all(v.trace is not None and NOT_SHORTEST in v.detail for v in violated)


# -- the command line --------------------------------------------------------------------------

@pytest.mark.parametrize("argv,needs", [
    (["--workers", "2"], "--engine explicit"),
    (["--dfs", "--engine", "bmc"], "--engine explicit"),
    (["--workers", "2", "--engine", "explicit", "--backend", "python"], "--backend native"),
    (["--dfs", "--engine", "explicit", "--backend", "python"], "--backend native"),
    (["--dfs", "--workers", "2", "--engine", "explicit"], "drop --workers"),
    (["--workers", "0", "--engine", "explicit"], "at least 1"),
    (["--workers", "two", "--engine", "explicit"], "integer"),
])
def test_cli_rejects_what_does_not_apply(argv: list[str], needs: str) -> None:
    res = run_cli("verify", str(MODELS / "single_node.py"), *argv)
    assert res.code == 2 and needs in res.err and "Traceback" not in res.err


def test_cli_workers_give_the_single_thread_result() -> None:
    argv = ["verify", str(MODELS / "buggy_pd.py"), "--engine", "explicit", "--json"]
    one = json.loads(run_cli(*argv).out)
    two = run_cli(*argv, "--workers", "2")
    assert two.code == 1
    many = json.loads(two.out)
    assert many["stats"]["native"]["workers"] == 2
    for doc in (one, many):
        for v in doc["verdicts"]:
            if v["trace"] is not None:
                v["trace"] = len(v["trace"]["steps"])
    assert many["verdicts"] == one["verdicts"]
    for key in ("states", "transitions", "depth", "explicit"):
        assert many["stats"][key] == one["stats"][key]


def test_cli_dfs_says_its_counterexample_is_not_shortest() -> None:
    argv = ["verify", str(MODELS / "free_before_drain.py"), "--engine", "explicit", "--dfs"]
    text = run_cli(*argv)
    assert text.code == 1 and "not claimed shortest" in text.out
    doc = json.loads(run_cli(*argv, "--json").out)
    assert doc["stats"]["explicit"]["order"] == "depth-first"
    assert doc["stats"]["explicit"]["shortest"] is False
    violated = [v for v in doc["verdicts"] if v["status"] == "VIOLATED"]
    assert violated and all("not claimed shortest" in v["detail"] for v in violated)
    holds = run_cli("verify", str(MODELS / "single_node.py"), "--engine", "explicit", "--dfs")
    assert holds.code == 0 and "HOLDS (exhaustive" in holds.out
