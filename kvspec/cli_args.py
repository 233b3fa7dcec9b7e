"""Option values of every ``kvspec`` subcommand, checked by the parser before any work
starts: each bad value is a one-line usage error (exit 2)."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from kvspec.lang.errors import UsageError
from kvspec.lang.loader import parse_sizes
from kvspec.report.wording import display_path

__all__ = ["PICTURE_SUFFIXES", "integer", "non_negative_int", "output_file", "picture_path",
           "positive_int", "positive_seconds", "search_args", "size_spec"]

#: picture formats by ``-o`` / ``--render`` suffix (see kvspec.render.style.FORMATS)
PICTURE_SUFFIXES = (".svg", ".png", ".pdf", ".dot", ".gv")


def integer(text: str) -> int:
    """An integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0 (leave ``--timeout`` out for no limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds > 0, got {text!r} (leave --timeout out for no limit)")
    return value


def size_spec(text: str) -> str:
    """``name=N[,name=N]`` with integer values; names are checked against the model later."""
    try:
        parse_sizes(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--size ")) from None
    return text


def picture_path(text: str) -> str:
    """An output path whose suffix names a picture format."""
    suffix = Path(text).suffix.lower()
    if suffix not in PICTURE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"unknown picture format {suffix or '(none)'!r} in {text!r}; "
            "use .svg, .png, .pdf or .dot")
    return text


def output_file(path: str | None, option: str) -> Path | None:
    """A file to be written: its directory must exist and it must not be a directory."""
    if path is None:
        return None
    target = Path(path)
    parent = target.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: directory {display_path(parent)} does not exist")
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    return target


def search_args(p: argparse.ArgumentParser) -> None:
    """The explicit search's backend and modes (``--engine explicit``, auto's explicit stage)."""
    p.add_argument("--backend", choices=("native", "python"), default=None,
                   help="explicit search: native (the model compiled to C; the default for "
                        "--engine explicit when a C compiler is present) or python")
    p.add_argument("--stop-at-first", action="store_true",
                   help="explicit search: stop at the first violation of any property "
                        "(still a shortest counterexample for it; the rest stay UNKNOWN)")
    p.add_argument("--fingerprint", action="store_true",
                   help="native explicit search: store 64-bit state hashes only (less memory; "
                        "HOLDS then states its omission probability and is not exhaustive)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="native explicit search: N >= 1 threads compute successors (the same "
                        "states, verdicts and counterexamples as one; default 1)")
    p.add_argument("--dfs", action="store_true",
                   help="native explicit search: depth-first, stopping at the first violation "
                        "(a quick trail, not claimed shortest); without one, as exhaustive as "
                        "breadth-first")
