"""The Promela peers in benchmarks/peers/ explore exactly kvspec's state space.

benchmarks/peers/compare.py times SPIN against kvspec on the claim that both tools
search the same states; these tests keep that claim true as the models, the
property library or the Promela files change: equal state and transition counts
(with every property and with a selection, which changes the stored monitor
variables) and equally long shortest counterexamples. Skipped without ``spin``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvspec.engines.explicit import ExplicitOutcome, explore
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))

import spin_pan  # noqa: E402

pytestmark = pytest.mark.skipif(not spin_pan.available(),
                                reason="SPIN is not installed (apt-get install -y spin)")


def kvspec_search(model: str, requests: int, pages: int, properties: list[str] | None
                  ) -> ExplicitOutcome:
    system = compile_model(load_model(ROOT / "models" / f"{model}.py"),
                           {"requests": requests, "pages": pages}, properties=properties)
    return explore(system, symmetry=False, coverage=False)


@pytest.mark.parametrize("model, requests, pages, properties", [
    ("patched", 2, 2, None),
    ("buggy_pd", 2, 3, None),
    ("buggy_pd", 2, 3, ["no-reuse-before-drain"]),
    ("patched", 1, 4, ["no-decode-after-rejection"]),
])
def test_same_state_space(tmp_path: Path, model: str, requests: int, pages: int,
                          properties: list[str] | None) -> None:
    ours = kvspec_search(model, requests, pages, properties)
    assert ours.complete
    pan = spin_pan.build(model, requests, pages, tmp_path, properties=properties,
                         optimize="-O0")
    theirs = spin_pan.run(pan, bits=16)
    assert theirs.errors == 0
    assert theirs.states == ours.stats.states
    # pan counts stored + matched states: every transition, plus the initial state
    assert theirs.transitions == ours.stats.transitions + 1


@pytest.mark.parametrize("prop", ["rejection-is-terminal", "no-read-beyond-written"])
def test_same_shortest_counterexample(tmp_path: Path, prop: str) -> None:
    ours = kvspec_search("buggy_pd", 2, 3, [prop])
    (verdict,) = ours.verdicts
    assert verdict.status.value == "VIOLATED" and verdict.trace is not None
    pan = spin_pan.build("buggy_pd", 2, 3, tmp_path, properties=[prop],
                         stop_at_violation=True, bfs=True, optimize="-O0")
    theirs = spin_pan.run(pan, bits=16)
    assert theirs.errors == 1
    assert theirs.counterexample_steps == len(verdict.trace)


def test_patched_holds_in_spin(tmp_path: Path) -> None:
    """With assertions on, SPIN finds no violation in the fixed design either."""
    pan = spin_pan.build("patched", 2, 2, tmp_path, stop_at_violation=True, optimize="-O0")
    theirs = spin_pan.run(pan, bits=16)
    assert theirs.errors == 0 and theirs.error_depth is None
    assert theirs.states == kvspec_search("patched", 2, 2, None).stats.states
