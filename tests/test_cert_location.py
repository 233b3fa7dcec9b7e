"""Certificates live next to the model (or where its project says), never relative to
the current directory; their names say file, class and sizes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import MODELS, ROOT, run_cli

from kvspec.lang.errors import UsageError
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.proofs.certificate import certificate_name, certificate_path
from kvspec.proofs.location import default_proofs_dir

SMALL = "requests=1,pages=2"


def test_default_is_proofs_next_to_the_model(tmp_path: Path) -> None:
    model = tmp_path / "designs" / "m.py"
    model.parent.mkdir()
    model.write_text("")
    assert default_proofs_dir(model) == model.parent.resolve() / "proofs"


def test_nearest_pyproject_with_a_kvspec_table_decides(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kvspec]\nproofs-dir = "certs"\n')
    sub = tmp_path / "pkg" / "designs"
    sub.mkdir(parents=True)
    # a nearer pyproject without a [tool.kvspec] table is skipped
    (tmp_path / "pkg" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    model = sub / "m.py"
    model.write_text("")
    assert default_proofs_dir(model) == tmp_path.resolve() / "certs"
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.kvspec]\n')
    assert default_proofs_dir(model) == (tmp_path / "pkg").resolve() / "proofs"


def test_the_repository_keeps_its_certificates_in_proofs() -> None:
    assert default_proofs_dir(MODELS / "patched.py") == ROOT / "proofs"


def test_a_broken_pyproject_is_a_one_line_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.kvspec\n")
    model = tmp_path / "m.py"
    shutil.copy(MODELS / "single_node.py", model)
    with pytest.raises(UsageError, match="pyproject.toml: not valid TOML"):
        default_proofs_dir(model)
    (tmp_path / "pyproject.toml").write_text("[tool.kvspec]\nproofs-dir = 3\n")
    res = run_cli("verify", str(model), "--size", SMALL)
    assert res.code == 2 and len(res.err.splitlines()) == 1
    assert "proofs-dir must be a non-empty string" in res.err and "Traceback" not in res.err


TWO_CLASSES = (MODELS / "single_node.py").read_text() + '''

class SingleNodeBig(SingleNode):
    capacity = Size(3)
'''


def test_two_classes_of_one_file_have_their_own_certificates(tmp_path: Path) -> None:
    model = tmp_path / "two.py"
    model.write_text(TWO_CLASSES)
    a = compile_model(load_model(model, "SingleNode"))
    b = compile_model(load_model(model, "SingleNodeBig"), {"capacity": 2})
    assert a.sizes == b.sizes
    assert certificate_name(a).startswith("two.SingleNode.requests=2,")
    assert certificate_name(b).startswith("two.SingleNodeBig.requests=2,")
    assert certificate_path(a) == tmp_path.resolve() / "proofs" / certificate_name(a)


def test_same_verdicts_and_certificate_from_two_working_directories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.kvspec]\nproofs-dir = "proofs"\n')
    model = project / "models" / "single_node.py"
    shutil.copy(MODELS / "single_node.py", model)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    monkeypatch.chdir(project)
    saved = run_cli("verify", "models/single_node.py", "--size", SMALL, "--engine", "pdr",
                    "--save-proof", "--json")
    assert saved.code == 0, saved.out + saved.err
    certs = sorted((project / "proofs").glob("*.json"))
    assert [c.name for c in certs] == [
        "single_node.SingleNode.requests=1,pages=2,capacity=2,max_need=3.json"]
    assert not (elsewhere / "proofs").exists()

    verdicts = {}
    for cwd, path in ((project, "models/single_node.py"), (elsewhere, str(model)),
                      (project / "models", "single_node.py")):
        monkeypatch.chdir(cwd)
        res = run_cli("verify", path, "--size", SMALL, "--json")
        doc = json.loads(res.out)
        assert res.code == 0, res.err
        verdicts[str(cwd)] = [(v["status"], v["method"]) for v in doc["verdicts"]]
        stage = doc["stats"]["auto"][0]
        assert stage["stage"] == "certificate" and Path(stage["path"]) == certs[0].resolve()
    assert len({json.dumps(v) for v in verdicts.values()}) == 1
    assert {m for v in verdicts.values() for _, m in v} == {"certificate re-checked"}
    assert not (elsewhere / "proofs").exists()


def test_explicit_proofs_dir_still_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "single_node.py"
    shutil.copy(MODELS / "single_node.py", model)
    mine = tmp_path / "mine"
    monkeypatch.chdir(tmp_path)
    res = run_cli("verify", str(model), "--size", SMALL, "--engine", "pdr", "--save-proof",
                  "--proofs-dir", str(mine))
    assert res.code == 0, res.out + res.err
    assert [p.name for p in mine.glob("*.json")] == [
        "single_node.SingleNode.requests=1,pages=2,capacity=2,max_need=3.json"]
    assert not (tmp_path / "proofs").exists()
