"""The solver queries of the orbit check (:mod:`kvspec.proofs.orbits`).

Each query asks whether the invariant ``I`` (every instance of the orbit
representatives, every slot's domain) allows a goal: a state violating a property,
an action raising a model error, or an action breaking one of the clause instances
it writes. Its premise is first weakened to the instances local to the query's
vocabulary (sound: a premise that refutes the goal refutes it with all of ``I``);
only when that does not refute it does the whole invariant decide. Solvers are
kept and each query asked in a scope of its own: the whole invariant is asserted
once for the check, each local premise once for every query sharing it.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import z3

from kvspec.proofs.smt_check import Encoding, assert_all, mk_and

if TYPE_CHECKING:
    from kvspec.proofs.orbits import Orbits, Renaming

#: a query's local premise is tried first only when it is less than this share of the
#: whole invariant (else the two cost about the same, and a failed local query is lost)
LOCAL_SHARE = 0.5
#: how many local premises' solvers are kept for later queries with the same scope
LOCAL_SOLVERS = 8


class OrbitQueries:
    """Queries whose premise is the whole invariant ``I`` (every instance and every
    slot's domain), asked first with its *local* part: the instances whose slots all
    lie in the query's vocabulary (the slots its goal and action read and write) and
    the shared slots. A part that refutes the goal refutes it with all of ``I``, so
    only its ``unsat`` is taken; otherwise one solver holding all of ``I``, asserted
    once for every query, decides (the query in its own scope). The local part is
    skipped when it is most of the invariant (then asking the whole costs about the
    same, and a local query that does not refute is time lost). A local part's solver
    is kept too, for the next queries with the same vocabulary (67 of the 82 queries
    of ``lowest_free`` at 8 requests and 64 pages share one)."""

    def __init__(self, enc: Encoding, ren: Renaming, orbits: Orbits, timeout_ms: int) -> None:
        self.enc = enc
        self.orbits = orbits
        self.timeout_ms = timeout_ms
        self.shared = ren.shared
        self.everything = orbits.every_instance()
        self.by_slot: dict[int, list[int]] = {}
        for n, (_, _, slots) in enumerate(self.everything):
            paged = slots - ren.shared
            if paged:
                self.by_slot.setdefault(min(paged), []).append(n)
        self.always = [n for n, (_, _, slots) in enumerate(self.everything)
                       if slots <= ren.shared]
        self.queries = 0
        self._terms: list[z3.BoolRef | None] = [None] * len(self.everything)
        self._whole_solver: z3.Solver | None = None
        #: scope -> its local solver (None: the whole invariant), least recently used first
        self._locals: dict[frozenset[int], z3.Solver | None] = {}

    def local(self, scope: set[int]) -> set[int]:
        """The instances whose slots all lie in ``scope`` (it contains the shared slots)."""
        picked = set(self.always)
        for s in scope:
            for n in self.by_slot.get(s, ()):
                if self.everything[n][2] <= scope:
                    picked.add(n)
        return picked

    def _term(self, n: int) -> z3.BoolRef:
        """Instance ``n`` of :attr:`everything` (:meth:`Orbits.term`, looked up by
        position: cheaper than its key of clause and images, tens of thousands of times
        per check)."""
        t = self._terms[n]
        if t is None:
            k, images, _ = self.everything[n]
            t = self._terms[n] = self.orbits.term(k, images)
        return t

    def ask(self, goal: list[z3.BoolRef], vocab: set[int],
            parts: list[z3.BoolRef] | None = None) -> tuple[z3.CheckSatResult, Any]:
        """Is ``I ∧ goal`` (``∧ part``, for some part of ``parts``) satisfiable?
        ``unsat`` (None), or the whole invariant's ``sat`` (a model) or ``unknown``
        (the reason). The parts are asked one after the other on the same solver (a
        disjunction split by the ids its instances name, :data:`PARTS`); the time
        limit covers them all."""
        pending: list[z3.BoolRef | None] = list(parts) if parts is not None else [None]
        started = time.monotonic()
        local = self._local(frozenset(vocab | self.shared))
        if local is not None and self._scoped(local, goal, pending, started)[0] == z3.unsat:
            return z3.unsat, None
        return self._scoped(self._whole(), goal, pending, started)

    def _scoped(self, s: z3.Solver, goal: list[z3.BoolRef], pending: list[z3.BoolRef | None],
                started: float) -> tuple[z3.CheckSatResult, Any]:
        """:meth:`_each` with ``goal`` asserted on ``s`` in a scope of its own. However
        the query ends (an exception too), ``s`` is left with the scopes it had: it is
        kept for later queries, which a goal left behind would refute wrongly."""
        with _scope(s):
            assert_all(s, goal)
            return self._each(s, pending, started)

    def _local(self, scope: frozenset[int]) -> z3.Solver | None:
        """The solver holding the local premise of ``scope`` (its instances and its
        slots' domains); None when that is most of the invariant. Kept for the next
        query with the same scope (most representative actions of a model share one):
        the premise is then asserted once, and each query asked in its own scope."""
        if scope in self._locals:
            s = self._locals.pop(scope)
            self._locals[scope] = s  # the most recently used last
            return s
        chosen = self.local(scope)
        s = None
        if len(chosen) < LOCAL_SHARE * len(self.everything):
            s = _solver()
            _assert_conjunctions(s, self.enc.domains(sorted(scope)),
                                 [self._term(n) for n in sorted(chosen)])
        self._locals[scope] = s
        if len(self._locals) > LOCAL_SOLVERS:
            del self._locals[next(iter(self._locals))]
        return s

    def _whole(self) -> z3.Solver:
        """The solver holding all of ``I`` (every slot's domain, every instance),
        asserted once; each query is asked in its own scope."""
        if self._whole_solver is None:
            s = _solver()
            _assert_conjunctions(s, self.enc.domains(range(len(self.enc.cur))),
                                 [self._term(n) for n in range(len(self.everything))])
            self._whole_solver = s
        return self._whole_solver

    def _each(self, s: z3.Solver, pending: list[z3.BoolRef | None], started: float
              ) -> tuple[z3.CheckSatResult, Any]:
        """Check ``pending`` in order, dropping each part refuted; stop at the first
        that is not (it stays pending: a larger premise may refute it)."""
        while pending:
            left = self.timeout_ms - int((time.monotonic() - started) * 1000)
            if left <= 0:
                return z3.unknown, "timeout"
            s.set("timeout", left)
            part = pending[0]
            self.queries += 1
            with _scope(s):
                if part is not None:
                    s.add(part)
                res = s.check()
                why = (s.model() if res == z3.sat else
                       None if res == z3.unsat else s.reason_unknown())
            if res != z3.unsat:
                return res, why
            pending.pop(0)
        return z3.unsat, None


@contextmanager
def _scope(s: z3.Solver) -> Iterator[None]:
    """A scope of ``s`` for the body: back to the scopes ``s`` had, however it ends."""
    depth = s.num_scopes()
    try:
        s.push()
        yield
    finally:
        if s.num_scopes() > depth:
            s.pop(s.num_scopes() - depth)


def _solver() -> z3.Solver:
    """A solver for the orbit queries, in incremental mode: Z3 then skips its
    preprocessing of the whole premise (solving equations, propagating values),
    which on tens of thousands of clause instances costs more than the search it
    saves (benchmarks/RESULTS.md)."""
    s = z3.Solver()
    s.set("arith.solver", 2)  # faster on these quantifier-free queries
    s.set("relevancy", 0)
    s.push()
    return s


def _assert_conjunctions(s: z3.Solver, *groups: list[z3.BoolRef]) -> None:
    """Assert each non-empty group as one conjunction (Z3 splits it again): one C call
    for the thousands of clause instances of a premise."""
    assert_all(s, [mk_and(g) for g in groups if g])
