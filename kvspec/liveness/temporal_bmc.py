"""The model's temporal properties in the bounded symbolic lasso search
(:mod:`kvspec.liveness.symbolic`): their predicates as Z3 terms per frame, and the
conditions a lasso of ``k`` steps must meet to violate one.

Each predicate (per id of a quantified property) is run by the symbolic
interpretation of the IR (:class:`kvspec.lang.z3gen.SymExec`) on the integer state
variables, handed to the transition system with its bad-state terms so that the
bit-vector encoding is wide enough for it, and renamed to every frame. With
``P_t``/``Q_t`` the predicates at frame ``t``, a loop from step ``l`` back after
step ``k`` (``in_loop[t]`` iff ``l <= t``) violates

* ``eventually p``: ``¬P_t`` for every ``t < k`` (frame ``k`` is frame ``l``);
* ``always_eventually p``: ``¬P_t`` for every loop state;
* ``leads_to(p, q)``: ``¬Q_t`` for every loop state, and some ``j < k`` with
  ``P_j`` and ``¬Q_t`` for ``j <= t < k``;

and a run that stops at frame ``k`` (nothing enabled) violates them with the same
conditions over frames ``0..k``, its last state standing for the loop.
"""
from __future__ import annotations

from typing import Any

import z3

from kvspec.engines.transition import Renaming, TransitionSystem, mk_and, mk_or
from kvspec.lang import ir
from kvspec.lang.declare import ALWAYS_EVENTUALLY, EVENTUALLY
from kvspec.lang.system import ActionInstance, Property, System
from kvspec.lang.z3gen import TRUE
from kvspec.liveness.lasso import replay_schedule
from kvspec.liveness.temporal import Predicate, TemporalProperty
from kvspec.trace import InternalError

_ERRORS = "\0temporal:errors"


def _evaluate(system: System, fn: ir.Function, current: list[z3.ExprRef], i: int | None
              ) -> tuple[z3.BoolRef, list[tuple[z3.BoolRef, str]]]:
    """A predicate's value on ``current`` (for id ``i``) and its model-error conditions
    (as :meth:`SymExec.evaluate`, with the id argument)."""
    k = system.kernel
    k.slots = list(current)
    k.enabled = TRUE
    k.errors = []
    k.frames = []
    args: list[Any] = [] if i is None else [z3.IntVal(i)]
    value = k.call(fn, args, TRUE)
    return value, list(k.errors)


class PredicateTerms:
    """Every predicate of the selected temporal properties, per id, as Z3 terms."""

    def __init__(self, system: System, temporal: list[TemporalProperty],
                 int_cur: list[z3.ExprRef]) -> None:
        self.system = system
        self.temporal = temporal
        self.raw: dict[str, z3.BoolRef] = {}
        errors: list[z3.BoolRef] = []
        for tp in temporal:
            for pred in (tp.p, tp.q):
                if pred is None:
                    continue
                for i in tp.ids(system):
                    key = self._key(pred, i)
                    if key in self.raw:
                        continue
                    value, errs = _evaluate(system, pred.ir, int_cur, i)
                    self.raw[key] = z3.simplify(value)
                    errors += [c for c, _ in errs]
        if errors:
            err = z3.simplify(mk_or(errors))
            if not z3.is_false(err):
                self.raw[_ERRORS] = err
        self.ts: TransitionSystem | None = None
        self._at: dict[tuple[str, int], z3.BoolRef] = {}

    @staticmethod
    def _key(pred: Predicate, i: int | None) -> str:
        return f"\0temporal:{id(pred.ir)}:{'' if pred.dim is None else i}"

    def attach(self, ts: TransitionSystem) -> None:
        self.ts = ts

    def _term(self, key: str, t: int) -> z3.BoolRef:
        got = self._at.get((key, t))
        if got is None:
            assert self.ts is not None
            base = self.ts.bad(Property(key, "invariant", ""))
            got = Renaming(list(zip(self.ts.cur, self.ts.frame(t))))(base)
            self._at[(key, t)] = got
        return got

    def value(self, tp: TemporalProperty, pred: Predicate, i: int | None, t: int) -> z3.BoolRef:
        return self._term(self._key(pred, i if pred.dim is not None else None), t)

    def error(self, t: int) -> z3.BoolRef:
        """Some predicate raises a model error at frame ``t``."""
        if _ERRORS not in self.raw:
            return z3.BoolVal(False)
        return self._term(_ERRORS, t)

    def raise_error(self, schedule: list[ActionInstance]) -> None:
        """Re-execute ``schedule`` and evaluate every predicate on its last state: the
        model error the solver found there is raised as the concrete code raises it."""
        state = replay_schedule(self.system, schedule).states[-1]
        for tp in self.temporal:
            for pred in (tp.p, tp.q):
                if pred is None:
                    continue
                for i in tp.ids(self.system):
                    tp.at(pred, state, i)  # raises the ModelError
        raise InternalError("bmc-lasso: the solver reports a model error in a temporal "
                            "predicate, but none occurs when the path is re-executed")

    # -- the violation conditions ------------------------------------------------------------
    def loop_goal(self, tp: TemporalProperty, k: int, in_loop: list[z3.BoolRef]) -> z3.BoolRef:
        """Some obligation of ``tp`` is violated by the loop (module docstring)."""
        out: list[z3.BoolRef] = []
        for i in tp.ids(self.system):
            P = [self.value(tp, tp.p, i, t) for t in range(k)]
            if tp.kind == EVENTUALLY:
                out.append(mk_and([z3.Not(x) for x in P]))
                continue
            if tp.kind == ALWAYS_EVENTUALLY:
                out.append(mk_and([z3.Implies(in_loop[t], z3.Not(P[t])) for t in range(k)]))
                continue
            assert tp.q is not None
            Q = [self.value(tp, tp.q, i, t) for t in range(k)]
            on_loop = mk_and([z3.Implies(in_loop[t], z3.Not(Q[t])) for t in range(k)])
            seen = [z3.And(P[j], mk_and([z3.Not(Q[t]) for t in range(j, k)]))
                    for j in range(k)]
            out.append(z3.And(on_loop, mk_or(seen)))
        return mk_or(out)

    def stop_goal(self, tp: TemporalProperty, k: int) -> z3.BoolRef:
        """Some obligation of ``tp`` is violated by a run that stops at frame ``k``."""
        out: list[z3.BoolRef] = []
        for i in tp.ids(self.system):
            P = [self.value(tp, tp.p, i, t) for t in range(k + 1)]
            if tp.kind == EVENTUALLY:
                out.append(mk_and([z3.Not(x) for x in P]))
            elif tp.kind == ALWAYS_EVENTUALLY:
                out.append(z3.Not(P[k]))
            else:
                assert tp.q is not None
                Q = [self.value(tp, tp.q, i, t) for t in range(k + 1)]
                out.append(mk_or([z3.And(P[j], mk_and([z3.Not(Q[t]) for t in range(j, k + 1)]))
                                  for j in range(k + 1)]))
        return mk_or(out)

