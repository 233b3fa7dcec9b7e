"""Certificates written by hand, edited or malformed are checked in full and rejected
unless the invariant they hold is genuinely inductive.

A forger can copy the model hash, sizes and property names and recompute the
checksum, so only the logical checks stand between a made-up invariant and a
PROVED verdict. Every clause (quantified or not) is checked, the SMT-LIB2 text is
read strictly, and acceptance is cross-checked against explicit state enumeration:
exactly on a tiny model (every state of the variables' domains), and against the
reachable states of ``patched`` for subsets of a real invariant.
"""
from __future__ import annotations

import copy
import io
import itertools
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import z3
from conftest import MODELS, ROOT, certificate_system, run_cli, system_of
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from kvspec.engines.explicit import explore
from kvspec.engines.pdr import run_pdr
from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.proofs.certificate import (
    CERT_FORMAT,
    CertificateCheck,
    CertificateError,
    certificate_name,
    check_certificate,
    invariant_digest,
    library_sha256,
    load_certificate,
)
from kvspec.report.text import make_console
from kvspec.verdict import Status

PROOFS = ROOT / "proofs"
#: the size-specific ones (the all-sizes ones: tests/test_all_sizes_loose.py)
STORED = sorted(p for p in PROOFS.glob("*.json") if "=all" not in p.name)
PATCHED_STORED = PROOFS / "patched.PatchedPD.requests=2,pages=4,prefill_capacity=2,max_need=3.json"
#: clauses of the stored certificate (it changes whenever the certificate is regenerated)
N_STORED: int = json.loads(PATCHED_STORED.read_text())["invariant"]["clauses"]


# -- writing certificates by hand --------------------------------------------------------------

def _sym(name: str) -> str:
    return f"|{name}|"


def _smt_value(system: System, slot: int, value: Any) -> str:
    if system.slot_types()[slot].kind == "bool":
        return "true" if value else "false"
    return str(value) if value >= 0 else f"(- {-value})"


def forge(system: System, asserts: list[str], labels: list[str] | None = None,
          properties: list[str] | None = None) -> dict[str, Any]:
    """A certificate document with a correct header and checksum around ``asserts``."""
    decls = [f"(declare-fun {_sym(str(v))} () {'Bool' if z3.is_bool(v) else 'Int'})"
             for v in system.state_vars()]
    smt = "\n".join(decls + [f"(assert {a})" for a in asserts]) + "\n"
    readable = labels if labels is not None else [f"hand-written {i + 1}"
                                                  for i in range(len(asserts))]
    return {
        "format": CERT_FORMAT,
        "model": {"name": system.name, "file": system.loaded.file,
                  "sha256": system.loaded.sha256},
        "library_sha256": library_sha256(),
        "sizes": dict(system.sizes),
        "properties": properties if properties is not None
        else [p.name for p in system.properties],
        "method": "by hand",
        "created": "2026-01-01T00:00:00Z",
        "invariant": {"clauses": len(asserts), "readable": readable, "smtlib2": smt,
                      "sha256": invariant_digest(smt, readable)},
        "stats": {},
    }


def reseal(doc: dict[str, Any]) -> dict[str, Any]:
    inv = doc["invariant"]
    inv["sha256"] = invariant_digest(inv["smtlib2"], inv["readable"])
    return doc


def save(doc: dict[str, Any], system: System, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / certificate_name(system)
    path.write_text(json.dumps(doc, indent=1))
    return path


def initial_values(system: System, wrap: str = "none") -> list[str]:
    """"Every variable equals its initial value", one clause per variable, optionally
    wrapped in a quantifier that binds nothing the body uses."""
    out = []
    for i, (v, x) in enumerate(zip(system.state_vars(), system.initial)):
        body = f"(= {_sym(str(v))} {_smt_value(system, i, x)})"
        if wrap == "forall":
            body = f"(forall ((k Int)) {body})"
        elif wrap == "guarded":
            body = f"(forall ((k Int)) (=> (and (<= 0 k) (< k 2)) {body}))"
        out.append(body)
    return out


def render(check: CertificateCheck) -> str:
    buf = io.StringIO()
    check.print(make_console(buf, color=False, width=160))
    return buf.getvalue()


@pytest.fixture(scope="module")
def buggy() -> System:
    return system_of("buggy_pd.py")


@pytest.fixture(scope="module")
def patched() -> System:
    return system_of("patched.py")


# -- the forged certificate of issue 8 -------------------------------------------------------

@pytest.mark.parametrize("wrap", ["none", "forall", "guarded", "one-forall"])
def test_forged_initial_value_certificate_is_rejected(buggy: System, tmp_path: Path,
                                                      wrap: str) -> None:
    clauses = initial_values(buggy, "none" if wrap == "one-forall" else wrap)
    if wrap == "one-forall":
        clauses = [f"(forall ((k Int)) (and {' '.join(clauses)}))"]
    cert = save(forge(buggy, clauses), buggy, tmp_path)
    check = check_certificate(cert, buggy)
    assert not check.ok
    assert check.cti is not None, check.problems
    assert check.cti.broken
    step = check.cti.trace.steps[0]
    assert step.state != check.cti.pre and check.cti.pre == buggy.initial
    assert any("not inductive" in p for p in check.problems)
    assert len(check.checked_clauses) == len(clauses)
    if wrap != "none":
        assert check.quantified_clauses == len(clauses)
    text = render(check)
    assert "Counterexample to induction" in text and "REJECTED" in text
    assert "PROVED" not in text


def test_forged_certificate_does_not_prove_violated_properties(buggy: System,
                                                              tmp_path: Path) -> None:
    save(forge(buggy, initial_values(buggy, "forall")), buggy, tmp_path)
    res = run_cli("verify", str(MODELS / "buggy_pd.py"), "--proofs-dir", str(tmp_path))
    assert res.code == 1
    assert "certificate re-checked" not in res.out
    verdicts = {line.split()[1]: line.split()[2] for line in res.out.splitlines()
                if line.strip()[:1] in ("✔", "✘") and len(line.split()) > 2
                and line.split()[2] in ("VIOLATED", "PROVED", "HOLDS")}
    assert verdicts == {"no-decode-after-rejection": "VIOLATED",
                        "rejection-is-terminal": "VIOLATED",
                        "no-read-beyond-written": "VIOLATED",
                        "no-reuse-before-drain": "HOLDS"}, res.out
    cert = tmp_path / certificate_name(buggy)
    res = run_cli("check-proof", str(cert), str(MODELS / "buggy_pd.py"))
    assert res.code == 1 and "Counterexample to induction" in res.out
    assert "Traceback" not in res.out + res.err


# -- valid, extended and edited certificates -----------------------------------------------

@pytest.mark.parametrize("cert", STORED, ids=[p.name.split(".")[0] for p in STORED])
def test_stored_certificates_are_accepted_and_say_what_was_checked(cert: Path) -> None:
    system = certificate_system(cert)
    doc = json.loads(cert.read_text())
    check = check_certificate(cert, system)
    assert check.ok, check.problems
    assert check.properties == doc["properties"]
    assert check.checked_properties == doc["properties"]
    assert check.clauses == len(check.checked_clauses) == doc["invariant"]["clauses"]
    assert check.instances == len(system.instances)
    summary = check.summary()
    assert summary["ok"] and summary["proved"] == doc["properties"]
    assert summary["checked_clauses"][0].startswith("clause 1 (")
    assert any(line.startswith("initiation") for line in check.passed)
    assert any(line.startswith("consecution") for line in check.passed)
    text = render(check)
    assert f"checked: all {check.clauses} clauses" in text and "PROVED" in text


def _stored_with(system: System, extra: list[str]) -> dict[str, Any]:
    doc = json.loads(PATCHED_STORED.read_text())
    inv = doc["invariant"]
    inv["smtlib2"] += "".join(f"(assert {a})\n" for a in extra)
    inv["readable"] += [f"extra {i + 1}" for i in range(len(extra))]
    inv["clauses"] += len(extra)
    return reseal(doc)


@pytest.mark.parametrize("extra,failure", [
    # holds initially, not preserved: request r0 never leaves NEW
    ("(forall ((k Int)) (=> (= k |phase[r0]|) (= k 0)))", "cti"),
    ("(forall ((k Int)) (=> (and (<= 0 k) (< k 2)) (= |owner[0]| (- 1))))", "cti"),
    ("(exists ((k Int)) (and (= k |need[r1]|) (< k 1)))", "cti"),
    # false in the initial state
    ("(forall ((k Int)) (> |need[r0]| k))", "initiation"),
    ("(forall ((k Int)) (= k |owner[0]|))", "initiation"),
])
def test_extra_bogus_quantified_clause_is_rejected(patched: System, tmp_path: Path,
                                                   extra: str, failure: str) -> None:
    cert = save(_stored_with(patched, [extra]), patched, tmp_path)
    check = check_certificate(cert, patched)
    assert not check.ok
    assert check.quantified_clauses == 1
    if failure == "cti":
        assert check.cti is not None, check.problems
        assert any("extra 1" in b for b in check.cti.broken)
    else:
        assert any(p.startswith(f"the initial state violates clause {N_STORED + 1} (extra 1)")
                   for p in check.problems), check.problems


def test_a_harmless_quantified_clause_is_checked_and_accepted(patched: System,
                                                              tmp_path: Path) -> None:
    extra = "(forall ((k Int)) (=> (= k |phase[r0]|) (and (>= k 0) (<= k 7))))"
    cert = save(_stored_with(patched, [extra]), patched, tmp_path)
    check = check_certificate(cert, patched)
    assert check.ok, check.problems
    assert check.quantified_clauses == 1 and check.clauses == N_STORED + 1


def _replace_clause(doc: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    inv = doc["invariant"]
    assert inv["smtlib2"].count(old) == 1
    inv["smtlib2"] = inv["smtlib2"].replace(old, new)
    return doc


@pytest.mark.parametrize("old,new,what", [
    # no-reuse-before-drain is no longer excluded
    ("(assert (not |violated:no-reuse-before-drain|))",
     "(assert (not |violated:no-decode-after-rejection|))", "bad_state"),
    # a constant changed: false initially
    ("(assert (and (not (= |page_inflight_by[0,r0]| 3))",
     "(assert (and (not (= |page_inflight_by[0,r0]| 0))", "initiation"),
    # a clause dropped from the SMT-LIB2 text: no longer inductive
    ("(assert (and (= |owner[0]| |page_owner[0]|) (= |owner[1]| |page_owner[1]|) "
     "(= |owner[2]| |page_owner[2]|) (= |owner[3]| |page_owner[3]|)))", "", "checked"),
])
@pytest.mark.parametrize("resealed", [False, True])
def test_an_edited_clause_is_rejected(patched: System, tmp_path: Path, old: str, new: str,
                                      what: str, resealed: bool) -> None:
    doc = _replace_clause(json.loads(PATCHED_STORED.read_text()), old, new)
    if resealed:
        reseal(doc)
    check = check_certificate(save(doc, patched, tmp_path), patched)
    assert not check.ok
    edited = any("edited after the certificate was written" in p for p in check.problems)
    assert edited is not resealed
    if what == "bad_state":
        assert check.bad_state is not None
        assert any("does not exclude violations of no-reuse-before-drain" in p
                   for p in check.problems)
    elif what == "initiation":
        assert any(p.startswith("the initial state violates") for p in check.problems)
    else:
        # the readable form no longer matches; the SMT-LIB2 text is checked anyway
        assert any(f"readable form lists {N_STORED} clauses" in p for p in check.problems)
        assert check.clauses == N_STORED - 1


def test_readable_labels_are_not_the_authority(patched: System, tmp_path: Path) -> None:
    """The SMT-LIB2 text is what is checked; the readable form only labels clauses."""
    doc = json.loads(PATCHED_STORED.read_text())
    doc["invariant"]["readable"] = list(reversed(doc["invariant"]["readable"]))
    check = check_certificate(save(reseal(doc), patched, tmp_path), patched)
    assert check.ok, check.problems
    assert check.checked_clauses[0].startswith("clause 1 (" + doc["invariant"]["readable"][0])


# -- what cannot be checked is rejected ---------------------------------------------------

@pytest.mark.parametrize("clause,reason", [
    ("(= |phase[r7]| 0)", "unknown constant phase[r7]"),
    ("(forall ((k Int)) (= |ghost| k))", "unknown constant ghost"),
    ("(= (f |phase[r0]|) 0)", "unknown constant f"),
    ("(forall ((x Real)) (>= x 0.0))", "sort Real"),
    ("(= (div |need[r0]| |need[r1]|) 0)", "division is supported only by a nonzero"),
    ("(= (select ((as const (Array Int Int)) 0) |need[r0]|) 0)", "Array"),
    ("(= (to_int 1.5) 1)", "unsupported operation 'to_int'"),
    # the checks walk terms recursively: a clause nested thousands deep is refused
    # with its depth, not a crash
    # a `|` inside a string literal is not a quoted symbol (it crashed the tokenizer)
    ('(or (distinct "|" "a") |landed[0]|)', "has sort String"),
    # a quoted symbol named `)` is not a closing parenthesis for the nesting check
    pytest.param("(forall ((|)| Int)) " + "(=> (= |)| 0) " * 300 + "true" + ")" * 300 + ")",
                 "nested 303 deep", id="nested-behind-a-quoted-paren"),
    pytest.param("(and true " * 3000 + "(not |landed[0]|)" + ")" * 3000, "nested 3002 deep",
                 id="nested-3000-deep"),
])
def test_a_clause_the_checker_cannot_read_is_rejected(patched: System, tmp_path: Path,
                                                      clause: str, reason: str) -> None:
    cert = save(_stored_with(patched, [clause]), patched, tmp_path)
    check = check_certificate(cert, patched)
    assert not check.ok
    assert any("cannot be checked" in p and f"clause {N_STORED + 1}" in p and reason in p
               for p in check.problems), check.problems
    assert check.cti is None and "REJECTED" in render(check)


@pytest.mark.parametrize("text,reason", [
    ("(push 1)\n(assert false)\n(pop 1)\n", "unsupported SMT-LIB2 command 'push'"),
    ("(define-fun t () Bool false)\n(assert t)\n", "unsupported SMT-LIB2 command 'define-fun'"),
    ("(reset)\n", "unsupported SMT-LIB2 command 'reset'"),
    ("(declare-fun |ghost| () Int)\n", "declares 'ghost', which is not a state variable"),
    ("(declare-fun |phase[r0]| () Bool)\n", "declares 'phase[r0]' as Bool"),
    # the same two outside the shape kvspec writes (read by the tokenizer, not the fast path)
    ("(declare-const |phase[r0]| Bool)\n", "declares 'phase[r0]' as Bool"),
    ("(declare-fun  ghost  ()  Int )\n", "declares 'ghost', which is not a state variable"),
    ("(declare-fun f (Int) Int)\n", "unsupported declaration"),
    ("(assert (= |phase[r0]| 0)\n", "unbalanced"),
    ("assert false\n", "unexpected text outside a command"),
])
def test_smtlib_outside_the_accepted_subset_is_rejected(patched: System, tmp_path: Path,
                                                        text: str, reason: str) -> None:
    doc = json.loads(PATCHED_STORED.read_text())
    doc["invariant"]["smtlib2"] += text
    check = check_certificate(save(reseal(doc), patched, tmp_path), patched)
    assert not check.ok
    assert any(reason in p for p in check.problems), check.problems


def test_a_solver_unknown_is_a_rejection(patched: System, tmp_path: Path) -> None:
    # true (Fermat, n = 3), but no solver decides it: the checker must not pass it
    fermat = ("(forall ((x Int) (y Int) (z Int)) (=> (and (> x 0) (> y 0) (> z 0)) "
              "(not (= (+ (* x x x) (* y y y)) (* z z z)))))")
    cert = save(_stored_with(patched, [fermat]), patched, tmp_path)
    check = check_certificate(cert, patched, timeout=1.0)
    assert not check.ok
    assert any("could not decide" in p and f"clause {N_STORED + 1}" in p for p in check.problems)
    assert check.undecided and check.cti is None


# -- headers and JSON types ---------------------------------------------------------------

def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    target = doc
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize("path,value,message", [
    ("sizes", [2, 4], "sizes must be an object of integers, not an array"),
    ("sizes", {"requests": "2"}, "sizes must be an object of integers"),
    ("sizes", {"requests": True}, "sizes must be an object of integers"),
    ("properties", "no-decode-after-rejection", "properties must be an array of strings"),
    ("properties", [1, 2], "properties must be an array of strings"),
    ("model", "patched", "model must be an object, not a string"),
    ("model.sha256", None, "model.sha256 must be a string, not null"),
    ("library_sha256", 7, "library_sha256 must be a string, not an integer"),
    ("invariant", [], "invariant must be an object, not an array"),
    ("invariant.smtlib2", ["(assert true)"], "invariant.smtlib2 must be a string"),
    ("invariant.readable", "x", "invariant.readable must be an array of strings"),
    ("invariant.readable", [1], "invariant.readable must be an array of strings"),
    ("invariant.clauses", "66", "invariant.clauses must be an integer, not a string"),
    ("invariant.sha256", _DELETE, "invariant.sha256 is missing"),
    ("invariant.smtlib2", _DELETE, "invariant.smtlib2 is missing"),
    ("stats", [], "stats must be an object"),
    ("method", 3, "method must be a string"),
])
def test_wrong_json_types_are_rejected_with_a_message(patched: System, tmp_path: Path,
                                                      path: str, value: Any,
                                                      message: str) -> None:
    doc = _set(json.loads(PATCHED_STORED.read_text()), path, value)
    cert = save(doc, patched, tmp_path)
    with pytest.raises(CertificateError, match="malformed certificate"):
        load_certificate(cert)
    check = check_certificate(cert, patched)
    assert not check.ok
    assert len(check.problems) == 1 and message in check.problems[0], check.problems
    # the command line rejects it too, in one line (exit 2 when its own shape check
    # catches it first, exit 1 from the certificate check), never with a traceback
    res = run_cli("check-proof", str(cert), str(MODELS / "patched.py"))
    assert res.code in (1, 2)
    assert "malformed certificate" in res.out or "is not a kvspec certificate" in res.err
    assert "Traceback" not in res.out + res.err


@pytest.mark.parametrize("doc", [[], "x", 3, None, {"format": 1}])
def test_non_certificates_are_rejected(patched: System, tmp_path: Path, doc: Any) -> None:
    cert = tmp_path / "c.json"
    cert.write_text(json.dumps(doc))
    check = check_certificate(cert, patched)
    assert not check.ok and "not a kvspec certificate" in check.problems[0]


@pytest.mark.parametrize("properties,message", [
    (["no-decode-after-rejection", "no-such-property"],
     "claims properties this model does not have: no-such-property"),
    ([], "claims no property"),
    (["rejection-is-terminal", "rejection-is-terminal"], "more than once"),
])
def test_property_names_are_checked(patched: System, tmp_path: Path,
                                    properties: list[str], message: str) -> None:
    doc = json.loads(PATCHED_STORED.read_text())
    doc["properties"] = properties
    check = check_certificate(save(doc, patched, tmp_path), patched)
    assert not check.ok
    assert any(message in p for p in check.problems), check.problems


@pytest.mark.parametrize("path,value,message", [
    ("model.name", "BuggyPD", "is for the model 'BuggyPD'"),
    ("sizes", {"requests": 2, "pages": 8, "prefill_capacity": 2, "max_need": 3},
     "is for sizes"),
    ("invariant.clauses", 65, "says the invariant has 65 clauses"),
])
def test_header_mismatches_are_rejected(patched: System, tmp_path: Path, path: str,
                                        value: Any, message: str) -> None:
    doc = _set(json.loads(PATCHED_STORED.read_text()), path, value)
    check = check_certificate(save(doc, patched, tmp_path), patched)
    assert not check.ok
    assert any(message in p for p in check.problems), check.problems


@pytest.mark.parametrize("path,message", [
    ("model.sha256", "another version of the model"),
    ("library_sha256", "another version of the property library"),
])
def test_other_versions_are_rechecked_with_a_note(patched: System, tmp_path: Path, path: str,
                                                  message: str) -> None:
    # the clauses are checked against this version, so the header's digests only inform
    doc = _set(json.loads(PATCHED_STORED.read_text()), path, "0" * 64)
    check = check_certificate(save(doc, patched, tmp_path), patched)
    assert check.ok, check.problems
    assert any(message in n for n in check.notes), check.notes


# -- exact cross-check on a tiny model: accepted iff inductive ------------------------------

TINY = '''\
import enum

from kvspec import Model, Request, Requests, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    QUEUED = 1
    RUNNING = 2
    DONE = 3


class Tiny(Model):
    requests = Requests(2)
    phase = requests.var(Phase, init=Phase.NEW)
    long = requests.var(bool, init=False)
    refused = requests.var(bool, init=False)

    @action
    def arrive(s, r: Request, long: bool):
        require(s.phase[r] == Phase.NEW)
        s.long[r] = long
        s.phase[r] = Phase.QUEUED

    @action
    def admission(s, r: Request):
        require(s.phase[r] == Phase.QUEUED)
        if s.long[r]:
            s.refused[r] = True
            s.phase[r] = Phase.DONE
            emit.reject(r)
        else:
            s.phase[r] = Phase.RUNNING
            emit.admit(r)

    @action
    def decode(s, r: Request):
        require(s.phase[r] == Phase.RUNNING)
        emit.decode(r)
        s.phase[r] = Phase.DONE
'''

NDAR = "|violated:no-decode-after-rejection|"
RIT = "|violated:rejection-is-terminal|"


def _both(template: str) -> str:
    return "(and " + " ".join(template.replace("R", r) for r in ("r0", "r1")) + ")"


#: candidate clauses over the tiny model: the invariant PDR finds, other invariants
#: (some inductive only together), quantified forms, and clauses that do not hold
TINY_POOL: list[str] = [
    f"(not {NDAR})",
    f"(not {RIT})",
    _both("(or (not (= |phase[R]| 0)) (not |rejected[R]|))"),
    _both("(or (not (= |phase[R]| 1)) (not |rejected[R]|))"),
    _both("(or (not (= |phase[R]| 2)) (not |rejected[R]|))"),
    _both("(= |refused[R]| |rejected[R]|)"),
    _both("(=> |refused[R]| |long[R]|)"),
    _both("(=> (= |phase[R]| 0) (not |refused[R]|))"),
    _both("(=> (= |phase[R]| 0) (not |long[R]|))"),
    "(forall ((k Int)) (=> (= k |phase[r0]|) (or (not |rejected[r0]|) (= k 3))))",
    "(forall ((k Int)) (or (not |rejected[r1]|) (= |phase[r1]| 3)))",
    "(exists ((k Int)) (and (>= k 0) (<= k 3) (= k |phase[r0]|)))",
    "(not (= |phase[r0]| 2))",
    "(=> |long[r0]| (not |long[r1]|))",
    "(<= |phase[r1]| |phase[r0]|)",
    "(forall ((k Int)) (=> (= k |phase[r0]|) (> k 0)))",
]
#: the invariant PDR finds for the tiny model
TINY_PDR = frozenset(range(5))


@dataclass
class TinyWorld:
    system: System
    folder: Path
    truth: np.ndarray  # (clause, state) -> holds
    init: int
    src: np.ndarray  # edges of the transition graph over every state of the domains
    dst: np.ndarray
    erring: np.ndarray  # state -> some action raises a model error
    flags: dict[str, np.ndarray]  # property -> violated in state

    def inductive(self, chosen: list[int], properties: list[str]) -> bool:
        """Genuinely inductive for ``properties``, by enumeration of every state."""
        inv = np.logical_and.reduce(self.truth[chosen], axis=0)
        if not inv[self.init] or self.erring[inv].any():
            return False
        if any(self.flags[p][inv].any() for p in properties):
            return False
        from_inv = inv[self.src]
        return bool(inv[self.dst[from_inv]].all())


def _constants(f: z3.ExprRef) -> list[str]:
    """The uninterpreted constants of ``f``, under quantifiers too."""
    out: set[str] = set()
    stack = [f]
    while stack:
        e = stack.pop()
        if z3.is_quantifier(e):
            stack.append(e.body())
        elif z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(e.decl().name())
        elif z3.is_app(e):
            stack.extend(e.children())
    return sorted(out)


def _truth_table(clauses: list[str], system: System, states: list[tuple[Any, ...]]
                 ) -> np.ndarray:
    """Each clause on each state, decided by Z3 once per distinct value of the
    variables the clause reads."""
    cur = system.state_vars()
    slot = {str(v): i for i, v in enumerate(cur)}
    decls = {str(v): v for v in cur}
    solver = z3.Solver()
    out = np.zeros((len(clauses), len(states)), dtype=bool)
    for i, text in enumerate(clauses):
        f = z3.parse_smt2_string(f"(assert {text})", decls=decls)[0]
        slots = [slot[name] for name in _constants(f)]
        memo: dict[tuple[Any, ...], bool] = {}
        for j, state in enumerate(states):
            key = tuple(state[k] for k in slots)
            if key not in memo:
                pairs = [(cur[k], z3.BoolVal(bool(x)) if z3.is_bool(cur[k]) else z3.IntVal(int(x)))
                         for k, x in zip(slots, key)]
                solver.push()
                solver.add(z3.Not(z3.substitute(f, *pairs) if pairs else f))
                res = solver.check()
                solver.pop()
                assert res in (z3.sat, z3.unsat)
                memo[key] = res == z3.unsat
            out[i, j] = memo[key]
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyWorld:
    folder = tmp_path_factory.mktemp("tiny")
    path = folder / "tiny.py"
    path.write_text(TINY)
    system = compile_model(load_model(path), {})
    states = list(itertools.product(*[t.domain() for t in system.slot_types()]))
    index = {s: i for i, s in enumerate(states)}
    src, dst = [], []
    erring = np.zeros(len(states), dtype=bool)
    for i, s in enumerate(states):
        for inst in system.instances:
            try:
                res = system.step(s, inst)
            except ModelError:
                erring[i] = True
                continue
            if res is not None:
                src.append(i)
                dst.append(index[res.state])
    flags = {p.name: np.array([bool(s[p.flag]) for s in states]) for p in system.properties}
    return TinyWorld(system, folder, _truth_table(TINY_POOL, system, states),
                     index[system.initial], np.array(src), np.array(dst), erring, flags)


def test_the_tiny_oracle_itself(tiny: TinyWorld) -> None:
    props = [p.name for p in tiny.system.properties]
    assert tiny.inductive(sorted(TINY_PDR), props)
    assert tiny.inductive(sorted(TINY_PDR) + [5, 7], props)
    assert tiny.inductive([0, 1, 9, 10], props)  # rejected => DONE, quantified
    assert not tiny.inductive([0, 1, 4], props)  # rejected => not RUNNING alone
    assert not tiny.inductive([9, 10], props)  # the flags are not excluded
    assert tiny.inductive([9, 10], [])
    assert not tiny.inductive([0, 1], props)
    assert not tiny.inductive(sorted(TINY_PDR) + [12], props)  # not an invariant
    assert not tiny.inductive([0, 1, 9, 10, 15], props)  # false initially


def _check_tiny(tiny: TinyWorld, chosen: list[int], properties: list[str]) -> CertificateCheck:
    doc = forge(tiny.system, [TINY_POOL[i] for i in chosen],
                [f"pool {i}" for i in chosen], properties)
    return check_certificate(save(doc, tiny.system, tiny.folder), tiny.system)


#: starting points that are inductive (Hypothesis edits them or draws anything)
TINY_BASES = [sorted(TINY_PDR), [0, 1, 9, 10], [0, 1, 2, 3, 4, 5, 7, 8, 11]]


@st.composite
def tiny_clause_sets(draw: st.DrawFn) -> list[int]:
    anything = st.lists(st.integers(0, len(TINY_POOL) - 1), min_size=1, unique=True)
    if draw(st.booleans()):
        return sorted(draw(anything))
    base = set(draw(st.sampled_from(TINY_BASES)))
    base -= set(draw(st.lists(st.sampled_from(sorted(base)), max_size=2)))
    base |= set(draw(st.lists(st.integers(0, len(TINY_POOL) - 1), max_size=2)))
    return sorted(base) or [0]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chosen=tiny_clause_sets(),
       properties=st.sampled_from([["no-decode-after-rejection"], ["rejection-is-terminal"],
                                   ["no-decode-after-rejection", "rejection-is-terminal"]]))
@example(chosen=sorted(TINY_PDR), properties=["no-decode-after-rejection",
                                              "rejection-is-terminal"])
@example(chosen=[0, 1, 5, 7, 9, 10, 11], properties=["rejection-is-terminal"])
@example(chosen=[0, 1, 5, 7], properties=["no-decode-after-rejection"])
def test_accepted_exactly_when_inductive_on_every_state(tiny: TinyWorld, chosen: list[int],
                                                       properties: list[str]) -> None:
    order = sorted(chosen)
    props = sorted(properties)
    check = _check_tiny(tiny, order, props)
    event("accepted" if check.ok else "rejected")
    assert check.ok == tiny.inductive(order, props), check.problems
    assert len(check.checked_clauses) == len(order)
    assert check.checked_properties == [p.name for p in tiny.system.properties
                                        if p.name in properties]
    if not check.ok:
        assert check.cti is not None or check.bad_state is not None or any(
            p.startswith("the initial state violates") for p in check.problems)


# -- subsets of a real invariant against the reachable states of patched --------------------

_OPS = {
    z3.Z3_OP_AND: lambda *a: np.logical_and.reduce(np.broadcast_arrays(*a)),
    z3.Z3_OP_OR: lambda *a: np.logical_or.reduce(np.broadcast_arrays(*a)),
    z3.Z3_OP_NOT: np.logical_not,
    z3.Z3_OP_IMPLIES: lambda a, b: np.logical_or(np.logical_not(a), b),
    z3.Z3_OP_EQ: lambda a, b: a == b,
    z3.Z3_OP_LE: lambda a, b: a <= b,
    z3.Z3_OP_GE: lambda a, b: a >= b,
    z3.Z3_OP_LT: lambda a, b: a < b,
    z3.Z3_OP_GT: lambda a, b: a > b,
    z3.Z3_OP_ADD: lambda *a: sum(a),
    z3.Z3_OP_SUB: lambda a, b: a - b,
    z3.Z3_OP_UMINUS: lambda a: -a,
    z3.Z3_OP_MUL: lambda a, b: a * b,
    z3.Z3_OP_ITE: np.where,
}


def _np_eval(e: z3.ExprRef, cols: dict[str, np.ndarray]) -> Any:
    """A quantifier-free clause on many states at once (independent of the checker)."""
    if z3.is_true(e):
        return True
    if z3.is_false(e):
        return False
    if z3.is_int_value(e):
        return e.as_long()
    if z3.is_const(e):
        return cols[e.decl().name()]
    kind = e.decl().kind()
    if kind == z3.Z3_OP_DISTINCT:
        a, b = (_np_eval(c, cols) for c in e.children())
        return a != b
    return _OPS[kind](*[_np_eval(c, cols) for c in e.children()])


def _mutant(line: str) -> str | None:
    """``(= |x| c)`` -> ``(= |x| c+1)`` in the first place it occurs."""
    m = re.search(r"\(= (\|[^|]+\|) (\d+)\)", line)
    if m is None:
        return None
    return line[:m.start()] + f"(= {m.group(1)} {int(m.group(2)) + 1})" + line[m.end():]


@dataclass
class SmallPatched:
    system: System
    doc: dict[str, Any]
    asserts: list[str]  # the invariant's clauses, then mutants of them
    originals: int
    formulas: list[z3.BoolRef]
    truth: np.ndarray  # (clause, reachable state) -> holds


@pytest.fixture(scope="module")
def patched_small(tmp_path_factory: pytest.TempPathFactory) -> SmallPatched:
    """patched at 2 requests x 2 pages, a PDR certificate for it, mutants of its
    clauses, and the truth table of all of them over every reachable state."""
    folder = tmp_path_factory.mktemp("patched_small")
    shutil.copy(MODELS / "patched.py", folder / "patched.py")
    system = compile_model(load_model(folder / "patched.py"), {"requests": 2, "pages": 2})
    out = run_pdr(system, timeout=120, save_proof=True, proofs_dir=folder)
    assert all(v.status is Status.PROVED for v in out.verdicts)
    doc = json.loads((folder / certificate_name(system)).read_text())
    asserts = [line for line in doc["invariant"]["smtlib2"].splitlines()
               if line.startswith("(assert")]
    mutants = [m for m in (_mutant(a) for a in asserts) if m is not None]
    reach = explore(system, symmetry=False, keep_graph=True)
    assert reach.complete
    states = np.array([[int(x) for x in s] for s in reach.states])
    cols = {str(v): (states[:, i].astype(bool) if z3.is_bool(v) else states[:, i])
            for i, v in enumerate(system.state_vars())}
    decls = {str(v): v for v in system.state_vars()}
    formulas = [z3.parse_smt2_string(a, decls=decls)[0] for a in asserts + mutants]
    truth = np.array([np.broadcast_to(_np_eval(f, cols), (len(states),)) for f in formulas])
    assert truth[:len(asserts)].all(), "a PDR invariant clause is false on a reachable state"
    assert not truth[len(asserts):].all(axis=1).all(), "every mutant is an invariant"
    return SmallPatched(system, doc, asserts + mutants, len(asserts), formulas, truth)


def _on_state(f: z3.BoolRef, system: System, state: tuple[Any, ...]) -> bool:
    cols = {str(v): np.array([x]) for v, x in zip(system.state_vars(), state)}
    return bool(np.broadcast_to(_np_eval(f, cols), (1,))[0])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_accepted_subsets_hold_on_every_reachable_state(patched_small: SmallPatched,
                                                        tmp_path_factory: pytest.TempPathFactory,
                                                        data: st.DataObject) -> None:
    """Clauses of a real invariant, some dropped, some mutated: whatever is accepted
    holds on every reachable state, and every counterexample to induction is one."""
    w = patched_small
    n, total = w.originals, len(w.asserts)
    dropped = data.draw(st.one_of(st.sets(st.integers(0, n - 1), max_size=3),
                                  st.sets(st.integers(0, n - 1), max_size=n - 1)),
                        label="dropped")
    mutants = data.draw(st.sets(st.integers(n, total - 1), max_size=2), label="mutants")
    chosen = [i for i in range(n) if i not in dropped] + sorted(mutants)
    doc = copy.deepcopy(w.doc)
    inv = doc["invariant"]
    decls = [line for line in inv["smtlib2"].splitlines() if not line.startswith("(assert")]
    inv["smtlib2"] = "\n".join(decls + [w.asserts[i] for i in chosen]) + "\n"
    inv["readable"] = [f"clause {i}" for i in chosen]
    inv["clauses"] = len(chosen)
    reseal(doc)
    check = check_certificate(save(doc, w.system, tmp_path_factory.mktemp("subset")), w.system)
    event("accepted" if check.ok else "cti" if check.cti is not None else "rejected")
    if check.ok:
        assert w.truth[chosen].all(), "an accepted invariant is false on a reachable state"
    elif check.cti is not None:
        pre, post = check.cti.pre, check.cti.trace.steps[0].state
        assert all(_on_state(w.formulas[i], w.system, pre) for i in chosen)
        assert not all(_on_state(w.formulas[i], w.system, post) for i in chosen)
    else:
        assert check.bad_state is not None or any(
            p.startswith("the initial state violates") for p in check.problems), check.problems
    if not dropped and not mutants:
        assert check.ok, check.problems
