"""pytest plugin: the models of ``[tool.kvspec]`` as test items (opt-in).

Installed with kvspec (entry point ``pytest11: kvspec``) and **off by default**, so
that it costs nothing in projects that do not ask for it. Turn it on with

* ``pytest --kvspec`` (``--kvspec-config PYPROJECT`` to name the file; by default the
  nearest ``pyproject.toml`` with a ``[tool.kvspec]`` table from pytest's rootdir
  upward), or
* ``kvspec = true`` in ``[tool.pytest.ini_options]`` (or ``pytest.ini``).

Each configured model then adds one item per property and one ``coverage`` item, with
the expectations and the meaning of ``kvspec check`` (:mod:`kvspec.gate.check`):
``pyproject.toml::transfer::no-reuse-before-drain``. The model is compiled during
collection (a model that does not compile gives one failing ``model`` item) and run
once, by the first of its items that runs; ``-k`` selects as usual. A case that is not
decided (UNKNOWN, a bounded search) fails too: nothing short of the expectation passes.
A broken ``[tool.kvspec]`` table is a usage error (one line, pytest exits 4).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import pytest

if TYPE_CHECKING:
    from kvspec.gate.check import Case, ModelRun
    from kvspec.gate.config import GateConfig, ModelConfig

INI = "kvspec"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvspec", "kvspec lifecycle models ([tool.kvspec])")
    group.addoption("--kvspec", action="store_true", default=False,
                    help="collect the models of [tool.kvspec] in pyproject.toml as test items")
    group.addoption("--kvspec-config", metavar="PYPROJECT", default=None,
                    help="the pyproject.toml to read (implies --kvspec; default: the nearest "
                         "one with [tool.kvspec] from the rootdir upward)")
    parser.addini(INI, type="bool", default=False,
                  help="collect the models of [tool.kvspec] as test items (like --kvspec)")


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("kvspec") or config.getoption("kvspec_config")
                or config.getini(INI))


def _gate_config(config: pytest.Config) -> "GateConfig":
    from kvspec.gate.config import ConfigError, find_pyproject, load_config

    given = config.getoption("kvspec_config")
    try:
        if given:
            path = Path(given)
            if not path.is_absolute():
                path = Path(config.invocation_params.dir) / path
        else:
            found = find_pyproject(config.rootpath)
            if found is None:
                raise pytest.UsageError(f"--kvspec: no pyproject.toml with a [tool.kvspec] "
                                        f"table in {config.rootpath} or above")
            path = found
        return load_config(path)
    except ConfigError as exc:
        raise pytest.UsageError(f"kvspec: {exc}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Add the model items (before ``-k``/``-m`` deselection, which runs later)."""
    if not _enabled(config):
        return
    gate = _gate_config(config)
    project = KvspecProject.from_parent(session, path=gate.pyproject, gate=gate)
    for model in project.collect():
        items.extend(model.collect())


class KvspecProject(pytest.File):
    """The ``pyproject.toml`` whose ``[tool.kvspec]`` table lists the models."""

    def __init__(self, *, gate: "GateConfig", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    def collect(self) -> Iterable["KvspecModel"]:  # type: ignore[override]
        return [KvspecModel.from_parent(self, name=m.name, model=m) for m in self.gate.models]


class KvspecModel(pytest.Collector):
    """One configured model: its items share one run."""

    def __init__(self, *, model: "ModelConfig", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = model
        self.compiled: Any = None
        self.error: Exception | None = None
        self._run: "ModelRun | None" = None

    @property
    def gate(self) -> "GateConfig":
        assert isinstance(self.parent, KvspecProject)
        return self.parent.gate

    def collect(self) -> list[pytest.Item]:  # type: ignore[override]
        from kvspec.gate.check import COVERAGE, MODEL, compile_for, liveness_checks
        from kvspec.lang.errors import ModelError, UsageError

        try:
            self.compiled = compile_for(self.gate, self.model)
        except (ModelError, UsageError) as exc:
            self.error = exc
            return [KvspecCase.from_parent(self, name=MODEL)]
        system, _expect = self.compiled
        names = ([p.name for p in system.properties] + [COVERAGE]
                 + liveness_checks(self.model,
                                   [d.prop for d in system.loaded.decl.temporal]))
        return [KvspecCase.from_parent(self, name=n) for n in names]

    def model_run(self) -> "ModelRun":
        from kvspec.gate.check import check_model

        if self._run is None:
            self._run = check_model(self.gate, self.model, compiled=self.compiled)
        return self._run


class KvspecCaseFailed(Exception):
    """A case that did not pass (its :class:`~kvspec.gate.check.Case` says why)."""

    def __init__(self, case: "Case") -> None:
        super().__init__(case.message)
        self.case = case


class KvspecCase(pytest.Item):
    """One model × property (or ``coverage``, or ``model`` for a broken model)."""

    @property
    def owner(self) -> KvspecModel:
        assert isinstance(self.parent, KvspecModel)
        return self.parent

    def runtest(self) -> None:
        run = self.owner.model_run()
        by_name = {c.name: c for c in run.cases}
        case = by_name.get(self.name) or next(iter(run.cases))  # a broken model: one case
        if not case.ok:
            raise KvspecCaseFailed(case)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, KvspecCaseFailed):
            case = excinfo.value.case
            parts = [f"{case.status.value}: {case.message}"]
            if case.expected or case.actual:
                parts.append(f"expected: {case.expected}\nverdict:  {case.actual}")
            if case.details:
                parts.append(case.details.rstrip())
            return "\n\n".join(parts)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        model = self.owner.model
        return model.file, None, f"kvspec {model.name}::{self.name}"
