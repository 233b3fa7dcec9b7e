"""docs/ci.md stays true: the commands it shows run on a copy of the test repository and
do what it says; the workflow and the pre-commit hook run those same commands."""
from __future__ import annotations

import re
import shlex
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

GATE_REPO = Path(__file__).resolve().parent / "gate_repo"
DOC = ROOT / "docs" / "ci.md"


def doc_commands() -> list[list[str]]:
    """The lines of the shell blocks marked ``<!-- ci-commands -->`` in docs/ci.md."""
    text = DOC.read_text()
    blocks = re.findall(r"<!-- ci-commands -->\s*```sh\n(.*?)```", text, re.S)
    assert blocks, "docs/ci.md has no <!-- ci-commands --> block"
    return [shlex.split(line) for block in blocks for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def workflow_runs() -> list[str]:
    """The ``run:`` commands of the GitHub Actions example in docs/ci.md."""
    text = DOC.read_text()
    (workflow,) = re.findall(r"```yaml\nname: kvspec\n(.*?)```", text, re.S)
    return [m.strip() for m in re.findall(r"^\s+(?:- )?run: (.+)$", workflow, re.M)]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(GATE_REPO, dest)
    monkeypatch.chdir(dest)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return dest


def test_the_documented_commands_pass_on_the_good_design_and_fail_on_the_regression(
        repo: Path) -> None:
    commands = doc_commands()
    assert all(argv[0] == "kvspec" for argv in commands)
    for argv in commands:
        res = run_cli(*argv[1:])
        assert res.code == 0, (argv, res.out, res.err)
    for name in ("kvspec-junit.xml", "kvspec.sarif", "kvspec-summary.md"):
        assert (repo / name).is_file()
    shutil.copyfile(repo / "versions" / "regressed.py", repo / "lifecycle" / "transfer.py")
    for argv in commands:
        assert run_cli(*argv[1:]).code == 1, argv
    failures = ET.parse(repo / "kvspec-junit.xml").getroot().get("failures")
    assert failures == "3"


def test_the_workflow_and_the_hook_run_the_documented_commands() -> None:
    documented = {shlex.join(argv) for argv in doc_commands()}
    gate_runs = [r for r in workflow_runs() if r.startswith("kvspec ")]
    assert gate_runs and set(gate_runs) <= documented
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert re.search(r"^- id: kvspec-check$", hooks, re.M)
    (entry,) = re.findall(r"^\s+entry: (.+)$", hooks, re.M)
    assert entry.strip() in documented
    assert re.search(r"^\s+pass_filenames: false$", hooks, re.M)  # check takes no files


def test_the_repository_gates_its_own_models() -> None:
    from kvspec.gate.config import load_config

    config = load_config(ROOT / "pyproject.toml")
    assert config.proofs_dir == ROOT / "proofs"
    assert [m.file for m in config.models] == [ROOT / "models" / f"{n}.py" for n in (
        "single_node", "buggy_pd", "free_before_drain", "patched", "vllm_async_load_leak",
        "vllm_async_load_fixed")]
    buggy = config.models[1].expect
    assert {p: (e.verdict, e.length) for p, e in buggy.items()} == {
        "no-decode-after-rejection": ("violated", 9), "rejection-is-terminal": ("violated", 3),
        "no-read-beyond-written": ("violated", 9), "no-reuse-before-drain": ("holds", None),
        "pages-eventually-freed": ("violated", None)}


@pytest.mark.slow
def test_kvspec_check_passes_at_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    res = run_cli("check")
    assert res.code == 0, res.out + res.err
    assert "kvspec check: OK: 37 passed (6 models" in res.out
