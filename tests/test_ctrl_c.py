"""Ctrl-C stops every command at once and never lets a verdict through, wherever it
lands: while Z3 works, between two queries, or inside a Z3 object's ``__del__``
(where Python drops a KeyboardInterrupt)."""
from __future__ import annotations

import io
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import z3
from conftest import MODELS, ROOT

from kvspec.cli import EXIT_INTERRUPTED, main
from kvspec.ctrl_c import RESEND_S, CtrlC

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals are handled in the main thread only")


def _hard_query() -> z3.Solver:
    """A query Z3 needs many seconds for: 10 pigeons in 9 holes."""
    n = 9
    hole = [[z3.Bool(f"pigeon{i}_hole{j}") for j in range(n)] for i in range(n + 1)]
    s = z3.Solver()
    for i in range(n + 1):
        s.add(z3.Or(hole[i]))
    for j in range(n):
        for i in range(n + 1):
            for k in range(i + 1, n + 1):
                s.add(z3.Or(z3.Not(hole[i][j]), z3.Not(hole[k][j])))
    return s


def _ctrl_c_at_query(monkeypatch: pytest.MonkeyPatch, n: int) -> list[int]:
    """At the ``n``-th query of the run Ctrl-C is pressed while Z3 works on a query
    that takes seconds (a real SIGINT, from another thread)."""
    calls = [0]
    real_check = z3.Solver.check
    real_query = z3.Fixedpoint.query

    def busy() -> None:
        calls[0] += 1
        if calls[0] == n:
            calls.append(int(time.monotonic() * 1000))
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            _hard_query().check()

    def check(self: z3.Solver, *args: Any) -> z3.CheckSatResult:
        busy()
        return real_check(self, *args)

    def query(self: z3.Fixedpoint, *args: Any) -> z3.CheckSatResult:
        busy()
        return real_query(self, *args)

    monkeypatch.setattr(z3.Solver, "check", check)
    monkeypatch.setattr(z3.Fixedpoint, "query", query)
    return calls


def _certificate() -> str:
    return str(ROOT / "proofs" / "patched.PatchedPD.requests=2,pages=4,prefill_capacity=2,"
               "max_need=3.json")


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "verify --engine pdr": lambda tmp: ["verify", str(MODELS / "patched.py"), "--engine", "pdr",
                                        "--proofs-dir", str(tmp)],
    "verify --json": lambda tmp: ["verify", str(MODELS / "patched.py"), "--engine", "pdr",
                                  "--json", "--proofs-dir", str(tmp)],
    "check-proof": lambda tmp: ["check-proof", _certificate(), str(MODELS / "patched.py")],
    "live --engine proof": lambda tmp: ["live", str(MODELS / "vllm_async_load_fixed.py"),
                                        "--engine", "proof", "--size", "requests=1,pages=1",
                                        "--no-deadlock"],
}
# the query at which Ctrl-C is pressed: the first, and others up to the last
# (verify asks 340 to 370 queries, check-proof 50, live 70)
WHEN = {"verify --engine pdr": (1, 7, 60, 150, 300), "verify --json": (2, 290),
        "check-proof": (1, 20, 50), "live --engine proof": (1, 30, 70)}


@pytest.mark.parametrize("command,n", [(c, n) for c in sorted(COMMANDS) for n in WHEN[c]])
def test_ctrl_c_while_z3_works_stops_the_command(command: str, n: int, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _ctrl_c_at_query(monkeypatch, n)
    out, err = io.StringIO(), io.StringIO()
    code = main(COMMANDS[command](tmp_path), out, err)
    stopped = int(time.monotonic() * 1000)
    assert calls[0] >= n, f"{command} asked {calls[0]} queries, fewer than {n}"
    assert code == EXIT_INTERRUPTED, out.getvalue() + err.getvalue()
    assert "PROVED" not in out.getvalue() and "HOLDS" not in out.getvalue()
    assert "kvspec: interrupted" in err.getvalue()
    assert stopped - calls[1] < 3000, "the busy query was not interrupted"


def _raised_again(drop: Callable[[], None]) -> float | None:
    """Seconds until the KeyboardInterrupt reaches the command after ``drop`` has
    pressed Ctrl-C and done its worst; None if it never does (5 s)."""
    with CtrlC() as ctrl_c:
        started = time.monotonic()
        try:
            drop()
            while time.monotonic() - started < 5:
                sum(range(100))
        except KeyboardInterrupt:
            ctrl_c.caught()
            return time.monotonic() - started
        finally:
            assert ctrl_c.pressed
    return None


def test_a_ctrl_c_in_a_destructor_is_raised_after_it_quietly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dropped: list[BaseException | None] = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: dropped.append(u.exc_value))

    class Dropper:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)  # the handler runs inside __del__
            sum(range(100))

    after = _raised_again(lambda: Dropper() and None)
    assert after is not None and after < 20 * RESEND_S
    assert dropped == []  # no "Exception ignored in ... __del__" on stderr


def test_a_ctrl_c_another_library_swallows_is_raised_again() -> None:
    def swallow() -> None:
        try:
            signal.raise_signal(signal.SIGINT)
            sum(range(100))
        except BaseException:  # noqa: BLE001 - what a careless library does
            pass

    after = _raised_again(swallow)
    assert after is not None and after < 20 * RESEND_S


def test_check_raises_once_pressed_and_nothing_is_raised_after_the_command() -> None:
    with CtrlC() as ctrl_c:
        ctrl_c.check()
        try:
            signal.raise_signal(signal.SIGINT)
            sum(range(100))
        except KeyboardInterrupt:
            ctrl_c.caught()
        time.sleep(3 * RESEND_S)  # caught: not raised again
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.check()
    time.sleep(3 * RESEND_S)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_what_the_command_found_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    z3.set_param("ctrl_c", True)
    with CtrlC():
        assert str(z3.get_param("ctrl_c")) == "false"
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert str(z3.get_param("ctrl_c")) == "true"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1
    # an ignored SIGINT stays ignored: Z3 must not turn it back on either
    monkeypatch.setattr(signal, "getsignal", lambda s: signal.SIG_IGN)
    with CtrlC():
        assert str(z3.get_param("ctrl_c")) == "false"
    assert str(z3.get_param("ctrl_c")) == "true"


def test_outside_the_main_thread_only_z3_lets_go() -> None:
    seen: list[Any] = []

    def body() -> None:
        with CtrlC():
            seen.append((str(z3.get_param("ctrl_c")), signal.getsignal(signal.SIGINT)))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == [("false", signal.default_int_handler)]


def test_z3_works_as_before_after_an_interrupt_that_found_no_query() -> None:
    """The watcher interrupts the Z3 context even when Python, not Z3, is running: the
    simplifier must not stay interrupted after the command."""
    x = z3.Int("x")
    with CtrlC() as ctrl_c:
        try:
            signal.raise_signal(signal.SIGINT)
            sum(range(100))
        except KeyboardInterrupt:
            time.sleep(3 * RESEND_S)  # meanwhile the watcher interrupts the idle context
            ctrl_c.caught()
    assert z3.is_true(z3.simplify(z3.And(x + 1 > x, z3.BoolVal(True))))



def test_a_ctrl_c_while_the_command_puts_things_back_leaves_nothing_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C just as the command ends, before the quiet handler is in place: the
    handler, the wakeup fd, Z3's setting and the watcher are all put back, and no
    KeyboardInterrupt reaches the caller afterwards."""
    real = CtrlC.caught

    def caught_late(self: CtrlC) -> None:
        signal.raise_signal(signal.SIGINT)  # lands inside the teardown
        sum(range(100))
        real(self)

    monkeypatch.setattr(CtrlC, "caught", caught_late)
    z3.set_param("ctrl_c", True)
    code = main(["show", str(MODELS / "lowest_free.py")], io.StringIO(), io.StringIO())
    monkeypatch.setattr(CtrlC, "caught", real)
    assert code == 0
    time.sleep(5 * RESEND_S)  # a watcher left running would raise here
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.set_wakeup_fd(-1) == -1
    assert str(z3.get_param("ctrl_c")) == "true"
    assert "kvspec-ctrl-c" not in [t.name for t in threading.enumerate()]


# -- library entry points -----------------------------------------------------------------

def _gate_check(tmp_path: Path) -> Any:
    from kvspec.gate.check import check_model
    from kvspec.gate.config import load_config

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.kvspec]\nproofs-dir = "proofs"\n\n[[tool.kvspec.model]]\nname = "patched"\n'
        f'file = "{(MODELS / "patched.py").as_posix()}"\nengine = "pdr"\n')
    config = load_config(project / "pyproject.toml")
    return check_model(config, config.models[0])


LIBRARY: dict[str, Callable[[Path], Any]] = {
    "kvspec.testing.check": lambda tmp: __import__("kvspec.testing").testing.check(
        MODELS / "patched.py", engine="pdr", proofs_dir=tmp),
    "kvspec.testing.assert_holds": lambda tmp: __import__("kvspec.testing").testing.assert_holds(
        MODELS / "patched.py", engine="kind", proofs_dir=tmp),
    "the gate (pytest plugin)": _gate_check,
}


@pytest.mark.parametrize("call,n", [(c, n) for c in sorted(LIBRARY) for n in (1, 40)])
def test_ctrl_c_in_a_library_call_raises_keyboard_interrupt_not_a_result(
        call: str, n: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kvspec.testing`` and the gate run under their own Ctrl-C guard: a Ctrl-C while
    Z3 works stops the call at once, and the caller gets the KeyboardInterrupt (pytest
    stops there), never a verdict computed with a query that was cut short."""
    calls = _ctrl_c_at_query(monkeypatch, n)
    with pytest.raises(KeyboardInterrupt):
        LIBRARY[call](tmp_path)
    stopped = int(time.monotonic() * 1000)
    assert calls[0] >= n
    assert stopped - calls[1] < 3000, "the busy query was not interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert z3.get_param("ctrl_c") == "true"


def test_a_guard_inside_another_shares_it_and_installs_nothing() -> None:
    """The CLI's guard around a library call: the inner one leaves the outer's handler in
    place, sees the outer's Ctrl-C, and puts nothing back on its way out."""
    before = signal.getsignal(signal.SIGINT)
    with CtrlC() as outer:
        handler = signal.getsignal(signal.SIGINT)
        assert handler is not before
        with CtrlC() as inner:
            assert signal.getsignal(signal.SIGINT) == handler
            assert not inner.pressed
            try:
                os.kill(os.getpid(), signal.SIGINT)
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline:
                    sum(range(100))
            except KeyboardInterrupt:
                pass
            assert inner.pressed and outer.pressed
            with pytest.raises(KeyboardInterrupt):
                inner.check()
        assert signal.getsignal(signal.SIGINT) == handler
        assert z3.get_param("ctrl_c") == "false"
        outer.caught()
    assert signal.getsignal(signal.SIGINT) is before
