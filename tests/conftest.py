"""Shared fixtures: paths of the shipped models and a CLI runner."""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvspec.cli import main
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
ALL_MODELS = sorted(p.name for p in MODELS.glob("*.py"))


@dataclass
class CliRun:
    code: int
    out: str
    err: str


def run_cli(*argv: str) -> CliRun:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return CliRun(code, out.getvalue(), err.getvalue())


def system_of(name_or_path: str | Path, sizes: dict[str, int] | None = None,
              properties: list[str] | None = None, model_class: str | None = None) -> System:
    """A shipped model by file name (``models/``, else ``models/library/``) or path."""
    path = Path(name_or_path)
    if not path.is_absolute() and not path.exists():
        path = MODELS / path
        if not path.exists():
            path = MODELS / "library" / name_or_path
    return compile_model(load_model(path, model_class), sizes or {}, properties)


def certificate_system(cert: Path) -> System:
    """The model a stored certificate ``<file>.<Class>.<sizes>.json`` was made for."""
    import json

    file, cls = cert.name.split(".")[:2]
    doc = json.loads(cert.read_text())
    sizes = {} if doc.get("kind") == "all-sizes" else dict(doc.get("sizes", {}))
    return system_of(f"{file}.py", sizes, model_class=cls)


@pytest.fixture
def write_model(tmp_path: Path):
    """Write model source to a file and return its path."""
    counter = [0]

    def make(source: str, name: str | None = None) -> Path:
        counter[0] += 1
        path = tmp_path / (name or f"model_{counter[0]}.py")
        path.write_text(source)
        return path

    return make
