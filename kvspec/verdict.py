"""Verdicts and verification results, the common currency of all engines."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvspec.lang.system import System
from kvspec.trace import Trace

if TYPE_CHECKING:
    from kvspec.coverage import Coverage

RESULT_FORMAT = "kvspec-result/1"

EXIT_HOLDS = 0
EXIT_VIOLATED = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3
#: an unexpected exception: a bug in kvspec, never a verdict (``EX_SOFTWARE``)
EXIT_INTERNAL = 70
#: interrupted by SIGINT (Ctrl-C); whatever was undecided is reported UNKNOWN
EXIT_INTERRUPTED = 130

#: the method of the verdicts of an interrupted run
INTERRUPTED = "interrupted"


class Status(str, enum.Enum):
    PROVED = "PROVED"      # an inductive invariant shows it for every reachable state
    HOLDS = "HOLDS"        # every reachable state explored (or bounded: see method)
    VIOLATED = "VIOLATED"  # a concretely re-executed counterexample exists
    UNKNOWN = "UNKNOWN"    # a limit was hit or a solver gave up: nothing is claimed


#: methods whose HOLDS is not a proof: exit code 3, never success
NOT_A_PROOF = ("bounded", "fingerprint")


@dataclass
class Verdict:
    prop: str
    status: Status
    method: str  # exhaustive, bounded, bmc, k-induction, pdr, certificate, fuzz
    detail: str = ""
    trace: Trace | None = None

    @property
    def is_success(self) -> bool:
        """PROVED, or HOLDS after an exhaustive search: not a bounded search, and not a
        hash-compacted one (``fingerprint``: a state may have been missed)."""
        return self.status in (Status.PROVED, Status.HOLDS) and self.method not in NOT_A_PROOF

    def headline(self) -> str:
        """``HOLDS (exhaustive, requests=2, pages=8)``, ``VIOLATED (bmc, depth 9)``."""
        inner = ", ".join(x for x in (self.method, self.detail) if x)
        return f"{self.status.value} ({inner})" if inner else self.status.value

    def to_json(self) -> dict[str, Any]:
        return {"property": self.prop, "status": self.status.value, "method": self.method,
                "detail": self.detail, "trace": self.trace.to_json() if self.trace is not None else None}


@dataclass
class Stats:
    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    peak_memory_mb: float = 0.0
    symmetry: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def states_per_s(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"states": self.states, "transitions": self.transitions,
                               "depth": self.depth, "seconds": round(self.seconds, 4),
                               "states_per_s": round(self.states_per_s, 1),
                               "peak_memory_mb": round(self.peak_memory_mb, 1),
                               "symmetry": self.symmetry}
        out.update(self.extra)
        return out


@dataclass
class Result:
    system: System
    engine: str
    verdicts: list[Verdict]
    stats: Stats
    #: what the run saw fire (kvspec.coverage); information, never part of the verdict
    coverage: Coverage | None = None

    @property
    def exit_code(self) -> int:
        if any(v.status is Status.VIOLATED for v in self.verdicts):
            return EXIT_VIOLATED
        if all(v.is_success for v in self.verdicts):
            return EXIT_HOLDS
        return EXIT_UNKNOWN

    def to_json(self) -> dict[str, Any]:
        loaded = self.system.loaded
        return {"format": RESULT_FORMAT,
                "model": {"name": self.system.name, "file": loaded.file, "sha256": loaded.sha256},
                "sizes": dict(self.system.sizes),
                "engine": self.engine,
                "verdicts": [v.to_json() for v in self.verdicts],
                "stats": self.stats.to_json(),
                "coverage": self.coverage.to_json() if self.coverage is not None else None,
                "exit_code": self.exit_code}

    def _repr_html_(self) -> str:  # Jupyter
        rows = "".join(f"<tr><td>{v.prop}</td><td><b>{v.headline()}</b></td></tr>"
                       for v in self.verdicts)
        return (f"<table><caption>{self.system.name} "
                f"{', '.join(f'{k}={x}' for k, x in self.system.sizes.items())}</caption>"
                f"{rows}</table>")


def interrupted_verdicts(props: list[str]) -> list[Verdict]:
    """The verdicts of a run stopped before it decided anything: UNKNOWN for each."""
    return [Verdict(name, Status.UNKNOWN, INTERRUPTED) for name in props]


@dataclass
class EngineOutcome:
    """What every engine returns: one verdict per property and statistics."""

    verdicts: list[Verdict]
    stats: Stats
    engine: str = ""
    coverage: Coverage | None = None  # when the engine recorded it (explicit, auto)
