"""Native vs Python explicit backend: states, states per CPU-second, bytes per state,
build time. Every row runs ``python -m kvspec verify --engine explicit --json`` in a
fresh process (its own peak memory); CPU time is the child's own (this machine is
shared, so wall time says little).

    python benchmarks/native_bench.py             # the standard table
    python benchmarks/native_bench.py --quick     # small sizes only
    python benchmarks/native_bench.py --row patched.py 3 5 nosym native
    python benchmarks/native_bench.py --builds    # build time of every shipped model

``--builds``: every Model class of ``models/*.py`` and ``models/library/*.py``, at its
default sizes and at requests=3, pages=8, compiled afresh (a temporary cache):
"codegen s" is the CPU time of generating the C source (the transition system's
terms lowered), "compile s" the C compiler's CPU time, and "states/s CPU" the search
loop's rate on a run of at most ``--build-states`` states with symmetry.

For the native backend, "states/s CPU" is the search loop's own CPU time (from the
JSON, ``stats.native.cpu_seconds``) and "bytes/state" the stored states, parent
and instance links and hash table divided by the states; "build" is C generation
plus compilation, CPU seconds (0 when the compiled search came from the cache). For the Python
backend both come from the child process (CPU time, peak RSS / states).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Row = tuple[str, int, int, bool, str]
STANDARD: list[Row] = [
    ("patched.py", 3, 4, False, "native"), ("patched.py", 3, 5, False, "native"),
    ("patched.py", 3, 6, False, "native"),
    ("patched.py", 3, 6, True, "native"), ("patched.py", 3, 8, True, "native"),
    ("patched.py", 4, 8, True, "native"),
    ("patched.py", 2, 8, False, "native"), ("patched.py", 2, 8, False, "python"),
    ("patched.py", 3, 6, True, "python"),
    ("buggy_pd.py", 3, 8, True, "native"), ("buggy_pd.py", 3, 8, True, "python"),
]
QUICK: list[Row] = [
    ("patched.py", 2, 8, False, "native"), ("patched.py", 2, 8, False, "python"),
    ("patched.py", 3, 6, True, "native"), ("patched.py", 3, 6, True, "python"),
]


def measure(model: str, requests: int | None, pages: int | None, symmetry: bool, backend: str,
            timeout: float, cache: str | None, *, model_class: str | None = None,
            max_states: int | None = None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "kvspec", "verify", str(ROOT / "models" / model), "--engine",
           "explicit", "--backend", backend, "--json", "--timeout", str(timeout)]
    if requests is not None and pages is not None:
        cmd += ["--size", f"requests={requests},pages={pages}"]
    if model_class is not None:
        cmd += ["--model-class", model_class]
    if max_states is not None:
        cmd += ["--max-states", str(max_states)]
    if not symmetry:
        cmd.append("--no-symmetry")
    env = dict(os.environ)
    if cache is not None:
        env["KVSPEC_CACHE_DIR"] = cache
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not proc.stdout.strip():
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["no output"]}
    stats = json.loads(proc.stdout)["stats"]
    ex = stats.get("native", {"backend": "python"})
    states = stats["states"]
    out = {"states": states, "complete": stats["explicit"]["complete"],
           "peak_mb": stats["peak_memory_mb"], "backend": ex["backend"], "child_cpu": child_cpu}
    if ex.get("backend") == "native":
        out["rate"] = ex["states_per_cpu_s"]
        out["bytes"] = ex["bytes_per_state"]
        build = ex["build"]
        out["build"] = 0.0 if build["cached"] else build["generate_cpu_seconds"] + \
            build["compile_cpu_seconds"]
        out["codegen"] = build["generate_cpu_seconds"]
        out["compile"] = build["compile_cpu_seconds"]
        out["cached"] = build["cached"]
    else:
        out["rate"] = states / child_cpu if child_cpu else 0.0
        out["bytes"] = stats["peak_memory_mb"] * 2 ** 20 / states if states else 0.0
        out["build"] = 0.0
    return out


def model_classes(path: Path) -> list[str]:
    """The Model classes a model file defines (deriving from Model or from one of its own)."""
    known, found = {"Model"}, []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id in known for b in node.bases):
            known.add(node.name)
            found.append(node.name)
    return found


def builds(timeout: float, max_states: int) -> None:
    """The build-time table: every shipped model class at its default sizes and at (3,8)."""
    cache = tempfile.mkdtemp(prefix="kvspec-bench-")
    files = sorted((ROOT / "models").glob("*.py")) + sorted((ROOT / "models" / "library").glob("*.py"))
    print(f"{'model':<44} {'size':>7} {'codegen s':>10} {'compile s':>10} {'build s':>8} "
          f"{'states/s CPU':>13}")
    worst = 0.0
    for path in files:
        for cls in model_classes(path):
            for size in (None, (3, 8)):
                name = f"{path.relative_to(ROOT / 'models')}:{cls}"
                r, p = size if size is not None else (None, None)
                res = measure(str(path.relative_to(ROOT / "models")), r, p, True, "native",
                              timeout, cache, model_class=cls, max_states=max_states)
                label = "default" if size is None else f"{r},{p}"
                if "error" in res or res.get("backend") != "native" or res.get("cached"):
                    print(f"{name:<44} {label:>7}  error: {res.get('error', res.get('backend'))}")
                    continue
                total = res["codegen"] + res["compile"]
                worst = max(worst, total)
                print(f"{name:<44} {label:>7} {res['codegen']:>10.2f} {res['compile']:>10.2f} "
                      f"{total:>8.2f} {res['rate']:>13,.0f}", flush=True)
    print(f"slowest build: {worst:.2f} CPU s (codegen + compile)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--fresh-cache", action="store_true",
                    help="compile every row (a temporary cache) to measure the build")
    ap.add_argument("--row", nargs=5, action="append", metavar=("MODEL", "R", "P", "SYM", "BACKEND"),
                    help="a row of your own: patched.py 3 5 nosym native")
    ap.add_argument("--builds", action="store_true",
                    help="the build-time table of every shipped model (see the docstring)")
    ap.add_argument("--build-states", type=int, default=300_000,
                    help="--builds: states searched per row for the rate (default 300000)")
    args = ap.parse_args(argv)
    if args.builds:
        builds(args.timeout, args.build_states)
        return 0
    rows = QUICK if args.quick else STANDARD
    if args.row:
        rows = [(m, int(r), int(p), s == "sym", b) for m, r, p, s, b in args.row]
    cache = tempfile.mkdtemp(prefix="kvspec-bench-") if args.fresh_cache else None
    print(f"{'model':<12} {'size':>6} {'sym':>5} {'backend':>7} {'states':>12} "
          f"{'states/s CPU':>13} {'B/state':>8} {'build s':>8} {'peak MB':>8}")
    for model, r, p, sym, backend in rows:
        res = measure(model, r, p, sym, backend, args.timeout, cache)
        size = f"{r},{p}"
        if "error" in res:
            print(f"{model:<12} {size:>6} {str(sym):>5} {backend:>7}  error: {res['error']}")
            continue
        states = f"{res['states']:,}" + ("" if res["complete"] else "*")
        print(f"{model:<12} {size:>6} {str(sym):>5} {res['backend']:>7} {states:>12} "
              f"{res['rate']:>13,.0f} {res['bytes']:>8.1f} {res['build']:>8.2f} "
              f"{res['peak_mb']:>8.0f}", flush=True)
    print("* search stopped by the timeout (not the whole state space)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
