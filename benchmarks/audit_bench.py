"""Benchmark of ``kvspec audit``: audit generated logs of 100,000 and 1,000,000 events
(properties, acceptance checks and conformance to models/patched.py), print the CPU time,
events per CPU second and memory: peak RSS of each run and the RSS at each quarter of
the log. Flat memory means the same peak at 100k and 1M events.

    python benchmarks/audit_bench.py [--events 100000,1000000] [--no-conformance]
                                     [--keep DIR] [--log FILE]

Each size runs in a fresh process (so its peak RSS is its own). The log is written by
the simulated engine (kvspec.audit.simulate, fixed policy, without tensors) to a
temporary file first; only the audit is timed, in CPU seconds (time.process_time: the
machine may be shared). Exit code 0 when every audit passes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVENTS_PER_REQUEST = 6.97  # of the fixed policy with the default rates (measured)


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def generate(events: int, path: Path) -> int:
    from kvspec.audit.simulate import SimConfig, simulate
    requests = int(events / EVENTS_PER_REQUEST) + 1
    with path.open("w") as f:
        return simulate(SimConfig(policy="patched", requests=requests, seed=1, tensors=False,
                                  concurrency=6), f)


def run_one(log: Path, events: int, conformance: bool) -> dict[str, object]:
    """Audit ``log`` in this process; the measurements as a dict."""
    from kvspec.audit.mapping import Mapping
    from kvspec.audit.run import audit_file
    from kvspec.lang.loader import load_model
    from kvspec.lang.system import compile_model

    system = None
    if conformance:
        system = compile_model(load_model(ROOT / "models" / "patched.py"),
                               {"requests": 12, "pages": 32}, [])
    marks: list[tuple[int, float]] = []
    quarter = [events // 4]

    def progress(n: int, _lines: int, _s: float, _live: int) -> None:
        if n >= quarter[0] and len(marks) < 3:
            marks.append((n, rss_mb()))
            quarter[0] += events // 4

    base = rss_mb()
    cpu = time.process_time()
    result = audit_file(log, Mapping(), system=system, model_file="models/patched.py",
                        progress=progress)
    cpu = time.process_time() - cpu
    marks.append((result.stats["events"], rss_mb()))  # at the end
    return {"events": result.stats["events"], "cpu_s": round(cpu, 1),
            "rss_before_mb": round(base), "rss_quarters_mb": [round(m) for _, m in marks],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "exit_code": result.exit_code, "conformance": result.conformance_status,
            "peak_states": result.conformance_peak,
            "rejected_exact": result.stats["rejected_ids_exact"],
            "rejected_filtered": result.stats["rejected_ids_filtered"],
            "summary": result.summary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", default="100000,1000000",
                    help="comma-separated log sizes (default 100000,1000000)")
    ap.add_argument("--no-conformance", action="store_true")
    ap.add_argument("--keep", help="write the generated logs into this folder and keep them")
    ap.add_argument("--log", help=argparse.SUPPRESS)  # internal: audit this log, print JSON
    args = ap.parse_args()
    sizes = [int(x) for x in args.events.split(",")]
    if args.log:
        print(json.dumps(run_one(Path(args.log), sizes[0], not args.no_conformance)))
        return 0
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="audit-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    failed = False
    print(f"{'events':>10} {'CPU s':>7} {'events/CPU s':>13} {'peak RSS':>9}  "
          f"RSS at 1/4, 1/2, 3/4, end       rejected ids (exact + filter)  conformance")
    for n in sizes:
        log = folder / f"patched-{n}.jsonl"
        if not log.exists():
            generate(n, log)
        cmd = [sys.executable, __file__, "--log", str(log), "--events", str(n)]
        if args.no_conformance:
            cmd.append("--no-conformance")
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 2
        r = json.loads(out.stdout)
        quarters = ", ".join(f"{m} MB" for m in r["rss_quarters_mb"])
        conf = "off" if args.no_conformance else f"{r['conformance']} ({r['peak_states']} states)"
        print(f"{r['events']:>10,} {r['cpu_s']:>7.1f} {r['events'] / max(r['cpu_s'], 1e-9):>13,.0f} "
              f"{r['peak_rss_mb']:>6} MB  {quarters:<30} "
              f"{r['rejected_exact']:,} + {r['rejected_filtered']:,}{'':<12} {conf}")
        failed |= r["exit_code"] != 0
        if not args.keep:
            log.unlink()
    if not args.keep:
        folder.rmdir()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
