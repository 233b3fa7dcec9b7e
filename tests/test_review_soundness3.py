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


# every kind of element, line and masked access over index spaces whose concrete run can
# stop with an error (an index beyond the space, a value outside the type)
ERRORS = '''
from kvspec import Int, Model, Page, Pages, Ranks, Request, Requests, Slots, action, require, var


class E(Model):
    properties = ()
    requests = Requests(2)
    pages = Pages(2)
    ranks = Ranks(3)
    slots = Slots(2)
    c = var(Int(0, 4), init=0)
    g = requests.by(ranks).var(Int(0, 2), init=0)
    q = ranks.by(requests).var(Int(0, 2), init=0)
    w = slots.by(ranks).var(Int(0, 2), init=0)
    h = ranks.var(Int(0, 2), init=0)
    lead = requests.var(ranks.optional, init=None)
    cur = var(ranks.optional, init=None)
    rank = pages.var(ranks.id, init=0)
    pr = pages.by(ranks).var(bool, init=False)

    @action
    def element(s, r: Request, k: ranks.id):
        s.g[r, k] = s.g[r, k] + 1

    @action
    def line(s, r: Request):
        s.g[r, :] = s.c

    @action
    def column(s, k: ranks.id):
        s.q[k, :] = s.c

    @action
    def masked(s):
        s.h[s.h >= 1] = s.c

    @action
    def write_at_int(s):
        s.h[s.c] = 1

    @action
    def read_at_int(s):
        require(s.h[s.c] == 0)
        s.c = 0

    @action
    def carried(s, r: Request):
        t = 0
        for k in s.ranks:
            t = t + s.g[r, k]
        s.c = t

    @action
    def at_page_rank(s, p: Page):
        s.h[s.rank[p]] = s.c

    @action
    def slot_line(s, j: slots.id):
        s.w[j, :] = s.c

    @action
    def optional(s, r: Request, k: ranks.id):
        s.lead[r] = k
        s.cur = s.lead[r]

    @action
    def counted(s):
        s.c = (s.h >= 1).count() + s.c

    @action
    def summed(s, r: Request):
        s.c = sum(s.g[r, k] for k in s.ranks)

    @action
    def rank_of_int(s, p: Page):
        s.pr[p, :] = s.c >= 1
        s.rank[p] = s.c

    @action
    def over_requests(s, r2: Request):
        for r in s.requests:
            s.g[r, 1] = s.c
'''


def test_every_concrete_model_error_over_index_spaces_is_a_parametric_one(
        tmp_path: Path) -> None:
    """At random states, an action instance whose concrete step stops with a model error
    is one whose parametric step may report one (else the all-sizes reading could prove
    what the concrete run reports as an error)."""
    import random

    import z3

    from kvspec.proofs.parametric.model import parametric_model
    from test_all_sizes import _finite_universe, _slots, _term

    path = tmp_path / "errors.py"
    path.write_text(ERRORS)
    system = compile_model(load_model(path))
    model = parametric_model(system)
    universe, ids = _finite_universe(model, system)
    assert model.sizes is not None
    universe += [t == model.sizes.values[n] for n, t in model.sizes.terms.items()]
    universe += model.axioms
    rng = random.Random(1)
    names = [a.name for a in system.actions]
    errors, missed = 0, []
    for _ in range(40):
        state = tuple(rng.choice(t.domain()) for t in system.slot_types())
        pre = [term == _term(model, ids, t, state[k])
               for k, t, term in _slots(model, system, ids, model.pre_view())]
        for inst in rng.sample(system.instances, 10):
            try:
                system.step(state, inst)
                continue
            except ModelError as exc:
                message = str(exc)
            step = model.steps[names.index(inst.name)][1]
            s = z3.Solver()
            s.add(*universe, *pre, *step.param_ok)
            s.add(*[c == _term(model, ids, t, val) for val, (_, t), c
                    in zip(inst.args, inst.action.params, step.params)])
            s.add(z3.Or(*[c for c, _ in step.errors]) if step.errors else z3.BoolVal(False))
            errors += 1
            if s.check() != z3.sat:
                missed.append(f"{inst.label()}: {message}")
    assert errors >= 20
    assert not missed, missed
