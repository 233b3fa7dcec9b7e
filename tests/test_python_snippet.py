"""Tests for kvspec.report.python_snippet: a counterexample as a runnable program."""
from __future__ import annotations

import copy
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvspec.cli import main
from kvspec.engines.explicit import explore
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.report.python_snippet import trace_program

ROOT = Path(__file__).resolve().parents[1]
MODEL = "models/buggy_pd.py"
SIZES = {"requests": 1, "pages": 3}


@pytest.fixture(scope="module")
def traces() -> dict[str, dict[str, Any]]:
    system = compile_model(load_model(ROOT / MODEL), SIZES)
    return {v.prop: v.trace.to_json() for v in explore(system).verdicts if v.trace}


def run(program: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "cex.py"
    path.write_text(program)
    return subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_program_reexecutes_the_counterexample(traces: dict[str, dict[str, Any]],
                                               tmp_path: Path) -> None:
    trace = traces["no-read-beyond-written"]
    program = trace_program(trace, MODEL)
    compile(program, "cex.py", "exec")
    assert "from kvspec.testing import load" in program
    done = run(program, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(trace["steps"]) + 1
    for line, step in zip(lines, trace["steps"]):
        assert step["label"] in line
    assert lines[-1].startswith("VIOLATED no-read-beyond-written: ")
    assert trace["reason"] in lines[-1]


def test_every_counterexample_program_runs(traces: dict[str, dict[str, Any]],
                                           tmp_path: Path) -> None:
    programs = [trace_program(t, MODEL) for t in traces.values()]
    # one interpreter for all, to keep the test fast
    runner = "\n".join(f"exec(compile({p!r}, 'cex{i}.py', 'exec'), {{'__name__': 'cex'}})"
                       for i, p in enumerate(programs))
    done = run(runner, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("VIOLATED ") == len(traces)


def test_program_fails_when_the_violation_does_not_reproduce(
        traces: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    trace = copy.deepcopy(traces["no-read-beyond-written"])
    trace["steps"] = trace["steps"][:-1]          # stop before the violating step
    done = run(trace_program(trace, MODEL), tmp_path)
    assert done.returncode == 1 and "no longer reproduces" in done.stderr
    trace = copy.deepcopy(traces["no-read-beyond-written"])
    trace["steps"] = [trace["steps"][-1]]         # the violating step is not enabled first
    done = run(trace_program(trace, MODEL), tmp_path)
    assert done.returncode == 1 and "is not enabled" in done.stderr


def test_initial_state_counterexample_compiles(traces: dict[str, dict[str, Any]]) -> None:
    trace = dict(traces["no-read-beyond-written"], steps=[])
    program = trace_program(trace, MODEL)
    compile(program, "cex.py", "exec")
    assert "initial state" in program


def test_cli_writes_the_program_to_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "cex.py"
    target.parent.mkdir()
    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", str(ROOT / MODEL), "--engine", "explicit", "--size",
                 "requests=1,pages=3", "--property", "rejection-is-terminal", "--format",
                 "python", "--python", str(target)], out=out, err=err)
    assert code == 1
    assert "#!/usr/bin/env python3" not in out.getvalue()  # not mixed into the report
    assert "VIOLATED" in out.getvalue()
    assert f"program for rejection-is-terminal written to {target}" in err.getvalue()
    program = target.read_text()
    assert "step('prealloc'" in program
    # only kvspec's public API; it finds the model relative to itself, from any directory
    imports = [line for line in program.splitlines() if line.startswith(("import", "from"))]
    assert imports == ["import sys", "from pathlib import Path", "from kvspec.testing import load"]
    done = subprocess.run([sys.executable, str(target)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("VIOLATED rejection-is-terminal")


def test_format_python_without_a_file_is_a_usage_error() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", str(ROOT / MODEL), "--format", "python"], out=out, err=err)
    assert code == 2 and out.getvalue() == ""
    assert err.getvalue() == ("kvspec: error: --format python needs --python FILE: the program "
                              "is written to a file, not mixed into the report\n")


def test_python_file_when_nothing_is_violated(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", str(ROOT / "models" / "single_node.py"), "--engine", "explicit",
                 "--python", str(tmp_path / "cex.py")], out=out, err=err)
    assert code == 0 and not (tmp_path / "cex.py").exists()
    assert "no program written: no property is violated" in err.getvalue()
