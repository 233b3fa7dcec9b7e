"""Derived sizes: ``cap = Size(derived=lambda sz: sz.pages // 2)`` is computed from the
resolved sizes of every compilation, used like any size, checked against its bounds,
and cannot be set on the command line."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import run_cli
from test_differential import compile_source

from kvspec.lang.errors import ModelError

MODEL = textwrap.dedent('''\
    from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, invariant, require, var


    class D(Model):
        requests = Requests(2)
        pages = Pages(4)
        cap = Size(derived=DERIVED, minimum=1)
        used = var(Int(0, "cap"), init=0)
        owner = pages.var(requests.optional, init=None)

        @action
        def alloc(s, r: Request, p: Page):
            require(s.owner[p] is None and s.used < s.cap)
            s.owner[p] = r
            s.used += 1

        @invariant
        def at_most_cap(s) -> bool:
            return (s.owner != None).count() <= s.cap
    ''')


def _model(derived: str = "lambda sz: sz.pages // 2") -> str:
    return MODEL.replace("DERIVED", derived)


@pytest.mark.parametrize("pages, cap", [(2, 1), (4, 2), (7, 3)])
def test_the_derived_size_follows_the_sizes(pages: int, cap: int, tmp_path: Path) -> None:
    path = tmp_path / "d.py"
    path.write_text(_model())
    run = run_cli("verify", str(path), "--size", f"pages={pages}", "--property", "at-most-cap",
                  "--engine", "explicit", "--backend", "python")
    assert run.code == 0, run.out + run.err
    assert f"pages={pages}, cap={cap}" in run.out


def test_a_derived_size_cannot_be_set(tmp_path: Path) -> None:
    path = tmp_path / "d.py"
    path.write_text(_model())
    run = run_cli("verify", str(path), "--size", "cap=3")
    assert run.code == 2
    assert "size cap is derived from the other sizes; set those instead (here it is 2)" in run.err


@pytest.mark.parametrize("engine", ["pdr", "all-sizes", "auto"])
def test_engines_that_compile_the_model_again_keep_its_derived_size(engine: str,
                                                                    tmp_path: Path) -> None:
    """PDR, the all-sizes check and auto recompile the model with the system's own
    sizes, the derived one included: that is the same model, not a user override."""
    path = tmp_path / "d.py"
    path.write_text(_model())
    run = run_cli("verify", str(path), "--property", "at-most-cap", "--engine", engine)
    assert run.code == 0, run.out + run.err
    assert ("PROVED" in run.out or "HOLDS" in run.out) and "cap=2" in run.out


def test_a_derived_size_is_checked_against_its_bounds(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as exc:
        compile_source(_model("lambda sz: sz['pages'] - 4"), tmp_path, "D")
    assert "size cap=0: must be at least 1" in str(exc.value)
    assert exc.value.line == 7


@pytest.mark.parametrize("derived, message", [
    ("lambda sz: sz.pagez", "no size named 'pagez'"),
    ("lambda sz: sz.pages / 2", "returned 2.0, not an int"),
])
def test_a_broken_derivation_names_the_declaration(derived: str, message: str,
                                                   tmp_path: Path) -> None:
    with pytest.raises(ModelError) as exc:
        compile_source(_model(derived), tmp_path, "D")
    assert message in str(exc.value) and exc.value.line == 7
