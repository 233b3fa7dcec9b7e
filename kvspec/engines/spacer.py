"""Spacer (Z3's PDR over constrained Horn clauses) as PDR's fallback prover: one Horn
rule per action instance, the inferred clauses as a strengthening, and the inductive
invariant it proves read back for the certificate (checked like any other)."""
from __future__ import annotations

import time

import z3

from kvspec.engines.transition import TransitionSystem, mk_and


def spacer(ts: TransitionSystem, strengthening: list[z3.BoolRef], bad: z3.BoolRef,
           timeout_ms: int | None) -> tuple[z3.CheckSatResult, z3.BoolRef | None]:
    """Is ``bad`` reachable? On unsat also an inductive invariant over ``ts.cur``
    (``ts`` must use the integer encoding and no symmetry breaking). One Horn rule
    per action instance: ``Inv(update(s)) ← Inv(s) ∧ H(s) ∧ enabled(s) ∧ ¬error(s)``."""
    fp = z3.Fixedpoint()
    fp.set(engine="spacer")
    if timeout_ms is not None:
        fp.set(timeout=max(1, timeout_ms))
    sorts = [v.sort() for v in ts.cur] + [z3.BoolSort()]
    inv = z3.Function("Inv", *sorts)
    fp.register_relation(inv)
    fp.declare_var(*ts.cur)
    fp.rule(inv(*ts.cur), [ts.init(ts.cur)])
    helper = mk_and(strengthening)
    domain = ts.domain(ts.cur)
    for step in ts.steps:
        head = [step.updates.get(i, v) for i, v in enumerate(ts.cur)]
        fp.rule(inv(*head), [inv(*ts.cur), helper, *domain, step.enabled, z3.Not(step.error)])
    started = time.monotonic()
    try:
        res = fp.query(z3.And(inv(*ts.cur), helper, bad))
    except z3.Z3Exception as exc:  # canceled: by the timeout, or by Ctrl-C
        if _canceled_early(exc, time.monotonic() - started, timeout_ms):
            raise KeyboardInterrupt from None
        return z3.unknown, None
    if res == z3.unknown and "interrupted" in fp.reason_unknown().lower():
        raise KeyboardInterrupt
    if res != z3.unsat:
        return res, None
    cover = fp.get_cover_delta(-1, inv)
    if z3.is_true(cover):
        # no lemma reached the fixpoint level (Spacer solved the query without
        # propagating any, as on a small finite system): its answer, the
        # interpretation of Inv, is the invariant (checked like any other)
        answer = _answer_body(fp.get_answer(), inv)
        if answer is not None:
            cover = answer
    return res, z3.simplify(z3.substitute_vars(cover, *ts.cur))


def _answer_body(answer: z3.ExprRef, inv: z3.FuncDeclRef) -> z3.ExprRef | None:
    """``body`` of Spacer's answer ``ForAll(xs, Inv(xs) == body)``, over ``Var(i)`` for
    ``Inv``'s argument ``i`` (as :meth:`z3.Fixedpoint.get_cover_delta` gives it); None
    for an answer of another shape."""
    if not (z3.is_quantifier(answer) and answer.is_forall()):
        return None
    eq = answer.body()
    if not (z3.is_eq(eq) and z3.is_app(eq.arg(0)) and eq.arg(0).decl().eq(inv)):
        return None
    head = eq.arg(0)
    n = answer.num_vars()
    # the quantifier's Var(k) is its (n - 1 - k)-th variable; Inv's argument i is one
    # of them: renumber so that argument i is Var(i)
    to: list[z3.ExprRef | None] = [None] * n
    for i in range(head.num_args()):
        a = head.arg(i)
        if not z3.is_var(a) or to[z3.get_var_index(a)] is not None:
            return None
        to[z3.get_var_index(a)] = z3.Var(i, a.sort())
    if any(t is None for t in to):
        return None
    return z3.substitute_vars(eq.arg(1), *[t for t in to if t is not None])


def _canceled_early(exc: z3.Z3Exception, seconds: float, timeout_ms: int | None) -> bool:
    """A query canceled well before its timeout was stopped by Ctrl-C (Z3 reports both
    the same way)."""
    if "cancel" not in str(exc).lower():
        return False
    return timeout_ms is None or seconds * 1000 < 0.8 * timeout_ms - 20
