"""All-sizes survey: ``kvspec verify --engine all-sizes`` on every model class shipped
in ``models/`` and ``models/library/``, each in a fresh process. Prints one row per
class: the properties that hold at the default size, how many of them are
``PROVED (all sizes …)``, the CPU seconds of the whole command, the lines read loosely,
the CPU seconds of ``kvspec check-proof`` of the all-sizes certificate it wrote (a
fresh process, bytecode cached, as a user's re-check runs; wall time on an idle
machine is about the same) at the size of the run and at requests=16, pages=256
("check big"), and for the rest the first
reason the engine gives. The run starts from a copy of ``proofs/`` (the stored
size-specific certificates), so nothing in the repository is rewritten.

    python benchmarks/all_sizes_bench.py                 # every class, 100 s each
    python benchmarks/all_sizes_bench.py --timeout 60 --only lowest_free abort_release
    python benchmarks/all_sizes_bench.py --size requests=4,pages=16   # learnt at (2,4)
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def model_classes(path: Path) -> list[str]:
    """The Model classes a file defines (deriving from Model or from one of them)."""
    tree = ast.parse(path.read_text())
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if "Model" in bases or bases & set(found):
                found.append(node.name)
    return found


#: the size the certificates are re-checked at besides the run's
BIG = "requests=16,pages=256"


def survey(path: Path, cls: str, timeout: float, size: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python caches bytecode
    with tempfile.TemporaryDirectory(prefix="kvspec-survey-") as tmp:
        shutil.copytree(ROOT / "proofs", tmp, dirs_exist_ok=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            [sys.executable, "-m", "kvspec", "verify", str(path), "--model-class", cls,
             "--engine", "all-sizes", "--timeout", str(timeout), "--json", "--save-proof",
             "--proofs-dir", tmp, *(["--size", size] if size else [])],
            capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout * 3 + 60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        recheck = _recheck(path, cls, Path(tmp), env, size)
        big = _recheck(path, cls, Path(tmp), env, BIG)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row: dict[str, Any] = {"file": path.relative_to(ROOT / "models").as_posix(), "class": cls,
                           "cpu": cpu, "rc": proc.returncode, "recheck": recheck,
                           "big": big}
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        row["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:100]
        return row
    verdicts = doc.get("verdicts", [])
    holding = [v for v in verdicts if v["status"] in ("PROVED", "HOLDS")]
    row["holding"] = len(holding)
    row["unknown"] = sum(v["status"] == "UNKNOWN" for v in verdicts)
    row["all_sizes"] = sum(v["method"] == "all sizes" for v in holding)
    extra = doc.get("stats", {}).get("all-sizes", {}).get("all_sizes", {})
    row["loose"] = len(extra.get("approximations", []))
    row["why_not"] = "" if row["all_sizes"] == len(holding) else _why(holding, extra)
    return row


def _recheck(path: Path, cls: str, proofs: Path, env: dict[str, str],
             size: str | None = None) -> float | None:
    """CPU seconds of ``check-proof`` of the all-sizes certificate the run wrote, at
    ``size`` (None: the model's own; returns None when it wrote none, or the
    certificate did not re-check)."""
    certs = sorted(proofs.glob(f"{path.stem}.{cls}.*requests=all*.json"))
    if not certs:
        return None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "kvspec", "check-proof", str(certs[0]),
                           str(path), "--model-class", cls,
                           *(["--size", size] if size else [])],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu if proc.returncode == 0 else None


def _why(holding: list[dict[str, Any]], extra: dict[str, Any]) -> str:
    if extra.get("why_not"):
        return str(extra["why_not"])
    for v in holding:
        if v["method"] != "all sizes":
            return f"{v['status']} ({v['method']}, {v['detail']})"
    return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=100.0)
    ap.add_argument("--only", nargs="*", default=None, help="model file stems")
    ap.add_argument("--size", default=None, help="NAME=N[,NAME=N] for every run, e.g. "
                    "requests=4,pages=16 (default: each model's own sizes)")
    args = ap.parse_args()
    files = sorted((ROOT / "models").glob("*.py")) + sorted((ROOT / "models" / "library")
                                                          .glob("*.py"))
    rows = []
    print(f"{'model':34} {'class':32} {'hold':>4} {'unkn':>4} {'all':>4} {'loose':>5} "
          f"{'CPU s':>7} {'check':>6} {'big':>6}  why not")
    for path in files:
        if args.only and path.stem not in args.only:
            continue
        for cls in model_classes(path):
            row = survey(path, cls, args.timeout, args.size)
            rows.append(row)
            why = row.get("error") or row.get("why_not", "")
            print(f"{row['file']:34} {cls:32} {row.get('holding', '-'):>4} "
                  f"{row.get('unknown', '-'):>4} {row.get('all_sizes', '-'):>4} "
                  f"{row.get('loose', '-'):>5} "
                  f"{row['cpu']:7.1f} {_seconds(row['recheck']):>6} {_seconds(row['big']):>6}  "
                  f"{why[:110]}", flush=True)
    done = sum(1 for r in rows if r.get("holding") and r.get("all_sizes") == r["holding"])
    print(f"\n{done} of {sum(1 for r in rows if r.get('holding'))} classes with holding "
          "properties: every one PROVED (all sizes)")
    for key, where in (("recheck", "at the run's size"), ("big", f"at {BIG}")):
        checks = [r[key] for r in rows if r.get(key) is not None]
        if checks:
            print(f"check-proof of the {len(checks)} all-sizes certificates {where}: "
                  f"{min(checks):.2f}-{max(checks):.2f} s CPU")


def _seconds(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


if __name__ == "__main__":
    main()
