"""The library of engine designs in ``models/``: every property's verdict and shortest
counterexample length at requests=2, pages=4 (symmetry on), checked with every library
property, the opt-in ones too; every fixed variant holds every property exhaustively.

Also the library's own rules on these designs: ``no-reuse-before-drain`` is the group
of its two halves (violated iff one is, as short as the shorter), ``retire`` ends a
rejection, and the opt-in monitor variables are never stored for a model that does not
emit their events (the shipped models keep their state counts)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator
from unittest import mock

import pytest

from kvspec import testing
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.props import library
from kvspec.verdict import Result, Status

MODELS = Path(__file__).resolve().parent.parent / "models"
LIBRARY_MODELS = MODELS / "library"

#: (file, class) -> the violated properties and their shortest lengths; every other
#: property (every library property and the model's invariants) HOLDS exhaustively
EXPECTED: dict[tuple[str, str], dict[str, int]] = {
    ("sglang_admission.py", "Before36988"): {"no-decode-after-rejection": 9,
                                             "rejection-is-terminal": 2,
                                             "no-read-beyond-written": 9},
    ("sglang_admission.py", "After36988"): {"rejection-is-terminal": 2},
    ("sglang_admission.py", "After38935"): {},
    ("transfer_coverage.py", "SuccessWithoutCoverage"): {"no-read-beyond-written": 7},
    ("transfer_coverage.py", "CoverageCheck"): {},
    ("abort_release.py", "ImmediateRelease"): {"no-reuse-before-drain": 4,
                                               "no-reuse-under-write": 4,
                                               "no-land-after-free": 4},
    ("abort_release.py", "AckOnReceipt"): {"no-reuse-before-drain": 7,
                                           "no-reuse-under-write": 7,
                                           "no-land-after-free": 7, "ack-after-drain": 6},
    ("abort_release.py", "AckWithoutClosingRoom"): {"no-reuse-before-drain": 7,
                                                    "no-reuse-under-write": 7,
                                                    "no-land-after-free": 7,
                                                    "ack-after-drain": 6},
    ("abort_release.py", "DrainAck"): {},
    ("abort_release.py", "TimeoutRelease"): {"no-reuse-before-drain": 5,
                                             "no-reuse-under-write": 5,
                                             "no-land-after-free": 5},
    ("abort_release.py", "Quarantine"): {},
    ("stale_ack.py", "AckKeyedByRoom"): {"no-reuse-before-drain": 10,
                                         "no-reuse-under-write": 10,
                                         "no-land-after-free": 10, "ack-after-drain": 9},
    ("stale_ack.py", "AckKeyedByRoomGeneration"): {},
    ("tp_ranks.py", "ReleaseAfterMinOfRanks"): {"no-reuse-before-drain": 6,
                                                "no-reuse-under-write": 6,
                                                "no-land-after-free": 6},
    ("tp_ranks.py", "ReleaseAfterEveryRankDrained"): {},
    ("nixl_handles.py", "ReleaseOnFirstError"): {"no-read-beyond-written": 13,
                                                 "no-reuse-before-drain": 7,
                                                 "no-reuse-under-write": 7,
                                                 "no-land-after-free": 7},
    ("nixl_handles.py", "ReleaseWhenEveryHandleQuiescent"): {},
    ("source_free.py", "FreeOnExpiry"): {"no-source-reuse-before-read": 3},
    ("source_free.py", "LeaseValidated"): {},
    ("aux_slot.py", "SlotFreedOnAbort"): {"no-slot-reuse-before-drain": 5,
                                          "commit-reads-own-record": 7},
    # the design's own invariant holds, the library's slot lifetime does not
    ("aux_slot.py", "SlotRoomChecked"): {"no-slot-reuse-before-drain": 5},
    ("aux_slot.py", "SlotHeldUntilDrained"): {},
}

SIZES = {"requests": 2, "pages": 4}


@pytest.fixture
def every_property() -> Iterator[None]:
    """Select every library property by default (the opt-in ones too) while checking."""
    with mock.patch.object(library, "LIBRARY", library.ALL):
        yield


_RESULTS: dict[tuple[str, str], Result] = {}


def invariant_names(key: tuple[str, str]) -> list[str]:
    decl = load_model(LIBRARY_MODELS / key[0], key[1]).decl
    return [fn.__name__.replace("_", "-") for fn in decl.invariants]


def result_of(key: tuple[str, str]) -> Result:
    """Every library property (the opt-in ones too) and the design's invariants."""
    if key not in _RESULTS:
        _RESULTS[key] = testing.check(LIBRARY_MODELS / key[0], model_class=key[1], sizes=SIZES,
                                      properties=list(library.ALL) + invariant_names(key))
    return _RESULTS[key]


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0][:-3]}.{k[1]}")
def test_the_designs_own_selection_reports_every_violation(key: tuple[str, str]) -> None:
    """``kvspec verify`` checks what the design declares (``properties = (...)`` and its
    invariants): every property a variant violates is among them, so a buggy design never
    looks clean from the command line."""
    decl = load_model(LIBRARY_MODELS / key[0], key[1]).decl
    assert decl.properties is not None
    declared = set(decl.properties) | set(invariant_names(key))
    assert set(EXPECTED[key]) <= declared


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0][:-3]}.{k[1]}")
def test_verdicts_and_shortest_lengths(key: tuple[str, str], every_property: None) -> None:
    result = result_of(key)
    got: dict[str, int] = {}
    for v in result.verdicts:
        if v.status is Status.VIOLATED:
            assert v.trace is not None
            got[v.prop] = len(v.trace.steps)
        else:
            assert v.status is Status.HOLDS, (v.prop, v.status, v.detail)
    assert set(library.ALL) <= {v.prop for v in result.verdicts}
    assert got == EXPECTED[key]


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0][:-3]}.{k[1]}")
def test_no_reuse_before_drain_is_the_group_of_its_halves(key: tuple[str, str],
                                                          every_property: None) -> None:
    by = {v.prop: v for v in result_of(key).verdicts}
    group = by[library.NRBD]
    halves = [by[p] for p in library.GROUPS[library.NRBD]]
    violated = [h for h in halves if h.status is Status.VIOLATED]
    assert (group.status is Status.VIOLATED) == bool(violated)
    if violated:
        assert group.trace is not None
        assert len(group.trace.steps) == min(len(h.trace.steps) for h in violated
                                             if h.trace is not None)


def test_every_family_has_a_fixed_variant_that_holds_everything() -> None:
    families = {f for f, _ in EXPECTED}
    fixed = {f for (f, _), v in EXPECTED.items() if not v}
    assert families == fixed
    assert len(EXPECTED) >= 12


def test_a_buggy_variant_differs_from_its_fix_by_one_overridden_method() -> None:
    """A variant overrides only guard methods of its base, never an action or state."""
    variants = 0
    for f, c in EXPECTED:
        loaded = load_model(LIBRARY_MODELS / f, c)
        cls = loaded.decl.cls
        if cls.__bases__[0].__name__ == "Model":
            continue
        variants += 1
        own = {n for n in vars(cls) if not n.startswith("__")}
        actions = {a.__name__ for a in loaded.decl.actions}
        assert len(own) == 1 and not own & actions, (c, own)
    assert variants == len(EXPECTED) - len({f for f, _ in EXPECTED})




def test_retire_ends_a_rejection(tmp_path: Path) -> None:
    src = '''
import enum
from kvspec import Model, Request, Requests, action, emit, require


class Use(enum.Enum):
    NEW = 0
    REJECTED = 1
    RECYCLED = 2
    DECODED = 3


class Recycled(Model):
    requests = Requests(1)
    use = requests.var(Use, init=Use.NEW)

    @action
    def reject(s, r: Request):
        require(s.use[r] == Use.NEW)
        s.use[r] = Use.REJECTED
        emit.reject(r)

    @action
    def recycle(s, r: Request):
        require(s.use[r] == Use.REJECTED)
        s.use[r] = Use.RECYCLED
        {RETIRE}

    @action
    def decode(s, r: Request):
        require(s.use[r] == Use.RECYCLED)
        s.use[r] = Use.DECODED
        emit.admit(r)
        emit.decode(r)
'''
    verdicts = {}
    for name, retire in (("retired", "emit.retire(r)"), ("kept", "pass")):
        path = tmp_path / f"{name}.py"
        path.write_text(src.replace("{RETIRE}", retire))
        result = testing.check(path, properties=["no-decode-after-rejection"])
        verdicts[name] = result.verdicts[0].status
    assert verdicts == {"retired": Status.HOLDS, "kept": Status.VIOLATED}


@pytest.mark.parametrize("model", ["buggy_pd.py", "free_before_drain.py", "patched.py",
                                   "single_node.py", "vllm_async_load_leak.py",
                                   "vllm_async_load_fixed.py"])
def test_shipped_models_store_no_opt_in_monitor_variable(model: str,
                                                         every_property: None) -> None:
    """Even with every property selected, a model that emits none of the new events
    stores none of their monitor variables."""
    system = compile_model(load_model(MODELS / model), {})
    new_vars = set(library.MONITOR_VARS) - {"rejected", "page_owner", "page_written",
                                            "page_inflight_by"}
    assert not new_vars & set(system.schema.by_name)


def test_opt_in_properties_are_not_in_the_default_selection() -> None:
    system = compile_model(load_model(MODELS / "free_before_drain.py"), {})
    assert [p.name for p in system.properties] == list(library.LIBRARY)
    assert set(library.OPT_IN).isdisjoint(library.LIBRARY)
