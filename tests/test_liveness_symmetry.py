"""The liveness search on the symmetry quotient (``kvspec live --symmetry``) against the
unreduced search: identical verdicts for every liveness property on the shipped models,
on generated models with planted leaks over several interchangeable requests and pages,
and on random lifecycle models with random fairness; lassos are concrete runs that
re-execute, and their reported lengths are their real lengths."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from modelgen import random_model
from test_liveness import live_cli, live_system

from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.system import System
from kvspec.liveness import check_liveness
from kvspec.liveness.lasso import LivenessTrace, lasso_from_json
from kvspec.liveness.live_cmd import compile_for_liveness
from kvspec.verdict import Status, Verdict


def statuses(verdicts: list[Verdict]) -> dict[str, Status]:
    return {v.prop: v.status for v in verdicts}


def assert_honest(v: Verdict, system: System) -> None:
    """A lasso's detail names its real prefix and loop, and it replays from JSON."""
    if v.trace is None:
        return
    trace = v.trace
    assert isinstance(trace, LivenessTrace)
    if trace.loop_start is None:
        return
    assert v.detail.startswith(f"{trace.prefix_len}-step prefix, ")
    assert ("stops" if trace.loop_len == 0 else f"loop of {trace.loop_len}") in v.detail
    again = lasso_from_json(system, json.loads(json.dumps(trace.to_json())))
    assert len(again.steps) == len(trace.steps) and again.loop_start == trace.loop_start


def differential(system: System, fairness: bool = True, deadlock: bool = True
                 ) -> tuple[list[Verdict], list[Verdict], Any, Any]:
    plain, ps = check_liveness(system, fairness=fairness, deadlock=deadlock)
    reduced, rs = check_liveness(system, fairness=fairness, deadlock=deadlock, symmetry=True)
    assert statuses(plain) == statuses(reduced), (statuses(plain), statuses(reduced))
    for v in reduced:
        assert_honest(v, system)
    return plain, reduced, ps, rs


SHIPPED = [("vllm_async_load_leak.py", {"requests": 2}), ("vllm_async_load_fixed.py", {"requests": 2}),
           ("vllm_async_load_fixed.py", {"requests": 3}),
           ("buggy_pd.py", {"requests": 2, "pages": 3}), ("patched.py", {"requests": 2, "pages": 3}),
           ("free_before_drain.py", {"requests": 2, "pages": 3}),
           ("single_node.py", {"requests": 2, "pages": 3})]


@pytest.mark.parametrize("name,sizes", SHIPPED)
@pytest.mark.parametrize("fairness", [True, False])
def test_shipped_models_same_verdicts_with_and_without_symmetry(name: str, sizes: dict[str, int],
                                                                fairness: bool) -> None:
    system = live_system(name, sizes)
    _, _, ps, rs = differential(system, fairness)
    assert rs.symmetry["requests"] or rs.symmetry["pages"]
    assert rs.states < ps.states


def test_fixed_model_without_fairness_gives_a_real_loop_through_the_quotient() -> None:
    # the starving loop is found on representatives and confirmed on concrete states
    system = live_system("vllm_async_load_fixed.py", {"requests": 3})
    _, reduced, _, _ = differential(system, fairness=False, deadlock=False)
    loops = [v for v in reduced if v.status is Status.VIOLATED]
    assert loops and all(v.trace is not None and v.trace.loop_start is not None
                         and v.trace.loop_start < len(v.trace.steps) for v in loops)


def test_live_command_symmetry_flag(tmp_path: Path) -> None:
    model = "models/vllm_async_load_leak.py"
    code_on, out_on, _ = live_cli("live", model, "--symmetry")
    code_off, out_off, _ = live_cli("live", model)
    assert code_on == code_off == 1
    assert "symmetry reduction over requests" in out_on
    assert "no symmetry reduction" in out_off
    code, out, _ = live_cli("live", model, "--symmetry", "--json")
    doc = json.loads(out)
    assert doc["stats"]["symmetry"]["requests"] is True


# -- generated models with planted leaks, several interchangeable requests and pages ---------

def gen_symmetric(phases: int, moves: list[tuple[int, int, int, str, str]], requests: int,
                  pages: int) -> str:
    """Per-request phases; a move of ``r`` may wait for another request ``q`` in a
    phase, and allocates or frees page ``p`` (owner tracked per page)."""
    lines = [
        "from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require",
        "",
        "class Gen(Model):",
        f"    requests = Requests({requests})",
        f"    pages = Pages({pages})",
        f"    ph = requests.var(Int(0, {phases - 1}), init=0)",
        "    owner = pages.var(requests.optional, init=None)",
        "",
    ]
    for k, (a, b, c, ev, fair) in enumerate(moves):
        deco = "@action" if fair == "none" else f'@action(fair="{fair}")'
        lines += [f"    {deco}", f"    def m{k}(s, r: Request, q: Request, p: Page):",
                  f"        require(s.ph[r] == {a})"]
        if c >= 0:
            lines.append(f"        require(q != r and s.ph[q] == {c})")
        else:
            lines.append("        require(q == r)")
        if ev == "alloc":
            lines += ["        require(s.owner[p] is None)", "        s.owner[p] = r",
                      "        emit.alloc(r, p)"]
        elif ev == "free":
            lines += ["        require(s.owner[p] == r)", "        s.owner[p] = None",
                      "        emit.free(r, p)"]
        elif ev == "admit":
            lines += ["        require(p == 0)", "        emit.admit(r)"]
        elif ev == "finish":
            lines += ["        require(p == 0)", "        emit.finish(r)"]
        else:
            lines.append("        require(p == 0)")
        lines += [f"        s.ph[r] = {b}", ""]
    return "\n".join(lines) + "\n"


@st.composite
def planted_symmetric(draw: Any) -> tuple[int, list[tuple[int, int, int, str, str]], int, int]:
    phases = draw(st.integers(2, 3))
    moves = []
    for _ in range(draw(st.integers(1, 5))):
        moves.append((draw(st.integers(0, phases - 1)), draw(st.integers(0, phases - 1)),
                      draw(st.integers(-1, phases - 1)),
                      draw(st.sampled_from(["alloc", "alloc", "free", "admit", "finish",
                                            "none"])),
                      draw(st.sampled_from(["none", "weak", "strong"]))))
    return phases, moves, draw(st.integers(2, 3)), draw(st.integers(1, 2))


@settings(max_examples=40, deadline=None)
@given(planted_symmetric())
def test_generated_leaks_same_verdicts_with_and_without_symmetry(tmp_path_factory: Any,
                                                                  case: Any) -> None:
    phases, moves, requests, pages = case
    path = tmp_path_factory.mktemp("gen") / "gen.py"
    path.write_text(gen_symmetric(phases, moves, requests, pages))
    system = live_system(path)
    for fairness in (True, False):
        differential(system, fairness)


@pytest.mark.parametrize("seed", range(12))
def test_random_lifecycles_with_random_fairness_same_verdicts(seed: int, tmp_path: Path) -> None:
    gen = random_model(seed, small=True)
    path = tmp_path / "gen.py"
    path.write_text(gen.source)
    try:
        system = compile_for_liveness(load_model(path, gen.class_name), {})
        rng = random.Random(seed)
        decl = system.loaded.decl.fairness
        for a in system.actions:
            decl[a.name] = rng.choice(["weak", "strong", None, None])
            if decl[a.name] is None:
                del decl[a.name]
        plain, _ = check_liveness(system, max_states=20000)
    except ModelError:
        return  # a risky model: its error is the safety engines' business
    reduced, _ = check_liveness(system, max_states=20000, symmetry=True)
    known = [p for p, s in statuses(plain).items() if s is not Status.UNKNOWN]
    rs = statuses(reduced)
    for prop in known:
        if rs[prop] is not Status.UNKNOWN:  # a state limit may cut one of the two short
            assert rs[prop] is statuses(plain)[prop], prop
    for v in reduced:
        assert_honest(v, system)
