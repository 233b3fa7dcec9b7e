"""Counts of ids that the all-sizes reading cannot state, named in its verdicts.

A size-specific invariant may hold a clause such as ``for all r: phase[r] != TRANSFER
or count(inflight == r) + count(page_written == r) == sent[r]``: at one size a count
over every page is a sum of ``ite`` terms, for every size it is the cardinality of a
set of pages, which quantified clauses over the id sorts cannot express (only
"none" and "at most one" lift, :mod:`kvspec.proofs.parametric.generalise`). When a
property is not proved for every size and the clauses it needed at its size include
such counts, the verdict says which — with the model lines that count the same
variables — instead of only that the generalised invariant falls short.
"""
from __future__ import annotations

from collections.abc import Iterable

from kvspec.lang import ir
from kvspec.lang.system import System


def count_lines(system: System, names: Iterable[str]) -> list[str]:
    """``file.py:NN`` of every ``mask.count()`` in the model's actions (and the helpers
    they call) whose mask reads one of the variables ``names``."""
    wanted = set(names)
    out: dict[str, None] = {}
    for fn in ir.reachable([a.ir for a in system.actions]):
        for st in ir.walk_stmts(fn.body):
            for e in _exprs(ir.stmt_exprs(st)):
                if isinstance(e, ir.Reduce) and e.op == "count" \
                        and _reads(e.mask) & wanted:
                    out[f"{fn.file.rsplit('/', 1)[-1]}:{e.line or st.line}"] = None
    return sorted(out, key=lambda w: (w.rsplit(":", 1)[0], int(w.rsplit(":", 1)[1])))


def _exprs(roots: list[ir.Expr]) -> list[ir.Expr]:
    out: list[ir.Expr] = []
    stack = list(roots)
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(ir.sub_exprs(e))
    return out


def _reads(e: ir.Expr) -> set[str]:
    """The state variables an expression reads (whole or by element)."""
    return {x.var.name for x in _exprs([e]) if isinstance(x, (ir.VecOf, ir.Load))}


def uncounted_reasons(system: System, counts: list[tuple[str, str, list[str]]],
                      needs: dict[str, list[str]] | None, properties: Iterable[str],
                      ghosts: list[str] | None = None) -> dict[str, str]:
    """Property -> why it is not proved for every size, for the ``properties`` whose
    size-specific proof needed a clause with a count that did not lift (``counts``:
    ``(label, reason, variables counted)`` of those clauses; ``needs``: the clauses
    each property needed at its size, None when unknown — then every such clause is
    named; ``ghosts``: the ghost counts the reading tried them with, if any)."""
    out: dict[str, str] = {}
    for prop in properties:
        wanted = None if needs is None else set(needs.get(prop, []))
        parts: list[str] = []
        spaces: dict[str, None] = {}
        for label, reason, names in counts:
            if wanted is not None and label not in wanted:
                continue
            lines = count_lines(system, names)
            notes = lines + (["a sum of counts"] if reason.startswith("a sum of") else [])
            parts.append(_statement(label) + (f" ({', '.join(notes)})" if notes else ""))
            spaces[_space(reason)] = None
        if parts and ghosts:
            out[prop] = (f"needs {'; '.join(parts)} — read with ghost counts of pages "
                         f"({', '.join(ghosts)}), the cardinality facts do not make the "
                         "invariant inductive for every size")
        elif parts:
            out[prop] = (f"needs {'; '.join(parts)} — count{'s' if len(parts) > 1 else ''} "
                         f"over every {' and '.join(spaces)} the all-sizes reading cannot "
                         "state")
    return out


def _statement(label: str) -> str:
    """``for all r: phase[r] != TRANSFER or count(…) == sent[r]`` as is (the readable
    form of the size-specific clause)."""
    return " ".join(label.split())


def _space(reason: str) -> str:
    """The id space a :class:`CountNotLiftable` reason names (``page``)."""
    head = reason.split(" over every ", 1)
    return head[1].split(" ", 1)[0] if len(head) == 2 else "id"
