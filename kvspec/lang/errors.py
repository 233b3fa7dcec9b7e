"""Errors a model author can cause, each pointing at a file and line."""
from __future__ import annotations

import re
import sys
import traceback
from types import TracebackType


class ModelError(Exception):
    """A mistake in a model: reported as ``file:line: message``, exit code 2."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line

    def located(self, file: str | None, line: int | None) -> "ModelError":
        """Fill in a location if none is known yet."""
        if self.file is None and file is not None:
            self.file = file
            self.line = line
        return self

    def __str__(self) -> str:
        if self.file is None:
            return self.message
        if self.line is None:
            return f"{self.file}: {self.message}"
        return f"{self.file}:{self.line}: {self.message}"


class UsageError(Exception):
    """A mistake on the command line (unknown size, bad option value)."""


def location_in(tb: TracebackType | None, files: set[str]) -> tuple[str | None, int | None]:
    """The innermost traceback frame that lies in one of ``files``."""
    found: tuple[str | None, int | None] = (None, None)
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename in files:
            found = (frame.f_code.co_filename, lineno)
    return found


def model_error_from(exc: BaseException, files: set[str]) -> ModelError:
    """Turn an exception raised while running model code into a located ModelError."""
    if isinstance(exc, ModelError):
        if exc.file is None:
            exc.located(*location_in(exc.__traceback__, files))
        return exc
    file, line = location_in(exc.__traceback__, files)
    name = type(exc).__name__
    if isinstance(exc, AttributeError):
        match = re.match(r"'(?:Sym)?State' object has no attribute '(\w+)'", str(exc))
        if match:
            return ModelError(f"unknown state variable {match.group(1)!r}", file, line)
    return ModelError(f"{name}: {exc}", file, line)


def current_location(files: set[str]) -> tuple[str | None, int | None]:
    """The innermost frame of the running stack that lies in one of ``files``."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename in files:
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None, None
