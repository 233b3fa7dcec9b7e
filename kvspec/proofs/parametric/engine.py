"""``--engine all-sizes``: proofs for every number of requests and pages.

1. The size-specific proof first: a stored size-specific certificate that
   re-checks, else PDR (:mod:`kvspec.engines.pdr`), at the requested sizes when they
   are the small size (at most two requests and four pages), else at the small size
   (:func:`prove_every_size`): what is generalised need not grow with the run's size.
2. The model's parametric reading (:mod:`kvspec.proofs.parametric.model`); a
   construct outside the fragment is reported with its file and line.
3. The size-specific invariant's clauses generalised to ``for all`` clauses
   (:mod:`kvspec.proofs.parametric.generalise`), then a Houdini search over them
   on the parametric system (:mod:`kvspec.proofs.parametric.induction`): what
   stays is inductive for every size.
4. A property the result excludes is ``PROVED (all sizes, inductive invariant, N
   clauses)``; the invariant is then re-checked exactly as a stored all-sizes
   certificate would be (learnt at the small size: also on the reading of the
   requested sizes, whose compiled code may check what the small size's cannot
   fail), and with ``--save-proof`` written as one
   (``…requests=all,pages=all,….json``, ``"kind": "all-sizes"``). Every other
   property gets its size-specific verdict at the requested sizes (step 1's, or a
   size-specific proof there when step 1 ran at the small size), with the reason
   attached.
"""
from __future__ import annotations

import datetime
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable
from typing import Any, Callable

import z3

from kvspec.lang.system import System
from kvspec.proofs.parametric.cardinality import CountReadings, ghosts_in, with_counts
from kvspec.proofs.parametric.counts import uncounted_reasons
from kvspec.proofs.parametric.values import Unsupported
from kvspec.proofs.parametric.generalise import Generalised, QClause, enum_siblings, \
    generalise, size_variants
from kvspec.proofs.parametric.induction import QUERY_TIMEOUT_S, InductionResult, check_invariant
from kvspec.proofs.parametric.model import ParamModel, id_size_names, parametric_model, \
    symbolic_params
from kvspec.proofs.parametric.needs import find_needs
from kvspec.proofs.clauses import CertificateError
from kvspec.proofs.parametric.smtlib import check_term, model_decls, parse, to_smtlib2
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

ProgressFn = Callable[[int, int, float, str], None]

#: the verdict method of a proof for every size
ALL_SIZES = "all sizes"
KIND_ALL_SIZES = "all-sizes"


@dataclass
class AllSizesProof:
    """The outcome of step 2-4 for one model."""

    model: ParamModel | None = None
    clauses: list[QClause] = field(default_factory=list)
    proved: list[str] = field(default_factory=list)
    why_not: str = ""  # why nothing (more) was proved for every size
    #: property -> why it in particular was not (a count its proof needed did not lift)
    why_not_for: dict[str, str] = field(default_factory=dict)
    #: the counts of pages read as ghost counts (their symbols), where they were tried
    counts: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    #: property -> how many of ``clauses`` it needs (empty when not worked out)
    needs: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    queries: int = 0

    @property
    def approximations(self) -> list[str]:
        """The model lines the proof read as more behaviours than they have
        (``lowest_free.py:92: …``)."""
        if self.model is None:
            return []
        return [_short_where(a.text()) for a in self.model.approximations]


def all_sizes_name(system: System, params: Iterable[str] = ()) -> str:
    """``patched.PatchedPD.requests=all,pages=all,prefill_capacity=2,max_need=3.json``
    (with ``params``, those sizes are ``all`` too; a derived size always is)."""
    from kvspec.proofs.certificate import certificate_name

    derived = {d.name for d in system.loaded.decl.sizes if d.derived is not None}
    every = set(id_size_names(system)) | set(params) | derived  # derived: read as symbols
    sizes = ",".join(f"{k}={'all' if k in every else v}" for k, v in system.sizes.items())
    stem = certificate_name(system).rsplit(".json", 1)[0]
    head = stem[:len(stem) - len(",".join(f"{k}={v}" for k, v in system.sizes.items()))]
    return f"{head}{sizes}.json"


def prove_all_sizes(system: System, clauses: list[tuple[z3.BoolRef, str]],
                    properties: list[str], *, deadline: float | None = None,
                    params: Iterable[str] = (),
                    needs: dict[str, list[str]] | None = None) -> AllSizesProof:
    """Steps 2-4 (module docstring) from size-specific ``(formula, label)`` clauses;
    ``params``: the size parameters besides requests and pages to prove every value of;
    ``needs``: the clauses each property needed at its size (labels), when known."""
    start = time.monotonic()
    out = AllSizesProof()
    try:
        model = parametric_model(system, params=params)
    except Unsupported as exc:
        out.why_not = str(exc)
        out.seconds = time.monotonic() - start
        return out
    gen = generalise(system, model.sorts, model.symbols, clauses)
    _search(out, model, gen, properties, deadline)
    if gen.counts and sorted(out.proved) != sorted(properties):
        # the clauses with counts over every page, read with ghost counts
        readings = CountReadings(model)
        counted = generalise(system, model.sorts, model.symbols, clauses, readings)
        if readings.ghosts:
            tried = AllSizesProof(counts=sorted(readings.ghosts))
            _search(tried, with_counts(model, list(readings.ghosts.values())), counted,
                    properties, deadline)
            tried.queries += out.queries
            if set(tried.proved) > set(out.proved):
                out, gen = tried, counted
            else:
                out.counts = tried.counts
                out.queries = tried.queries
    missing = [p for p in properties if p not in out.proved]
    if missing and not out.why_not:
        out.why_not = ("the generalised invariant does not exclude their violations for every "
                       "size" + (f" ({len(out.dropped)} clauses were not inductive for every "
                                 "size)" if out.dropped else ""))
    out.why_not_for = uncounted_reasons(system, gen.counts, needs, missing,
                                        ghosts=out.counts)
    if missing and out.model is not None and out.model.approximations:
        loosely = "; read loosely: " + "; ".join(out.approximations)
        out.why_not += loosely
        out.why_not_for = {k: v + loosely for k, v in out.why_not_for.items()}
    out.seconds = time.monotonic() - start
    return out


def _search(out: AllSizesProof, model: ParamModel, gen: Generalised, properties: list[str],
            deadline: float | None, timeout: float = QUERY_TIMEOUT_S) -> None:
    """Steps 3-4 on ``model`` from the generalised clauses ``gen``, into ``out``
    (``timeout``: seconds per solver query)."""
    out.model = model
    out.rejected = gen.rejected
    lifted = list(gen.clauses)
    candidates = lifted + property_clauses(model)
    siblings: list[QClause] = []
    if model.sizes is not None and model.sizes.values:
        symbols = [(t, model.sizes.values[n]) for n, t in model.sizes.terms.items()
                   if n in model.sizes.values]
        variants = size_variants(lifted, set(model.symbolic), symbols)
        enums = {v.name: v.type.domain() for v in model.vars if v.type.kind == "enum"}
        candidates += variants
        siblings = enum_siblings(variants, enums)
    res = check_invariant(model, candidates, properties, houdini=True, deadline=deadline,
                          timeout=timeout)
    if siblings and (res.problems or sorted(res.proved) != sorted(properties)):
        # the variants' bounds may be needed in more phases than the size needed them
        again = check_invariant(model, candidates + siblings, properties, houdini=True,
                                deadline=deadline, timeout=timeout)
        again.queries += res.queries
        res = again
    out.dropped = res.dropped
    out.queries += res.queries
    if res.problems:
        out.why_not = "; ".join(res.problems)
    elif res.proved:
        final = check_invariant(model, [c for c in res.kept], res.proved, houdini=False,
                                deadline=deadline, timeout=timeout)
        out.queries += final.queries
        if final.problems or sorted(final.proved) != sorted(res.proved):
            out.why_not = "the invariant did not re-check: " + "; ".join(final.problems)
        else:
            out.proved = list(res.proved)
            out.clauses = _dedupe(res.kept)


def _cut_to_needs(model: ParamModel, proof: AllSizesProof, deadline: float | None) -> None:
    """Keep only the clauses the proved properties need (:mod:`.needs`), when the cut
    invariant re-checks from scratch; record which property needs which."""
    start = time.monotonic()
    try:
        needs = find_needs(model, proof.clauses, proof.proved, deadline=deadline)
        if needs is None:
            return
        proof.queries += needs.queries
        if len(needs.kept) < len(proof.clauses):
            cut = check_invariant(model, needs.kept, proof.proved, houdini=False,
                                  deadline=deadline)
            proof.queries += cut.queries
            if cut.problems or sorted(cut.proved) != sorted(proof.proved):
                return
            proof.clauses = needs.kept
        proof.needs = {name: len(ks) for name, ks in needs.by_property.items()}
    finally:
        proof.seconds += time.monotonic() - start


def property_clauses(model: ParamModel) -> list[QClause]:
    """Each property's own statement as a candidate (a model invariant is often
    inductive by itself, and a size-specific invariant states it per id, which does not
    always lift), where it is a formula over the state alone."""
    known = set(model_decls(model))
    sorts = {str(s) for s in model.sorts.sort.values()}
    out = []
    for k, (name, bad) in enumerate(model.bad.items(), 1):
        try:
            check_term(z3.Not(bad), known, sorts, k)  # what a certificate may hold
        except CertificateError:
            continue  # e.g. a value the reading leaves open
        out.append(QClause(z3.Not(bad), f"property {name}"))
    return out


def _short_where(text: str) -> str:
    """``/abs/path/model.py:92: …`` as ``model.py:92: …``."""
    head, sep, rest = text.partition(": ")
    return f"{head.rsplit('/', 1)[-1]}{sep}{rest}"


def _dedupe(clauses: list[QClause]) -> list[QClause]:
    seen: set[str] = set()
    out = []
    for c in clauses:
        key = c.formula.sexpr()
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def write_all_sizes(system: System, proof: AllSizesProof, proofs_dir: Path,
                    stats: dict[str, Any]) -> Path:
    from kvspec.proofs.certificate import CERT_FORMAT, invariant_digest, library_sha256

    assert proof.model is not None
    smt = to_smtlib2(proof.model, proof.clauses)
    readable = [c.label for c in proof.clauses]
    loaded = system.loaded
    doc = {
        "format": CERT_FORMAT,
        "kind": KIND_ALL_SIZES,
        "model": {"name": system.name, "file": loaded.file, "sha256": loaded.sha256},
        "library_sha256": library_sha256(),
        "sizes": proof.model.fixed_sizes,
        "all_sizes": proof.model.all_sizes,
        "properties": list(proof.proved),
        "method": "template inference generalised to every size",
        "approximations": proof.approximations,
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "invariant": {"clauses": len(proof.clauses), "readable": readable, "smtlib2": smt,
                      "sha256": invariant_digest(smt, readable)},
        "stats": stats,
    }
    path = Path(proofs_dir) / all_sizes_name(system, proof.model.sizes.params
                                             if proof.model.sizes is not None else ())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def params_of(system: System, smtlib2: str) -> list[str]:
    """The size parameters besides requests and pages that a stored all-sizes invariant
    covers every value of: those it declares as ``size.<name>``."""
    ids = id_size_names(system)
    return [k for k in system.sizes if k not in ids
            and f"(declare-fun size.{k} () Int)" in smtlib2]


def recheck(system: System, smtlib2: str, readable: list[str] | None, properties: list[str],
            timeout: float = QUERY_TIMEOUT_S) -> tuple[InductionResult, int]:
    """Check a stored all-sizes invariant from scratch: (result, clauses); ``timeout``
    bounds each query. Raises CertificateError when the text cannot be read,
    Unsupported when the model has no parametric reading."""
    model = parametric_model(system, params=params_of(system, smtlib2))
    model = with_counts(model, ghosts_in(model, smtlib2))
    clauses = parse(smtlib2, model, readable)
    res = check_invariant(model, clauses, properties, houdini=False, timeout=timeout)
    return res, len(clauses)


# -- the engine ------------------------------------------------------------------------------

def run_all_sizes(system: System, *, timeout: float | None, save_proof: bool, proofs_dir: Path,
                  progress: ProgressFn | None = None, symmetry: bool = True,
                  max_states: int | None = None) -> EngineOutcome:
    from kvspec.engines.inference import is_small

    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    props = [p.name for p in system.properties]
    note = ""
    if is_small(system):
        base, clauses, extra = _size_specific(system, timeout, save_proof, proofs_dir, progress,
                                              symmetry, max_states)
        verdicts = {v.prop: v for v in base}
        holding = [p for p in props if verdicts[p].status in (Status.PROVED, Status.HOLDS)]
        if progress is not None:
            progress(0, 0, time.monotonic() - start, "all sizes")
        proof = every_size(system, clauses, holding, deadline=deadline, needs=_needs(extra),
                           extra=extra)
        if save_proof:
            note = _save(system, proof, proofs_dir, extra)
    else:
        # learnt at the small size; the verdicts at this run's size come from this size
        # for whatever that does not prove for every size
        proof, extra, note = prove_every_size(system, props, timeout=timeout,
                                              save_proof=save_proof, proofs_dir=proofs_dir,
                                              progress=progress, symmetry=symmetry,
                                              max_states=max_states)
        rest = [p for p in props if p not in proof.proved]
        verdicts = {}
        if rest:
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            base, _, at_size = _size_specific(_restricted(system, rest), left, save_proof,
                                              proofs_dir, progress, symmetry, max_states)
            extra["at_this_size"] = at_size
            verdicts.update({v.prop: v for v in base})
    for name in props:
        if name in proof.proved:
            verdicts[name] = all_sizes_verdict(proof, name, note)
        elif verdicts[name].status is not Status.VIOLATED and (
                proof.why_not or name in proof.why_not_for):
            v = verdicts[name]
            why = proof.why_not_for.get(name, proof.why_not)
            v.detail = "; ".join(x for x in (v.detail, f"not for all sizes: {why}") if x)
    extra["all_sizes"] = proof_summary(proof)
    stats = Stats(seconds=time.monotonic() - start)
    stats.extra["all-sizes"] = extra
    return EngineOutcome([verdicts[p] for p in props], stats, KIND_ALL_SIZES)


def prove_every_size(system: System, names: list[str], *, timeout: float | None,
                     save_proof: bool, proofs_dir: Path, progress: ProgressFn | None = None,
                     symmetry: bool = True, max_states: int | None = None
                     ) -> tuple[AllSizesProof, dict[str, Any], str]:
    """A proof for every size of the properties ``names`` of ``system`` (larger than the
    small size), learnt at the small size: its size-specific invariant (a stored
    certificate at that size that re-checks, else PDR there), generalised and checked
    for every size, and re-checked on the reading of ``system``'s own size
    (:func:`_recheck_at_size`): what it proves holds there. Returns the proof, notes,
    and where its certificate was saved (``", saved to …"``, or "")."""
    from kvspec.lang.errors import ModelError, UsageError
    from kvspec.report.text import sizes_text

    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    extra: dict[str, Any] = {}
    try:
        small = small_system(system, names)
    except (ModelError, UsageError) as exc:  # a size it does not compile at: not this run's
        return AllSizesProof(why_not=f"the model does not compile at the small size: {exc}"), \
            extra, ""
    if small is None:
        return AllSizesProof(why_not="already the small size"), extra, ""
    extra["learnt_at"] = dict(small.sizes)
    at = sizes_text(small.sizes)
    try:
        parametric_model(small)
    except Unsupported as exc:  # before the search at the small size, which is wasted then
        return AllSizesProof(why_not=str(exc)), extra, ""
    try:
        learnt, clauses, found = _size_specific(small, timeout, False, proofs_dir, progress,
                                                symmetry, max_states)
    except ModelError as exc:  # reachable at the small size only: this run's size decides
        return AllSizesProof(why_not=f"a model error at {at}: {exc}"), extra, ""
    extra.update(found)
    holding = [v.prop for v in learnt if v.status in (Status.PROVED, Status.HOLDS)]
    extra["small_verdicts"] = {v.prop: v.status.value for v in learnt}
    if progress is not None:
        progress(0, 0, time.monotonic() - start, "all sizes")
    # the clauses name the small size's slots: generalised on the system they come from
    proof = every_size(small, clauses, holding, deadline=deadline, needs=_needs(extra),
                       extra=extra)
    if proof.proved:
        _recheck_at_size(system, proof)
    for v in learnt:
        if v.status is Status.VIOLATED:
            proof.why_not_for[v.prop] = f"violated at {at}"
        elif v.prop not in holding:
            proof.why_not_for[v.prop] = f"not proved at {at}: {v.headline()}"
    return proof, extra, _save(system, proof, proofs_dir, extra) if save_proof else ""


def _save(system: System, proof: AllSizesProof, proofs_dir: Path, extra: dict[str, Any]) -> str:
    """Write ``proof``'s certificate when it proves anything; the verdicts' note on
    where (``", saved to …"``, or "")."""
    if not proof.proved:
        return ""
    path = write_all_sizes(system, proof, proofs_dir,
                           {"seconds": round(proof.seconds, 2), "queries": proof.queries})
    extra["all_sizes_certificate"] = str(path)
    return f", saved to {path}"


def _recheck_at_size(system: System, proof: AllSizesProof) -> None:
    """Keep of ``proof`` (found on the small size's reading) what its invariant proves on
    the reading of ``system``'s own size, re-checked there from scratch as its stored
    certificate would be: the small size's reading omits what the compiler decided at
    that size alone (a range check a count of ids cannot fail with four pages), and a
    PROVED at this size must hold at this size."""
    from kvspec.report.text import sizes_text

    start = time.monotonic()
    smt = to_smtlib2(proof.model, proof.clauses)
    try:
        res, _ = recheck(system, smt, [c.label for c in proof.clauses], proof.proved)
        kept, why = [p for p in proof.proved if p in res.proved], "; ".join(res.problems)
    except (CertificateError, Unsupported) as exc:
        kept, why = [], str(exc)
    at = sizes_text(system.sizes)
    for name in proof.proved:
        if name not in kept:
            proof.why_not_for[name] = f"the invariant does not re-check at {at}: {why}"
    if not kept:
        proof.why_not = f"the invariant does not re-check at {at}: {why}"
    proof.proved = kept
    proof.needs = {k: v for k, v in proof.needs.items() if k in kept}
    proof.seconds += time.monotonic() - start


def small_system(system: System, names: list[str] | None = None) -> System | None:
    """``system`` at the small size invariants are learnt at
    (:func:`kvspec.engines.inference.small_sizes`: at most two requests and four pages,
    every other size as it is), checking the properties ``names`` (None: all of
    ``system``'s), or None when ``system`` is already that small."""
    from kvspec.engines.inference import is_small, small_sizes
    from kvspec.lang.system import compiled_again

    if is_small(system):
        return None
    return compiled_again(system, small_sizes(system), names)


def _restricted(system: System, names: list[str]) -> System:
    """``system`` checking only the properties ``names``."""
    from kvspec.lang.system import compiled_again

    if names == [p.name for p in system.properties]:
        return system
    return compiled_again(system, properties=names)


def every_size(system: System, clauses: list[tuple[z3.BoolRef, str]], holding: list[str], *,
               deadline: float | None, needs: dict[str, list[str]] | None = None,
               extra: dict[str, Any] | None = None) -> AllSizesProof:
    """Steps 2-4 for the properties ``holding`` from a size-specific invariant's
    ``clauses`` (of ``system`` at any size with the same values of the sizes that are
    not ids): the reading with every value of the other size parameters first, then
    this run's values of them; the invariant cut to what the proved properties need."""
    proof = AllSizesProof(why_not="no size-specific invariant to generalise")
    if clauses and holding:
        params = symbolic_params(system)
        wider = None
        if params:
            # every value of the other size parameters first: when that proves every
            # holding property, the reading at this run's values is not needed
            wider = prove_all_sizes(system, clauses, holding, deadline=deadline,
                                    params=params, needs=needs)
            if extra is not None:
                extra["every_value_of"] = {"sizes": params, "proved": wider.proved,
                                           "why_not": wider.why_not}
        if wider is not None and sorted(wider.proved) == sorted(holding):
            proof = wider
        else:
            # this run's values of them: fewer behaviours, maybe more proved
            proof = prove_all_sizes(system, clauses, holding, deadline=deadline, needs=needs)
            if wider is not None and wider.proved and set(wider.proved) >= set(proof.proved):
                proof = wider
    if proof.proved and proof.model is not None:
        _cut_to_needs(proof.model, proof, deadline)
    return proof


def all_sizes_verdict(proof: AllSizesProof, name: str, note: str = "") -> Verdict:
    """The PROVED (all sizes) verdict of ``name``, which ``proof`` proves; ``note``
    ends its detail (where the certificate was saved)."""
    loose = ""
    if proof.model is not None and proof.model.sizes is not None and proof.model.sizes.params:
        loose = f"; every {', '.join(sorted(proof.model.sizes.params))}"
    if proof.counts:
        loose += f"; counting pages with {', '.join(proof.counts)}"
    if proof.approximations:
        lines = sorted({a.split(": ", 1)[0] for a in proof.approximations},
                       key=lambda w: (w.rsplit(":", 1)[0], int(w.rsplit(":", 1)[-1] or 0)))
        loose += f"; over-approximating {', '.join(lines)}"
    n = len(proof.clauses)
    need = (f" (this property needs {proof.needs[name]} of them)"
            if name in proof.needs and n > 1 else "")
    return Verdict(name, Status.PROVED, ALL_SIZES,
                   f"inductive invariant, {n} clause{'' if n == 1 else 's'}{need}{loose}{note}")


def proof_summary(proof: AllSizesProof) -> dict[str, Any]:
    """What the JSON result says about an all-sizes proof."""
    return {"proved": proof.proved, "clauses": len(proof.clauses), "needs": proof.needs,
            "seconds": round(proof.seconds, 3), "queries": proof.queries,
            "not_generalised": proof.rejected, "not_inductive": proof.dropped,
            "approximations": proof.approximations, "why_not": proof.why_not,
            "why_not_for": proof.why_not_for, "ghost_counts": proof.counts}


def _needs(extra: dict[str, Any]) -> dict[str, list[str]] | None:
    """The clauses (labels) each property needed in the size-specific proof PDR just
    found; None when it came from a stored certificate (which does not record them)."""
    pdr = extra.get("pdr")
    if not isinstance(pdr, dict):
        return None
    found = pdr.get("needs", pdr.get("inference", {}).get("needs"))
    return found if isinstance(found, dict) else None


def _size_specific(system: System, timeout: float | None, save_proof: bool, proofs_dir: Path,
                   progress: ProgressFn | None, symmetry: bool, max_states: int | None
                   ) -> tuple[list[Verdict], list[tuple[z3.BoolRef, str]], dict[str, Any]]:
    """Size-specific verdicts and the clauses of their invariant (step 1)."""
    from kvspec.proofs.certificate import check_certificate, size_specific_path
    from kvspec.proofs.clauses import CertificateError, parse_invariant
    from kvspec.proofs.certificate import load_certificate

    extra: dict[str, Any] = {}
    stored = size_specific_path(system, proofs_dir)
    if stored.is_file():
        check = check_certificate(stored, system)
        if check.ok and set(check.properties) == {p.name for p in system.properties}:
            doc = load_certificate(stored)
            clauses = parse_invariant(doc.smtlib2, system.state_vars(), doc.readable)
            extra["size_specific"] = f"certificate {stored} re-checked"
            return ([Verdict(n, Status.PROVED, "certificate re-checked") for n in check.properties],
                    [(c.formula, c.label) for c in clauses], extra)
    from kvspec.engines.pdr import run_pdr

    with tempfile.TemporaryDirectory(prefix="kvspec-proofs-") as tmp:
        where = proofs_dir if save_proof else Path(tmp)
        out = run_pdr(system, timeout=timeout, save_proof=True, proofs_dir=where,
                      progress=progress, symmetry=symmetry, max_states=max_states)
        extra["pdr"] = out.stats.extra.get("pdr", {})
        clauses: list[tuple[z3.BoolRef, str]] = []
        path = size_specific_path(system, where)
        if path.is_file():
            try:
                doc = load_certificate(path)
                parsed = parse_invariant(doc.smtlib2, system.state_vars(), doc.readable)
                clauses = [(c.formula, c.label) for c in parsed]
            except CertificateError:
                clauses = []
        verdicts = out.verdicts
        if not save_proof:
            for v in verdicts:
                v.detail = v.detail.replace(f", saved to {path}", "")
    return verdicts, clauses, extra


def is_all_sizes(path: Any) -> bool:
    """Whether ``path`` is a file holding an all-sizes certificate."""
    try:
        doc = json.loads(Path(str(path)).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("kind") == KIND_ALL_SIZES
