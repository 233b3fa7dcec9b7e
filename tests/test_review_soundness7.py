"""Guards for derived sizes in the proof for every size (`cap = Size(derived=...)` read
as a symbol of its own, moved on its own by the second compile): what a derived size
breaks only at another size — a write of it beyond a fixed range, an index of it past
an index space, a threshold on a size derived from it — is never proved for every size
and fails in the explicit search there; the reading at one size contains the concrete
steps at others with the symbols at their values; a certificate with every value of it
re-checks where its function gives another; a derived size at its maximum is named with
the line of its declaration."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import z3

from kvspec.lang.errors import ModelError
from kvspec.lang.system import System
from kvspec.proofs.certificate import check_certificate
from kvspec.proofs.parametric.model import parametric_model
from kvspec.proofs.parametric.values import var_dims
from kvspec.runner import run
from kvspec.verdict import Status
from conftest import system_of
from test_all_sizes import _write

HEAD = '''
from kvspec import Index, Int, Model, Pages, Request, Requests, Size, action, invariant, \\
    require, var


class Derived(Model):
    requests = Requests(2)
    pages = Pages(4)
'''

# the derived value stored in a variable of a fixed range: fine up to 7 pages
WRITE = HEAD + '''    cap = Size(derived=lambda sz: sz.pages // 2, minimum=1)
    x = var(Int(0, 3), init=0)

    @action
    def go(s, k: Int(0, "cap")):
        s.x = k

    @invariant
    def small(s):
        return s.x <= 3
'''

# an index space indexed by the derived value: fine up to 9 pages
INDEX = HEAD + '''    slots = Index(5)
    cap = Size(derived=lambda sz: sz.pages // 2, minimum=1)
    buf = slots.var(bool, init=False)

    @action
    def go(s):
        s.buf[s.cap] = True

    @invariant
    def small(s):
        return s.buf[0] or not s.buf[0]
'''

# a size derived from a derived size: `x <= 6` holds while big = 3 * (pages // 2) <= 6
TWICE = HEAD + '''    cap = Size(derived=lambda sz: sz.pages // 2, minimum=1)
    big = Size(derived=lambda sz: sz.cap * 3)
    x = var(Int(0, 9), init=0)

    @action
    def go(s):
        require(s.x < s.big)
        s.x = s.x + 1

    @invariant
    def small(s):
        return s.x <= 6
'''

# a derived size that is 0 at four pages: nothing moves until eight
ZERO = HEAD + '''    cap = Size(derived=lambda sz: sz.pages // 8)
    x = var(Int(0, "cap"), init=0)

    @action
    def go(s):
        require(s.x < s.cap)
        s.x = s.x + 1

    @invariant
    def small(s):
        return s.x == 0
'''

# a derived size used in a type, a parameter's range, a guard and a write; `used <= cap`
# holds at every size, `used <= 2` only up to five pages
USES = HEAD + '''    limit = Size(2)
    cap = Size(derived=lambda sz: sz.pages // 2 + sz.limit - 2, minimum=1)
    used = requests.var(Int(0, "cap"), init=0)
    last = var(Int(0, "cap"), init=0)
    spare = var(Int(0, lambda sz: sz["cap"] + 1), init=0)

    @action
    def use(s, r: Request):
        require(s.used[r] < s.cap and s.spare == 0)
        s.used[r] = s.used[r] + 1

    @action
    def set_last(s, k: Int(1, "cap")):
        s.last = k

    @action
    def clear(s, r: Request):
        s.used[r] = 0

    @invariant
    def capped(s):
        return all(s.used[r] <= s.cap for r in s.requests)

    @invariant
    def two(s):
        return all(s.used[r] <= 2 for r in s.requests)
'''

# at four pages the derived size is at its declared maximum: no second compile moves it
AT_MAXIMUM = HEAD + '''    cap = Size(derived=lambda sz: sz.pages // 2, minimum=1, maximum=2)
    used = requests.var(Int(0, "cap"), init=0)

    @action
    def use(s, r: Request):
        require(s.used[r] < s.cap)
        s.used[r] = s.used[r] + 1
'''


def _fails_explicitly(path: Path, sizes: dict[str, int]) -> bool:
    """A model error (compiling or reachable) or a violation at ``sizes``."""
    try:
        verdicts = run(system_of(path, sizes), "explicit", coverage=False).verdicts
    except ModelError:
        return True
    return any(v.status is Status.VIOLATED for v in verdicts)


@pytest.mark.parametrize("source, where", [(WRITE, {"pages": 8}), (INDEX, {"pages": 10}),
                                           (TWICE, {"pages": 6}), (ZERO, {"pages": 8})])
def test_what_a_derived_size_breaks_elsewhere_is_not_proved_for_every_size(
        tmp_path: Path, source: str, where: dict[str, int]) -> None:
    path = _write(tmp_path, "derived", source)
    (v,) = run(system_of(path, None, ["small"]), "all-sizes", proofs_dir=tmp_path,
               coverage=False).verdicts
    assert v.method != "all sizes", v.headline()
    assert not list(tmp_path.glob("*=all*.json"))
    assert not _fails_explicitly(path, {})
    assert _fails_explicitly(path, where)


def _pinned_lockstep(base: System, other: System, rng: random.Random, states: int) -> int:
    """The reading of ``base`` with the ids and the size symbols of ``other``: every
    concrete step of ``other`` (a model error included) is one of its steps."""
    model = parametric_model(base)
    assert model.sizes is not None
    ids: dict[str, list[z3.ExprRef]] = {}
    universe: list[z3.BoolRef] = list(model.axioms)
    for dim, sort in model.sorts.sort.items():
        n = other.schema.counts.get(dim, 0)
        ids[dim] = [z3.Const(f"{dim}{i}", sort) for i in range(n)]
        nil, x = model.sorts.nil[dim], z3.Const(f"every_{dim}", sort)
        universe += [z3.Distinct(*ids[dim], nil),
                     z3.ForAll([x], z3.Or(*[x == e for e in ids[dim] + [nil]]))]
    universe += [t == other.sizes[n[5:]] for n, t in model.sizes.terms.items()
                 if n.startswith("size.")]

    def term(t, value):  # type: ignore[no-untyped-def]
        if t.kind == "ref":
            return model.sorts.nil[t.ref_dim] if value < 0 else ids[t.ref_dim][value]
        return z3.BoolVal(bool(value)) if t.kind == "bool" else z3.IntVal(int(value))

    def slots(view, state):  # type: ignore[no-untyped-def]
        at = {v.name: v for v in other.schema.vars}
        for v in model.vars:
            w, dims = at[v.name], var_dims(v)
            for i in range(w.length):
                t = view[v.name](ids[dims[0]][i]) if dims else view[v.name]
                yield t == term(w.type, state[w.offset + i])

    init = z3.Solver()
    assert init.check(*universe, *slots(model.init, other.initial)) == z3.sat
    compared = 0
    for _ in range(states):
        state = tuple(rng.choice(t.domain()) for t in other.slot_types())
        for inst in other.instances:
            step = model.steps[[a.name for a in other.actions].index(inst.name)][1]
            s = z3.Solver()
            s.add(*universe, *slots(model.pre_view(), state), *step.param_ok)
            s.add(*[c == term(t, a) for a, (_, t), c in zip(inst.args, inst.action.params,
                                                            step.params)])
            try:
                res = other.step(state, inst)
            except ModelError:
                assert s.check(z3.Or(*[c for c, _ in step.errors])) == z3.sat, inst.label()
                compared += 1
                continue
            s.add(*[z3.Not(c) for c, _ in step.errors])
            s.add(step.enabled == z3.BoolVal(res is not None))
            if res is not None:
                s.add(*slots(step.post, res.state))
            assert s.check() == z3.sat, f"{inst.label()} at {other.sizes}"
            compared += 1
    return compared


def test_the_reading_at_one_size_contains_the_steps_at_others(tmp_path: Path) -> None:
    path = _write(tmp_path, "uses", USES)
    base = system_of(path)
    compared = 0
    for sizes in ({"pages": 2}, {"requests": 3, "pages": 6}, {"requests": 1, "pages": 9},
                  {"pages": 5, "limit": 3}):
        compared += _pinned_lockstep(base, system_of(path, sizes), random.Random(7), 6)
    assert compared > 40


def test_a_proof_with_every_cap_rechecks_where_the_derived_value_differs(
        tmp_path: Path) -> None:
    """`capped` is proved with every cap (and every limit, which cap is computed from);
    `two` is not (violated at six pages). The certificate re-checks, and the explicit
    search agrees, at sizes with other values of cap."""
    path = _write(tmp_path, "uses", USES)
    result = run(system_of(path), "all-sizes", save_proof=True, proofs_dir=tmp_path,
                 coverage=False)
    by = {v.prop: v for v in result.verdicts}
    assert by["capped"].method == "all sizes" and "every cap" in by["capped"].detail
    assert by["two"].method != "all sizes", by["two"].headline()
    assert _fails_explicitly(path, {"pages": 6})
    (cert,) = tmp_path.glob("*requests=all*.json")
    assert "limit=all,cap=all" in cert.name
    for sizes in ({"pages": 2}, {"requests": 3, "pages": 7}, {"pages": 5, "limit": 4}):
        check = check_certificate(cert, system_of(path, sizes))
        assert check.ok and "capped" in check.properties, (sizes, check.problems)
        explicit = run(system_of(path, sizes, ["capped"]), "explicit", coverage=False)
        assert explicit.verdicts[0].status is Status.HOLDS


def test_a_derived_size_at_its_maximum_is_named_with_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "maximum", AT_MAXIMUM)
    line = AT_MAXIMUM.splitlines().index(
        "    cap = Size(derived=lambda sz: sz.pages // 2, minimum=1, maximum=2)") + 1
    (v,) = run(system_of(path, None, ["no-decode-after-rejection"]), "all-sizes",
               proofs_dir=tmp_path, coverage=False).verdicts
    assert v.method != "all sizes"
    assert f"maximum.py:{line}:" in v.detail and "cap=3" in v.detail, v.detail


# under postponed annotations the class-level BOUND names the parameter's range, as the
# compiler reads it: k goes up to cap = requests + 2, beyond the pages from two pages down
SHADOWED = '''from __future__ import annotations

from kvspec import Int, Model, Pages, Requests, Size, action, invariant, require, var

BOUND = "pages"


class Shadowed(Model):
    BOUND = "cap"
    requests = Requests(1)
    pages = Pages(4)
    cap = Size(derived=lambda sz: sz.requests + 2)
    x = var(Int(0, "cap"), init=0)

    @action
    def go(s, k: Int(0, BOUND)):
        require(k <= s.cap)
        s.x = k

    @invariant
    def small(s):
        return s.x <= len(s.pages)
'''


def test_a_parameter_range_is_read_as_the_compiler_resolved_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "shadowed", SHADOWED)
    (v,) = run(system_of(path, None, ["small"]), "all-sizes", save_proof=True,
               proofs_dir=tmp_path, coverage=False).verdicts
    assert v.method != "all sizes", v.headline()
    assert not list(tmp_path.glob("*=all*.json"))
    assert not _fails_explicitly(path, {})
    assert _fails_explicitly(path, {"pages": 2})


def test_each_bound_function_of_a_parameter_is_a_symbol_of_its_own(tmp_path: Path) -> None:
    """Under postponed annotations each action's `Int(0, above(i))` is a new function
    each time it is resolved: eight actions, eight unrelated symbols (one shared would
    tie one parameter's range to another's)."""
    source = SHADOWED.split("BOUND = ")[0] + (
        "def above(n):\n    def bound(sz):\n        return sz['pages'] + n\n    return bound\n"
        "\n\nclass Bounds(Model):\n    requests = Requests(1)\n    pages = Pages(4)\n"
        "    x = var(Int(0, 1), init=0)\n")
    for i in range(8):
        source += (f"\n    @action\n    def a{i}(s, k: Int(0, above({i}))):\n"
                   "        s.x = 1\n")
    model = parametric_model(system_of(_write(tmp_path, "bounds", source), None, []))
    assert model.sizes is not None
    assert len([n for n in model.sizes.terms if n.startswith("bound.")]) == 8
