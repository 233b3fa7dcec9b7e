"""Golden files for the rendered text output (timing lines masked).

Regenerate after an intended change with ``KVSPEC_REGOLD=1 python -m pytest
tests/test_golden.py``.
"""
from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from conftest import MODELS, run_cli

from kvspec.cli import _Progress

GOLDEN = Path(__file__).parent / "golden"


def masked(text: str) -> str:
    """The statistics line with its numbers masked (timings vary; its wording stays)."""
    def numbers(m: re.Match[str]) -> str:
        return re.sub(r"\d+(?:[,.]\d+)*", "N", m.group(0))

    return re.sub(r"^  explicit: .*$", numbers, text, flags=re.M)


CASES = {"buggy_pd": ("buggy_pd.py",), "free_before_drain": ("free_before_drain.py",),
         "single_node": ("single_node.py",),
         # every selected property violated: the search stops early and says so
         "buggy_pd.rejection-is-terminal": ("buggy_pd.py", "--property",
                                            "rejection-is-terminal")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_output_matches_golden(case: str) -> None:
    model, *options = CASES[case]
    result = run_cli("verify", str(MODELS / model), "--engine", "explicit", *options)
    text = masked(result.out.replace(str(MODELS / model), f"models/{model}"))
    golden = GOLDEN / f"{case}.txt"
    if os.environ.get("KVSPEC_REGOLD"):
        golden.write_text(text)
    assert text == golden.read_text()


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal_only() -> None:
    tty = FakeTTY()
    progress = _Progress(tty, enabled=True)
    progress(12_345, 7, 2.0)
    progress.done()
    assert "explored 12,345 states, depth 7, 2.0 s" in tty.getvalue()
    piped = io.StringIO()
    quiet = _Progress(piped, enabled=True)
    quiet(12_345, 7, 2.0)
    assert piped.getvalue() == ""
    silent = _Progress(FakeTTY(), enabled=False)  # --json
    silent(1, 1, 1.0)
    assert not silent.shown
