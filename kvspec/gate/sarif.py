"""``kvspec check --sarif FILE``: the gate's findings as SARIF 2.1.0 (for GitHub code
scanning and other SARIF viewers).

* one rule per property of the checked models (its id is the property name), plus
  ``kvspec/dead-action`` and ``kvspec/model-error``;
* one result per case that did not pass: a violation is located at the model file
  and the line of the violating action (the counterexample's last step), with the
  whole counterexample in the message and as a ``codeFlow`` (one location per step, at
  the line of that step's action); a dead action at the action; a broken model at the
  line the error names. Failures are ``error`` s, undecided cases ``warning`` s.

File URIs are relative to ``%SRCROOT%``: the enclosing git work tree when there is one
(what GitHub resolves them against), else the project root; ``originalUriBaseIds``
says which directory that was. Expected verdicts (including expected violations) are
not findings and are not reported.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kvspec.gate.check import COVERAGE, MODEL, Case, CaseStatus, GateRun
from kvspec.trace import Trace

__all__ = ["SARIF_SCHEMA", "SARIF_VERSION", "sarif_log", "source_root", "write_sarif"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
BASE_ID = "%SRCROOT%"
DEAD_RULE = "kvspec/dead-action"
ERROR_RULE = "kvspec/model-error"


def source_root(project_root: Path) -> Path:
    """The git work tree containing ``project_root`` (a ``.git`` entry above it), else
    ``project_root`` itself."""
    for directory in (project_root, *project_root.parents):
        if (directory / ".git").exists():
            return directory
    return project_root


def _uri(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return path.resolve().as_uri()


def _location(path: Path | None, line: int | None, base: Path,
              message: str | None = None) -> dict[str, Any]:
    physical: dict[str, Any] = {}
    if path is not None:
        uri = _uri(path, base)
        artifact = {"uri": uri} if uri.startswith("file:") else {"uri": uri, "uriBaseId": BASE_ID}
        physical["artifactLocation"] = artifact
    if line is not None and line >= 1:
        physical["region"] = {"startLine": line}
    loc: dict[str, Any] = {"physicalLocation": physical}
    if message:
        loc["message"] = {"text": message}
    return loc


def _code_flow(trace: Trace, base: Path) -> dict[str, Any]:
    steps = []
    for st in trace.steps:
        fn = st.instance.action.ir
        events = ", ".join(e.text() for e in st.events)
        text = f"step {st.index}: {st.instance.label()}" + (f" emits {events}" if events else "")
        if st.violation is not None:
            text += f" -- {st.violation.reason}"
        steps.append({"location": _location(Path(fn.file), fn.line, base, text),
                      "executionOrder": st.index})
    return {"message": {"text": f"the shortest schedule violating {trace.prop}"},
            "threadFlows": [{"locations": steps}]}


def _rule_id(case: Case) -> str:
    if case.name == MODEL:
        return ERROR_RULE
    if case.name == COVERAGE:
        return DEAD_RULE
    return case.name


def _rules(gate: GateRun) -> list[dict[str, Any]]:
    rules: dict[str, dict[str, Any]] = {}
    for run in gate.runs:
        if run.system is None:
            continue
        for p in run.system.properties:
            rules.setdefault(p.name, {
                "id": p.name, "name": p.name,
                "shortDescription": {"text": p.summary or p.name},
                "fullDescription": {"text": f"kvspec property {p.name} ({p.kind}): "
                                            f"{p.summary}"},
                "defaultConfiguration": {"level": "error"},
                "properties": {"tags": ["kvspec", "kv-cache", p.kind]}})
    for case in gate.cases:  # the liveness checks (deadlock freedom, leaks, the model's own)
        if case.name in (MODEL, COVERAGE) or case.name in rules:
            continue
        rules[case.name] = {
            "id": case.name, "name": case.name,
            "shortDescription": {"text": case.summary or case.name},
            "fullDescription": {"text": f"kvspec liveness property {case.name}: "
                                        f"{case.summary or case.name}"},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["kvspec", "kv-cache", "liveness"]}}
    rules[DEAD_RULE] = {
        "id": DEAD_RULE, "name": "dead-action",
        "shortDescription": {"text": "an action never fires in any reachable state"},
        "fullDescription": {"text": "A design whose action can never fire proves nothing "
                                    "about that action (list intended ones in allow-dead)."},
        "defaultConfiguration": {"level": "error"}, "properties": {"tags": ["kvspec"]}}
    rules[ERROR_RULE] = {
        "id": ERROR_RULE, "name": "model-error",
        "shortDescription": {"text": "the model or its [tool.kvspec] entry is broken"},
        "defaultConfiguration": {"level": "error"}, "properties": {"tags": ["kvspec"]}}
    return list(rules.values())


def _result(case: Case, rule_index: dict[str, int], base: Path) -> dict[str, Any]:
    rule = _rule_id(case)
    text = case.message
    if case.details:
        text += "\n\n" + case.details.rstrip()
    fingerprint = hashlib.sha256(f"{case.model}\0{case.name}\0{case.kind.value}".encode())
    out: dict[str, Any] = {
        "ruleId": rule, "ruleIndex": rule_index[rule],
        "level": "error" if case.status in (CaseStatus.FAILED, CaseStatus.ERROR) else "warning",
        "message": {"text": text},
        "locations": [_location(case.file, case.line, base)],
        "partialFingerprints": {"kvspecCase/v1": fingerprint.hexdigest()},
        "properties": {"model": case.model, "outcome": case.kind.value,
                       "status": case.status.value, "expected": case.expected,
                       "verdict": case.actual}}
    if case.trace is not None and case.trace.steps and case.status is CaseStatus.FAILED:
        out["codeFlows"] = [_code_flow(case.trace, base)]
    return out


def sarif_log(gate: GateRun) -> dict[str, Any]:
    """The SARIF 2.1.0 log of a gate run."""
    from kvspec import __version__

    base = source_root(gate.config.root)
    rules = _rules(gate)
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = [_result(c, index, base) for c in gate.cases if not c.ok]
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": "kvspec", "version": __version__,
                                "semanticVersion": __version__, "rules": rules}},
            "originalUriBaseIds": {BASE_ID: {"uri": base.as_uri() + "/"}},
            "invocations": [{"executionSuccessful": not any(
                c.status is CaseStatus.ERROR for c in gate.cases),
                "exitCode": gate.exit_code}],
            "results": results,
        }],
    }


def write_sarif(gate: GateRun, path: Path) -> None:
    path.write_text(json.dumps(sarif_log(gate), indent=2, ensure_ascii=False) + "\n",
                    encoding="utf-8")
