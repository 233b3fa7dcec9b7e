"""Where certificates live: next to the model, never relative to the current directory.

The default proofs directory of a model file is the ``proofs-dir`` of the nearest
``pyproject.toml`` above the model file that has a ``[tool.kvspec]`` table (resolved
from that file's directory; ``"proofs"`` when the table does not set it), else the
``proofs`` directory next to the model file. ``--proofs-dir DIR`` still wins.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kvspec.lang.errors import UsageError
from kvspec.tomlcompat import tomllib

__all__ = ["DEFAULT_DIR_NAME", "default_proofs_dir", "kvspec_table"]

DEFAULT_DIR_NAME = "proofs"


def kvspec_table(pyproject: Path) -> dict[str, Any] | None:
    """The ``[tool.kvspec]`` table of ``pyproject`` (None: the file has none).
    A file that is not TOML is a usage error naming it (and the line)."""
    try:
        doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:  # the message names the line and column
        raise UsageError(f"{pyproject}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{pyproject}: cannot read: {exc}") from None
    tool = doc.get("tool")
    table = tool.get("kvspec") if isinstance(tool, dict) else None
    return table if isinstance(table, dict) else None


def default_proofs_dir(model_file: Path) -> Path:
    """The proofs directory for ``model_file`` (see the module docstring); an absolute
    path, the same from any working directory."""
    model = Path(model_file).resolve()
    for folder in model.parents:
        pyproject = folder / "pyproject.toml"
        if not pyproject.is_file():
            continue
        table = kvspec_table(pyproject)
        if table is None:
            continue
        value = table.get("proofs-dir", DEFAULT_DIR_NAME)
        if not isinstance(value, str) or not value:
            raise UsageError(f"{pyproject}: [tool.kvspec] proofs-dir must be a non-empty "
                             f"string, got {value!r}")
        return (folder / value).resolve()
    return model.parent / DEFAULT_DIR_NAME
