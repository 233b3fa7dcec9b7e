"""The pytest plugin: with --kvspec (or `kvspec = true` in the ini options) the models
of [tool.kvspec] become test items with their expectations; without, nothing changes."""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvspec.gate.check

pytest_plugins = ["pytester"]

GATE_REPO = Path(__file__).resolve().parent / "gate_repo"
ENTRY_POINT = any(ep.name == "kvspec" and ep.value == "kvspec.pytest_plugin"
                  for ep in importlib.metadata.entry_points(group="pytest11"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(GATE_REPO, dest)
    return dest


def plugin_args() -> list[str]:
    """The installed entry point loads the plugin; an install that predates it needs -p."""
    return [] if ENTRY_POINT else ["-p", "kvspec.pytest_plugin"]


def pytest_in(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    if not ENTRY_POINT:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           *plugin_args(), *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_entry_point_is_declared() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    doc = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert doc["project"]["entry-points"]["pytest11"] == {"kvspec": "kvspec.pytest_plugin"}


def test_models_become_items_only_when_asked(repo: Path) -> None:
    off = pytest_in(repo, "-q")
    assert off.returncode == 5, off.stdout  # no tests: the plugin stays out of the way
    on = pytest_in(repo, "--kvspec", "-v")
    assert on.returncode == 0, on.stdout + on.stderr
    assert "14 passed" in on.stdout
    for node in ("pyproject.toml::transfer::no-reuse-before-drain PASSED",
                 "pyproject.toml::transfer::coverage PASSED",
                 "pyproject.toml::transfer::deadlock-freedom PASSED",
                 "pyproject.toml::legacy::writes-target-owned-pages PASSED"):
        assert node in on.stdout
    picked = pytest_in(repo, "--kvspec", "-q", "-k", "legacy")
    assert picked.returncode == 0 and "7 passed, 7 deselected" in picked.stdout


def test_the_ini_option_turns_it_on_and_failures_show_the_counterexample(repo: Path) -> None:
    shutil.copyfile(repo / "versions" / "regressed.py", repo / "lifecycle" / "transfer.py")
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n[tool.pytest.ini_options]\nkvspec = true\n")
    res = pytest_in(repo, "-q")
    assert res.returncode == 1
    assert "3 failed, 11 passed" in res.stdout
    assert "FAILED pyproject.toml::transfer::no-reuse-before-drain" in res.stdout
    assert "FAILED pyproject.toml::transfer::coverage" in res.stdout
    assert ("failed: no-reuse-before-drain started failing: VIOLATED (explicit, 4 steps); "
            "expected it to hold") in res.stdout
    assert "Counterexample for no-reuse-before-drain (4 steps" in res.stdout
    assert "dead action: release never fires" in res.stdout


def test_a_config_error_is_one_usage_line(repo: Path) -> None:
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('engine = "auto"', 'engine = "magic"'))
    res = pytest_in(repo, "--kvspec", "-q")
    assert res.returncode == 4
    assert "tool.kvspec.model[0].engine: unknown engine 'magic'" in res.stderr
    assert "Traceback" not in res.stderr + res.stdout


def test_each_model_runs_once_for_all_its_items(repo: Path, pytester: pytest.Pytester,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = kvspec.gate.check.check_model

    def counting(config: Any, model: Any, **kw: Any) -> Any:
        calls.append(model.name)
        return original(config, model, **kw)

    monkeypatch.setattr(kvspec.gate.check, "check_model", counting)
    for item in repo.iterdir():
        dest = pytester.path / item.name
        if item.is_dir():
            shutil.copytree(item, dest)
        else:
            shutil.copyfile(item, dest)
    result = pytester.runpytest_inprocess("--kvspec", "-p", "no:cacheprovider", *plugin_args())
    result.assert_outcomes(passed=14)
    assert calls == ["transfer", "legacy"]
