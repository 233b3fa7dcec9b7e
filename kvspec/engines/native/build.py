"""Compiling the generated search with the system C compiler, cached.

The shared object is named by a hash of the generated source (which holds the
model's terms, its sizes and the symmetry built in), the compiler's identity and
the generator version, and kept in ``$KVSPEC_CACHE_DIR`` (default
``~/.cache/kvspec/native``): a second run of the same model at the same sizes
loads it without compiling.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kvspec.engines.native.codegen import GENERATOR_VERSION

__all__ = ["BuildError", "Built", "cache_dir", "compile_source", "find_compiler"]

#: compiler flags; -O1 past this many bytes of source keeps the build step short
FLAGS = ["-O2", "-shared", "-fPIC", "-fno-strict-aliasing", "-w"]
LARGE_SOURCE = 2_000_000


class BuildError(Exception):
    """The C compiler is missing or rejected the generated code."""


@dataclass
class Built:
    path: Path
    cached: bool
    seconds: float
    compiler: str


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


def compile_source(source: str, *, directory: Path | None = None) -> Built:
    """The shared object for ``source``, compiled unless the cache has it."""
    found = find_compiler()
    if found is None:
        raise BuildError("no C compiler found (cc, gcc or clang; or set CC)")
    cc, ident = found
    flags = list(FLAGS)
    if len(source) > LARGE_SOURCE:
        flags[0] = "-O1"
    key = hashlib.sha256("\0".join([GENERATOR_VERSION, ident, " ".join(flags), source])
                         .encode()).hexdigest()[:24]
    where = directory if directory is not None else cache_dir()
    target = where / f"kvspec-{key}.so"
    if target.is_file():
        return Built(target, True, 0.0, ident)
    start = time.monotonic()
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvspec-cc-", dir=where) as tmp:
        src = Path(tmp) / "model.c"
        src.write_text(source)
        out = Path(tmp) / "model.so"
        try:
            proc = subprocess.run([cc, *flags, "-o", str(out), str(src)], capture_output=True,
                                  text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BuildError(f"{cc}: {exc}") from None
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
            raise BuildError(f"{cc} failed on the generated code:\n{tail}")
        os.replace(out, target)  # atomic: a concurrent run sees all of it or nothing
    return Built(target, False, time.monotonic() - start, ident)
