"""Symbolic liveness (``kvspec live --engine bmc``): bounded lasso search with Z3,
compared with the explicit engine and with a brute-force shortest lasso on the
explicit product graph.

Length of a lasso: the number of steps of its trace (prefix + loop; a run that
stops has only a prefix). The explicit engine returns the lasso with the shortest
prefix, then a short loop, which is *not* always the shortest in total; so the
symbolic lengths are compared with :func:`shortest_lasso`, the exact minimum over
the explicit product graph, and the explicit lasso is only checked to be no
shorter than it.
"""
from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS
from hypothesis import given, settings
from test_liveness import by_prop, gen_model, live_cli, live_system, planted

import kvspec.liveness.symbolic as symbolic
from kvspec.lang.system import System
from kvspec.liveness import DEADLOCK, LIVENESS, PEF, RT, WEQ, check_liveness
from kvspec.liveness.graph import explore_product
from kvspec.liveness.lasso import lasso_from_json
from kvspec.liveness.obligations import Obligation, ObligationMonitor
from kvspec.liveness.symbolic import BMC_LASSO, check_liveness_bmc
from kvspec.trace import InternalError
from kvspec.verdict import Status


def shortest_lasso(system: System, prop: str, fairness: bool, bound: int) -> int | None:
    """The fewest steps of a fair lasso violating ``prop`` (None: none of at most
    ``bound`` steps), by breadth-first search on the explicit product graph: a
    shortest path to a loop start ``l``, then a shortest closed walk from ``l``
    tracking which fair instances it took and what it saw enabled."""
    R, P = system.schema.requests, system.schema.pages
    monitor = ObligationMonitor([prop], R, P, False)
    pg = explore_product(system, monitor, max_states=None, deadline=None)
    assert pg.complete
    decl = system.loaded.decl.fairness if fairness else {}
    weak = frozenset(i.index for i in system.instances if decl.get(i.name) == "weak")
    strong = frozenset(i.index for i in system.instances if decl.get(i.name) == "strong")
    best: int | None = None
    obs = {ob for n in range(len(pg)) for ob in monitor.pending(pg.monitors[n])}
    for ob in obs:
        nodes = {n for n in range(len(pg)) if monitor.is_pending(pg.monitors[n], ob)}
        for n in nodes:
            if pg.terminal(n) and pg.depth[n] <= bound:
                best = pg.depth[n] if best is None else min(best, pg.depth[n])
        for start in nodes:
            room = bound - pg.depth[start]
            if room < 1 or (best is not None and pg.depth[start] + 1 >= best):
                continue
            loop = _shortest_fair_loop(pg, ob, nodes, start, weak, strong, room)
            if loop is not None:
                total = pg.depth[start] + loop
                best = total if best is None else min(best, total)
    return best


def _shortest_fair_loop(pg: Any, ob: Obligation, nodes: set[int], start: int,
                        weak: frozenset[int], strong: frozenset[int], room: int) -> int | None:
    g = pg.graph
    fair = weak | strong
    init = (start, frozenset(), frozenset(), frozenset())  # node, taken, weak off, strong on
    seen = {init}
    queue = deque([(init, 0)])
    while queue:
        (n, taken, off, on), d = queue.popleft()
        if d >= room:
            continue
        en = pg.enabled(n)
        off2 = off | (weak - en)
        on2 = on | (strong & en)
        for k in g.out[n]:
            m = g.dst[k]
            if m not in nodes or ob in pg.discharged[k]:
                continue
            lab = g.label[k]
            t2 = taken | ({lab} & fair)
            if m == start and all(w in t2 or w in off2 for w in weak) \
                    and all(s in t2 or s not in on2 for s in strong):
                return d + 1
            key = (m, t2, off2, on2)
            if key not in seen:
                seen.add(key)
                queue.append((key, d + 1))
    return None


def agree(system: System, depth: int, fairness: bool = True,
          props: list[str] | None = None) -> dict[str, int | None]:
    """Check the symbolic engine against the explicit one and the brute-force
    minimum for each property; return the lasso lengths found."""
    props = list(LIVENESS) if props is None else props
    verdicts, stats = check_liveness_bmc(system, properties=props, depth=depth,
                                         fairness=fairness)
    out: dict[str, int | None] = {}
    for v in verdicts:
        assert v.method == BMC_LASSO and v.status is not Status.HOLDS
        explicit = by_prop(check_liveness(system, properties=[v.prop], deadlock=False,
                                          fairness=fairness)[0])[v.prop]
        best = shortest_lasso(system, v.prop, fairness, depth)
        if v.status is Status.VIOLATED:
            assert v.trace is not None and v.trace.loop_start is not None
            assert explicit.status is Status.VIOLATED, (v.prop, v.headline())
            assert len(v.trace) == best, (v.prop, len(v.trace), best)
            assert explicit.trace is not None and len(explicit.trace) >= len(v.trace)
            out[v.prop] = len(v.trace)
        else:
            assert v.status is Status.UNKNOWN and "(bounded)" in v.detail, v.headline()
            assert best is None, (v.prop, best)
            if explicit.status is Status.VIOLATED:  # only beyond the bound
                assert explicit.trace is not None and len(explicit.trace) > depth
            out[v.prop] = None
    assert stats.extra["liveness"]["engine"] == "bmc"
    return out


# -- the vLLM #32255 models -----------------------------------------------------------------

def test_first_cut_of_32255_leaks_pages_with_a_shortest_lasso() -> None:
    system = live_system("vllm_async_load_leak.py")
    lengths = agree(system, 7)
    assert lengths == {PEF: 6, RT: None, WEQ: None}
    v = by_prop(check_liveness_bmc(system, properties=[PEF], depth=7)[0])[PEF]
    assert v.status is Status.VIOLATED and v.method == "bmc-lasso"
    assert "weak fairness: finished_recving, update_waiting, finish" in v.detail
    trace = v.trace
    assert trace is not None and trace.loop_start == len(trace) == 6
    labels = [s.instance.label() for s in trace.steps]
    # the race: a request's load is reported, then its abort holds the blocks forever
    assert any(labels.index(f"finished_recving(r{r})") < labels.index(f"abort(r{r})")
               for r in (0, 1) if f"abort(r{r})" in labels and
               f"finished_recving(r{r})" in labels)
    assert "is never followed by free(" in trace.reason


def test_merged_fix_has_no_fair_lasso_and_is_never_said_to_hold() -> None:
    system = live_system("vllm_async_load_fixed.py")
    verdicts, stats = check_liveness_bmc(system, depth=5)
    for v in verdicts:
        assert v.status is Status.UNKNOWN and not v.is_success
        assert "no lasso up to depth 5 (bounded)" in v.detail
        assert "weak fairness: finished_recving" in v.detail
    assert stats.depth == 5


def test_merged_fix_without_fairness_starves_the_completion() -> None:
    system = live_system("vllm_async_load_fixed.py")
    lengths = agree(system, 4, fairness=False)
    assert lengths == {PEF: 2, RT: 2, WEQ: 2}
    v = by_prop(check_liveness_bmc(system, properties=[PEF], depth=4, fairness=False)[0])[PEF]
    assert v.trace is not None and v.trace.loop_start is not None
    loop = [s.instance.name for s in v.trace.steps[v.trace.loop_start:]]
    assert loop and "finished_recving" not in loop
    assert "enabled at every state but never taken" in v.trace.reason
    assert v.detail.startswith("loop at step 2 of 2;")


# -- the other shipped models at small sizes ------------------------------------------------

SMALL = {"requests": 2, "pages": 2, "max_need": 2}


@pytest.mark.parametrize("name, sizes, depth", [
    ("buggy_pd.py", SMALL, 6),
    ("free_before_drain.py", SMALL, 5),
    ("patched.py", dict(SMALL, requests=1), 6),
    ("single_node.py", SMALL, 6),
])
def test_shipped_models_agree_with_the_explicit_engine(name: str, sizes: dict[str, int],
                                                       depth: int) -> None:
    system = live_system(name, sizes)
    lengths = agree(system, depth)
    if name in ("buggy_pd.py", "single_node.py"):  # a request whose pages are never freed
        assert lengths[PEF] == lengths[RT] == 6 and lengths[WEQ] is None
    else:
        assert set(lengths.values()) == {None}


# -- generated models with planted leaks ------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(planted())
def test_generated_leaks_agree_with_explicit_within_the_bound(tmp_path_factory: Any,
                                                              case: Any) -> None:
    phases, moves = case
    path = tmp_path_factory.mktemp("gen") / "gen.py"
    path.write_text(gen_model(phases, moves))
    system = live_system(path)
    agree(system, 6, props=[PEF])


# -- re-execution, CLI ----------------------------------------------------------------------

def test_a_lasso_that_does_not_re_execute_is_an_internal_error(monkeypatch: Any) -> None:
    system = live_system("vllm_async_load_fixed.py")
    real = symbolic._lasso_from_model

    def off_by_one(*args: Any) -> tuple[Any, int]:
        schedule, loop_start = real(*args)
        return schedule, (loop_start + 1) % len(schedule)  # the loop no longer closes

    monkeypatch.setattr(symbolic, "_lasso_from_model", off_by_one)
    with pytest.raises(InternalError):
        check_liveness_bmc(system, properties=[PEF], depth=3, fairness=False)


def test_live_command_engine_bmc(tmp_path: Path) -> None:
    leak = str(MODELS / "vllm_async_load_leak.py")
    fixed = str(MODELS / "vllm_async_load_fixed.py")
    code, out, _ = live_cli("live", leak, "--engine", "bmc", "--depth", "6", "--property", PEF)
    assert code == 1 and "VIOLATED (bmc-lasso" in out and "lasso of 6 steps" in out
    assert "bounded" in out and "deadlock-freedom" in out
    code, out, _ = live_cli("live", fixed, "--engine", "bmc", "--depth", "3", "--no-deadlock")
    assert code == 3 and "UNKNOWN" in out and "✔" not in out and "HOLDS (" not in out
    code, out, _ = live_cli("live", fixed, "--engine", "bmc", "--depth", "3", "--no-fairness",
                            "--property", PEF, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1
    (pef, dl) = doc["verdicts"]
    assert pef["method"] == "bmc-lasso" and isinstance(pef["trace"]["loop_start"], int)
    assert dl["property"] == DEADLOCK and dl["status"] == "UNKNOWN"
    again = lasso_from_json(live_system(fixed), pef["trace"])
    assert again.loop_start == pef["trace"]["loop_start"]
    assert live_cli("live", fixed, "--depth", "3")[0] == 2  # --depth needs --engine bmc
    assert live_cli("live", fixed, "--engine", "bmc", "--max-states", "9")[0] == 2
    assert live_cli("live", fixed, "--engine", "bmc", "--depth", "0")[0] == 2
    assert live_cli("live", fixed, "--engine", "nope")[0] == 2
