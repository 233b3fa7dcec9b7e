"""The ``kvspec diff``  subcommand (registered by :func:`register`)."""
from __future__ import annotations

from typing import Any


def register(kit: Any) -> None:
    """Add the subcommand to the parser through ``kit`` (a :class:`kvspec.cli.ParserKit`)."""
