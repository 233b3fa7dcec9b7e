"""The fast paths of ``kvspec audit`` change no verdict: the line validator's fast path
accepts only what the JSON Schema accepts, the JSON fast path parses as ``json.loads``,
and a false request-only guard means every instance of the action is disabled."""
from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvspec.audit.guards import request_guards
from kvspec.audit.logformat import (AuditInputError, compile_schema, compile_validator,
                                    read_records, schema_for)
from kvspec.audit.mapping import FIELD_KEYS
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model

ROOT = Path(__file__).resolve().parent.parent
IDENTITY = {k: k for k in FIELD_KEYS}
RENAMED = dict(IDENTITY, request="request_id", page="block_id", pages="block_ids")

values = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False),
                   st.text(max_size=3), st.lists(st.one_of(st.integers(-1, 3), st.text(max_size=2),
                                                           st.booleans()), max_size=3),
                   st.fixed_dictionaries({"start": st.integers(-1, 3), "stop": st.integers(0, 3)}))
keys = st.sampled_from(["ts", "request", "event", "page", "pages", "node", "rank", "reason",
                        "request_id", "block_id", "block_ids"])
records = st.one_of(st.dictionaries(keys, values, max_size=8), values)


VALIDATORS = {name: (compile_schema(schema_for(f)), compile_validator(f))
              for name, f in (("identity", IDENTITY), ("renamed", RENAMED))}


@pytest.mark.parametrize("fields", sorted(VALIDATORS))
@settings(max_examples=300, deadline=None)
@given(record=records)
def test_the_fast_validator_agrees_with_the_schema(fields: str, record: Any) -> None:
    full, fast = VALIDATORS[fields]
    try:
        full(record)
        schema_ok = True
    except fastjsonschema.JsonSchemaException:
        schema_ok = False
    try:
        fast(record)
        fast_ok = True
    except fastjsonschema.JsonSchemaException:
        fast_ok = False
    assert fast_ok == schema_ok


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.dictionaries(st.text(max_size=3), st.one_of(st.integers(), st.text(max_size=3)),
                    max_size=3).map(json.dumps),
    st.sampled_from(["{", "{} x", "{\"a\": 1}  ", "  {\"a\": 2}", "[1]", "{\"a\": NaN}",
                     "{\"a\": 1}}", "", "   ", "\"s\""])), max_size=6))
def test_the_json_fast_path_parses_as_json_loads(lines: list[str]) -> None:
    text = "".join(x + "\n" for x in lines)
    expected: list[tuple[int, Any]] = []
    error = None
    for n, raw in enumerate(text.splitlines(keepends=True), 1):
        if not raw.strip():
            continue
        try:
            expected.append((n, json.loads(raw)))
        except ValueError:
            error = n
            break
    got: list[tuple[int, Any]] = []
    try:
        for item in read_records(io.StringIO(text), "t.jsonl", lambda r: r):
            got.append(item)
    except AuditInputError as exc:
        assert exc.line == error
    else:
        assert error is None
    assert got == expected


@pytest.mark.parametrize("model", ["patched.py", "buggy_pd.py", "free_before_drain.py"])
def test_a_false_request_guard_disables_every_instance(model: str) -> None:
    system = compile_model(load_model(ROOT / "models" / model), {"requests": 3, "pages": 4}, [])
    guards = request_guards(system)
    assert guards  # the shipped models have request-only leading conditions
    rng = random.Random(5)
    seen = 0
    for _ in range(30):  # random walks over reachable states
        state = system.initial
        for _ in range(25):
            for inst in system.instances:
                g = guards.get(id(inst.action))
                if g is not None and not g[0](state, *(inst.args[p] for p in g[1])):
                    assert system.step(state, inst) is None, inst.label()
                    seen += 1
            succ = list(system.successors(state))
            if not succ:
                break
            state = rng.choice(succ).state
    assert seen > 0
