"""The native explicit backend (the model compiled to C) against the Python search.

Both backends must report the same thing about every model: verdicts, distinct
states, transitions, depth, counterexample lengths, coverage, the concrete-state
count under symmetry reduction, and the same model error. Checked on every shipped
model (with and without symmetry), on random models (:mod:`modelgen`), for the
limits and modes, and the native canonicalisation against :mod:`kvspec.engines.canon`
on random states. Skipped, with the reason, when there is no C compiler.
"""
from __future__ import annotations

import ctypes
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS, run_cli, system_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelgen import random_model
from test_differential import compile_source

from kvspec.engines.canon import Canonicalizer
from kvspec.engines.explicit import ExplicitOutcome, Limits, explore
from kvspec.engines.native import available
from kvspec.engines.native.build import compile_source as build
from kvspec.engines.native.codegen import generate
from kvspec.engines.native.run import explore_native, omission_bound
from kvspec.lang.errors import ModelError
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.lang.system import System
from kvspec.verdict import Status

pytestmark = pytest.mark.skipif(not available(), reason="no C compiler (cc, gcc or clang)")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: Any) -> Path:
    return tmp_path_factory.mktemp("native-cache")


def summary(out: ExplicitOutcome) -> dict[str, Any]:
    """Everything a user sees of an explicit search, timings and memory left out."""
    sym = {k: v for k, v in out.stats.symmetry.items() if k != "reasons"}
    return {"states": out.stats.states, "transitions": out.stats.transitions,
            "depth": out.stats.depth, "complete": out.complete, "stopped": out.stopped,
            "verdicts": [(v.prop, v.status.value, v.method, v.detail,
                          None if v.trace is None else len(v.trace)) for v in out.verdicts],
            "symmetry": sym,
            "coverage": None if out.coverage is None else out.coverage.to_json()}


def both(system: System, cache: Path, **kw: Any) -> tuple[Any, Any]:
    def run(fn: Any, **extra: Any) -> Any:
        try:
            return summary(fn(system, **kw, **extra))
        except ModelError as exc:
            return ("model error", str(exc))
    return run(explore_native, cache=cache), run(explore)


SHIPPED = sorted(p.stem for p in MODELS.glob("*.py"))


@pytest.mark.parametrize("symmetry", [True, False])
@pytest.mark.parametrize("model", SHIPPED)
def test_shipped_models_agree(model: str, symmetry: bool, cache: Path) -> None:
    native, python = both(system_of(f"{model}.py"), cache, symmetry=symmetry)
    assert native == python


@pytest.mark.parametrize("seed", range(5))
def test_random_models_agree(seed: int, tmp_path: Path, cache: Path) -> None:
    model = random_model(seed, small=True)
    _, system = compile_source(model.source, tmp_path, model.class_name)
    for symmetry in (True, False):
        native, python = both(system, cache, symmetry=symmetry,
                              limits=Limits(max_states=20_000))
        assert native == python, f"seed {seed}, symmetry {symmetry}\n{model.source}"


@pytest.mark.parametrize("max_states", [1, 7, 100])
def test_state_limit_stops_at_the_same_state(max_states: int, cache: Path) -> None:
    native, python = both(system_of("patched.py"), cache, symmetry=True,
                          limits=Limits(max_states=max_states))
    assert native == python
    assert native["stopped"] == "state-limit"
    assert {v[1] for v in native["verdicts"]} == {"UNKNOWN"}


def test_stop_at_first_gives_a_shortest_counterexample(cache: Path) -> None:
    system = system_of("buggy_pd.py")
    native, python = both(system, cache, symmetry=False, stop_at_first=True)
    assert native == python
    assert native["stopped"] == "first-violation"
    full = explore(system, symmetry=False)
    shortest = {v.prop: len(v.trace) for v in full.verdicts if v.trace is not None}
    violated = [v for v in native["verdicts"] if v[1] == "VIOLATED"]
    assert violated and all(v[4] == shortest[v[0]] for v in violated)
    assert all(v[1] in ("VIOLATED", "UNKNOWN") for v in native["verdicts"])


def test_model_error_is_raised_as_the_concrete_interpretation_raises(write_model: Any,
                                                                      cache: Path) -> None:
    path = write_model(textwrap.dedent("""
        from kvspec import Int, Model, Request, Requests, action

        class Overflow(Model):
            requests = Requests(2)
            count = requests.var(Int(0, 2), init=0)

            @action
            def bump(s, r: Request):
                s.count[r] = s.count[r] + 1
        """))
    native, python = both(system_of(path), cache, symmetry=True)
    assert native[0] == "model error"
    assert native == python


def test_fingerprint_mode_is_never_exhaustive(cache: Path) -> None:
    system = system_of("single_node.py")
    exact = summary(explore(system, symmetry=False))
    fp = explore_native(system, symmetry=False, fingerprint=True, cache=cache)
    assert fp.stats.states == exact["states"]
    for v in fp.verdicts:
        assert v.status == Status.HOLDS and v.method == "fingerprint"
        assert "omission probability" in v.detail
    assert fp.stats.extra["native"]["fingerprint"] is True
    assert omission_bound(2) == 2.0 ** -64 and omission_bound(10 ** 12) > 0.01


def test_build_is_cached(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("KVSPEC_CACHE_DIR", str(tmp_path))
    system = system_of("vllm_async_load_fixed.py")
    first = explore_native(system, symmetry=False)
    second = explore_native(system, symmetry=False)
    assert first.stats.extra["native"]["build"]["cached"] is False
    assert second.stats.extra["native"]["build"]["cached"] is True
    assert list(tmp_path.glob("kvspec-*.so"))


def test_without_a_compiler_it_falls_back_with_one_line(monkeypatch: Any) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    lines: list[str] = []
    out = explore(system_of("single_node.py"), backend=None, warn=lines.append)
    assert "native" not in out.stats.extra
    assert len(lines) == 1 and "no C compiler" in lines[0]


def test_cli_json_reports_the_native_run() -> None:
    res = run_cli("verify", str(MODELS / "buggy_pd.py"), "--engine", "explicit",
                  "--backend", "native", "--no-symmetry", "--json")
    py = run_cli("verify", str(MODELS / "buggy_pd.py"), "--engine", "explicit",
                 "--backend", "python", "--no-symmetry", "--json")
    a, b = json.loads(res.out), json.loads(py.out)
    assert res.code == py.code == 1
    assert a["stats"]["states"] == b["stats"]["states"]
    native = a["stats"]["native"]
    assert native["backend"] == "native" and "native" not in b["stats"]
    assert a["stats"]["explicit"] == b["stats"]["explicit"]
    for key in ("cpu_seconds", "bytes_per_state", "state_bytes", "build"):
        assert key in native
    assert res.err == ""


def test_cli_fingerprint_holds_is_not_success() -> None:
    """A hash-compacted search may have missed a state: HOLDS says so, and exits 3."""
    res = run_cli("verify", str(MODELS / "single_node.py"), "--engine", "explicit",
                  "--backend", "native", "--fingerprint")
    assert res.code == 3, res.out + res.err
    assert "HOLDS (fingerprint" in res.out and "not exhaustive" in res.out


@pytest.mark.parametrize("argv,needs", [
    (["--fingerprint"], "--engine explicit"),
    (["--stop-at-first", "--engine", "pdr"], "--engine explicit"),
    (["--fingerprint", "--engine", "explicit", "--backend", "python"], "--backend native"),
])
def test_cli_search_modes_name_what_they_need(argv: list[str], needs: str) -> None:
    res = run_cli("verify", str(MODELS / "single_node.py"), *argv)
    assert res.code == 2 and needs in res.err and "Traceback" not in res.err


# -- the canonicalisation itself ----------------------------------------------------------

def _canon_lib(system: System, cache: Path) -> tuple[Any, Canonicalizer]:
    report = analyse_symmetry(system, enabled=True)
    canon = Canonicalizer(system.schema, report.requests, report.pages)
    assert canon.active
    source = generate(system, canon).source
    lib = ctypes.CDLL(str(build(source, "canon-test", "{}", directory=cache).path))
    lib.kv_canon_state.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 2
    lib.kv_canon_state.restype = None
    return lib, canon


_CANON: dict[str, Any] = {}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), model=st.sampled_from(["patched.py", "buggy_pd.py", "single_node.py"]))
def test_native_canonical_form_is_the_python_one(data: Any, model: str,
                                                 tmp_path_factory: Any) -> None:
    if model not in _CANON:
        system = system_of(model, {"requests": 3} if model == "patched.py" else None)
        _CANON[model] = (system, *_canon_lib(system, tmp_path_factory.mktemp("canon")))
    system, lib, canon = _CANON[model]
    types = system.slot_types()
    # states with many ties between requests (few distinct values) exercise the orders
    state = tuple(data.draw(st.sampled_from(t.domain()[:3] if data.draw(st.booleans())
                                            else t.domain())) for t in types)
    n = len(state)
    buf, out = (ctypes.c_int64 * n)(*[int(x) for x in state]), (ctypes.c_int64 * n)()
    lib.kv_canon_state(buf, out)
    assert [int(x) for x in canon.key(state)] == list(out)


IMPORTING_MODEL = """
from kvspec import Int, Model, Pages, Request, Requests, action, invariant, require
from kvspec_limits_for_cache_test import LIMIT


class Imported(Model):
    properties = ()
    requests = Requests(1)
    pages = Pages(1)
    c = requests.var(Int(0, 9), init=0)

    @action
    def inc(s, r: Request):
        require(s.c[r] < LIMIT)
        s.c[r] = s.c[r] + 1

    @invariant
    def small(s):
        return all(s.c[r] < 5 for r in s.requests)
"""


def test_a_constant_imported_from_another_module_is_part_of_the_cache_key(
        tmp_path: Path, cache: Path, monkeypatch: Any) -> None:
    """Changing a value the model imports (its own file unchanged) must not reuse the
    search compiled for the old value."""
    import sys

    from kvspec.engines.native.build import cache_key
    from kvspec.lang.loader import load_model
    from kvspec.lang.system import compile_model

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no stale .pyc of the same second
    verdicts, keys = [], []
    for limit in (3, 7):
        (tmp_path / "kvspec_limits_for_cache_test.py").write_text(f"LIMIT = {limit}\n")
        monkeypatch.delitem(sys.modules, "kvspec_limits_for_cache_test", raising=False)
        model = tmp_path / f"model{limit}.py"  # the same text: only the import differs
        model.write_text(IMPORTING_MODEL)
        system = compile_model(load_model(model), {}, None)
        keys.append(cache_key(system, (False, False)))
        native = explore_native(system, symmetry=False, cache=cache)
        python = explore(system, symmetry=False)
        assert summary(native) == summary(python)
        verdicts += [v.status for v in native.verdicts if v.prop == "small"]
    assert keys[0] != keys[1]
    assert verdicts == [Status.HOLDS, Status.VIOLATED]
