"""Random small models: explicit, BMC and PDR must agree, and every counterexample
must replay.

Hypothesis writes model source (random per-request, per-page and scalar variables;
guarded actions with branches, arithmetic and lifecycle events; random model
invariants) into a temporary file, loads it with :func:`load_model`, and runs:

* the explicit engine without symmetry reduction (ground truth),
* BMC as deep as the deepest reachable state (so "no violation up to that depth"
  means "none at all"),
* PDR (quick BMC, template inference, Spacer).

Verdicts must match property by property, counterexamples must have the same
length (all engines return shortest ones), and a reachable model error must be
reported by every engine. Traces are re-executed by ``concretize`` inside each
engine, so a trace that did not replay would already have failed loudly.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvspec.engines.bmc import run_bmc
from kvspec.engines.explicit import explore
from kvspec.engines.pdr import run_pdr
from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.verdict import Status, Verdict

HEADER = '''import enum
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, invariant, require, var


class Color(enum.Enum):
    RED = 0
    GREEN = 1
    BLUE = 2


class Rand(Model):
'''

_counter = itertools.count()


@st.composite
def model_sources(draw: Any) -> str:
    R = draw(st.integers(1, 2))
    P = draw(st.integers(1, 2))
    req_vars: list[tuple[str, str]] = []  # (name, kind)
    for i in range(draw(st.integers(1, 3))):
        req_vars.append((f"v{i}", draw(st.sampled_from(["bool", "int", "enum"]))))
    page_vars: list[tuple[str, str]] = []
    for i in range(draw(st.integers(0, 2))):
        page_vars.append((f"w{i}", draw(st.sampled_from(["bool", "ref"]))))
    scalar = draw(st.booleans())
    lines = [f"    requests = Requests({R})", f"    pages = Pages({P})"]
    for name, kind in req_vars:
        spec = {"bool": "bool, init=False", "int": "Int(0, 2), init=0",
                "enum": "Color, init=Color.RED"}[kind]
        lines.append(f"    {name} = requests.var({spec})")
    for name, kind in page_vars:
        spec = {"bool": "bool, init=False", "ref": "requests.optional, init=None"}[kind]
        lines.append(f"    {name} = pages.var({spec})")
    if scalar:
        lines.append("    g = var(Int(0, 3), init=0)")

    def atom(r: str, p: str | None) -> str:
        choices: list[str] = []
        for name, kind in req_vars:
            if kind == "bool":
                choices += [f"s.{name}[{r}]", f"not s.{name}[{r}]"]
            elif kind == "int":
                k = draw(st.integers(0, 2))
                op = draw(st.sampled_from(["==", "!=", "<", ">="]))
                choices.append(f"s.{name}[{r}] {op} {k}")
            else:
                c = draw(st.sampled_from(["RED", "GREEN", "BLUE"]))
                choices.append(f"s.{name}[{r}] == Color.{c}")
        if p is not None:
            for name, kind in page_vars:
                if kind == "bool":
                    choices.append(f"s.{name}[{p}]")
                else:
                    choices += [f"s.{name}[{p}] is None", f"s.{name}[{p}] == {r}"]
        if scalar:
            choices.append(f"s.g {draw(st.sampled_from(['<', '==', '>=']))} "
                           f"{draw(st.integers(0, 3))}")
        for name, kind in page_vars:  # vector operations over pages
            if kind == "ref":
                choices += [f"(s.{name} == {r}).count() <= {draw(st.integers(0, 1))}",
                            f"(s.{name} == None).any()"]
            else:
                choices.append(f"(s.{name} == True).all()")
        return draw(st.sampled_from(choices))

    def update(r: str, p: str | None, indent: str = "        ") -> str:
        choices: list[str] = []
        for name, kind in req_vars:
            if kind == "bool":
                choices += [f"s.{name}[{r}] = True", f"s.{name}[{r}] = not s.{name}[{r}]"]
            elif kind == "int":
                choices += [f"s.{name}[{r}] = s.{name}[{r}] + 1",
                            f"s.{name}[{r}] = {draw(st.integers(0, 2))}"]
            else:
                c = draw(st.sampled_from(["RED", "GREEN", "BLUE"]))
                choices.append(f"s.{name}[{r}] = Color.{c}")
        if p is not None:
            for name, kind in page_vars:
                if kind == "bool":
                    choices.append(f"s.{name}[{p}] = not s.{name}[{p}]")
                else:
                    choices += [f"s.{name}[{p}] = {r}", f"s.{name}[{p}] = None"]
        if scalar:
            choices += ["s.g = s.g + 1", "s.g = 0"]
        for name, kind in page_vars:  # masked assignments, loops with branches
            if kind == "ref":
                choices += [f"s.{name}[s.{name} == {r}] = None",
                            f"emit.free({r}, pages=s.{name} == {r})"]
            else:
                choices.append(f"s.{name}[s.{name} == False] = True")
            choices.append(
                f"for q in s.pages:\n{indent}    if {atom(r, 'q')}:\n"
                f"{indent}        {update_simple(r, 'q')}")
        events = [f"emit.reject({r})", f"emit.decode({r})"]
        if p is not None:
            events += [f"emit.alloc({r}, {p})", f"emit.free({r}, {p})", f"emit.read({r}, {p})",
                       f"emit.post_write({r}, {p})", f"emit.land_write({r}, {p})"]
        choices += events
        return draw(st.sampled_from(choices))

    def update_simple(r: str, p: str) -> str:
        options = []
        for name, kind in page_vars:
            options.append(f"s.{name}[{p}] = {r}" if kind == "ref"
                           else f"s.{name}[{p}] = not s.{name}[{p}]")
        return draw(st.sampled_from(options))

    for a in range(draw(st.integers(1, 4))):
        with_page = bool(page_vars) and draw(st.booleans())
        params = "s, r: Request, p: Page" if with_page else "s, r: Request"
        p = "p" if with_page else None
        body = ["    @action", f"    def act{a}({params}):",
                f"        require({atom('r', p)})"]
        shape = draw(st.sampled_from(["if", "return", "plain"]))
        if shape == "if":
            body += [f"        if {atom('r', p)}:",
                     f"            {update('r', p, '            ')}",
                     "        else:",
                     f"            {update('r', p, '            ')}"]
        elif shape == "return":  # an early return on a state-dependent condition
            body += [f"        if {atom('r', p)}:",
                     f"            {update('r', p, '            ')}",
                     "            return"]
        for _ in range(draw(st.integers(1, 2))):
            body.append(f"        {update('r', p)}")
        lines += [""] + body
    for i in range(draw(st.integers(0, 2))):
        r1, r2 = draw(st.integers(0, R - 1)), draw(st.integers(0, R - 1))
        p1 = draw(st.integers(0, P - 1)) if page_vars else None
        lines += ["", "    @invariant", f"    def inv{i}(s):",
                  (f"        return not ({atom(str(r1), None if p1 is None else str(p1))} and "
                   f"{atom(str(r2), None)})")]
    return HEADER + "\n".join(lines) + "\n"


def _summary(v: Verdict) -> tuple[str, int | None]:
    if v.status is Status.VIOLATED:
        assert v.trace is not None
        return "violated", len(v.trace)
    if v.status in (Status.HOLDS, Status.PROVED):
        return "holds", None
    return "unknown", None


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except ModelError as exc:
        return ("model error", exc.message.split(" (reachable")[0])


def check_agreement(path: Path) -> None:
    loaded = load_model(path)
    system = compile_model(loaded)
    truth = _outcome(lambda: explore(system, symmetry=False))
    if isinstance(truth, tuple):  # a reachable model error: every engine must say so
        bmc = _outcome(lambda: run_bmc(compile_model(loaded), depth=40, timeout=60))
        assert isinstance(bmc, tuple), f"explicit: {truth}, bmc: no model error"
        pdr = _outcome(lambda: run_pdr(compile_model(loaded), timeout=60, save_proof=False,
                                       proofs_dir=path.parent))
        assert isinstance(pdr, tuple), f"explicit: {truth}, pdr: no model error"
        return
    expected = {v.prop: _summary(v) for v in truth.verdicts}
    depth = truth.stats.depth
    bmc = run_bmc(compile_model(loaded), depth=depth, timeout=60)
    got = {v.prop: _summary(v) for v in bmc.verdicts}
    assert got == expected, f"bmc disagrees with explicit:\n{got}\n{expected}"
    pdr = run_pdr(compile_model(loaded), timeout=60, save_proof=False, proofs_dir=path.parent)
    got = {v.prop: _summary(v) for v in pdr.verdicts}
    assert got == expected, f"pdr disagrees with explicit:\n{got}\n{expected}"


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(source=model_sources())
def test_engines_agree_on_random_models(source: str, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("rand") / f"rand_{next(_counter)}.py"
    path.write_text(source)
    try:
        check_agreement(path)
    except AssertionError:
        print(source)
        raise


@pytest.mark.slow
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(source=model_sources())
def test_engines_agree_on_many_random_models(source: str, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("rand") / f"rand_{next(_counter)}.py"
    path.write_text(source)
    try:
        check_agreement(path)
    except AssertionError:
        print(source)
        raise
