"""``kvspec check``: run every configured model and compare each verdict with what the
``[tool.kvspec]`` table expects (see :mod:`kvspec.gate.config`).

Each model gives one *case* per property and one ``coverage`` case:

* a property expected to hold passes when it is PROVED or HOLDS exhaustively; a
  VIOLATED one has **started failing** (failed, with the counterexample), an UNKNOWN
  one or a merely bounded HOLDS is **unknown** (nothing was shown);
* a property expected to be violated passes when it is VIOLATED (with the pinned
  length, if any); a proof or an exhaustive HOLDS means the **violation disappeared**
  (failed: update the expectation if the fix is intended), a different length means
  the **counterexample length changed** (failed);
* ``coverage`` fails when an action never fires in any reachable state (a **dead
  action**) unless ``allow-dead`` names it: a design whose ``abort`` can never fire
  proves nothing about aborts.
* the liveness checks of ``liveness`` (default: ``deadlock-freedom`` only; a liveness
  property named in ``expect`` is checked too) are judged like the safety properties,
  by the exhaustive explicit liveness search of ``kvspec live`` under the model's
  declared fairness: a reachable deadlock, or a leak shown by a lasso, fails the gate.

Properties the model checks but ``expect`` does not name must hold. A model that does
not load or compile, or whose ``expect``/``allow-dead`` names a property or action it
does not have, gives one ``error`` case (exit code 2).

The stored certificate is re-checked first by the ``auto`` engine (in the configured
``proofs-dir``); when it no longer checks, the checker's account of why (the
counterexample to induction) is kept with the model's run. The gate never writes
certificates.
"""
from __future__ import annotations

import enum
import inspect
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kvspec.ctrl_c import stops_on_ctrl_c
from kvspec.gate.config import (HOLDS, ConfigError, Expectation, GateConfig, ModelConfig,
                                 did_you_mean)
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.system import System
from kvspec.trace import Trace
from kvspec.verdict import EXIT_HOLDS, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VIOLATED, Result, Status, Verdict

__all__ = ["COVERAGE", "MODEL", "Case", "CaseStatus", "GateRun", "Kind", "ModelRun",
           "check_model", "compile_for", "coverage_case", "judge", "liveness_checks", "run_gate",
           "select_models", "trace_text"]

#: the name of the per-model coverage case
COVERAGE = "coverage"
#: the name of the case of a model that could not be checked at all
MODEL = "model"
Warn = Callable[[str], None]


class CaseStatus(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"     # the verdict contradicts the expectation
    UNKNOWN = "unknown"   # nothing was decided (a limit, a bounded search)
    ERROR = "error"       # the model or its configuration is broken


class Kind(str, enum.Enum):
    """Why a case ended as it did (JUnit failure types, SARIF messages)."""

    AS_EXPECTED = "as-expected"
    STARTED_FAILING = "started-failing"
    VIOLATION_DISAPPEARED = "violation-disappeared"
    LENGTH_CHANGED = "length-changed"
    UNDECIDED = "undecided"
    DEAD_ACTION = "dead-action"
    MODEL_ERROR = "model-error"


@dataclass
class Case:
    """One model × property (or the model's coverage) with its outcome."""

    model: str
    name: str
    status: CaseStatus
    kind: Kind
    message: str                 # one line
    expected: str = ""
    actual: str = ""
    details: str = ""            # the counterexample (or notes), several lines
    file: Path | None = None     # where to point (SARIF, JUnit ``file``/``line``)
    line: int | None = None
    summary: str = ""            # what the property says
    trace: Trace | None = None

    @property
    def ok(self) -> bool:
        return self.status is CaseStatus.PASSED


@dataclass
class ModelRun:
    """Everything ``kvspec check`` found out about one configured model."""

    config: ModelConfig
    cases: list[Case] = field(default_factory=list)
    seconds: float = 0.0
    system: System | None = None
    result: Result | None = None
    coverage: Any = None         # kvspec.coverage.Coverage
    certificate: str = ""        # why the stored certificate was rejected ("" if it was not)

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.system.sizes) if self.system is not None else dict(self.config.sizes)


@dataclass
class GateRun:
    config: GateConfig
    runs: list[ModelRun]

    @property
    def cases(self) -> list[Case]:
        return [c for r in self.runs for c in r.cases]

    def count(self, status: CaseStatus) -> int:
        return sum(1 for c in self.cases if c.status is status)

    @property
    def exit_code(self) -> int:
        """2 a model or configuration error, 1 a failed case, 3 only unknowns, 0 all pass."""
        if self.count(CaseStatus.ERROR):
            return EXIT_USAGE
        if self.count(CaseStatus.FAILED):
            return EXIT_VIOLATED
        if self.count(CaseStatus.UNKNOWN):
            return EXIT_UNKNOWN
        return EXIT_HOLDS

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)


# -- running --------------------------------------------------------------------------------

def select_models(config: GateConfig, names: list[str] | None) -> list[ModelConfig]:
    """The configured models named in ``names`` (all when None), in configuration order."""
    if not config.models:
        raise ConfigError(config.pyproject, "tool.kvspec.model", "no models configured (add a "
                          "[[tool.kvspec.model]] table with a file)")
    if not names:
        return list(config.models)
    known = [m.name for m in config.models]
    for name in names:
        if name not in known:
            hint = did_you_mean(name, known)
            raise UsageError(f"--model {name}: no such model in {config.pyproject} ({hint}"
                             f"configured: {', '.join(known)})")
    return [m for m in config.models if m.name in names]


def run_gate(config: GateConfig, names: list[str] | None = None, *,
             warn: Warn | None = None,
             on_model: Callable[[ModelRun], None] | None = None,
             backend: str | None = None) -> GateRun:
    """Check the selected models one after the other; ``on_model`` sees each run as it
    finishes (to stream the output). ``backend``: the explicit search's backend (see
    :func:`check_model`)."""
    runs = []
    for model in select_models(config, names):
        run = check_model(config, model, warn=warn, backend=backend)
        runs.append(run)
        if on_model is not None:
            on_model(run)
    return GateRun(config, runs)


Compiled = tuple[System, dict[str, Expectation]]


@stops_on_ctrl_c
def check_model(config: GateConfig, model: ModelConfig, *, warn: Warn | None = None,
                compiled: Compiled | None = None, backend: str | None = None) -> ModelRun:
    """Compile (unless ``compiled`` is :func:`compile_for`'s result) and verify one
    model, and judge every verdict and its coverage. ``backend`` (``native`` or
    ``python``; None: each engine's default) runs the explicit search — the
    ``explicit`` engine, ``auto``'s explicit stage — and the liveness graph on it."""
    start = time.monotonic()
    out = ModelRun(model)
    try:
        system, expect = compiled if compiled is not None else compile_for(config, model)
        out.system = system
        from kvspec.runner import Search, run
        result = run(system, model.engine, depth=model.depth, timeout=model.timeout,
                     max_states=model.max_states, proofs_dir=config.proofs_dir,
                     warn=warn or (lambda _m: None), search=Search(backend))
        out.result = result
        out.certificate = _rejected_certificate(result, system)
        props = {p.name: p for p in system.properties}
        for v in result.verdicts:
            out.cases.append(judge(model, system, v, expect[v.prop], props[v.prop].summary))
        out.coverage = _coverage(model, system, result)
        out.cases.append(coverage_case(model, system, out.coverage))
        out.cases.extend(_liveness_cases(model, system, expect, backend, warn))
    except (ModelError, UsageError) as exc:
        out.cases = [_error_case(config, model, exc)]
    out.seconds = time.monotonic() - start
    return out


def liveness_checks(model: ModelConfig, temporal: list[str] | None = None) -> list[str]:
    """The liveness properties the gate checks for ``model``: its ``liveness`` list and
    every liveness property its ``expect`` names (the library's, deadlock freedom, and
    the model's own ``temporal`` properties)."""
    from kvspec.liveness.obligations import DEADLOCK, LIVENESS

    known = set(LIVENESS) | {DEADLOCK} | set(temporal or ())
    names = list(model.liveness)
    names += [p for p in model.expect if p in known and p not in names]
    return names


def _temporal_names(loaded: Any) -> list[str]:
    """The names of the model's own temporal properties (``@eventually``, …)."""
    return [d.prop for d in getattr(loaded.decl, "temporal", ())]


def _liveness_cases(model: ModelConfig, system: System, expect: dict[str, Expectation],
                    backend: str | None = None, warn: Warn | None = None) -> list[Case]:
    """The verdicts of :func:`liveness_checks`, judged against ``expect``."""
    names = liveness_checks(model, _temporal_names(system.loaded))
    if not names:
        return []
    from kvspec.liveness.check import check_liveness
    from kvspec.liveness.live_cmd import compile_for_liveness
    from kvspec.liveness.obligations import DEADLOCK, LIVENESS
    from kvspec.liveness.temporal import temporal_properties

    live = compile_for_liveness(system.loaded, dict(system.sizes))
    verdicts, _ = check_liveness(live, properties=[n for n in names if n != DEADLOCK],
                                 deadlock=DEADLOCK in names, max_states=model.max_states,
                                 timeout=model.timeout, backend=backend or "python",
                                 warn=warn)
    summaries = {name: info.summary for name, info in LIVENESS.items()}
    summaries[DEADLOCK] = ("no reachable state where nothing is enabled while a request has "
                           "not terminated")
    summaries.update({t.name: t.summary for t in temporal_properties(live)})
    return [judge(model, live, v, expect.get(v.prop, Expectation(HOLDS, explicit=False)),
                  summaries.get(v.prop, "")) for v in verdicts]


def compile_for(config: GateConfig, model: ModelConfig) -> Compiled:
    """The compiled model and the expectation of each property it checks (those
    ``expect`` leaves out must hold). An ``expect`` or ``allow-dead`` entry naming a
    property or action the model does not have is a :class:`ConfigError`."""
    from kvspec.lang.loader import load_model
    from kvspec.lang.system import compile_model
    from kvspec.props.library import ALL

    from kvspec.liveness.obligations import DEADLOCK, LIVENESS

    loaded = load_model(model.file, model.model_class)
    invariants = [fn.__name__.replace("_", "-") for fn in loaded.decl.invariants]
    live_names = list(LIVENESS) + [DEADLOCK] + _temporal_names(loaded)
    available = list(ALL) + invariants + live_names
    for name in model.liveness:
        if name not in live_names:
            hint = did_you_mean(name, live_names)
            raise ConfigError(config.pyproject, f"{model.key}.liveness",
                              f"unknown liveness property {name!r} ({hint}available: "
                              f"{', '.join(live_names)})")
    for prop in model.expect:
        if prop not in available:
            hint = did_you_mean(prop, available)
            raise ConfigError(config.pyproject, f"{model.key}.expect.{prop}",
                              f"unknown property ({hint}{loaded.decl.name} has: "
                              f"{', '.join(available)})")
    system = compile_model(loaded, dict(model.sizes), None)
    checked = [p.name for p in system.properties]
    live = liveness_checks(model, _temporal_names(loaded))
    extra = [p for p in model.expect if p not in checked and p not in live]
    if extra:  # a library property the model does not select by default: check it too
        system = compile_model(loaded, dict(model.sizes), checked + extra)
        checked = [p.name for p in system.properties]
        dropped = [p for p in extra if p not in checked]
        if dropped:
            raise ConfigError(config.pyproject, f"{model.key}.expect.{dropped[0]}",
                              f"{loaded.decl.name} cannot check this property (it watches "
                              "pages, and the model declares none)")
    actions = [a.name for a in system.actions]
    for name in model.allow_dead:
        if name not in actions:
            hint = did_you_mean(name, actions)
            raise ConfigError(config.pyproject, f"{model.key}.allow-dead",
                              f"{system.name} has no action {name!r} ({hint}actions: "
                              f"{', '.join(actions)})")
    expect = {name: model.expect.get(name, Expectation(HOLDS, explicit=False))
              for name in checked + live}
    return system, expect


def _error_case(config: GateConfig, model: ModelConfig, exc: Exception) -> Case:
    file: Path | None = model.file
    line: int | None = None
    if isinstance(exc, ModelError):
        if exc.file is not None:
            file = Path(exc.file).resolve()
            exc.file = config.relative(exc.file)
        line = exc.line
    elif isinstance(exc, ConfigError):
        file = config.pyproject
    message = " ".join(str(exc).split())
    return Case(model.name, MODEL, CaseStatus.ERROR, Kind.MODEL_ERROR, message, file=file,
                line=line)


def _rejected_certificate(result: Result, system: System) -> str:
    """The certificate check's own account when ``auto`` found a stored certificate
    that no longer checks (the problems and the counterexample to induction)."""
    stages = result.stats.extra.get("auto")
    if not isinstance(stages, list):
        return ""
    for stage in stages:
        if isinstance(stage, dict) and stage.get("stage") == "certificate" \
                and not stage.get("ok", True):
            from kvspec.proofs.certificate import check_certificate
            from kvspec.report.text import make_console

            check = check_certificate(Path(stage["path"]), system)
            if check.ok:  # cannot happen for the same file; never report a non-problem
                return ""
            buf = io.StringIO()
            check.print(make_console(buf, color=False, width=110))
            return "\n".join(line.rstrip() for line in buf.getvalue().rstrip().splitlines()) \
                + "\n"
    return ""


# -- judging --------------------------------------------------------------------------------

def trace_text(trace: Trace) -> str:
    """The counterexample as ``kvspec verify`` prints it, without colour."""
    from kvspec.report.text import make_console, print_trace

    buf = io.StringIO()
    print_trace(make_console(buf, color=False, width=110), trace)
    return "\n".join(line.rstrip() for line in buf.getvalue().rstrip().splitlines()) + "\n"


def _class_line(system: System) -> int | None:
    try:
        return inspect.getsourcelines(system.loaded.decl.cls)[1]
    except (OSError, TypeError):
        return None


def _where(system: System, verdict: Verdict) -> tuple[Path, int | None]:
    """The model file and the line of the violating action (the trace's last step), or
    of the property (an invariant), or of the model class."""
    trace = verdict.trace
    if trace is not None and trace.steps:
        fn = trace.steps[-1].instance.action.ir
        return Path(fn.file).resolve(), fn.line
    prop = next((p for p in system.properties if p.name == verdict.prop), None)
    if prop is not None and prop.file is not None:
        return Path(prop.file).resolve(), prop.line
    return system.loaded.path.resolve(), _class_line(system)


def judge(model: ModelConfig, system: System, verdict: Verdict, expect: Expectation,
          summary: str = "") -> Case:
    """Compare one verdict with its expectation."""
    file, line = _where(system, verdict)
    case = Case(model.name, verdict.prop, CaseStatus.PASSED, Kind.AS_EXPECTED, "",
                expected=expect.text(), actual=verdict.headline(), file=file, line=line,
                summary=summary, trace=verdict.trace)
    prop, got = verdict.prop, verdict.headline()
    steps = len(verdict.trace) if verdict.trace is not None else None
    key = f"{model.key}.expect.{prop}"
    if verdict.trace is not None:
        case.details = trace_text(verdict.trace)
    if expect.verdict == HOLDS:
        if verdict.is_success:
            case.message = f"{prop}: {got}, as expected"
        elif verdict.status is Status.VIOLATED:
            case.status, case.kind = CaseStatus.FAILED, Kind.STARTED_FAILING
            case.message = f"{prop} started failing: {got}; expected it to hold"
        elif verdict.status is Status.HOLDS:  # bounded
            case.status, case.kind = CaseStatus.UNKNOWN, Kind.UNDECIDED
            case.message = (f"{prop}: {got} is not a proof; expected it to hold (use engine "
                            "auto, explicit or pdr)")
        else:
            case.status, case.kind = CaseStatus.UNKNOWN, Kind.UNDECIDED
            case.message = f"{prop} was not decided: {got}; expected it to hold"
        return case
    # expected violated
    if verdict.status is Status.VIOLATED:
        if expect.length is not None and steps != expect.length:
            case.status, case.kind = CaseStatus.FAILED, Kind.LENGTH_CHANGED
            case.message = (f"{prop}: the shortest counterexample is now {steps} steps, "
                            f"{key} pins {expect.length}")
        else:
            case.message = f"{prop}: {got}, as expected"
        return case
    if verdict.is_success or (verdict.status is Status.HOLDS and expect.length is not None
                              and model.depth >= expect.length):
        case.status, case.kind = CaseStatus.FAILED, Kind.VIOLATION_DISAPPEARED
        case.message = (f"{prop}: the expected violation disappeared: {got}; if the fix is "
                        f"intended, set {key} = \"holds\"")
        return case
    case.status, case.kind = CaseStatus.UNKNOWN, Kind.UNDECIDED
    case.message = f"{prop} was not decided: {got}; expected a violation"
    return case


def _coverage(model: ModelConfig, system: System, result: Result) -> Any:
    """The run's coverage when the runner recorded one that settles every action;
    otherwise an exploration of our own within the model's budget."""
    from kvspec.coverage import DEFAULT_MAX_STATES, coverage_of

    cov = getattr(result, "coverage", None)
    if cov is not None and (cov.complete or not _unexpected_dead(cov, model)):
        return cov
    return coverage_of(system, max_states=model.max_states or DEFAULT_MAX_STATES,
                       timeout=model.timeout)


def _unexpected_dead(cov: Any, model: ModelConfig) -> list[str]:
    return [a for a in cov.dead_actions if a not in model.allow_dead]


def coverage_case(model: ModelConfig, system: System, cov: Any) -> Case:
    """Dead actions fail the gate, unless ``allow-dead`` lists them."""
    dead = _unexpected_dead(cov, model)
    fired = [a for a in cov.actions if cov.actions[a] > 0]
    seen = f"{cov.states:,} states" + ("" if cov.complete else ", search incomplete")
    case = Case(model.name, COVERAGE, CaseStatus.PASSED, Kind.AS_EXPECTED, "",
                expected="no dead actions" + (f" (allowed: {', '.join(model.allow_dead)})"
                                              if model.allow_dead else ""),
                actual=f"{len(fired)} of {len(cov.actions)} actions fire ({seen})",
                file=system.loaded.path.resolve(), line=_class_line(system),
                summary="every action can fire in some reachable state")
    notes = []
    allowed_live = [a for a in model.allow_dead if cov.actions.get(a, 0) > 0]
    if allowed_live:
        notes.append(f"allow-dead lists {', '.join(allowed_live)}, which fire(s): the entry "
                     "can go")
    for prop, kinds in cov.unseen_events.items():
        notes.append(f"{prop} watches {', '.join(kinds)}, which the model never emits")
    for inv in cov.vacuous_invariants:
        notes.append(f"invariant {inv} is true in every state of its types: it says nothing")
    case.details = "".join(f"note: {n}\n" for n in notes)
    if dead:
        where = {a.name: a for a in system.actions}
        first = where[dead[0]].ir
        case.file, case.line = Path(first.file).resolve(), first.line
        names = ", ".join(dead)
        if cov.complete:
            case.status, case.kind = CaseStatus.FAILED, Kind.DEAD_ACTION
            case.message = (f"dead action{'s' if len(dead) > 1 else ''}: {names} never "
                            f"fire{'s' if len(dead) == 1 else ''} in any reachable state "
                            f"({cov.states:,} states); if intended, list "
                            f"{'them' if len(dead) > 1 else 'it'} in {model.key}.allow-dead")
        else:
            case.status, case.kind = CaseStatus.UNKNOWN, Kind.UNDECIDED
            case.message = (f"not seen firing in the {cov.states:,} states explored (the "
                            f"search was cut short): {names}")
        lines = [f"{a.name} (line {a.ir.line})" for a in system.actions if a.name in dead]
        case.details = "never fire: " + ", ".join(lines) + "\n" + case.details
    else:
        allowed = [a for a in cov.dead_actions if a in model.allow_dead]
        if allowed:
            case.actual += f"; allowed dead: {', '.join(allowed)}"
        case.message = f"coverage: {case.actual}"
    return case
