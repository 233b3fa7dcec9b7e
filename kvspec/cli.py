"""The ``kvspec`` command line. Each subcommand is a plain function taking the parsed
arguments and the output streams and returning the exit code:
0 all hold/proved, 1 a violation, 2 usage or model error, 3 unknown.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import IO, Any, Callable, Sequence

from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.loader import load_model, parse_sizes
from kvspec.lang.system import System, compile_model
from kvspec.report.text import make_console, print_result
from kvspec.trace import InternalError
from kvspec.verdict import EXIT_UNKNOWN, EXIT_USAGE, EngineOutcome, Result

ENGINES = ("auto", "explicit", "bmc", "kind", "pdr")
#: a kvspec bug (e.g. a solver counterexample that does not replay): loud, never a verdict
EXIT_INTERNAL = 70


def _display(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path


def _error(err: IO[str], exc: BaseException) -> int:
    if isinstance(exc, ModelError):
        exc.file = _display(exc.file)
        err.write(f"kvspec: error: {exc}\n")
    else:
        err.write(f"kvspec: error: {exc}\n")
    return EXIT_USAGE


def _system(args: argparse.Namespace, properties: list[str] | None = None) -> System:
    loaded = load_model(args.model, getattr(args, "model_class", None))
    return compile_model(loaded, parse_sizes(getattr(args, "size", None)), properties)


class _Progress:
    """A live progress line on a terminal; silent otherwise."""

    def __init__(self, err: IO[str], enabled: bool) -> None:
        self.err = err
        self.enabled = enabled and hasattr(err, "isatty") and err.isatty()
        self.shown = False

    def __call__(self, states: int, depth: int, elapsed: float) -> None:
        if not self.enabled:
            return
        rate = states / elapsed if elapsed > 0 else 0.0
        self.err.write(f"\r  explored {states:,} states, depth {depth}, {elapsed:.1f} s "
                       f"({rate:,.0f} states/s)   ")
        self.err.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.err.write("\r" + " " * 78 + "\r")
            self.err.flush()


def run_engine(system: System, args: argparse.Namespace, progress: Callable[..., None]
               ) -> EngineOutcome:
    engine = args.engine
    timeout = args.timeout
    if engine == "explicit":
        from kvspec.engines.explicit import Limits, explore
        out = explore(system, symmetry=not args.no_symmetry,
                      limits=Limits(args.max_states, timeout), progress=progress)
        return EngineOutcome(out.verdicts, out.stats, "explicit")
    if engine == "bmc":
        from kvspec.engines.bmc import run_bmc
        return run_bmc(system, depth=args.depth, timeout=timeout, progress=progress)
    if engine == "kind":
        from kvspec.engines.kind import run_kind
        return run_kind(system, max_k=args.depth, timeout=timeout, progress=progress)
    if engine == "pdr":
        from kvspec.engines.pdr import run_pdr
        return run_pdr(system, timeout=timeout, save_proof=args.save_proof,
                       proofs_dir=Path(args.proofs_dir), progress=progress)
    from kvspec.engines.auto import run_auto
    return run_auto(system, timeout=timeout, max_states=args.max_states,
                    symmetry=not args.no_symmetry, save_proof=args.save_proof,
                    proofs_dir=Path(args.proofs_dir), progress=progress)


def cmd_verify(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    try:
        system = _system(args, args.property or None)
    except (ModelError, UsageError) as exc:
        return _error(err, exc)
    progress = _Progress(err, not args.json)
    try:
        outcome = run_engine(system, args, progress)
    except ModelError as exc:
        progress.done()
        return _error(err, exc)
    except InternalError as exc:
        progress.done()
        err.write(f"kvspec: INTERNAL ERROR (a bug in kvspec, please report it): {exc}\n")
        return EXIT_INTERNAL
    progress.done()
    result = Result(system, outcome.engine or args.engine, outcome.verdicts, outcome.stats)
    if args.json:
        json.dump(result.to_json(), out, indent=2)
        out.write("\n")
    elif args.format == "python":
        from kvspec.report.python_snippet import trace_program
        console = make_console(out)
        print_result(console, result, _display(args.model) or args.model)
        for v in result.verdicts:
            if v.trace is not None:
                out.write(trace_program(v.trace.to_json(), args.model) + "\n")
    else:
        print_result(make_console(out), result, _display(args.model) or args.model)
    if args.render:
        violated = [v for v in result.verdicts if v.trace is not None]
        if violated:
            try:
                from kvspec.render.trace_graph import render_trace
                path = render_trace(violated[0].trace.to_json(), Path(args.render))  # type: ignore[union-attr]
                if not args.json:
                    err.write(f"kvspec: counterexample picture written to {path}\n")
            except Exception as exc:  # missing dot, bad path
                err.write(f"kvspec: error: cannot render: {exc}\n")
                return EXIT_USAGE
        elif not args.json:
            err.write("kvspec: nothing to render: no property is violated\n")
    return result.exit_code


def cmd_show(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    try:
        system = _system(args)
    except (ModelError, UsageError) as exc:
        return _error(err, exc)
    from kvspec.report.show import describe_model
    out.write(describe_model(system, _display(args.model) or args.model))
    return 0


def _load_json(path: str, err: IO[str]) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        err.write(f"kvspec: error: no such file: {path}\n")
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        err.write(f"kvspec: error: {path} is not JSON: {exc}\n")
        return None
    if not isinstance(data, dict) or data.get("format") not in ("kvspec-trace/1",
                                                                "kvspec-result/1"):
        err.write(f"kvspec: error: {path} is not a kvspec trace or result "
                  "(expected format kvspec-trace/1 or kvspec-result/1)\n")
        return None
    return data


def cmd_render(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    data = _load_json(args.trace, err)
    if data is None:
        return EXIT_USAGE
    from kvspec.render.trace_graph import TraceFormatError, extract_trace, render_trace
    try:
        trace = extract_trace(data, prop=args.property)
        path = render_trace(trace, Path(args.output))
    except TraceFormatError as exc:
        err.write(f"kvspec: error: {args.trace}: {exc}\n")
        return EXIT_USAGE
    except Exception as exc:
        err.write(f"kvspec: error: cannot render: {exc}\n")
        return EXIT_USAGE
    out.write(f"{path}\n")
    return 0


def cmd_graph(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    try:
        system = _system(args)
    except (ModelError, UsageError) as exc:
        return _error(err, exc)
    from kvspec.render.state_graph import GraphTooLarge, render_state_graph
    try:
        path = render_state_graph(system, Path(args.output), max_states=args.max_states,
                                  symmetry=not args.no_symmetry)
    except GraphTooLarge as exc:
        err.write(f"kvspec: error: {exc}\n")
        return EXIT_USAGE
    except ModelError as exc:
        return _error(err, exc)
    except Exception as exc:
        err.write(f"kvspec: error: cannot draw the state graph: {exc}\n")
        return EXIT_USAGE
    out.write(f"{path}\n")
    return 0


def cmd_replay(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    data = _load_json(args.trace, err)
    if data is None:
        return EXIT_USAGE
    try:
        from kvspec.pool.replay import ReplayError, replay_trace
    except ImportError:
        err.write("kvspec: error: replay needs torch: pip install 'kvspec[replay]'\n")
        return EXIT_USAGE
    try:
        report = replay_trace(data, device=args.device, prop=args.property,
                              aftermath=not args.no_aftermath,
                              earlier_tenant=not args.no_tenant)
    except (ReplayError, ValueError) as exc:
        err.write(f"kvspec: error: {args.trace}: {exc}\n")
        return EXIT_USAGE
    if args.json:
        json.dump(report.to_json(), out, indent=2)
        out.write("\n")
    else:
        text = report.render_text()
        out.write(text if text.endswith("\n") else text + "\n")
    return 1 if report.leaked else 0


def cmd_fuzz(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    try:
        system = _system(args, args.property or None)
    except (ModelError, UsageError) as exc:
        return _error(err, exc)
    from kvspec.engines.fuzz import run_fuzz
    try:
        outcome = run_fuzz(system, max_examples=args.max_examples, steps=args.steps,
                           seed=args.seed, timeout=args.timeout)
    except ModelError as exc:
        return _error(err, exc)
    except InternalError as exc:
        err.write(f"kvspec: INTERNAL ERROR (a bug in kvspec, please report it): {exc}\n")
        return EXIT_INTERNAL
    result = Result(system, "fuzz", outcome.verdicts, outcome.stats)
    if args.json:
        json.dump(result.to_json(), out, indent=2)
        out.write("\n")
    else:
        print_result(make_console(out), result, _display(args.model) or args.model)
    if args.output:
        Path(args.output).write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return result.exit_code


def cmd_check_proof(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    try:
        system = _system(args)
    except (ModelError, UsageError) as exc:
        return _error(err, exc)
    from kvspec.proofs.certificate import check_certificate
    check = check_certificate(Path(args.certificate), system)
    console = make_console(out)
    check.print(console)
    return 0 if check.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvspec",
        description="Model checker for the KV-cache request lifecycle of LLM inference engines.",
        epilog="exit codes: 0 all properties hold/proved, 1 a violation, 2 usage or model "
               "error, 3 unknown (a limit was hit)")
    from kvspec import __version__
    parser.add_argument("--version", action="version", version=f"kvspec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("model", help="model file (a Python file defining a kvspec.Model)")
        p.add_argument("--size", action="append", metavar="NAME=N[,NAME=N]",
                       help="override size parameters, e.g. requests=3,pages=16")
        p.add_argument("--model-class", help="the Model class to use when the file has several")

    v = sub.add_parser("verify", help="check every property of a model")
    model_args(v)
    v.add_argument("--property", action="append", metavar="NAME",
                   help="check only this property (repeatable)")
    v.add_argument("--engine", choices=ENGINES, default="auto",
                   help="auto (default): certificate, BMC, exhaustive or PDR as fits; "
                        "explicit: exhaustive BFS; bmc; kind: k-induction; pdr: IC3/PDR proofs")
    v.add_argument("--depth", type=int, default=30, help="BMC / k-induction bound (default 30)")
    v.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="give up after S seconds (verdict UNKNOWN)")
    v.add_argument("--max-states", type=int, default=None, metavar="N",
                   help="give up after N states (verdict UNKNOWN)")
    v.add_argument("--no-symmetry", action="store_true", help="turn symmetry reduction off")
    v.add_argument("--json", action="store_true", help="print the kvspec-result/1 JSON document")
    v.add_argument("--format", choices=("text", "python"), default="text",
                   help="python: also print each counterexample as a runnable program")
    v.add_argument("--render", metavar="OUT", help="draw the first counterexample "
                   "(.svg, .png, .pdf or .dot)")
    v.add_argument("--save-proof", action="store_true",
                   help="with pdr/auto: write proofs/<model>.<size>.json certificates")
    v.add_argument("--proofs-dir", default="proofs", help="where certificates live")
    v.set_defaults(func=cmd_verify)

    s = sub.add_parser("show", help="list sizes, state variables, actions and properties")
    model_args(s)
    s.set_defaults(func=cmd_show)

    r = sub.add_parser("render", help="draw a counterexample trace")
    r.add_argument("trace", help="a kvspec-trace/1 or kvspec-result/1 JSON file")
    r.add_argument("-o", "--output", required=True, help="out.svg, .png, .pdf or .dot")
    r.add_argument("--property", metavar="NAME",
                   help="from a result file, draw this property's counterexample "
                        "(default: the first violated one)")
    r.set_defaults(func=cmd_render)

    g = sub.add_parser("graph", help="draw the reachable state graph of a small configuration")
    model_args(g)
    g.add_argument("--max-states", type=int, default=300, help="refuse beyond N states")
    g.add_argument("--no-symmetry", action="store_true", help="do not merge symmetric states")
    g.add_argument("-o", "--output", required=True, help="graph.svg, .png, .pdf or .dot")
    g.set_defaults(func=cmd_graph)

    p = sub.add_parser("replay", help="replay a counterexample on a tensor KV page pool")
    p.add_argument("trace", help="a kvspec-trace/1 or kvspec-result/1 JSON file")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--json", action="store_true", help="print the replay report as JSON")
    p.add_argument("--property", metavar="NAME",
                   help="from a result file, replay this property's counterexample")
    p.add_argument("--no-aftermath", action="store_true",
                   help="do not show what the pool state left by the trace permits next")
    p.add_argument("--no-tenant", action="store_true",
                   help="start from zeroed pages instead of an earlier tenant's stale KV")
    p.set_defaults(func=cmd_replay)

    f = sub.add_parser("fuzz", help="randomised exploration with shrinking (Hypothesis)")
    model_args(f)
    f.add_argument("--property", action="append", metavar="NAME")
    f.add_argument("--max-examples", type=int, default=200)
    f.add_argument("--steps", type=int, default=50, help="steps per example")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--timeout", type=float, default=None, metavar="S")
    f.add_argument("--json", action="store_true")
    f.add_argument("-o", "--output", help="also write the result JSON here")
    f.set_defaults(func=cmd_fuzz)

    c = sub.add_parser("check-proof", help="re-check a stored proof certificate")
    c.add_argument("certificate", help="proofs/<model>.<size>.json")
    model_args(c)
    c.set_defaults(func=cmd_check_proof)
    return parser


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None,
         err: IO[str] | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the message
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return int(args.func(args, out, err))
    except UsageError as exc:
        return _error(err, exc)
    except ModelError as exc:
        return _error(err, exc)
    except KeyboardInterrupt:
        err.write("kvspec: interrupted\n")
        return EXIT_UNKNOWN


def entry() -> None:
    sys.exit(main())

