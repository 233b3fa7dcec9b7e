"""The resolved layout of a model's state for one choice of sizes.

A state is a flat tuple of internal values (see :mod:`kvspec.lang.types`). Each
variable occupies ``length`` consecutive slots from ``offset``: one for a scalar,
one per request or per page for arrays.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvspec.lang.declare import SCALAR
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST, ValueType

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

    def label(self, index: int | None) -> str:
        if self.dim == SCALAR or index is None:
            return self.name
        if self.dim == REQUEST:
            return f"{self.name}[r{index}]"
        if self.dim == PAGE_BY_REQUEST:
            p, r = divmod(index, self.row)
            return f"{self.name}[{p},r{r}]"
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
        self.vars.append(info)
        self.by_name[name] = info
        self.width += length
        return info

    def length_of(self, dim: str) -> int:
        """Slots of a variable over ``dim``."""
        if dim == SCALAR:
            return 1
        if dim == PAGE_BY_REQUEST:
            return self.counts[PAGE] * self.counts[REQUEST]
        return self.counts[dim]

    def values(self, state: State, info: VarInfo) -> Any:
        """JSON value of one variable (a list for arrays)."""
        if info.dim == SCALAR:
            return info.type.to_json(state[info.offset])
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
            else:
                if not isinstance(value, list) or len(value) != v.length:
                    raise ValueError(f"variable {v.name!r} must be a list of {v.length} values")
                out.extend(v.type.from_json(x) for x in value)
        return tuple(out)

    def diff(self, before: State, after: State, owners: tuple[str, ...] = ("model", "monitor")
             ) -> list[tuple[VarInfo, int | None, Any, Any]]:
        """Changed elements: (variable, index or None, before, after) in internal form."""
        changes: list[tuple[VarInfo, int | None, Any, Any]] = []
        for v in self.vars:
            if v.owner not in owners:
                continue
            for i in range(v.length):
                a, b = before[v.offset + i], after[v.offset + i]
                if a != b:
                    changes.append((v, None if v.dim == SCALAR else i, a, b))
        return changes

    def to_json(self) -> dict[str, Any]:
        out = []
        for v in self.vars:
            entry: dict[str, Any] = {"name": v.name, "dim": v.dim, "type": v.type.describe(),
                                     "owner": v.owner}
            if v.type.kind == "enum":
                entry["values"] = [m.name for m in v.type.members]  # type: ignore[attr-defined]
            out.append(entry)
        return {"requests": self.requests, "pages": self.pages, "vars": out}
