"""Soundness regressions of the all-sizes reading over declared index spaces: a model
whose concrete run stops with an error at some number of requests must not be proved
for every size."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.runner import run
from kvspec.verdict import Status

# the error is reachable from three requests on: the fixed-size engines at the declared
# two requests never see it, so only the all-sizes reading's own checks can stop a proof
HEAD = '''
from kvspec import Int, Model, Ranks, Request, Requests, action, invariant, require, var


class M(Model):
    properties = ()
    requests = Requests(2)
    ranks = Ranks(2)
    c = var(Int(0, 3), init=0)
    g = ranks.var(Int(0, 2), init=0)
    h = ranks.var(bool, init=False)

    @action
    def step(s):
        require(s.c < 3)
        s.c = s.c + 1

    @invariant
    def quiet(s) -> bool:
        return not s.h.any()

    @action
    def put(s, a: Request, b: Request, d: Request):
        require(a != b and b != d and a != d)
'''

BODIES = {
    # an int index beyond the space: a write and a read
    "write beyond the space": "s.g[s.c] = 1",
    "read beyond the space": "require(s.g[s.c] == 0)",
    # a masked write of a value outside the type, under a mask that is always empty:
    # the concrete run checks the value whatever the mask
    "masked write outside the type": "s.g[s.h] = s.c",
}


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_a_model_error_at_more_requests_is_not_proved_for_every_size(
        tmp_path: Path, body: str) -> None:
    path = tmp_path / "m.py"
    path.write_text(HEAD + f"        {body}\n")
    with pytest.raises(ModelError):
        run(compile_model(load_model(path), {"requests": 3}), "explicit", coverage=False)
    res = run(compile_model(load_model(path)), "all-sizes", proofs_dir=tmp_path,
              coverage=False)
    (v,) = res.verdicts
    assert not (v.status is Status.PROVED and v.method == "all sizes"), v.detail
    assert "model error may be reachable" in v.detail and "m.py:" in v.detail, v.detail
