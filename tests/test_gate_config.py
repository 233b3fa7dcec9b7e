"""[tool.kvspec] configuration: finding the pyproject, resolving paths from the project
root, and one-line exit-2 messages naming the file and the key for every mistake."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from kvspec.gate.config import ConfigError, find_pyproject, load_config

GATE_REPO = Path(__file__).resolve().parent / "gate_repo"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the test repository (current design: the good version)."""
    dest = tmp_path / "repo"
    shutil.copytree(GATE_REPO, dest)
    return dest


def edit(repo: Path, old: str, new: str) -> None:
    path = repo / "pyproject.toml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_find_pyproject_walks_up_to_the_one_with_a_kvspec_table(repo: Path, tmp_path: Path) -> None:
    nested = repo / "lifecycle" / "sub"
    nested.mkdir()
    (nested / "pyproject.toml").write_text("[project]\nname = 'other'\n")  # no [tool.kvspec]
    assert find_pyproject(nested) == repo / "pyproject.toml"
    assert find_pyproject(repo / "lifecycle" / "transfer.py") == repo / "pyproject.toml"
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    assert find_pyproject(empty) is None


def test_load_config_resolves_paths_from_the_project_root(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # not the project root
    config = load_config(Path("repo/pyproject.toml"))
    assert config.root == repo and config.proofs_dir == repo / "proofs"
    transfer, legacy = config.models
    assert transfer.name == "transfer" and transfer.file == repo / "lifecycle" / "transfer.py"
    assert (transfer.engine, transfer.depth, transfer.max_states, transfer.timeout) == \
        ("auto", 30, None, None)
    assert transfer.expect == {} and transfer.allow_dead == ()
    assert legacy.model_class == "Transfer" and legacy.sizes == {"requests": 2, "pages": 2}
    assert legacy.allow_dead == ("release",)
    pinned = legacy.expect["no-reuse-before-drain"]
    assert (pinned.verdict, pinned.length) == ("violated", 4)


# each mistake: (old text, new text, the message expected after "pyproject.toml: ")
MISTAKES = [
    ('proofs-dir = "proofs"', 'proof-dir = "proofs"',
     "tool.kvspec.proof-dir: unknown key (did you mean 'proofs-dir'?"),
    ('engine = "auto"', 'engine = "auto"\nmax_states = 10',
     "tool.kvspec.model[0].max_states: unknown key (did you mean 'max-states'?"),
    ('engine = "auto"', 'engine = "magic"',
     "tool.kvspec.model[0].engine: unknown engine 'magic' (one of auto, explicit, bmc, kind, pdr, all-sizes)"),
    ('engine = "auto"', 'engine = "auto"\ndepth = "10"',
     "tool.kvspec.model[0].depth: must be an integer, not a string"),
    ('engine = "auto"', 'engine = "auto"\ntimeout = 0',
     "tool.kvspec.model[0].timeout: must be a number of seconds > 0, got 0"),
    ('engine = "auto"', 'engine = "auto"\nmax-states = 0',
     "tool.kvspec.model[0].max-states: must be at least 1, got 0"),
    ('file = "lifecycle/transfer.py"', 'file = "lifecycle/nope.py"',
     "tool.kvspec.model[0].file: lifecycle/nope.py: no such file (paths are resolved from the "
     "project root"),
    ('name = "transfer"\n', '',
     "tool.kvspec.model[0].name"),  # placeholder, replaced below (duplicate names)
    ('length = 4 }', 'length = -1 }',
     "tool.kvspec.model[1].expect.no-reuse-before-drain.length: must be at least 0, got -1"),
    ('{ verdict = "violated", length = 4 }', '"fails"',
     "tool.kvspec.model[1].expect.no-reuse-before-drain: expected \"holds\" or \"violated\", "
     "got 'fails'"),
    ('{ verdict = "violated", length = 4 }', '{ verdict = "holds", length = 4 }',
     "tool.kvspec.model[1].expect.no-reuse-before-drain.length: a counterexample length goes "
     "only with verdict = \"violated\""),
    ('{ verdict = "violated", length = 4 }', '{ verdict = "violated", steps = 4 }',
     "tool.kvspec.model[1].expect.no-reuse-before-drain.steps: unknown key"),
    ('allow-dead = ["release"]', 'allow-dead = "release"',
     "tool.kvspec.model[1].allow-dead: must be an array of action names (strings)"),
    ('sizes = { requests = 2, pages = 2 }', 'sizes = { requests = true }',
     "tool.kvspec.model[1].sizes.requests: must be an integer, not a boolean"),
    ('[[tool.kvspec.model]]\nname = "transfer"', '[tool.kvspec.model]\nname = "transfer"',
     "invalid TOML"),
]
MISTAKES[7] = ('name = "legacy"', 'name = "transfer"',
               "tool.kvspec.model[1].name: 'transfer' is already the name of "
               "tool.kvspec.model[0]; give each model its own name")


@pytest.mark.parametrize("old, new, message", MISTAKES)
def test_config_mistakes_are_one_line_exit_2(repo: Path, old: str, new: str, message: str) -> None:
    edit(repo, old, new)
    res = run_cli("check", "--config", str(repo / "pyproject.toml"))
    assert res.code == 2 and res.out == ""
    assert res.err.count("\n") == 1 and "Traceback" not in res.err
    assert res.err.startswith(f"kvspec: error: {repo / 'pyproject.toml'}: ")
    assert message in res.err
    with pytest.raises(ConfigError):
        load_config(repo / "pyproject.toml")


@pytest.mark.parametrize("old, new, message", [
    ("no-reuse-before-drain = {", "no-reuse-before-drian = {",
     "tool.kvspec.model[1].expect.no-reuse-before-drian: unknown property (did you mean "
     "'no-reuse-before-drain'?"),
    ('allow-dead = ["release"]', 'allow-dead = ["relase"]',
     "tool.kvspec.model[1].allow-dead: Transfer has no action 'relase' (did you mean "
     "'release'?"),
    ("sizes = { requests = 2, pages = 2 }", "sizes = { requests = 2, page = 2 }",
     "unknown size parameter 'page'"),
    ('class = "Transfer"', 'class = "Transfr"', "no Model class named 'Transfr'"),
])
def test_names_checked_against_the_model_are_one_line_exit_2(repo: Path, old: str, new: str,
                                                             message: str) -> None:
    """Property, action, size and class names are only known once the model compiles:
    the gate reports them with the same one line, and still checks the other models."""
    edit(repo, old, new)
    res = run_cli("check", "--config", str(repo / "pyproject.toml"))
    assert res.code == 2
    assert res.err.count("\n") == 1 and "Traceback" not in res.err and message in res.err
    assert "transfer (lifecycle/transfer.py" in res.out  # the other model was checked
    assert "kvspec check: ERROR: 1 error, 7 passed" in res.out


def test_a_model_error_names_the_model_file_and_line(repo: Path) -> None:
    path = repo / "lifecycle" / "transfer.py"
    lines = path.read_text().splitlines()
    line = next(i for i, x in enumerate(lines, 1) if "s.inflight[p] = r" in x)
    lines[line - 1] = lines[line - 1].replace("s.inflight[p] = r", "while True: pass")
    path.write_text("\n".join(lines) + "\n")
    res = run_cli("check", "--config", str(repo / "pyproject.toml"), "--model", "transfer")
    assert res.code == 2 and res.err.count("\n") == 1
    assert re.match(rf"kvspec: error: lifecycle/transfer\.py:{line}: .*while", res.err), res.err


def test_command_line_mistakes(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = run_cli("check", "--config", str(tmp_path / "missing.toml"))
    assert res.code == 2 and "--config" in res.err and "no such file" in res.err
    res = run_cli("check", "--config", str(repo / "pyproject.toml"), "--model", "transfr")
    assert res.code == 2 and "--model transfr: no such model" in res.err
    assert "did you mean 'transfer'?" in res.err
    res = run_cli("check", "--config", str(repo / "pyproject.toml"), "--junit",
                  str(tmp_path / "no" / "such" / "dir.xml"))
    assert res.code == 2 and "--junit" in res.err and "does not exist" in res.err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = run_cli("check")
    assert res.code == 2 and res.err.count("\n") == 1
    assert "no pyproject.toml with a [tool.kvspec] table" in res.err
    (elsewhere / "pyproject.toml").write_text("[tool.kvspec]\n")
    res = run_cli("check")
    assert res.code == 2 and "tool.kvspec.model: no models configured" in res.err
