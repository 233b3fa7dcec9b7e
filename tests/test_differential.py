"""Differential testing on random models (:mod:`modelgen`): every interpretation and
every engine must say the same thing about the same model.

1. **Steps.** For random states (each slot drawn from its type's domain, plus states
   on a random walk from the initial one) and every action instance, the concrete
   step (:meth:`System.step`: the generated Python) and the symbolic one
   (:meth:`System.encode_step`: the Z3 terms, evaluated under the state) agree on
   enabledness, every next slot (model, monitor and flag slots), the events, the
   property violations and model errors (whether one happens, and at which line
   the first one does). Invariants agree too.
2. **Engines.** A reference breadth-first search written here over
   :meth:`System.step` gives, per property, the shortest violation (or none), the
   reachable state count, the diameter and the shortest path to a model error.
   The explicit engine with and without symmetry reduction, BMC (at a depth past the
   diameter), k-induction and PDR must give the same verdict per property and the
   same counterexample lengths, and raise a model error exactly when one is reached
   before every property is decided. With symmetry on, the concrete-state count
   computed from the orbits must equal the unreduced count.

The default run checks several hundred models; ``-m slow`` runs thousands.
"""
from __future__ import annotations

import collections
import gc
import hashlib
import itertools
import linecache
import random
import re
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import z3
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from modelgen import FEATURES, GenModel, models, random_model

from kvspec.engines.bmc import run_bmc
from kvspec.engines.explicit import explore
from kvspec.engines.kind import run_kind
from kvspec.engines.pdr import run_pdr
from kvspec.engines.transition import TransitionSystem
from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.schema import State
from kvspec.lang.symvalues import from_z3, z3_const
from kvspec.lang.system import System, compile_model
from kvspec.verdict import Status

STATS: collections.Counter[str] = collections.Counter()
_counter = itertools.count()
_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def write_source(source: str, directory: Path) -> Path:
    """A fresh file per model (linecache and the loader key on the path)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    path = directory / f"gen_{next(_counter)}_{digest}.py"
    path.write_text(source)
    return path


def compile_source(source: str, directory: Path, class_name: str = "Gen") -> tuple[Path, System]:
    path = write_source(source, directory)
    return path, compile_model(load_model(path, class_name))


def forget(system: System) -> None:
    """Drop a generated model's module (thousands of them in the slow runs)."""
    sys.modules.pop(system.loaded.module.__name__, None)
    for name in (str(system.loaded.path), str(system.loaded.path.resolve())):
        linecache.cache.pop(name, None)


# -- 1. concrete vs symbolic steps ----------------------------------------------------------

def random_state(system: System, rng: random.Random) -> State:
    return tuple(rng.choice(t.domain()) for t in system.slot_types())


def sample_states(system: System, rng: random.Random, n_random: int, n_walk: int) -> list[State]:
    states = [random_state(system, rng) for _ in range(n_random)]
    state = system.initial
    for _ in range(n_walk):
        states.append(state)
        succ = []
        for inst in system.instances:
            try:
                res = system.step(state, inst)
            except ModelError:
                continue
            if res is not None:
                succ.append(res.state)
        if not succ:
            break
        state = rng.choice(succ)
    return states


def _slot(system: System, i: int) -> str:
    for v in system.schema.vars:
        if v.offset <= i < v.offset + v.length:
            return v.label(None if v.length == 1 and v.dim == "scalar" else i - v.offset)
    return str(i)


_LINE = re.compile(r":(\d+): ")


def _line_of(message: str) -> int | None:
    m = _LINE.search(message)
    return int(m.group(1)) if m else None


def check_steps(system: System, states: list[State]) -> None:
    """Concrete and symbolic steps agree on ``states`` (AssertionError otherwise)."""
    cur = system.state_vars()
    types = system.slot_types()
    encodings = [system.encode_step(inst, cur) for inst in system.instances]
    invariants = [p for p in system.properties if p.kind == "invariant"]
    inv_terms = [system.encode_invariant(p, cur) for p in invariants]
    for state in states:
        solver = z3.Solver()
        solver.add([v == z3_const(t, x) for v, t, x in zip(cur, types, state)])
        assert solver.check() == z3.sat
        model = solver.model()

        def value(e: Any) -> Any:
            return model.eval(e, model_completion=True)

        def truth(e: Any) -> bool:
            return z3.is_true(value(e))

        for inst, enc in zip(system.instances, encodings):
            where = f"{inst.label()} on state {state}"
            sym_errors = [msg for cond, msg in enc.errors if truth(cond)]
            try:
                res = system.step(state, inst)
            except ModelError as exc:
                STATS["steps: model error"] += 1
                assert sym_errors, f"{where}: concrete model error not predicted " \
                                   f"symbolically: {exc}"
                assert _line_of(sym_errors[0]) == exc.line, \
                    f"{where}: first model error at different lines: concrete {exc}, " \
                    f"symbolic {sym_errors}"
                continue
            assert not sym_errors, f"{where}: symbolic model error {sym_errors} on a clean " \
                                   "concrete step"
            enabled = truth(enc.enabled)
            assert enabled == (res is not None), \
                f"{where}: enabled concretely={res is not None}, symbolically={enabled}"
            if res is None:
                STATS["steps: disabled"] += 1
                continue
            STATS["steps: compared"] += 1
            for i, (t, term) in enumerate(zip(types, enc.next)):
                if term is cur[i]:
                    got = state[i]
                else:
                    got = from_z3(t, value(term))
                assert got == res.state[i], \
                    f"{where}: slot {_slot(system, i)}: concrete {res.state[i]!r}, " \
                    f"symbolic {got!r}"
            sym_events = []
            for ev in enc.events:
                if truth(ev.guard):
                    page = None if ev.page is None else value(ev.page).as_long()
                    sym_events.append((ev.kind, value(ev.request).as_long(), page))
            con_events = [(e.kind, e.request, e.page) for e in res.events]
            assert con_events == sym_events, \
                f"{where}: events concrete {con_events}, symbolic {sym_events}"
            con_viol = {v[0] for v in res.violations}
            sym_viol = {p for p, c in enc.violations.items() if truth(c)}
            assert con_viol == sym_viol, \
                f"{where}: violations concrete {con_viol}, symbolic {sym_viol}"
        failed = set(system.failed_invariants(state))
        for p, term in zip(invariants, inv_terms):
            assert truth(term) == (p.name not in failed), \
                f"invariant {p.name} on state {state}: concrete {p.name not in failed}"


def check_bv_steps(system: System, states: list[State]) -> None:
    """The bit-vector image the engines solve (:class:`TransitionSystem`, ``"bv"``)
    agrees with the concrete steps: enabledness, model errors, next slots and bad
    states of every property."""
    ts = TransitionSystem(system, "bv")
    if ts.bv is None:
        STATS["bv: fell back to int"] += 1
    for state in states:
        solver = z3.Solver()
        solver.add([v == ts.value(i, x) for i, (v, x) in enumerate(zip(ts.cur, state))])
        assert solver.check() == z3.sat
        model = solver.model()

        def value(slot: int, e: Any) -> Any:
            got = model.eval(e, model_completion=True)
            if ts.types[slot].kind == "bool":
                return z3.is_true(got)
            return got.as_signed_long() if ts.bv is not None else got.as_long()

        for step in ts.steps:
            inst = step.inst
            where = f"bv image, {inst.label()} on state {state}"
            err = z3.is_true(model.eval(step.error, model_completion=True))
            try:
                res = system.step(state, inst)
            except ModelError:
                assert err, f"{where}: concrete model error, none in the encoding"
                continue
            assert not err, f"{where}: model error in the encoding only"
            enabled = z3.is_true(model.eval(step.enabled, model_completion=True))
            assert enabled == (res is not None), f"{where}: enabled {enabled}, concretely not"
            if res is None:
                continue
            STATS["bv: steps compared"] += 1
            for i, x in enumerate(res.state):
                got = value(i, step.updates[i]) if i in step.updates else state[i]
                assert got == x, f"{where}: slot {_slot(system, i)}: bv {got!r}, concrete {x!r}"
        failed = set(system.failed_invariants(state)) | set(system.violated_flags(state))
        for p in system.properties:
            bad = z3.is_true(model.eval(ts.bad(p), model_completion=True))
            assert bad == (p.name in failed), f"bv image: bad({p.name}) on state {state}"


def steps_agree(model: GenModel, seed: int, directory: Path, n_random: int = 8,
                n_walk: int = 8) -> None:
    _, system = compile_source(model.source, directory, model.class_name)
    STATS["models: steps"] += 1
    rng = random.Random(seed)
    states = sample_states(system, rng, n_random, n_walk)
    try:
        check_steps(system, states)
        check_bv_steps(system, states[::2])
    finally:
        forget(system)


@settings(max_examples=320, deadline=None, derandomize=True, suppress_health_check=_SUPPRESS)
@given(model=models(), seed=st.integers(0, 2**32 - 1))
def test_concrete_and_symbolic_steps_agree(model: GenModel, seed: int,
                                           tmp_path_factory: Any) -> None:
    note(model.source)
    steps_agree(model, seed, tmp_path_factory.mktemp("steps"))


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=_SUPPRESS)
@given(model=models(), seed=st.integers(0, 2**32 - 1))
def test_concrete_and_symbolic_steps_agree_many(model: GenModel, seed: int,
                                                tmp_path_factory: Any) -> None:
    note(model.source)
    steps_agree(model, seed, tmp_path_factory.mktemp("steps"), n_random=12, n_walk=12)


# -- 2. engines ---------------------------------------------------------------------------------

@dataclass
class Truth:
    """The reference search: every reachable state, no reduction, no early stop."""

    states: int
    depth: int  # the diameter (deepest shortest path)
    violations: dict[str, int | None]  # property -> shortest violating path (None: holds)
    error: int | None = None  # shortest path whose last step raises a model error
    error_message: str = ""
    complete: bool = True


def reference_search(system: System, max_states: int) -> Truth:
    props = system.properties
    found: dict[str, int] = {}
    for name in system.failed_invariants(system.initial):
        found.setdefault(name, 0)
    for p in props:
        if p.flag is not None and system.initial[p.flag]:
            found.setdefault(p.name, 0)
    seen = {system.initial: 0}
    frontier = [system.initial]
    depth = 0
    error: int | None = None
    message = ""
    while frontier:
        nxt_frontier = []
        for s in frontier:
            for inst in system.instances:
                try:
                    res = system.step(s, inst)
                except ModelError as exc:
                    if error is None:
                        error, message = depth + 1, str(exc)
                    continue
                if res is None:
                    continue
                for prop, _reason, _ev in res.violations:
                    found.setdefault(prop, depth + 1)
                if res.state not in seen:
                    seen[res.state] = depth + 1
                    nxt_frontier.append(res.state)
                    for name in system.failed_invariants(res.state):
                        found.setdefault(name, depth + 1)
            if len(seen) > max_states:
                return Truth(len(seen), depth, {}, complete=False)
        if nxt_frontier:
            depth += 1
        frontier = nxt_frontier
    return Truth(len(seen), depth, {p.name: found.get(p.name) for p in props}, error, message)


def _lengths(outcome: Any) -> dict[str, tuple[str, int | None]]:
    out = {}
    for v in outcome.verdicts:
        if v.status is Status.VIOLATED:
            assert v.trace is not None
            out[v.prop] = ("violated", len(v.trace))
        elif v.status in (Status.HOLDS, Status.PROVED):
            out[v.prop] = ("holds", None)
        else:
            out[v.prop] = ("unknown", None)
    return out


def _expected(truth: Truth) -> dict[str, tuple[str, int | None]]:
    return {p: ("holds", None) if d is None else ("violated", d)
            for p, d in truth.violations.items()}


def _error_expected(truth: Truth, strict_before: bool) -> bool | None:
    """Does an engine that stops once every property is decided reach the model
    error? ``strict_before``: the engine finds a violation at depth V while still
    expanding depth V-1 (explicit), so an error at depth V may or may not be seen
    first (None: either is right). BMC-style engines check errors of depth k before
    the properties at depth k."""
    if truth.error is None:
        return False
    depths = list(truth.violations.values())
    if any(d is None for d in depths) or not depths:
        return True
    last = max(d for d in depths if d is not None)
    if truth.error < last:
        return True
    if truth.error == last:
        return None if strict_before else True
    return False


def _run(fn: Any) -> Any:
    try:
        return fn()
    except ModelError as exc:
        return exc


def check_engines(model: GenModel, directory: Path, max_states: int = 1500,
                  run_pdr_too: bool = True) -> None:
    _, system = compile_source(model.source, directory, model.class_name)
    try:
        _check_engines(system, directory, max_states, run_pdr_too)
    finally:
        forget(system)


def _check_engines(system: System, directory: Path, max_states: int, run_pdr_too: bool) -> None:
    loaded = system.loaded
    truth = reference_search(system, max_states)
    if not truth.complete:
        STATS["engines: skipped (too many states)"] += 1
        return
    STATS["models: engines"] += 1
    expected = _expected(truth)
    for v in expected.values():
        STATS[f"engines: property {v[0]}"] += 1
    if truth.error is not None:
        STATS["engines: model error reachable"] += 1

    def fresh() -> System:
        return compile_model(loaded)

    def compare(name: str, outcome: Any, may_be_unknown: bool, strict_before: bool) -> None:
        want_error = _error_expected(truth, strict_before)
        if isinstance(outcome, ModelError):
            assert want_error in (True, None), \
                f"{name}: model error {outcome}, reference: none before every property is " \
                f"decided (error at {truth.error}, violations {truth.violations})"
            return
        assert want_error in (False, None), \
            f"{name}: no model error; reference reaches one at depth {truth.error}: " \
            f"{truth.error_message}"
        got = _lengths(outcome)
        for prop, want in expected.items():
            have = got[prop]
            if have[0] == "unknown" and may_be_unknown and want[0] == "holds":
                STATS[f"engines: {name} unknown on a holding property"] += 1
                continue
            assert have == want, f"{name}: {prop} is {have}, reference says {want}"

    full = _run(lambda: explore(fresh(), symmetry=False))
    compare("explicit", full, False, True)
    if not isinstance(full, ModelError) and all(d is None for d in truth.violations.values()) \
            and truth.violations:
        assert full.stats.states == truth.states, \
            f"explicit explored {full.stats.states} states, reference {truth.states}"
    reduced = _run(lambda: explore(fresh(), symmetry=True))
    compare("explicit+symmetry", reduced, False, True)
    if not isinstance(reduced, ModelError) and reduced.complete:
        sym = reduced.stats.symmetry
        if "concrete_states" in sym:
            STATS["engines: orbit count checked"] += 1
            if reduced.symmetry.requests or reduced.symmetry.pages:
                STATS["engines: symmetry active"] += 1
            if sym.get("concrete_states_exact", True):
                assert sym["concrete_states"] == truth.states, \
                    f"orbits stand for {sym['concrete_states']} states, reference " \
                    f"{truth.states} ({reduced.symmetry.to_json()})"
        else:
            assert reduced.stats.states == truth.states
    bmc = _run(lambda: run_bmc(fresh(), depth=truth.depth + 1, timeout=120))
    compare("bmc", bmc, False, False)
    kind = _run(lambda: run_kind(fresh(), max_k=truth.depth + 1, timeout=120))
    compare("kind", kind, True, False)
    if run_pdr_too:
        pdr = _run(lambda: run_pdr(fresh(), timeout=120, save_proof=False, proofs_dir=directory))
        compare("pdr", pdr, True, False)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=_SUPPRESS)
@given(model=models(small=True))
def test_engines_agree(model: GenModel, tmp_path_factory: Any) -> None:
    note(model.source)
    check_engines(model, tmp_path_factory.mktemp("engines"))


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=_SUPPRESS)
@given(model=models(small=True))
def test_engines_agree_many(model: GenModel, tmp_path_factory: Any) -> None:
    note(model.source)
    check_engines(model, tmp_path_factory.mktemp("engines"))


# -- bugs these tests found, as minimal models (strict xfail while open, plain tests once fixed) ----

def _summary(outcome: Any) -> Any:
    if isinstance(outcome, BaseException):
        return ("raised", type(outcome).__name__)
    return sorted(_lengths(outcome).items())


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - any crash is an outcome to compare
        return exc


WRITING_HELPER_IN_INVARIANT = '''
from kvspec import Int, Model, Pages, Request, Requests, action, invariant, require, var

def bump(s):
    s.x = 1
    return True

class M(Model):
    requests = Requests(1)
    pages = Pages(1)
    x = var(Int(0, 2), init=0)

    @action
    def inc(s, r: Request):
        require(s.x < 2)
        s.x = s.x + 1

    @invariant
    def checks(s):
        return bump(s)
'''


def test_invariant_cannot_write_state_through_a_helper(write_model: Any) -> None:
    """Was a bug: effects of a helper called inside an expression were not recorded, so
    an invariant could write the state (concrete TypeError, symbolic: ignored)."""
    with pytest.raises(ModelError):
        compile_model(load_model(write_model(WRITING_HELPER_IN_INVARIANT)))


EFFECT_IN_LEADING_REQUIRE = '''
from kvspec import Int, Model, Pages, Request, Requests, action, require, var

def ready(s):
    require(s.x < 2)
    return True

class M(Model):
    requests = Requests(1)
    pages = Pages(1)
    x = var(Int(0, 2), init=0)

    @action
    def step(s, r: Request):
        require(ready(s))
        s.x = s.x + 1
'''


def test_effectful_helper_in_leading_require(write_model: Any) -> None:
    """Was a bug: the generated guard ran such a helper on the state tuple, outside the
    body's try (explicit crashed with _Disabled or TypeError; BMC said HOLDS)."""
    path = write_model(EFFECT_IN_LEADING_REQUIRE)
    try:
        compile_model(load_model(path))
    except ModelError:
        return  # rejecting the model statically would be a fix too
    full = _outcome(lambda: explore(compile_model(load_model(path)), symmetry=False))
    bmc = _outcome(lambda: run_bmc(compile_model(load_model(path)), depth=4, timeout=60))
    assert _summary(full) == _summary(bmc)


UNTRACKED_ORDER_DEPENDENCE = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, invariant, require, var

def claim(s, p, r):
    if (s.owner == r).any():
        return False
    s.owner[p] = r
    return True

class LowestFirst(Model):
    requests = Requests(1)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)
    hot = pages.var(bool, init=False)
    n = var(Int(0, 6), init=0)

    @action
    def tick(s):
        require(s.n < 6)
        s.n = s.n + 1

    @action
    def noise(s, k: Int(0, 19)):
        pass

    @action
    def heat(s, p: Page):
        require(s.n == 6 and not s.hot[p] and not (s.hot == True).any())
        s.hot[p] = True

    @action
    def alloc(s, r: Request):
        require(s.n == 6 and (s.hot == True).any())
        for p in s.pages:          # takes the lowest-numbered page: order-dependent
            got = claim(s, p, r)

    @invariant
    def never_owns_a_hot_page(s):
        return not any(s.owner[p] is not None and s.hot[p] for p in s.pages)
'''


def test_symmetry_sees_effects_of_helpers_called_in_expressions(write_model: Any) -> None:
    """Was a bug (wrong verdict): the call was no symmetry break, the sampled alarm missed
    the rare states where the order matters, and explicit with symmetry said HOLDS."""
    path = write_model(UNTRACKED_ORDER_DEPENDENCE)
    try:
        compile_model(load_model(path))
    except ModelError:
        return
    full = explore(compile_model(load_model(path)), symmetry=False)
    reduced = explore(compile_model(load_model(path)), symmetry=True)
    assert _summary(full) == _summary(reduced)
    assert ("never-owns-a-hot-page", ("violated", 8)) in _summary(full)


INVARIANT_INDEX_ERROR = '''
from kvspec import Int, Model, Pages, Request, Requests, action, invariant, require, var

class M(Model):
    requests = Requests(1)
    pages = Pages(2)
    x = var(Int(0, 3), init=0)
    c = pages.var(Int(0, 2), init=0)

    @action
    def inc(s, r: Request):
        require(s.x < 3)
        s.x = s.x + 1

    @invariant
    def indexed(s):
        return s.c[s.x] == 0      # s.x = 2 is not a page: a model error after 2 steps
'''


def test_model_error_in_invariant_is_found_by_every_engine(write_model: Any) -> None:
    """Was a bug: the symbolic interpretation dropped model errors inside invariants
    (explicit reported the index error, BMC and PDR said HOLDS)."""
    path = write_model(INVARIANT_INDEX_ERROR)
    full = _outcome(lambda: explore(compile_model(load_model(path)), symmetry=False))
    bmc = _outcome(lambda: run_bmc(compile_model(load_model(path)), depth=5, timeout=60))
    assert isinstance(full, ModelError)
    assert isinstance(bmc, ModelError)


DEAD_CALL = '''
from kvspec import Model, Pages, Request, Requests, action, invariant, var

def positive(s):
    return s.x

class M(Model):
    requests = Requests(1)
    pages = Pages(1)
    x = var(bool, init=False)

    @action
    def flip(s, r: Request):
        s.x = not s.x

    @invariant
    def dead_call(s):
        return False and positive(s)
'''


def test_helper_call_under_constant_false_guard(write_model: Any) -> None:
    """Was a bug: the symbolic interpretation crashed (AttributeError on None) on a
    helper call under a constant-false guard."""
    path = write_model(DEAD_CALL)
    full = _outcome(lambda: explore(compile_model(load_model(path)), symmetry=False))
    bmc = _outcome(lambda: run_bmc(compile_model(load_model(path)), depth=2, timeout=60))
    assert _summary(full) == _summary(bmc)


NO_PAGE_STATE = '''
from kvspec import Model, Pages, Request, Requests, action, emit, require, var

class M(Model):
    properties = ("no-decode-after-rejection",)
    requests = Requests(2)
    pages = Pages(2)
    gone = requests.var(bool, init=False)

    @action
    def reject(s, r: Request):
        s.gone[r] = True
        emit.reject(r)

    @action
    def decode(s, r: Request):
        emit.decode(r)
'''


def test_page_symmetry_without_page_state(write_model: Any) -> None:
    """Was a bug: page symmetry with no per-page state made Canonicalizer._image raise
    IndexError (explicit with symmetry, BMC, PDR)."""
    path = write_model(NO_PAGE_STATE)
    full = _outcome(lambda: explore(compile_model(load_model(path)), symmetry=False))
    reduced = _outcome(lambda: explore(compile_model(load_model(path)), symmetry=True))
    bmc = _outcome(lambda: run_bmc(compile_model(load_model(path)), depth=3, timeout=60))
    assert _summary(full) == _summary(reduced) == _summary(bmc)


ERROR_AFTER_EVERY_VERDICT = '''
from kvspec import Int, Model, Pages, Request, Requests, action, invariant, var

class M(Model):
    properties = ("nothing-done",)
    requests = Requests(2)
    pages = Pages(2)
    used = pages.var(bool, init=False)
    n = var(Int(0, 1), init=0)

    @action
    def bump(s, r: Request):
        s.n = s.n + 1      # out of range in the second step

    @invariant
    def nothing_done(s):
        return s.n == 0    # violated by the first step
'''


def test_symmetry_alarm_does_not_change_the_outcome(write_model: Any) -> None:
    """Was a bug: a model error on the symmetry alarm's random walk escaped, so explicit
    with symmetry (and BMC) stopped with it before reporting the 1-step violation."""
    path = write_model(ERROR_AFTER_EVERY_VERDICT)
    full = _outcome(lambda: explore(compile_model(load_model(path)), symmetry=False))
    reduced = _outcome(lambda: explore(compile_model(load_model(path)), symmetry=True))
    assert _summary(full) == _summary(reduced)


def test_parsed_bodies_do_not_outlive_their_model(write_model: Any) -> None:
    _, system = compile_source(DEAD_CALL, write_model("").parent, "M")
    ref = weakref.ref(system.loaded.decl.actions[0])
    forget(system)
    del system
    gc.collect()
    assert ref() is None


# -- the generator itself ---------------------------------------------------------------------------

def test_generator_covers_the_grammar() -> None:
    """Every construct the generator knows appears in a few hundred models."""
    seen: set[str] = set()
    for seed in range(300):
        seen |= random_model(seed).features
        seen |= random_model(seed, small=True).features
    assert FEATURES - seen == set()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Any:
    yield
    if STATS:
        print("\ndifferential testing:", dict(sorted(STATS.items())))
