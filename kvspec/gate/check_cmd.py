"""The ``kvspec check`` subcommand (registered by :func:`register`): gate a lifecycle
design in CI against the expectations of ``[tool.kvspec]`` in ``pyproject.toml``.

Exit codes: 0 every case passes, 1 a case failed (a verdict contradicts its
expectation, or a dead action), 2 a configuration or model error (or a bad command
line), 3 nothing failed but some case was not decided.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import IO, Any, Mapping

from kvspec.cli_args import output_file
from kvspec.ctrl_c import stop_if_pressed
from kvspec.engines.native import BACKENDS
from kvspec.lang.errors import UsageError

__all__ = ["cmd_check", "register"]

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def register(kit: Any) -> None:
    """Add the subcommand to the parser through ``kit`` (a :class:`kvspec.cli.ParserKit`)."""
    p = kit.command("check", "gate a design in CI: check the models of [tool.kvspec] in "
                    "pyproject.toml against their expected verdicts", cmd_check)
    p.add_argument("--config", metavar="PYPROJECT",
                   help="the pyproject.toml to read (default: the nearest one with a "
                        "[tool.kvspec] table, from the working directory upward)")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    p.add_argument("--sarif", metavar="FILE", help="write a SARIF 2.1.0 report")
    p.add_argument("--summary", metavar="FILE",
                   help=f"write a Markdown summary (also appended to ${SUMMARY_ENV} when set)")
    p.add_argument("--model", action="append", metavar="NAME",
                   help="check only this configured model (repeatable)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="explicit search (the explicit engine, auto's explicit stage, the "
                        "liveness graph): native (the model compiled to C) or python")



def _display(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def cmd_check(args: argparse.Namespace, out: IO[str], err: IO[str],
              environ: Mapping[str, str] | None = None) -> int:
    from kvspec.gate.check import CaseStatus, run_gate
    from kvspec.gate.config import find_pyproject, load_config
    from kvspec.gate.reports import print_closing, print_header, print_model

    env = os.environ if environ is None else environ
    outputs = {name: output_file(getattr(args, name), f"--{name}")
               for name in ("junit", "sarif", "summary")}
    if args.config is not None:
        pyproject = Path(args.config)
        if not pyproject.exists():
            raise UsageError(f"--config {args.config}: no such file")
        if pyproject.is_dir():
            pyproject = pyproject / "pyproject.toml"
    else:
        found = find_pyproject(Path.cwd())
        if found is None:
            raise UsageError(f"no pyproject.toml with a [tool.kvspec] table in {Path.cwd()} "
                             "or above (or give --config PYPROJECT)")
        pyproject = found
    config = load_config(pyproject)

    def streamed(run: Any) -> None:
        stop_if_pressed(args)
        print_model(out, run)
        out.flush()
        for case in run.cases:
            if case.status is CaseStatus.ERROR:
                err.write(f"kvspec: error: {case.message}\n")

    from kvspec.gate.check import select_models
    selected = select_models(config, args.model)
    print_header(out, _display(config.pyproject), len(selected), _display(config.proofs_dir))
    gate = run_gate(config, args.model, warn=lambda m: err.write(f"kvspec: warning: {m}\n"),
                    on_model=streamed, backend=args.backend)
    stop_if_pressed(args)
    print_closing(out, gate)
    _write_reports(gate, outputs, env, err)
    return gate.exit_code


def _write_reports(gate: Any, outputs: dict[str, Path | None], env: Mapping[str, str],
                   err: IO[str]) -> None:
    from kvspec.gate.junit import write_junit
    from kvspec.gate.reports import markdown_summary
    from kvspec.gate.sarif import write_sarif

    if outputs["junit"] is not None:
        write_junit(gate, outputs["junit"])
    if outputs["sarif"] is not None:
        write_sarif(gate, outputs["sarif"])
    step_summary = env.get(SUMMARY_ENV)
    if outputs["summary"] is None and not step_summary:
        return
    text = markdown_summary(gate)
    if outputs["summary"] is not None:
        outputs["summary"].write_text(text, encoding="utf-8")
    if step_summary:
        try:
            with open(step_summary, "a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            err.write(f"kvspec: warning: cannot append the summary to ${SUMMARY_ENV} "
                      f"({step_summary}): {exc.strerror or exc}\n")
