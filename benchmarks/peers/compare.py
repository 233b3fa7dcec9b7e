"""kvspec's explicit engine against SPIN on the same state spaces, interleaved.

    python benchmarks/peers/compare.py                       # python backend, 3 repeats
    python benchmarks/peers/compare.py --backend native --sizes 2x4,2x6,3x4 --repeat 5

For every size (``RxP``: requests x pages) it builds the SPIN verifier of
``patched.pml`` once (``spin -a``; ``gcc -O2 -DSAFETY -DNOREDUCE``; the build time is
reported on its own), then, ``--repeat`` times, runs SPIN's full search, kvspec's
without symmetry and kvspec's with symmetry one right after the other, rotating which
goes first, so that both tools see the same load on a shared machine. The time to the
first shortest counterexample is measured the same way on ``buggy_pd`` (SPIN in
breadth-first mode, ``-DBFS``; kvspec with ``--property``). Times are CPU seconds
(user + system of the child process), medians over the repeats. With a backend other
than ``python``, kvspec first runs each configuration once untimed, so that code it
builds and caches per model and sizes is built before the timed runs (that first
run's time is reported with SPIN's build times).

The script checks what it compares: the state and transition counts of the two
tools must be equal and the counterexamples equally long; otherwise it says
MISMATCH and exits 1. Exit 2: SPIN or the chosen kvspec backend is not available.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kvspec_cli  # noqa: E402
import spin_pan  # noqa: E402

MiB = 1024 * 1024


def parse_sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        r, sep, p = part.strip().lower().partition("x")
        if not sep or not r.isdigit() or not p.isdigit():
            raise argparse.ArgumentTypeError(f"size {part!r} is not REQUESTSxPAGES, e.g. 2x4")
        if not (1 <= int(r) <= 6 and 1 <= int(p) <= 12):
            raise argparse.ArgumentTypeError(f"size {part!r}: the Promela models take 1..6 "
                                             "requests and 1..12 pages")
        out.append((int(r), int(p)))
    return out


@dataclass
class Row:
    """One comparison: SPIN and kvspec CPU seconds per repeat, and what each found."""

    what: str
    size: str
    spin_cpu: list[float] = field(default_factory=list)
    kvspec_cpu: list[float] = field(default_factory=list)
    spin_count: int = 0          # states, or counterexample steps
    kvspec_count: int = 0
    unit: str = "states"
    must_match: bool = True
    consistent: bool = True      # further checks (transition counts) agreed
    notes: list[str] = field(default_factory=list)

    @property
    def spin(self) -> float:
        return statistics.median(self.spin_cpu)

    @property
    def kvspec(self) -> float:
        return statistics.median(self.kvspec_cpu)

    @property
    def matches(self) -> bool:
        return self.consistent and (not self.must_match or self.spin_count == self.kvspec_count)


def interleave(runs: list[Callable[[], None]], repeat: int) -> None:
    """Each repeat runs every measurement once, starting one further along each time."""
    for rep in range(repeat):
        k = rep % len(runs)
        for run in runs[k:] + runs[:k]:
            run()


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}" if seconds > 0 else "-"


def table(rows: list[Row], fixed: float) -> list[str]:
    lines = ["| measurement | size | kvspec / SPIN result | SPIN CPU s | kvspec CPU s | "
             "kvspec/SPIN | SPIN states/s | kvspec states/s | kvspec/SPIN w/o fixed cost |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        sep = "=" if r.matches and r.must_match else ("/" if not r.must_match else "≠")
        result = f"{r.kvspec_count:,} {sep} {r.spin_count:,} {r.unit}"
        if not r.matches:
            result += " **MISMATCH**"
        states = r.unit == "states"
        lines.append(f"| {r.what} | {r.size} | {result} | {r.spin:.3f} | {r.kvspec:.3f} | "
                     f"{r.kvspec / r.spin:.1f} | "
                     f"{rate(r.spin_count, r.spin) if states else '-'} | "
                     f"{rate(r.kvspec_count, r.kvspec) if states else '-'} | "
                     f"{max(0.0, r.kvspec - fixed) / r.spin:.1f} |")
    return lines


def spin_version() -> str:
    out = subprocess.run(["spin", "-V"], capture_output=True, text=True).stdout.strip()
    return out.split(" -- ")[0] if out else "spin"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=kvspec_cli.BACKENDS, default="python",
                    help="kvspec's explicit-engine backend (default python)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved repeats (median)")
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("2x3,2x4,2x5"),
                    help="RxP sizes of the full-space rows (default 2x3,2x4,2x5)")
    ap.add_argument("--cex-size", type=parse_sizes, default=None,
                    help="size of the counterexample row (default: the last of --sizes)")
    ap.add_argument("--cex-property", default="no-read-beyond-written",
                    choices=sorted(spin_pan.PROPERTY_MACROS),
                    help="the buggy_pd property whose first counterexample is timed")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per tool run")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw numbers here")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if not spin_pan.available():
        print("compare: spin and gcc are needed (Debian: apt-get install -y spin gcc)",
              file=sys.stderr)
        return 2
    try:
        backend = kvspec_cli.backend_option(args.backend)
    except kvspec_cli.KvspecError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    cex_size = (args.cex_size or args.sizes[-1:])[0]

    try:
        return _compare(args, backend, cex_size)
    except (spin_pan.SpinError, kvspec_cli.KvspecError, subprocess.TimeoutExpired) as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2


class Session:
    """One comparison run: the kvspec backend, the work directory for pan, and what
    was measured so far (rows, builds, bytes per state, raw numbers)."""

    def __init__(self, args: argparse.Namespace, backend: list[str], work: Path) -> None:
        self.args = args
        self.backend = backend
        self.work = work
        self.timeout: float | None = args.timeout
        self.rows: list[Row] = []
        self.builds: list[str] = []
        self.memory: list[str] = []
        self.raw: dict[str, Any] = {"backend": args.backend, "repeat": args.repeat,
                                    "runs": []}
        self.fixed = 0.0
        self.baseline: kvspec_cli.KvspecRun | None = None

    def kvspec(self, model: str, r: int, p: int, *, symmetry: bool,
               properties: list[str] | None = None) -> kvspec_cli.KvspecRun:
        return kvspec_cli.run(model, r, p, symmetry=symmetry, backend=self.backend,
                              properties=properties, timeout=self.timeout)

    def warm_up(self, runs: dict[str, Callable[[], kvspec_cli.KvspecRun]]) -> None:
        """With a backend other than python, one untimed run of each configuration, so
        that code the backend builds and caches per model and sizes is built before the
        timed runs (reported with SPIN's build, apart from them)."""
        if self.args.backend == "python":
            return
        for label, run in runs.items():
            res = run()
            self.builds.append(f"kvspec {label}: first (untimed) run {res.cpu:.2f} s CPU, "
                               "building and caching included")

    def record(self, tool: str, size: str, **numbers: Any) -> None:
        self.raw["runs"].append({"tool": tool, "size": size, **numbers})

    def fixed_cost(self) -> None:
        """kvspec's CPU time at requests=1, pages=1: interpreter start, model compile."""
        self.warm_up({"patched 1x1": lambda: self.kvspec("patched", 1, 1, symmetry=False)})
        runs = [self.kvspec("patched", 1, 1, symmetry=False) for _ in range(self.args.repeat)]
        self.baseline = runs[-1]
        self.fixed = statistics.median(b.cpu for b in runs)

    def full_space(self, r: int, p: int) -> None:
        """SPIN's full search, kvspec's without and with symmetry, interleaved."""
        size = f"{r}x{p}"
        pan = spin_pan.build("patched", r, p, self.work / f"full-{size}")
        self.builds.append(f"patched {size}: spin -a {pan.spin_cpu:.2f} s, "
                           f"gcc -O2 {pan.compile_cpu:.2f} s")
        bits = spin_pan.hash_bits(spin_pan.run(pan, bits=22, timeout=self.timeout).states)
        full = Row("full state space, no symmetry", size)
        sym = Row("kvspec symmetry vs SPIN none", size, must_match=False)
        last: dict[str, Any] = {}

        def spin_run() -> None:
            res = spin_pan.run(pan, bits=bits, timeout=self.timeout)
            full.spin_cpu.append(res.cpu)
            sym.spin_cpu.append(res.cpu)
            full.spin_count = sym.spin_count = res.states
            last["spin"] = res
            self.record("spin", size, states=res.states, transitions=res.transitions,
                        cpu=res.cpu)

        def kvspec_run() -> None:
            res = self.kvspec("patched", r, p, symmetry=False)
            full.kvspec_cpu.append(res.cpu)
            full.kvspec_count = res.states
            last["kvspec"] = res
            self.record("kvspec", size, **asdict(res))

        def kvspec_symmetric() -> None:
            res = self.kvspec("patched", r, p, symmetry=True)
            sym.kvspec_cpu.append(res.cpu)
            sym.kvspec_count = res.states
            if res.reduction_factor:
                sym.notes = [f"reduction factor {res.reduction_factor}"]
            self.record("kvspec-symmetry", size, **asdict(res))

        self.warm_up({
            f"patched {size}, no symmetry": lambda: self.kvspec("patched", r, p,
                                                                symmetry=False),
            f"patched {size}, symmetry": lambda: self.kvspec("patched", r, p, symmetry=True)})
        interleave([spin_run, kvspec_run, kvspec_symmetric], self.args.repeat)
        s, k = last["spin"], last["kvspec"]
        if k.transitions != s.transitions - 1:  # pan counts the initial state as one
            full.notes.append(f"transitions kvspec {k.transitions:,} vs SPIN "
                              f"{s.transitions:,} - 1 **MISMATCH**")
            full.consistent = False
        self.rows += [full, sym]
        assert self.baseline is not None
        self.memory.append(_memory_row(size, s, k, self.baseline))

    def counterexample(self, r: int, p: int, prop: str) -> None:
        """The first shortest violation of ``prop`` in buggy_pd: SPIN breadth-first."""
        size = f"{r}x{p}"
        pan = spin_pan.build("buggy_pd", r, p, self.work / f"cex-{size}",
                             properties=[prop], stop_at_violation=True, bfs=True)
        self.builds.append(f"buggy_pd {size} (BFS, {prop}): spin -a {pan.spin_cpu:.2f} s, "
                           f"gcc -O2 {pan.compile_cpu:.2f} s")
        cex = Row(f"first shortest counterexample, buggy_pd {prop}", size, unit="steps")

        def spin_run() -> None:
            res = spin_pan.run(pan, bits=20, timeout=self.timeout)
            if res.counterexample_steps is None:
                raise spin_pan.SpinError(f"SPIN found no violation of {prop}")
            cex.spin_cpu.append(res.cpu)
            cex.spin_count = res.counterexample_steps
            self.record("spin-cex", size, cpu=res.cpu, steps=cex.spin_count)

        def kvspec_run() -> None:
            res = self.kvspec("buggy_pd", r, p, symmetry=False, properties=[prop])
            if prop not in res.steps:
                raise kvspec_cli.KvspecError(f"kvspec found no violation of {prop}")
            cex.kvspec_cpu.append(res.cpu)
            cex.kvspec_count = res.steps[prop]
            self.record("kvspec-cex", size, **asdict(res))

        self.warm_up({f"buggy_pd {size} ({prop})": lambda: self.kvspec(
            "buggy_pd", r, p, symmetry=False, properties=[prop])})
        interleave([spin_run, kvspec_run], self.args.repeat)
        self.rows.append(cex)

    def report(self) -> int:
        args, rows = self.args, self.rows
        print(f"{spin_version()} (gcc -O2 -DSAFETY -DNOREDUCE, pan -w<2x states>) vs kvspec "
              f"explicit, backend {args.backend}; CPU seconds (user+sys), median of "
              f"{args.repeat} interleaved runs\n")
        print("\n".join(table(rows, self.fixed)))
        print(f"\nkvspec's fixed cost, the CPU time of the same command at requests=1, "
              f"pages=1 (interpreter start, model compilation): {self.fixed:.2f} s; the "
              "last column leaves it out.")
        notes = [f"{r.what} {r.size}: {n}" for r in rows for n in r.notes]
        if notes:
            print("\n" + "\n".join(f"- {n}" for n in notes))
        print("\nBytes per state (last run of each size):\n")
        print("| size | SPIN state storage | SPIN total | kvspec peak RSS | kvspec peak RSS "
              "above a 1-request run | kvspec/SPIN (total) |")
        print("|---|---:|---:|---:|---:|---:|")
        print("\n".join(self.memory))
        print("\nBuilds, once per configuration (not in the times above):\n")
        print("\n".join(f"- {b}" for b in self.builds))
        reported = sorted({str(run["backend"]) for run in self.raw["runs"]
                           if run["tool"].startswith("kvspec") and run.get("backend")})
        if reported:
            print(f"\nkvspec's result documents name the backend: {', '.join(reported)}")
            if reported != [args.backend]:
                print(f"compare: warning: asked for the {args.backend} backend, kvspec "
                      f"reports {', '.join(reported)}", file=sys.stderr)
        if args.json is not None:
            self.raw["rows"] = [asdict(r) | {"spin_median": r.spin,
                                             "kvspec_median": r.kvspec} for r in rows]
            args.json.write_text(json.dumps(self.raw, indent=1))
        if not all(r.matches for r in rows):
            print("\ncompare: MISMATCH: the two tools did not explore the same state space",
                  file=sys.stderr)
            return 1
        return 0


def _compare(args: argparse.Namespace, backend: list[str], cex_size: tuple[int, int]) -> int:
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        session = Session(args, backend, Path(tmp))
        session.fixed_cost()
        for r, p in args.sizes:
            session.full_space(r, p)
        session.counterexample(*cex_size, args.cex_property)
    return session.report()


def _memory_row(size: str, s: spin_pan.SpinRun, k: kvspec_cli.KvspecRun,
                baseline: kvspec_cli.KvspecRun) -> str:
    spin_store = s.state_memory_mb * MiB / s.states
    spin_total = s.total_memory_mb * MiB / s.states
    kv_total = k.peak_memory_mb * MiB / k.states
    kv_above = max(0.0, k.peak_memory_mb - baseline.peak_memory_mb) * MiB / k.states
    return (f"| {size} | {spin_store:,.0f} | {spin_total:,.0f} | {kv_total:,.0f} | "
            f"{kv_above:,.0f} | {kv_total / spin_total:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
