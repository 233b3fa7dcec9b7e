"""Proofs for every number of requests and pages (``--engine all-sizes``, all-sizes
certificates): what is proved agrees with the explicit engine at several sizes, a
property that fails at a larger size never gets "all sizes", constructs outside the
fragment are named with their line, tampered certificates are rejected, and the
parametric reading of random models agrees step by step with the concrete one."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import z3

from kvspec.lang.errors import ModelError
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.proofs.certificate import check_certificate, certificate_path, invariant_digest
from kvspec.proofs.parametric.values import Unsupported
from kvspec.proofs.parametric.engine import all_sizes_name
from kvspec.proofs.parametric.model import parametric_model
from kvspec.runner import run
from kvspec.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
SINGLE = ROOT / "models" / "single_node.py"

POOL_CAP = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, invariant, require


class PoolCap(Model):
    """Holds while the pool has at most three pages, fails with four."""
    requests = Requests(1)
    pages = Pages(3)
    owner = pages.var(requests.optional, init=None)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r
        emit.alloc(r, p)

    @invariant
    def at_most_three_allocated(s):
        return (s.owner != None).count() <= 3  # noqa: E711
'''

SIZED_TYPE = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require


class Sized(Model):
    requests = Requests(1)
    pages = Pages(2)
    used = requests.var(Int(0, "pages"), init=0)

    @action
    def grow(s, r: Request):
        require(s.used[r] < 1)
        s.used[r] = s.used[r] + 1
'''

SIZED_INIT = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, require


class SizedInit(Model):
    requests = Requests(1)
    pages = Pages(2)
    budget = requests.var(Int(0, 9), init=lambda sizes: [sizes["pages"]] * sizes["requests"])

    @action
    def spend(s, r: Request):
        require(s.budget[r] > 0)
        s.budget[r] = s.budget[r] - 1
'''

# `len(s.requests) >= 4` is folded to False at 2 and at 3 requests (the compiled code is
# the same at both sizes) and decode after reject is allowed from 4 requests on
SIZE_THRESHOLD = '''
from kvspec import Model, Pages, Request, Requests, action, emit, require


class SizeThreshold(Model):
    properties = ("no-decode-after-rejection",)
    requests = Requests(2)
    pages = Pages(2)
    rej = requests.var(bool, init=False)

    @action
    def reject(s, r: Request):
        require(not s.rej[r])
        s.rej[r] = True
        emit.reject(r)

    @action
    def decode(s, r: Request):
        require(not s.rej[r] or len(s.requests) >= 4)
        emit.decode(r)
'''

# the initial value is the same at 2 and at 3 requests and differs from 4 on
INIT_THRESHOLD = SIZE_THRESHOLD.replace(
    "    rej = requests.var(bool, init=False)\n",
    "    rej = requests.var(bool, init=False)\n"
    "    loose = requests.var(bool, init=lambda n: [n['requests'] >= 4] * n['requests'])\n"
).replace("len(s.requests) >= 4", "s.loose[r]")

# the parameter's range is the same at 2 and at 3 requests and grows from 4 on
PARAM_THRESHOLD = SIZE_THRESHOLD.replace(
    "class SizeThreshold", "def top(n):\n    return 1 if n['requests'] < 4 else 5\n\n\n"
    "class SizeThreshold").replace("from kvspec import Model", "from kvspec import Int, Model"
    ).replace("def decode(s, r: Request):", "def decode(s, r: Request, k: Int(0, top)):"
    ).replace("len(s.requests) >= 4", "k == 5")

LOWEST_FREE = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class LowestFree(Model):
    requests = Requests(2)
    pages = Pages(3)
    owner = pages.var(requests.optional, init=None)

    @action
    def take(s, r: Request, p: Page):
        require(s.owner[p] is None)
        require(all(s.owner[q] is not None for q in s.pages if q < p))
        s.owner[p] = r
        emit.alloc(r, p)
'''

# a derived size: a symbol of the reading, unrelated to the pages it is computed from
DERIVED_SIZE = '''
from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, require


class Derived(Model):
    requests = Requests(2)
    pages = Pages(4)
    cap = Size(derived=lambda sz: sz.pages // 2, minimum=1)
    used = requests.var(Int(0, "cap"), init=0)

    @action
    def use(s, r: Request):
        require(s.used[r] < s.cap)
        s.used[r] = s.used[r] + 1
'''

LITERAL_ID = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class Literal(Model):
    requests = Requests(2)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)

    @action
    def take(s, r: Request):
        require(s.owner[0] is None)
        s.owner[0] = r
'''


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return path


def _system(path: Path, sizes: dict[str, int] | None = None) -> System:
    return compile_model(load_model(path), sizes)


@pytest.fixture(scope="module")
def single_node_proof(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    proofs = tmp_path_factory.mktemp("proofs")
    result = run(_system(SINGLE), "all-sizes", save_proof=True, proofs_dir=proofs,
                 coverage=False)
    assert result.exit_code == 0
    for v in result.verdicts:
        assert v.status is Status.PROVED and v.method == "all sizes", v.headline()
        assert re.match(r"PROVED \(all sizes, inductive invariant, \d+ clauses", v.headline())
    (cert,) = proofs.glob("*=all*.json")  # every capacity and max_need too
    assert cert.name == all_sizes_name(result.system, ["capacity", "max_need"])
    return proofs, cert


@pytest.mark.parametrize("sizes", [{"requests": 1, "pages": 2}, {"requests": 3, "pages": 3},
                                   {"requests": 2, "pages": 6}])
def test_all_sizes_proof_agrees_with_explicit_search(single_node_proof: tuple[Path, Path],
                                                     sizes: dict[str, int]) -> None:
    _, cert = single_node_proof
    system = _system(SINGLE, sizes)
    check = check_certificate(cert, system)
    assert check.ok, check.problems
    assert check.kind == "all-sizes"
    explicit = run(system, "explicit", coverage=False)
    assert all(v.status is Status.HOLDS for v in explicit.verdicts)
    assert sorted(check.properties) == sorted(v.prop for v in explicit.verdicts)


def test_auto_uses_an_all_sizes_certificate_at_another_size(
        single_node_proof: tuple[Path, Path]) -> None:
    proofs, cert = single_node_proof
    system = _system(SINGLE, {"requests": 4, "pages": 7})
    assert certificate_path(system, proofs) == cert
    result = run(system, "auto", proofs_dir=proofs, coverage=False)
    assert result.exit_code == 0
    for v in result.verdicts:
        assert v.headline() == "PROVED (certificate re-checked, all sizes)"


def test_a_property_that_fails_in_a_larger_pool_is_not_proved_for_all_sizes(
        tmp_path: Path) -> None:
    path = _write(tmp_path, "pool_cap", POOL_CAP)
    small = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False)
    (v,) = [v for v in small.verdicts if v.prop == "at-most-three-allocated"]
    assert v.status is Status.PROVED and v.method != "all sizes"
    assert "not for all sizes" in v.detail
    bigger = run(_system(path, {"pages": 4}), "explicit", coverage=False)
    (w,) = [w for w in bigger.verdicts if w.prop == "at-most-three-allocated"]
    assert w.status is Status.VIOLATED


@pytest.mark.parametrize("source, line, words", [
    (LITERAL_ID, 12, "literal"),
    (LOWEST_FREE, 13, "compared by order"),
    (SIZED_INIT, 8, "initial value of budget depends on the number of ids"),
    (SIZE_THRESHOLD, 19, "len() of an id space where its value is decided at compile time"),
    (INIT_THRESHOLD, 10, "initial value of loose is computed from the sizes"),
])
def test_constructs_outside_the_fragment_are_named_with_their_line(
        tmp_path: Path, source: str, line: int, words: str) -> None:
    path = _write(tmp_path, "outside", source)
    with pytest.raises(Unsupported) as info:
        parametric_model(_system(path))
    assert info.value.where.endswith(f"outside.py:{line}"), str(info.value)
    assert words in str(info.value)
    result = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False)
    for v in result.verdicts:
        assert v.method != "all sizes"
        if v.status is not Status.VIOLATED:
            assert f"outside.py:{line}" in v.detail


def _tamper(cert: Path, tmp_path: Path, edit, rehash: bool = True) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(cert.read_text())
    edit(doc)
    inv = doc["invariant"]
    if rehash:
        inv["sha256"] = invariant_digest(inv["smtlib2"], inv["readable"])
    out = tmp_path / cert.name
    out.write_text(json.dumps(doc))
    return out


def _drop_property_clauses(doc: dict) -> None:  # type: ignore[type-arg]
    inv = doc["invariant"]
    lines = inv["smtlib2"].splitlines()
    keep, labels = [], []
    for i, line in enumerate(lines):
        if line.startswith("(assert") and "violated:" in line:
            keep.pop()  # its comment
            continue
        keep.append(line)
    for label in inv["readable"]:
        if "violated:" not in label:
            labels.append(label)
    inv["smtlib2"] = "\n".join(keep) + "\n"
    inv["readable"] = labels
    inv["clauses"] = len(labels)


@pytest.mark.parametrize("edit, rehash, reason", [
    (lambda d: d["invariant"].update(smtlib2=d["invariant"]["smtlib2"] + "(assert true)\n"),
     False, "checksum"),
    (_drop_property_clauses, True, "does not exclude violations"),
    (lambda d: d["invariant"].update(smtlib2=d["invariant"]["smtlib2"].replace(
        "(declare-sort Page 0)", "(declare-sort Page 0)\n(push 1)")), True, "push"),
    (lambda d: d["sizes"].update(capacity=3), True, "every number of requests and pages"),
    (lambda d: d["invariant"].update(smtlib2=d["invariant"]["smtlib2"].replace(
        "(declare-sort Page 0)", "(declare-sort Page 0)\n(declare-fun sneaky () Bool)")), True,
     "does not match"),
])
def test_tampered_all_sizes_certificates_are_rejected(
        single_node_proof: tuple[Path, Path], tmp_path: Path, edit, rehash: bool,  # type: ignore[no-untyped-def]
        reason: str) -> None:
    _, cert = single_node_proof
    bad = _tamper(cert, tmp_path, edit, rehash)
    check = check_certificate(bad, _system(SINGLE))
    assert not check.ok
    assert any(reason in p for p in check.problems), check.problems


def _cross_check(path: Path, sizes: list[dict[str, int]], tmp_path: Path) -> None:
    """The all-sizes proof of a shipped model, re-checked and compared with the explicit
    engine at other sizes."""
    result = run(_system(path), "all-sizes", save_proof=True, proofs_dir=tmp_path,
                 coverage=False)
    proved = [v.prop for v in result.verdicts if v.method == "all sizes"]
    assert proved and result.exit_code == 0
    (cert,) = tmp_path.glob("*=all*.json")
    for size in sizes:
        system = _system(path, size)
        check = check_certificate(cert, system)
        assert check.ok, (size, check.problems)
        explicit = {v.prop: v.status for v in run(system, "explicit", coverage=False).verdicts}
        assert all(explicit[p] is Status.HOLDS for p in check.properties), (size, explicit)


def test_vllm_fixed_all_sizes_proof_agrees_with_explicit_search(tmp_path: Path) -> None:
    _cross_check(ROOT / "models" / "vllm_async_load_fixed.py",
                 [{"requests": 3, "pages": 3}, {"requests": 2, "pages": 5},
                  {"requests": 1, "pages": 1}], tmp_path)


@pytest.mark.slow
def test_patched_all_sizes_proof_agrees_with_explicit_search(tmp_path: Path) -> None:
    _cross_check(ROOT / "models" / "patched.py",
                 [{"requests": 1, "pages": 5}, {"requests": 3, "pages": 3}], tmp_path)


def test_verify_all_sizes_from_the_command_line(tmp_path: Path) -> None:
    import io

    from kvspec.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", str(SINGLE), "--engine", "all-sizes", "--json"], out, err)
    assert code == 0, err.getvalue()
    doc = json.loads(out.getvalue())
    assert doc["engine"] == "all-sizes"
    assert {v["method"] for v in doc["verdicts"]} == {"all sizes"}
    out = io.StringIO()
    code = main(["verify", str(_write(tmp_path, "outside", LITERAL_ID)), "--engine",
                 "all-sizes"], out, err)
    assert "not for all sizes" in out.getvalue() and "outside.py:12" in out.getvalue()


def test_size_specific_certificates_keep_their_kind() -> None:
    system = _system(SINGLE)
    path = ROOT / "proofs" / "single_node.SingleNode.requests=2,pages=4,capacity=2,max_need=3.json"
    check = check_certificate(path, system)
    assert check.ok and check.kind == "size-specific"


# -- the parametric reading agrees with the concrete one, step by step ----------------------

def _finite_universe(model, system: System):  # type: ignore[no-untyped-def]
    """Constraints pinning the sorts to the system's ids, and the id terms."""
    from kvspec.lang.types import PAGE, REQUEST

    out, ids = [], {}
    for dim in (REQUEST, PAGE):
        n = system.schema.counts.get(dim, 0)
        elems = [z3.Const(f"{dim}{i}", model.sorts.sort[dim]) for i in range(n)]
        nil = model.sorts.nil[dim]
        ids[dim] = elems
        out.append(z3.Distinct(*elems, nil) if elems else z3.BoolVal(True))
        x = z3.Const(f"all_{dim}", model.sorts.sort[dim])
        out.append(z3.ForAll([x], z3.Or(*[x == e for e in elems + [nil]])))
    return out, ids


def _term(model, ids, t, value):  # type: ignore[no-untyped-def]
    if t.kind == "ref" and t.ref_dim in ids:
        return model.sorts.nil[t.ref_dim] if value < 0 else ids[t.ref_dim][value]
    if t.kind == "bool":
        return z3.BoolVal(bool(value))
    return z3.IntVal(int(value))


def _slots(model, system, ids, view):  # type: ignore[no-untyped-def]
    """(slot offset, term of the view's value there) for every slot (a variable over an
    index space: one symbol per index, each a run of slots)."""
    from kvspec.proofs.parametric.values import var_dims

    for v in model.vars:
        dims = var_dims(v)
        for i in range(v.length):
            if not dims:
                term = view[v.name]
            elif len(dims) == 2:
                p, r = divmod(i, v.row)
                term = view[v.name](ids[dims[0]][p], ids[dims[1]][r])
            else:
                term = view[v.name](ids[dims[0]][i])
            yield v.offset + i, v.type, term


def _lockstep(system: System, rng: random.Random, states: int, per_state: int = 4) -> int:
    """Random states and action instances: the parametric step is the concrete one —
    or, where the reading over-approximates, the concrete step is one of its steps
    (with some choice of the values it leaves open). The number of steps compared."""
    from kvspec.lang.errors import ModelError

    model = parametric_model(system)
    universe, ids = _finite_universe(model, system)
    sizes = model.sizes
    assert sizes is not None
    universe += [t == sizes.values[n] for n, t in sizes.terms.items()] + model.axioms
    compared = 0
    for _ in range(states):
        state = tuple(rng.choice(t.domain()) for t in system.slot_types())
        pre = [term == _term(model, ids, t, state[k])
               for k, t, term in _slots(model, system, ids, model.pre_view())]
        for inst in rng.sample(system.instances, min(per_state, len(system.instances))):
            try:
                res = system.step(state, inst)
            except ModelError:
                continue
            k = [a.name for a in system.actions].index(inst.name)
            step = model.steps[k][1]
            s = z3.Solver()
            s.set("timeout", 20000)
            s.add(*universe, *pre, *step.param_ok)
            for val, (_, t), c in zip(inst.args, inst.action.params, step.params):
                s.add(c == _term(model, ids, t, val))
            if model.approximations:
                s.add(*[z3.Not(c) for c, _ in step.errors])
                s.add(step.enabled == z3.BoolVal(res is not None))
                if res is not None:
                    s.add(*[term == _term(model, ids, t, res.state[k2])
                            for k2, t, term in _slots(model, system, ids, step.post)])
                assert s.check() == z3.sat, \
                    f"{inst.label()}: the concrete step is not one of the parametric steps"
                compared += 1
                continue
            s.add(z3.Not(z3.And(*[z3.Not(c) for c, _ in step.errors])) if step.errors
                  else z3.BoolVal(False))
            if s.check() != z3.unsat:
                continue  # the parametric step reports a model error here: not compared
            s = z3.Solver()
            s.set("timeout", 20000)
            s.add(*universe, *pre, *step.param_ok)
            for val, (_, t), c in zip(inst.args, inst.action.params, step.params):
                s.add(c == _term(model, ids, t, val))
            enabled = res is not None
            assert s.check(z3.Not(step.enabled == z3.BoolVal(enabled))) == z3.unsat, \
                f"{inst.label()}: enabledness differs"
            if res is None:
                continue
            for k2, t, term in _slots(model, system, ids, step.post):
                want = _term(model, ids, t, res.state[k2])
                assert s.check(term != want) == z3.unsat, \
                    f"{inst.label()}: slot {k2} differs from the concrete step"
            compared += 1
    return compared


@pytest.mark.parametrize("path", [SINGLE, ROOT / "models" / "patched.py"])
def test_parametric_steps_match_concrete_steps_on_shipped_models(path: Path) -> None:
    system = _system(path, {"requests": 2, "pages": 3})
    assert _lockstep(system, random.Random(1), 6) > 0


def _random_models(tmp_path: Path, seeds: range, verdicts: bool = True) -> tuple[int, int]:
    """Each random model is outside the fragment (with a line) or steps like the concrete
    model; with ``verdicts``, what the all-sizes engine proves is never violated in the
    explicit search at its size and at a larger one."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from modelgen import random_model

    from kvspec.lang.errors import ModelError

    accepted = rejected = 0
    for seed in seeds:
        gen = random_model(seed, small=True)
        path = _write(tmp_path, f"gen{seed}", gen.source)
        sizes = {"requests": min(gen.requests, 2), "pages": min(gen.pages, 3)}
        try:
            system = compile_model(load_model(path, gen.class_name), sizes)
        except Exception:  # noqa: BLE001 - a generated model the compiler refuses
            continue
        try:
            _lockstep(system, random.Random(seed), 3)
        except Unsupported as exc:
            assert re.search(r"\.py:\d+", exc.where), str(exc)
            rejected += 1
            continue
        accepted += 1
        if not verdicts:
            continue
        try:
            res = run(system, "all-sizes", proofs_dir=tmp_path, coverage=False, timeout=120)
        except ModelError:
            continue
        proved = [v.prop for v in res.verdicts if v.method == "all sizes"]
        for more in (0, 1):
            bigger = {k: v + more for k, v in sizes.items() if k in system.sizes}
            try:
                other = compile_model(load_model(path, gen.class_name), bigger)
                explicit = run(other, "explicit", coverage=False, max_states=20_000)
            except ModelError:
                assert not proved, f"seed {seed}: proved for all sizes, but a model error"
                continue
            status = {v.prop: v.status for v in explicit.verdicts}
            for name in proved:  # UNKNOWN: the search hit max_states, nothing to compare
                assert status[name] is not Status.VIOLATED, (seed, name, bigger, gen.source)
    return accepted, rejected


def test_random_models_are_rejected_with_a_line_or_step_like_the_concrete_model(
        tmp_path: Path) -> None:
    accepted, rejected = _random_models(tmp_path, range(16))
    assert accepted >= 1 and rejected >= 1


@pytest.mark.slow
def test_many_random_models_step_like_the_concrete_model(tmp_path: Path) -> None:
    accepted, _ = _random_models(tmp_path, range(16, 96))
    assert accepted >= 5


def test_a_derived_size_is_read_as_every_value_of_it(tmp_path: Path) -> None:
    """`cap = pages // 2` is read as a symbol of its own (every value, a superset of the
    real ones): the proof says `every cap`, and its certificate re-checks where the
    function gives another cap."""
    path = _write(tmp_path, "derived", DERIVED_SIZE)
    result = run(_system(path), "all-sizes", save_proof=True, proofs_dir=tmp_path,
                 coverage=False)
    assert result.verdicts and all(v.method == "all sizes" and "every cap" in v.detail
                                   for v in result.verdicts), \
        [v.headline() for v in result.verdicts]
    (cert,) = tmp_path.glob("*requests=all*.json")
    assert "cap=all" in cert.name
    for sizes in ({"pages": 2}, {"pages": 9}, {"requests": 3, "pages": 6}):
        assert check_certificate(cert, _system(path, sizes)).ok, sizes
    again = run(_system(path, {"pages": 6}), "auto", proofs_dir=tmp_path, coverage=False)
    assert {v.headline() for v in again.verdicts} == {
        "PROVED (certificate re-checked, all sizes)"}  # found under cap=all


def test_a_bound_function_reads_the_sizes_by_name_or_says_where_it_failed(
        tmp_path: Path) -> None:
    source = DERIVED_SIZE.replace('Int(0, "cap")', "Int(0, lambda sz: sz.cap)")
    system = _system(_write(tmp_path, "bound", source), {"pages": 6})
    assert system.sizes["cap"] == 3
    broken = _write(tmp_path, "broken", source.replace("sz.cap)", "sz.nope)"))
    with pytest.raises(ModelError, match=r"bound function failed: AttributeError: no size "
                                         r"named 'nope'") as info:
        _system(broken)
    assert info.value.line == 9  # the declaration of `used`


# decode after reject is allowed once the derived cap reaches 3 (from six pages on); at
# four pages the compiler folds the guard's `s.cap >= 3` away
DERIVED_THRESHOLD = SIZE_THRESHOLD.replace(
    "    rej = requests.var(bool, init=False)\n",
    "    rej = requests.var(bool, init=False)\n"
    "    cap = Size(derived=lambda sz: sz.pages // 2, minimum=1)\n").replace(
    "from kvspec import Model", "from kvspec import Size, Model").replace(
    "pages = Pages(2)", "pages = Pages(4)").replace("len(s.requests) >= 4", "s.cap >= 3")


def test_a_threshold_on_a_derived_size_is_not_proved_for_every_size(tmp_path: Path) -> None:
    path = _write(tmp_path, "threshold", DERIVED_THRESHOLD)
    assert "s.cap >= 3" in DERIVED_THRESHOLD
    (v,) = run(_system(path), "all-sizes", proofs_dir=tmp_path, coverage=False).verdicts
    assert v.status is Status.PROVED and v.method != "all sizes", v.headline()
    (w,) = run(_system(path, {"pages": 6}), "explicit", coverage=False).verdicts
    assert w.status is Status.VIOLATED
