"""New candidates from a counterexample to induction (ICE-style).

When no candidate of the initial pool excludes the pre-state of a counterexample to
induction, the selection asks for *new* candidates: quantified clauses of up to
``max_literals`` literals that are false on that pre-state (so adding one excludes
it) and true on every sampled reachable state (so they may still be invariant).
The literals come from the variables of the clauses the counterexample broke and
of the quantified context, which keeps the search small: a clause over unrelated
variables cannot be what stops the step. Proposals go through the same selection
(and the certificate check) as every other candidate; nothing is trusted.
"""
from __future__ import annotations

import itertools

import numpy as np

from kvspec.engines.inference import (
    CONTEXTS,
    QDIM,
    Atom,
    Literal,
    StateTable,
    Template,
    _covers,
    _mask,
    _tautology,
    atoms_for,
    unique_rows,
)
from kvspec.lang.schema import Schema, State

#: literals considered per binding (the most relevant first); bounds the search
MAX_LITERALS_CONSIDERED = 40


def propose(sample: StateTable, schema: Schema, pre: State, related: set[str],
            known: set[Template], *, max_literals: int = 4, limit: int = 8
            ) -> list[Template]:
    """Up to ``limit`` new clauses false on ``pre`` (a state of ``schema``) and true on
    every state of ``sample`` (a smaller configuration of the same model), over atoms
    mentioning a variable of ``related``; smallest first."""
    out: list[Template] = []
    pre_table = StateTable(schema, [pre])
    for ctx in CONTEXTS:
        if any(sample.schema.counts.get(QDIM[q], 0) == 0 for q in ctx):
            continue
        atoms = [a for a in atoms_for(sample.schema, ctx)
                 if a.var in related or a.other in related]
        if not atoms:
            continue
        uniq = unique_rows(sample.matrix(atoms, ctx))
        full = (1 << uniq.shape[0]) - 1
        masks = [_mask(uniq[:, k]) for k in range(len(atoms))]
        at_pre = unique_rows(pre_table.matrix(atoms, ctx))  # one row per binding
        for row in at_pre:
            lits = _false_literals(atoms, masks, full, row)
            for clause in _covering(lits, full, max_literals):
                t = Template(ctx, clause)
                if t in known or t in out or not _covers(ctx, clause) \
                        or _tautology(clause, sample.schema):
                    continue
                out.append(t)
                if len(out) >= limit:
                    return out
    return out


def _false_literals(atoms: list[Atom], masks: list[int], full: int, row: np.ndarray
                    ) -> list[tuple[Literal, int]]:
    """The literal of each atom that is false at this binding of the pre-state, with
    its sample mask; literals true or false on the whole sample are left out."""
    out = []
    for k, atom in enumerate(atoms):
        positive = not bool(row[k])  # the literal ``atom`` if it is false here
        m = masks[k] if positive else full ^ masks[k]
        if m not in (0, full):
            out.append(((atom, positive), m))
    out.sort(key=lambda x: -bin(x[1]).count("1"))  # covering the most sampled states first
    return out[:MAX_LITERALS_CONSIDERED]


def _covering(lits: list[tuple[Literal, int]], full: int, max_literals: int
              ) -> list[tuple[Literal, ...]]:
    """Sets of literals (distinct atoms) whose masks cover every sampled state, of the
    smallest size that has any, in lexicographic order of their indices. A depth-first
    search that stops extending a set when the literals after it cannot cover what it
    misses."""
    atom_ids: dict[object, int] = {}
    ids = [atom_ids.setdefault(lit[0][0], len(atom_ids)) for lit in lits]
    masks = [m for _, m in lits]
    after = [0] * (len(lits) + 1)  # the union of the masks from index i on
    for i in range(len(lits) - 1, -1, -1):
        after[i] = after[i + 1] | masks[i]
    for n in range(2, max_literals + 1):
        found: list[tuple[int, ...]] = []
        _extend((), 0, 0, n, full, masks, ids, after, found)
        if found:
            return [tuple(lits[i][0] for i in combo) for combo in found]
    return []


def _extend(head: tuple[int, ...], m: int, start: int, n: int, full: int, masks: list[int],
            ids: list[int], after: list[int], found: list[tuple[int, ...]]) -> None:
    left = n - len(head)
    used = {ids[i] for i in head}
    for j in range(start, len(masks) - left + 1):
        if (m | after[j]) != full:
            return  # nothing from j on completes the set
        if ids[j] in used:
            continue
        mj = m | masks[j]
        if left == 1:
            if mj == full:
                found.append((*head, j))
        elif mj != full:  # a set covering early is found at its own, smaller size
            _extend((*head, j), mj, j + 1, n, full, masks, ids, after, found)
