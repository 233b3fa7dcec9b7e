"""Proof certificates: an inductive invariant, stored with the model it proves.

A certificate (``kvspec-proof/1``, one JSON file per model class and size in the
model's proofs directory, :mod:`kvspec.proofs.location`) holds the model's content
hash, the size parameters, the property names, and the invariant twice: as SMT-LIB2 over the model's own slot names
(``phase[r0]``, ``owner[3]``; the integer encoding of ``docs/formats.md``) and as
readable clauses (``for all p, r: ...``), one per SMT-LIB2 ``assert``.

**The SMT-LIB2 text is the authority.** The invariant checked is exactly the
conjunction of every ``assert`` in it (:mod:`kvspec.proofs.clauses` accepts a
small, strict subset of SMT-LIB2 so that no assertion can be hidden or skipped);
the readable form labels the clauses in reports and is never used for checking.
It must list one label per ``assert``, and the checksum covers both.

:func:`check_certificate` re-checks a certificate independently of how it was
found (:mod:`kvspec.proofs.smt_check`: its own encoding, built from the action
bodies over the integer state variables, every action instance, no symmetry
reduction, no bit-vector translation): every clause, quantified or not, must hold
initially, be preserved by every action instance, and together they must exclude
every claimed property's violations and every model error. A failure to induct is
shown as a counterexample to induction in the same diff format as traces. A
certificate that cannot be read (wrong JSON types, an unsupported SMT-LIB2
construct, a symbol the model does not have, a solver ``unknown``) is rejected
with the reason, never accepted.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import z3
from rich.console import Console
from rich.text import Text

from kvspec.lang.schema import State
from kvspec.lang.system import Property, System
from kvspec.proofs.clauses import CertificateError, Clause, parse_invariant
from kvspec.proofs.lifted import LIFTED_FROM
from kvspec.proofs.smt_check import (
    QUERY_TIMEOUT_S,
    CounterexampleToInduction,
    InductionReport,
    check_clauses,
    cti_trace,
)
from kvspec.props import library

__all__ = [
    "CERT_FORMAT", "CertificateCheck", "CertificateDocument", "CertificateError",
    "CounterexampleToInduction", "Invariant", "KIND_ALL_SIZES", "KIND_SIZE_SPECIFIC",
    "all_sizes_paths", "certificate_name", "certificate_path", "size_specific_path",
    "check_certificate", "cti_trace", "invariant_digest", "library_sha256", "load_certificate",
    "load_invariant", "parse_document", "verify_invariant", "write_certificate",
]

CERT_FORMAT = "kvspec-proof/1"
#: the two kinds of certificate: for the sizes in ``sizes``, or for every number of
#: requests and pages (:mod:`kvspec.proofs.parametric`); a certificate without a
#: ``kind`` is size-specific
KIND_SIZE_SPECIFIC = "size-specific"
KIND_ALL_SIZES = "all-sizes"


def library_sha256() -> str:
    return hashlib.sha256(Path(library.__file__).read_bytes()).hexdigest()


def certificate_name(system: System) -> str:
    """File, model class and sizes:
    ``patched.PatchedDesign.requests=2,pages=4,prefill_capacity=2,max_need=3.json``, so
    two model classes of one file never share a certificate."""
    sizes = ",".join(f"{k}={v}" for k, v in system.sizes.items())
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", system.loaded.path.stem)
    cls = re.sub(r"[^A-Za-z0-9_-]", "_", system.name)
    return f"{stem}.{cls}.{sizes}.json"


def size_specific_path(system: System, proofs_dir: Path | None = None) -> Path:
    """Where the size-specific certificate of ``system`` lives: in ``proofs_dir``, by
    default the model's own proofs directory
    (:func:`kvspec.proofs.location.default_proofs_dir`)."""
    if proofs_dir is None:
        from kvspec.proofs.location import default_proofs_dir
        proofs_dir = default_proofs_dir(system.loaded.path)
    return Path(proofs_dir) / certificate_name(system)


def certificate_path(system: System, proofs_dir: Path | None = None) -> Path:
    """The certificate to re-check for ``system``: its size-specific one when there is
    one, else an all-sizes certificate of the model (``requests=all,pages=all``, for
    the same other sizes) when there is one, else where a size-specific one goes."""
    own = size_specific_path(system, proofs_dir)
    if own.exists():
        return own
    every = all_sizes_paths(system, proofs_dir)
    return every[0] if every else own


def all_sizes_paths(system: System, proofs_dir: Path | None = None) -> list[Path]:
    """The all-sizes certificates of the model that cover ``system``'s sizes, the one
    covering every value of the other size parameters first."""
    from kvspec.proofs.parametric.engine import all_sizes_name, is_all_sizes
    from kvspec.proofs.parametric.model import symbolic_params
    where = size_specific_path(system, proofs_dir).parent
    out = []
    for params in (symbolic_params(system), []):
        every = where / all_sizes_name(system, params)
        if every not in out and is_all_sizes(every):
            out.append(every)
    return out


# -- writing --------------------------------------------------------------------------------

@dataclass
class Invariant:
    """Conjuncts over the integer-encoded state variables, each with its reading."""

    conjuncts: list[z3.BoolRef]
    readable: list[str]
    #: the id spaces (of "requests", "pages") the conjuncts stand for every renaming in:
    #: then they are orbit representatives (:mod:`kvspec.proofs.orbits`)
    symmetry: list[str] = field(default_factory=list)

    def smtlib2(self, system: System) -> str:
        lines = [f"; inductive invariant of {system.name}, "
                 + ", ".join(f"{k}={v}" for k, v in system.sizes.items())]
        for v in system.state_vars():
            sort = "Bool" if z3.is_bool(v) else "Int"
            lines.append(f"(declare-fun {_symbol(str(v))} () {sort})")
        for text, c in zip(self.readable, self.conjuncts):
            lines.append("; " + " ".join(str(text).split()))  # a comment stays one line
            lines.append(f"(assert {' '.join(c.sexpr().split())})")  # one line per clause
        return "\n".join(lines) + "\n"


def _symbol(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name) else f"|{name}|"


def invariant_digest(smt: str, readable: list[str]) -> str:
    """The checksum stored with the invariant (over both of its forms)."""
    h = hashlib.sha256(smt.encode())
    h.update(json.dumps(readable).encode())
    return h.hexdigest()


def write_certificate(system: System, invariant: Invariant, proofs_dir: Path, *,
                      method: str, stats: dict[str, Any] | None = None,
                      properties: list[str] | None = None) -> Path:
    """Write the certificate for ``system`` and return its path. ``properties``: the
    property names it claims (default: all of the system's)."""
    smt = invariant.smtlib2(system)
    loaded = system.loaded
    doc = {
        "format": CERT_FORMAT,
        "kind": KIND_SIZE_SPECIFIC,
        "model": {"name": system.name, "file": loaded.file, "sha256": loaded.sha256},
        "library_sha256": library_sha256(),
        "sizes": dict(system.sizes),
        "properties": list(properties) if properties is not None
        else [p.name for p in system.properties],
        "method": method,
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **({"symmetry": list(invariant.symmetry)} if invariant.symmetry else {}),
        "invariant": {
            "clauses": len(invariant.conjuncts),
            "readable": invariant.readable,
            "smtlib2": smt,
            "sha256": invariant_digest(smt, invariant.readable),
        },
        "stats": stats or {},
    }
    path = size_specific_path(system, proofs_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path



# -- reading ------------------------------------------------------------------------------

@dataclass
class CertificateDocument:
    """The fields of a ``kvspec-proof/1`` document, with their JSON types checked."""

    model_name: str
    model_file: str
    model_sha256: str
    library_sha256: str
    sizes: dict[str, int]
    properties: list[str]
    clauses: int
    readable: list[str]
    smtlib2: str
    invariant_sha256: str
    method: str = ""
    created: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    kind: str = KIND_SIZE_SPECIFIC
    symmetry: list[str] = field(default_factory=list)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _type_name(x: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(x), type(x).__name__)


def parse_document(doc: Any) -> CertificateDocument:
    """Check the JSON types of every field; raise :class:`CertificateError` listing the
    fields that are missing or of the wrong type."""
    if not isinstance(doc, dict) or doc.get("format") != CERT_FORMAT:
        raise CertificateError(f"not a kvspec certificate (expected format {CERT_FORMAT})")
    wrong: list[str] = []

    def get(obj: dict[str, Any], key: str, where: str, ok: Any, what: str,
            optional: bool = False) -> Any:
        if key not in obj:
            if not optional:
                wrong.append(f"{where}{key} is missing")
            return None
        value = obj[key]
        if not ok(value):
            wrong.append(f"{where}{key} must be {what}, not {_type_name(value)}")
            return None
        return value

    is_str = lambda x: isinstance(x, str)  # noqa: E731
    is_obj = lambda x: isinstance(x, dict)  # noqa: E731
    is_str_list = lambda x: isinstance(x, list) and all(isinstance(i, str) for i in x)  # noqa: E731
    model = get(doc, "model", "", is_obj, "an object") or {}
    inv = get(doc, "invariant", "", is_obj, "an object") or {}
    out = CertificateDocument(
        model_name=get(model, "name", "model.", is_str, "a string"),
        model_file=get(model, "file", "model.", is_str, "a string"),
        model_sha256=get(model, "sha256", "model.", is_str, "a string"),
        library_sha256=get(doc, "library_sha256", "", is_str, "a string"),
        sizes=get(doc, "sizes", "", lambda x: is_obj(x) and all(_is_int(v) for v in x.values()),
                  "an object of integers"),
        properties=get(doc, "properties", "", is_str_list, "an array of strings"),
        clauses=get(inv, "clauses", "invariant.", _is_int, "an integer"),
        readable=get(inv, "readable", "invariant.", is_str_list, "an array of strings"),
        smtlib2=get(inv, "smtlib2", "invariant.", is_str, "a string"),
        invariant_sha256=get(inv, "sha256", "invariant.", is_str, "a string"),
        method=get(doc, "method", "", is_str, "a string", optional=True) or "",
        created=get(doc, "created", "", is_str, "a string", optional=True) or "",
        stats=get(doc, "stats", "", is_obj, "an object", optional=True) or {},
        kind=get(doc, "kind", "", lambda x: x in (KIND_SIZE_SPECIFIC, KIND_ALL_SIZES),
                 f"{KIND_SIZE_SPECIFIC!r} or {KIND_ALL_SIZES!r}", optional=True)
        or KIND_SIZE_SPECIFIC,
        symmetry=get(doc, "symmetry", "", lambda x: is_str_list(x) and set(x) <= {"requests",
                                                                                 "pages"},
                     'an array of "requests" and "pages"', optional=True) or [],
    )
    if wrong:
        raise CertificateError("malformed certificate: " + "; ".join(wrong))
    return out


def load_certificate(path: Path) -> CertificateDocument:
    """Read and type-check a certificate file (:class:`CertificateError` if it cannot)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise CertificateError(f"no such certificate: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CertificateError(f"cannot read the certificate {path}: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CertificateError(f"not a JSON certificate: {exc}") from None
    return parse_document(doc)


def load_invariant(text: str, system: System) -> list[z3.BoolRef]:
    """The assertions of an SMT-LIB2 invariant over ``system``'s state variables
    (:class:`CertificateError`, a ``ValueError``, when it does not parse against it)."""
    return [c.formula for c in parse_invariant(text, system.state_vars())]


# -- checking ---------------------------------------------------------------------------------

@dataclass
class CertificateCheck:
    """The verdict on one certificate; ``ok`` only if every check passed.

    ``checked_clauses`` and ``checked_properties`` say what the checks covered;
    ``properties`` are the properties proved (meaningful only when ``ok``)."""

    path: Path
    system: System
    ok: bool = False
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    cti: CounterexampleToInduction | None = None
    bad_state: tuple[State, str] | None = None
    properties: list[str] = field(default_factory=list)
    seconds: float = 0.0
    clauses: int = 0
    checked_clauses: list[str] = field(default_factory=list)
    checked_properties: list[str] = field(default_factory=list)
    quantified_clauses: int = 0
    instances: int = 0
    undecided: bool = False  # the solver answered ``unknown`` somewhere (still a rejection)
    kind: str = KIND_SIZE_SPECIFIC

    def summary(self) -> dict[str, Any]:
        """A JSON-ready account of the check."""
        return {"path": str(self.path), "ok": self.ok, "problems": list(self.problems),
                "notes": list(self.notes), "passed": list(self.passed),
                "clauses": self.clauses, "quantified_clauses": self.quantified_clauses,
                "checked_clauses": list(self.checked_clauses),
                "checked_properties": list(self.checked_properties),
                "action_instances": self.instances, "undecided": self.undecided,
                "kind": self.kind, "proved": list(self.properties) if self.ok
                else [], "seconds": round(self.seconds, 3)}

    def print(self, console: Console) -> None:
        head = Text()
        head.append("certificate ", style="bold")
        head.append(str(self.path))
        console.print(head)
        if self.checked_clauses:
            quant = f" ({self.quantified_clauses} quantified)" if self.quantified_clauses else ""
            props = ", ".join(self.checked_properties) or "none"
            console.print(Text(f"  checked: all {len(self.checked_clauses)} clauses of the "
                               f"SMT-LIB2 invariant{quant}, {self.instances} action "
                               f"instances; properties: {props}", style="dim"))
        for line in self.passed:
            console.print(Text.assemble(("  ✔ ", "green"), line))
        for line in self.notes:
            console.print(Text(f"  note: {line}", style="yellow"))
        for line in self.problems:
            console.print(Text.assemble(("  ✘ ", "bold red"), (line, "red")))
        if self.bad_state is not None:
            state, what = self.bad_state
            console.print(Text(f"  a state satisfying the invariant where {what}:", style="red"))
            console.print(_state_table(self.system, state))
        if self.cti is not None:
            from kvspec.report.text import trace_table

            step = self.cti.trace.steps[0]
            console.print(Text.assemble(("Counterexample to induction", "bold"),
                                        f": {step.instance.label()} leads from a state that "
                                        "satisfies the invariant to one that does not"))
            console.print(Text("  before the step (only the variables that change are shown; "
                               "full state below):", style="dim"))
            console.print(trace_table(self.cti.trace, show_monitor=True))
            for b in self.cti.broken:
                console.print(Text.assemble(("  ✘ broken: ", "bold red"), (b, "red")))
            console.print(_state_table(self.cti.trace.system, self.cti.pre))
        if self.ok:
            from kvspec.report.text import sizes_text

            where = ("all sizes, certificate re-checked" if self.kind == KIND_ALL_SIZES else
                     f"certificate re-checked at {sizes_text(dict(self.system.sizes))}")
            console.print(Text.assemble(("  PROVED", "bold green"),
                                        f" ({where}, {self.clauses} clauses, "
                                        f"{self.seconds:.2f} s): " + ", ".join(self.properties)))
        else:
            console.print(Text("  certificate REJECTED", style="bold red"))
        console.print()


def _state_table(system: System, state: State) -> Text:
    schema = system.schema
    out = Text()
    for v in schema.vars:
        if v.owner == "flag":
            continue
        vals = [v.type.fmt(x) if v.type.kind == "ref" else str(v.type.to_json(x))
                for x in state[v.offset:v.offset + v.length]]
        out.append(f"    {v.name:<16} ", style="dim")
        out.append(" ".join(vals) + "\n")
    return out


def check_certificate(path: Path, system: System, *,
                      timeout: float = QUERY_TIMEOUT_S) -> CertificateCheck:
    """Re-check a stored certificate against ``system`` (see the module docstring).
    ``timeout`` bounds each solver query, in seconds; running out rejects."""
    start = time.monotonic()
    check = CertificateCheck(Path(path), system)
    try:
        doc = load_certificate(Path(path))
    except CertificateError as exc:
        check.problems.append(str(exc))
        return check
    if doc.kind == KIND_ALL_SIZES:
        _check_all_sizes(doc, system, check, timeout)
        check.seconds = time.monotonic() - start
        return check
    _check_header(doc, system, check)
    _claims(doc, system, check)
    try:
        clauses = parse_invariant(doc.smtlib2, system.state_vars())
    except CertificateError as exc:
        check.problems.append(f"the invariant cannot be checked: {exc}")
        check.seconds = time.monotonic() - start
        return check
    if len(doc.readable) == len(clauses):
        for c, label in zip(clauses, doc.readable):
            c.label = label
    else:  # the SMT-LIB2 text is still checked in full, labelled by position
        check.problems.append(f"the readable form lists {len(doc.readable)} clauses but the "
                              f"SMT-LIB2 text asserts {len(clauses)}; they must correspond "
                              "one to one")
    if doc.clauses != len(clauses):
        check.problems.append(f"the certificate says the invariant has {doc.clauses} clauses, "
                              f"but its SMT-LIB2 text asserts {len(clauses)}")
    wanted = [p for p in system.properties if p.name in doc.properties]
    if doc.symmetry:
        _run_orbits(system, clauses, doc.symmetry, wanted, check, timeout)
    else:
        _run(system, clauses, wanted, check, timeout)
    check.seconds = time.monotonic() - start
    return check


def _claims(doc: CertificateDocument, system: System, check: CertificateCheck) -> None:
    """Problems with the properties a certificate claims (notes for those it leaves out)."""
    by_name = {p.name for p in system.properties}
    unknown = [name for name in doc.properties if name not in by_name]
    if unknown:
        check.problems.append("the certificate claims properties this model does not have: "
                              + ", ".join(unknown))
    duplicates = sorted({n for n in doc.properties if doc.properties.count(n) > 1})
    if duplicates:
        check.problems.append("the certificate lists properties more than once: "
                              + ", ".join(duplicates))
    if not doc.properties:
        check.problems.append("the certificate claims no property")
    missing = [p.name for p in system.properties if p.name not in doc.properties]
    if missing:
        check.notes.append("not covered by this certificate: " + ", ".join(missing))
    if doc.invariant_sha256 != invariant_digest(doc.smtlib2, doc.readable):
        check.problems.append("the invariant was edited after the certificate was written "
                              "(its checksum does not match)")


def _check_all_sizes(doc: CertificateDocument, system: System, check: CertificateCheck,
                     timeout: float) -> None:
    """Re-check an all-sizes certificate (:mod:`kvspec.proofs.parametric`) for every
    number of requests and pages: initiation, consecution and safety of its quantified
    clauses on the model's parametric transition system."""
    from kvspec.proofs.parametric.values import Unsupported
    from kvspec.proofs.parametric.engine import params_of, recheck
    from kvspec.proofs.parametric.model import fixed_sizes

    check.kind = KIND_ALL_SIZES
    fixed = fixed_sizes(system, params_of(system, doc.smtlib2))
    if doc.model_name != system.name:
        check.problems.append(f"the certificate is for the model {doc.model_name!r}, not "
                              f"{system.name!r}")
    if doc.sizes != fixed:
        check.problems.append(f"the certificate is for every number of requests and pages at "
                              f"{doc.sizes}, not at {fixed}")
    if doc.model_sha256 != system.loaded.sha256:
        check.notes.append("made for another version of the model: re-checked against this "
                           "version")
    _claims(doc, system, check)
    wanted = [p.name for p in system.properties if p.name in doc.properties]
    try:
        res, n = recheck(system, doc.smtlib2, doc.readable, wanted, timeout)
    except CertificateError as exc:
        check.problems.append(f"the invariant cannot be checked: {exc}")
        return
    except Unsupported as exc:
        check.problems.append(f"the model has no reading for every size: {exc}")
        return
    check.clauses = n
    check.quantified_clauses = n
    check.problems.extend(res.problems)
    check.undecided = res.unknown > 0
    if doc.clauses != n:
        check.problems.append(f"the certificate says the invariant has {doc.clauses} clauses, "
                              f"but its SMT-LIB2 text asserts {n}")
    if not res.problems:
        check.passed.append(f"for every number of requests and pages: initiation, consecution "
                            f"over every action and safety of all {n} clauses "
                            f"({res.queries} queries)")
    check.properties = [p for p in wanted if p in res.proved]
    check.ok = not check.problems and bool(wanted) and set(check.properties) == set(wanted)


def verify_invariant(system: System, invariant: Invariant, properties: list[str],
                     check: CertificateCheck | None = None, *,
                     timeout: float = QUERY_TIMEOUT_S) -> CertificateCheck:
    """Check ``invariant`` for ``properties`` exactly as a certificate holding it would
    be checked: through its SMT-LIB2 text (what :func:`write_certificate` stores)."""
    start = time.monotonic()
    if check is None:
        check = CertificateCheck(Path("<invariant>"), system)
    try:
        clauses = parse_invariant(invariant.smtlib2(system), system.state_vars(),
                                  list(invariant.readable))
    except CertificateError as exc:
        check.problems.append(f"the invariant cannot be checked: {exc}")
        return check
    wanted = [p for p in system.properties if p.name in set(properties)]
    unknown = sorted(set(properties) - {p.name for p in wanted})
    if unknown:
        check.problems.append("no such property in this model: " + ", ".join(unknown))
    if invariant.symmetry:
        _run_orbits(system, clauses, invariant.symmetry, wanted, check, timeout)
    else:
        _run(system, clauses, wanted, check, timeout)
    check.seconds = time.monotonic() - start
    return check


def _run(system: System, clauses: list[Clause], wanted: list[Property],
         check: CertificateCheck, timeout: float) -> None:
    report: InductionReport = check_clauses(system, clauses, wanted, timeout=timeout)
    check.quantified_clauses = sum(1 for c in clauses if c.quantified)
    _record(check, clauses, report, wanted)


def _record(check: CertificateCheck, clauses: list[Clause], report: InductionReport,
            wanted: list[Property]) -> None:
    check.clauses = len(clauses)
    check.checked_clauses = report.clauses
    check.checked_properties = report.properties
    check.instances = report.instances
    check.passed.extend(report.passed)
    check.problems.extend(report.problems)
    check.cti = report.cti
    check.bad_state = report.bad_state
    check.undecided = report.undecided
    check.properties = [p.name for p in wanted]
    check.ok = not check.problems and bool(wanted)


def _run_orbits(system: System, clauses: list[Clause], symmetry: list[str],
                wanted: list[Property], check: CertificateCheck, timeout: float) -> None:
    """The clauses are orbit representatives: check one orbit at a time. When the model
    lets the check rename a space the certificate does not (``lowest_free``'s pages, in
    every action but ``prealloc``), the clauses closed under those renamings too are
    tried first: a stronger invariant, but one whose check needs far fewer queries at
    large sizes; when it is not inductive, the certificate's own invariant is checked."""
    from kvspec.proofs.orbits import NotSymmetric, check_orbits, wider_symmetry

    dims = ("requests" in symmetry, "pages" in symmetry)
    formulas = [c.formula for c in clauses]
    labels = [c.label or f"clause {c.index}" for c in clauses]
    wider = wider_symmetry(system, dims)
    if wider is not None:
        why = ""
        try:
            report = check_orbits(system, formulas, labels, wanted, wider, timeout=timeout,
                                  drop_renamings=True)
            why = "; ".join(report.problems)
        except NotSymmetric as exc:
            why = str(exc)
        if not why:
            _record(check, clauses, report, wanted)
            check.checked_clauses = [c.describe(60) for c in clauses]
            added = [d for d, was, now in zip(("requests", "pages"), dims, wider)
                     if now and not was]
            check.notes.append(
                f"checked with every renaming of the clauses over {' and '.join(added)} too "
                f"(the certificate renames {' and '.join(symmetry)} only): an invariant that "
                f"contains the certificate's; {report.renamings_dropped} of the "
                f"{len(clauses)} clauses are such renamings of others, "
                f"{report.orbit_instances} clause instances, {report.representatives} "
                f"representative action instances, {report.queries} solver queries")
            return
        check.notes.append(f"not checked with the clauses' renamings over more ids: {why}")
    try:
        report = check_orbits(system, formulas, labels, wanted, dims,
                              timeout=timeout, lifted_from=LIFTED_FROM)
    except NotSymmetric as exc:
        check.problems.append(f"the invariant cannot be checked one orbit at a time: {exc}")
        return
    _record(check, clauses, report, wanted)
    check.checked_clauses = [c.describe(60) for c in clauses]
    lifted = report.lifted
    if lifted is not None and lifted.proved:
        read = (f" ({lifted.readings} of them with constants read relative to a size, "
                f"each the same clause as its representative at this size)"
                if lifted.readings else "")
        check.notes.append(f"checked through its reading for every size: the representatives "
                           f"lift exactly to {lifted.clauses} quantified clauses over "
                           f"{' and '.join(symmetry)}{read}, {report.orbit_instances} clause "
                           f"instances at this size, {report.queries} solver queries")
        return
    if lifted is not None:
        check.notes.append(f"not checked through its reading for every size: {lifted.why_not}")
    unrenamed = "".join(f" ({', '.join(names)} checked at every {dim}, not renamed)"
                        for dim, names in sorted(report.unrenamed.items()))
    check.notes.append(f"orbit check over {' and '.join(symmetry)}{unrenamed}: "
                       f"{report.orbit_instances} "
                       f"clause instances, {report.representatives} representative action instances, "
                       f"{report.queries} solver queries")


def _check_header(doc: CertificateDocument, system: System, check: CertificateCheck) -> None:
    if doc.model_name != system.name:
        check.problems.append(f"the certificate is for the model {doc.model_name!r}, not "
                              f"{system.name!r}")
    # the clauses are checked against this version of the model and of the library
    # below (initiation, consecution, the properties), so an edit of either is no
    # reason to reject: a design change that keeps the invariant inductive passes
    if doc.model_sha256 != system.loaded.sha256:
        check.notes.append(
            f"made for another version of the model (sha256 {doc.model_sha256[:12]}…, this "
            f"file is {system.loaded.sha256[:12]}…): re-checked against this version")
    if doc.library_sha256 != library_sha256():
        check.notes.append("made with another version of the property library: re-checked "
                           "against this version")
    if doc.sizes != dict(system.sizes):
        check.problems.append(f"the certificate is for sizes {doc.sizes}, not "
                              f"{dict(system.sizes)}")
