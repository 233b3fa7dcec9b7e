"""Sizes as symbols, and what the all-sizes reading over-approximates.

A model may tie a range to the number of ids (``Int(0, "pages")``, a bound
computed by a function of the sizes, ``len(s.pages)``). For every number of ids at
once these are *symbols*: ``size.pages`` and ``size.requests`` are integer constants,
and each bound function is one integer constant of its own (``bound.beyond_pool``), the same
wherever the function is used, so a parameter ranging up to it can be stored in a
variable of the same range. Nothing ties the symbols to the sorts or to each other:
the reading covers every value they may take — in particular, for every number of
requests and pages, the values the model computes — which is an over-approximation
and therefore sound for invariants.

Where a construct is order-dependent or counts ids against a number that is not a
small constant, the reading does not reject it but *over-approximates* it and
records where (:class:`Approximation`): a proof of the larger system is a proof of
the model; a failed one says which lines were read loosely.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3

from kvspec.lang.types import PAGE, REQUEST, Int, SizeView

#: the id spaces whose sizes the reading takes as symbols
ID_SPACES = (REQUEST, PAGE)


@dataclass
class Approximation:
    """A model line read as a larger set of behaviours, and how."""

    where: str
    what: str

    def text(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class SizeSymbols:
    """The integer symbols standing for sizes and size-dependent bounds."""

    #: size parameter name -> id space, for the sizes that count requests and pages
    id_sizes: dict[str, str]
    #: every size of the compilation the reading starts from (what a symbol is there)
    sizes: dict[str, int]
    #: the other size parameters read as symbols too (``max_need``); the rest are fixed
    params: frozenset[str] = frozenset()
    terms: dict[str, z3.ArithRef] = field(default_factory=dict)
    #: symbol name -> its value in that compilation
    values: dict[str, int] = field(default_factory=dict)
    #: id(bound function) -> its symbol
    functions: dict[int, z3.ArithRef] = field(default_factory=dict)
    #: the bound functions themselves: an ``id()`` stays theirs while they live
    kept: list[Any] = field(default_factory=list)

    def of_space(self, dim: str) -> z3.ArithRef:
        """``size.pages`` / ``size.requests``."""
        size = {REQUEST: "requests", PAGE: "pages"}[dim]
        for k, d in self.id_sizes.items():
            if d == dim:
                size = k
        return self.of_size(size)

    def of_size(self, size: str) -> z3.ArithRef:
        """``size.<name>``: an id space's size or a symbolic size parameter."""
        name = f"size.{size}"
        if name not in self.terms:
            self.terms[name] = z3.Int(name)
            if size in self.sizes:
                self.values[name] = self.sizes[size]
        return self.terms[name]

    def param(self, name: str) -> z3.ArithRef | None:
        """The symbol of size parameter ``name``; None when it is fixed."""
        if name in self.id_sizes:
            return self.of_space(self.id_sizes[name])
        return self.of_size(name) if name in self.params else None

    def bound(self, b: Any) -> z3.ArithRef | None:
        """The term of one declared bound; None when it is a plain constant."""
        if isinstance(b, bool) or isinstance(b, int):
            return None
        if isinstance(b, str):
            return self.param(b)
        if callable(b):
            if id(b) not in self.functions:
                base = getattr(b, "__name__", "")
                base = base if base.isidentifier() else "function"
                name, k = f"bound.{base}", 1
                while name in self.terms:  # two functions are two symbols
                    k += 1
                    name = f"bound.{base}{k}"
                self.functions[id(b)] = self.terms[name] = z3.Int(name)
                self.kept.append(b)  # alive while its id names the symbol
                try:
                    value = b(SizeView(self.sizes))
                except Exception:  # noqa: BLE001 - the value only seeds candidates
                    value = None
                if isinstance(value, int) and not isinstance(value, bool):
                    self.values[name] = value
            return self.functions[id(b)]
        return None

    def range_of(self, spec: Any, lo: int, hi: int) -> tuple[z3.ArithRef, z3.ArithRef] | None:
        """The symbolic ``(lo, hi)`` of a declared ``Int`` whose bounds depend on the
        number of ids or are computed (``lo``/``hi``: this compilation's values, for
        the constant side); None when both bounds are fixed constants."""
        if not isinstance(spec, Int):
            return None
        slo, shi = self.bound(spec.lo), self.bound(spec.hi)
        if slo is None and shi is None:
            return None
        return (z3.IntVal(lo) if slo is None else slo, z3.IntVal(hi) if shi is None else shi)

    def symbols(self) -> list[z3.ArithRef]:
        return list(self.terms.values())

    def axioms(self, system: Any, symbolic: dict[str, tuple[z3.ArithRef, z3.ArithRef]]
               ) -> list[z3.BoolRef]:
        """What holds of the symbols at every size the model compiles at: an id space
        within its declared minimum and maximum, and every initial value of a variable
        with a symbolic range inside that range (compiling checks both)."""
        out: list[z3.BoolRef] = []
        for s in system.loaded.decl.sizes:
            term = self.terms.get(f"size.{s.name}")
            if term is None:
                continue  # fixed, or a symbol the model does not use
            out.append(term >= s.minimum)
            if s.maximum is not None:
                out.append(term <= s.maximum)
        for v in system.schema.vars:
            r = symbolic.get(v.name)
            if r is None:
                continue
            for value in set(system.initial[v.offset:v.offset + v.length]):
                out.append(z3.And(r[0] <= value, value <= r[1]))
        return out
