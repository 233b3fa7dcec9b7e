"""The ``kvspec audit`` subcommand (registered by :func:`register`).

``kvspec audit LOG --model MODEL [--mapping MAP]`` checks a recorded engine event log
(JSON Lines, see docs/audit.md) against the library properties, the seed tutorial's
acceptance checks, and — trace validation — against the model's behaviours.

Exit codes: 0 every check passes, 1 a violation or a log event the model cannot
produce, 2 a usage, model, mapping or log-format error (one line naming file:line),
3 unknown (too many live ids or model states to go on).
"""
from __future__ import annotations

import argparse
import json
from typing import IO, Any

from kvspec.audit.logformat import AuditInputError
from kvspec.audit.mapping import load_mapping
from kvspec.audit.report import Progress, print_text, write_junit
from kvspec.audit.run import audit_file
from kvspec.cli_args import non_negative_int, output_file, picture_path, positive_int
from kvspec.ctrl_c import stop_if_pressed
from kvspec.lang.errors import ModelError, UsageError
from kvspec.verdict import EXIT_USAGE

__all__ = ["cmd_audit", "register"]


def register(kit: Any) -> None:
    """Add the subcommand through ``kit`` (a :class:`kvspec.cli.ParserKit`)."""
    p = kit.command("audit", "audit a recorded engine event log (JSON Lines) against the "
                    "properties, the acceptance checks and a model", cmd_audit)
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", help="the event log, one JSON object per line (docs/audit.md)")
    p.add_argument("--model", required=True, metavar="MODEL",
                   help="the design the log must be a behaviour of (a model file)")
    p.add_argument("--mapping", metavar="MAP",
                   help="TOML mapping of the log's event names and fields to kvspec events "
                        "(default: identity; see kvspec/audit/mappings/)")
    p.add_argument("--size", action="append", metavar="NAME=N[,NAME=N]",
                   help="model sizes for the conformance check, e.g. requests=8,pages=64: "
                        "requests must cover the log's requests live at once")
    p.add_argument("--model-class", help="the Model class to use when the file has several")
    p.add_argument("--property", action="append", metavar="NAME",
                   help="audit only this library property (repeatable)")
    p.add_argument("--no-conformance", action="store_true",
                   help="skip the conformance check (properties and acceptance checks only)")
    p.add_argument("--closure-depth", type=non_negative_int, default=4, metavar="K",
                   help="silent model steps tried before each log event (default 4)")
    p.add_argument("--max-states", type=positive_int, default=10_000, metavar="N",
                   help="model states consistent with the log at once before giving up "
                        "(UNKNOWN; default 10000)")
    p.add_argument("--json", action="store_true", help="print the kvspec-audit/1 JSON document")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report (one testcase "
                                                   "per check)")
    p.add_argument("--picture", type=picture_path, metavar="OUT",
                   help="draw the first violating window of the log (involved requests and "
                        "pages, the violating event in red) to OUT: .svg, .png, .pdf (need "
                        "Graphviz) or .dot")



def cmd_audit(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    try:
        return _audit(args, out, err)
    except (AuditInputError, UsageError, ModelError) as exc:
        err.write(f"kvspec: error: {' '.join(str(exc).split())}\n")
        return EXIT_USAGE


def _audit(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from kvspec.lang.loader import load_model, parse_sizes
    from kvspec.lang.system import compile_model

    junit = output_file(args.junit, "--junit")
    picture = output_file(getattr(args, "picture", None), "--picture")
    mapping = load_mapping(args.mapping)
    loaded = load_model(args.model, getattr(args, "model_class", None))
    # the model's own variables are what conformance needs: no property monitor
    system = compile_model(loaded, parse_sizes(args.size), [])
    progress = Progress(err, enabled=not args.json)
    try:
        result = audit_file(args.log, mapping, system=None if args.no_conformance else system,
                            model_file=args.model, properties=args.property,
                            progress=progress, closure_depth=args.closure_depth,
                            max_configs=args.max_states)
    finally:
        progress.done()
    if args.no_conformance:
        result.model_name = system.name
    stop_if_pressed(args)
    if args.json:
        out.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        print_text(result, out)
    if junit is not None:
        write_junit(result, junit)
    if picture is not None:
        from kvspec.audit.picture import write_picture
        from kvspec.render.style import RenderError
        try:
            drawn = write_picture(args.log, mapping, result, picture)
        except RenderError as exc:
            err.write(f"kvspec: error: --picture: {exc}\n")
            return EXIT_USAGE
        note = f"picture of the first violating window: {picture}" if drawn else \
            f"no violation: no picture written to {picture}"
        err.write(note + "\n") if args.json else out.write(note + "\n")
    return result.exit_code
