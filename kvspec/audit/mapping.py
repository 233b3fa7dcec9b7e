"""Mapping files (TOML): how a log's event names and fields become kvspec events.

```toml
[fields]                       # generic name = the log's field name (defaults shown)
ts = "ts"
request = "request"
event = "event"
page = "page"
pages = "pages"
scope = ["node", "rank"]       # fields that tell page pools apart

[events]                       # log event name = rule (or a list of rules, first match wins)
"kv_alloc" = {kind = "alloc", page = "block_id"}
"transfer" = [{kind = "land_write", when = {status = "Success"}},
              {kind = "drain", when = {status = "Failed"}}]
"debug" = {kind = "ignore"}

[options]
unknown_events = "error"       # or "ignore": names with no rule

[conformance]
silent_actions = ["arrive"]    # model actions whose events the log does not show
unlogged_events = ["admit"]    # kinds the log never records (dropped from model steps)
ignore_events = []             # kinds in the log that conformance skips
```

Without a mapping (or without ``[events]``) event names are the kvspec kinds
themselves (the identity mapping). Every mistake is an :class:`AuditInputError`
naming the mapping file and the line of the offending key.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvspec.audit.logformat import AuditInputError, LogEvent, PageKey
from kvspec.props.events import EVENT_KINDS
from kvspec.tomlcompat import tomllib

IGNORE = "ignore"
FIELD_KEYS = ("ts", "request", "event", "page", "pages")
RULE_KEYS = {"kind", "page", "pages", "request", "when"}
TOP_KEYS = {"fields", "events", "options", "conformance", "engine", "description", "source"}
CONFORMANCE_KEYS = {"silent_actions", "unlogged_events", "ignore_events"}


@dataclass(frozen=True)
class EventRule:
    name: str
    kind: str  # a kvspec kind, or "ignore"
    page: str | None = None
    pages: str | None = None
    request: str | None = None
    when: tuple[tuple[str, Any], ...] = ()
    line: int | None = None

    def matches(self, record: dict[str, Any]) -> bool:
        return all(record.get(k) == v for k, v in self.when)


@dataclass
class Mapping:
    file: str | None = None  # None: the identity mapping
    fields: dict[str, str] = field(default_factory=lambda: {k: k for k in FIELD_KEYS})
    scope: tuple[str, ...] = ("node", "rank")
    rules: dict[str, list[EventRule]] | None = None  # None: names are kinds
    unknown_events: str = "error"
    silent_actions: tuple[str, ...] = ()
    unlogged_events: tuple[str, ...] = ()
    ignore_events: tuple[str, ...] = ()
    engine: str = ""

    def __post_init__(self) -> None:
        self._identity = {k: [EventRule(k, k)] for k in EVENT_KINDS}

    def rules_for(self, name: str) -> list[EventRule] | None:
        return (self._identity if self.rules is None else self.rules).get(name)

    def events(self, number: int, record: dict[str, Any], log: str) -> list[LogEvent]:
        """The kvspec events of one validated log record."""
        f = self.fields
        name = record[f["event"]]
        rules = (self._identity if self.rules is None else self.rules).get(name)
        if rules is None:
            if self.unknown_events == IGNORE:
                return []
            known = "the kvspec kinds" if self.rules is None else "no rule in the mapping"
            raise AuditInputError(log, number, f"unknown event {name!r} ({known}; "
                                  "write a mapping file with --mapping)")
        if len(rules) == 1 and not rules[0].when:
            rule: EventRule | None = rules[0]
        else:
            rule = next((r for r in rules if r.matches(record)), None)
        if rule is None or rule.kind == IGNORE:
            return []
        kind = rule.kind
        req = record.get(rule.request or f["request"])
        if type(req) is str:
            request = req
        elif req is None or isinstance(req, (bool, dict, list)):
            raise AuditInputError(log, number, f"event {name!r}: field "
                                  f"{rule.request or f['request']!r} must name the request")
        else:
            request = str(req)
        ts = record.get(f["ts"])
        if not EVENT_KINDS[kind]:
            return [LogEvent(number, ts, kind, request, None)]
        scope = ""
        for s in self.scope:
            if s in record:
                scope = f"{scope}/{record[s]}" if scope else str(record[s])
        pages = self._pages(number, record, rule, name, log)
        return [LogEvent(number, ts, kind, request, (scope, p)) for p in pages]

    def _pages(self, number: int, record: dict[str, Any], rule: EventRule, name: str,
               log: str) -> list[int | str]:
        single = rule.page or self.fields["page"]
        several = rule.pages or self.fields["pages"]
        if single in record:
            value = record[single]
            t = type(value)
            if (t is int and value >= 0) or (t is str and value):  # the usual page id
                return [value]
            if not _page_id(value):
                raise AuditInputError(log, number, f"event {name!r}: page {value!r} is not a "
                                      "page id (an integer >= 0 or a string)")
            return [value]
        if several in record:
            value = record[several]
            if isinstance(value, dict):
                start, stop = value.get("start"), value.get("stop")
                if not (_int(start) and _int(stop)) or stop < start:
                    raise AuditInputError(log, number, f"event {name!r}: page range {value!r} "
                                          "needs integers 0 <= start <= stop")
                return list(range(start, stop))
            if isinstance(value, list) and all(_page_id(v) for v in value):
                return list(value)
            raise AuditInputError(log, number, f"event {name!r}: {several!r} must be a list "
                                  "of page ids or {\"start\": a, \"stop\": b}")
        raise AuditInputError(log, number, f"event {name!r} ({rule.kind}) names no page: "
                              f"expected field {single!r} or {several!r}")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _page_id(v: Any) -> bool:
    return _int(v) or (isinstance(v, str) and v != "")


# -- loading ---------------------------------------------------------------------------------

def load_mapping(path: str | Path | None) -> Mapping:
    """The mapping of ``path`` (the identity mapping for None)."""
    if path is None:
        return Mapping()
    p = Path(path)
    file = str(path)
    try:
        text = p.read_text("utf-8")
    except FileNotFoundError:
        raise AuditInputError(file, None, "no such mapping file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditInputError(file, None, f"cannot read the mapping: {exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(m.group(1)) if m else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise AuditInputError(file, line, f"not TOML: {msg}") from None
    return _from_doc(doc, text, file)


def _line_of(text: str, key: str, after: str | None = None) -> int | None:
    """The line of ``key`` (bare or quoted) in the TOML source, after section ``after``."""
    lines = text.splitlines()
    start = 0
    if after is not None:
        for i, ln in enumerate(lines):
            if ln.strip().startswith(f"[{after}]"):
                start = i
                break
    pat = re.compile(rf'^\s*(?:"{re.escape(key)}"|\'{re.escape(key)}\'|{re.escape(key)})\s*=')
    for i in range(start, len(lines)):
        if pat.search(lines[i]):
            return i + 1
    for i, ln in enumerate(lines):
        if re.escape(key) and key in ln:
            return i + 1
    return None


def _from_doc(doc: dict[str, Any], text: str, file: str) -> Mapping:
    def fail(key: str, message: str, section: str | None = None) -> AuditInputError:
        return AuditInputError(file, _line_of(text, key, section), message)

    for key in doc:
        if key not in TOP_KEYS:
            raise fail(key, f"unknown table or key {key!r} (expected: {', '.join(sorted(TOP_KEYS))})")
    m = Mapping(file=file)
    m.engine = str(doc.get("engine", ""))
    fields = doc.get("fields", {})
    if not isinstance(fields, dict):
        raise fail("fields", "[fields] must be a table")
    for key, value in fields.items():
        if key == "scope":
            scope = [value] if isinstance(value, str) else value
            if not isinstance(scope, list) or not all(isinstance(s, str) for s in scope):
                raise fail(key, "fields.scope must be a field name or a list of them", "fields")
            m.scope = tuple(scope)
            continue
        if key not in FIELD_KEYS:
            raise fail(key, f"unknown field {key!r} in [fields] (expected: "
                            f"{', '.join(FIELD_KEYS)}, scope)", "fields")
        if not isinstance(value, str) or not value:
            raise fail(key, f"fields.{key} must be a field name (a string)", "fields")
        m.fields[key] = value
    options = doc.get("options", {})
    if not isinstance(options, dict):
        raise fail("options", "[options] must be a table")
    for key, value in options.items():
        if key != "unknown_events":
            raise fail(key, f"unknown option {key!r} (expected: unknown_events)", "options")
        if value not in ("error", IGNORE):
            raise fail(key, f"options.unknown_events must be \"error\" or \"ignore\", got "
                            f"{value!r}", "options")
        m.unknown_events = value
    conf = doc.get("conformance", {})
    if not isinstance(conf, dict):
        raise fail("conformance", "[conformance] must be a table")
    for key, value in conf.items():
        if key not in CONFORMANCE_KEYS:
            raise fail(key, f"unknown key {key!r} in [conformance] (expected: "
                            f"{', '.join(sorted(CONFORMANCE_KEYS))})", "conformance")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(key, f"conformance.{key} must be a list of names", "conformance")
        if key != "silent_actions":
            for v in value:
                if v not in EVENT_KINDS:
                    raise fail(key, f"conformance.{key}: {v!r} is not an event kind "
                                    f"({', '.join(EVENT_KINDS)})", "conformance")
        setattr(m, key, tuple(value))
    if "events" in doc:
        events = doc["events"]
        if not isinstance(events, dict):
            raise fail("events", "[events] must be a table")
        m.rules = {}
        for name, spec in events.items():
            line = _line_of(text, name, "events")
            specs = spec if isinstance(spec, list) else [spec]
            rules = []
            for s in specs:
                rules.append(_rule(name, s, file, line))
            m.rules[name] = rules
    return m


def _rule(name: str, spec: Any, file: str, line: int | None) -> EventRule:
    def fail(message: str) -> AuditInputError:
        return AuditInputError(file, line, f"event {name!r}: {message}")

    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict):
        raise fail("expected {kind = \"...\", ...}, a kind name, or a list of those")
    unknown = set(spec) - RULE_KEYS
    if unknown:
        raise fail(f"unknown key {sorted(unknown)[0]!r} (expected: {', '.join(sorted(RULE_KEYS))})")
    kind = spec.get("kind")
    if kind != IGNORE and kind not in EVENT_KINDS:
        raise fail(f"kind {kind!r} is not a kvspec event kind (expected one of "
                   f"{', '.join(EVENT_KINDS)}, or \"ignore\")")
    for key in ("page", "pages", "request"):
        if key in spec and (not isinstance(spec[key], str) or not spec[key]):
            raise fail(f"{key} must be a field name (a string)")
    if kind != IGNORE and not EVENT_KINDS[kind] and ("page" in spec or "pages" in spec):
        raise fail(f"kind {kind!r} names no page; drop page/pages")
    when = spec.get("when", {})
    if not isinstance(when, dict) or any(isinstance(v, (dict, list)) for v in when.values()):
        raise fail("when must be a table of field = value (strings, numbers, booleans)")
    return EventRule(name, kind, spec.get("page"), spec.get("pages"), spec.get("request"),
                     tuple(when.items()), line)


__all__ = ["EventRule", "Mapping", "PageKey", "load_mapping"]
