"""Benchmark the tensor page pool (copy bandwidth of post+land, replay time per step) and
the fuzzing engine that feeds it (model steps per second at requests=8, pages=64).

    python benchmarks/pool_bench.py [--device auto|cpu|cuda] [--pages 512] [--page-size 16]
                                    [--heads 8] [--head-dim 128] [--rounds 3] [--steps 100]
                                    [--fuzz-examples 20]

Prints one table.  Bandwidth counts the K/V payload of every page once (the pool copies
it twice: prefill page -> staging at post, staging -> decode page at landing).  GPU
timings are bracketed by ``torch.cuda.synchronize``.  The fuzz rows run
``kvspec fuzz``'s engine on models/patched.py (no violation: every example runs its
50 steps) and on models/buggy_pd.py (time to a shrunk counterexample);
``--fuzz-examples 0`` skips them.  Runs in well under a minute on CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

try:
    from kvspec.pool import PagePool, PoolConfig, replay_trace
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kvspec.pool import PagePool, PoolConfig, replay_trace


def _sync(pool: PagePool) -> None:
    pool.synchronize()


def copy_bandwidth(device: str, pages: int, page_size: int, heads: int, head_dim: int,
                   rounds: int) -> tuple[str, float, float]:
    """(device, GB/s, seconds per round) for posting and landing ``pages`` pages, ``rounds`` times."""
    pool = PagePool(PoolConfig(pages=pages, page_size=page_size, heads=heads, head_dim=head_dim,
                               device=device, prefill_pages=pages))
    for p in range(pages):
        pool.alloc(0, p)

    def one_round() -> float:
        _sync(pool)
        start = time.perf_counter()
        for p in range(pages):
            pool.post_write(0, p)
        for p in range(pages):
            pool.land_write(0, p)
        _sync(pool)
        return time.perf_counter() - start

    one_round()  # warm-up: fills the prefill pool, allocator caches, kernels
    seconds = min(one_round() for _ in range(rounds))
    payload = 2 * pages * page_size * heads * head_dim * pool.k.element_size()
    return str(pool.device), payload / seconds / 1e9, seconds


def synthetic_trace(steps: int, requests: int = 2, pages: int = 8) -> dict[str, Any]:
    """A clean lifecycle cycled until ``steps`` steps: alloc+post, land, decode, free."""
    per_request = pages // requests
    out: list[dict[str, Any]] = []

    def ev(kind: str, r: int, p: int | None = None) -> dict[str, Any]:
        return {"kind": kind, "request": f"r{r}", "page": p}

    phase = 0
    while len(out) < steps:
        r = (phase // 4) % requests
        mine = range(r * per_request, (r + 1) * per_request)
        stage = phase % 4
        if stage == 0:
            events = [ev("admit", r)] + [e for p in mine for e in (ev("alloc", r, p), ev("post_write", r, p))]
        elif stage == 1:
            events = [ev("land_write", r, p) for p in mine]
        elif stage == 2:
            events = [ev("read", r, p) for p in mine] + [ev("decode", r)]
        else:
            events = [ev("finish", r)] + [ev("free", r, p) for p in mine]
        out.append({"index": len(out) + 1, "label": f"stage{stage}(r{r})", "events": events})
        phase += 1
    return {"format": "kvspec-trace/1", "sizes": {"requests": requests, "pages": pages}, "steps": out}


def replay_time(device: str, steps: int) -> tuple[float, bool]:
    """(milliseconds per step, leaked) for replaying the synthetic trace."""
    trace = synthetic_trace(steps)
    replay_trace(trace, device=device)  # warm-up
    start = time.perf_counter()
    report = replay_trace(trace, device=device)
    elapsed = time.perf_counter() - start
    return elapsed / steps * 1e3, report.leaked


def fuzz_rate(model: str, examples: int, steps: int = 50) -> tuple[float, int, float, str]:
    """(model steps per second, steps, seconds, verdict text) of a fuzz run at 8 x 64."""
    from kvspec.engines.fuzz import run_fuzz
    from kvspec.testing import load

    root = Path(__file__).resolve().parents[1]
    props = None if "patched" in model else ["no-read-beyond-written"]
    system = load(root / "models" / model, sizes={"requests": 8, "pages": 64}, properties=props)
    start = time.perf_counter()
    outcome = run_fuzz(system, max_examples=examples, steps=steps, seed=0)
    seconds = time.perf_counter() - start
    v = outcome.verdicts[0]
    return outcome.stats.states / seconds, outcome.stats.states, seconds, v.headline()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--pages", type=int, default=512)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--fuzz-examples", type=int, default=20)
    args = parser.parse_args(argv)

    try:
        dev, gbps, secs = copy_bandwidth(args.device, args.pages, args.page_size, args.heads,
                                         args.head_dim, args.rounds)
        ms_per_step, leaked = replay_time(args.device, args.steps)
    except ValueError as exc:  # PoolError / ReplayError: bad device or sizes
        print(f"pool_bench: {exc}", file=sys.stderr)
        return 2
    shape = f"[{args.page_size}, {args.heads}, {args.head_dim}]"
    rows = [
        ("device", dev),
        ("torch", torch.__version__),
        ("page shape [page_size, heads, head_dim]", f"{shape} float32"),
        (f"post+land {args.pages} pages (K+V payload)", f"{gbps:.2f} GB/s ({secs * 1e3:.1f} ms/round)"),
        (f"replay, synthetic {args.steps}-step trace", f"{ms_per_step:.3f} ms/step (leaked={leaked})"),
    ]
    if args.fuzz_examples > 0:
        rate, n, secs, _ = fuzz_rate("patched.py", args.fuzz_examples)
        rows.append((f"fuzz patched 8x64, {args.fuzz_examples} examples x 50",
                     f"{rate:,.0f} model steps/s ({n:,} steps, {secs:.1f} s)"))
        _, n, secs, verdict = fuzz_rate("buggy_pd.py", args.fuzz_examples)
        rows.append(("fuzz buggy_pd 8x64, no-read-beyond-written", f"{verdict} in {secs:.1f} s"))
    width = max(len(k) for k, _ in rows)
    print(f"{'metric':<{width}}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
