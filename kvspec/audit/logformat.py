"""The generic JSON Lines log format of ``kvspec audit``: reading and validating lines.

One JSON object per line, validated against the JSON Schema shipped as
``kvspec/audit/log_schema.json`` (draft-07; field names renamed by the mapping, see
:mod:`kvspec.audit.mapping`). Validation is compiled once by ``fastjsonschema``, so
it costs a few microseconds per line. A line that is not JSON, not an object, or does
not match the schema is a user error: :class:`AuditInputError` naming ``file:line``.

Events are yielded as :class:`LogEvent` (one per kvspec event: a line with ``pages``
stands for one event per page, in order).
"""
from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from importlib import resources
from typing import IO, Any, Iterator, NamedTuple

import fastjsonschema

from kvspec.lang.errors import UsageError

SCHEMA_RESOURCE = "log_schema.json"

#: where a page lives: (scope, page id); scope is "" or "node/rank" as the log names it
PageKey = tuple[str, "int | str"]


class AuditInputError(UsageError):
    """A mistake in an input file (log line, mapping entry): one line naming file:line."""

    def __init__(self, file: str, line: int | None, message: str) -> None:
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {message}")
        self.file = file
        self.line = line
        self.detail = message


class LogEvent(NamedTuple):
    """One kvspec event read from a log line (ids as the log names them)."""

    line: int
    ts: Any
    kind: str
    request: str
    page: PageKey | None

    def text(self) -> str:
        if self.page is None:
            return f"{self.kind}({self.request})"
        return f"{self.kind}({self.request}, page {page_text(self.page)})"

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "ts": self.ts, "kind": self.kind, "request": self.request,
                "page": None if self.page is None else page_text(self.page)}


def page_text(key: PageKey) -> str:
    scope, page = key
    return f"{scope}:{page}" if scope else str(page)


@lru_cache(maxsize=1)
def base_schema() -> dict[str, Any]:
    """The shipped JSON Schema of a log line (identity field names)."""
    text = resources.files("kvspec.audit").joinpath(SCHEMA_RESOURCE).read_text("utf-8")
    return json.loads(text)


def schema_for(fields: dict[str, str]) -> dict[str, Any]:
    """The schema with the mapping's field names (``fields``: generic name -> log name)."""
    schema = copy.deepcopy(base_schema())
    if all(fields.get(k, k) == k for k in ("ts", "request", "event", "page", "pages")):
        return schema
    props = schema["properties"]
    renamed = {fields.get(k, k): v for k, v in props.items()}
    schema["properties"] = renamed
    schema["required"] = [fields.get(k, k) for k in schema["required"]]
    schema["not"] = {"required": [fields.get("page", "page"), fields.get("pages", "pages")]}
    return schema


def compile_schema(schema: dict[str, Any]) -> Any:
    return fastjsonschema.compile(schema)


_NUMBER_OR_STRING = (int, float, str)
_STRING_OR_INT = (str, int)


def compile_validator(fields: dict[str, str]) -> Any:
    """The validator of a log line for the mapping's ``fields``: the compiled JSON Schema,
    behind a fast path for the common line shape.

    The fast path accepts only lines the schema accepts (an object with ``ts`` a number
    or string, ``request`` a string or integer, ``event`` a non-empty string, either a
    ``page`` that is an integer or string or ``pages`` a list of those, ``node`` a string
    or integer, ``rank`` an integer; ``type(x) in ...`` excludes booleans as the schema
    does); every other line — a page range, a wrong type, a missing field — goes to the
    compiled schema, which accepts it or raises its error. ``tests/test_audit_speed.py`` checks the fast path
    never accepts a line the schema rejects."""
    full = compile_schema(schema_for(fields))
    f_ts, f_req, f_ev = fields.get("ts", "ts"), fields.get("request", "request"), \
        fields.get("event", "event")
    f_page, f_pages = fields.get("page", "page"), fields.get("pages", "pages")
    typed = {f_ts: _NUMBER_OR_STRING, f_req: _STRING_OR_INT, f_page: _STRING_OR_INT,
             "node": _STRING_OR_INT, "rank": (int,)}
    if len(typed) != 5 or f_ev in typed or f_pages in typed:  # renamed onto each other
        return full
    required = (f_ts, f_req)

    def validate(record: Any) -> Any:
        if type(record) is dict:
            ev = record.get(f_ev)
            if type(ev) is str and ev:
                for name in required:
                    if name not in record:
                        return full(record)
                for name, value in record.items():
                    types = typed.get(name)
                    if types is not None:
                        if type(value) not in types:
                            return full(record)
                    elif name == f_pages:
                        if type(value) is not list or f_page in record:
                            return full(record)
                        for item in value:
                            if type(item) not in _STRING_OR_INT:
                                return full(record)
                return record
        return full(record)

    return validate


_DATA = re.compile(r"\bdata((?:\.[A-Za-z_][\w-]*|\[\d+\])*)")


def schema_message(exc: fastjsonschema.JsonSchemaException) -> str:
    """``data.request must be string or integer`` -> ``field request must be ...``."""
    msg = str(exc.message)
    if "must NOT match a disallowed definition" in msg:
        return "a line names a page or pages, not both"

    def repl(m: re.Match[str]) -> str:
        path = m.group(1)
        return f"field {path.lstrip('.')!r}" if path else "the line"

    return "does not match the log schema: " + _DATA.sub(repl, msg)


def read_records(stream: IO[str], file: str, validate: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for every non-blank line, validated; errors name file:line.

    A line that starts with ``{`` is parsed by the JSON scanner directly (what
    ``json.loads`` runs after skipping white space) and must have nothing but white
    space after the object; any other line, or a scanner error, goes to ``json.loads``
    for the result or the message."""
    loads = json.loads
    scan = json.JSONDecoder().scan_once
    for number, raw in enumerate(stream, 1):
        record: Any = None
        if raw[:1] == "{":
            try:
                record, end = scan(raw, 0)
            except (ValueError, StopIteration):
                record = None
            else:
                if end != len(raw) and raw[end:].strip():
                    record = None
        if record is None:
            if not raw.strip():
                continue
            try:
                record = loads(raw)
            except ValueError as exc:
                raise AuditInputError(file, number, f"not JSON: {exc}") from None
        try:
            validate(record)
        except fastjsonschema.JsonSchemaException as exc:
            raise AuditInputError(file, number, schema_message(exc)) from None
        yield number, record
