"""Declared index spaces (``ranks = Ranks(2)``) in the all-sizes reading: finite sets.

An index space is neither requests nor pages, so the reading keeps its compiled size
``n`` (a fixed size, recorded in the certificate) and reads it as the set ``0 .. n-1``:

* a variable indexed by it is one state symbol per index — ``failed@0``,
  ``failed@1`` for ``failed = requests.by(ranks).var(bool)``, each a function of the
  variable's request or page axis (a constant when every axis is an index space). So
  every function argument and every quantifier stays over requests and pages: the
  queries stay in EPR, and a certificate quantifies over ``Request`` and ``Page`` only;
* an id of the space (a value ``pages.var(ranks.id)``, a parameter ``k: ranks.id``, a
  loop variable) is an ``Int`` in ``0 .. n-1`` — ``-1 .. n-1`` where it may be
  ``None`` (``ranks.optional``), ``-1`` standing for ``None`` as in the compiled state:
  the type clauses and the parameters' ranges say so;
* a read or write at a symbolic index selects among the ``n`` symbols, a line over the
  space is a vector of ``n`` elements, and its ``any``/``all``/``count`` are finite
  disjunctions, conjunctions and sums, loops and folds over the space run once per
  index: all exact.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Callable

import z3

from kvspec.lang.declare import SCALAR
from kvspec.lang.schema import VarInfo
from kvspec.lang.system import System
from kvspec.lang.types import PAGE, REQUEST, IntType, ValueType
from kvspec.lang.z3gen import and_
from kvspec.proofs.parametric.values import Unsupported

#: what a slot of the size-specific encoding is in the reading: variable and ids
Slot = tuple[VarInfo, tuple[tuple[str, int], ...]]


@dataclass
class Layout:
    """How a variable indexed by an index space is read: one symbol per index."""

    source: VarInfo
    #: positions (in ``source.axes``) of the request/page axis and of the index axes
    ids: tuple[int, ...]
    index: tuple[int, ...]
    #: index coordinates -> the symbol's variable (request/page axis only, or scalar)
    parts: dict[tuple[int, ...], VarInfo]


@dataclass
class Reading:
    """The state as the reading has it: its variables and the split ones' layouts."""

    spaces: dict[str, int]  # index space -> its (fixed) size
    vars: list[VarInfo]
    layouts: dict[str, Layout]
    #: slot name of the size-specific encoding -> the reading's variable and ids, for
    #: the variables that an index space changes
    slots: dict[str, Slot]


def index_spaces(system: System) -> dict[str, int]:
    """Each declared index space and its size."""
    return {s.dim: system.schema.counts.get(s.dim, s.default)
            for s in system.loaded.decl.sizes
            if s.dim is not None and s.dim not in (REQUEST, PAGE)}


def read_type(t: ValueType, spaces: dict[str, int]) -> ValueType:
    """An id of an index space as the int ``0 .. n-1`` (``-1``, None, too where it is
    optional); any other type as it is."""
    if t.kind == "ref" and t.ref_dim in spaces:
        return IntType(-1 if t.optional else 0, spaces[t.ref_dim] - 1)
    return t


def reading(system: System) -> Reading:
    """The reading's state variables (see the module docstring)."""
    spaces = index_spaces(system)
    out = Reading(spaces, [], {}, {})
    for v in system.schema.vars:
        t = read_type(v.type, spaces)
        axes = v.axes
        index = tuple(k for k, a in enumerate(axes) if a in spaces)
        if not index:
            w = v if t is v.type else dataclasses.replace(v, type=t)
            out.vars.append(w)
            if w is not v:
                for i in range(v.length):
                    label = v.label(None if v.dim == SCALAR else v.logical(i))
                    out.slots[label] = (w, () if v.dim == SCALAR else ((v.dim, i),))
            continue
        ids = tuple(k for k in range(len(axes)) if k not in index)
        dim = axes[ids[0]] if ids else SCALAR
        where = f"{v.file or system.loaded.file}:{v.line or 0}"
        if ids and v.strides[ids[0]] != 1:
            raise Unsupported(where, f"the layout of {v.name} (its {dim} axis is not "
                                     "contiguous)")
        layout = Layout(v, ids, index, {})
        shape = v.shape if v.two_d else (v.length,)
        for coords in itertools.product(*(range(shape[k]) for k in index)):
            values = [0] * len(axes)
            for k, c in zip(index, coords):
                values[k] = c
            first = v.slot(*values) if v.two_d else values[0]
            n = shape[ids[0]] if ids else 1
            name = v.name + "".join(f"@{c}" for c in coords)
            part = dataclasses.replace(v, name=name, dim=dim, type=t, offset=v.offset + first,
                                       length=n, row=0, shape=(0, 0), strides=(0, 0))
            layout.parts[coords] = part
            out.vars.append(part)
            for e in range(n):
                if ids:
                    values[ids[0]] = e
                logical = values[0] * v.shape[1] + values[1] if v.two_d else values[0]
                out.slots[v.label(logical)] = (part, ((dim, e),) if ids else ())
        out.layouts[v.name] = layout
    return out


def select(coords: list[z3.ExprRef], keys: list[tuple[int, ...]],
           pick: Callable[[tuple[int, ...]], Any]) -> Any:
    """``pick(key)`` for the key the index terms ``coords`` denote: the key itself when
    they are numerals, else a choice among every key (each in range by its type
    clause or parameter range, so the last one needs no test)."""
    if all(z3.is_int_value(c) for c in coords):
        key = tuple(c.as_long() for c in coords)
        if key not in keys:
            raise ValueError(f"index {key} outside the index space")
        return pick(key)
    out = pick(keys[-1])
    for key in reversed(keys[:-1]):
        out = z3.If(matches(coords, key), pick(key), out)
    return out


def matches(coords: list[z3.ExprRef], key: tuple[int, ...]) -> z3.BoolRef:
    """The index terms ``coords`` are ``key`` (simplified where they are numerals)."""
    out: z3.BoolRef = z3.BoolVal(True)
    for c, k in zip(coords, key):
        if z3.is_int_value(c):
            if c.as_long() != k:
                return z3.BoolVal(False)
            continue
        out = and_(out, c == k)
    return out


def reduce_line(op: str, items: list[z3.BoolRef]) -> z3.ExprRef:
    """``any``/``all``/``count`` of the ``n`` elements of a line over an index space."""
    if op == "any":
        return z3.Or(*items) if items else z3.BoolVal(False)
    if op == "all":
        return z3.And(*items) if items else z3.BoolVal(True)
    return z3.Sum([z3.If(x, 1, 0) for x in items]) if items else z3.IntVal(0)


class GridAccess:
    """Reads and writes of the variables an index space splits, for
    :class:`~kvspec.proofs.parametric.encode.ParamExec` (which provides ``ex``,
    ``view``, ``par``, ``sorts``, ``store_at`` and ``f``)."""

    spaces: dict[str, int]
    layouts: dict[str, Layout]
    view: dict[str, Any]
    par: Any
    sorts: Any

    def grid(self, var: VarInfo, index: Any, axes: tuple[Any, Any] | None, fn: Any,
             where: str) -> tuple[list[z3.ExprRef], list[z3.ExprRef]]:
        """The request/page ids and the index terms of an element of ``var``."""
        lay = self.layouts[var.name]
        if len(var.axes) == 1:
            exprs = [index]
        elif axes is not None:
            exprs = list(axes)
        else:
            raise Unsupported(where, f"an element of {var.name} whose indices are not known")
        values = [self.ex(x, fn) for x in exprs]  # type: ignore[attr-defined]
        return [values[k] for k in lay.ids], [values[k] for k in lay.index]

    def outside(self, var: VarInfo, coords: list[z3.ExprRef]) -> z3.BoolRef:
        """Some index term of ``coords`` is not an index of its space (``None``, or an
        int beyond ``n-1``): the concrete run stops there with an error."""
        lay = self.layouts[var.name]
        sizes = [self.spaces[var.axes[k]] for k in lay.index]
        return z3.Or(*[z3.Or(c < 0, c > n - 1) for c, n in zip(coords, sizes)])

    def read_grid(self, var: VarInfo, idx: list[z3.ExprRef], coords: list[z3.ExprRef],
                  where: str) -> z3.ExprRef:
        par = self.par
        if par is not None and var.name in par.written and not any(i.eq(par.x) for i in idx):
            raise Unsupported(where, f"{var.name} is read at another element than the one the "
                                     "loop over ids writes")
        lay = self.layouts[var.name]

        def at(key: tuple[int, ...]) -> z3.ExprRef:
            f = self.view[lay.parts[key].name]
            return f(*idx) if idx else f  # type: ignore[no-any-return]

        try:
            return select(coords, list(lay.parts), at)  # type: ignore[no-any-return]
        except ValueError:
            raise Unsupported(where, f"an index of {var.name} outside its space") from None

    def line(self, var: VarInfo, e: Any, fn: Any, where: str) -> Any:
        """``s.x`` (a variable over one index space), ``s.x[i, :]`` or ``s.x[:, j]`` as a
        vector: over the index space (``n`` elements) or over requests/pages."""
        from kvspec.proofs.parametric.values import Vec

        lay = self.layouts[var.name]
        if e.row is None:
            if len(var.axes) != 1:
                raise Unsupported(where, f"{var.name} as a whole vector")
            return Vec(var.axes[0], lambda k: self.read_grid(var, [], [k], where))
        row = self.ex(e.row, fn)  # type: ignore[attr-defined]
        par = self.par
        if par is not None and var.name in par.written and not row.eq(par.x):
            raise Unsupported(where, f"{var.name} is read at another element than the one "
                                     "the loop over ids writes")
        along = e.along

        def at(x: z3.ExprRef) -> z3.ExprRef:
            values = [row, row]
            values[along] = x
            ids = [values[k] for k in lay.ids]
            coords = [values[k] for k in lay.index]
            saved, self.par = self.par, None  # checked above, for the whole line
            try:
                return self.read_grid(var, ids, coords, where)
            finally:
                self.par = saved

        return Vec(var.axes[along], at)

    def mask_store_line(self, var: VarInfo, mask: Any, value: z3.ExprRef, where: str) -> None:
        """``s.x[m] = v`` with ``x`` a variable over one index space: each index at once."""
        if self.par is not None or len(var.axes) != 1 or mask.dim != var.axes[0]:
            raise Unsupported(where, f"a masked assignment to {var.name}")
        g = self.f.g  # type: ignore[attr-defined]
        for (k,), part in self.layouts[var.name].parts.items():
            self.view[part.name] = z3.If(z3.And(g, mask.at(z3.IntVal(k))), value,
                                         self.view[part.name])
