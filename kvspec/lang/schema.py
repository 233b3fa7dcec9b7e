"""The resolved layout of a model's state for one choice of sizes.

A state is a flat tuple of internal values (see :mod:`kvspec.lang.types`). Each
variable occupies ``length`` consecutive slots from ``offset``: one for a scalar,
one per id for arrays over one id space, one per pair of ids for a two-dimensional
array (``requests.by(ranks)``). A two-dimensional array is stored so that the
symmetric axis (requests or pages), if there is one, varies fastest: every fixed
id of the other axis is then a contiguous per-request (per-page) run of slots,
which the symmetry canonicaliser permutes like any per-request variable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvspec.lang.declare import SCALAR
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST, SYMMETRIC_DIMS, ValueType, axes_of

State = tuple[Any, ...]


@dataclass
class VarInfo:
    name: str
    dim: str  # SCALAR, REQUEST or PAGE
    type: ValueType
    offset: int
    length: int
    owner: str  # "model", "monitor" or "flag"
    line: int | None = None
    file: str | None = None
    row: int = 0  # slots per page of a PAGE_BY_REQUEST array (the number of requests)
    #: a two-dimensional array: the number of ids of each axis and the slot stride of each
    shape: tuple[int, int] = (0, 0)
    strides: tuple[int, int] = (0, 0)

    @property
    def axes(self) -> tuple[str, ...]:
        """The id spaces indexing it, outermost first (``()`` for a scalar)."""
        return () if self.dim == SCALAR else axes_of(self.dim)

    @property
    def two_d(self) -> bool:
        return len(self.axes) == 2

    def slot(self, i: int, j: int) -> int:
        """The slot offset (from ``offset``) of element ``[i, j]`` of a 2-D array."""
        return i * self.strides[0] + j * self.strides[1]

    def coords(self, index: int) -> tuple[int, int]:
        """The ``(i, j)`` of slot offset ``index`` of a 2-D array."""
        if self.strides[0] == 1 and self.shape[0] > 0:
            return index % self.shape[0], index // self.shape[0]
        return divmod(index, self.strides[0]) if self.strides[0] else (0, index)

    def position(self, index: int) -> tuple[int, ...]:
        """The id along each axis (``axes``) of slot offset ``index``: ``()`` for a
        scalar, ``(i,)`` for a 1-D array, :meth:`coords` for a 2-D one."""
        if self.two_d:
            return self.coords(index)
        return (index,) if self.axes else ()

    def logical(self, index: int) -> int:
        """The position of slot offset ``index`` in the row-by-row order of the array's
        elements (``[i, j]`` at ``i * n1 + j``): how traces and JSON states list it."""
        if not self.two_d:
            return index
        i, j = self.coords(index)
        return i * self.shape[1] + j

    def slots_of(self, dim: str, i: int) -> list[int]:
        """The slot offsets (from ``offset``) that belong to id ``i`` of ``dim``."""
        axes = self.axes
        if dim not in axes:
            return []
        if not self.two_d:
            return [i]
        k = axes.index(dim)
        return [self.slot(i, j) if k == 0 else self.slot(j, i) for j in range(self.shape[1 - k])]

    def label(self, index: int | None) -> str:
        if self.dim == SCALAR or index is None:
            return self.name
        if self.dim == REQUEST:
            return f"{self.name}[r{index}]"
        if self.two_d:  # ``index`` is the row-by-row position (see ``logical``)
            i, j = divmod(index, self.shape[1])
            a, b = self.axes
            return (f"{self.name}[{f'r{i}' if a == REQUEST else i},"
                    f"{f'r{j}' if b == REQUEST else j}]")
        return f"{self.name}[{index}]"


class Schema:
    """Variables, their offsets, and conversions of whole states."""

    def __init__(self, sizes: dict[str, int], counts: dict[str, int]) -> None:
        self.sizes = dict(sizes)
        self.counts = dict(counts)
        self.vars: list[VarInfo] = []
        self.by_name: dict[str, VarInfo] = {}
        self.width = 0

    @property
    def requests(self) -> int:
        return self.counts[REQUEST]

    @property
    def pages(self) -> int:
        return self.counts[PAGE]

    def add(self, name: str, dim: str, vtype: ValueType, owner: str,
            line: int | None = None, file: str | None = None) -> VarInfo:
        row = self.counts[REQUEST] if dim == PAGE_BY_REQUEST else 0
        length = self.length_of(dim)
        info = VarInfo(name, dim, vtype, self.width, length, owner, line, file, row)
        axes = info.axes
        if len(axes) == 2:
            n0, n1 = self.counts[axes[0]], self.counts[axes[1]]
            info.shape = (n0, n1)
            column_major = axes[0] in SYMMETRIC_DIMS and axes[1] not in SYMMETRIC_DIMS
            info.strides = (1, n0) if column_major else (n1, 1)
        self.vars.append(info)
        self.by_name[name] = info
        self.width += length
        return info

    def length_of(self, dim: str) -> int:
        """Slots of a variable over ``dim``."""
        if dim == SCALAR:
            return 1
        n = 1
        for axis in axes_of(dim):
            n *= self.counts[axis]
        return n

    def values(self, state: State, info: VarInfo) -> Any:
        """JSON value of one variable (a list for arrays)."""
        if info.dim == SCALAR:
            return info.type.to_json(state[info.offset])
        if info.two_d:  # row by row: element [i, j] at i * n1 + j, whatever the storage
            n0, n1 = info.shape
            return [info.type.to_json(state[info.offset + info.slot(i, j)])
                    for i in range(n0) for j in range(n1)]
        return [info.type.to_json(x) for x in state[info.offset:info.offset + info.length]]

    def to_json_state(self, state: State) -> dict[str, Any]:
        return {v.name: self.values(state, v) for v in self.vars}

    def from_json_state(self, data: dict[str, Any]) -> State:
        out: list[Any] = []
        for v in self.vars:
            if v.name not in data:
                raise ValueError(f"state lacks variable {v.name!r}")
            value = data[v.name]
            if v.dim == SCALAR:
                out.append(v.type.from_json(value))
            elif v.two_d:
                n0, n1 = v.shape
                if not isinstance(value, list) or len(value) != v.length:
                    raise ValueError(f"variable {v.name!r} must be a list of {v.length} values "
                                     f"({n0} rows of {n1})")
                flat: list[Any] = [None] * v.length
                for i in range(n0):
                    for j in range(n1):
                        flat[v.slot(i, j)] = v.type.from_json(value[i * n1 + j])
                out.extend(flat)
            else:
                if not isinstance(value, list) or len(value) != v.length:
                    raise ValueError(f"variable {v.name!r} must be a list of {v.length} values")
                out.extend(v.type.from_json(x) for x in value)
        return tuple(out)

    def diff(self, before: State, after: State, owners: tuple[str, ...] = ("model", "monitor")
             ) -> list[tuple[VarInfo, int | None, Any, Any]]:
        """Changed elements: (variable, index or None, before, after) in internal form;
        the index of a two-dimensional array's element is its row-by-row position."""
        changes: list[tuple[VarInfo, int | None, Any, Any]] = []
        for v in self.vars:
            if v.owner not in owners:
                continue
            found = []
            for i in range(v.length):
                a, b = before[v.offset + i], after[v.offset + i]
                if a != b:
                    found.append((v, None if v.dim == SCALAR else v.logical(i), a, b))
            changes.extend(sorted(found, key=lambda c: c[1] or 0))
        return changes

    def to_json(self) -> dict[str, Any]:
        out = []
        for v in self.vars:
            entry: dict[str, Any] = {"name": v.name, "dim": v.dim, "type": v.type.describe(),
                                     "owner": v.owner}
            if v.type.kind == "enum":
                entry["values"] = [m.name for m in v.type.members]  # type: ignore[attr-defined]
            out.append(entry)
        extra = {d: n for d, n in self.counts.items() if d not in (REQUEST, PAGE)}
        head: dict[str, Any] = {"requests": self.requests, "pages": self.pages}
        if extra:
            head["indexes"] = extra
        return {**head, "vars": out}
