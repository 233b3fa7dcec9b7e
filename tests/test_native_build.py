"""The native build: a large generated search compiles as two translation units (in
parallel when a core is free) and computes exactly what the single program computes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import system_of
from test_native import summary

from kvspec.engines.canon import Canonicalizer
from kvspec.engines.native import available, build, units
from kvspec.engines.native.codegen import generate
from kvspec.engines.native.run import explore_native
from kvspec.lang.symmetry import analyse_symmetry

pytestmark = pytest.mark.skipif(not available(), reason="no C compiler (cc, gcc or clang)")


def test_a_large_model_is_two_units_each_declaring_what_the_other_defines() -> None:
    system = system_of("patched.py", {"requests": 3, "pages": 6})
    report = analyse_symmetry(system, enabled=True)
    gen = generate(system, Canonicalizer(system.schema, report.requests, report.pages))
    assert len(gen.units) == 2
    a, b = gen.units
    moved = [line.split("int ")[1].split("(")[0] for line in b.splitlines()
             if "int kv_expand_" in line and line.endswith("{")]
    assert moved, "the second unit defines instance functions"
    for name in moved:
        assert f"{name}(kv_ctx" in a and f"static __attribute__((noinline)) int {name}(" not in a
    assert "kv_x_batch_push(" in a and "#define kv_batch_push kv_x_batch_push" in b


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("symmetry", [True, False])
def test_split_and_single_unit_builds_search_alike(symmetry: bool, parallel: bool,
                                                   tmp_path: Path, monkeypatch: Any) -> None:
    system = system_of("patched.py")
    assert len(generate(system, None).units) == 2  # large enough to be split
    monkeypatch.setattr(build, "idle_cores", lambda: 2 if parallel else 0)
    split = summary(explore_native(system, symmetry=symmetry, cache=tmp_path / "split"))
    monkeypatch.setattr(units, "MIN_SPLIT", 10 ** 12)
    single = summary(explore_native(system, symmetry=symmetry, cache=tmp_path / "single"))
    assert split == single
    assert split["states"] > 1
