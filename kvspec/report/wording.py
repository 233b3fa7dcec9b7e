"""Small helpers for wording messages: a path as the user would type it, a message on
one line."""
from __future__ import annotations

import os
from typing import overload


@overload
def display_path(path: str | os.PathLike[str]) -> str: ...


@overload
def display_path(path: None) -> None: ...


def display_path(path: str | os.PathLike[str] | None) -> str | None:
    """``path`` relative to the current directory when it lies below it, else as given."""
    if path is None:
        return None
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else str(path)
    except ValueError:
        return str(path)


def one_line(text: object) -> str:
    """``text`` with every run of whitespace (newlines included) as one space."""
    return " ".join(str(text).split())
