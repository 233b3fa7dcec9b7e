"""Native vs Python explicit backend: states, states per CPU-second, bytes per state,
build time. Every row runs ``python -m kvspec verify --engine explicit --json`` in a
fresh process (its own peak memory); CPU time is the child's own (this machine is
shared, so wall time says little).

    python benchmarks/native_bench.py             # the standard table
    python benchmarks/native_bench.py --quick     # small sizes only
    python benchmarks/native_bench.py --row patched.py 3 5 nosym native

For the native backend, "states/s CPU" is the search loop's own CPU time (from the
JSON, ``stats.native.cpu_seconds``) and "bytes/state" the stored states, parent
and instance links and hash table divided by the states; "build" is C generation
plus compilation, CPU seconds (0 when the compiled search came from the cache). For the Python
backend both come from the child process (CPU time, peak RSS / states).
"""
from __future__ import annotations

import argparse
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


def measure(model: str, requests: int, pages: int, symmetry: bool, backend: str,
            timeout: float, cache: str | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "kvspec", "verify", str(ROOT / "models" / model), "--engine",
           "explicit", "--backend", backend, "--json", "--timeout", str(timeout),
           "--size", f"requests={requests},pages={pages}"]
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
    else:
        out["rate"] = states / child_cpu if child_cpu else 0.0
        out["bytes"] = stats["peak_memory_mb"] * 2 ** 20 / states if states else 0.0
        out["build"] = 0.0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--fresh-cache", action="store_true",
                    help="compile every row (a temporary cache) to measure the build")
    ap.add_argument("--row", nargs=5, action="append", metavar=("MODEL", "R", "P", "SYM", "BACKEND"),
                    help="a row of your own: patched.py 3 5 nosym native")
    args = ap.parse_args(argv)
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
