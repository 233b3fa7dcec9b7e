"""The slots a symbolic step records as read (``StepEncoding.reads``).

The orbit check picks each query's local premise by the slots the action's terms
mention; it takes them from what the symbolic interpreter recorded while encoding
the step instead of walking the terms. That record must cover every slot whose
variable the step's terms (guard, model errors, next values) mention, for every
construct a model may use: a slot left out would make the local premise miss
instances it needs (the whole invariant then decides, so verdicts stay right, but
the cheap route is lost without anyone noticing). Checked on every shipped model
and on random models of the whole grammar (:mod:`modelgen`).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from modelgen import GenModel, models
from test_differential import compile_source, forget

from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.proofs.clauses import term_constants, var_sorts
from kvspec.proofs.smt_check import Encoding

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "models").glob("*.py")) + sorted((ROOT / "models" / "library").glob("*.py"))


def model_classes(path: Path) -> list[str]:
    """The Model classes a file defines (every class the loader accepts by name)."""
    names = [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
    out = []
    for name in names:
        try:
            load_model(path, name)
        except ModelError:
            continue
        out.append(name)
    return out


def mentioned(enc: Encoding, terms: list[z3.ExprRef]) -> set[int]:
    """The slots whose variables ``terms`` mention (a walk over the terms)."""
    if not terms:
        return set()
    names = term_constants(z3.And(*[t if z3.is_bool(t) else t == t for t in terms]),
                           var_sorts(enc.cur))[0]
    return {enc.slot[n] for n in names}


def assert_reads_cover_terms(system: System) -> int:
    """Every step's recorded slots cover its terms; returns how many steps."""
    enc = Encoding(system)
    for step in enc.steps:
        recorded = set(step.reads)
        assert set(step.updates) <= recorded, f"{step.inst.label()}: a write is not recorded"
        for what, terms in (("guard", [step.enabled]), ("model errors", [step.error]),
                            ("next values", list(step.updates.values()))):
            missing = mentioned(enc, terms) - recorded
            assert not missing, (f"{step.inst.label()}: its {what} mention "
                                 f"{sorted(enc.names[i] for i in missing)}, not recorded")
    return len(enc.steps)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_shipped_models_record_every_slot_their_steps_mention(path: Path) -> None:
    names = model_classes(path)
    assert names
    for name in names:
        assert assert_reads_cover_terms(compile_model(load_model(path, name))) > 0


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(model=models())
def test_random_models_record_every_slot_their_steps_mention(model: GenModel,
                                                               tmp_path: Path) -> None:
    _, system = compile_source(model.source, tmp_path, model.class_name)
    try:
        assert_reads_cover_terms(system)
    finally:
        forget(system)


def small_model(cursor_max: int, body: str) -> str:
    """A model with a cursor over 3 pages (0 .. ``cursor_max``) and ``body``."""
    return f'''
from kvspec import Int, Model, Pages, Requests, action, invariant, var

class Gen(Model):
    requests = Requests(2)
    pages = Pages(3)
    cursor = var(Int(0, {cursor_max}), init=0)
    owner = pages.var(requests.optional, init=None)
    hits = var(Int(0, 3), init=0)
{body}'''


def test_a_read_through_a_computed_index_records_the_whole_array(tmp_path: Path) -> None:
    """``s.owner[s.cursor]`` with a symbolic cursor reads every page's owner: the term
    is a chain over all of them."""
    source = small_model(cursor_max=2, body='''
    @action
    def look(s):
        if s.owner[s.cursor] is None:
            s.hits = min(s.hits + 1, 3)
''')
    _, system = compile_source(source, tmp_path, "Gen")
    enc = Encoding(system)
    step = enc.steps[0]
    owners = {enc.slot[f"owner[{p}]"] for p in range(3)}
    assert owners <= set(step.reads)
    assert assert_reads_cover_terms(system) == 1


def test_what_an_invariant_reads_counts_when_it_can_raise_a_model_error(
        tmp_path: Path) -> None:
    """An invariant indexing by a state value can go out of range: that model error is a
    condition of every step (the engines evaluate the invariants in every state), so
    what the invariant reads is part of every step's record."""
    source = small_model(cursor_max=3, body='''
    @action
    def bump(s):
        s.hits = min(s.hits + 1, 3)

    @invariant
    def looked(s):
        return s.owner[s.cursor] is None or s.hits >= 0
''')
    _, system = compile_source(source, tmp_path, "Gen")
    enc = Encoding(system)
    (step,) = enc.steps
    assert step.errors, "the invariant's out-of-range read is a model error of the step"
    assert enc.slot["cursor"] in step.reads
    assert assert_reads_cover_terms(system) == 1
