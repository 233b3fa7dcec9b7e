"""The model's own temporal properties: ``@eventually``, ``@always_eventually`` and
``leads_to(p, q)`` over state predicates (optionally per request or page), checked
by the explicit fair-cycle search and the bounded symbolic lasso search."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import pytest
from conftest import MODELS
from test_liveness import by_prop, live_cli

import kvspec
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.loader import load_model
from kvspec.lang.system import ActionInstance, System
from kvspec.liveness import check_liveness, check_liveness_bmc
from kvspec.lang.schema import State
from kvspec.liveness.check import Fairness, declared_fairness
from kvspec.liveness.lasso import lasso_from_json
from kvspec.liveness.live_cmd import compile_for_liveness
from kvspec.liveness.temporal import TemporalProperty, temporal_properties
from kvspec.liveness.temporal_search import replay_temporal
from kvspec.trace import InternalError
from kvspec.verdict import Status, Verdict

WriteModel = Callable[..., Path]

HEADER = """\
import enum
from kvspec import (Model, Page, Pages, Request, Requests, action, always_eventually, emit,
                    eventually, leads_to, require)


class Phase(enum.Enum):
    NEW = 0
    WAITING = 1
    DONE = 2

"""

# one request at a time is served; `spin` is an engine step that changes nothing
QUEUE = HEADER + """
class Queue(Model):
    requests = Requests(2)
    phase = requests.var(Phase, init=Phase.NEW)

    @action
    def arrive(s, r: Request):
        require(s.phase[r] == Phase.NEW)
        s.phase[r] = Phase.WAITING

    @action(fair="weak")
    def serve(s, r: Request):
        require(s.phase[r] == Phase.WAITING)
        s.phase[r] = Phase.DONE

    @action
    def spin(s):
        require(any(s.phase[r] == Phase.WAITING for r in s.requests))

    def waiting(s, r: Request) -> bool:
        return s.phase[r] == Phase.WAITING

    def served(s, r: Request) -> bool:
        return s.phase[r] == Phase.DONE

    waiting_is_served = leads_to(waiting, served)

    @eventually
    def nobody_waits(s) -> bool:
        return all(s.phase[r] != Phase.WAITING for r in s.requests)

    @eventually
    def all_served(s) -> bool:
        return all(s.phase[r] == Phase.DONE for r in s.requests)

    @always_eventually
    def idle(s) -> bool:
        return not any(s.phase[r] == Phase.WAITING for r in s.requests)
"""

# two requests compete for one slot; the holder releases it and may take it again
# at once: grant(r1) is enabled only while the slot is free, so weak fairness does
# not stop r0 from taking it forever, strong fairness does
SLOT = HEADER + """
class Slot(Model):
    requests = Requests(2)
    pages = Pages(1)
    phase = requests.var(Phase, init=Phase.WAITING)
    holder = pages.var(requests.optional, init=None)

    @action(fair="weak")
    def grant(s, r: Request, p: Page):
        require(s.phase[r] != Phase.DONE and s.holder[p] is None)
        s.holder[p] = r
        emit.alloc(r, p)

    @action(fair="weak")
    def release(s, r: Request, p: Page):
        require(s.holder[p] == r)
        s.holder[p] = None
        emit.free(r, p)

    def waiting(s, r: Request) -> bool:
        return s.phase[r] == Phase.WAITING

    def ever_granted(s, r: Request) -> bool:
        return any(s.holder[p] == r for p in s.pages)

    waiting_gets_slot = leads_to(waiting, ever_granted)

    @eventually
    def r1_holds(s) -> bool:
        return s.holder[0] == 1

    @always_eventually
    def slot_free(s, p: Page) -> bool:
        return s.holder[p] is None


class StrongSlot(Slot):
    @action(fair="strong")
    def grant(s, r: Request, p: Page):
        require(s.phase[r] != Phase.DONE and s.holder[p] is None)
        s.holder[p] = r
        emit.alloc(r, p)
"""

# stops in a state where nothing is enabled
STOPS = HEADER + """
class Stops(Model):
    requests = Requests(1)
    phase = requests.var(Phase, init=Phase.NEW)

    @action
    def arrive(s, r: Request):
        require(s.phase[r] == Phase.NEW)
        s.phase[r] = Phase.WAITING

    @eventually
    def done(s, r: Request) -> bool:
        return s.phase[r] == Phase.DONE

    @always_eventually
    def new(s) -> bool:
        return s.phase[0] == Phase.NEW
"""


def system(path: Path, cls: str | None = None) -> System:
    return compile_for_liveness(load_model(path, cls), {})


def verdicts(path: Path, cls: str | None = None, *, fairness: bool = True,
             properties: list[str] | None = None) -> dict[str, Verdict]:
    out, _ = check_liveness(system(path, cls), deadlock=False, fairness=fairness,
                            properties=properties)
    return by_prop(out)


def bmc(path: Path, cls: str | None = None, depth: int = 6, *, fairness: bool = True,
        properties: list[str] | None = None) -> dict[str, Verdict]:
    out, _ = check_liveness_bmc(system(path, cls), depth=depth, fairness=fairness,
                                properties=properties)
    return by_prop(out)


# -- declarations -----------------------------------------------------------------------

def test_decorators_are_exported_and_declarations_are_collected(write_model: WriteModel
                                                                ) -> None:
    for name in ("eventually", "always_eventually", "leads_to"):
        assert name in kvspec.__all__ and callable(getattr(kvspec, name))
    decl = load_model(write_model(QUEUE)).decl
    assert [(t.prop, t.kind) for t in decl.temporal] == [
        ("waiting-is-served", "leads_to"), ("nobody-waits", "eventually"),
        ("all-served", "eventually"), ("idle", "always_eventually")]


def test_properties_are_listed_with_the_library_ones(write_model: WriteModel) -> None:
    path = write_model(QUEUE)
    vs, _ = check_liveness(system(path), deadlock=True)
    assert [v.prop for v in vs] == ["pages-eventually-freed", "request-terminates",
                                    "writes-eventually-quiesce", "waiting-is-served",
                                    "nobody-waits", "all-served", "idle", "deadlock-freedom"]
    with pytest.raises(UsageError, match="available: .*waiting-is-served, nobody-waits"):
        check_liveness(system(path), properties=["waiting_is_served"])


# -- each kind, holding and violated, with and without fairness ---------------------------

def test_leads_to_holds_under_fairness_and_starves_without(write_model: WriteModel) -> None:
    path = write_model(QUEUE)
    v = verdicts(path)
    assert v["waiting-is-served"].status is Status.HOLDS
    assert "exhaustive" in v["waiting-is-served"].detail
    assert "weak fairness: serve" in v["waiting-is-served"].detail
    unfair = verdicts(path, fairness=False)["waiting-is-served"]
    assert unfair.status is Status.VIOLATED and unfair.method == "fair-cycle"
    trace = unfair.trace
    assert trace is not None and trace.loop_start == 1
    assert [s.instance.label() for s in trace.steps] == ["arrive(r0)", "spin()"]
    assert "waiting(s, r0) holds after step 1 (arrive(r0)), and served(s, r0) never holds" \
        in trace.reason
    assert "serve(r0)" in trace.reason and "weak fairness of" in trace.reason


def test_always_eventually_holds_under_fairness_and_not_without(write_model: WriteModel) -> None:
    path = write_model(QUEUE)
    assert verdicts(path)["idle"].status is Status.HOLDS
    unfair = verdicts(path, fairness=False)["idle"]
    assert unfair.status is Status.VIOLATED
    assert "idle(s) holds only finitely often" in unfair.trace.reason


def test_eventually_true_initially_holds_even_without_fairness(write_model: WriteModel) -> None:
    path = write_model(QUEUE)
    assert verdicts(path, fairness=False)["nobody-waits"].status is Status.HOLDS


def test_eventually_holds_under_fairness_and_not_without(write_model: WriteModel) -> None:
    """A run takes a step whenever one is enabled, so every request arrives; weak
    fairness of `serve` then serves it."""
    path = write_model(QUEUE)
    assert verdicts(path)["all-served"].status is Status.HOLDS
    v = verdicts(path, fairness=False)["all-served"]
    assert v.status is Status.VIOLATED
    assert v.trace is not None and v.trace.loop_start is not None
    assert "all_served(s) never holds: it is false at every state of the run" in v.trace.reason


def test_eventually_violated_under_weak_fairness_holds_under_strong(
        write_model: WriteModel) -> None:
    path = write_model(SLOT)
    v = verdicts(path, cls="Slot")["r1-holds"]
    assert v.status is Status.VIOLATED and "weak fairness: grant, release" in v.detail
    assert "r1_holds(s) never holds" in v.trace.reason
    assert verdicts(path, cls="StrongSlot")["r1-holds"].status is Status.HOLDS


def test_a_run_that_stops_violates_eventually_and_always_eventually(
        write_model: WriteModel) -> None:
    path = write_model(STOPS)
    v = verdicts(path)
    done = v["done"]
    assert done.status is Status.VIOLATED and "stops" in done.detail
    assert done.trace is not None and done.trace.loop_start == len(done.trace.steps) == 1
    assert "done(s, r0) never holds" in done.trace.reason
    assert "the run stops after step 1 with nothing enabled" in done.trace.reason
    new = v["new"]
    assert new.status is Status.VIOLATED and new.trace.loop_start == 1
    b = bmc(path)
    assert b["done"].status is Status.VIOLATED and "stops after step 1" in b["done"].detail
    assert b["new"].status is Status.VIOLATED


# -- per-request leads_to where one request can starve -------------------------------------

def test_per_request_leads_to_one_request_starves_under_weak_fairness(
        write_model: WriteModel) -> None:
    path = write_model(SLOT)
    v = verdicts(path, cls="Slot")["waiting-gets-slot"]
    assert v.status is Status.VIOLATED
    trace = v.trace
    assert trace is not None
    m = re.search(r"waiting\(s, (r\d)\) holds in the initial state, and "
                  r"ever_granted\(s, (r\d)\) never holds", trace.reason)
    assert m is not None and m.group(1) == m.group(2)
    starved = m.group(1)
    other = "r1" if starved == "r0" else "r0"
    labels = [s.instance.label() for s in trace.steps]
    # the other request takes the slot and gives it back forever; the starved one never
    # gets it
    assert labels == [f"grant({other}, page 0)", f"release({other}, page 0)"]
    assert trace.loop_start == 0
    assert "strong fairness of grant would rule this loop out" in trace.reason
    # the page is given back infinitely often on that run: the other property holds
    assert verdicts(path, cls="Slot")["slot-free"].status is Status.HOLDS


def test_per_request_leads_to_holds_under_strong_fairness(write_model: WriteModel) -> None:
    path = write_model(SLOT)
    v = verdicts(path, cls="StrongSlot")
    assert v["waiting-gets-slot"].status is Status.HOLDS
    assert "strong fairness: grant" in v["waiting-gets-slot"].detail
    assert verdicts(path, cls="StrongSlot", fairness=False)["waiting-gets-slot"].status \
        is Status.VIOLATED


def test_a_subclass_override_of_a_predicate_is_the_one_checked(write_model: WriteModel) -> None:
    path = write_model(SLOT + """

class Lenient(StrongSlot):
    def waiting(s, r: Request) -> bool:
        return False
""")
    assert verdicts(path, cls="Lenient", fairness=False)["waiting-gets-slot"].status \
        is Status.HOLDS


# -- explicit and symbolic engines agree ---------------------------------------------------

@pytest.mark.parametrize("source,cls,fairness", [
    (QUEUE, None, True), (QUEUE, None, False), (SLOT, "Slot", True),
    (SLOT, "StrongSlot", True), (SLOT, "StrongSlot", False), (STOPS, None, True)])
def test_explicit_and_symbolic_engines_agree(write_model: WriteModel, source: str,
                                             cls: str | None, fairness: bool) -> None:
    path = write_model(source)
    sysm = system(path, cls)
    names = [tp.name for tp in temporal_properties(sysm)]
    ex = verdicts(path, cls, fairness=fairness, properties=names)
    sy = bmc(path, cls, depth=6, fairness=fairness, properties=names)
    fair = declared_fairness(sysm, fairness)
    for name in names:
        e, s = ex[name], sy[name]
        tp = next(t for t in temporal_properties(sysm) if t.name == name)
        fewest = brute_force_shortest(sysm, tp, fair, 6)
        if e.status is Status.HOLDS:
            assert fewest is None
            assert s.status is Status.UNKNOWN and "no lasso up to depth 6 (bounded)" in s.detail
            continue
        assert e.status is Status.VIOLATED and s.status is Status.VIOLATED, name
        assert s.method == "bmc-lasso"
        # the symbolic lasso has the fewest steps; the explicit one is no shorter
        assert len(s.trace.steps) == fewest
        assert len(e.trace.steps) >= fewest
        # and both re-execute as violating fair lassos
        for tr in (e.trace, s.trace):
            sched: list[ActionInstance] = [st.instance for st in tr.steps]
            assert any(_replays(sysm, tp, i, sched, tr.loop_start, fair)
                       for i in tp.ids(sysm))


def _replays(sysm: System, tp: TemporalProperty, i: int | None, sched: list[ActionInstance],
             loop_start: int, fair: Fairness) -> bool:
    try:
        replay_temporal(sysm, tp, i, sched, loop_start, fair.weak, fair.strong)
        return True
    except InternalError:
        return False


def brute_force_shortest(sysm: System, tp: TemporalProperty, fair: Fairness, bound: int
                         ) -> int | None:
    """The fewest steps of a fair lasso violating ``tp``, by enumerating every
    schedule of at most ``bound`` steps and every loop start, straight from the
    definitions (independent of the engines' regions and fair-cycle search)."""
    enabled_cache: dict[State, list[tuple[int, State]]] = {}

    def succ(st: State) -> list[tuple[int, State]]:
        if st not in enabled_cache:
            enabled_cache[st] = [(r.instance.index, r.state) for r in sysm.successors(st)]
        return enabled_cache[st]

    def violates(states: list[State], labels: list[int], l: int) -> bool:
        n = len(labels)
        if l == n:
            if succ(states[n]):
                return False
            loop = [n]
        else:
            if states[n] != states[l]:
                return False
            loop = list(range(l, n))
        taken = set(labels[l:])
        ens = [{k for k, _ in succ(states[t])} for t in loop]
        if any(all(w in e for e in ens) for w in fair.weak - taken):
            return False
        if any(any(x in e for e in ens) for x in fair.strong - taken):
            return False
        for i in tp.ids(sysm):
            p = [tp.at(tp.p, st, i) for st in states]
            if tp.kind == "eventually" and not any(p):
                return True
            if tp.kind == "always_eventually" and not any(p[t] for t in loop):
                return True
            if tp.q is not None:
                q = [tp.at(tp.q, st, i) for st in states]
                if any(p[j] and not any(q[min(j, l):]) for j in range(n + 1)):
                    return True
        return False

    layer: list[tuple[list[State], list[int]]] = [([sysm.initial], [])]
    for length in range(bound + 1):
        for states, labels in layer:
            if any(violates(states, labels, l) for l in range(length + 1)):
                return length
        layer = [(states + [nxt], labels + [k]) for states, labels in layer
                 for k, nxt in succ(states[-1])]
    return None


def test_a_lasso_that_does_not_violate_is_an_internal_error(write_model: WriteModel) -> None:
    sysm = system(write_model(QUEUE))
    tp = next(t for t in temporal_properties(sysm) if t.name == "waiting-is-served")
    fair = declared_fairness(sysm, True)
    arrive = next(i for i in sysm.instances if i.label() == "arrive(r0)")
    spin = next(i for i in sysm.instances if i.label() == "spin()")
    with pytest.raises(InternalError, match="not weakly fair"):  # serve(r0) starves
        replay_temporal(sysm, tp, 0, [arrive, spin], 1, fair.weak, fair.strong)
    with pytest.raises(InternalError, match="waiting holds"):  # r1 never waits
        replay_temporal(sysm, tp, 1, [arrive, spin], 1, set(), set())


def test_symbolic_engine_is_bounded(write_model: WriteModel) -> None:
    v = bmc(write_model(QUEUE), depth=3)["waiting-is-served"]
    assert v.status is Status.UNKNOWN and "no lasso up to depth 3 (bounded)" in v.detail


# -- the model errors of a bad predicate ---------------------------------------------------

def _error(write_model: WriteModel, body: str) -> ModelError:
    path = write_model(HEADER + """
class M(Model):
    requests = Requests(2)
    pages = Pages(1)
    phase = requests.var(Phase, init=Phase.NEW)
    flag = requests.var(bool, init=False)

    @action
    def go(s, r: Request):
        require(s.phase[r] == Phase.NEW)
        s.phase[r] = Phase.DONE
""" + body)
    with pytest.raises(ModelError) as exc:
        check_liveness(system(path), deadlock=False)
    assert exc.value.file == str(path)
    return exc.value


@pytest.mark.parametrize("body,marker,message", [
    ("""
    @eventually
    def writes(s) -> bool:
        s.flag[0] = True
        return True
""", "s.flag[0] = True", "a temporal predicate must be read-only, but here"),
    ("""
    @eventually
    def two(s, r: Request, p: Page) -> bool:
        return True
""", "def two", "@eventually predicate two must take the state and at most one Request or Page "
        "(it takes 3 parameters)"),
    ("""
    @always_eventually
    def wrong_type(s, n: int) -> bool:
        return True
""", "def wrong_type", "@always_eventually predicate wrong_type: parameter 'n' must be "
        "annotated Request or Page"),
    ("""
    @eventually
    def number(s, r: Request):
        return 1
""", "def number", "@eventually predicate number must return a bool, not int 1..1"),
    ("""
    @eventually
    def annotated(s) -> int:
        return True
""", "def annotated", "@eventually predicate annotated must return a bool"),
    ("""
    @eventually
    def loops(s) -> bool:
        while True:
            pass
""", "while True", "`while` loops are not supported"),
    ("""
    def a(s, r: Request) -> bool:
        return True

    def b(s, p: Page) -> bool:
        return True

    mixed = leads_to(a, b)
""", "mixed = leads_to", "leads_to mixed: a takes a request and b a page"),
    ("""
    broken = leads_to("nothing", "go")
""", "broken = leads_to", "leads_to: M has no predicate method 'nothing'"),
    ("""
    @eventually
    def request_terminates(s) -> bool:
        return True
""", "@eventually", "'request-terminates' is the name of a library liveness property"),
])
def test_a_bad_predicate_is_a_model_error_at_its_line(write_model: WriteModel, body: str,
                                                      marker: str, message: str) -> None:
    exc = _error(write_model, body)
    assert message in exc.message
    lines = Path(exc.file).read_text().splitlines()
    assert marker in lines[exc.line - 1], (exc.line, lines[exc.line - 1])


def test_a_runtime_error_in_a_predicate_is_a_model_error_in_both_engines(
        write_model: WriteModel) -> None:
    path = write_model(HEADER + """
class M(Model):
    requests = Requests(2)
    pages = Pages(1)
    owner = pages.var(requests.optional, init=None)
    phase = requests.var(Phase, init=Phase.NEW)

    @action
    def grab(s, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = 0

    @action
    def drop(s, p: Page):
        require(s.owner[p] is not None)
        s.owner[p] = None

    @always_eventually
    def owner_new(s, p: Page) -> bool:
        return s.phase[s.owner[p]] == Phase.NEW
""")
    line = path.read_text().splitlines().index(
        "        return s.phase[s.owner[p]] == Phase.NEW") + 1
    with pytest.raises(ModelError) as exc:
        check_liveness(system(path), deadlock=False, properties=["owner-new"])
    assert exc.value.line == line
    with pytest.raises(ModelError) as exc2:
        check_liveness_bmc(system(path), depth=3, properties=["owner-new"])
    assert exc2.value.line == line and exc2.value.message == exc.value.message


# -- a leads_to on the vLLM #32255 fix -----------------------------------------------------

VLLM_PROPERTY = """

    def admitted(s, r: Request) -> bool:
        return s.status[r] != Status.NEW

    def released(s, r: Request) -> bool:
        \"\"\"Done: the request's blocks are back in the pool.\"\"\"
        return s.status[r] == Status.DONE and not (s.owner == r).any()

    admitted_is_released = leads_to(admitted, released)

    @always_eventually
    def page_free(s, p: Page) -> bool:
        return s.owner[p] is None
"""


@pytest.fixture
def vllm_fixed(tmp_path: Path) -> Path:
    src = (MODELS / "vllm_async_load_fixed.py").read_text()
    src = src.replace("from kvspec import Model,", "from kvspec import always_eventually, "
                      "leads_to, Model,")
    path = tmp_path / "vllm_async_load_fixed.py"
    path.write_text(src + VLLM_PROPERTY)
    return path


def test_leads_to_on_the_vllm_fix_holds_under_fairness(vllm_fixed: Path) -> None:
    v = verdicts(vllm_fixed)
    for name in ("admitted-is-released", "page-free"):
        assert v[name].status is Status.HOLDS, v[name].detail
        assert "weak fairness: finished_recving, update_waiting, finish" in v[name].detail


def test_leads_to_on_the_vllm_fix_starves_without_fairness(vllm_fixed: Path) -> None:
    v = verdicts(vllm_fixed, fairness=False, properties=["admitted-is-released"])
    t = v["admitted-is-released"].trace
    assert v["admitted-is-released"].status is Status.VIOLATED
    assert "finished_recving" in t.reason
    assert [s.instance.name for s in t.steps[t.loop_start:]] == ["poll_transfer"]
    b = bmc(vllm_fixed, fairness=False, depth=3, properties=["admitted-is-released"])
    assert b["admitted-is-released"].status is Status.VIOLATED
    assert len(b["admitted-is-released"].trace.steps) == 2


def test_original_vllm_model_has_no_temporal_properties_and_is_unchanged() -> None:
    vs, _ = check_liveness(system(MODELS / "vllm_async_load_fixed.py"), deadlock=False)
    assert [v.prop for v in vs] == ["pages-eventually-freed", "request-terminates",
                                    "writes-eventually-quiesce"]


# -- the command line ------------------------------------------------------------------------

def test_cli_selects_a_temporal_property_by_name(vllm_fixed: Path) -> None:
    code, out, _ = live_cli("live", str(vllm_fixed), "--property", "admitted-is-released",
                            "--no-deadlock")
    assert code == 0
    assert "admitted-is-released  HOLDS (fair-cycle, exhaustive" in out
    assert "pages-eventually-freed" not in out
    code, out, _ = live_cli("live", str(vllm_fixed), "--property", "admitted-is-released",
                            "--no-deadlock", "--no-fairness", "--json")
    assert code == 1
    doc = json.loads(out)
    [res] = [v for v in doc["verdicts"] if v["property"] == "admitted-is-released"]
    assert res["status"] == "VIOLATED"
    trace = res["trace"]
    assert trace["loop_start"] == 1
    sysm = system(vllm_fixed)
    assert len(lasso_from_json(sysm, trace).steps) == len(trace["steps"])
    code, _, err = live_cli("live", str(vllm_fixed), "--property", "admitted_is_released")
    assert code == 2 and "available:" in err and "admitted-is-released" in err


def test_cli_symbolic_engine_on_a_temporal_property(vllm_fixed: Path) -> None:
    code, out, _ = live_cli("live", str(vllm_fixed), "--engine", "bmc", "--depth", "2",
                            "--property", "admitted-is-released", "--no-deadlock")
    assert code == 3 and "admitted-is-released  UNKNOWN (bmc-lasso, no lasso up to depth 2" in out


def test_a_model_stuck_in_its_initial_state(write_model: WriteModel) -> None:
    """Nothing is enabled at all: the run is the initial state forever, a lasso of
    no steps, found by both engines."""
    path = write_model(HEADER + """
class Stuck(Model):
    requests = Requests(1)
    phase = requests.var(Phase, init=Phase.NEW)

    @action
    def never(s, r: Request):
        require(s.phase[r] == Phase.DONE)

    @eventually
    def done(s, r: Request) -> bool:
        return s.phase[r] == Phase.DONE
""")
    for v in (verdicts(path)["done"], bmc(path)["done"]):
        assert v.status is Status.VIOLATED
        assert v.trace is not None and v.trace.steps == [] and v.trace.loop_start == 0
        assert "the run stops in the initial state with nothing enabled" in v.trace.reason


def test_a_search_stopped_early_is_unknown_never_holds(write_model: WriteModel) -> None:
    sysm = system(write_model(QUEUE))
    out, _ = check_liveness(sysm, deadlock=False, properties=["waiting-is-served"],
                            max_states=3)
    assert out[0].status is Status.UNKNOWN and "state limit" in out[0].detail


def test_leads_to_by_method_names(write_model: WriteModel) -> None:
    path = write_model(QUEUE.replace("leads_to(waiting, served)",
                                     'leads_to("waiting", "served")'))
    assert verdicts(path)["waiting-is-served"].status is Status.HOLDS
    assert verdicts(path, fairness=False)["waiting-is-served"].status is Status.VIOLATED
