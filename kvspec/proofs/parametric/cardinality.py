"""Counts of pages as ghost state of the all-sizes reading.

A size-specific invariant may need a count over every page, ``for all r: phase[r] !=
TRANSFER or count(inflight == r) + count(page_written == r) == sent[r]``. Quantified
clauses over the id sorts cannot state a cardinality, so each count term ``#{p :
φ(p, r)}`` (φ a quantifier-free condition on page ``p``'s state and request ``r``)
becomes an integer function ``count{p: φ}`` of the request — an extra state symbol of
the parametric reading whose value is, by definition, the number of real pages
satisfying φ in the current state. The lifted clause reads
``count{p: (= (inflight p) r)}(r) + count{p: (= (page_written p) r)}(r) == sent(r)``.

The reading constrains these symbols only by facts that hold of the cardinalities of
finite sets of pages in every state and across every step, whatever φ is:

* range: ``0 <= count(r) <= size.pages`` (``size.pages`` the number of pages);
* emptiness: ``count(r) >= 1`` exactly when some page satisfies φ;
* subset: where every page satisfying φ satisfies ψ and ``count_φ(r) >= count_ψ(r)``,
  every page satisfying ψ satisfies φ (the sets are equal);
* across a step (φ' the condition on the post-state): where φ' and φ agree on every
  page, ``count'(r) == count(r)``; where they agree on every page but the action's
  page parameter ``p0``, ``count'(r) == count(r) - [φ(p0, r)] + [φ'(p0, r)]``; where
  they agree on every page but two distinct page parameters ``p0`` and ``p1`` (a page
  moved), ``count'(r) == count(r) + Σ_{p ∈ {p0, p1}} ([φ'(p, r)] - [φ(p, r)])``;
* initially: 0 where no page satisfies φ in the initial state (``size.pages`` where
  every page does; a count whose initial value is neither is not read);
* a count the model itself compares (``(s.owner == r).count() == s.need[r]``), whose
  mask is φ on the state it is read in: the comparison's value is the same
  comparison of the ghost (``count'(r) == need(r)``).

Each is true of every real (finite) state, so a query that is unsat with them is unsat
without the ghosts being anything but the real counts: a proof stays a proof of the
model (:mod:`tests.test_all_sizes_counts` checks every fact on random finite
instances). The facts are part of the reading, never of a certificate: a certificate
only declares which counts it reads (the condition is in the symbol's name,
``|count{p: (= (inflight p) r)}|``), and the re-check derives the facts from that.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import VarInfo
from kvspec.lang.types import PAGE, REQUEST, IntType
from kvspec.proofs.clauses import CertificateError
from kvspec.proofs.parametric.encode import Step
from kvspec.proofs.parametric.values import View, var_dims

#: the owner tag of a ghost count's VarInfo
GHOST = "count"
#: the names of the page and request in a count's condition (and in its symbol's name)
PAGE_VAR, REQUEST_VAR = "p", "r"
#: seconds for each check made while building the reading (what fails is left out)
BUILD_TIMEOUT_S = 5.0

_NAME = re.compile(r"count\{p: (.*)\}")


class NotCountable(Exception):
    """A count the reading does not take as a ghost (the reason is the message)."""


@dataclass
class GhostCount:
    """``#{p : phi(p, r)}`` over the real pages; ``phi`` is over the pre-state symbols
    with the constants ``p`` (a page) and, when ``per_request``, ``r`` free."""

    name: str
    phi: z3.BoolRef
    page: z3.ExprRef
    request: z3.ExprRef | None
    symbol: Any  # FuncDeclRef (per request) or an Int constant
    initial: int | None = None  # 0, or None for size.pages (every page, initially)

    def at(self, r: z3.ExprRef | None) -> z3.ArithRef:
        return self.symbol(r) if self.request is not None else self.symbol


class CountReadings:
    """The ghost counts a generalisation introduces, one per condition."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.ghosts: dict[str, GhostCount] = {}

    def term(self, phi: z3.BoolRef, page: z3.ExprRef, request: z3.ExprRef | None
             ) -> z3.ArithRef:
        """``#{page : phi}`` as a ghost term applied to ``request`` (NotCountable where
        it cannot be one)."""
        sorts = self.model.sorts
        p = z3.Const(PAGE_VAR, sorts.sort[PAGE])
        subst = [(page, p)]
        r = None
        if request is not None:
            r = z3.Const(REQUEST_VAR, sorts.sort[REQUEST])
            subst.append((request, r))
        canon = z3.substitute(phi, *subst)
        text = " ".join(canon.sexpr().split())
        if "|" in text or "\\" in text:
            raise NotCountable("a count whose condition has no plain SMT-LIB2 name")
        name = f"count{{p: {text}}}"
        ghost = self.ghosts.get(name)
        if ghost is None:
            ghost = make_ghost(self.model, name, canon, r)
            self.ghosts[name] = ghost
        return ghost.at(request)


def make_ghost(model: Any, name: str, phi: z3.BoolRef, request: z3.ExprRef | None
               ) -> GhostCount:
    sorts = model.sorts
    p = z3.Const(PAGE_VAR, sorts.sort[PAGE])
    _check_condition(model, phi, p, request)
    symbol = z3.Function(name, sorts.sort[REQUEST], z3.IntSort()) if request is not None \
        else z3.Int(name)
    ghost = GhostCount(name, phi, p, request, symbol)
    ghost.initial = _initial_value(model, ghost)
    return ghost


def _check_condition(model: Any, phi: z3.BoolRef, p: z3.ExprRef, r: z3.ExprRef | None
                     ) -> None:
    """A condition over the model's state symbols, ``p`` and ``r`` only, without
    quantifiers."""
    from kvspec.proofs.parametric.smtlib import model_decls

    known = set(model_decls(model))
    if PAGE_VAR in known or REQUEST_VAR in known:
        raise NotCountable(f"a count in a model with a symbol named {PAGE_VAR!r} or "
                           f"{REQUEST_VAR!r}")
    known |= {PAGE_VAR} | ({REQUEST_VAR} if r is not None else set())
    stack = [phi]
    while stack:
        t = stack.pop()
        if z3.is_quantifier(t):
            raise NotCountable("a count whose condition has a quantifier")
        if not z3.is_app(t):
            raise NotCountable(f"a count whose condition holds {t}")
        d = t.decl()
        if d.kind() == z3.Z3_OP_UNINTERPRETED and d.name() not in known:
            raise NotCountable(f"a count whose condition reads {d.name()!r}")
        if d.kind() == z3.Z3_OP_UNINTERPRETED and d.name() == PAGE_VAR \
                and t.sort() != p.sort():
            raise NotCountable("a count whose condition names p as something else")
        stack.extend(t.children())


def ghost_from_name(model: Any, name: str, per_request: bool) -> GhostCount:
    """The ghost count a certificate declares as ``name`` (CertificateError when the
    name is not a count condition over this model's state)."""
    m = _NAME.fullmatch(name)
    if m is None:
        raise CertificateError(f"{name!r} is not a count of pages")
    from kvspec.proofs.parametric.smtlib import model_decls

    sorts = model.sorts
    decls = dict(model_decls(model))
    decls[PAGE_VAR] = z3.Const(PAGE_VAR, sorts.sort[PAGE])
    r = z3.Const(REQUEST_VAR, sorts.sort[REQUEST]) if per_request else None
    if r is not None:
        decls[REQUEST_VAR] = r
    try:
        parsed = z3.parse_smt2_string(f"(assert {m.group(1)})",
                                      sorts={str(s): s for s in sorts.sort.values()},
                                      decls=decls)
    except z3.Z3Exception as exc:
        raise CertificateError(f"the count {name!r} does not parse: {exc}") from None
    if len(parsed) != 1 or not z3.is_bool(parsed[0]):
        raise CertificateError(f"the count {name!r} is not one condition")
    try:
        return make_ghost(model, name, parsed[0], r)
    except NotCountable as exc:
        raise CertificateError(f"the count {name!r}: {exc}") from None


_DECL = re.compile(r"\(declare-fun \|(count\{p: [^|]*\})\| \(([A-Za-z]*)\) Int\)")


def ghosts_in(model: Any, smtlib2: str) -> list[GhostCount]:
    """The ghost counts an all-sizes invariant text declares."""
    out = []
    seen: set[str] = set()
    for m in _DECL.finditer(smtlib2):
        if m.group(2) not in ("", str(model.sorts.sort[REQUEST])):
            raise CertificateError(f"the count {m.group(1)!r} is not per request")
        if m.group(1) in seen:
            raise CertificateError(f"the count {m.group(1)!r} is declared twice")
        seen.add(m.group(1))
        out.append(ghost_from_name(model, m.group(1), bool(m.group(2))))
    return out


# -- views ---------------------------------------------------------------------------------

def on_view(model: Any, view: View, f: z3.ExprRef) -> z3.ExprRef:
    """``f`` (over the pre-state symbols) read on ``view`` (one simultaneous
    substitution of every variable the view changes)."""
    pre = model.pre_view()
    pairs: list[tuple[z3.FuncDeclRef, z3.ExprRef]] = []
    for v in model.vars:
        if v.owner == GHOST:
            continue
        new = view[v.name]
        if new is pre[v.name]:
            continue
        sym = model.symbols[v.name]
        if v.dim == SCALAR:
            pairs.append((sym.decl(), new))
        else:
            dims = var_dims(v)
            pairs.append((sym, new(*[z3.Var(i, model.sorts.sort[d])
                                     for i, d in enumerate(dims)])))
    return z3.substitute_funs(f, *pairs) if pairs else f


def _valid(model: Any, f: z3.BoolRef, assumptions: list[z3.BoolRef] = ()) -> bool:  # type: ignore[assignment]
    s = z3.Solver()
    s.set("timeout", int(BUILD_TIMEOUT_S * 1000))
    s.add(*model.axioms)
    s.add(*assumptions)
    s.add(z3.Not(f))
    return s.check() == z3.unsat


def _initial_value(model: Any, g: GhostCount) -> int | None:
    """0 when no page satisfies the condition initially, None (``size.pages``) when
    every page does; NotCountable otherwise."""
    sorts = model.sorts
    y = sorts.fresh(PAGE, "cy")
    r = sorts.fresh(REQUEST, "cr")
    phi = on_view(model, model.init, _instance(g, y, r))
    pre = z3.And(sorts.real(y), sorts.real(r))
    if _valid(model, z3.Implies(pre, z3.Not(phi))):
        return 0
    if _valid(model, z3.Implies(pre, phi)):
        return None
    raise NotCountable(f"a count ({g.name}) that is neither none nor every page initially")


def _instance(g: GhostCount, y: z3.ExprRef, r: z3.ExprRef | None) -> z3.BoolRef:
    pairs = [(g.page, y)]
    if g.request is not None and r is not None:
        pairs.append((g.request, r))
    return z3.substitute(g.phi, *pairs)


# -- the facts ---------------------------------------------------------------------------

@dataclass
class _State:
    """One state's reading of the ghosts: condition and count of each."""

    phi: Callable[[GhostCount, z3.ExprRef, z3.ExprRef | None], z3.BoolRef]
    count: Callable[[GhostCount, z3.ExprRef | None], z3.ArithRef]


def state_facts(model: Any, ghosts: list[GhostCount], st: _State, pages: z3.ArithRef,
                subsets: bool = True) -> list[z3.BoolRef]:
    """What holds of the counts of one state: range, emptiness, and (``subsets``) the
    subset facts between counts of the same kind."""
    sorts = model.sorts
    out: list[z3.BoolRef] = []
    for g in ghosts:
        r = sorts.fresh(REQUEST, "cr") if g.request is not None else None
        y = sorts.fresh(PAGE, "cy")
        c = st.count(g, r)
        facts = [c >= 0, c <= pages,
                 z3.ForAll([y], z3.Implies(z3.And(sorts.real(y), st.phi(g, y, r)), c >= 1)),
                 z3.Implies(c >= 1, z3.Exists([y], z3.And(sorts.real(y), st.phi(g, y, r))))]
        out += [_for_requests(sorts, r, f) for f in facts]
    for g in ghosts if subsets else []:
        for h in ghosts:
            if g is h or (g.request is None) != (h.request is None):
                continue
            r = sorts.fresh(REQUEST, "cr") if g.request is not None else None
            y, y1 = sorts.fresh(PAGE, "cy"), sorts.fresh(PAGE, "cy")
            outside = z3.Exists([y], z3.And(sorts.real(y), st.phi(g, y, r),
                                            z3.Not(st.phi(h, y, r))))
            cg, ch = st.count(g, r), st.count(h, r)
            # φ ⊆ ψ and as many pages satisfy φ as ψ: every page satisfying ψ satisfies φ
            out.append(_for_requests(sorts, r, z3.ForAll([y1], z3.Or(
                outside, cg < ch, z3.Not(sorts.real(y1)), z3.Not(st.phi(h, y1, r)),
                st.phi(g, y1, r)))))
    return out


def step_facts(model: Any, g: GhostCount, before: _State, after: _State, step: Step
               ) -> list[z3.BoolRef]:
    """What holds of one count across a step: unchanged where the condition is, one up
    or down where it changes at the action's page only. Where the step's guard alone
    shows the condition unchanged on every page (or on every page but ``p0``), the fact
    is stated without the quantified premise."""
    sorts = model.sorts
    r = sorts.fresh(REQUEST, "cr") if g.request is not None else None
    y = sorts.fresh(PAGE, "cy")
    c, c2 = before.count(g, r), after.count(g, r)
    differs = z3.Xor(before.phi(g, y, r), after.phi(g, y, r))
    guard = [step.enabled] + step.param_ok
    real = [sorts.real(y)] + ([sorts.real(r)] if r is not None else [])
    if _valid(model, z3.Implies(z3.And(*real), z3.Not(differs)), guard):
        return [_for_requests(sorts, r, c2 == c)]
    out = [_for_requests(sorts, r, z3.Or(z3.Exists([y], z3.And(sorts.real(y), differs)),
                                         c2 == c))]
    pages = [p for p in step.params if p.sort() == sorts.sort[PAGE]]
    # changed at the action's page only (p0), or at two of its pages only (a page
    # moved from p0 to p1): the count moves by what changed there, page by page
    at = [[p0] for p0 in pages] + [[p0, p1] for i, p0 in enumerate(pages)
                                   for p1 in pages[i + 1:]]
    for where in at:
        delta = z3.Sum([z3.If(after.phi(g, p, r), 1, 0) - z3.If(before.phi(g, p, r), 1, 0)
                        for p in where])
        exact = c2 == c + delta
        same = z3.Or(*[where[0] == p for p in where[1:]]) if len(where) > 1 else z3.BoolVal(False)
        others = [y != p for p in where]
        if _valid(model, z3.Implies(z3.And(*real, *others), z3.Not(differs)), guard):
            out.append(_for_requests(sorts, r, z3.Or(same, exact)))
            continue
        out.append(_for_requests(sorts, r, z3.Or(
            same, z3.Exists([y], z3.And(sorts.real(y), *others, differs)), exact)))
    return out


def _for_requests(sorts: Any, r: z3.ExprRef | None, f: z3.BoolRef) -> z3.BoolRef:
    if r is None:
        return f
    return z3.ForAll([r], z3.Implies(sorts.real(r), f))


# -- the reading with ghosts ------------------------------------------------------------

def with_counts(model: Any, ghosts: list[GhostCount]) -> Any:
    """``model`` with ``ghosts`` as extra state: their symbols, initial values, values
    after each step, and the facts of the module docstring."""
    if not ghosts:
        return model
    from kvspec.proofs.parametric.model import ParamModel

    assert isinstance(model, ParamModel) and model.sizes is not None
    sizes = dataclasses.replace(model.sizes, terms=dict(model.sizes.terms),
                                values=dict(model.sizes.values),
                                functions=dict(model.sizes.functions))
    pages = sizes.of_space(PAGE)
    vars_ = list(model.vars)
    symbols = dict(model.symbols)
    init = dict(model.init)
    symbolic = dict(model.symbolic)
    for g in ghosts:
        vars_.append(VarInfo(g.name, REQUEST if g.request is not None else SCALAR,
                             IntType(0, 0), -1, 0, GHOST))
        symbols[g.name] = g.symbol
        symbolic[g.name] = (z3.IntVal(0), pages)
        value = z3.IntVal(0) if g.initial == 0 else pages
        init[g.name] = value if g.request is None else (lambda *a, v=value: v)
    out = dataclasses.replace(model, vars=vars_, symbols=symbols, init=init,
                              symbolic=symbolic, steps=[], axioms=list(model.axioms),
                              sizes=sizes)
    pre = out.pre_view()
    before = _State(lambda g, y, r: _instance(g, y, r), lambda g, r: g.at(r))
    out.axioms.append(pages >= 0)
    pre_facts = state_facts(out, ghosts, before, pages)
    for k, (name, step) in enumerate(model.steps):
        post = dict(step.post)
        for g in ghosts:
            post[g.name] = pre[g.name]
        changed = [g for g in ghosts if not on_view(out, step.post, g.phi).eq(g.phi)]
        fresh = {g.name: _fresh_count(g, f"'{name}.{k}") for g in changed}
        for g in changed:
            f = fresh[g.name]
            post[g.name] = f if g.request is None else (lambda *a, f=f: f(*a))
        after = _State(lambda g, y, r, v=step.post: on_view(out, v, _instance(g, y, r)),
                       lambda g, r, fr=fresh: (fr[g.name] if g.request is None
                                               else fr[g.name](r)) if g.name in fr
                       else g.at(r))
        facts: list[z3.BoolRef] = list(pre_facts)
        if changed:
            facts += state_facts(out, changed, after, pages, subsets=False)
            for g in changed:
                facts += step_facts(out, g, before, after, step)
        facts += _links(out, ghosts, step, after)
        enabled = z3.And(step.enabled, *facts) if facts else step.enabled
        out.steps.append((name, dataclasses.replace(step, enabled=enabled, post=post)))
    return out


def _fresh_count(g: GhostCount, suffix: str) -> Any:
    if g.request is None:
        return z3.Int(g.name + suffix)
    return z3.Function(g.name + suffix, g.request.sort(), z3.IntSort())


def _links(model: Any, ghosts: list[GhostCount], step: Step, after: _State
           ) -> list[z3.BoolRef]:
    """For each count the action compares whose mask is a ghost's condition on the
    post-state (or on the pre-state), the comparison read on the ghost too."""
    sorts = model.sorts
    requests = [p for p in step.params if p.sort() == sorts.sort[REQUEST]]
    out: list[z3.BoolRef] = []
    for mask, op, b, result in step.counts:
        if mask.dim != PAGE:
            continue
        y = sorts.fresh(PAGE, "cy")
        m = mask.at(y)
        done = False
        for g in ghosts:
            for r in (requests if g.request is not None else [None]):
                for state, c in ((after, after.count(g, r)), (None, g.at(r))):
                    phi = state.phi(g, y, r) if state is not None else _instance(g, y, r)
                    if _valid(model, z3.Implies(sorts.real(y), m == phi)):
                        out.append(result == _compare(op, c, b))
                        done = True
                        break
                if done:
                    break
            if done:
                break
    return out


def _compare(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
            ">=": a >= b}[op]
