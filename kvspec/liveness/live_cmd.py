"""The ``kvspec live`` subcommand (registered by :func:`register`): liveness
properties and deadlock freedom of a model, with lasso counterexamples.

Exit codes as everywhere: 0 every property holds, 1 a violation, 2 a usage or
model error (raised as ``UsageError``/``ModelError`` for ``kvspec.cli.main`` to
report in one line), 3 unknown (a limit was hit).
"""
from __future__ import annotations

import argparse
import json
import os
from typing import IO, Any

from kvspec.lang.loader import LoadedModel, load_model, parse_sizes
from kvspec.lang.system import System, compile_model
from kvspec.liveness.check import check_liveness
from kvspec.liveness.obligations import LIVENESS
from kvspec.liveness.report import print_verdicts
from kvspec.props import library
from kvspec.verdict import Result


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def compile_for_liveness(loaded: LoadedModel, sizes: dict[str, int]) -> System:
    """The model compiled with as few safety monitors as ``compile_model`` allows
    (one library property, the first the model selects): the liveness search keeps
    its own obligation monitor, and every stored safety-monitor variable could only
    multiply the states it explores."""
    chosen = [n for n in (loaded.decl.properties or ()) if n in library.LIBRARY]
    return compile_model(loaded, sizes, [chosen[0] if chosen else library.NDAR])


def cmd_live(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    loaded = load_model(args.model, getattr(args, "model_class", None))
    system = compile_for_liveness(loaded, parse_sizes(getattr(args, "size", None)))
    session = getattr(args, "session", None)
    if session is not None and hasattr(session, "system"):
        session.model = args.model
        session.json = bool(args.json)
    verdicts, stats = check_liveness(system, properties=args.property or None,
                                     deadlock=not args.no_deadlock,
                                     max_states=args.max_states, timeout=args.timeout,
                                     fairness=not args.no_fairness)
    result = Result(system, "liveness", verdicts, stats)
    if args.json:
        json.dump(result.to_json(), out, indent=2)
        out.write("\n")
    else:
        shown = os.path.relpath(args.model) if not os.path.relpath(args.model).startswith("..") \
            else args.model
        sizes = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
        print_verdicts(out, verdicts, stats, f"kvspec live {system.name} ({shown})  {sizes}")
    return result.exit_code


def add_arguments(p: argparse.ArgumentParser, kit: Any | None = None) -> None:
    """The options of ``kvspec live`` after the model arguments."""
    p.add_argument("--property", action="append", choices=list(LIVENESS), metavar="NAME",
                   help="check only this liveness property (repeatable): "
                        + ", ".join(LIVENESS))
    p.add_argument("--no-deadlock", action="store_true", help="do not look for deadlocks")
    p.add_argument("--no-fairness", action="store_true",
                   help="ignore the model's @action(fair=...) declarations")
    p.add_argument("--max-states", type=_positive_int, default=None, metavar="N",
                   help="give up after N >= 1 states (verdict UNKNOWN)")
    if kit is not None:
        kit.timeout_arg(p)
    p.add_argument("--json", action="store_true", help="print the kvspec-result/1 JSON document")


def register(kit: Any) -> None:
    """Add ``kvspec live`` through ``kit`` (a :class:`kvspec.cli.ParserKit`)."""
    p = kit.command("live", "check liveness (leaks, progress) and deadlock under fairness",
                    cmd_live)
    kit.model_args(p)
    add_arguments(p, kit)
