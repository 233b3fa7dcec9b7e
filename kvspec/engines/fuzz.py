"""Stateful Hypothesis from any model: randomised exploration with shrinking.

:func:`state_machine` turns a compiled :class:`~kvspec.lang.system.System` into a
``hypothesis.stateful.RuleBasedStateMachine`` class:

* **one rule per action**, named after it, whose keyword arguments are the action's
  parameters.  Each parameter has a precomputed strategy over its domain; when the
  value drawn (with the parameters drawn before it) extends to no *enabled* instance,
  it is drawn again among the values that do.  Nothing is drawn and then rejected, so
  ``requests x pages`` instances cost no more than the few that are enabled, and
  shrinking moves every parameter towards the smallest id (``r0``, ``page 0``).
* **preconditions = guards**: a rule is valid when some instance of its action is
  enabled (``system.step`` is not None), decided by trying instances — a group at a
  time per value of the action's hoisted guard, as the explicit engine does — until
  one is enabled, and cached per state.  Rules are chosen uniformly among the valid
  ones (no swarm testing, see ``ModelMachine.swarm``); ``no_action_enabled`` is the
  no-op rule of a state where nothing is.
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

from kvspec.engines.explicit import check_timeout
from kvspec.lang.schema import State
from kvspec.lang.system import ActionDef, ActionInstance, StepResult, System
from kvspec.lang.types import PAGE, REQUEST
from kvspec.trace import concretize
from kvspec.verdict import EngineOutcome, Stats, Status, Verdict

__all__ = ["FuzzCounters", "ModelMachine", "PropertyViolation", "fuzz_settings",
           "minimize_schedule", "run_fuzz", "state_machine"]


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


class _OutOfTime(KeyboardInterrupt):
    """Raised from a rule when the fuzzing deadline has passed or (``shrink_budget``)
    Hypothesis' shrinking has used up its budget of model steps.  Hypothesis lets a KeyboardInterrupt
    through at once without recording the cut-short example (any other exception would
    be a test failure, or make the run look flaky); ``_search`` catches this subclass
    only, so a real Ctrl-C still stops everything."""

    def __init__(self, shrink_budget: bool) -> None:
        super().__init__("shrink budget spent" if shrink_budget else "fuzzing deadline passed")
        self.shrink_budget = shrink_budget


@dataclass
class FuzzCounters:
    """Shared by every machine of one run: work done, and failures seen (best last)."""

    steps: int = 0
    examples: int = 0
    longest: int = 0
    failures: list[tuple[list[ActionInstance], list[str]]] = field(default_factory=list)
    deadline: float | None = None
    shrink_steps: int | None = None  # Hypothesis may run this many steps after a failure
    shrink_limit: int | None = None  # ... that is, up to this value of ``steps``

    def check_budget(self) -> None:
        """Raise _OutOfTime when the deadline or the shrink budget is spent.  The shrink
        budget counts steps, not seconds, so a seeded run is reproducible."""
        if self.shrink_limit is not None and self.steps >= self.shrink_limit:
            raise _OutOfTime(shrink_budget=True)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _OutOfTime(shrink_budget=False)


@dataclass
class _Tables:
    """Per-system lookups for drawing instances, built once per generated class."""

    domains: list[list[list[Any]]]                   # action -> parameter -> values
    domain_strategies: list[list[st.SearchStrategy[Any]]]
    instance_of: list[dict[tuple[Any, ...], ActionInstance]]
    groups: list[list[tuple[tuple[Any, ...], list[ActionInstance]]]]  # by hoisted-guard values
    sampled: dict[tuple[Any, ...], st.SearchStrategy[Any]] = field(default_factory=dict)
    arguments: dict[str, st.SearchStrategy[Any]] = field(default_factory=dict)  # per rule
    rule_index: st.SearchStrategy[int] | None = None

    @classmethod
    def build(cls, system: System) -> _Tables:
        index_of = {id(a): i for i, a in enumerate(system.actions)}
        domains = [[list(t.domain()) for _, t in a.params] for a in system.actions]
        instances: list[list[ActionInstance]] = [[] for _ in system.actions]
        for inst in system.instances:
            instances[index_of[id(inst.action)]].append(inst)
        groups = [list(g) for _, g in system.batches()]
        return cls(domains, [[st.sampled_from(d) for d in ds] for ds in domains],
                   [{i.args: i for i in insts} for insts in instances], groups)

    def sampled_from(self, values: tuple[Any, ...]) -> st.SearchStrategy[Any]:
        """``st.sampled_from(values)``, cached by the values *and their types*: ``(0, 1)``
        and ``(False, True)`` are equal tuples, but a request id must never be drawn
        as ``False`` nor a bool parameter as ``0``."""
        key = tuple((type(v), v) for v in values)
        strat = self.sampled.get(key)
        if strat is None:
            if len(self.sampled) > 4096:
                self.sampled.clear()
            strat = self.sampled[key] = st.sampled_from(values)
        return strat


_Outcome = tuple[State, list[Any], list[Any]]
_Fixed = tuple[tuple[int, Any], ...]  # (parameter position, value), in position order


class ModelMachine(RuleBasedStateMachine):
    """Base class of the machines :func:`state_machine` generates.

    ``state`` is the model state, ``schedule`` the instances run so far, ``last`` the
    last :class:`StepResult`, ``violated`` the properties the last step violated.
    Subclasses may override :meth:`after_step` to drive something else in lockstep
    (``tests/test_lockstep.py`` drives the tensor page pool).
    """

    system: ClassVar[System]
    checked: ClassVar[tuple[str, ...]] = ()
    checked_invariants: ClassVar[bool] = False  # some checked property is a model invariant
    counters: ClassVar[FuzzCounters | None] = None
    swarm: ClassVar[bool] = False  # Hypothesis' swarm testing (rules switched off per example)
    tables: ClassVar[_Tables]
    rule_order: ClassVar[list[Any] | None] = None

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        self.state: State = cls.system.initial
        self.schedule: list[ActionInstance] = []
        self.last: StepResult | None = None
        self.violated: dict[str, str] = {}  # property -> reason, caused by the last step
        self._cached_for: State | None = None
        self._outcomes: dict[tuple[int, tuple[Any, ...]], _Outcome | None] = {}
        self._viable: dict[tuple[int, _Fixed], bool] = {}
        self._guards: dict[tuple[int, tuple[Any, ...]], bool] = {}
        self._drawing: int | None = None  # the action whose arguments are being drawn
        self._drawn: tuple[Any, ...] = ()
        self._session = ExitStack()
        self._session.enter_context(cls.system.machine.session())
        if not cls.swarm:
            # one uniform choice among the rules that can run: a lifecycle needs every
            # action, and swarm testing would switch some off for a whole example.
            # _rules_strategy is Hypothesis-private (read by run_state_machine_as_test
            # since 2019); should a release stop reading it, runs fall back to swarm
            # testing: still correct, less thorough.
            self._rules_strategy = _choose_rule()  # type: ignore[assignment]
        if cls.checked_invariants:
            for name in cls.system.failed_invariants(self.state):
                self.violated[name] = f"invariant {name} fails in the initial state"
        if cls.counters is not None:
            cls.counters.examples += 1

    def teardown(self) -> None:
        self._session.close()

    def after_step(self, result: StepResult) -> None:
        """Hook: called after every executed step, before the invariants run."""

    @classmethod
    def ordered_rules(cls, machine: ModelMachine) -> list[Any]:
        """The rules in model order: the actions as declared, then the no-op rule."""
        if cls.rule_order is None:
            rank = {name: i for i, name in enumerate(vars(cls))}
            cls.rule_order = sorted(machine.rules,
                                    key=lambda r: rank.get(r.function.__name__, len(rank)))
        return cls.rule_order

    # ---------------------------------------------------------- enabledness
    def _fresh(self) -> None:
        if self._cached_for is not self.state:
            self._cached_for = self.state
            self._outcomes = {}
            self._viable = {}
            self._guards = {}

    def outcome(self, ai: int, args: tuple[Any, ...]) -> _Outcome | None:
        """Successor, events and violations of an instance, or None when disabled."""
        self._fresh()
        key = (ai, args)
        if key in self._outcomes:
            return self._outcomes[key]
        inst = type(self).tables.instance_of[ai][args]
        action = inst.action
        out = None
        if action.guard is None or self._guard(ai, tuple(args[k] for k in action.guard[1])):
            out = type(self).system.machine.step(self.state, action.fast or action.fn, args)
        self._outcomes[key] = out
        return out

    def _guard(self, ai: int, gkey: tuple[Any, ...]) -> bool:
        key = (ai, gkey)
        ok = self._guards.get(key)
        if ok is None:
            guard = type(self).system.actions[ai].guard
            assert guard is not None
            ok = self._guards[key] = type(self).system.machine.guard(self.state, guard[0], gkey)
        return ok

    def viable(self, ai: int, fixed: _Fixed = ()) -> bool:
        """Whether some enabled instance of action ``ai`` has the parameter values
        ``fixed``; stops at the first one found (cached per state).  Instances are
        visited in groups sharing the values of the action's hoisted guard, and a group
        whose guard fails is skipped whole."""
        self._fresh()
        key = (ai, fixed)
        hit = self._viable.get(key)
        if hit is not None:
            return hit
        tables = type(self).tables
        if len(fixed) == len(tables.domains[ai]):
            found = self.outcome(ai, tuple(v for _, v in fixed)) is not None
            self._viable[key] = found
            return found
        action = type(self).system.actions[ai]
        machine = type(self).system.machine
        fn = action.fast or action.fn
        positions = action.guard[1] if action.guard is not None else []
        given = dict(fixed)
        found = False
        outcomes = self._outcomes
        state = self.state
        for gkey, insts in tables.groups[ai]:
            if positions:
                if any(k in given and given[k] != g for k, g in zip(positions, gkey)):
                    continue
                if not self._guard(ai, gkey):
                    continue
            for inst in insts:
                args = inst.args
                if fixed and any(args[j] != v for j, v in fixed):
                    continue
                okey = (ai, args)
                if okey in outcomes:
                    out = outcomes[okey]
                else:
                    out = outcomes[okey] = machine.step(state, fn, args)
                if out is not None:
                    found = True
                    break
            if found:
                break
        self._viable[key] = found
        return found

    def has_enabled(self, ai: int) -> bool:
        """Whether some instance of action ``ai`` is enabled: the rule's precondition."""
        return self.viable(ai)

    def deadlocked(self) -> bool:
        """No action is enabled: the precondition of the no-op rule."""
        return not any(self.viable(ai) for ai in range(len(type(self).system.actions)))

    def draw_args(self, draw: Callable[..., Any], ai: int) -> tuple[Any, ...]:
        """Draw the parameters of an enabled instance of action ``ai``, in order.

        Each parameter is first drawn from its whole domain (one precomputed strategy
        per parameter); when no enabled instance has that value (with the values drawn
        before it), it is drawn again among the values that have one.  Both draws
        shrink to the smallest value: ``r0``, ``page 0``."""
        tables = type(self).tables
        fixed: _Fixed = ()
        for j, strategy in enumerate(tables.domain_strategies[ai]):
            v = draw(strategy)
            if not self.viable(ai, fixed + ((j, v),)):
                options = tuple(u for u in tables.domains[ai][j]
                                if self.viable(ai, fixed + ((j, u),)))
                v = draw(tables.sampled_from(options))
            fixed += ((j, v),)
        return tuple(v for _, v in fixed)

    def argument(self, draw: Callable[..., Any], ai: int, j: int) -> Any:
        """Parameter ``j`` of the instance being drawn for rule ``ai``: the first
        argument Hypothesis asks for draws the whole instance."""
        if self._drawing != ai:
            self._drawing = ai
            self._drawn = self.draw_args(draw, ai)
        return self._drawn[j]

    # ------------------------------------------------------------- stepping
    def run_action(self, ai: int, args: tuple[Any, ...]) -> None:
        """Execute the instance ``args`` of action ``ai`` (the body of its rule)."""
        cls = type(self)
        counters = cls.counters
        if counters is not None:
            counters.check_budget()
        self._drawing = None
        inst = cls.tables.instance_of[ai][args]
        args = inst.args  # the instance's own values (a bool stays a bool)
        out = self.outcome(ai, args)
        if out is None:
            raise AssertionError(f"kvspec fuzz: {inst.label()} is not enabled")
        res = StepResult(inst, out[0], out[1], out[2])
        self.state = res.state
        self.schedule.append(inst)
        self.last = res
        self.violated = {}
        for prop, reason, _ev in res.violations:
            self.violated.setdefault(prop, reason)
        if cls.checked_invariants:
            for name in cls.system.failed_invariants(res.state):
                self.violated.setdefault(name, f"invariant {name} fails after {inst.label()}")
        if counters is not None:
            counters.steps += 1
            counters.longest = max(counters.longest, len(self.schedule))
        self.after_step(res)

    def check_property(self, prop: str) -> None:
        """The body of the generated invariant of ``prop``."""
        if prop not in self.violated:
            return
        cls = type(self)
        props = [p for p in cls.checked if p in self.violated]
        reasons = [self.violated[p] for p in props]
        counters = cls.counters
        if counters is not None:
            counters.failures.append((list(self.schedule), props))
            if counters.shrink_limit is None and counters.shrink_steps is not None:
                counters.shrink_limit = counters.steps + counters.shrink_steps
        raise PropertyViolation(props, reasons, list(self.schedule), cls.system.name)


_RUNNER = st.runner()


@st.composite
def _choose_rule(draw: Callable[..., Any]) -> tuple[Any, dict[str, Any]]:
    """A rule whose preconditions hold, and its arguments.

    Up to three uniform picks among all rules, then a uniform pick among the valid
    ones: only the preconditions of the rules picked are evaluated, and a pick shrinks
    towards the first rule (the model's first action).  Strategies are built once per
    class (building one per draw costs Hypothesis a validation each time)."""
    machine = draw(_RUNNER)
    cls = type(machine)
    rules = cls.ordered_rules(machine)
    tables = cls.tables

    def valid(r: Any) -> bool:
        return all(pc(machine) for pc in r.preconditions)

    chosen = None
    pick = tables.rule_index
    if pick is None:
        pick = tables.rule_index = st.integers(0, len(rules) - 1)
    for _ in range(3):
        candidate = rules[draw(pick)]
        if valid(candidate):
            chosen = candidate
            break
    if chosen is None:
        chosen = draw(tables.sampled_from(tuple(r for r in rules if valid(r))))
    name = chosen.function.__name__
    arguments = tables.arguments.get(name)
    if arguments is None:
        arguments = tables.arguments[name] = st.fixed_dictionaries(chosen.arguments)
    return chosen, draw(arguments)


@st.composite
def _argument(draw: Callable[..., Any], ai: int, j: int) -> Any:
    machine = draw(_RUNNER)
    return machine.argument(draw, ai, j)


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
    strategies = {n: _argument(ai, j) for j, n in enumerate(names)}
    decorate = rule(**strategies)  # type: ignore[call-overload]
    return precondition(lambda self: self.has_enabled(ai))(decorate(body))


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
        rule()(no_action_enabled))
    for prop in checked:
        inv = _property_invariant(prop)
        namespace[inv.__name__] = inv
    namespace["tables"] = _Tables.build(system)
    namespace["rule_order"] = None
    return type(name or f"{_identifier(system.name)}Machine", (base,), namespace)


def no_action_enabled(self: ModelMachine) -> None:
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
    timed_out: bool   # the run's deadline passed (generation or shrinking)
    cut_short: bool   # Hypothesis' shrinking was stopped by the shrink budget
    examples: int


def _search(system: System, checked: list[str], *, max_examples: int, steps: int, seed: int,
            shrink_steps: int, counters: FuzzCounters) -> _Search:
    run = FuzzCounters(deadline=counters.deadline, shrink_steps=shrink_steps)
    cls = state_machine(system, properties=checked, counters=run)
    cls = hypothesis_seed(seed)(cls)
    stopped: _OutOfTime | None = None
    try:
        run_state_machine_as_test(cls, settings=fuzz_settings(max_examples=max_examples,
                                                              steps=steps))
    except PropertyViolation:
        pass
    except _OutOfTime as exc:
        stopped = exc
    finally:
        counters.steps += run.steps
        counters.examples += run.examples
        counters.longest = max(counters.longest, run.longest)
    found = None
    if run.failures:
        # the shrinker only keeps improvements: the last of the shortest is the best
        shortest = min(len(s) for s, _ in run.failures)
        found = [f for f in run.failures if len(f[0]) == shortest][-1]
    timed_out = stopped is not None and not stopped.shrink_budget
    cut_short = stopped is not None and stopped.shrink_budget
    return _Search(found, timed_out, cut_short, run.examples)


# ------------------------------------------------------------------ minimizing
def _ends_violating(system: System, schedule: list[ActionInstance], prop: str,
                    invariant: bool) -> bool:
    """``schedule`` runs, violates ``prop`` at its last step and not before."""
    state = system.initial
    last = len(schedule) - 1
    for i, inst in enumerate(schedule):
        res = system.step(state, inst)
        if res is None:
            return False
        state = res.state
        hit = any(p == prop for p, _, _ in res.violations) or (
            invariant and prop in system.failed_invariants(state))
        if hit != (i == last):
            return False
    return bool(schedule)


def _renamed(system: System, schedule: list[ActionInstance],
             lookup: dict[tuple[int, tuple[Any, ...]], ActionInstance]) -> list[ActionInstance] | None:
    """Requests and pages renumbered by first appearance (r0 first, page 0 first)."""
    maps: dict[str, dict[Any, int]] = {REQUEST: {}, PAGE: {}}
    out = []
    for inst in schedule:
        args = []
        for (_, vtype), a in zip(inst.action.params, inst.args):
            dim = vtype.ref_dim
            if dim in maps:
                a = maps[dim].setdefault(a, len(maps[dim]))
            args.append(a)
        new = lookup.get((id(inst.action), tuple(args)))
        if new is None:
            return None
        out.append(new)
    return out


def _cascade(system: System, schedule: list[ActionInstance], drop: int) -> list[ActionInstance]:
    """``schedule`` without step ``drop`` and without every later step that is no longer
    enabled once it is gone (e.g. a request's admission after its arrival was dropped)."""
    state = system.initial
    kept = []
    for i, inst in enumerate(schedule):
        if i == drop:
            continue
        res = system.step(state, inst)
        if res is None:
            continue
        kept.append(inst)
        state = res.state
    return kept


def minimize_schedule(system: System, schedule: list[ActionInstance], prop: str,
                      *, budget_s: float = 10.0) -> list[ActionInstance]:
    """A shorter, simpler schedule that still ends by violating ``prop`` (and not before).

    Greedy passes until nothing changes: drop every step naming one request (or page);
    drop chunks, then single steps; drop a step together with the later steps it
    enables; renumber requests and pages from ``r0`` / ``page 0`` by first appearance;
    lower integer arguments.  Cheap (plain concrete steps, no Hypothesis); returns the
    input when it is not such a counterexample."""
    invariant = any(p.name == prop and p.kind == "invariant" for p in system.properties)
    if not _ends_violating(system, schedule, prop, invariant):
        return schedule
    stop = time.monotonic() + budget_s
    best = list(schedule)

    def accept(cand: list[ActionInstance]) -> bool:
        nonlocal best
        if cand != best and len(cand) <= len(best) and \
                _ends_violating(system, cand, prop, invariant):
            best = cand
            return True
        return False

    def drop_ids() -> bool:
        changed = False
        for dim in (REQUEST, PAGE):
            ids = {a for inst in best for (_, t), a in zip(inst.action.params, inst.args)
                   if t.ref_dim == dim}
            for x in sorted(ids, reverse=True):
                cand = [inst for inst in best
                        if not any(t.ref_dim == dim and a == x
                                   for (_, t), a in zip(inst.action.params, inst.args))]
                changed |= accept(cand)
        return changed

    def drop_chunks() -> bool:
        changed = False
        size = max(1, len(best) // 2)
        while size >= 1 and time.monotonic() < stop:
            i = len(best) - size
            while i >= 0 and time.monotonic() < stop:
                changed |= accept(best[:i] + best[i + size:])
                i = min(i - 1, len(best) - size)
            size = size // 2 if size > 2 else size - 1
        return changed

    def drop_cascades() -> bool:
        changed = False
        i = len(best) - 2
        while i >= 0 and time.monotonic() < stop:
            changed |= accept(_cascade(system, best, i))
            i = min(i - 1, len(best) - 2)
        return changed

    def lower_ints() -> bool:
        changed = False
        for k, inst in enumerate(best):
            for j, (_, vtype) in enumerate(inst.action.params):
                if vtype.ref_dim is not None:
                    continue
                for lower in vtype.domain():
                    if lower == inst.args[j]:
                        break
                    other = lookup.get((id(inst.action), inst.args[:j] + (lower,) + inst.args[j + 1:]))
                    if other is not None and accept(best[:k] + [other] + best[k + 1:]):
                        changed = True
                        break
        return changed

    lookup = {(id(i.action), i.args): i for i in system.instances}
    changed = True
    while changed and time.monotonic() < stop:
        changed = drop_ids()
        changed |= drop_chunks()
        changed |= drop_cascades()
        renamed = _renamed(system, best, lookup)
        changed |= renamed is not None and accept(renamed)
        changed |= lower_ints()
    return best


# ----------------------------------------------------------------------- engine
def run_fuzz(system: System, *, max_examples: int = 200, steps: int = 50, seed: int = 0,
             timeout: float | None = None, shrink_steps: int = 500) -> EngineOutcome:
    """Fuzz every property of ``system`` with stateful Hypothesis.

    Each round runs up to ``max_examples`` examples of up to ``steps`` steps, checking the
    properties not yet violated.  A violation is shrunk — by Hypothesis for at most
    ``shrink_steps`` model steps, then by :func:`minimize_schedule` — concretized into a trace
    (``VIOLATED``, method ``fuzz``), and the next round checks the rest.  Properties
    without a violation are ``UNKNOWN``: fuzzing is not exhaustive.  ``seed`` makes the
    run reproducible; ``timeout`` (seconds > 0; None: no limit) bounds it.
    """
    if max_examples < 1 or steps < 1:
        raise ValueError("max_examples and steps must be at least 1")
    if shrink_steps < 0:
        raise ValueError(f"shrink_steps must be at least 0, got {shrink_steps!r}")
    check_timeout(timeout)
    start = time.monotonic()
    counters = FuzzCounters(deadline=None if timeout is None else start + timeout)
    remaining = [p.name for p in system.properties]
    invariants = {p.name for p in system.properties if p.kind == "invariant"}
    verdicts: dict[str, Verdict] = {}
    rounds = 0
    last = _Search(None, False, False, 0)
    while remaining:
        rounds += 1
        last = _search(system, remaining, max_examples=max_examples, steps=steps, seed=seed,
                       shrink_steps=shrink_steps, counters=counters)
        if last.found is None:
            break
        schedule, props = last.found
        primary = props[0]
        left = None if counters.deadline is None else counters.deadline - time.monotonic()
        schedule = minimize_schedule(system, schedule, primary,
                                     budget_s=10.0 if left is None else max(0.5, min(10.0, left)))
        hit = [p for p in props if p == primary or _ends_violating(system, schedule, p,
                                                                   p in invariants)]
        for prop in hit:
            trace = concretize(system, prop, schedule, engine="fuzz")
            verdicts[prop] = Verdict(prop, Status.VIOLATED, "fuzz", f"{len(trace)} steps (shrunk)",
                                     trace)
        remaining = [p for p in remaining if p not in hit]
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
