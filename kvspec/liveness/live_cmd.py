"""The ``kvspec live`` subcommand (registered by :func:`register`): liveness
properties and deadlock freedom of a model, with lasso counterexamples.

Exit codes as everywhere: 0 every property holds, 1 a violation, 2 a usage or
model error (raised as ``UsageError``/``ModelError`` for ``kvspec.cli.main`` to
report in one line), 3 unknown (a limit was hit).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import IO, Any

from kvspec.cli_args import positive_int
from kvspec.ctrl_c import stop_if_pressed
from kvspec.engines.native import BACKENDS, default_backend
from kvspec.lang.errors import UsageError
from kvspec.lang.loader import LoadedModel, load_model, parse_sizes
from kvspec.lang.system import System, compile_model
from kvspec.liveness.check import DEADLOCK_METHOD, check_liveness
from kvspec.liveness.obligations import DEADLOCK, LIVENESS
from kvspec.liveness.report import print_verdicts, render_verdicts
from kvspec.liveness.proof import check_liveness_proof
from kvspec.liveness.symbolic import check_liveness_bmc
from kvspec.report.wording import display_path
from kvspec.verdict import Result, Stats, Status, Verdict

ENGINES = ("explicit", "bmc", "proof", "auto")
DEFAULT_DEPTH = 20
#: --engine auto: the explicit search gives up after this many states (unless
#: --max-states says otherwise) and the proof engine takes the properties it left open
AUTO_MAX_STATES = 200_000


def compile_for_liveness(loaded: LoadedModel, sizes: dict[str, int]) -> System:
    """The model compiled without safety monitors: the liveness search keeps its own
    obligation monitor, and stored safety-monitor variables could only multiply the
    states it explores."""
    return compile_model(loaded, sizes, [])


def cmd_live(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    loaded = load_model(args.model, getattr(args, "model_class", None))
    system = compile_for_liveness(loaded, parse_sizes(getattr(args, "size", None)))
    session = getattr(args, "session", None)
    if session is not None and hasattr(session, "system"):
        session.model = args.model
        session.json = bool(args.json)
    engine = getattr(args, "engine", None) or "explicit"
    if engine in ("bmc", "proof") and getattr(args, "symmetry", False):
        raise UsageError("--symmetry applies to --engine explicit and auto")
    backend = getattr(args, "backend", None)
    if engine in ("bmc", "proof") and backend is not None:
        raise UsageError("--backend applies to --engine explicit and auto")
    if engine == "bmc":
        if args.max_states is not None:
            raise UsageError("--max-states applies to --engine explicit; the bmc engine is "
                             "bounded by --depth")
        verdicts, stats = check_liveness_bmc(system, properties=args.property or None,
                                             depth=args.depth or DEFAULT_DEPTH,
                                             fairness=not args.no_fairness,
                                             timeout=args.timeout)
        if not args.no_deadlock:
            verdicts.append(Verdict(DEADLOCK, Status.UNKNOWN, DEADLOCK_METHOD,
                                    "not checked by --engine bmc (use --engine explicit)"))
    elif engine == "proof":
        if args.max_states is not None or args.depth is not None:
            raise UsageError("--max-states and --depth do not apply to --engine proof")
        verdicts, stats = check_liveness_proof(system, properties=args.property or None,
                                               fairness=not args.no_fairness,
                                               timeout=args.timeout)
        if not args.no_deadlock:
            verdicts.append(Verdict(DEADLOCK, Status.UNKNOWN, DEADLOCK_METHOD,
                                    "not checked by --engine proof (use --engine explicit)"))
    else:
        if args.depth is not None:
            raise UsageError("--depth applies to --engine bmc")
        auto = engine == "auto"
        limit = args.max_states or (AUTO_MAX_STATES if auto else None)
        share = None if args.timeout is None or not auto else args.timeout / 2
        started = time.monotonic()
        verdicts, stats = check_liveness(system, properties=args.property or None,
                                         deadlock=not args.no_deadlock,
                                         max_states=limit,
                                         timeout=share if auto else args.timeout,
                                         fairness=not args.no_fairness,
                                         symmetry=bool(getattr(args, "symmetry", False)),
                                         backend=backend or default_backend(),
                                         warn=lambda m: err.write(f"kvspec: warning: {m}\n"))
        if auto:
            left = None if args.timeout is None else \
                max(1.0, args.timeout - (time.monotonic() - started))
            verdicts = _prove_open(system, verdicts, left, not args.no_fairness)
    result = Result(system, {"bmc": "liveness-bmc", "proof": "liveness-proof"}.get(
        engine, "liveness"), verdicts, stats)
    stop_if_pressed(args)  # Ctrl-C pressed during the run: no verdict
    if getattr(args, "python", None):
        _write_program(args, verdicts, err)
    if args.json:
        json.dump(result.to_json(), out, indent=2)
        out.write("\n")
    else:
        shown = display_path(args.model)
        sizes = ", ".join(f"{k}={v}" for k, v in system.sizes.items())
        title = f"kvspec live {system.name} ({shown})  {sizes}"
        if engine == "bmc":
            out.write(_render_bmc(verdicts, stats, title))
        elif engine == "proof":
            out.write(_render_proof(verdicts, stats, title))
        else:
            print_verdicts(out, verdicts, stats, title)
    return result.exit_code


def _write_program(args: argparse.Namespace, verdicts: list[Verdict], err: IO[str]) -> None:
    """``--python FILE``: the first lasso as a program that re-executes it (exit 0 while
    the leak reproduces, 1 once the model is fixed)."""
    from kvspec.report.python_snippet import lasso_program

    lassos = [v for v in verdicts if v.trace is not None and v.trace.loop_start is not None]
    if not lassos:
        err.write(f"kvspec: no program written: no lasso counterexample ({args.python})\n")
        return
    of_library = [v for v in lassos if v.prop in LIVENESS]
    if not of_library:
        err.write(f"kvspec: no program written: lasso programs are built for the library "
                  f"liveness properties only, not for {lassos[0].prop} ({args.python})\n")
        return
    lassos = of_library
    trace = lassos[0].trace
    assert trace is not None
    source = lasso_program(trace.to_json(), args.model, program_path=args.python,
                           fairness=not args.no_fairness)
    try:
        Path(args.python).write_text(source, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {args.python}: {exc.strerror or exc}") from None
    if not args.json:
        err.write(f"kvspec: lasso program for {lassos[0].prop} written to {args.python}\n")


def _prove_open(system: System, verdicts: list[Verdict], timeout: float | None,
                fairness: bool) -> list[Verdict]:
    """``--engine auto``: the library properties the explicit search left UNKNOWN go to
    the proof engine; a proof replaces the UNKNOWN, anything else keeps it."""
    open_props = [v.prop for v in verdicts if v.status is Status.UNKNOWN and v.prop in LIVENESS]
    if not open_props:
        return verdicts
    proved, _ = check_liveness_proof(system, properties=open_props, fairness=fairness,
                                     timeout=timeout)
    by_prop = {v.prop: v for v in proved if v.status is Status.HOLDS}
    return [by_prop.get(v.prop, v) for v in verdicts]


def _render_proof(verdicts: list[Verdict], stats: Stats, title: str) -> str:
    lines = render_verdicts(verdicts, stats, title).split("\n")
    lines[1] = (f"  k-liveness: {stats.seconds:.2f} s (HOLDS only with a re-checked inductive "
                "invariant; no lassos: use --engine explicit or bmc)")
    return "\n".join(lines)


def _render_bmc(verdicts: list[Verdict], stats: Stats, title: str) -> str:
    """The explicit engine's text with its search line replaced by the bounded one."""
    lines = render_verdicts(verdicts, stats, title).split("\n")
    info = stats.extra.get("liveness", {})
    lines[1] = (f"  bmc-lasso: lassos of up to {info.get('max_depth', stats.depth)} steps, "
                f"searched to depth {stats.depth}, {stats.seconds:.2f} s (bounded: no lasso "
                "found is UNKNOWN, never HOLDS)")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser, kit: Any | None = None) -> None:
    """The options of ``kvspec live`` after the model arguments."""
    p.add_argument("--property", action="append", metavar="NAME",
                   help="check only this liveness property (repeatable): "
                        + ", ".join(LIVENESS) + ", or one of the model's own temporal "
                        "properties (@eventually, @always_eventually, leads_to)")
    p.add_argument("--no-deadlock", action="store_true", help="do not look for deadlocks")
    p.add_argument("--no-fairness", action="store_true",
                   help="ignore the model's @action(fair=...) declarations")
    p.add_argument("--engine", choices=ENGINES, default="explicit",
                   help="explicit: exhaustive search of the reachable graph (default); bmc: "
                        "bounded symbolic search for lassos with Z3 (no lasso is UNKNOWN); "
                        "proof: k-liveness proofs with Spacer, the invariant re-checked (no "
                        "proof is UNKNOWN); auto: explicit up to "
                        f"{AUTO_MAX_STATES:,} states, then proof for what it left open")
    p.add_argument("--depth", type=positive_int, default=None, metavar="K",
                   help=f"--engine bmc: lassos of at most K >= 1 steps (default {DEFAULT_DEPTH})")
    p.add_argument("--symmetry", action=argparse.BooleanOptionalAction, default=False,
                   help="--engine explicit: search the symmetry quotient (interchangeable "
                        "requests/pages; same verdicts, real lassos not claimed shortest); "
                        "off by default")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="--engine explicit/auto: build the reachable graph with native (the "
                        "model compiled to C; the default when a C compiler is present) or "
                        "python; the same graph either way (--symmetry's quotient is built "
                        "in Python)")
    p.add_argument("--max-states", type=positive_int, default=None, metavar="N",
                   help="give up after N >= 1 states (verdict UNKNOWN)")
    if kit is not None:
        kit.timeout_arg(p)
    p.add_argument("--python", metavar="FILE", default=None,
                   help="write the first lasso (choose with --property) as a runnable Python "
                        "program: exit 0 while it reproduces, 1 once the model is fixed")
    p.add_argument("--json", action="store_true", help="print the kvspec-result/1 JSON document")


def register(kit: Any) -> None:
    """Add ``kvspec live`` through ``kit`` (a :class:`kvspec.cli.ParserKit`)."""
    p = kit.command("live", "check liveness (leaks, progress) and deadlock under fairness",
                    cmd_live)
    kit.model_args(p)
    add_arguments(p, kit)
