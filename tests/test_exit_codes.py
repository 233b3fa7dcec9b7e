"""Exit codes you can trust: declared dependencies, the CI script, ``python -m kvspec``,
internal errors (70), bad option values (2, before any work) and Ctrl-C (130)."""
from __future__ import annotations

import ast
import ctypes
import importlib.metadata
import json
import re
import shlex
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import MODELS, ROOT, run_cli

import kvspec.cli
import kvspec.engines.auto
import kvspec.engines.explicit
import kvspec.engines.fuzz
import kvspec.proofs.certificate
from kvspec.lang.errors import ModelError, UsageError

PROPS = ("no-decode-after-rejection", "rejection-is-terminal", "no-read-beyond-written",
         "no-reuse-before-drain")

# -- 1. every third-party import is declared ------------------------------------------------

#: import name -> distribution, for what importlib.metadata cannot tell (not installed)
DISTRIBUTIONS = {"z3": "z3-solver", "torch": "torch", "numpy": "numpy",
                 "hypothesis": "hypothesis", "networkx": "networkx", "graphviz": "graphviz",
                 "rich": "rich", "pytest": "pytest", "yaml": "pyyaml", "PIL": "pillow",
                 "tomli": "tomli", "fastjsonschema": "fastjsonschema",
                 "jsonschema": "jsonschema"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _third_party_imports() -> dict[str, list[str]]:
    """Top-level module -> the kvspec files that import it (absolute imports only)."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "kvspec").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in ("__future__", "kvspec"):
                    continue
                found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def _declared() -> set[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    names = set()
    for req in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        assert match, f"cannot read the requirement {req!r}"
        names.add(_normalize(match.group(1)))
    return names


def test_every_third_party_import_is_a_declared_dependency() -> None:
    installed = importlib.metadata.packages_distributions()
    declared = _declared()
    imports = _third_party_imports()
    assert "z3" in imports and "numpy" in imports  # the walk sees the engines
    missing = []
    for module, files in sorted(imports.items()):
        dists = {_normalize(d) for d in installed.get(module, [])}
        if module in DISTRIBUTIONS:
            dists.add(_normalize(DISTRIBUTIONS[module]))
        assert dists, f"{module} (imported by {files[0]}): unknown distribution; add it to " \
                      "DISTRIBUTIONS"
        if not dists & declared:
            missing.append(f"{module} ({sorted(dists)}) imported by {', '.join(sorted(set(files)))}")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(missing)


def test_the_console_script_and_python_dash_m_agree() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'kvspec = "kvspec.cli:entry"' in text
    assert (ROOT / "kvspec" / "__main__.py").is_file()


# -- 2. the CI script -----------------------------------------------------------------------

def _readme_test_command() -> list[str]:
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("pip install") and "[test" in line and "pytest" in line:
            return [part.strip() for part in line.split("&&")]
    raise AssertionError("the README has no 'pip install ...[test...] && ... pytest' line")


def test_ci_runs_the_readme_test_command_in_a_fresh_virtualenv() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in script.splitlines()
             if line.strip() and not line.strip().startswith("#")]
    assert "set -euo pipefail" in lines
    install, test = _readme_test_command()
    assert shlex.split(install)[:3] == ["pip", "install", "-e"]
    venv = [i for i, line in enumerate(lines) if re.match(r"python3 -m venv \S+", line)]
    activate = [i for i, line in enumerate(lines) if re.match(r'\. "?\S+/bin/activate"?$', line)]
    assert venv and activate and venv[0] < activate[0], "no fresh virtualenv is activated"
    assert install in lines, f"the README's install command {install!r} is not in .ci/run"
    assert lines.index(install) > activate[0]
    runs = [line for line in lines if test in line]
    assert runs and lines.index(runs[0]) > activate[0], f"{test!r} is not run from the venv"
    for tool, package in (("dot", "graphviz"), ("spin", "spin"), ("cc", "gcc")):
        assert f"command -v {tool}" in script and f'missing="$missing {package}"' in script
    assert "apt-get install -y -qq $missing" in script
    assert re.search(r'"\$status" -eq 5', script), "pytest's 'no tests collected' is not handled"
    assert subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")]).returncode == 0


# -- 3. python -m kvspec --------------------------------------------------------------------

def _python_m(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvspec", *argv], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def test_python_dash_m_kvspec() -> None:
    from kvspec import __version__
    done = _python_m("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"kvspec {__version__}"
    done = _python_m("show", str(MODELS / "single_node.py"))
    assert done.returncode == 0 and "SingleNode" in done.stdout
    done = _python_m("verify")
    assert done.returncode == 2 and "Traceback" not in done.stderr


# -- 4. an unexpected exception is exit 70, traceback only with --debug ---------------------

def test_fuzz_with_zero_steps_is_a_usage_error_not_a_crash() -> None:
    done = _python_m("fuzz", str(MODELS / "patched.py"), "--steps", "0")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert "--steps" in done.stderr


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("boom\nsecond line")


def test_unexpected_exception_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvspec.engines.explicit, "explore", _boom)
    res = run_cli("verify", str(MODELS / "single_node.py"), "--engine", "explicit")
    assert res.code == 70
    assert res.err == ("kvspec: internal error: RuntimeError: boom second line (a bug in "
                       "kvspec; rerun with --debug for the traceback; please report it)\n")
    assert "Traceback" not in res.err and "HOLDS" not in res.out
    for argv in (["--debug", "verify"], ["verify", "--debug"]):
        res = run_cli(*argv, str(MODELS / "single_node.py"), "--engine", "explicit")
        assert res.code == 70
        assert "Traceback (most recent call last)" in res.err and "RuntimeError: boom" in res.err
        assert res.err.splitlines()[-1].startswith("kvspec: internal error: RuntimeError: boom")


def test_internal_error_in_every_command_is_70(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setattr(kvspec.engines.fuzz, "run_fuzz", _boom)
    monkeypatch.setattr(kvspec.cli, "compile_model", _boom)
    for argv in (["show", str(MODELS / "patched.py")],
                 ["graph", str(MODELS / "patched.py"), "-o", str(tmp_path / "g.dot")],
                 ["verify", str(MODELS / "patched.py")]):
        res = run_cli(*argv)
        assert res.code == 70 and res.err.startswith("kvspec: internal error:"), argv
        assert len(res.err.splitlines()) == 1


@pytest.mark.parametrize("exc", [ModelError("pages=1000000000 is too large", "m.py", 3),
                                 UsageError("--size pages: too large")])
@pytest.mark.parametrize("command", ["verify", "show", "graph", "fuzz", "check-proof"])
def test_model_and_usage_errors_are_one_line_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path, command: str,
                                                    exc: Exception) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc

    monkeypatch.setattr(kvspec.cli, "compile_model", fail)
    argv = {"verify": ["verify"], "show": ["show"], "fuzz": ["fuzz"],
            "graph": ["graph", "-o", str(tmp_path / "g.dot")],
            "check-proof": ["check-proof", str(ROOT / "proofs" / next(
                p.name for p in (ROOT / "proofs").glob("patched.*.json")))]}[command]
    res = run_cli(*argv, str(MODELS / "patched.py"), "--size", "pages=1000000000")
    assert res.code == 2 and res.out == ""
    assert res.err.startswith("kvspec: error: ") and len(res.err.splitlines()) == 1
    assert str(exc) in res.err


# -- 5. bad option values: one line, exit 2, before any work ---------------------------------

BAD_VALUES = [
    (["fuzz", "M", "--steps", "0"], "--steps"),
    (["fuzz", "M", "--steps", "-3"], "--steps"),
    (["fuzz", "M", "--max-examples", "0"], "--max-examples"),
    (["fuzz", "M", "--timeout", "0"], "--timeout"),
    (["fuzz", "M", "--seed", "x"], "--seed"),
    (["verify", "M", "--depth", "-1"], "--depth"),
    (["verify", "M", "--depth", "three"], "--depth"),
    (["verify", "M", "--max-states", "-5"], "--max-states"),
    (["verify", "M", "--max-states", "0"], "--max-states"),
    (["verify", "M", "--timeout", "-1"], "--timeout"),
    (["verify", "M", "--timeout", "0"], "--timeout"),
    (["verify", "M", "--timeout", "nan"], "--timeout"),
    (["verify", "M", "--timeout", "inf"], "--timeout"),
    (["verify", "M", "--timeout", "soon"], "--timeout"),
    (["verify", "M", "--render", "cex.jpg"], "--render"),
    (["verify", "M", "--render", "cex"], "--render"),
    (["verify", "M", "--size", "requests=three"], "--size"),
    (["verify", "M", "--size", "requests=2.5"], "--size"),
    (["verify", "M", "--size", "requests"], "--size"),
    (["show", "M", "--size", "pages=x"], "--size"),
    (["graph", "M", "-o", "g.jpg"], "--output"),
    (["graph", "M", "--max-states", "0", "-o", "g.dot"], "--max-states"),
    (["render", "T.json", "-o", "x.bmp"], "--output"),
    (["verify", "M", "--engine", "magic"], "--engine"),
    (["replay", "T.json", "--device", "tpu"], "--device"),
]


@pytest.mark.parametrize(("argv", "option"), BAD_VALUES)
def test_bad_option_values_are_usage_errors_before_any_work(
        monkeypatch: pytest.MonkeyPatch, argv: list[str], option: str) -> None:
    monkeypatch.setattr(kvspec.cli, "load_model", _boom)  # no work may start
    argv = [str(MODELS / "patched.py") if a == "M" else a for a in argv]
    res = run_cli(*argv)
    assert res.code == 2, res.err
    assert res.out == "" and len(res.err.splitlines()) == 1, res.err
    assert option in res.err and "error" in res.err and "Traceback" not in res.err


def test_timeout_is_the_same_option_everywhere() -> None:
    parser = kvspec.cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = {name: p for name, p in sub.choices.items()}  # type: ignore[union-attr]
    with_timeout = {name: next(a for a in p._actions if a.dest == "timeout")
                    for name, p in commands.items()
                    if any(a.dest == "timeout" for a in p._actions)}
    assert set(with_timeout) >= {"verify", "fuzz"}
    for action in with_timeout.values():
        assert action.type is kvspec.cli.positive_seconds and action.default is None


def test_help_goes_to_the_output_stream() -> None:
    res = run_cli("--help")
    assert res.code == 0 and "verify" in res.out and "130 interrupted" in " ".join(res.out.split())
    res = run_cli("verify", "--help")
    assert res.code == 0 and "--timeout" in res.out and res.err == ""


# -- 6. Ctrl-C: exit 130, everything undecided is UNKNOWN ------------------------------------

def _interrupt(*args: Any, **kwargs: Any) -> Any:
    raise KeyboardInterrupt


def _assert_interrupted_text(res: Any) -> None:
    assert res.code == 130
    assert res.err.splitlines()[-1] == "kvspec: interrupted"
    for prop in PROPS:
        assert re.search(rf"\? {prop}\s+UNKNOWN \(interrupted\)", res.out), res.out
    assert "HOLDS" not in res.out and "PROVED" not in res.out and "VIOLATED" not in res.out


@pytest.mark.parametrize(("module", "name", "argv"), [
    (kvspec.engines.explicit, "explore", ["--engine", "explicit"]),
    (kvspec.engines.auto, "run_auto", []),
])
def test_interrupted_verify_reports_unknown(monkeypatch: pytest.MonkeyPatch, module: Any,
                                            name: str, argv: list[str]) -> None:
    monkeypatch.setattr(module, name, _interrupt)
    _assert_interrupted_text(run_cli("verify", str(MODELS / "patched.py"), *argv))


def _ctypes_argument_error(message: str) -> Any:
    def raise_it(*args: Any, **kwargs: Any) -> Any:
        raise ctypes.ArgumentError(message)
    return raise_it


def test_ctrl_c_inside_a_z3_call_is_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """ctypes turns a Ctrl-C that arrives while it converts a Z3 call's arguments into
    an ArgumentError naming KeyboardInterrupt: that is still an interrupt (130), not an
    internal error; any other ArgumentError stays an internal error (70)."""
    monkeypatch.setattr(kvspec.engines.auto, "run_auto",
                        _ctypes_argument_error("argument 1: KeyboardInterrupt: "))
    _assert_interrupted_text(run_cli("verify", str(MODELS / "patched.py")))
    monkeypatch.setattr(kvspec.engines.auto, "run_auto",
                        _ctypes_argument_error("argument 2: TypeError: wrong type"))
    res = run_cli("verify", str(MODELS / "patched.py"))
    assert res.code == 70 and "internal error: ArgumentError" in res.err


def test_interrupted_verify_json_is_a_result_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvspec.engines.explicit, "explore", _interrupt)
    res = run_cli("verify", str(MODELS / "buggy_pd.py"), "--engine", "explicit", "--json")
    assert res.code == 130 and res.err == "kvspec: interrupted\n"
    doc = json.loads(res.out)
    assert doc["format"] == "kvspec-result/1" and doc["exit_code"] == 130 and doc["interrupted"]
    assert {v["status"] for v in doc["verdicts"]} == {"UNKNOWN"}
    assert {v["method"] for v in doc["verdicts"]} == {"interrupted"}


def test_interrupted_fuzz_and_check_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvspec.engines.fuzz, "run_fuzz", _interrupt)
    _assert_interrupted_text(run_cli("fuzz", str(MODELS / "patched.py")))
    monkeypatch.setattr(kvspec.proofs.certificate, "check_certificate", _interrupt)
    cert = next((ROOT / "proofs").glob("patched.*.json"))
    _assert_interrupted_text(run_cli("check-proof", str(cert), str(MODELS / "patched.py")))


def test_interrupted_before_the_model_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvspec.cli, "load_model", _interrupt)
    res = run_cli("verify", str(MODELS / "patched.py"))
    assert res.code == 130 and res.out == "" and res.err == "kvspec: interrupted\n"


@pytest.mark.parametrize("search", [["--backend", "python"],
                                    ["--backend", "native", "--no-symmetry"],
                                    ["--backend", "native", "--no-symmetry", "--workers", "2"],
                                    ["--backend", "native", "--no-symmetry", "--dfs"]])
def test_sigint_on_a_real_process(search: list[str]) -> None:
    """A real Ctrl-C during a long exhaustive search, on both backends (the Python
    search lets KeyboardInterrupt through; the native loop checks for it)."""
    argv = [sys.executable, "-m", "kvspec", "verify", str(MODELS / "patched.py"), "--engine",
            "explicit", "--size", "requests=3,pages=8", *search]
    if "native" in search and shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    # a run of one state first: it builds and caches the compiled search (the signal is
    # for the search), and its length says how long start-up and loading take on this
    # machine now, so that the signal does not arrive before the search has begun
    started = time.monotonic()
    subprocess.run([*argv, "--max-states", "1"], cwd=ROOT, capture_output=True, timeout=300)
    warm_up = time.monotonic() - started
    proc = subprocess.Popen(
        argv, cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(min(30.0, max(3.0, 1.5 * warm_up + 1.0)))
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "kvspec: interrupted" in err and "Traceback" not in err
    assert "UNKNOWN (interrupted)" in out and "HOLDS" not in out
