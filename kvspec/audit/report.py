"""Presenting an :class:`~kvspec.audit.run.AuditResult`: text, JUnit XML, progress line."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import IO, Callable

from kvspec.audit.acceptance import CHECKS
from kvspec.audit.run import ACCEPTANCE, CONFORMANCE, PROPERTY, AuditResult
from kvspec.props import library

SUMMARY_KEYS = ("requests", "rejections", "aborts", "timeouts", "finished", "violations")


def _summary_lines(result: AuditResult) -> list[str]:
    s = result.summary
    width = max(len(k) for k in SUMMARY_KEYS) + 2
    head = "".join(f"{k:>{width}}" for k in SUMMARY_KEYS)
    row = "".join(f"{s.get(k, 0):>{width},}" for k in SUMMARY_KEYS)
    return [head, row]


def _describe(check: str) -> str:
    if check in library.LIBRARY:
        return library.LIBRARY[check].summary
    return CHECKS.get(check, "")


def print_text(result: AuditResult, out: IO[str]) -> None:
    w = out.write
    st = result.stats
    model = f" against {result.model} ({result.model_name})" if result.model else ""
    w(f"kvspec audit: {result.log}{model}\n")
    w(f"  {st['lines']:,} lines, {st['events']:,} events, {st['seconds']:.2f} s "
      f"({st['events_per_s']:,.0f} events/s), peak memory {st['peak_memory_mb']:.0f} MB\n\n")
    width = max(len(c) for _, c, _ in result.checks()) + 2
    for family, title in ((PROPERTY, "properties (library monitors on the event stream)"),
                          (ACCEPTANCE, "acceptance checks (seed tutorial, section 4)")):
        w(f"{title}:\n")
        for fam, check, status in result.checks():
            if fam != family:
                continue
            n = result.occurrences.get(check, 0) or result.possible_occurrences.get(check, 0)
            f = result.findings.get(check) or result.possible.get(check)
            tail = f"  first at line {f.event.line}: {f.reason}" if f else ""
            count = f" ({n:,}x)" if n else ""
            w(f"  {check:<{width}}{status}{count}{tail}\n")
        w("\n")
    if result.conformance_checked:
        status = result.conformance_status
        w(f"conformance to {result.model_name}: {status}")
        if status == "CONFORMS":
            w(f" (at most {result.conformance_peak:,} model states consistent at once)")
        w("\n")
        c = result.conformance
        if c is not None:
            where = f"line {c.event.line}: " if c.event.line else ""
            w(f"  {where}{c.reason}\n")
            for i, (state, enabled) in enumerate(zip(c.states, c.enabled), 1):
                w(f"  state it could be in ({i} of {len(c.states)} shown):\n")
                for s in state:
                    w(f"      {s}\n")
                w("    enabled actions (-> the events they would log):\n")
                for e in enabled:
                    w(f"      {e}\n")
        if result.conformance_unknown:
            w(f"  unknown: {result.conformance_unknown}\n")
        w("\n")
    if result.unknown:
        w(f"UNKNOWN: the audit stopped early: {result.unknown}\n\n")
    w("summary:\n")
    for line in _summary_lines(result):
        w(f"  {line}\n")
    for f in list(result.findings.values()) + [p for c, p in result.possible.items()
                                                if c not in result.findings]:
        what = "possible violation" if f.possible else "violation"
        w(f"\nfirst {what} of {f.check} ({f.family}): request {f.event.request}, "
          f"line {f.event.line}\n  {f.reason}\n  history of {f.event.request}:\n")
        for h in f.history:
            w(f"    {h}\n")
    if result.possible and not result.findings:
        w("\nPOSSIBLE findings rest on the Bloom filter of old rejected request ids "
          "(docs/audit.md, memory): they may be false alarms; the verdict is unknown (exit "
          "code 3). Audit the part of the log after the rejection to confirm.\n")
    for warning in result.warnings:
        w(f"warning: {warning}\n")


def junit_xml(result: AuditResult) -> ET.ElementTree:
    """One testsuite, one testcase per check (properties, acceptance, conformance)."""
    checks = result.checks()
    failures = sum(1 for _, _, s in checks if s in ("VIOLATED", "NONCONFORMING"))
    skipped = sum(1 for _, _, s in checks if s in ("UNKNOWN", "SKIPPED", "POSSIBLE"))
    suite = ET.Element("testsuite", name=f"kvspec audit {result.log}", tests=str(len(checks)),
                       failures=str(failures), errors="0", skipped=str(skipped),
                       time=f"{result.stats.get('seconds', 0.0):.3f}")
    for family, check, status in checks:
        case = ET.SubElement(suite, "testcase", classname=f"kvspec.audit.{family}", name=check)
        if family == CONFORMANCE:
            c = result.conformance
            if c is not None:
                fail = ET.SubElement(case, "failure", message=c.reason,
                                     type="nonconforming")
                lines = [f"line {c.event.line}: {c.event.text()}", c.reason]
                for state, enabled in zip(c.states, c.enabled):
                    lines += ["state:"] + [f"  {s}" for s in state]
                    lines += ["enabled:"] + [f"  {e}" for e in enabled]
                fail.text = "\n".join(lines)
            elif status in ("UNKNOWN", "SKIPPED"):
                ET.SubElement(case, "skipped",
                              message=result.conformance_unknown or result.unknown or status)
            continue
        f = result.findings.get(check)
        if f is not None:
            fail = ET.SubElement(case, "failure", message=f"line {f.event.line}: {f.reason}",
                                 type="violated")
            fail.text = "\n".join([f"{_describe(check)}", f"request {f.event.request}:"]
                                  + f.history)
        elif status == "POSSIBLE":
            p = result.possible[check]
            ET.SubElement(case, "skipped", message=f"POSSIBLE, line {p.event.line}: {p.reason}")
        elif status == "UNKNOWN":
            ET.SubElement(case, "skipped", message=result.unknown or "unknown")
    ET.indent(suite)
    return ET.ElementTree(suite)


def write_junit(result: AuditResult, path: Path) -> None:
    junit_xml(result).write(path, encoding="utf-8", xml_declaration=True)


class Progress:
    """A live line on a terminal, redrawn at most once a second; silent otherwise."""

    def __init__(self, err: IO[str], enabled: bool,
                 clock: Callable[[], float] | None = None) -> None:
        import time
        self.err = err
        self.clock = clock or time.monotonic
        self.enabled = enabled and hasattr(err, "isatty") and err.isatty()
        self.last = self.clock()
        self.shown = False

    def __call__(self, events: int, lines: int, seconds: float, live: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.last < 1.0:
            return
        self.last = now
        rate = events / seconds if seconds > 0 else 0.0
        text = f"  audited {events:,} events ({lines:,} lines), {rate:,.0f} events/s, " \
               f"{live:,} live requests"
        self.err.write(f"\r{text:<78.78}")
        self.err.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.err.write("\r" + " " * 78 + "\r")
            self.err.flush()
            self.shown = False
