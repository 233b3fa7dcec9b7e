"""The ``[tool.kvspec]`` table of ``pyproject.toml``: which models ``kvspec check`` (and
the pytest plugin) gate, and what each is expected to give.

::

    [tool.kvspec]
    proofs-dir = "proofs"                  # certificates, from the project root

    [[tool.kvspec.model]]
    name = "patched"                       # optional; default: the file's stem
    file = "models/patched.py"             # from the project root
    class = "PatchedPD"                    # optional: when the file defines several
    sizes = { requests = 2, pages = 4 }    # optional: size overrides
    engine = "auto"                        # auto | explicit | bmc | kind | pdr
    depth = 30                             # bmc / kind bound
    max-states = 100000                    # optional state limit
    timeout = 120                          # optional, seconds
    allow-dead = ["timeout"]               # actions allowed to never fire
    liveness = ["deadlock-freedom", "pages-eventually-freed"]   # default: deadlock only
    [tool.kvspec.model.expect]             # property -> expected verdict
    no-reuse-before-drain = "holds"
    rejection-is-terminal = { verdict = "violated", length = 3 }

Every path is resolved from the project root (the directory of the
``pyproject.toml``), never from the working directory. A property of the model that
``expect`` does not name must hold. The table is validated strictly: an unknown key, a
value of the wrong type, an unknown engine or a missing model file is a
:class:`ConfigError` naming the file and the key (``pyproject.toml:
tool.kvspec.model[1].engine: ...``). Property and action names can only be checked
against the compiled model; :mod:`kvspec.gate.check` does that with the same kind of
message.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvspec.lang.errors import UsageError
from kvspec.runner import ENGINES
from kvspec.tomlcompat import tomllib

__all__ = ["ConfigError", "Expectation", "GateConfig", "ModelConfig", "did_you_mean",
           "find_pyproject", "load_config", "read_pyproject"]

HOLDS = "holds"
VIOLATED = "violated"
VERDICTS = (HOLDS, VIOLATED)
DEFAULT_DEPTH = 30
DEFAULT_PROOFS_DIR = "proofs"
NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")

TOP_KEYS = ("proofs-dir", "model")
MODEL_KEYS = ("name", "file", "class", "sizes", "engine", "depth", "max-states", "timeout",
              "allow-dead", "liveness", "expect")
#: the liveness checks a model gets when its entry has no ``liveness`` key
DEFAULT_LIVENESS = ("deadlock-freedom",)
EXPECT_KEYS = ("verdict", "length")


class ConfigError(UsageError):
    """A mistake in ``[tool.kvspec]``: one line naming the file and the key (exit code 2)."""

    def __init__(self, file: Path | str, key: str, message: str) -> None:
        self.file = str(file)
        self.key = key
        self.message = message
        super().__init__(f"{file}: {key}: {message}" if key else f"{file}: {message}")


@dataclass(frozen=True)
class Expectation:
    """What a property is expected to give: ``holds``, or ``violated`` with, if pinned,
    the length of the shortest counterexample."""

    verdict: str
    length: int | None = None
    explicit: bool = True  # named in ``expect`` (False: the default, "must hold")

    def text(self) -> str:
        if self.verdict == VIOLATED and self.length is not None:
            return f"violated ({self.length} steps)"
        return self.verdict


@dataclass(frozen=True)
class ModelConfig:
    """One ``[[tool.kvspec.model]]`` entry, with its paths resolved."""

    index: int
    name: str
    file: Path            # absolute
    file_text: str        # as written in the pyproject
    model_class: str | None
    sizes: dict[str, int]
    engine: str
    depth: int
    max_states: int | None
    timeout: float | None
    allow_dead: tuple[str, ...]
    expect: dict[str, Expectation]
    #: liveness properties checked by the explicit liveness engine (``kvspec live``)
    liveness: tuple[str, ...] = DEFAULT_LIVENESS

    @property
    def key(self) -> str:
        """``tool.kvspec.model[1]``: where this entry is, for messages."""
        return f"tool.kvspec.model[{self.index}]"


@dataclass(frozen=True)
class GateConfig:
    """The whole ``[tool.kvspec]`` table of one ``pyproject.toml``."""

    pyproject: Path       # absolute
    root: Path            # the project root: the pyproject's directory
    proofs_dir: Path      # absolute
    models: list[ModelConfig] = field(default_factory=list)

    def relative(self, path: Path | str) -> str:
        """``path`` relative to the project root when it lies under it (for output that
        does not depend on the working directory)."""
        p = Path(path)
        try:
            return p.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return str(p)


# -- reading --------------------------------------------------------------------------------

def read_pyproject(pyproject: Path) -> dict[str, Any]:
    """The parsed TOML document (:class:`ConfigError` when it cannot be read or parsed)."""
    try:
        with open(pyproject, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(pyproject, "", "no such file") from None
    except IsADirectoryError:
        raise ConfigError(pyproject, "", "is a directory, not a pyproject.toml") from None
    except OSError as exc:
        raise ConfigError(pyproject, "", f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(pyproject, "", "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(pyproject, "", f"invalid TOML: {exc}") from None


def _kvspec_table(doc: dict[str, Any]) -> Any:
    tool = doc.get("tool")
    return tool.get("kvspec") if isinstance(tool, dict) else None


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.kvspec]`` table in ``start`` (a
    directory, or a file's directory) or one of its parents; None if there is none.
    A ``pyproject.toml`` on the way that is not valid TOML is a :class:`ConfigError`
    (it may be the one meant)."""
    here = Path(start).resolve()
    if not here.is_dir():
        here = here.parent
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _kvspec_table(read_pyproject(candidate)) is not None:
            return candidate
    return None


def load_config(pyproject: Path) -> GateConfig:
    """Read and validate the ``[tool.kvspec]`` table of ``pyproject``."""
    path = Path(pyproject).resolve()
    doc = read_pyproject(path)
    table = _kvspec_table(doc)
    if table is None:
        raise ConfigError(path, "", "has no [tool.kvspec] table")
    v = _Validator(path)
    v.table(table, "tool.kvspec", TOP_KEYS)
    root = path.parent
    proofs = v.string(table, "proofs-dir", "tool.kvspec", default=DEFAULT_PROOFS_DIR)
    proofs_dir = (root / str(proofs)).resolve()
    if proofs_dir.exists() and not proofs_dir.is_dir():
        raise ConfigError(path, "tool.kvspec.proofs-dir", f"{proofs} is not a directory")
    entries = table.get("model", [])
    if not isinstance(entries, list):
        raise ConfigError(path, "tool.kvspec.model", "must be an array of tables "
                          "([[tool.kvspec.model]]), not " + _type_name(entries))
    models = [_model(v, root, entry, i) for i, entry in enumerate(entries)]
    seen: dict[str, int] = {}
    for m in models:
        if m.name in seen:
            raise ConfigError(path, f"{m.key}.name", f"{m.name!r} is already the name of "
                              f"tool.kvspec.model[{seen[m.name]}]; give each model its own "
                              "name")
        seen[m.name] = m.index
    return GateConfig(path, root, proofs_dir, models)


def _model(v: "_Validator", root: Path, entry: Any, index: int) -> ModelConfig:
    key = f"tool.kvspec.model[{index}]"
    v.table(entry, key, MODEL_KEYS)
    file_text = v.string(entry, "file", key, required=True)
    assert file_text is not None
    file = (root / file_text).resolve()
    if not file.is_file():
        what = "is a directory" if file.is_dir() else "no such file"
        raise ConfigError(v.file, f"{key}.file", f"{file_text}: {what} (paths are resolved "
                          f"from the project root {root})")
    name = v.string(entry, "name", key, default=Path(file_text).stem)
    assert name is not None
    if not NAME_RE.fullmatch(name):
        raise ConfigError(v.file, f"{key}.name", f"{name!r} is not a valid model name "
                          "(letters, digits, '_', '.', '-')")
    cls = v.string(entry, "class", key)
    sizes = entry.get("sizes", {})
    v.table(sizes, f"{key}.sizes", None)
    for size, value in sizes.items():
        v.integer(sizes, size, f"{key}.sizes", minimum=0)
    engine = v.string(entry, "engine", key, default="auto")
    if engine not in ENGINES:
        raise ConfigError(v.file, f"{key}.engine", f"unknown engine {engine!r} (one of "
                          f"{', '.join(ENGINES)})")
    depth = v.integer(entry, "depth", key, minimum=0)
    max_states = v.integer(entry, "max-states", key, minimum=1)
    timeout = v.seconds(entry, "timeout", key)
    allow_dead = v.string_list(entry, "allow-dead", key)
    liveness = (tuple(v.string_list(entry, "liveness", key)) if "liveness" in entry
                else DEFAULT_LIVENESS)
    expect_table = entry.get("expect", {})
    v.table(expect_table, f"{key}.expect", None)
    expect = {prop: v.expectation(value, f"{key}.expect.{_key_text(prop)}")
              for prop, value in expect_table.items()}
    assert engine is not None
    return ModelConfig(index, name, file, file_text, cls, dict(sizes), engine,
                       DEFAULT_DEPTH if depth is None else depth, max_states, timeout,
                       tuple(allow_dead), expect, liveness)


# -- validation helpers -----------------------------------------------------------------------

def did_you_mean(name: str, choices: Any) -> str:
    """``"did you mean 'x'? "`` for the choice closest to ``name``, or ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _type_name(x: Any) -> str:
    if isinstance(x, bool):
        return "a boolean"
    return {dict: "a table", list: "an array", str: "a string", int: "an integer",
            float: "a float"}.get(type(x), type(x).__name__)


def _key_text(key: str) -> str:
    """A TOML key as written in a dotted path (quoted when it must be)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else '"' + key.replace('"', '\\"') + '"'


class _Validator:
    """Typed access to the TOML values, each mistake a :class:`ConfigError`."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(self.file, key, message)

    def table(self, value: Any, key: str, allowed: tuple[str, ...] | None) -> None:
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table, not {_type_name(value)}")
        if allowed is None:
            return
        for k in value:
            if k not in allowed:
                hint = did_you_mean(k, allowed)
                raise self.fail(f"{key}.{_key_text(k)}", f"unknown key ({hint}known keys: "
                                f"{', '.join(allowed)})")

    def string(self, table: dict[str, Any], name: str, key: str, *, required: bool = False,
               default: str | None = None) -> str | None:
        if name not in table:
            if required:
                raise self.fail(f"{key}.{name}", "is required")
            return default
        value = table[name]
        if not isinstance(value, str) or not value:
            what = "an empty string" if value == "" else _type_name(value)
            raise self.fail(f"{key}.{name}", f"must be a non-empty string, not {what}")
        return value

    def integer(self, table: dict[str, Any], name: str, key: str, *, minimum: int) -> int | None:
        if name not in table:
            return None
        value = table[name]
        where = f"{key}.{_key_text(name)}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"must be an integer, not {_type_name(value)}")
        if value < minimum:
            raise self.fail(where, f"must be at least {minimum}, got {value}")
        return value

    def seconds(self, table: dict[str, Any], name: str, key: str) -> float | None:
        if name not in table:
            return None
        value = table[name]
        where = f"{key}.{name}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(where, f"must be a number of seconds, not {_type_name(value)}")
        if not math.isfinite(value) or value <= 0:
            raise self.fail(where, f"must be a number of seconds > 0, got {value} (leave it "
                            "out for no limit)")
        return float(value)

    def string_list(self, table: dict[str, Any], name: str, key: str) -> list[str]:
        value = table.get(name, [])
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            raise self.fail(f"{key}.{name}", "must be an array of action names (strings)")
        return list(value)

    def expectation(self, value: Any, key: str) -> Expectation:
        if isinstance(value, str):
            if value not in VERDICTS:
                raise self.fail(key, f"expected \"holds\" or \"violated\", got {value!r}")
            return Expectation(value)
        if not isinstance(value, dict):
            raise self.fail(key, "must be \"holds\", \"violated\" or a table "
                            f"{{verdict = \"violated\", length = N}}, not {_type_name(value)}")
        self.table(value, key, EXPECT_KEYS)
        verdict = self.string(value, "verdict", key, required=True)
        if verdict not in VERDICTS:
            raise self.fail(f"{key}.verdict", f"expected \"holds\" or \"violated\", got "
                            f"{verdict!r}")
        length = self.integer(value, "length", key, minimum=0)
        if length is not None and verdict != VIOLATED:
            raise self.fail(f"{key}.length", "a counterexample length goes only with "
                            "verdict = \"violated\"")
        assert verdict is not None
        return Expectation(verdict, length)
