"""What ``kvspec check`` prints, and its Markdown summary.

The terminal text (one block per model as soon as it is checked, then a closing line)
and the Markdown summary (a table of every case and the counterexamples, for
``$GITHUB_STEP_SUMMARY`` or ``--summary FILE``) live here; JUnit XML and SARIF are
:mod:`kvspec.gate.junit` and :mod:`kvspec.gate.sarif`.
"""
from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.text import Text

from kvspec.gate.check import Case, CaseStatus, GateRun, ModelRun
from kvspec.report.text import make_console, sizes_text

__all__ = ["closing_line", "markdown_summary", "print_header", "print_model", "print_closing"]

_MARK = {CaseStatus.PASSED: "✔", CaseStatus.FAILED: "✘", CaseStatus.UNKNOWN: "?",
         CaseStatus.ERROR: "✘"}
_STYLE = {CaseStatus.PASSED: "green", CaseStatus.FAILED: "bold red",
          CaseStatus.UNKNOWN: "bold yellow", CaseStatus.ERROR: "bold red"}
_EMOJI = {CaseStatus.PASSED: "✅", CaseStatus.FAILED: "❌", CaseStatus.UNKNOWN: "❔",
          CaseStatus.ERROR: "💥"}


def _indent(text: str, prefix: str = "    ") -> str:
    return "".join(prefix + line if line.strip() else line
                   for line in text.rstrip().splitlines(keepends=True)) + "\n"


def model_heading(run: ModelRun) -> str:
    """``transfer (lifecycle/transfer.py, Transfer, requests=2, pages=2): engine auto``."""
    cfg = run.config
    parts = [cfg.file_text]
    if run.system is not None:
        parts += [run.system.name, sizes_text(run.sizes)]
    engine = run.result.engine if run.result is not None else cfg.engine
    return f"{cfg.name} ({', '.join(p for p in parts if p)}): engine {engine}, " \
           f"{run.seconds:.2f} s"


def print_header(out: IO[str], gate_file: str, models: int, proofs: str) -> None:
    make_console(out).print(Text.assemble(("kvspec check", "bold"), f" {gate_file}: "
                                          f"{models} model{'s' * (models != 1)}, "
                                          f"certificates in {proofs}"), soft_wrap=True)


def _case_line(console: Console, case: Case) -> None:
    text = Text()
    text.append(f"  {_MARK[case.status]} ", style=_STYLE[case.status])
    text.append(f"{case.name:<28} ")
    if case.status is CaseStatus.PASSED:
        text.append(case.actual)
        if case.expected.startswith("violated"):
            text.append("  (expected)", style="dim")
    elif case.status is CaseStatus.ERROR:
        text.append(case.message, style=_STYLE[case.status])
    else:
        text.append(case.actual, style=_STYLE[case.status])
        text.append(f"\n      → {case.message}", style=_STYLE[case.status])
    console.print(text, soft_wrap=True)


def print_model(out: IO[str], run: ModelRun) -> None:
    """One model's block: heading, a line per case, then the counterexamples of the
    cases that failed and the rejected certificate, if any."""
    console = make_console(out)
    console.print()
    console.print(Text(model_heading(run), style="bold"), soft_wrap=True)
    for case in run.cases:
        _case_line(console, case)
    for case in run.cases:
        if case.status is not CaseStatus.PASSED and case.details:
            console.print(Text(_indent(case.details)), soft_wrap=True, end="")
        elif case.details and case.name == "coverage":
            console.print(Text(_indent(case.details), style="dim"), soft_wrap=True, end="")
    if run.certificate:
        console.print(Text("  the stored certificate no longer checks (the verdicts above "
                           "come from the other engines):", style="yellow"), soft_wrap=True)
        console.print(Text(_indent(run.certificate)), soft_wrap=True, end="")


def closing_line(gate: GateRun) -> str:
    """``kvspec check: FAILED: 1 failed, 11 passed (2 models, 3.10 s)``."""
    counts = [(gate.count(s), s.value) for s in (CaseStatus.FAILED, CaseStatus.ERROR,
                                                 CaseStatus.UNKNOWN, CaseStatus.PASSED)]
    head = {0: "OK", 1: "FAILED", 2: "ERROR", 3: "UNKNOWN"}.get(gate.exit_code, "FAILED")
    body = ", ".join(f"{n} {what}" for n, what in counts if n or what == "passed")
    n = len(gate.runs)
    return f"kvspec check: {head}: {body} ({n} model{'s' * (n != 1)}, {gate.seconds:.2f} s)"


def print_closing(out: IO[str], gate: GateRun) -> None:
    console = make_console(out)
    console.print()
    style = "bold green" if gate.exit_code == 0 else _STYLE[CaseStatus.FAILED] \
        if gate.exit_code in (1, 2) else _STYLE[CaseStatus.UNKNOWN]
    console.print(Text(closing_line(gate), style=style), soft_wrap=True)


# -- Markdown -------------------------------------------------------------------------------

def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_summary(gate: GateRun) -> str:
    """A Markdown report: the closing line, a table of every case, and the
    counterexamples and reasons of the cases that did not pass."""
    lines = [f"## {_EMOJI[CaseStatus.PASSED] if gate.exit_code == 0 else _EMOJI[CaseStatus.FAILED]}"
             f" {_cell(closing_line(gate))}", "",
             f"Configuration: `{gate.config.relative(gate.config.pyproject)}`", "",
             "| | model | case | expected | verdict |", "|---|---|---|---|---|"]
    for case in gate.cases:
        lines.append(f"| {_EMOJI[case.status]} | {_cell(case.model)} | {_cell(case.name)} | "
                     f"{_cell(case.expected)} | {_cell(case.actual or case.message)} |")
    bad = [c for c in gate.cases if not c.ok]
    for case in bad:
        where = ""
        if case.file is not None:
            where = f" (`{gate.config.relative(case.file)}"
            where += f":{case.line}`)" if case.line else "`)"
        lines += ["", f"<details><summary>{_EMOJI[case.status]} <b>{_html(case.model)}: "
                      f"{_html(case.name)}</b>: {_html(case.message)}{where}</summary>", ""]
        if case.details:
            lines += ["```text", case.details.rstrip().replace("```", "'''"), "```"]
        lines += ["", "</details>"]
    for run in gate.runs:
        if run.certificate:
            lines += ["", f"<details><summary>{_html(run.config.name)}: the stored "
                          "certificate no longer checks</summary>", "", "```text",
                      run.certificate.rstrip().replace("```", "'''"), "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
