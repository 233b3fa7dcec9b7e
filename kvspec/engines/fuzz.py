"""Stateful Hypothesis from any model: randomised exploration with shrinking.

:func:`state_machine` turns a compiled :class:`~kvspec.lang.system.System` into a
``hypothesis.stateful.RuleBasedStateMachine`` class:

* **one rule per action**, named after it, whose keyword arguments are the action's
  parameters.  Each parameter has its own strategy: a ``sampled_from`` over the values
  of its domain that, together with the parameters drawn before it, extend to an
  *enabled* instance in the current state.  Nothing is drawn and then rejected, so a
  pool of ``requests x pages`` instances costs no more than the few that are enabled,
  and shrinking moves every parameter towards the smallest id (``r0``, ``page 0``).
* **preconditions = guards**: a rule is valid when some instance of its action is
  enabled (``system.step`` is not None).  The enabled instances of a state are computed
  once per action, with the hoisted guards the explicit engine uses, and cached.
* **invariants = the properties**: one ``@invariant`` per checked property, failing with
  :class:`PropertyViolation` (reason and concrete schedule in the message) when the last
  step's events made its monitor fire, or a model invariant fails.

:func:`run_fuzz` runs that machine with a seed and turns the shrunk failing schedule
into a verified trace with :func:`kvspec.trace.concretize` — the same JSON as every other
engine, so ``kvspec render`` and ``kvspec replay`` work on it.  Fuzzing never claims
``HOLDS``: without a violation every property is ``UNKNOWN`` (``method="fuzz"``).
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, invariant, precondition, rule,
                                 run_state_machine_as_test)

from kvspec.lang.schema import State
from kvspec.lang.system import ActionDef, ActionInstance, StepResult, System
from kvspec.trace import concretize
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

__all__ = ["FuzzCounters", "ModelMachine", "PropertyViolation", "fuzz_settings", "run_fuzz",
           "state_machine"]


class PropertyViolation(AssertionError):
    """A generated machine's invariant failed: ``props`` were violated by the last step
    of ``schedule`` (or by the initial state when the schedule is empty)."""

    def __init__(self, props: list[str], reasons: list[str], schedule: list[ActionInstance],
                 model: str) -> None:
        self.props = props
        self.reasons = reasons
        self.schedule = schedule
        steps = "\n".join(f"  {i}. {inst.label()}" for i, inst in enumerate(schedule, 1))
        what = "; ".join(f"{p}: {r}" for p, r in zip(props, reasons))
        super().__init__(f"{model} violates {what}\nschedule ({len(schedule)} steps):\n"
                         f"{steps or '  (the initial state)'}")


class _OutOfTime(BaseException):
    """Raised from a rule when the fuzzing deadline has passed.  A BaseException, so that
    Hypothesis does not take it for a test failure and stops at once."""


@dataclass
class FuzzCounters:
    """Shared by every machine of one run: work done, and failures seen (best last)."""

    steps: int = 0
    examples: int = 0
    longest: int = 0
    failures: list[tuple[list[ActionInstance], list[str]]] = field(default_factory=list)
    deadline: float | None = None


class ModelMachine(RuleBasedStateMachine):
    """Base class of the machines :func:`state_machine` generates.

    ``state`` is the model state, ``schedule`` the instances run so far, ``last`` the
    last :class:`StepResult`.  Subclasses may override :meth:`after_step` to drive
    something else in lockstep (``tests/test_lockstep.py`` drives the tensor pool).
    """

    system: ClassVar[System]
    checked: ClassVar[tuple[str, ...]] = ()
    checked_invariants: ClassVar[bool] = False  # some checked property is a model invariant
    counters: ClassVar[FuzzCounters | None] = None
    # filled by state_machine(): action -> parameter -> {value: position in its domain},
    # action -> {args: instance}, and a cache of sampled_from strategies
    domain_order: ClassVar[list[list[dict[Any, int]]]] = []
    instance_of: ClassVar[list[dict[tuple[Any, ...], ActionInstance]]] = []
    sampled_cache: ClassVar[dict[tuple[Any, ...], st.SearchStrategy[Any]]] = {}

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        self.state: State = cls.system.initial
        self.schedule: list[ActionInstance] = []
        self.last: StepResult | None = None
        self.violated: dict[str, str] = {}  # property -> reason, caused by the last step
        self._cached_for: State | None = None
        self._enabled: dict[int, dict[tuple[Any, ...], tuple[State, list[Any], list[Any]]]] = {}
        self._any: dict[int, bool] = {}
        self._drawing: int | None = None  # the action whose parameters are being drawn
        self._drawn: dict[int, Any] = {}
        self._session = ExitStack()
        self._session.enter_context(cls.system.machine.session())
        self._initial_invariants()
        if cls.counters is not None:
            cls.counters.examples += 1

    def teardown(self) -> None:
        self._session.close()

    # ----------------------------------------------------------------- hooks
    def after_step(self, result: StepResult) -> None:
        """Called after every executed step (before the invariants run)."""

    # ---------------------------------------------------------- enabledness
    def _fresh(self) -> None:
        if self._cached_for is not self.state:
            self._cached_for = self.state
            self._enabled = {}
            self._any = {}

    def enabled(self, ai: int) -> dict[tuple[Any, ...], tuple[State, list[Any], list[Any]]]:
        """The enabled instances of action ``ai`` in the current state: args -> outcome."""
        self._fresh()
        got = self._enabled.get(ai)
        if got is None:
            got = {}
            system = type(self).system
            machine = system.machine
            state = self.state
            guard, groups = system.batches()[ai]
            for gkey, group in groups:
                if guard is not None and not machine.guard(state, guard, gkey):
                    continue
                for inst in group:
                    out = machine.step(state, inst.action.fast or inst.action.fn, inst.args)
                    if out is not None:
                        got[inst.args] = out
            self._enabled[ai] = got
            self._any[ai] = bool(got)
        return got

    def has_enabled(self, ai: int) -> bool:
        """Whether some instance of action ``ai`` is enabled (stops at the first)."""
        self._fresh()
        known = self._any.get(ai)
        if known is not None:
            return known
        system = type(self).system
        machine = system.machine
        state = self.state
        guard, groups = system.batches()[ai]
        found = False
        for gkey, group in groups:
            if guard is not None and not machine.guard(state, guard, gkey):
                continue
            for inst in group:
                if machine.step(state, inst.action.fast or inst.action.fn, inst.args) is not None:
                    found = True
                    break
            if found:
                break
        self._any[ai] = found
        return found

    def deadlocked(self) -> bool:
        return not any(self.has_enabled(ai) for ai in range(len(type(self).system.actions)))

    def param_strategy(self, ai: int, j: int) -> st.SearchStrategy[Any]:
        """Values of parameter ``j`` of action ``ai`` that, with the parameters of this
        rule drawn before it (Hypothesis draws them in name order), extend to an enabled
        instance — in domain order, so that shrinking goes to the smallest."""
        if self._drawing != ai:
            self._drawing = ai
            self._drawn = {}
        drawn = tuple(self._drawn.items())
        values = {args[j] for args in self.enabled(ai)
                  if all(args[k] == v for k, v in drawn)}
        cls = type(self)
        order = cls.domain_order[ai][j]
        cands = tuple(sorted(values, key=order.__getitem__))
        strat = cls.sampled_cache.get(cands)
        if strat is None:
            if len(cls.sampled_cache) > 4096:
                cls.sampled_cache.clear()
            strat = cls.sampled_cache[cands] = st.sampled_from(cands)
        return strat.map(lambda v: self._note(j, v))

    def _note(self, j: int, value: Any) -> Any:
        self._drawn[j] = value
        return value

    # ------------------------------------------------------------- stepping
    def run_action(self, ai: int, args: tuple[Any, ...]) -> None:
        cls = type(self)
        counters = cls.counters
        if counters is not None and counters.deadline is not None \
                and time.monotonic() > counters.deadline:
            raise _OutOfTime()
        self._drawing = None
        system = cls.system
        out = self.enabled(ai).get(args)
        inst = cls.instance_of[ai][args]
        if out is None:  # not drawn from the enabled set (e.g. an explicit example)
            res = system.step(self.state, inst)
            if res is None:
                raise AssertionError(f"kvspec fuzz: {inst.label()} is not enabled")
        else:
            res = StepResult(inst, out[0], out[1], out[2])
        self.state = res.state
        self.schedule.append(inst)
        self.last = res
        self.violated = {}
        for prop, reason, _ev in res.violations:
            self.violated.setdefault(prop, reason)
        if cls.checked_invariants:
            for name in system.failed_invariants(res.state):
                self.violated.setdefault(name, f"invariant {name} fails after {inst.label()}")
        if counters is not None:
            counters.steps += 1
            counters.longest = max(counters.longest, len(self.schedule))
        self.after_step(res)

    def _initial_invariants(self) -> None:
        system = type(self).system
        self.violated = {}
        if type(self).checked_invariants:
            for name in system.failed_invariants(self.state):
                self.violated[name] = f"invariant {name} fails in the initial state"

    def check_property(self, prop: str) -> None:
        """The body of the generated invariant of ``prop``."""
        if prop not in self.violated:
            return
        cls = type(self)
        props = [p for p in cls.checked if p in self.violated]
        reasons = [self.violated[p] for p in props]
        if cls.counters is not None:
            cls.counters.failures.append((list(self.schedule), props))
        raise PropertyViolation(props, reasons, list(self.schedule), cls.system.name)


def _identifier(name: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in name)
    return out if out and not out[0].isdigit() else f"_{out}"


def _action_rule(ai: int, action: ActionDef) -> Callable[..., None]:
    names = [n for n, _ in action.params]

    def body(self: ModelMachine, **kwargs: Any) -> None:
        self.run_action(ai, tuple(kwargs[n] for n in names))

    body.__name__ = _identifier(action.name)
    body.__qualname__ = body.__name__
    body.__doc__ = action.fn.__doc__
    strategies = {
        n: st.runner().flatmap(lambda m, j=j: m.param_strategy(ai, j))
        for j, n in enumerate(names)
    }
    return precondition(lambda self: self.has_enabled(ai))(rule(**strategies)(body))


def _property_invariant(prop: str) -> Callable[[ModelMachine], None]:
    def check(self: ModelMachine) -> None:
        self.check_property(prop)

    check.__name__ = "holds_" + _identifier(prop)
    check.__qualname__ = check.__name__
    return invariant()(check)


def state_machine(system: System, *, properties: list[str] | tuple[str, ...] | None = None,
                  base: type[ModelMachine] = ModelMachine,
                  counters: FuzzCounters | None = None,
                  name: str | None = None) -> type[ModelMachine]:
    """A ``RuleBasedStateMachine`` class for ``system``.

    ``properties``: the properties whose violation fails an example (default: all of
    the system's; ``()`` checks none — for lockstep tests that assert their own things
    in :meth:`ModelMachine.after_step`).  ``base``: a :class:`ModelMachine` subclass to
    derive from.  ``counters``: where the run's step counts and failures are collected.
    """
    known = [p.name for p in system.properties]
    checked = tuple(known if properties is None else properties)
    for p in checked:
        if p not in known:
            raise ValueError(f"unknown property {p!r} (this system checks: {', '.join(known)})")
    invariants = {p.name for p in system.properties if p.kind == "invariant"}
    namespace: dict[str, Any] = {
        "system": system,
        "checked": checked,
        "counters": counters,
        "checked_invariants": any(p in invariants for p in checked),
        "__doc__": f"Stateful Hypothesis machine of {system.name} "
                   f"({', '.join(f'{k}={v}' for k, v in system.sizes.items())}).",
    }
    used = set(dir(base))
    for ai, action in enumerate(system.actions):
        fn = _action_rule(ai, action)
        attr = fn.__name__ if fn.__name__ not in used else f"action_{fn.__name__}"
        namespace[attr] = fn
    namespace["no_action_enabled"] = precondition(lambda self: self.deadlocked())(
        rule()(_stutter))
    for prop in checked:
        inv = _property_invariant(prop)
        namespace[inv.__name__] = inv
    domain_order: list[list[dict[Any, int]]] = []
    instances: list[dict[tuple[Any, ...], ActionInstance]] = []
    for action in system.actions:
        domain_order.append([{t.decode(x): i for i, x in enumerate(t.domain())}
                             for _, t in action.params])
        instances.append({})
    index_of = {id(a): i for i, a in enumerate(system.actions)}
    for inst in system.instances:
        instances[index_of[id(inst.action)]][inst.args] = inst
    namespace["domain_order"] = domain_order
    namespace["instance_of"] = instances
    namespace["sampled_cache"] = {}
    return type(name or f"{_identifier(system.name)}Machine", (base,), namespace)


def _stutter(self: ModelMachine) -> None:
    """No action is enabled (the model is done or deadlocked): nothing happens."""


def fuzz_settings(*, max_examples: int = 200, steps: int = 50,
                  verbosity: Verbosity = Verbosity.quiet) -> settings:
    """The Hypothesis settings of a fuzz run: no deadline, no example database, no
    health checks (a model step is not a unit test), derandomized."""
    return settings(max_examples=max_examples, stateful_step_count=steps, deadline=None,
                    database=None, derandomize=True, suppress_health_check=list(HealthCheck),
                    verbosity=verbosity, report_multiple_bugs=False, print_blob=False,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink))


@dataclass
class _Search:
    found: tuple[list[ActionInstance], list[str]] | None
    timed_out: bool
    examples: int


def _search(system: System, checked: list[str], *, max_examples: int, steps: int, seed: int,
            counters: FuzzCounters) -> _Search:
    run = FuzzCounters(deadline=counters.deadline)
    cls = state_machine(system, properties=checked, counters=run)
    cls = hypothesis_seed(seed)(cls)
    timed_out = False
    try:
        run_state_machine_as_test(cls, settings=fuzz_settings(max_examples=max_examples,
                                                              steps=steps))
    except PropertyViolation:
        pass
    except _OutOfTime:
        timed_out = True
    finally:
        counters.steps += run.steps
        counters.examples += run.examples
        counters.longest = max(counters.longest, run.longest)
    found = None
    if run.failures:
        # the shrinker only keeps improvements: the last of the shortest is the best
        shortest = min(len(s) for s, _ in run.failures)
        found = [f for f in run.failures if len(f[0]) == shortest][-1]
    return _Search(found, timed_out, run.examples)


def run_fuzz(system: System, *, max_examples: int = 200, steps: int = 50, seed: int = 0,
             timeout: float | None = None) -> EngineOutcome:
    """Fuzz every property of ``system`` with stateful Hypothesis.

    Each round runs up to ``max_examples`` examples of up to ``steps`` steps, checking the
    properties not yet violated; a violation is shrunk, concretized into a trace
    (``VIOLATED``, method ``fuzz``) and the next round checks the rest.  Properties
    without a violation are ``UNKNOWN`` — fuzzing is not exhaustive.  ``seed`` makes the
    run reproducible; ``timeout`` (seconds) bounds it.
    """
    if max_examples < 1 or steps < 1:
        raise ValueError("max_examples and steps must be at least 1")
    start = time.monotonic()
    counters = FuzzCounters(deadline=start + timeout if timeout else None)
    remaining = [p.name for p in system.properties]
    verdicts: dict[str, Verdict] = {}
    rounds = 0
    last = _Search(None, False, 0)
    while remaining:
        rounds += 1
        last = _search(system, remaining, max_examples=max_examples, steps=steps, seed=seed,
                       counters=counters)
        if last.found is None:
            break
        schedule, props = last.found
        note = "shrinking cut short by the timeout" if last.timed_out else "shrunk"
        for prop in props:
            trace = concretize(system, prop, schedule, engine="fuzz")
            verdicts[prop] = Verdict(prop, Status.VIOLATED, "fuzz",
                                     f"{len(trace)} steps ({note})", trace)
        remaining = [p for p in remaining if p not in props]
        if last.timed_out:
            break
    elapsed = time.monotonic() - start
    for prop in remaining:
        if last.timed_out:
            detail = (f"timeout after {elapsed:.1f} s: no violation in {counters.steps} steps "
                      "(not exhaustive)")
        else:
            detail = f"no violation in {last.examples} examples × {steps} steps (not exhaustive)"
        verdicts[prop] = Verdict(prop, Status.UNKNOWN, "fuzz", detail)
    stats = Stats(states=counters.steps, transitions=counters.steps, depth=counters.longest,
                  seconds=elapsed)
    stats.extra = {"fuzz": {"examples": counters.examples, "steps_per_example": steps,
                            "max_examples": max_examples, "seed": seed, "rounds": rounds}}
    ordered = [verdicts[p.name] for p in system.properties]
    return EngineOutcome(ordered, stats, "fuzz")
