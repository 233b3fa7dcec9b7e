"""The ``kvspec`` command line. Each subcommand is a plain function taking the parsed
arguments and the output streams and returning the exit code; ``main`` parses, runs
one and turns every way it can end into an exit code:

* 0 all hold/proved, 1 a violation, 2 usage or model error, 3 unknown;
* 70 an unexpected exception (a bug in kvspec: one line, the traceback with ``--debug``);
* 130 interrupted (Ctrl-C): every property of the run is reported ``UNKNOWN``.

Option values are checked by the parser and output paths before any model is loaded,
so a bad command line never costs a run.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, NoReturn, Sequence

from kvspec.cli_args import (integer, non_negative_int, output_file, search_args,
                             picture_path, positive_int, positive_seconds, size_spec)
from kvspec.ctrl_c import CtrlC, stop_if_pressed
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.loader import LoadedModel, load_model, parse_sizes
from kvspec.lang.system import System, compile_model
from kvspec.report.text import make_console, print_result
from kvspec.report.wording import display_path, one_line
from kvspec.runner import ENGINES, Search, fuzz, load_certificate, run
from kvspec.trace import DocumentError, InternalError, load_json_document
from kvspec.verdict import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Result,
    Stats,
    interrupted_verdicts,
)

__all__ = ["EXIT_INTERNAL", "EXIT_INTERRUPTED", "build_parser", "entry", "main"]

TRACE_FORMATS = ("kvspec-trace/1", "kvspec-result/1")


# -- messages ------------------------------------------------------------------------------

def _error(err: IO[str], exc: BaseException) -> int:
    if isinstance(exc, ModelError):
        exc.file = display_path(exc.file)
    err.write(f"kvspec: error: {one_line(str(exc))}\n")
    return EXIT_USAGE


def _internal(err: IO[str], exc: BaseException, debug: bool) -> int:
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)
    what = str(exc) if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    hint = "" if debug else "; rerun with --debug for the traceback"
    err.write(f"kvspec: internal error: {one_line(what)} (a bug in kvspec{hint}; "
              "please report it)\n")
    return EXIT_INTERNAL


def _check_proofs_dir(path: str) -> None:
    """Where ``--save-proof`` writes: a directory, or a path that can become one."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UsageError(f"--proofs-dir {path}: not a directory")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--proofs-dir {path}: {parent} is not a directory")
            break


# -- state of one invocation -----------------------------------------------------------------

@dataclass
class _Session:
    """What the running command has established, for reporting an interruption."""

    system: System | None = None
    engine: str = ""
    model: str = ""
    json: bool = False
    ctrl_c: CtrlC | None = None  # read by ctrl_c.stop_if_pressed before any verdict


def _session(args: argparse.Namespace) -> _Session:
    session = getattr(args, "session", None)
    if not isinstance(session, _Session):
        session = _Session()
        args.session = session
    return session


def _interrupted(args: argparse.Namespace | None, out: IO[str], err: IO[str]) -> int:
    """Ctrl-C: say so, and report every property of the run UNKNOWN (never PROVED/HOLDS)."""
    err.write("kvspec: interrupted\n")
    session = getattr(args, "session", None) if args is not None else None
    if isinstance(session, _Session) and session.system is not None:
        system = session.system
        verdicts = interrupted_verdicts([p.name for p in system.properties])
        result = Result(system, session.engine or "interrupted", verdicts, Stats())
        if session.json:
            doc = result.to_json()
            doc["exit_code"] = EXIT_INTERRUPTED
            doc["interrupted"] = True
            out.write(json.dumps(doc, indent=2) + "\n")
        else:
            print_result(make_console(out), result, display_path(session.model) or session.model)
    return EXIT_INTERRUPTED


def _system(args: argparse.Namespace, properties: list[str] | None = None, *,
            sizes: dict[str, int] | None = None, loaded: LoadedModel | None = None) -> System:
    """The model of ``args`` (or ``loaded``, that model already loaded) compiled at
    ``sizes`` (default: those of ``--size``)."""
    if loaded is None:
        loaded = load_model(args.model, getattr(args, "model_class", None))
    if sizes is None:
        sizes = parse_sizes(getattr(args, "size", None))
    system = compile_model(loaded, sizes, properties)
    session = _session(args)
    session.system = system
    session.model = args.model
    session.json = bool(getattr(args, "json", False))
    return system


#: when stderr is not a terminal: one progress line at most (and at least) this often
PROGRESS_INTERVAL_S = 10.0


#: stages that have no depth to show
_UNDEPTHED = {"all sizes": "proof for every size", "orbit proof": "orbit proof"}


class _Progress:
    """Progress of a long run on stderr, silent when disabled (``--json``).

    On a terminal, a live line redrawn in place. Otherwise (CI logs, pipes) one line
    at most every ``interval`` seconds, ``kvspec: bmc depth 12, 41 s``; a heartbeat
    thread prints the last known stage even while an engine is inside one long solver
    call, so a long run is never silent for more than ``interval`` seconds. The
    engines call it as ``progress(states, depth, seconds, stage)``."""

    def __init__(self, err: IO[str], enabled: bool, *, interval: float = PROGRESS_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True) -> None:
        self.err = err
        tty = hasattr(err, "isatty") and err.isatty()
        self.enabled = enabled
        self.live = enabled and tty
        self.interval = interval
        self.clock = clock
        self.start = clock()
        self.last_line = self.start
        self.last: tuple[int, int, str] | None = None  # states, depth, stage
        self.shown = False
        self.lines = 0  # progress lines written (not on a terminal)
        self._heartbeat = heartbeat
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, states: int, depth: int, elapsed: float, stage: str = "") -> None:
        if not self.enabled:
            return
        with self._lock:
            self.last = (states, depth, stage)
        if self.live:
            self._draw(states, depth, elapsed, stage)
            return
        self.tick()
        if self._heartbeat and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="kvspec-progress",
                                            daemon=True)
            self._thread.start()

    @staticmethod
    def describe(states: int, depth: int, stage: str) -> str:
        """``bmc depth 12``, ``explicit 41,000 states, depth 9``."""
        if stage in ("", "explicit") or states:
            return f"{stage or 'explicit'} {states:,} states, depth {depth}"
        if stage == "coverage":
            return "coverage exploration"
        if stage in _UNDEPTHED:
            return _UNDEPTHED[stage]
        return f"{stage} depth {depth}"

    def tick(self) -> bool:
        """Not on a terminal: write one line if ``interval`` seconds passed since the
        last one (or since the start). True when it wrote."""
        with self._lock:
            now = self.clock()
            if self.last is None or now - self.last_line < self.interval:
                return False
            self.last_line = now
            self.lines += 1
            self.err.write(f"kvspec: {self.describe(*self.last)}, {now - self.start:.0f} s\n")
            self.err.flush()
            return True

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.interval / 2)):
            self.tick()

    def _draw(self, states: int, depth: int, elapsed: float, stage: str) -> None:
        if stage in ("", "explicit"):
            from kvspec.engines.explicit import peak_mb
            rate = states / elapsed if elapsed > 0 else 0.0
            text = f"  explored {states:,} states, depth {depth}, {elapsed:.1f} s " \
                   f"({rate:,.0f} states/s, {peak_mb():,.0f} MB)"
        else:
            text = f"  {self.describe(states, depth, stage)}, {elapsed:.1f} s"
        self.err.write(f"\r{text:<76.76}  ")
        self.err.flush()
        self.shown = True

    def done(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.shown:
            self.err.write("\r" + " " * 78 + "\r")
            self.err.flush()
            self.shown = False


# -- commands ---------------------------------------------------------------------------------

def _proofs_dir(args: argparse.Namespace) -> Path:
    """``--proofs-dir`` as given, else the model's own proofs directory (the nearest
    ``pyproject.toml`` with ``[tool.kvspec]`` above the model, else ``proofs/`` next to
    it): never relative to the current directory."""
    if args.proofs_dir is not None:
        return Path(args.proofs_dir)
    from kvspec.proofs.location import default_proofs_dir
    return default_proofs_dir(Path(args.model))


def _python_file(args: argparse.Namespace) -> str | None:
    """Where ``--format python`` / ``--python FILE`` writes the program (None: no program)."""
    if args.format == "python" and not args.python:
        raise UsageError("--format python needs --python FILE: the program is written to a "
                         "file, not mixed into the report")
    return args.python


def _write_program(result: Result, model: str, path: str, err: IO[str]) -> int:
    """The first counterexample as a runnable program in ``path``; 0, or 2 on an OSError."""
    violated = [v for v in result.verdicts if v.trace is not None]
    if not violated:
        err.write("kvspec: no program written: no property is violated\n")
        return 0
    from kvspec.report.python_snippet import trace_program
    first = violated[0]
    assert first.trace is not None
    try:
        Path(path).write_text(trace_program(first.trace.to_json(), model, path))
    except OSError as exc:
        err.write(f"kvspec: error: cannot write {path}: {exc.strerror or exc}\n")
        return EXIT_USAGE
    others = [v.prop for v in violated[1:]]
    note = f" (also violated: {', '.join(others)}; pick one with --property)" if others else ""
    err.write(f"kvspec: counterexample program for {first.prop} written to {path}{note}\n")
    return 0


def _coverage_warnings(result: Result, err: IO[str]) -> None:
    """Coverage findings as warnings: a design whose actions never fire must not pass
    silently (the exit code stays the verdicts'). Findings of an incomplete exploration
    are warned about only when the run succeeds; otherwise the report lists them."""
    cov = result.coverage
    if cov is None or (not cov.complete and result.exit_code != 0):
        return
    from kvspec.report.text import coverage_findings
    for line in coverage_findings(result.coverage):
        err.write(f"kvspec: warning: coverage: {line}\n")


def _check_search_options(args: argparse.Namespace) -> None:
    """The explicit search's modes name the engine they need (never silently ignored)."""
    for flag, given in (("--stop-at-first", args.stop_at_first),
                        ("--fingerprint", args.fingerprint),
                        ("--workers", args.workers is not None), ("--dfs", args.dfs)):
        if given and args.engine != "explicit":
            raise UsageError(f"{flag} applies to the explicit search: add --engine explicit "
                             f"(not {args.engine})")
    for flag, given in (("--fingerprint", args.fingerprint),
                        ("--workers", args.workers is not None), ("--dfs", args.dfs)):
        if given and args.backend == "python":
            raise UsageError(f"{flag} needs the native backend (--backend native)")
    if args.dfs and (args.workers or 1) > 1:
        raise UsageError("--dfs runs on one thread: drop --workers (it applies to the "
                         "breadth-first search)")


def cmd_verify(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    _check_search_options(args)
    output_file(args.render, "--render")
    program = _python_file(args)
    output_file(program, "--python")
    if args.save_proof and args.proofs_dir is not None:
        _check_proofs_dir(args.proofs_dir)
    system = _system(args, args.property or None)
    _session(args).engine = args.engine
    proofs_dir = _proofs_dir(args)
    if args.save_proof:
        _check_proofs_dir(str(proofs_dir))
        from kvspec.proofs.certificate import certificate_path
        target = certificate_path(system, proofs_dir)
        if target.is_dir():
            raise UsageError(f"--save-proof: {display_path(target)} is a directory")
    progress = _Progress(err, not args.json)
    try:
        result = run(system, engine=args.engine, depth=args.depth, timeout=args.timeout,
                     max_states=args.max_states, symmetry=not args.no_symmetry,
                     save_proof=args.save_proof, proofs_dir=proofs_dir,
                     progress=progress, warn=lambda m: err.write(f"kvspec: warning: {m}\n"),
                     search=Search(args.backend, args.stop_at_first, args.fingerprint,
                                   workers=args.workers or 1, dfs=args.dfs))
    finally:
        progress.done()
    stop_if_pressed(args)
    if args.json:
        json.dump(result.to_json(), out, indent=2)
        out.write("\n")
    else:
        print_result(make_console(out), result, display_path(args.model) or args.model)
    _coverage_warnings(result, err)
    if program and _write_program(result, args.model, program, err):
        return EXIT_USAGE
    if args.render:
        violated = [v.trace for v in result.verdicts if v.trace is not None]
        if violated:
            from kvspec.render.style import RenderError
            from kvspec.render.trace_graph import render_trace
            try:
                path = render_trace(violated[0].to_json(), Path(args.render))
            except (RenderError, OSError) as exc:
                err.write(f"kvspec: error: cannot render: {one_line(str(exc))}\n")
                return EXIT_USAGE
            if not args.json:
                err.write(f"kvspec: counterexample picture written to {path}\n")
        elif not args.json:
            err.write("kvspec: nothing to render: no property is violated\n")
    return result.exit_code


def cmd_show(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    system = _system(args)
    from kvspec.report.show import describe_model
    out.write(describe_model(system, display_path(args.model) or args.model))
    return 0


def _load_trace_document(path: str) -> dict[str, Any]:
    """A ``kvspec-trace/1`` or ``kvspec-result/1`` document; DocumentError otherwise."""
    what = "a kvspec trace"
    data = load_json_document(path, what)
    if not isinstance(data, dict) or data.get("format") not in TRACE_FORMATS:
        raise DocumentError(f"{path} is not a kvspec trace or result "
                            "(expected format kvspec-trace/1 or kvspec-result/1)")
    return data


def cmd_render(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    output_file(args.output, "-o")
    data = _load_trace_document(args.trace)
    from kvspec.render.style import RenderError
    from kvspec.render.trace_graph import TraceFormatError, extract_trace, render_trace
    try:
        trace = extract_trace(data, prop=args.property)
    except TraceFormatError as exc:
        raise DocumentError(f"{args.trace} is not a kvspec trace: {exc}") from None
    try:
        path = render_trace(trace, Path(args.output))
    except TraceFormatError as exc:
        raise DocumentError(f"{args.trace} is not a kvspec trace: {exc}") from None
    except (RenderError, OSError) as exc:
        err.write(f"kvspec: error: cannot render: {one_line(str(exc))}\n")
        return EXIT_USAGE
    out.write(f"{path}\n")
    return 0


def cmd_graph(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    output_file(args.output, "-o")
    system = _system(args)
    from kvspec.render.state_graph import GraphTooLarge, render_state_graph
    from kvspec.render.style import RenderError
    try:
        path = render_state_graph(system, Path(args.output), max_states=args.max_states,
                                  symmetry=not args.no_symmetry)
    except GraphTooLarge as exc:
        err.write(f"kvspec: error: {one_line(str(exc))}\n")
        return EXIT_USAGE
    except (RenderError, OSError) as exc:
        err.write(f"kvspec: error: cannot draw the state graph: {one_line(str(exc))}\n")
        return EXIT_USAGE
    out.write(f"{path}\n")
    return 0


def cmd_replay(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    data = _load_trace_document(args.trace)
    try:
        from kvspec.pool.page_pool import PoolError
        from kvspec.pool.replay import ReplayError, replay_trace
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "torch":
            raise
        raise UsageError("replay needs torch: pip install 'kvspec[replay]'") from None
    try:
        report = replay_trace(data, device=args.device, prop=args.property,
                              aftermath=not args.no_aftermath,
                              earlier_tenant=not args.no_tenant)
    except (ReplayError, PoolError) as exc:
        err.write(f"kvspec: error: {args.trace}: {one_line(str(exc))}\n")
        return EXIT_USAGE
    stop_if_pressed(args)
    if args.json:
        json.dump(report.to_json(), out, indent=2)
        out.write("\n")
    else:
        text = report.render_text()
        out.write(text if text.endswith("\n") else text + "\n")
    return 1 if report.leaked else 0


def cmd_fuzz(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    output_file(args.output, "-o")
    system = _system(args, args.property or None)
    _session(args).engine = "fuzz"
    result = fuzz(system, max_examples=args.max_examples, steps=args.steps, seed=args.seed,
                  timeout=args.timeout)
    stop_if_pressed(args)
    doc = result.to_json()
    if args.json:
        json.dump(doc, out, indent=2)
        out.write("\n")
    else:
        print_result(make_console(out), result, display_path(args.model) or args.model)
    if args.output:
        try:
            Path(args.output).write_text(json.dumps(doc, indent=2) + "\n")
        except OSError as exc:
            err.write(f"kvspec: error: cannot write {args.output}: {exc.strerror or exc}\n")
            return EXIT_USAGE
    return result.exit_code


def cmd_check_proof(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    doc = load_certificate(args.certificate)
    loaded = load_model(args.model, getattr(args, "model_class", None))
    given = parse_sizes(getattr(args, "size", None))
    sizes = _certificate_sizes(Path(args.certificate), doc, loaded, given)
    try:
        system = _system(args, sizes=sizes, loaded=loaded)
    except (UsageError, ModelError):
        if sizes == given:
            raise
        # sizes the model does not take: the certificate is checked (and rejected) at
        # the sizes of the command line, saying which sizes it is for
        system = _system(args, sizes=given, loaded=loaded)
    _session(args).engine = "certificate"
    from kvspec.proofs.certificate import check_certificate
    check = check_certificate(Path(args.certificate), system)
    stop_if_pressed(args)
    check.print(make_console(out))
    return 0 if check.ok else 1


def _certificate_sizes(path: Path, doc: dict[str, Any], loaded: LoadedModel,
                       given: dict[str, int]) -> dict[str, int]:
    """The sizes to re-check the certificate ``doc`` at: a size-specific certificate's
    own (those the model declares and lets be set), with ``given`` (``--size``) only
    confirming or adding to them; an all-sizes certificate's at ``given`` (the model's
    defaults where it is empty)."""
    own = doc.get("sizes") or {}
    if doc.get("kind", "size-specific") != "size-specific" or not own:
        return given
    clash = {k: v for k, v in given.items() if k in own and own[k] != v}
    if clash:
        from kvspec.report.text import sizes_text
        raise UsageError(f"{display_path(path)} is a certificate for "
                         f"{sizes_text(own)}, not {sizes_text(clash)}; leave --size out to "
                         "re-check it at its own sizes")
    from kvspec.lang.system import settable_sizes
    declared = {s.name for s in loaded.decl.sizes}
    sizes = {k: v for k, v in settable_sizes(loaded, own).items() if k in declared}
    return {**sizes, **given}


# -- the parser -------------------------------------------------------------------------------

class _ArgumentError(Exception):
    """A bad command line; the message is one line."""


class _Parser(argparse.ArgumentParser):
    """An argparse parser that reports a bad command line in one line, through ``main``."""

    def error(self, message: str) -> NoReturn:
        raise _ArgumentError(f"{self.prog}: error: {message}")


EPILOG = ("exit codes: 0 all properties hold/proved, 1 a violation, 2 usage or model error, "
          "3 unknown (a limit was hit), 70 internal error (a bug in kvspec), 130 interrupted")


@dataclass(frozen=True)
class ParserKit:
    """What a command module needs to add its subcommand to the parser: ``command(name,
    help, func)`` makes the subparser, ``model_args``/``timeout_arg`` add the shared
    options."""

    command: Callable[[str, str, Callable[..., int]], argparse.ArgumentParser]
    model_args: Callable[[argparse.ArgumentParser], None]
    timeout_arg: Callable[[argparse.ArgumentParser], None]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kvspec",
        description="Model checker for the KV-cache request lifecycle of LLM inference engines.",
        epilog=EPILOG)
    from kvspec import __version__
    parser.add_argument("--version", action="version", version=f"kvspec {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an internal error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, func: Callable[..., int]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, epilog=EPILOG)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=argparse.SUPPRESS)
        p.set_defaults(func=func)
        return p

    def model_args(p: argparse.ArgumentParser,
                   size_help: str = "override size parameters, e.g. requests=3,pages=16"
                   ) -> None:
        p.add_argument("model", help="model file (a Python file defining a kvspec.Model)")
        p.add_argument("--size", action="append", type=size_spec, metavar="NAME=N[,NAME=N]",
                       help=size_help)
        p.add_argument("--model-class", help="the Model class to use when the file has several")

    def timeout_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--timeout", type=positive_seconds, default=None, metavar="S",
                       help="give up after S > 0 seconds (verdict UNKNOWN); no limit if absent")

    v = command("verify", "check every property of a model", cmd_verify)
    model_args(v)
    v.add_argument("--property", action="append", metavar="NAME",
                   help="check only this property (repeatable)")
    v.add_argument("--engine", choices=ENGINES, default="auto",
                   help="auto (default): certificate, BMC, exhaustive or PDR as fits; "
                        "explicit: exhaustive BFS; bmc; kind: k-induction; pdr: IC3/PDR proofs")
    v.add_argument("--depth", type=non_negative_int, default=30, metavar="K",
                   help="BMC / k-induction bound, K >= 0 (default 30)")
    timeout_arg(v)
    v.add_argument("--max-states", type=positive_int, default=None, metavar="N",
                   help="give up after N >= 1 states (verdict UNKNOWN)")
    v.add_argument("--no-symmetry", action="store_true", help="turn symmetry reduction off")
    search_args(v)
    v.add_argument("--json", action="store_true", help="print the kvspec-result/1 JSON document")
    v.add_argument("--format", choices=("text", "python"), default="text",
                   help="python: also write the first counterexample as a runnable program "
                        "(needs --python FILE)")
    v.add_argument("--python", metavar="FILE",
                   help="write the first counterexample as a runnable Python program to FILE")
    v.add_argument("--render", type=picture_path, metavar="OUT",
                   help="draw the first counterexample (.svg, .png, .pdf or .dot)")
    v.add_argument("--save-proof", action="store_true",
                   help="with pdr/auto: write <file>.<class>.<sizes>.json certificates")
    v.add_argument("--proofs-dir", default=None, metavar="DIR",
                   help="where certificates live (default: the proofs-dir of the nearest "
                        "pyproject.toml with [tool.kvspec] above the model, else proofs/ "
                        "next to the model)")

    s = command("show", "list sizes, state variables, actions and properties", cmd_show)
    model_args(s)

    r = command("render", "draw a counterexample trace", cmd_render)
    r.add_argument("trace", help="a kvspec-trace/1 or kvspec-result/1 JSON file")
    r.add_argument("-o", "--output", required=True, type=picture_path,
                   help="out.svg, .png, .pdf or .dot")
    r.add_argument("--property", metavar="NAME",
                   help="from a result file, draw this property's counterexample "
                        "(default: the first violated one)")

    g = command("graph", "draw the reachable state graph of a small configuration", cmd_graph)
    model_args(g)
    g.add_argument("--max-states", type=positive_int, default=300, metavar="N",
                   help="refuse beyond N >= 1 states (default 300)")
    g.add_argument("--no-symmetry", action="store_true", help="do not merge symmetric states")
    g.add_argument("-o", "--output", required=True, type=picture_path,
                   help="graph.svg, .png, .pdf or .dot")

    p = command("replay", "replay a counterexample on a tensor KV page pool", cmd_replay)
    p.add_argument("trace", help="a kvspec-trace/1 or kvspec-result/1 JSON file")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--json", action="store_true", help="print the replay report as JSON")
    p.add_argument("--property", metavar="NAME",
                   help="from a result file, replay this property's counterexample")
    p.add_argument("--no-aftermath", action="store_true",
                   help="do not show what the pool state left by the trace permits next")
    p.add_argument("--no-tenant", action="store_true",
                   help="start from zeroed pages instead of an earlier tenant's stale KV")

    f = command("fuzz", "randomised exploration with shrinking (Hypothesis)", cmd_fuzz)
    model_args(f)
    f.add_argument("--property", action="append", metavar="NAME")
    f.add_argument("--max-examples", type=positive_int, default=200, metavar="N",
                   help="examples per round, N >= 1 (default 200)")
    f.add_argument("--steps", type=positive_int, default=50, metavar="K",
                   help="steps per example, K >= 1 (default 50)")
    f.add_argument("--seed", type=integer, default=0)
    timeout_arg(f)
    f.add_argument("--json", action="store_true")
    f.add_argument("-o", "--output", help="also write the result JSON here")

    c = command("check-proof", "re-check a stored proof certificate", cmd_check_proof)
    c.add_argument("certificate", help="proofs/<file>.<class>.<sizes>.json")
    model_args(c, "the sizes to re-check an all-sizes certificate at; a size-specific one "
                  "is re-checked at its own sizes (these may only agree with them)")

    kit = ParserKit(command, model_args, timeout_arg)
    from kvspec.gate import check_cmd, diff_cmd
    from kvspec.audit import audit_cmd
    from kvspec.liveness import live_cmd
    check_cmd.register(kit)
    diff_cmd.register(kit)
    live_cmd.register(kit)
    audit_cmd.register(kit)
    return parser


# -- entry points -----------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None, out: IO[str] | None = None,
         err: IO[str] | None = None) -> int:
    """Run one command line; every way it can end is an exit code (module docstring)."""
    out = out or sys.stdout
    err = err or sys.stderr
    args: argparse.Namespace | None = None
    debug = False
    try:
        parser = build_parser()
        try:
            with contextlib.redirect_stdout(out):
                args = parser.parse_args(argv)
        except _ArgumentError as exc:
            err.write(one_line(str(exc)) + "\n")
            return EXIT_USAGE
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        debug = bool(getattr(args, "debug", False))
        with CtrlC() as ctrl_c:
            args.session = _Session(ctrl_c=ctrl_c)
            code = int(args.func(args, out, err))
            ctrl_c.check()
        return code
    except KeyboardInterrupt:
        return _interrupted(args, out, err)
    except (ModelError, UsageError, DocumentError) as exc:
        if debug:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)
        return _error(err, exc)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a bare traceback
        if _interrupt_inside(exc):
            return _interrupted(args, out, err)
        return _internal(err, exc, debug)


def _interrupt_inside(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C in disguise: ctypes (under Z3's API) turns a
    KeyboardInterrupt raised while it converts a call's arguments into
    ``ArgumentError("argument 1: KeyboardInterrupt: ")``, without chaining it."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, KeyboardInterrupt):
            return True
        if isinstance(e, ctypes.ArgumentError) and ": KeyboardInterrupt:" in f"{e}:":
            return True
        e = e.__cause__ or e.__context__
    return False


def entry() -> None:
    sys.exit(main())
