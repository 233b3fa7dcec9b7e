"""Run ``python -m kvspec verify --engine explicit --json`` as a child process and
read its result document: state counts, counterexample lengths, peak memory, and
the CPU time of the whole process (interpreter start and model compilation
included, as a user running the command pays them). The child caches its bytecode as
a user's Python does, even where ``PYTHONDONTWRITEBYTECODE`` is set for this script:
otherwise every run would pay for compiling kvspec's sources again.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spin_pan import children_cpu

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("python", "native")


class KvspecError(RuntimeError):
    """kvspec refused the command or did not print a result document."""


@dataclass
class KvspecRun:
    states: int
    transitions: int
    depth: int
    complete: bool
    peak_memory_mb: float
    cpu: float
    verdicts: dict[str, str]            # property -> status
    steps: dict[str, int]               # violated property -> counterexample length
    reduction_factor: float | None
    backend: str | None                 # as the document reports it, when it does


def backend_option(backend: str, python: str = sys.executable) -> list[str]:
    """The command-line words that select ``backend``: ``--backend B`` when this
    kvspec has the option; nothing for ``python`` when it has not (its only engine is
    the Python one). Raises KvspecError when the backend cannot be selected."""
    if backend not in BACKENDS:
        raise KvspecError(f"unknown backend {backend!r} (choose {' or '.join(BACKENDS)})")
    proc = subprocess.run([python, "-m", "kvspec", "verify", "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    if "--backend" in proc.stdout:
        return ["--backend", backend]
    if backend == "python":
        return []
    raise KvspecError(f"this kvspec ({ROOT}) has no --backend option, so the "
                      f"{backend} backend cannot be measured; run with --backend python")


def run(model: str, requests: int, pages: int, *, symmetry: bool, backend: list[str],
        properties: list[str] | None = None, python: str = sys.executable,
        timeout: float | None = None) -> KvspecRun:
    """``kvspec verify models/<model>.py`` with the explicit engine at these sizes."""
    cmd = [python, "-m", "kvspec", "verify", str(ROOT / "models" / f"{model}.py"),
           "--engine", "explicit", "--json", "--size", f"requests={requests},pages={pages}",
           *backend]
    if not symmetry:
        cmd.append("--no-symmetry")
    for p in properties or ():
        cmd += ["--property", p]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = children_cpu()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=env)
    cpu = children_cpu() - before
    if proc.returncode not in (0, 1):
        raise KvspecError(f"{' '.join(cmd[1:])} exited {proc.returncode}: "
                          f"{proc.stderr.strip()[-2000:]}")
    try:
        doc: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise KvspecError(f"kvspec printed no result document: {proc.stdout[:500]}") from None
    stats = doc["stats"]
    explicit = stats.get("explicit", {})
    steps = {}
    for v in doc["verdicts"]:
        trace = v.get("trace")
        if v["status"] == "VIOLATED" and trace is not None:
            steps[v["property"]] = len(trace["steps"])
    return KvspecRun(
        states=stats["states"], transitions=stats["transitions"], depth=stats["depth"],
        complete=bool(explicit.get("complete")), peak_memory_mb=stats["peak_memory_mb"],
        cpu=cpu, verdicts={v["property"]: v["status"] for v in doc["verdicts"]},
        steps=steps, reduction_factor=(stats.get("symmetry") or {}).get("reduction_factor"),
        # the native search reports itself under stats.native; without it, Python ran
        backend=(stats.get("native") or {}).get("backend") or "python")
