"""Progress on stderr: a live line on a terminal; one line every 10 s otherwise (CI logs),
also during one long solver call; nothing with --json."""
from __future__ import annotations

import io
import threading

from conftest import MODELS, run_cli

from kvspec.cli import PROGRESS_INTERVAL_S, _Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_not_a_terminal_one_line_per_interval() -> None:
    err, clock = io.StringIO(), Clock()
    progress = _Progress(err, True, clock=clock, heartbeat=False)
    progress(0, 3, 1.0, "bmc")
    assert err.getvalue() == ""          # nothing before the first interval has passed
    clock.now += PROGRESS_INTERVAL_S
    progress(0, 12, 41.0, "bmc")
    clock.now += 1.0
    progress(0, 13, 42.0, "bmc")         # rate-limited: no second line a second later
    assert err.getvalue() == "kvspec: bmc depth 12, 10 s\n"
    clock.now += PROGRESS_INTERVAL_S
    progress(41_000, 9, 50.0, "explicit")
    progress.done()
    assert err.getvalue().splitlines()[1] == "kvspec: explicit 41,000 states, depth 9, 21 s"


def test_a_long_solver_call_still_reports() -> None:
    """The engine calls progress once, then blocks: the heartbeat keeps reporting."""
    err, clock = io.StringIO(), Clock()
    progress = _Progress(err, True, clock=clock, heartbeat=False)
    progress(0, 9, 0.0, "bmc")
    for k in range(1, 4):               # what the heartbeat thread does while it waits
        clock.now += PROGRESS_INTERVAL_S
        assert progress.tick()
    assert err.getvalue().splitlines() == [f"kvspec: bmc depth 9, {10 * k} s"
                                           for k in range(1, 4)]


def test_heartbeat_thread_writes_without_further_calls() -> None:
    class Signalling(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.wrote = threading.Event()

        def write(self, text: str) -> int:
            self.wrote.set()
            return super().write(text)

    err = Signalling()
    progress = _Progress(err, True, interval=0.01)
    progress(0, 4, 0.0, "pdr round 2")
    assert err.wrote.wait(30)            # no second call: the thread wrote it
    progress.done()
    assert err.getvalue().splitlines()[0].startswith("kvspec: pdr round 2 depth 4, ")
    n = len(err.getvalue())
    progress.tick()                      # after done() nothing runs in the background
    assert progress._thread is None and len(err.getvalue()) >= n


def test_terminal_keeps_the_live_line() -> None:
    tty = FakeTTY()
    progress = _Progress(tty, True)
    progress(12_345, 7, 2.0, "explicit")
    progress(0, 5, 3.0, "bmc")
    progress.done()
    text = tty.getvalue()
    assert "explored 12,345 states, depth 7, 2.0 s" in text
    assert "bmc depth 5, 3.0 s" in text and "kvspec:" not in text


def test_disabled_with_json_is_silent() -> None:
    err, clock = io.StringIO(), Clock()
    progress = _Progress(err, False, clock=clock)
    clock.now += 100
    progress(1, 1, 100.0, "bmc")
    assert not progress.tick()
    progress.done()
    assert err.getvalue() == ""


def test_verify_json_writes_no_progress_lines() -> None:
    res = run_cli("verify", str(MODELS / "single_node.py"), "--engine", "bmc", "--depth", "2",
                  "--json")
    assert "kvspec: bmc" not in res.err and "explored" not in res.err


def test_engines_report_each_depth_and_stage() -> None:
    """Every engine calls progress with its stage, BMC once per depth before solving it."""
    from conftest import system_of

    from kvspec.runner import run

    calls: list[tuple[int, int, str]] = []
    run(system_of("single_node.py"), "bmc", depth=4,
        progress=lambda s, d, t, stage: calls.append((s, d, stage)), coverage=False)
    assert [(d, stage) for _, d, stage in calls] == [(k, "bmc") for k in range(5)]
    calls.clear()
    run(system_of("single_node.py"), "kind", depth=3,
        progress=lambda s, d, t, stage: calls.append((s, d, stage)), coverage=False)
    assert calls and {stage for _, _, stage in calls} == {"k-induction"}


def test_stages_without_a_depth_say_what_they_do() -> None:
    err, clock = io.StringIO(), Clock()
    progress = _Progress(err, True, clock=clock, heartbeat=False)
    clock.now += PROGRESS_INTERVAL_S
    progress(0, 0, 10.0, "all sizes")
    clock.now += PROGRESS_INTERVAL_S
    progress(0, 0, 20.0, "orbit proof")
    progress.done()
    assert err.getvalue().splitlines() == ["kvspec: proof for every size, 10 s",
                                           "kvspec: orbit proof, 20 s"]
