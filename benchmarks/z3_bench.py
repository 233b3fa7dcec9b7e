"""Z3-engine benchmark: BMC time per depth, k-induction, PDR proof time and
certificate re-check time for models/patched.py, and BMC time to the first (and
last) counterexample for the buggy models, at (requests, pages) = (2,4), (2,8),
(3,8), (3,16), (4,16). Each measurement runs in a fresh process.

    python benchmarks/z3_bench.py              # the standard tables
    python benchmarks/z3_bench.py --quick      # (2,4) and (2,8) only
    python benchmarks/z3_bench.py --encodings  # also BMC with the integer encoding
    python benchmarks/z3_bench.py --spacer     # also PDR without inference (Spacer alone)
    python benchmarks/z3_bench.py --ic3        # also Spacer vs our IC3 on small sizes
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZES = [(2, 4), (2, 8), (3, 8), (3, 16), (4, 16)]
QUICK = [(2, 4), (2, 8)]
BUGGY = ["buggy_pd.py", "free_before_drain.py"]
BMC_DEPTHS = (5, 10, 15)


def _system(model: str, requests: int, pages: int) -> Any:
    sys.path.insert(0, str(ROOT))
    from kvspec.lang.loader import load_model
    from kvspec.lang.system import compile_model

    return compile_model(load_model(ROOT / "models" / model),
                         {"requests": requests, "pages": pages})


# -- measurements (each in its own process) ------------------------------------------------

def bmc_depths(model: str, r: int, p: int, budget: float, encoding: str = "bv") -> dict[str, Any]:
    """Cumulative seconds to check every depth up to 15 (properties that hold)."""
    import z3

    from kvspec.engines.bmc import Deadline, Unroller, build

    start = time.monotonic()
    system = _system(model, r, p)
    ts = build(system, symmetry=True, encoding=encoding)
    setup = time.monotonic() - start
    unroller = Unroller(ts)
    deadline = Deadline(budget)
    times: dict[str, Any] = {"setup": setup, "encoding": ts.encoding}
    for k in range(1, max(BMC_DEPTHS) + 1):
        unroller.extend()
        bad = z3.Or(*[ts.bad(prop, ts.frame(k)) for prop in system.properties])
        res = unroller.check(bad, deadline)
        if res == z3.unknown:
            break
        times[f"d{k}"] = time.monotonic() - start
        times["reached"] = k
    return times


def kind(model: str, r: int, p: int, budget: float) -> dict[str, Any]:
    from kvspec.engines.kind import run_kind

    start = time.monotonic()
    out = run_kind(_system(model, r, p), max_k=8, timeout=budget)
    return {"seconds": time.monotonic() - start,
            "verdict": sorted({v.headline() for v in out.verdicts})}


def pdr(model: str, r: int, p: int, budget: float, inference: bool = True) -> dict[str, Any]:
    from kvspec.engines.pdr import run_pdr

    start = time.monotonic()
    system = _system(model, r, p)
    tmp = Path(tempfile.mkdtemp(prefix="kvspec-bench-"))
    out = run_pdr(system, timeout=budget, save_proof=True, proofs_dir=tmp, inference=inference)
    seconds = time.monotonic() - start
    extra = out.stats.extra.get("pdr", {})
    return {"seconds": seconds, "verdict": sorted({v.headline().split(", saved")[0]
                                                   for v in out.verdicts}),
            "certificate": extra.get("certificate"), "details": extra}


def recheck(model: str, r: int, p: int, certificate: str) -> dict[str, Any]:
    from kvspec.proofs.certificate import check_certificate

    start = time.monotonic()
    system = _system(model, r, p)
    check = check_certificate(Path(certificate), system)
    return {"seconds": time.monotonic() - start, "ok": check.ok, "check": check.seconds,
            "clauses": check.clauses}


def first_cex(model: str, r: int, p: int, budget: float) -> dict[str, Any]:
    """Seconds (from loading the model) to the first and to the last violation."""
    from kvspec.engines.bmc import Deadline, Search, build

    start = time.monotonic()
    system = _system(model, r, p)
    deadline = Deadline(budget)
    search = Search(system, build(system, symmetry=True), deadline, "bmc")
    pending = list(system.properties)
    verdicts: dict[str, Any] = {}
    first = last = None
    lengths: list[int] = []
    while pending and not deadline.expired() and search.depth < 14:
        n = len(pending)
        if not search.deepen(pending, verdicts, max_depth=search.depth + 1,
                             until=deadline.end or float("inf")):
            break
        if len(pending) < n:
            now = time.monotonic() - start
            first = now if first is None else first
            last = now
            lengths = sorted(len(v.trace) for v in verdicts.values())
    return {"first": first, "last": last, "lengths": lengths, "depth": search.depth}


def prover(model: str, r: int, p: int, props: list[str], which: str, budget: float
           ) -> dict[str, Any]:
    """Spacer vs our IC3 alone (no inference, no BMC) on ``props``."""
    import z3

    from kvspec.engines.pdr import ic3, spacer
    from kvspec.engines.transition import TransitionSystem
    from kvspec.lang.loader import load_model
    from kvspec.lang.system import compile_model

    system = compile_model(load_model(ROOT / "models" / model),
                           {"requests": r, "pages": p}, props)
    ts = TransitionSystem(system, "int")
    bad = z3.Or(*[ts.bad(q) for q in system.properties], ts.any_error())
    start = time.monotonic()
    fn = ic3 if which == "ic3" else spacer
    res, _ = fn(ts, [], bad, int(budget * 1000))
    return {"seconds": time.monotonic() - start, "result": str(res)}


# -- process plumbing ----------------------------------------------------------------------

def _child(fn: Callable[..., dict[str, Any]], args: tuple[Any, ...], q: mp.Queue[Any]) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        q.put(fn(*args))
    except Exception as exc:  # noqa: BLE001 - reported in the table
        q.put({"error": f"{type(exc).__name__}: {exc}"})


def run(fn: Callable[..., dict[str, Any]], *args: Any, limit: float = 600) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q: mp.Queue[Any] = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, q))
    proc.start()
    try:
        result = q.get(timeout=limit)
    except queue.Empty:
        result = {"error": f"no result within {limit:.0f} s"}
    proc.join(5)
    if proc.is_alive():
        proc.kill()
    return result


def _t(x: Any) -> str:
    return "—" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--encodings", action="store_true")
    ap.add_argument("--spacer", action="store_true")
    ap.add_argument("--ic3", action="store_true", help="also Spacer vs our IC3, alone")
    ap.add_argument("--only-extras", action="store_true",
                    help="skip the two standard tables (with --encodings/--spacer/--ic3)")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds per measurement")
    args = ap.parse_args()
    sizes = QUICK if args.quick else SIZES
    print(f"# kvspec Z3 engines — {time.strftime('%Y-%m-%d')}\n")
    if not args.only_extras:
        standard_tables(sizes, args.budget)
    extras(args, sizes)


def standard_tables(sizes: list[tuple[int, int]], budget: float) -> None:
    print("## models/patched.py\n")
    print("| requests,pages | BMC d5 (s) | BMC d10 (s) | BMC d15 (s) | k-induction | "
          "PDR proof (s) | invariant | certificate re-check (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for r, p in sizes:
        b = run(bmc_depths, "patched.py", r, p, budget)
        k = run(kind, "patched.py", r, p, min(60.0, budget))
        d = run(pdr, "patched.py", r, p, budget)
        c = run(recheck, "patched.py", r, p, d["certificate"]) if d.get("certificate") else {}
        verdict = "; ".join(k.get("verdict", [k.get("error", "?")]))
        inv = "; ".join(d.get("verdict", [d.get("error", "?")]))
        print(f"| {r},{p} | {_t(b.get('d5'))} | {_t(b.get('d10'))} | {_t(b.get('d15'))} "
              f"(reached {b.get('reached', '?')}) | {verdict} ({_t(k.get('seconds'))} s) | "
              f"{_t(d.get('seconds'))} | {inv} | {_t(c.get('seconds'))} "
              f"({'ok' if c.get('ok') else 'FAILED'}) |", flush=True)
    print("\n## Buggy models: BMC time to the first / last counterexample\n")
    print("| model | requests,pages | first cex (s) | all violations (s) | shortest lengths |")
    print("|---|---|---|---|---|")
    for model in BUGGY:
        for r, p in sizes:
            f = run(first_cex, model, r, p, budget)
            print(f"| {model} | {r},{p} | {_t(f.get('first'))} | {_t(f.get('last'))} | "
                  f"{f.get('lengths', f.get('error'))} |", flush=True)


def extras(args: argparse.Namespace, sizes: list[tuple[int, int]]) -> None:
    if args.encodings:
        print("\n## BMC encodings (patched.py, cumulative seconds to depth d)\n")
        print("| requests,pages | encoding | setup | d5 | d10 | d15 |")
        print("|---|---|---|---|---|---|")
        for r, p in sizes[:3]:
            for enc in ("bv", "int"):
                b = run(bmc_depths, "patched.py", r, p, args.budget, enc)
                print(f"| {r},{p} | {enc} | {_t(b.get('setup'))} | {_t(b.get('d5'))} | "
                      f"{_t(b.get('d10'))} | {_t(b.get('d15'))} |", flush=True)
    if args.ic3:
        print("\n## Spacer vs our IC3, alone (no inference), small configurations\n")
        print("| model | requests,pages | properties | Spacer (s) | IC3 (s) |")
        print("|---|---|---|---|---|")
        for model, r, p, props in (("single_node.py", 2, 2, []),
                                   ("patched.py", 1, 2, ["no-reuse-before-drain"]),
                                   ("patched.py", 2, 2, ["no-reuse-before-drain"])):
            a = run(prover, model, r, p, props, "spacer", args.budget)
            b = run(prover, model, r, p, props, "ic3", args.budget)
            print(f"| {model} | {r},{p} | {', '.join(props) or 'all'} | {_t(a.get('seconds'))} "
                  f"({a.get('result', a.get('error'))}) | {_t(b.get('seconds'))} "
                  f"({b.get('result', b.get('error'))}) |", flush=True)
    if args.spacer:
        print("\n## PDR with and without template inference (patched.py)\n")
        print("| requests,pages | inference + Spacer (s) | Spacer alone (s) |")
        print("|---|---|---|")
        for r, p in sizes[:2]:
            a = run(pdr, "patched.py", r, p, args.budget, True)
            b = run(pdr, "patched.py", r, p, args.budget, False)
            print(f"| {r},{p} | {_t(a.get('seconds'))} {a.get('verdict')} | "
                  f"{_t(b.get('seconds'))} {b.get('verdict')} |", flush=True)


if __name__ == "__main__":
    main()
