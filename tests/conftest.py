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
              properties: list[str] | None = None) -> System:
    path = Path(name_or_path)
    if not path.is_absolute() and not path.exists():
        path = MODELS / path
    return compile_model(load_model(path), sizes or {}, properties)


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
