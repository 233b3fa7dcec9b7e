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
    """(line number, record) for every non-blank line, validated; errors name file:line."""
    loads = json.loads
    for number, raw in enumerate(stream, 1):
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
