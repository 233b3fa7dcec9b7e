"""Verdicts you can trust under limits: Ctrl-C, solver ``unknown``, timeouts in every
phase, bad limits, and ``--no-symmetry`` in the Z3 engines.

Z3 handles SIGINT itself while it solves: the check stops and answers ``unknown``
(reason "interrupted from keyboard") and Python never sees a KeyboardInterrupt. These
tests simulate exactly that by answering one check with ``unknown`` and that reason.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import z3
from conftest import MODELS, ROOT, system_of

import kvspec.engines.auto as auto_mod
import kvspec.engines.bmc as bmc_mod
import kvspec.engines.explicit as explicit_mod
import kvspec.engines.pdr as pdr_mod
from kvspec.engines.auto import run_auto
from kvspec.engines.bmc import Deadline, run_bmc
from kvspec.engines.explicit import Limits, OutOfTime, explore, time_limit
from kvspec.engines.fuzz import run_fuzz
from kvspec.engines.selection import Strengthener, goal_templates
from kvspec.engines.inference import (
    StateTable,
    enumerate_candidates,
    sample_states,
)
from kvspec.engines.kind import run_kind
from kvspec.engines.pdr import ic3, run_pdr, spacer
from kvspec.engines.transition import TransitionSystem
from kvspec.lang.system import System
from kvspec.proofs.certificate import certificate_path
from kvspec.verdict import EngineOutcome, Status

SMALL = {"requests": 2, "pages": 3}
INTERRUPTED = "interrupted from keyboard"


def _success(outcome: EngineOutcome) -> list[str]:
    return [v.headline() for v in outcome.verdicts
            if v.status in (Status.PROVED, Status.HOLDS)]


class FakeCtrlC:
    """Answer solver check number ``at`` (1-based) the way Z3 does when Ctrl-C is
    pressed during it; ``reason`` other than Z3's Ctrl-C text simulates a give-up.
    ``at=0``: every check."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int,
                 reason: str = INTERRUPTED) -> None:
        self.at = at
        self.reason = reason
        self.calls = 0
        self.hit: set[int] = set()
        real_check = z3.Solver.check
        real_reason = z3.Solver.reason_unknown

        def check(solver: z3.Solver, *assumptions: Any) -> z3.CheckSatResult:
            self.calls += 1
            if self.at == 0 or self.calls == self.at:
                self.hit.add(id(solver))
                return z3.unknown
            self.hit.discard(id(solver))
            return real_check(solver, *assumptions)

        def reason_unknown(solver: z3.Solver) -> str:
            return self.reason if id(solver) in self.hit else real_reason(solver)

        monkeypatch.setattr(z3.Solver, "check", check)
        monkeypatch.setattr(z3.Solver, "reason_unknown", reason_unknown)


# -- 1. Ctrl-C is never a verdict -----------------------------------------------------------

ENGINES = {
    "bmc": lambda s: run_bmc(s, depth=6, timeout=120),
    "kind": lambda s: run_kind(s, max_k=6, timeout=120),
    "pdr": lambda s: run_pdr(s, timeout=120, save_proof=False, proofs_dir=Path("proofs")),
    # auto's explicit stage decides these small models alone; with a 5-state stage the
    # solver stages run
    "auto": lambda s: _auto_with_solvers(s, 120),
}


def _auto_with_solvers(system: System, timeout: float, symmetry: bool = True) -> Any:
    saved = auto_mod.SMALL_STATES
    auto_mod.SMALL_STATES = 5
    try:
        return run_auto(system, timeout=timeout, max_states=None, symmetry=symmetry,
                        save_proof=False, proofs_dir=Path("no-such-proofs"))
    finally:
        auto_mod.SMALL_STATES = saved


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("at", [1, 3])
def test_ctrl_c_during_a_solver_check_interrupts_the_run(monkeypatch: pytest.MonkeyPatch,
                                                         engine: str, at: int) -> None:
    """The reported bug: PDR went on after the swallowed Ctrl-C and printed PROVED."""
    system = system_of("patched.py", SMALL)
    FakeCtrlC(monkeypatch, at)
    with pytest.raises(KeyboardInterrupt):
        ENGINES[engine](system)


def test_ctrl_c_during_invariant_selection_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    small = system_of("patched.py", SMALL)
    schema, states = sample_states(small)
    templates = enumerate_candidates(schema, StateTable(schema, states))
    ts = TransitionSystem(small, "bv")
    strengthener = Strengthener(ts, templates, goal_templates(small, templates), (True, True),
                                Deadline(60))
    FakeCtrlC(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):  # not InferenceTimeout ("out of time")
        strengthener.run()


def test_ctrl_c_during_ic3_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    system = system_of("single_node.py", {"requests": 1, "pages": 2})
    ts = TransitionSystem(system, "int")
    bad = z3.Or(*[ts.bad(p) for p in system.properties])
    FakeCtrlC(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        ic3(ts, [], bad, None)


def _canceled(after: float) -> Any:
    def query(self: z3.Fixedpoint, *args: Any) -> Any:
        time.sleep(after)
        raise z3.Z3Exception("canceled")
    return query


def test_ctrl_c_during_spacer_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Z3 reports Ctrl-C in a Horn query as "canceled", like a timeout; canceled long
    before the query's time is up, it was Ctrl-C."""
    system = system_of("single_node.py", {"requests": 1, "pages": 2})
    ts = TransitionSystem(system, "int")
    bad = z3.Or(*[ts.bad(p) for p in system.properties])
    monkeypatch.setattr(z3.Fixedpoint, "query", _canceled(0.0))
    with pytest.raises(KeyboardInterrupt):
        spacer(ts, [], bad, 5000)
    with pytest.raises(KeyboardInterrupt):
        spacer(ts, [], bad, None)
    monkeypatch.setattr(z3.Fixedpoint, "query", _canceled(0.15))
    assert spacer(ts, [], bad, 100) == (z3.unknown, None)  # its own timeout: unknown


def test_ctrl_c_in_spacer_stage_of_pdr_interrupts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(z3.Fixedpoint, "query", _canceled(0.0))
    system = system_of("patched.py", SMALL)
    with pytest.raises(KeyboardInterrupt):
        run_pdr(system, timeout=120, save_proof=False, proofs_dir=Path("proofs"),
                inference=False, quick_depth=0)


def test_certificate_checks_leave_ctrl_c_to_python(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    """The certificate checker reads solver answers itself: while it runs, Z3 must not
    swallow Ctrl-C (it becomes a KeyboardInterrupt when the running call returns)."""
    seen: list[str] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(z3.get_param("ctrl_c"))
        raise KeyboardInterrupt

    monkeypatch.setattr(pdr_mod, "verify_invariant", spy)
    with pytest.raises(KeyboardInterrupt):
        run_pdr(system_of("single_node.py", {"requests": 1, "pages": 2}), timeout=120,
                save_proof=False, proofs_dir=tmp_path, quick_depth=0)
    assert seen == ["false"] and z3.get_param("ctrl_c") == "true"

    system = system_of("patched.py", SMALL)
    certificate_path(system, tmp_path).write_text("{}")
    monkeypatch.setattr(auto_mod, "check_certificate", spy)
    with pytest.raises(KeyboardInterrupt):
        run_auto(system, timeout=60, max_states=None, symmetry=True, save_proof=False,
                 proofs_dir=tmp_path)
    assert seen == ["false", "false"] and z3.get_param("ctrl_c") == "true"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_solver_unknown_is_never_success(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """Every check answers unknown (a give-up, not Ctrl-C): nothing may hold or be proved
    by a solver, and it is a verdict (UNKNOWN), not a crash. (auto's exhaustive search
    needs no solver: HOLDS (exhaustive) is its own.)"""
    FakeCtrlC(monkeypatch, 0, reason="canceled")
    out = ENGINES[engine](system_of("patched.py", SMALL))
    assert [v.headline() for v in out.verdicts
            if v.status is Status.PROVED or (v.status is Status.HOLDS
                                             and v.method != "exhaustive")] == []
    if engine != "auto":
        assert _success(out) == []


def test_explicit_and_fuzz_let_ctrl_c_through(monkeypatch: pytest.MonkeyPatch) -> None:
    system = system_of("patched.py", SMALL)
    calls = [0]
    real = system.machine.step

    def step(*args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 200:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(system.machine, "step", step)
    with pytest.raises(KeyboardInterrupt):
        explore(system)
    calls[0] = 0
    with pytest.raises(KeyboardInterrupt):
        run_fuzz(system, max_examples=20, steps=20)


def test_real_sigint_during_pdr_exits_130_without_proved(tmp_path: Path) -> None:
    """End to end, with a real SIGINT while PDR works (SIGINT enabled explicitly: a
    child of a non-interactive shell may have inherited it ignored)."""
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from kvspec.cli import main; sys.exit(main(sys.argv[1:]))")
    # a run of about 9 s on a quiet machine: the Ctrl-C at 2.5 s lands well inside it
    proc = subprocess.Popen([sys.executable, "-c", code, "verify", str(MODELS / "lowest_free.py"),
                             "--size", "requests=4,pages=16", "--engine", "pdr",
                             "--proofs-dir", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "PROVED" not in out and "HOLDS" not in out, out
    assert proc.returncode == 130, err


# -- 2. limits cover every phase ----------------------------------------------------------------

def _slow(seconds: float, real: Any) -> Any:
    def slow(*args: Any, **kwargs: Any) -> Any:
        end = time.monotonic() + seconds
        while time.monotonic() < end:  # busy, like a long analysis
            pass
        return real(*args, **kwargs)
    return slow


def _slow_symmetry(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    for mod in (explicit_mod, bmc_mod, pdr_mod):
        monkeypatch.setattr(mod, "analyse_symmetry", _slow(seconds, mod.analyse_symmetry))


RUNS = {
    "explicit": lambda s, t: explore(s, limits=Limits(timeout=t)),
    "bmc": lambda s, t: run_bmc(s, depth=6, timeout=t),
    "kind": lambda s, t: run_kind(s, max_k=6, timeout=t),
    "pdr": lambda s, t: run_pdr(s, timeout=t, save_proof=False, proofs_dir=Path("proofs")),
    "auto": lambda s, t: _auto_with_solvers(s, t),
}


@pytest.mark.parametrize("engine", sorted(RUNS))
def test_timeout_covers_the_symmetry_analysis(monkeypatch: pytest.MonkeyPatch,
                                              engine: str) -> None:
    _slow_symmetry(monkeypatch, 20.0)
    start = time.monotonic()
    out = RUNS[engine](system_of("patched.py", SMALL), 0.5)
    assert time.monotonic() - start < 5.0
    assert all(v.status is Status.UNKNOWN for v in out.verdicts), \
        [v.headline() for v in out.verdicts]
    assert any("symmetry analysis" in v.detail for v in out.verdicts)


@pytest.mark.parametrize("engine", ["bmc", "kind", "pdr", "auto"])
def test_timeout_covers_the_encoding(monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    system = system_of("patched.py", SMALL)
    assert len(system.instances) > 30
    monkeypatch.setattr(system, "encode_step", _slow(0.1, system.encode_step))
    start = time.monotonic()
    out = RUNS[engine](system, 0.8)
    assert time.monotonic() - start < 2.5
    assert _success(out) == []
    assert all(v.status is Status.UNKNOWN for v in out.verdicts)


def test_timeout_covers_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pdr_mod, "enumerate_candidates",
                        _slow(30.0, pdr_mod.enumerate_candidates))
    start = time.monotonic()
    # without the first BMC pass, so that the deadline falls inside the inference
    out = run_pdr(system_of("patched.py", SMALL), timeout=2.0, save_proof=False,
                  proofs_dir=Path("proofs"), quick_depth=0)
    assert time.monotonic() - start < 6.0
    assert all(v.status is Status.UNKNOWN for v in out.verdicts)
    assert any("inference" in v.detail for v in out.verdicts), out.verdicts


def test_timeout_covers_orbit_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exhaustive search finished in time; counting what the representatives stand
    for may not run past the timeout (the count is left out, the verdicts stand)."""
    real = explicit_mod.Canonicalizer.orbit_size

    def slow(self: Any, s: Any) -> int:
        time.sleep(0.02)
        return int(real(self, s))

    monkeypatch.setattr(explicit_mod.Canonicalizer, "orbit_size", slow)
    start = time.monotonic()
    out = explore(system_of("buggy_pd.py", SMALL), limits=Limits(timeout=1.5))
    assert time.monotonic() - start < 4.0
    assert out.complete
    assert "concrete_states" not in out.stats.symmetry


class Stop(BaseException):
    """Ends a run once a test has seen what it wanted."""


def test_max_states_bounds_the_inference_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def spy(system: System, **kwargs: Any) -> Any:
        seen.append(kwargs["max_states"])
        raise Stop

    monkeypatch.setattr(pdr_mod, "sample_outcome", spy)
    for cap, expected in ((50, 50), (None, 30000)):
        with pytest.raises(Stop):
            run_pdr(system_of("patched.py", SMALL), timeout=60, save_proof=False,
                    proofs_dir=Path("proofs"), max_states=cap, quick_depth=0)
    assert seen == [50, 30000]
    system = system_of("patched.py", SMALL)
    schema, states = sample_states(system, max_states=40)
    assert 40 <= len(states) <= 40 + 64  # stops at the first check past the cap


def test_time_limit_interrupts_code_that_never_polls() -> None:
    deadline = Deadline(0.2)
    start = time.monotonic()
    with pytest.raises(OutOfTime, match="timeout during busy work"):
        with time_limit(deadline, "busy work"):
            while True:
                pass
    assert time.monotonic() - start < 2.0
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with time_limit(Deadline(None), "no limit"):
        pass


def test_symmetry_reductions_own_work_is_a_budget_of_the_python_search() -> None:
    """Many interchangeable requests give a state many images to compare: ``auto``'s
    explicit stage bounds that work too, deterministically, and says it stopped."""
    system = system_of("patched.py", {"requests": 4, "pages": 4})
    capped = explore(system, symmetry=True, limits=Limits(max_canon_work=200_000))
    assert capped.stopped == explicit_mod.WORK_LIMIT and not capped.complete
    again = explore(system, symmetry=True, limits=Limits(max_canon_work=200_000))
    assert again.stats.states == capped.stats.states  # work, not seconds
    assert {v.status.value for v in capped.verdicts} == {"UNKNOWN"}
    assert all("symmetry-reduction work limit" in v.detail for v in capped.verdicts)
    # without reduction there is no such work: the budget does not apply
    plain = explore(system, symmetry=False, limits=Limits(max_states=capped.stats.states,
                                                          max_canon_work=200_000))
    assert plain.stopped == explicit_mod.STATE_LIMIT
    with pytest.raises(ValueError):
        Limits(max_canon_work=0)


class _SlowArgument:
    """A ctypes argument whose conversion never ends (as Z3's API calls convert theirs)."""

    @property
    def _as_parameter_(self) -> int:
        while True:
            pass


def test_a_timeout_inside_a_ctypes_call_is_a_timeout_not_an_internal_error() -> None:
    """ctypes reports an exception raised while it converts a call's arguments as
    ``ArgumentError("argument 1: OutOfTime: ...")``: the limit still says where it hit."""
    import ctypes
    libc = ctypes.CDLL(None)
    with pytest.raises(OutOfTime, match="timeout during invariant inference"):
        with time_limit(Deadline(0.2), "invariant inference"):
            libc.abs(_SlowArgument())
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


# -- timeouts and bounds: one meaning for every engine ----------------------------------------

BAD_LIMITS = [
    lambda s: Limits(timeout=0),
    lambda s: Limits(timeout=-1),
    lambda s: Limits(timeout=float("nan")),
    lambda s: Limits(max_states=-5),
    lambda s: Limits(max_states=0),
    lambda s: run_bmc(s, depth=-1, timeout=None),
    lambda s: run_bmc(s, depth=3, timeout=0),
    lambda s: run_kind(s, max_k=-2, timeout=None),
    lambda s: run_kind(s, max_k=3, timeout=0),
    lambda s: run_pdr(s, timeout=0, save_proof=False, proofs_dir=Path("proofs")),
    lambda s: run_pdr(s, timeout=-3, save_proof=False, proofs_dir=Path("proofs")),
    lambda s: run_pdr(s, timeout=None, save_proof=False, proofs_dir=Path("proofs"),
                      max_states=-1),
    lambda s: run_auto(s, timeout=0, max_states=None, symmetry=True, save_proof=False,
                       proofs_dir=Path("proofs")),
    lambda s: run_auto(s, timeout=None, max_states=-10, symmetry=True, save_proof=False,
                       proofs_dir=Path("proofs")),
    lambda s: run_fuzz(s, timeout=0),
    lambda s: run_fuzz(s, timeout=-1),
    lambda s: Deadline(0),
]


@pytest.mark.parametrize("call", range(len(BAD_LIMITS)))
def test_bad_limits_are_rejected(call: int) -> None:
    """Timeout None is no limit and a positive number is a limit, for every engine;
    zero, negative and non-finite limits are errors (not "no limit", not "stop now")."""
    with pytest.raises(ValueError):
        BAD_LIMITS[call](system_of("single_node.py", {"requests": 1, "pages": 2}))


def test_no_timeout_means_no_limit_everywhere() -> None:
    system = system_of("single_node.py", {"requests": 1, "pages": 2})
    assert explore(system, limits=Limits(timeout=None)).complete
    out = run_bmc(system, depth=2, timeout=None)
    assert all(v.status is not Status.UNKNOWN for v in out.verdicts)
    out = run_auto(system, timeout=None, max_states=None, symmetry=True, save_proof=False,
                   proofs_dir=Path("no-such-proofs"))
    assert all(v.status is not Status.UNKNOWN for v in out.verdicts)


# -- 3. --no-symmetry is honoured by the Z3 engines -------------------------------------------

def _record_symmetry(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool]]:
    seen: list[tuple[bool, bool]] = []

    class Recording(TransitionSystem):
        def __init__(self, system: System, encoding: str = "bv",
                     symmetry: tuple[bool, bool] = (False, False), *args: Any,
                     **kwargs: Any) -> None:
            seen.append(tuple(symmetry))  # type: ignore[arg-type]
            super().__init__(system, encoding, symmetry, *args, **kwargs)

    monkeypatch.setattr(bmc_mod, "TransitionSystem", Recording)
    monkeypatch.setattr(pdr_mod, "TransitionSystem", Recording)
    return seen


SYM_RUNS = {
    "bmc": lambda s, on: run_bmc(s, depth=4, timeout=120, symmetry=on),
    "kind": lambda s, on: run_kind(s, max_k=3, timeout=120, symmetry=on),
    "auto": lambda s, on: _auto_with_solvers(s, 120, on),
}


@pytest.mark.parametrize("engine", [pytest.param(e, marks=pytest.mark.slow) if e == "auto" else e
                                    for e in sorted(SYM_RUNS)])
def test_no_symmetry_means_no_symmetry_breaking(monkeypatch: pytest.MonkeyPatch,
                                                engine: str) -> None:
    """Symmetry off means no symmetry breaking in any solver query. (The auto case,
    about 70 s, is marked slow: its stages are the bmc and kind runs here and PDR, which
    test_no_symmetry_in_pdr covers.)"""
    monkeypatch.setattr(auto_mod, "QUICK_BMC_WORK", 4_000_000)
    seen = _record_symmetry(monkeypatch)
    off = SYM_RUNS[engine](system_of("buggy_pd.py", SMALL), False)
    assert seen and all(s == (False, False) for s in seen), seen
    seen.clear()
    on = SYM_RUNS[engine](system_of("buggy_pd.py", SMALL), True)
    assert (True, True) in seen
    assert [(v.status, v.trace and len(v.trace)) for v in off.verdicts] == \
        [(v.status, v.trace and len(v.trace)) for v in on.verdicts]


def test_no_symmetry_in_pdr(monkeypatch: pytest.MonkeyPatch) -> None:
    """PDR: no symmetry breaking in its BMC, and inference checks every instance."""
    seen = _record_symmetry(monkeypatch)
    chosen: list[tuple[bool, bool]] = []

    def spy(system: System, ts: Any, symmetric: tuple[bool, bool], *args: Any,
            **kwargs: Any) -> Any:
        chosen.append(symmetric)
        raise Stop

    monkeypatch.setattr(pdr_mod, "infer", spy)
    for on in (False, True):
        with pytest.raises(Stop):
            run_pdr(system_of("patched.py", SMALL), timeout=120, save_proof=False,
                    proofs_dir=Path("proofs"), symmetry=on, quick_depth=0)
    assert seen == [(False, False), (True, True)]
    assert chosen == [(False, False), (True, True)]


def test_least_fresh_constraints_only_with_symmetry() -> None:
    system = system_of("buggy_pd.py", SMALL)
    with_sym = bmc_mod.build(system, symmetry=True)
    without = bmc_mod.build(system, symmetry=False)
    assert with_sym.symmetry == (True, True) and without.symmetry == (False, False)
    assert len(without.trans_template()) < len(with_sym.trans_template())


# -- 6. auto: a stage cut by its budget decides nothing it did not finish ----------------------

def test_auto_takes_holds_only_from_a_complete_search(monkeypatch: pytest.MonkeyPatch) -> None:
    real = explicit_mod.explore

    def cut(system: System, **kwargs: Any) -> Any:
        out = real(system, **kwargs)
        out.complete = False  # as if the budget had run out just before the end
        out.stopped = explicit_mod.STATE_LIMIT
        return out

    monkeypatch.setattr(explicit_mod, "explore", cut)
    monkeypatch.setattr(pdr_mod, "run_pdr", _no_pdr)
    monkeypatch.setattr(auto_mod, "QUICK_BMC_WORK", 4_000_000)
    out = run_auto(system_of("buggy_pd.py", SMALL), timeout=60, max_states=None,
                   symmetry=True, save_proof=False, proofs_dir=Path("no-such-proofs"))
    assert _success(out) == []
    assert any(v.status is Status.VIOLATED for v in out.verdicts)


def _no_pdr(system: System, **kwargs: Any) -> EngineOutcome:
    from kvspec.verdict import Stats, Verdict
    return EngineOutcome([Verdict(p.name, Status.UNKNOWN, "pdr", "skipped")
                          for p in system.properties], Stats(), "pdr")


def test_auto_with_a_small_state_budget_never_says_holds(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(auto_mod, "SMALL_STATES", 20)
    monkeypatch.setattr(pdr_mod, "run_pdr", _no_pdr)
    monkeypatch.setattr(auto_mod, "QUICK_BMC_WORK", 4_000_000)
    out = run_auto(system_of("patched.py", SMALL), timeout=60, max_states=None, symmetry=True,
                   save_proof=False, proofs_dir=Path("no-such-proofs"))
    assert _success(out) == []
    stage = next(s for s in out.stats.extra["auto"] if s["stage"] == "explicit")
    assert stage["complete"] is False and stage["stopped"] == "state-limit"
    assert out.stats.extra["explicit"]["stopped"] == "state-limit"


def test_auto_timeout_is_unknown_not_holds() -> None:
    out = run_auto(system_of("patched.py", {"requests": 3, "pages": 6}), timeout=1.0,
                   max_states=None, symmetry=True, save_proof=False,
                   proofs_dir=Path("no-such-proofs"))
    assert _success(out) == []
    assert out.stats.seconds < 6.0


def test_timeout_is_checked_after_every_state_of_a_slow_expansion() -> None:
    """At eight requests one state's expansion tries many tied request orders; the
    deadline must still stop the search within about one expansion."""
    start = time.monotonic()
    out = explore(system_of("patched.py", {"requests": 8}), limits=Limits(timeout=1.0))
    assert not out.complete
    assert all(v.status.name == "UNKNOWN" for v in out.verdicts)
    assert time.monotonic() - start < 20.0
