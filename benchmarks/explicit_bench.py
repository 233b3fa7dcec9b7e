"""Explicit-engine benchmark: prints a table of states, states/s, time, peak memory
for models/patched.py and time-to-counterexample for the buggy models, with and
without symmetry reduction. Each configuration runs in a fresh process so that
peak memory is its own.

    python benchmarks/explicit_bench.py            # the standard table
    python benchmarks/explicit_bench.py --quick    # small sizes only
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZES = [(2, 4), (2, 8), (3, 8), (3, 12)]
QUICK = [(2, 4), (2, 8)]


def _run(model: str, requests: int, pages: int, symmetry: bool, timeout: float,
         out: "mp.Queue[dict[str, Any]]") -> None:
    sys.path.insert(0, str(ROOT))
    from kvspec.engines.explicit import Limits, explore
    from kvspec.lang.loader import load_model
    from kvspec.lang.system import compile_model

    system = compile_model(load_model(ROOT / "models" / model),
                           {"requests": requests, "pages": pages})
    start = time.monotonic()
    res = explore(system, symmetry=symmetry, limits=Limits(timeout=timeout))
    elapsed = time.monotonic() - start
    statuses = {v.status.value for v in res.verdicts}
    cex = [len(v.trace) for v in res.verdicts if v.trace is not None]
    out.put({"states": res.stats.states, "transitions": res.stats.transitions,
             "seconds": elapsed, "rate": res.stats.states_per_s,
             "memory": res.stats.peak_memory_mb, "statuses": statuses,
             "factor": res.stats.symmetry.get("reduction_factor"),
             "cex": min(cex) if cex else None})


def measure(model: str, requests: int, pages: int, symmetry: bool, timeout: float
            ) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q: "mp.Queue[dict[str, Any]]" = ctx.Queue()
    proc = ctx.Process(target=_run, args=(model, requests, pages, symmetry, timeout, q))
    proc.start()
    try:
        result = q.get(timeout=timeout + 120)
    except queue.Empty:
        result = {"error": "no result"}
    proc.join(5)
    if proc.is_alive():
        proc.kill()
    return result


def row(model: str, size: tuple[int, int], sym: bool, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {model} | {size} | {'on' if sym else 'off'} | {r['error']} | | | | | |"
    verdict = "UNKNOWN (timeout)" if "UNKNOWN" in r["statuses"] else \
        "VIOLATED" if "VIOLATED" in r["statuses"] else "HOLDS"
    cex = f"{r['seconds']:.2f} s ({r['cex']} steps)" if r["cex"] else "—"
    factor = f"×{r['factor']}" if r.get("factor") else "—"
    return (f"| {model} | {size[0]},{size[1]} | {'on' if sym else 'off'} | {verdict} | "
            f"{r['states']:,} | {r['rate']:,.0f} | {r['seconds']:.2f} | {cex} | "
            f"{r['memory']:.0f} | {factor} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--timeout", type=float, default=300.0, help="per configuration")
    args = parser.parse_args()
    sizes = QUICK if args.quick else SIZES
    print("| model | requests,pages | symmetry | verdict | states | states/s | time (s) | "
          "time to counterexample | peak MB | reduction |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in ("patched.py", "buggy_pd.py", "free_before_drain.py"):
        for size in sizes:
            for sym in (True, False):
                r = measure(model, size[0], size[1], sym, args.timeout)
                print(row(model, size, sym, r), flush=True)


if __name__ == "__main__":
    main()
