"""The liveness graph built on the native backend (``kvspec live --backend native``) is
the Python construction's graph: the same nodes in the same order, the same edges with
the same action instances and discharged obligations; and so the same verdicts and
the same lassos, on every shipped model and on generated models with planted leaks."""
from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import MODELS
from hypothesis import given, settings
from test_liveness import by_prop, gen_model, live_cli, live_system, planted

from kvspec.engines.native import available
from kvspec.lang.system import System
from kvspec.liveness import DEADLOCK, LIVENESS, PEF, check_liveness
from kvspec.liveness.graph import STATE_LIMIT, ProductGraph, explore_product
from kvspec.liveness.native_graph import explore_product_native
from kvspec.liveness.obligations import ObligationMonitor
from kvspec.verdict import Verdict

pytestmark = pytest.mark.skipif(not available(), reason="no C compiler (cc, gcc or clang)")

#: sizes that keep every shipped model's graph to a few thousand states
SMALL = {"lowest_free.py": {"pages": 3}, "patched.py": {"pages": 3},
         "buggy_pd.py": {"pages": 3}}
SHIPPED = sorted(p.name for p in MODELS.glob("*.py"))


def graph_of(pg: ProductGraph) -> dict[str, Any]:
    """Everything the liveness search reads of a product graph."""
    g = pg.graph
    return {"states": pg.states, "monitors": pg.monitors, "src": g.src, "dst": g.dst,
            "label": g.label, "out": g.out, "discharged": pg.discharged,
            "parent_edge": pg.parent_edge, "depth": pg.depth, "expanded": pg.expanded,
            "stopped": pg.stopped, "saturated": pg.saturated}


def both(system: System, **kw: Any) -> tuple[ProductGraph, ProductGraph]:
    monitor = ObligationMonitor(list(LIVENESS), system.schema.requests, system.schema.pages,
                                True)
    py = explore_product(system, monitor, max_states=None, deadline=None)
    native = explore_product_native(system, monitor, max_states=None, deadline=None)
    assert native is not None, "the native construction fell back to Python"
    return py, native


def outcome(verdicts: list[Verdict]) -> dict[str, tuple[Any, ...]]:
    """Verdicts with their lassos' shape and schedule (the text of a step and the loop)."""
    got = {}
    for prop, v in by_prop(verdicts).items():
        t = v.trace
        shape = None if t is None else (len(t.steps), t.loop_start,
                                        [s.instance.label() for s in t.steps])
        got[prop] = (v.status, v.method, v.detail, shape)
    return got


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_models_give_the_same_graph(name: str) -> None:
    system = live_system(name, SMALL.get(name))
    py, native = both(system)
    assert len(py) > 1
    assert graph_of(native) == graph_of(py)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_models_give_the_same_verdicts_and_lassos(name: str) -> None:
    system = live_system(name, SMALL.get(name))
    py, _ = check_liveness(system)
    native, stats = check_liveness(system, backend="native")
    assert outcome(native) == outcome(py)
    assert stats.states > 1


def test_a_leak_is_found_on_the_native_graph() -> None:
    verdicts, _ = check_liveness(live_system("vllm_async_load_leak.py"), backend="native")
    v = by_prop(verdicts)[PEF]
    assert v.status.name == "VIOLATED" and v.trace is not None and v.trace.loop_start is not None


@settings(max_examples=8, deadline=None)
@given(planted())
def test_generated_leaks_same_graph_and_verdicts(tmp_path_factory: Any, case: Any) -> None:
    phases, moves = case
    path = tmp_path_factory.mktemp("gen") / "gen.py"
    path.write_text(gen_model(phases, moves))
    system = live_system(path)
    py, native = both(system)
    assert graph_of(native) == graph_of(py)
    a, _ = check_liveness(system, properties=[PEF])
    b, _ = check_liveness(system, properties=[PEF], backend="native")
    assert outcome(a) == outcome(b)


def test_state_limit_gives_the_same_partial_graph() -> None:
    system = live_system("buggy_pd.py", SMALL["buggy_pd.py"])
    monitor = ObligationMonitor(list(LIVENESS), system.schema.requests, system.schema.pages,
                                True)
    py = explore_product(system, monitor, max_states=200, deadline=None)
    native = explore_product(system, monitor, max_states=200, deadline=None, backend="native")
    assert py.stopped == STATE_LIMIT
    assert graph_of(native) == graph_of(py)


def test_cli_backends_print_the_same_verdicts() -> None:
    leak = str(MODELS / "vllm_async_load_leak.py")
    runs = {b: live_cli("live", leak, "--backend", b, "--json") for b in ("native", "python")}
    assert runs["native"][0] == runs["python"][0] == 1

    def verdicts(text: str) -> list[Any]:
        doc = json.loads(text)
        return [(v["property"], v["status"], len((v.get("trace") or {}).get("steps", [])))
                for v in doc["verdicts"]]

    assert verdicts(runs["native"][1]) == verdicts(runs["python"][1])
    assert any(p == DEADLOCK for p, _, _ in verdicts(runs["python"][1]))


def test_cli_rejects_backend_where_it_does_not_apply() -> None:
    leak = str(MODELS / "vllm_async_load_leak.py")
    code, _, err = live_cli("live", leak, "--engine", "bmc", "--backend", "native")
    assert code == 2 and "--backend" in err
    assert live_cli("live", leak, "--backend", "rust")[0] == 2


def test_without_a_compiler_the_python_graph_runs_with_one_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    from kvspec.engines.native import build
    build._identify.cache_clear()
    system = live_system("vllm_async_load_leak.py")
    warnings: list[str] = []
    verdicts, _ = check_liveness(system, backend="native", warn=warnings.append)
    expected, _ = check_liveness(system)
    assert outcome(verdicts) == outcome(expected)
    assert len(warnings) == 1 and "no C compiler" in warnings[0]
