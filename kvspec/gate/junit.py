"""``kvspec check --junit FILE``: the gate as JUnit XML, for CI test reports.

One ``<testsuite>`` per model, one ``<testcase>`` per model × property plus one
``coverage`` case per model (a model that does not compile has a single ``model``
case). A case whose verdict contradicts its expectation is a ``<failure>`` (its
``type`` says how: ``started-failing``, ``violation-disappeared``, ``length-changed``,
``dead-action``); an undecided case (``unknown``) and a broken model
(``model-error``) are ``<error>`` s. The message is the one-line reason; the element's
text adds the counterexample. A rejected stored certificate goes to the suite's
``<system-out>``.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from kvspec.gate.check import Case, CaseStatus, GateRun, ModelRun
from kvspec.report.text import sizes_text

__all__ = ["junit_xml", "write_junit"]


def _counts(cases: list[Case]) -> dict[str, str]:
    failed = sum(1 for c in cases if c.status is CaseStatus.FAILED)
    errors = sum(1 for c in cases if c.status in (CaseStatus.UNKNOWN, CaseStatus.ERROR))
    return {"tests": str(len(cases)), "failures": str(failed), "errors": str(errors),
            "skipped": "0"}


def _case(parent: ET.Element, gate: GateRun, case: Case) -> None:
    attrs = {"classname": f"kvspec.{case.model}", "name": case.name}
    if case.file is not None:
        attrs["file"] = gate.config.relative(case.file)
        if case.line is not None:
            attrs["line"] = str(case.line)
    el = ET.SubElement(parent, "testcase", attrs)
    if case.status is CaseStatus.PASSED:
        if case.details:
            ET.SubElement(el, "system-out").text = case.details
        return
    tag = "failure" if case.status is CaseStatus.FAILED else "error"
    kind = "unknown" if case.status is CaseStatus.UNKNOWN else case.kind.value
    body = [case.message]
    if case.expected or case.actual:
        body.append(f"expected: {case.expected}\nverdict:  {case.actual}")
    if case.details:
        body.append(case.details.rstrip())
    ET.SubElement(el, tag, {"message": case.message, "type": kind}).text = \
        "\n\n".join(body) + "\n"


def _suite(parent: ET.Element, gate: GateRun, run: ModelRun) -> None:
    attrs = {"name": run.config.name, **_counts(run.cases), "time": f"{run.seconds:.3f}"}
    suite = ET.SubElement(parent, "testsuite", attrs)
    props = ET.SubElement(suite, "properties")
    values = {"file": run.config.file_text, "engine": run.config.engine,
              "sizes": sizes_text(run.sizes)}
    if run.system is not None:
        values["class"] = run.system.name
    for name, value in values.items():
        ET.SubElement(props, "property", {"name": name, "value": value})
    for case in run.cases:
        _case(suite, gate, case)
    if run.certificate:
        ET.SubElement(suite, "system-out").text = \
            "the stored certificate no longer checks:\n" + run.certificate


def junit_xml(gate: GateRun) -> ET.ElementTree:
    """The JUnit document of a gate run."""
    root = ET.Element("testsuites", {"name": "kvspec check", **_counts(gate.cases),
                                     "time": f"{gate.seconds:.3f}"})
    for run in gate.runs:
        _suite(root, gate, run)
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return tree


def write_junit(gate: GateRun, path: Path) -> None:
    junit_xml(gate).write(path, encoding="utf-8", xml_declaration=True)
