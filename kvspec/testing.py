"""Check kvspec models from your own test suite (pytest or unittest).

Three helpers cover the usual gates::

    from kvspec.testing import assert_holds, assert_violates, fuzz_test

    def test_patched_design_is_safe():
        assert_holds("models/patched.py")                       # exhaustive, default sizes

    def test_the_old_design_leaks():
        trace = assert_violates("models/buggy_pd.py", "no-read-beyond-written")
        assert len(trace) <= 9                                    # the shortest counterexample

    # stateful Hypothesis at sizes beyond exhaustive search; pytest collects the class
    TestPatchedFuzz = fuzz_test("models/patched.py", sizes={"requests": 8, "pages": 64})

A model is given as a path (``str`` or ``Path``, a model file as for ``kvspec verify``)
or as an already compiled :class:`~kvspec.lang.system.System`.  Failures are plain
``AssertionError`` messages naming the property, the verdict and, for a violation, the
counterexample step by step.  :func:`schedule_trace` and :func:`random_schedule` build
``kvspec-trace/1`` documents from arbitrary schedules (e.g. to replay a patched model's
runs on the tensor pool).
"""
from __future__ import annotations

import random
import unittest
from pathlib import Path
from typing import Any, Mapping, Sequence

from hypothesis import Verbosity
from hypothesis import seed as hypothesis_seed

from kvspec.engines.fuzz import fuzz_settings, state_machine
from kvspec.lang.loader import load_model
from kvspec.lang.system import ActionInstance, System, compile_model, settable_sizes
from kvspec.trace import Trace, TraceStep
from kvspec.verdict import Result, Status, Verdict

__all__ = ["ModelLike", "assert_holds", "assert_violates", "check", "fuzz_test", "load",
           "random_schedule", "schedule_trace"]

ModelLike = str | Path | System
ENGINES = ("explicit", "bmc", "kind", "pdr", "auto", "fuzz")


def load(model: ModelLike, *, sizes: Mapping[str, int] | None = None,
         properties: Sequence[str] | None = None, model_class: str | None = None) -> System:
    """Compile ``model`` for ``sizes``, checking only ``properties`` when given.

    ``model`` is a model file path, or a System: returned as is, or recompiled from its
    model file when ``sizes`` or ``properties`` are given (its own sizes by default)."""
    if isinstance(model, System):
        if model_class:
            raise ValueError("model_class applies to a model path, not a System")
        if not sizes and not properties:
            return model
        return compile_model(model.loaded, dict(sizes or settable_sizes(model.loaded, model.sizes)),
                             list(properties) if properties else None)
    loaded = load_model(model, model_class)
    return compile_model(loaded, dict(sizes or {}), list(properties) if properties else None)


def check(model: ModelLike, *, sizes: Mapping[str, int] | None = None,
          properties: Sequence[str] | None = None, engine: str = "explicit",
          model_class: str | None = None, timeout: float | None = None,
          max_states: int | None = None, depth: int = 30, symmetry: bool = True,
          proofs_dir: str | Path | None = None, max_examples: int = 200, steps: int = 50,
          seed: int = 0) -> Result:
    """Verify ``model`` with ``engine`` (explicit, bmc, kind, pdr, auto, fuzz) and return
    the :class:`Result`; ``result.verdicts`` has one verdict per property.

    ``model_class`` picks the Model class of a file that defines several;
    ``proofs_dir`` is where ``auto`` looks for a stored certificate to re-check (default:
    wherever :func:`kvspec.runner.run` looks, as for ``kvspec verify``)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (use one of {', '.join(ENGINES)})")
    system = load(model, sizes=sizes, properties=properties, model_class=model_class)
    if engine == "fuzz":
        from kvspec.runner import fuzz
        return fuzz(system, max_examples=max_examples, steps=steps, seed=seed, timeout=timeout)
    from kvspec.runner import run  # the CLI's own dispatch, so the semantics match
    if proofs_dir is None:
        return run(system, engine, depth=depth, timeout=timeout, max_states=max_states,
                   symmetry=symmetry)
    return run(system, engine, depth=depth, timeout=timeout, max_states=max_states,
               symmetry=symmetry, proofs_dir=Path(proofs_dir))


def _describe(system: System, verdict: Verdict) -> str:
    text = f"{verdict.prop}: {verdict.headline()}"
    trace = verdict.trace
    if trace is not None:
        text += f"\n    {trace.reason}"
        for step in trace.steps:
            text += f"\n    {step.index:>3}. {step.instance.label()}"
    return text


def _sizes_text(system: System) -> str:
    return ", ".join(f"{k}={v}" for k, v in system.sizes.items())


def assert_holds(model: ModelLike, *, sizes: Mapping[str, int] | None = None,
                 properties: Sequence[str] | None = None, engine: str = "explicit",
                 model_class: str | None = None, **options: Any) -> Result:
    """Assert that every property of ``model`` is PROVED or HOLDS (exhaustively).

    A violation fails with its counterexample; UNKNOWN (a limit was hit) and a merely
    bounded HOLDS fail too: nothing short of a full check passes.  ``options`` go to
    :func:`check` (``timeout``, ``max_states``, ``depth``, ``symmetry``,
    ``proofs_dir``).  Returns the result for further assertions."""
    result = check(model, sizes=sizes, properties=properties, engine=engine,
                   model_class=model_class, **options)
    bad = [v for v in result.verdicts if not v.is_success]
    if bad:
        lines = [f"{result.system.name} ({_sizes_text(result.system)}), engine {result.engine}: "
                 f"{len(bad)} of {len(result.verdicts)} properties not shown to hold"]
        lines += [_describe(result.system, v) for v in bad]
        raise AssertionError("\n  ".join(lines))
    return result


def assert_violates(model: ModelLike, prop: str, *, sizes: Mapping[str, int] | None = None,
                    engine: str = "explicit", model_class: str | None = None,
                    max_steps: int | None = None, **options: Any) -> Trace:
    """Assert that ``model`` violates ``prop`` and return the (concretely re-executed)
    counterexample trace; with ``max_steps``, also that it is at most that long.  Only
    ``prop`` is checked."""
    result = check(model, sizes=sizes, properties=[prop], engine=engine,
                   model_class=model_class, **options)
    (verdict,) = [v for v in result.verdicts if v.prop == prop]
    if verdict.status is not Status.VIOLATED or verdict.trace is None:
        raise AssertionError(f"{result.system.name} ({_sizes_text(result.system)}): expected "
                             f"{prop} to be VIOLATED, got {verdict.headline()}")
    if max_steps is not None and len(verdict.trace) > max_steps:
        raise AssertionError(f"{result.system.name}: the counterexample for {prop} has "
                             f"{len(verdict.trace)} steps, more than {max_steps}\n  "
                             + _describe(result.system, verdict))
    return verdict.trace


def fuzz_test(model: ModelLike, *, sizes: Mapping[str, int] | None = None,
              properties: Sequence[str] | None = None, model_class: str | None = None,
              engine: str = "fuzz", max_examples: int = 100, steps: int = 50,
              seed: int | None = None,
              verbosity: Verbosity = Verbosity.normal) -> type[unittest.TestCase]:
    """A ``unittest.TestCase`` class running the model's stateful Hypothesis machine.

    Assign it to a module-level name starting with ``Test`` and pytest (or unittest)
    runs it.  Rules are the model's actions, preconditions its guards, invariants its
    properties; a failure is shrunk by Hypothesis and reported as a
    ``PropertyViolation`` whose message lists the concrete schedule.  ``seed`` fixes the
    run (default: derandomized, the same examples every time).  ``engine`` is accepted
    for symmetry with the other helpers and must be ``"fuzz"``: the class *is* the
    stateful fuzzer (use :func:`assert_holds` for the other engines)."""
    if engine != "fuzz":
        raise ValueError(f"fuzz_test runs the fuzz engine, not {engine!r} (use assert_holds "
                         "or check for the other engines)")
    system = load(model, sizes=sizes, properties=properties, model_class=model_class)
    machine = state_machine(system, name=f"{system.name}Fuzz")
    if seed is not None:
        machine = hypothesis_seed(seed)(machine)
    case: type[unittest.TestCase] = machine.TestCase
    case.settings = fuzz_settings(max_examples=max_examples, steps=steps,  # type: ignore[attr-defined]
                                  verbosity=verbosity)
    case.__doc__ = f"Stateful Hypothesis run of {system.name} ({_sizes_text(system)})."
    return case


def random_schedule(system: System, steps: int, *, seed: int = 0,
                    exclude: Sequence[str] = ()) -> list[ActionInstance]:
    """A random run of ``system``: up to ``steps`` steps (fewer when no action is
    enabled), each an action chosen uniformly among the enabled ones, then one of its
    enabled instances (so that 64 ``prealloc`` instances do not crowd out ``decode``).
    Actions named in ``exclude`` are never chosen (e.g. ``("abort",)`` for runs that
    reach decode)."""
    rng = random.Random(seed)
    state = system.initial
    out: list[ActionInstance] = []
    for _ in range(steps):
        by_action: dict[str, list[Any]] = {}
        for res in system.successors(state):
            if res.instance.name in exclude:
                continue
            by_action.setdefault(res.instance.name, []).append(res)
        if not by_action:
            break
        res = rng.choice(by_action[rng.choice(sorted(by_action))])
        out.append(res.instance)
        state = res.state
    return out


def schedule_trace(system: System, schedule: Sequence[ActionInstance]) -> dict[str, Any]:
    """The ``kvspec-trace/1`` document of any schedule, violating or not (``replay``,
    ``render`` accept it).  ``property``/``reason`` name the first violation the run
    hits, or are null when it hits none; ``violation`` is set on that step."""
    from kvspec.trace import Violation

    state = system.initial
    trace = Trace(system, "", state)
    first: tuple[str, str] | None = None
    for i, inst in enumerate(schedule, 1):
        res = system.step(state, inst)
        if res is None:
            raise ValueError(f"step {i}: {inst.label()} is not enabled")
        violation = None
        if first is None and res.violations:
            prop, reason, event = res.violations[0]
            first = (prop, reason)
            violation = Violation(prop, reason, event)
        trace.steps.append(TraceStep(i, inst, res.events, res.state,
                                     system.schema.diff(state, res.state), violation))
        state = res.state
    doc = trace.to_json()
    doc["property"], doc["reason"] = first if first is not None else (None, None)
    return doc
