"""Ctrl-C for one whole command: it stops the run, however busy Z3 is, and never lets a
verdict through.

Left to itself, Z3 catches SIGINT while a query runs and answers ``unknown``; every
place that reads a query's result would then have to tell that apart from a give-up,
and one that does not (an ``== unsat`` test) silently drops the Ctrl-C and the run
goes on to print PROVED. Python alone has the opposite flaw: the KeyboardInterrupt is
raised at the next bytecode, which is often inside a Z3 object's ``__del__``, where
Python prints "Exception ignored" and drops it.

:class:`CtrlC` closes both holes for the command it wraps:

* Z3 never sees SIGINT (its ``ctrl_c`` parameter is off), so only Python's handler
  gets it; the handler notes :attr:`CtrlC.pressed` and raises KeyboardInterrupt.
* A watcher thread, woken through :func:`signal.set_wakeup_fd`, interrupts the Z3
  context at once, so a long query returns within milliseconds (and the context is
  cleared of it when the command ends).
* Until the command has caught the KeyboardInterrupt (:meth:`CtrlC.caught`), the
  watcher raises it again every :data:`RESEND_S` seconds. The handler stays quiet
  while a KeyboardInterrupt is already being handled, so one that is on its way out
  is never replaced by a second, and inside a ``__del__``, leaving it to the next
  time; one dropped elsewhere (another library's ``except BaseException``) comes
  back the same way.
* :meth:`CtrlC.check` raises KeyboardInterrupt when Ctrl-C was pressed at any time;
  commands call it before they print a verdict.

Outside the main thread, or when SIGINT is ignored or left to its default (the
process dies), only Z3's handler is switched off.

Library entry points (:func:`kvspec.runner.run` and :func:`kvspec.runner.fuzz`, so
:mod:`kvspec.testing`; the gate's :func:`kvspec.gate.check.check_model`, so the pytest
plugin) run under one too: a Ctrl-C there raises KeyboardInterrupt to the caller
instead of a result. A :class:`CtrlC` entered while another is active in the process
(the CLI's, around such a call) installs nothing and shares the active one's state.
"""
from __future__ import annotations

import _thread
import argparse
import functools
import os
import select
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any, Callable, ParamSpec, TypeVar

import z3

__all__ = ["RESEND_S", "CtrlC", "stop_if_pressed", "stops_on_ctrl_c"]

P = ParamSpec("P")
R = TypeVar("R")

RESEND_S = 0.1  # how often a Ctrl-C not yet caught by the command is raised again
#: the CtrlC whose settings are in place in this process (at most one; nested ones share it)
_ACTIVE: list["CtrlC"] = []
_ACTIVE_LOCK = threading.Lock()


class CtrlC:
    """A context manager around one command (module docstring)."""

    def __init__(self) -> None:
        self._pressed = False
        self._outer: CtrlC | None = None  # the active one this one shares, when nested
        self._caught = False
        self._lock = threading.Lock()
        self._installed = False
        self._previous_handler: Any = None
        self._previous_fd = -2  # -2: not replaced (-1 is "no wakeup fd")
        self._previous_z3 = "true"
        self._pipe: tuple[int, int] | None = None
        self._watcher: threading.Thread | None = None
        self._context: z3.Context | None = None
        self._interrupted = False
        self._z3_off = False

    # -- what a command uses --------------------------------------------------------------

    @property
    def pressed(self) -> bool:
        """Whether Ctrl-C was pressed while this one (or the one it shares) was active."""
        return self._outer.pressed if self._outer is not None else self._pressed

    def check(self) -> None:
        """Raise KeyboardInterrupt when Ctrl-C was pressed during the command."""
        if self.pressed:
            raise KeyboardInterrupt

    def caught(self) -> None:
        """The command has caught the KeyboardInterrupt: stop raising it again."""
        with self._lock:
            self._caught = True

    # -- the context manager --------------------------------------------------------------

    def __enter__(self) -> CtrlC:
        with _ACTIVE_LOCK:
            if _ACTIVE:
                self._outer = _ACTIVE[0]
                return self
            _ACTIVE.append(self)
        try:
            return self._enter()
        except BaseException:
            self.close()
            raise

    def _enter(self) -> CtrlC:
        try:
            self._previous_z3 = str(z3.get_param("ctrl_c"))
        except z3.Z3Exception:
            self._previous_z3 = "true"
        z3.set_param("ctrl_c", False)
        self._z3_off = True
        self._context = z3.main_ctx()  # made here: the watcher must not race to make it
        if threading.current_thread() is not threading.main_thread():
            return self
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):  # SIG_IGN, SIG_DFL, or installed outside Python
            return self
        read_end, write_end = os.pipe()
        self._pipe = (read_end, write_end)
        os.set_blocking(write_end, False)
        self._previous_handler = handler
        self._installed = True
        signal.signal(signal.SIGINT, self._on_sigint)
        self._previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, name="kvspec-ctrl-c",
                                         daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Put back what :meth:`__enter__` changed (idempotent). A Ctrl-C that lands
        while it runs, before the quiet handler is in place, only starts it again:
        the command is over, and nothing must stay installed after it."""
        if self._outer is not None:
            return
        for _ in range(100):
            try:
                self._close()
                return
            except KeyboardInterrupt:
                continue
        self._close()

    def _close(self) -> None:
        self.caught()  # from here the handler is quiet and the watcher raises nothing
        if self._installed:
            if self._pipe is not None:
                if self._previous_fd != -2:
                    signal.set_wakeup_fd(self._previous_fd)
                    self._previous_fd = -2
                os.close(self._pipe[1])
                if self._watcher is not None:
                    self._watcher.join(timeout=5)
                    self._watcher = None
                os.close(self._pipe[0])
                self._pipe = None
            _run_pending_handlers()
            signal.signal(signal.SIGINT, self._previous_handler)
            self._installed = False
        if self._z3_off:
            z3.set_param("ctrl_c", self._previous_z3.lower() != "false")
            self._z3_off = False
        if self._interrupted and self._context is not None:
            # an interrupt that found no query running stays with the context: the
            # simplifier would stop early on every later call, until a solver's check
            # clears it (for whoever uses Z3 in this process next)
            z3.Solver(ctx=self._context).check()
            self._interrupted = False
        with _ACTIVE_LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)

    # -- the parts ------------------------------------------------------------------------

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self._pressed = True
        with self._lock:
            if self._caught:
                return
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):
            return  # one is on its way out already
        if _in_destructor(frame):
            return  # Python would print it and drop it: the watcher raises it again
        if _in_teardown(frame):
            return  # the command is over: it must not stop what puts things back
        raise KeyboardInterrupt

    def _watch(self) -> None:
        assert self._pipe is not None
        read_end = self._pipe[0]
        pending = False
        while True:
            ready, _, _ = select.select([read_end], [], [], RESEND_S if pending else None)
            if ready:
                data = os.read(read_end, 512)
                if not data:
                    return  # the command is over
                if signal.SIGINT not in data:
                    continue
                with self._lock:
                    if self._caught:
                        continue
                    if self._context is not None:
                        self._context.interrupt()
                        self._interrupted = True
                pending = True
                continue
            with self._lock:
                if self._caught:
                    pending = False
                    continue
                _thread.interrupt_main(signal.SIGINT)


def stop_if_pressed(args: argparse.Namespace) -> None:
    """For a command before it prints what it found: raise KeyboardInterrupt when
    Ctrl-C was pressed during it (``args.session.ctrl_c``, set by the CLI's ``main``;
    nothing when the command runs without one)."""
    ctrl_c = getattr(getattr(args, "session", None), "ctrl_c", None)
    if isinstance(ctrl_c, CtrlC):
        ctrl_c.check()


def stops_on_ctrl_c(fn: Callable[P, R]) -> Callable[P, R]:
    """A library entry point run under a :class:`CtrlC`: Ctrl-C during it raises
    KeyboardInterrupt to its caller, never a result (nothing more under the CLI's own)."""
    @functools.wraps(fn)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        with CtrlC() as ctrl_c:
            out = fn(*args, **kwargs)
            ctrl_c.check()
        return out
    return guarded


def _in_destructor(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside a ``__del__``, where an exception is dropped."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _in_teardown(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside :meth:`CtrlC.__exit__` (or what it calls)."""
    codes = _TEARDOWN
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _run_pending_handlers() -> None:
    """Entering a Python function lets the interpreter run a signal handler still
    pending, while the quiet one is installed."""


_TEARDOWN = frozenset({CtrlC.__exit__.__code__, CtrlC.close.__code__, CtrlC._close.__code__})
