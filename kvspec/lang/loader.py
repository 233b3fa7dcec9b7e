"""Loading a model file and parsing ``--size`` overrides."""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from kvspec.lang.declare import Model, ModelDecl
from kvspec.lang.errors import ModelError, UsageError, location_in


@dataclass
class LoadedModel:
    path: Path
    module: ModuleType
    decl: ModelDecl
    sha256: str

    @property
    def file(self) -> str:
        return str(self.path)


def load_model(path: str | Path, class_name: str | None = None) -> LoadedModel:
    """Import a model file and find its Model class (the only one defined there,
    or ``class_name``). Any failure is a ModelError naming the file and line."""
    p = Path(path)
    if not p.is_file():
        raise ModelError(f"no such model file: {p}")
    source = p.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    name = f"kvspec_model_{digest[:16]}_{p.stem}"
    file = str(p.resolve())
    try:
        compile(source, file, "exec")
    except SyntaxError as exc:
        raise ModelError(f"syntax error: {exc.msg}", str(p), exc.lineno) from None
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ModelError(f"cannot import {p}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ModelError as exc:
        raise exc.located(*_relative(location_in(exc.__traceback__, {file}), file, p)) from None
    except Exception as exc:  # the model failed to import
        where = _relative(location_in(exc.__traceback__, {file}), file, p)
        raise ModelError(f"the model failed to import: {type(exc).__name__}: {exc}", *where) from None
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, Model) and v is not Model
               and v.__module__ == module.__name__]
    if class_name is not None:
        classes = [c for c in classes if c.__name__ == class_name]
        if not classes:
            raise ModelError(f"no Model class named {class_name!r} in {p}")
    if not classes:
        raise ModelError(f"{p} defines no class deriving from kvspec.Model")
    if len(classes) > 1:
        names = ", ".join(c.__name__ for c in classes)
        raise ModelError(f"{p} defines several models ({names}); choose one with --model-class")
    cls = classes[0]
    try:
        decl = cls.declaration()
    except ModelError as exc:
        try:
            line: int | None = inspect.getsourcelines(cls)[1]
        except (OSError, TypeError):
            line = None
        raise exc.located(str(p), line) from None
    return LoadedModel(p, module, decl, digest)


def _relative(loc: tuple[str | None, int | None], file: str, p: Path) -> tuple[str | None, int | None]:
    f, line = loc
    return (str(p) if f == file else f, line)


def parse_sizes(text: str | list[str] | None) -> dict[str, int]:
    """``requests=3,pages=16`` (or several such strings) -> {"requests": 3, "pages": 16}."""
    if not text:
        return {}
    parts: list[str] = []
    for chunk in [text] if isinstance(text, str) else text:
        parts.extend(x for x in chunk.split(",") if x.strip())
    sizes: dict[str, int] = {}
    for part in parts:
        if "=" not in part:
            raise UsageError(f"--size expects name=value pairs, got {part!r}")
        key, _, value = part.partition("=")
        key = key.strip()
        try:
            sizes[key] = int(value.strip())
        except ValueError:
            raise UsageError(f"--size {key}: {value.strip()!r} is not an integer") from None
    return sizes
