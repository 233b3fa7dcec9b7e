"""Compiling the generated search with the system C compiler, cached.

The shared object is named by :func:`cache_key`: a hash of the model (its files,
its compiled bodies with every constant inlined, class, sizes, selected
properties, state layout and instances), the symmetry built in, the sources of
kvspec that give the terms their meaning (the generator version), the compiler's
identity and flags. It is kept in ``$KVSPEC_CACHE_DIR``
(default ``~/.cache/kvspec/native``) with a small JSON file describing its layout,
so a second run of the same model at the same sizes neither generates nor compiles.
A large program comes as two translation units (:mod:`kvspec.engines.native.units`):
compiled in parallel when a core is free, one after the other otherwise, and linked.
"""
from __future__ import annotations

import functools
import hashlib
import os
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kvspec.engines.native.codegen import GENERATOR_VERSION
from kvspec.lang.system import System

__all__ = ["BuildError", "Built", "cache_dir", "cache_key", "cached", "compile_source",
           "find_compiler"]

#: compiler flags; -O1 past this many bytes of source keeps the build step short
FLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-fno-strict-aliasing", "-w"]
LARGE_SOURCE = 1_000_000


class BuildError(Exception):
    """The C compiler is missing or rejected the generated code."""


@dataclass
class Built:
    path: Path
    cached: bool
    seconds: float      # wall-clock time of the compilation (0 when cached)
    compiler: str
    cpu_seconds: float = 0.0  # the compiler's own CPU time


def cache_dir() -> Path:
    env = os.environ.get("KVSPEC_CACHE_DIR")
    base = Path(env) if env else Path.home() / ".cache" / "kvspec"
    return (base / "native") if not env else base


@functools.lru_cache(maxsize=8)
def _identify(cc: str) -> str | None:
    try:
        proc = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    first = (proc.stdout.strip().splitlines() or [""])[0]
    return f"{cc}: {first}"


def find_compiler() -> tuple[str, str] | None:
    """The C compiler to use (``$CC``, else cc, gcc, clang) and its identity; None if none."""
    names = [os.environ["CC"]] if os.environ.get("CC") else ["cc", "gcc", "clang"]
    for name in names:
        path = shutil.which(name)
        if path is None:
            continue
        ident = _identify(path)
        if ident is not None:
            return path, ident
    return None


@functools.lru_cache(maxsize=1)
def _generator_hash() -> str:
    """The kvspec sources that decide what the generated code means."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(GENERATOR_VERSION.encode())
    for pattern in ("lang/*.py", "props/*.py", "engines/transition.py", "engines/canon.py",
                    "engines/native/*.py", "engines/native/*.c"):
        for path in sorted(root.glob(pattern)):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def cache_key(system: System, symmetry: tuple[bool, bool]) -> str:
    """What the compiled search depends on (see the module docstring)."""
    found = find_compiler()
    ident = found[1] if found is not None else "none"
    h = hashlib.sha256()
    for part in (_generator_hash(), ident, " ".join(FLAGS), system.loaded.decl.name,
                 repr(sorted(system.sizes.items())), repr(symmetry),
                 repr([p.name for p in system.properties]), repr(system.initial),
                 repr([(v.name, v.dim, v.offset, v.length, v.type.kind, tuple(v.type.domain()))
                       for v in system.schema.vars]),
                 repr([i.label() for i in system.instances]), repr(system.inflight_bound),
                 # the compiled bodies, with every constant inlined: values imported from
                 # other modules are in no file hashed below
                 str(system.generated.get("__source__", ""))):
        h.update(part.encode() + b"\0")
    for f in sorted(system.files):
        try:
            h.update(Path(f).read_bytes())
        except OSError:
            h.update(f.encode())
    return h.hexdigest()[:24]


def cached(key: str, directory: Path | None = None) -> tuple[Path, Path] | None:
    """The shared object and layout description cached under ``key``, if both exist."""
    where = directory if directory is not None else cache_dir()
    lib, meta = where / f"kvspec-{key}.so", where / f"kvspec-{key}.json"
    return (lib, meta) if lib.is_file() and meta.is_file() else None


def idle_cores() -> int:
    """Cores this process may use that nothing else is running on (by the load average)."""
    try:
        cores = len(os.sched_getaffinity(0))
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0
    return max(0, int(cores - load))


def _run(commands: list[list[str]], parallel: bool) -> None:
    """Run the compiler commands, all at once when ``parallel``, else one after the
    other; BuildError if one fails."""
    procs: list[subprocess.Popen[str]] = []
    results: list[tuple[str, str]] = []
    try:
        for cmd in commands:
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
            if not parallel:
                results.append(procs[-1].communicate(timeout=600))
        if parallel:
            results = [p.communicate(timeout=600) for p in procs]
    except (OSError, subprocess.SubprocessError) as exc:
        for p in procs:
            p.kill()
            p.wait()
        raise BuildError(f"{commands[0][0]}: {exc}") from None
    for p, (_, err) in zip(procs, results):
        if p.returncode != 0:
            tail = "\n".join(err.strip().splitlines()[-8:])
            raise BuildError(f"{commands[0][0]} failed on the generated code:\n{tail}")


def compile_source(source: str | list[str], key: str, meta: str, *,
                   directory: Path | None = None) -> Built:
    """Compile ``source`` (one C translation unit, or several: compiled in parallel
    when cores are free, and linked) into the cache under ``key``, with ``meta``
    (JSON) beside it."""
    found = find_compiler()
    if found is None:
        raise BuildError("no C compiler found (cc, gcc or clang; or set CC)")
    cc, ident = found
    units = [source] if isinstance(source, str) else list(source)
    flags = list(FLAGS)
    if sum(len(u) for u in units) > LARGE_SOURCE:
        flags[0] = "-O1"
    where = directory if directory is not None else cache_dir()
    target = where / f"kvspec-{key}.so"
    start = time.monotonic()
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvspec-cc-", dir=where) as tmp:
        out = Path(tmp) / "model.so"
        srcs = [Path(tmp) / f"model{k}.c" for k in range(len(units))]
        for src, text in zip(srcs, units):
            src.write_text(text)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        if len(srcs) == 1:
            _run([[cc, *flags, "-o", str(out), str(srcs[0])]], False)
        else:
            # in parallel only when a core is free for the second compiler: on busy
            # cores two compilers at once take longer in all (they share the caches)
            # and finish no sooner
            objs = [src.with_suffix(".o") for src in srcs]
            _run([[cc, *flags, "-c", "-o", str(o), str(src)] for src, o in zip(srcs, objs)],
                 idle_cores() >= 1)
            _run([[cc, "-shared", "-pthread", "-o", str(out), *map(str, objs)]], False)
        side = Path(tmp) / "model.json"
        side.write_text(meta)
        os.replace(out, target)  # atomic: a concurrent run sees all of it or nothing
        os.replace(side, where / f"kvspec-{key}.json")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Built(target, False, time.monotonic() - start, ident, cpu)
