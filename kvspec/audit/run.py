"""One audit: stream a log through the property monitors, the acceptance checks and
the conformance check, and collect an :class:`AuditResult`.

Memory is per live request and page plus the bounded table of retired rejected ids
(:mod:`kvspec.audit.rejected`): the log is read line by line and never held.
"""
from __future__ import annotations

import resource
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from kvspec.audit.acceptance import CHECKS, Acceptance
from kvspec.audit.conformance import Conformance, ConformanceLimit, Nonconformance
from kvspec.audit.logformat import (
    AuditInputError,
    LogEvent,
    compile_validator,
    read_records,
)
from kvspec.audit.mapping import Mapping
from kvspec.audit.properties import AuditLimit, PropertyAudit
from kvspec.audit.rejected import EXACT_IDS, RejectedIds
from kvspec.lang.system import System
from kvspec.props import library
from kvspec.verdict import EXIT_HOLDS, EXIT_UNKNOWN, EXIT_VIOLATED

AUDIT_FORMAT = "kvspec-audit/1"
#: progress callback: (events, lines, seconds, live requests)
ProgressFn = Callable[[int, int, float, int], None]

PROPERTY, ACCEPTANCE, CONFORMANCE = "property", "acceptance", "conformance"


@dataclass
class Finding:
    """The first violating event of one check, with its request's history."""

    check: str
    family: str
    event: LogEvent
    reason: str
    history: list[str]
    possible: bool = False  # rests on the Bloom filter of old rejected ids

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "family": self.family, "line": self.event.line,
                "request": self.event.request, "event": self.event.to_json(),
                "reason": self.reason, "history": self.history, "possible": self.possible}


@dataclass
class AuditResult:
    log: str
    model: str | None
    model_name: str | None
    mapping: str | None
    properties: list[str]
    findings: dict[str, Finding] = field(default_factory=dict)
    occurrences: Counter[str] = field(default_factory=Counter)
    #: findings that hold only if an id is the rejected one the Bloom filter may remember
    possible: dict[str, Finding] = field(default_factory=dict)
    possible_occurrences: Counter[str] = field(default_factory=Counter)
    conformance: Nonconformance | None = None
    conformance_checked: bool = False
    conformance_unknown: str | None = None
    conformance_peak: int = 0
    unknown: str | None = None  # the property/acceptance audit stopped early
    summary: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def status(self, check: str) -> str:
        if check in self.findings:
            return "VIOLATED"
        if check in self.possible:
            return "POSSIBLE"
        return "UNKNOWN" if self.unknown else "HOLDS"

    @property
    def conformance_status(self) -> str:
        if not self.conformance_checked:
            return "SKIPPED"
        if self.conformance is not None:
            return "NONCONFORMING"
        if self.conformance_unknown or self.unknown:
            return "UNKNOWN"
        return "CONFORMS"

    @property
    def exit_code(self) -> int:
        if self.findings or self.conformance is not None:
            return EXIT_VIOLATED
        if self.unknown or self.conformance_unknown or self.possible:
            return EXIT_UNKNOWN
        return EXIT_HOLDS

    def checks(self) -> list[tuple[str, str, str]]:
        """(family, check, status) for every check, in report order."""
        out = [(PROPERTY, p, self.status(p)) for p in self.properties]
        out += [(ACCEPTANCE, c, self.status(c)) for c in CHECKS]
        if self.conformance_checked:
            out.append((CONFORMANCE, "conformance", self.conformance_status))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "format": AUDIT_FORMAT,
            "log": self.log,
            "model": {"file": self.model, "name": self.model_name},
            "mapping": self.mapping,
            "checks": [{"family": f, "check": c, "status": s,
                        "occurrences": self.occurrences.get(c, 0),
                        "possible_occurrences": self.possible_occurrences.get(c, 0),
                        "first": self.findings[c].to_json() if c in self.findings else
                        self.possible[c].to_json() if c in self.possible else None}
                       for f, c, s in self.checks() if f != CONFORMANCE],
            "conformance": None if not self.conformance_checked else {
                "status": self.conformance_status,
                "first": self.conformance.to_json() if self.conformance else None,
                "unknown": self.conformance_unknown,
                "peak_configurations": self.conformance_peak},
            "summary": self.summary,
            "stats": self.stats,
            "unknown": self.unknown,
            "warnings": self.warnings,
            "exit_code": self.exit_code,
        }


def peak_memory_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def audit_stream(stream: IO[str], log_name: str, mapping: Mapping, *,
                 system: System | None = None, model_file: str | None = None,
                 properties: list[str] | None = None, progress: ProgressFn | None = None,
                 closure_depth: int = 4, max_configs: int = 10_000,
                 exact_rejected: int = EXACT_IDS) -> AuditResult:
    """Audit the log read from ``stream`` (named ``log_name`` in messages).

    ``exact_rejected``: retired rejected request ids kept exactly (older ones go into
    the Bloom filter; :mod:`kvspec.audit.rejected`)."""
    props = list(properties) if properties else list(library.LIBRARY)
    for p in props:
        if p not in library.LIBRARY:
            raise AuditInputError("--property", None, f"unknown property {p!r} (available: "
                                  f"{', '.join(library.LIBRARY)})")
    result = AuditResult(log_name, model_file, system.name if system else None, mapping.file,
                         props)
    rejected = RejectedIds(exact_rejected)
    monitor = PropertyAudit(props, rejected=rejected)
    accept = Acceptance(rejected)
    conf = Conformance(system, mapping, closure_depth=closure_depth,
                       max_configs=max_configs) if system is not None else None
    result.conformance_checked = conf is not None
    validate = compile_validator(mapping.fields)
    started = time.monotonic()
    next_tick = 0
    lines = events = 0
    findings, occurrences = result.findings, result.occurrences

    def note(check: str, family: str, ev: LogEvent, reason: str, possible: bool) -> None:
        if possible:
            result.possible_occurrences[check] += 1
            if check not in result.possible:
                result.possible[check] = Finding(check, family, ev, reason,
                                                 accept.history(ev.request), True)
            return
        occurrences[check] += 1
        if check not in findings:
            findings[check] = Finding(check, family, ev, reason, accept.history(ev.request))
    to_events = mapping.events
    accept_feed, monitor_feed, retire = accept.feed, monitor.feed, accept.retire_if_done
    conf_feed = conf.feed if conf is not None else None  # None once conformance has ended
    try:
        for number, record in read_records(stream, log_name, validate):
            lines += 1
            for ev in to_events(number, record, log_name):
                events += 1
                hits = accept_feed(ev)
                if hits:
                    for h in hits:
                        note(h.check, ACCEPTANCE, ev, h.reason, h.possible)
                found = monitor_feed(ev)
                if found:
                    for p in found:
                        note(p.prop, PROPERTY, ev, p.reason, p.possible)
                if conf_feed is not None:
                    try:
                        if conf_feed(ev) is not None:
                            result.conformance = conf.failure
                            conf_feed = None
                    except ConformanceLimit as exc:
                        result.conformance_unknown = str(exc)
                        conf_feed = None
                retire(ev.request)
            if progress is not None and events >= next_tick:
                next_tick = events + 2048
                progress(events, lines, time.monotonic() - started, len(accept.live))
    except AuditLimit as exc:
        result.unknown = str(exc)
    if conf is not None and result.conformance is None and result.conformance_unknown is None \
            and result.unknown is None:
        result.conformance = conf.finish()
    if conf is not None:
        result.conformance_peak = conf.peak_configs
    seconds = time.monotonic() - started
    result.summary = accept.summary()
    result.summary["violations"] = sum(occurrences.values())
    result.stats = {"lines": lines, "events": events, "seconds": round(seconds, 3),
                    "events_per_s": round(events / seconds, 1) if seconds > 0 else 0.0,
                    "peak_memory_mb": round(peak_memory_mb(), 1),
                    "peak_live_requests": accept.peak_live,
                    "monitor_peak_requests": monitor.peak_requests,
                    "monitor_peak_pages": monitor.peak_pages,
                    "rejected_ids_exact": len(rejected.exact),
                    "rejected_ids_filtered": rejected.filtered}
    result.warnings.extend(monitor.warnings[:20])
    return result


def audit_file(path: str | Path, mapping: Mapping, **kwargs: Any) -> AuditResult:
    p = Path(path)
    name = str(path)
    if not p.is_file():
        raise AuditInputError(name, None, "no such log file" if not p.exists() else
                              "not a file")
    try:
        with p.open("r", encoding="utf-8") as stream:
            return audit_stream(stream, name, mapping, **kwargs)
    except UnicodeDecodeError as exc:
        raise AuditInputError(name, None, f"not UTF-8 text: {exc.reason}") from None
