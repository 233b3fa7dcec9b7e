"""Regressions found reviewing index spaces, derived sizes and the native search."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import run_cli
from test_derived_sizes import _model as derived_model

ROOT = Path(__file__).resolve().parent.parent

#: the derived-size model of test_derived_sizes (capacity half the pages)
DERIVED = derived_model()


def test_pdr_proves_a_model_with_a_derived_size(tmp_path: Path) -> None:
    """PDR recompiles the model at a small size to sample states: the derived size is
    recomputed there, not passed back as an override (which is a usage error)."""
    path = tmp_path / "d.py"
    path.write_text(DERIVED)
    run = run_cli("verify", str(path), "--engine", "pdr", "--property", "at-most-cap")
    assert run.code == 0, run.out + run.err
    assert "PROVED" in run.out


def test_all_sizes_with_a_derived_size_proves_at_the_fixed_size(tmp_path: Path) -> None:
    """A size derived from the number of pages is no constant of every size: the
    all-sizes engine proves at the given sizes only (it used to stop on a usage error)."""
    path = tmp_path / "d.py"
    path.write_text(DERIVED)
    run = run_cli("verify", str(path), "--engine", "all-sizes", "--property", "at-most-cap")
    assert "derived from the other sizes" not in run.err, run.err
    out = " ".join(run.out.split())  # the report wraps long lines
    assert run.code == 0, out
    assert "PROVED" in out and "not for all sizes" in out, out


def test_a_counterexample_program_replays_with_a_derived_size(tmp_path: Path) -> None:
    """The program of a counterexample names every size of the trace, the derived one
    too: loading the model at those sizes must not reject it."""
    path = tmp_path / "d.py"
    path.write_text(DERIVED.replace("<= s.cap", "< s.cap"))
    program = tmp_path / "cex.py"
    run = run_cli("verify", str(path), "--engine", "explicit", "--backend", "python",
                  "--property", "at-most-cap", "--python", str(program))
    assert run.code == 1, run.out + run.err
    assert '"cap": 2' in program.read_text()
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "VIOLATED at-most-cap" in done.stdout


def test_a_derived_size_given_its_own_value_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "d.py"
    path.write_text(DERIVED)
    ok = run_cli("verify", str(path), "--size", "pages=6,cap=3", "--engine", "explicit",
                 "--backend", "python", "--property", "at-most-cap")
    assert ok.code == 0, ok.out + ok.err
    bad = run_cli("verify", str(path), "--size", "pages=6,cap=2")
    assert bad.code == 2
    assert "size cap is derived from the other sizes; set those instead (here it is 3)" in bad.err


def test_count_of_a_uniform_array_mask_is_valid_code() -> None:
    """``count``/``any`` of ``array == v`` is generated as ``array.count(v)``; a monitor
    array no event changes is the expression ``(v,) * n``, which needs parentheses."""
    from types import SimpleNamespace

    from kvspec.lang import ir
    from kvspec.lang.pygen import PyGen

    gen = PyGen(SimpleNamespace(counts={"request": 3}), lambda f, a: f, {})
    uniform = ir.Uniform(0, None, ty=ir.VecT("m", "request", ir.IntT(0, 3)), line=1)
    for value, count in ((0, 3), (2, 0)):
        mask = ir.VecCompare("==", uniform, ir.Const(value, ty=ir.IntT(value, value), line=1),
                             ty=ir.MaskT("request"), line=1)
        for op, want in (("count", count), ("sum", count), ("any", count > 0)):
            code = gen.ex(ir.Reduce(op, mask, ty=ir.IntT(0, 3), line=1), None)  # type: ignore[arg-type]
            assert eval(code) == want, code  # noqa: S307 - the generated expression


def test_masks_over_different_spaces_are_named_once_plural(write_model) -> None:  # type: ignore[no-untyped-def]
    path = write_model("""
from kvspec import Model, Ranks, Request, Requests, action, require

class M(Model):
    requests = Requests(2)
    ranks = Ranks(2)
    f = requests.by(ranks).var(bool, init=False)
    g = requests.var(bool, init=False)

    @action
    def a(s, r: Request):
        require((s.f.any(axis=s.requests) & s.g).any())
""")
    run = run_cli("verify", str(path))
    assert run.code == 2
    assert "(mask over ranks & mask over requests)" in run.err, run.err
