"""Benchmark of ``kvspec audit``: audit ~1,000,000 generated events, print events/s and
memory (peak RSS, and the current RSS at each quarter of the log: flat means constant
memory in the log length).

    python benchmarks/audit_bench.py [--events 1000000] [--no-conformance] [--keep FILE]

The log is written by the simulated engine (kvspec.audit.simulate, fixed policy,
without tensors) to a temporary file first; only the audit is timed.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from kvspec.audit.mapping import Mapping
from kvspec.audit.run import audit_file
from kvspec.audit.simulate import SimConfig, simulate
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model

ROOT = Path(__file__).resolve().parent.parent
EVENTS_PER_REQUEST = 6.97  # of the fixed policy with the default rates (measured)


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--no-conformance", action="store_true")
    ap.add_argument("--keep", help="write the generated log here and keep it")
    args = ap.parse_args()
    path = Path(args.keep) if args.keep else Path(tempfile.mkstemp(suffix=".jsonl")[1])
    requests = int(args.events / EVENTS_PER_REQUEST) + 1
    t0 = time.perf_counter()
    with path.open("w") as f:
        lines = simulate(SimConfig(policy="patched", requests=requests, seed=1, tensors=False,
                                   concurrency=6), f)
    print(f"generated {lines:,} lines ({path.stat().st_size / 2**20:.0f} MB) in "
          f"{time.perf_counter() - t0:.1f} s")
    system = None
    if not args.no_conformance:
        system = compile_model(load_model(ROOT / "models" / "patched.py"),
                               {"requests": 12, "pages": 32}, [])
    marks: list[tuple[int, float]] = []
    quarter = [args.events // 4]

    def progress(events: int, _lines: int, _s: float, _live: int) -> None:
        if events >= quarter[0]:
            marks.append((events, rss_mb()))
            quarter[0] += args.events // 4

    base = rss_mb()
    t0 = time.perf_counter()
    result = audit_file(path, Mapping(), system=system, model_file="models/patched.py",
                        progress=progress)
    seconds = time.perf_counter() - t0
    if not args.keep:
        path.unlink()
    ev = result.stats["events"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"audited {ev:,} events in {seconds:.1f} s: {ev / seconds:,.0f} events/s "
          f"(conformance {'off' if system is None else 'on'}), exit code {result.exit_code}")
    print(f"memory: RSS before {base:.0f} MB, at each quarter "
          + ", ".join(f"{m:.0f} MB @ {e:,}" for e, m in marks) + f"; peak RSS {peak:.0f} MB")
    print(f"peak live requests {result.stats['peak_live_requests']}, monitor ids "
          f"{result.stats['monitor_peak_requests']} requests / "
          f"{result.stats['monitor_peak_pages']} pages, conformance "
          f"{result.conformance_status} (peak {result.conformance_peak} model states)")
    return 0 if result.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
