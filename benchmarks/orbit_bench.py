"""Size-specific proofs at large sizes: ``--engine pdr`` (small-size clauses checked one
orbit at a time) and the re-check of the certificate it writes, in CPU seconds: as
``check-proof`` does it (the representatives' exact reading for every size first,
:mod:`kvspec.proofs.lifted`; the route that decided in brackets), and by the orbit
check alone.

    python benchmarks/orbit_bench.py                       # patched at (8,64) and (16,256)
    python benchmarks/orbit_bench.py patched.py 4,16 8,64  # a model and sizes of your choice
    python benchmarks/orbit_bench.py lowest_free.py 4,16 8,64  # prealloc at every page
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvspec.engines.pdr import run_pdr  # noqa: E402
from kvspec.lang.loader import load_model  # noqa: E402
from kvspec.lang.system import compile_model  # noqa: E402
from kvspec.proofs.certificate import check_certificate, load_certificate  # noqa: E402
from kvspec.proofs.clauses import parse_invariant  # noqa: E402
from kvspec.proofs.orbits import check_orbits  # noqa: E402
from kvspec.proofs.smt_check import deep_terms  # noqa: E402


def bench(model: str, requests: int, pages: int) -> None:
    loaded = load_model(ROOT / "models" / model)
    with deep_terms():
        system = compile_model(loaded, {"requests": requests, "pages": pages})
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.process_time()
            out = run_pdr(system, timeout=1800, save_proof=True, proofs_dir=Path(tmp))
            proof_s = time.process_time() - t0
            statuses = sorted({v.status.value for v in out.verdicts})
            certs = list(Path(tmp).glob("*.json"))
            recheck = alone = "—"
            if certs:
                fresh = compile_model(loaded, {"requests": requests, "pages": pages})
                t1 = time.process_time()
                check = check_certificate(certs[0], fresh)
                recheck = (f"{time.process_time() - t1:.1f} ({'ok' if check.ok else 'REJECTED'}"
                           f", {_route(check.notes)})")
                alone = _orbits_alone(certs[0], fresh)
    route = out.stats.extra.get("pdr", {}).get("inference", {}).get("orbit_route", {})
    print(f"| {model} | {requests},{pages} | {'/'.join(statuses)} | {proof_s:.1f} | "
          f"{route.get('instances', '—')} | {route.get('queries', '—')} | {recheck} | "
          f"{alone} |",
          flush=True)


def _route(notes: list[str]) -> str:
    """Which route of ``check-proof`` decided, from its notes."""
    if any(n.startswith("checked through its reading") for n in notes):
        return "every size"
    if any(n.startswith("checked with every renaming") for n in notes):
        return "orbits, pages renamed too"
    if any("checked at every" in n for n in notes):
        return "orbits, some actions unrenamed"
    return "orbits"


def _orbits_alone(cert: Path, system: Any) -> str:
    """CPU seconds of the orbit check of ``cert``'s representatives, without the
    reading for every size (parsing included)."""
    doc = load_certificate(cert)
    t0 = time.process_time()
    clauses = parse_invariant(doc.smtlib2, system.state_vars())
    wanted = [p for p in system.properties if p.name in doc.properties]
    dims = ("requests" in doc.symmetry, "pages" in doc.symmetry)
    report = check_orbits(system, [c.formula for c in clauses], doc.readable, wanted, dims)
    return f"{time.process_time() - t0:.1f} ({'ok' if report.ok else 'REJECTED'})"


def main(argv: list[str]) -> None:
    model = argv[0] if argv else "patched.py"
    sizes = argv[1:] or ["8,64", "16,256"]
    print("| model | requests,pages | verdicts | pdr CPU s | clause instances | queries | "
          "re-check CPU s | orbit check alone CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for s in sizes:
        r, p = (int(x) for x in s.split(","))
        bench(model, r, p)


if __name__ == "__main__":
    main(sys.argv[1:])
