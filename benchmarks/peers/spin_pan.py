"""Build and run SPIN verifiers (``pan``) for the Promela peers in this directory.

``build`` runs ``spin -a`` with the size and property macros and compiles ``pan.c``;
``run`` executes the verifier and parses its report (states stored, transitions,
depth, the depth of an assertion violation, memory). CPU times are the children's
user + system time around each subprocess (``resource.RUSAGE_CHILDREN`` deltas), so
they count the work of the tool, not the time the shared machine gave to others.
"""
from __future__ import annotations

import re
import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: the kvspec property names -> the Promela macro that selects each
PROPERTY_MACROS = {
    "no-decode-after-rejection": "PROP_NDAR",
    "rejection-is-terminal": "PROP_RIT",
    "no-read-beyond-written": "PROP_NRBW",
    "no-reuse-before-drain": "PROP_NRBD",
}


class SpinError(RuntimeError):
    """spin, the C compiler or pan failed, or pan's report could not be read."""


def available() -> bool:
    """Whether ``spin`` and a C compiler are on PATH."""
    return shutil.which("spin") is not None and shutil.which("gcc") is not None


def children_cpu() -> float:
    """User + system CPU seconds of every waited-for child process so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], cwd: Path, timeout: float | None = None
          ) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``cmd`` to completion; its output and the CPU seconds it used."""
    before = children_cpu()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return proc, children_cpu() - before


@dataclass
class Pan:
    """A compiled verifier: where it is and what building it cost."""

    model: str
    requests: int
    pages: int
    workdir: Path
    spin_cpu: float      # spin -a
    compile_cpu: float   # gcc

    @property
    def binary(self) -> Path:
        return self.workdir / "pan"


@dataclass
class SpinRun:
    states: int
    transitions: int
    depth: int
    errors: int
    error_depth: int | None     # "assertion violated ... (at depth N)"
    state_vector_bytes: int
    state_memory_mb: float      # "actual memory usage for states"
    total_memory_mb: float      # "total actual memory usage"
    cpu: float
    output: str

    @property
    def counterexample_steps(self) -> int | None:
        """Steps of the error trail: the violating step leaves a state at ``depth``."""
        return None if self.error_depth is None else self.error_depth + 1


def build(model: str, requests: int, pages: int, workdir: Path, *,
          properties: list[str] | None = None, stop_at_violation: bool = False,
          bfs: bool = False, optimize: str = "-O2") -> Pan:
    """``spin -a`` the model (``patched`` or ``buggy_pd``) at these sizes and compile
    pan with ``-DSAFETY -DNOREDUCE`` (``-DBFS`` with ``bfs``). ``properties``: the
    kvspec properties to keep (None: all), as ``kvspec verify --property``."""
    source = HERE / f"{model}.pml"
    if not source.is_file():
        raise SpinError(f"no Promela model {source}")
    workdir.mkdir(parents=True, exist_ok=True)
    defines = [f"-DREQUESTS={requests}", f"-DPAGES={pages}"]
    if properties is not None:
        unknown = [p for p in properties if p not in PROPERTY_MACROS]
        if unknown:
            raise SpinError(f"no Promela monitor for {', '.join(unknown)}")
        defines += [f"-D{macro}={int(name in properties)}"
                    for name, macro in PROPERTY_MACROS.items()]
    if stop_at_violation:
        defines.append("-DSTOP_AT_VIOLATION")
    proc, spin_cpu = timed(["spin", *defines, "-a", str(source)], workdir)
    if proc.returncode != 0 or not (workdir / "pan.c").is_file():
        raise SpinError(f"spin -a {source.name} failed:\n{proc.stdout}{proc.stderr}")
    cflags = [optimize, "-DSAFETY", "-DNOREDUCE"] + (["-DBFS"] if bfs else [])
    proc, cc_cpu = timed(["gcc", *cflags, "-o", "pan", "pan.c"], workdir)
    if proc.returncode != 0:
        raise SpinError(f"compiling pan for {source.name} failed:\n{proc.stderr[-2000:]}")
    return Pan(model, requests, pages, workdir, spin_cpu, cc_cpu)


def hash_bits(states: int) -> int:
    """A hash table of at least twice as many slots as states (pan's ``-w``)."""
    return max(10, (2 * states - 1).bit_length())


_NUM = r"([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)"


def _field(pattern: str, text: str, what: str) -> str:
    m = re.search(pattern, text)
    if m is None:
        raise SpinError(f"pan's report has no {what}:\n{text[-3000:]}")
    return m.group(1)


def run(pan: Pan, *, bits: int = 20, timeout: float | None = None) -> SpinRun:
    """Run the verifier with a hash table of ``2**bits`` slots."""
    proc, cpu = timed([str(pan.binary), f"-w{bits}", "-m100000", "-n"], pan.workdir,
                      timeout)
    out = proc.stdout + proc.stderr
    if "max search depth too small" in out:
        raise SpinError("pan: max search depth too small (raise -m)")
    err = re.search(r"assertion violated .*\(at depth ([0-9]+)\)", out)
    return SpinRun(
        states=int(float(_field(r"\s" + _NUM + r" states, stored", out, "states stored"))),
        transitions=int(float(_field(r"\s" + _NUM + r" transitions", out, "transitions"))),
        depth=int(_field(r"depth reached ([0-9]+)", out, "depth")),
        errors=int(_field(r"errors: ([0-9]+)", out, "error count")),
        error_depth=int(err.group(1)) if err else None,
        state_vector_bytes=int(_field(r"State-vector ([0-9]+) byte", out, "state vector")),
        state_memory_mb=float(_field(_NUM + r"\s+actual memory usage for states", out,
                                     "state memory")),
        total_memory_mb=float(_field(_NUM + r"\s+total actual memory usage", out,
                                     "total memory")),
        cpu=cpu, output=out)
