"""The closed modelling language: models a user would write, each either interpreted
identically by every engine or rejected with file:line.

Each case here is a model that once printed a wrong verdict (a base-class body
checked instead of the override, a plain function the symbolic side did not see,
symmetry accepted where ids were not opaque, element-wise array comparison read as
all-false, ...). Verdicts are compared across the explicit engine (symmetry on and
off), BMC, k-induction and PDR.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, system_of

from kvspec.engines.bmc import run_bmc
from kvspec.engines.explicit import explore
from kvspec.engines.kind import run_kind
from kvspec.engines.pdr import run_pdr
from kvspec.lang.errors import ModelError
from kvspec.lang.symmetry import analyse_symmetry
from kvspec.verdict import Status

HEAD = ("import enum\n"
        "from kvspec import Int, Model, Page, Pages, Request, Requests, Size, action, emit, "
        "invariant, require, var\n")


def verdicts(path: Path, **kw: object) -> dict[str, dict[str, object]]:
    """property -> engine -> ('violated', length) / 'holds' / 'unknown'."""
    out: dict[str, dict[str, object]] = {}

    def put(engine: str, outcome: object) -> None:
        for v in outcome.verdicts:  # type: ignore[attr-defined]
            if v.status is Status.VIOLATED:
                got: object = ("violated", len(v.trace))
            elif v.status in (Status.HOLDS, Status.PROVED):
                got = "holds"
            else:
                got = "unknown"
            out.setdefault(v.prop, {})[engine] = got

    put("explicit", explore(system_of(path, **kw)))  # type: ignore[arg-type]
    put("explicit-nosym", explore(system_of(path, **kw), symmetry=False))  # type: ignore
    put("bmc", run_bmc(system_of(path, **kw), depth=12, timeout=120))  # type: ignore
    put("kind", run_kind(system_of(path, **kw), max_k=12, timeout=120))  # type: ignore
    put("pdr", run_pdr(system_of(path, **kw), timeout=120, save_proof=False,  # type: ignore
                       proofs_dir=path.parent / "proofs"))
    return out


def assert_agree(table: dict[str, dict[str, object]]) -> None:
    for prop, by_engine in table.items():
        ref = by_engine["explicit-nosym"]
        for engine, got in by_engine.items():
            if engine == "bmc" and ref == "holds":
                assert got == "holds", (prop, by_engine)  # bounded, printed as such
            elif engine == "kind" and ref == "holds":
                assert got in ("holds", "unknown"), (prop, by_engine)
            else:
                assert got == ref, (prop, engine, by_engine)


# -- 1. subclass overrides ----------------------------------------------------------------

SUBCLASS = HEAD + '''
class Base(Model):
    """The buggy design."""
    requests = Requests(1)
    x = var(Int(0, 3), init=0)

    @action
    def step(s, r: Request):
        """Base step: may reach 2."""
        require(s.x < 3)
        s.x = s.x + 1

    @invariant
    def small(s):
        return s.x < 2


class Fixed(Base):
    """The fixed design."""

    @action
    def step(s, r: Request):
        """Fixed step: stops at 1."""
        require(s.x < 1)
        s.x = s.x + 1


class Undecorated(Base):
    def step(s, r: Request):
        require(s.x < 1)
        s.x = s.x + 1
'''


def test_an_overriding_action_is_the_one_checked(write_model) -> None:
    path = write_model(SUBCLASS)
    from kvspec.lang.loader import load_model
    from kvspec.lang.system import compile_model
    base = explore(compile_model(load_model(path, "Base")))
    fixed = explore(compile_model(load_model(path, "Fixed")))
    undecorated = explore(compile_model(load_model(path, "Undecorated")))
    def small(out: object) -> Status:
        return {v.prop: v.status for v in out.verdicts}["small"]  # type: ignore[attr-defined]

    assert small(base) is Status.VIOLATED
    assert small(fixed) is Status.HOLDS
    assert small(undecorated) is Status.HOLDS
    shown = run_cli("show", str(path), "--model-class", "Fixed")
    assert "Fixed step" in shown.out and "Base step" not in shown.out
    for engine in ("bmc", "pdr"):
        r = run_cli("verify", str(path), "--model-class", "Fixed", "--engine", engine)
        assert r.code in (0, 3) and "VIOLATED" not in r.out, r.out


# -- 2. plain functions are checked and lowered like everything else --------------------------

PLAIN_FN = HEAD + '''
def is_zero(x):
    return x == 0


class M(Model):
    requests = Requests(1)
    x = var(Int(0, 2), init=0)
    bad = var(bool, init=False)

    @action
    def go(s, r: Request):
        require(is_zero(s.x))
        s.bad = True

    @invariant
    def never_bad(s):
        return not s.bad
'''


def test_an_undecorated_module_function_means_the_same_to_every_engine(write_model) -> None:
    table = verdicts(write_model(PLAIN_FN))
    assert table["never-bad"]["explicit"] == ("violated", 1)
    assert_agree(table)


EARLY_TRUE = HEAD + '''
def can_go(s, r):
    if s.x[r] == 2:
        return True
    return s.x[r] == 0


class M(Model):
    requests = Requests(1)
    x = requests.var(Int(0, 3), init=0)

    @action
    def go(s, r: Request):
        require(can_go(s, r))
        s.x[r] = s.x[r] + 1

    @invariant
    def below_three(s):
        return all(s.x[r] < 3 for r in s.requests)
'''


def test_helper_with_early_return_is_encoded_exactly(write_model) -> None:
    table = verdicts(write_model(EARLY_TRUE))
    assert_agree(table)


FALLS_OFF = HEAD + '''
def can_go(s, r):
    if s.x[r] == 0:
        return True


class M(Model):
    requests = Requests(1)
    x = requests.var(Int(0, 3), init=0)

    @action
    def go(s, r: Request):
        require(can_go(s, r))
        s.x[r] = s.x[r] + 1
'''


def test_a_function_that_can_fall_off_its_end_is_rejected(write_model) -> None:
    path = write_model(FALLS_OFF)
    r = run_cli("verify", str(path))
    assert r.code == 2 and f"{path.name}:5:" in r.err and "without returning" in r.err, r.err


# -- 3. symmetry is decided by typing, never by sampling ------------------------------------------

SYM_BASE = HEAD + '''
class M(Model):
    requests = Requests(3)
    pages = Pages(3)
    n = Size(1)
    k = var(Int(0, 3), init=0)
    owner = pages.var(requests.optional, init=None)
    mark = requests.var(bool, init=False)

{helpers}
    @action
    def go(s, r: Request, p: Page):
        require(s.owner[p] is None and not s.mark[r])
{body}

    @invariant
    def inv(s):
        return not (s.mark[0] and s.mark[1])
'''


def sym_model(body: str, helpers: str = "") -> str:
    return SYM_BASE.format(helpers=helpers, body="\n".join("        " + line
                                                           for line in body.splitlines()))


SYMMETRY_BREAKERS = {
    "arithmetic on an id in a helper": (
        "s.owner[p] = r\ns.mark[nxt(r)] = True",
        "def nxt(r):\n    return (r + 1) % 3\n", "request", "arithmetic"),
    "id compared with an Int variable": (
        "s.owner[p] = r\nif r == s.k:\n    s.mark[r] = True", "", "request", "compared with an int"),
    "id compared with a size": (
        "s.owner[p] = r\nif r == s.n:\n    s.mark[r] = True", "", "request", "compared with a"),
    "literal id via in": (
        "s.owner[p] = r\nif r in (0,):\n    s.mark[r] = True", "", "request", "literal"),
    "first free page with break": (
        "for q in s.pages:\n    if s.owner[q] is None:\n        s.owner[q] = r\n        break\n"
        "s.mark[r] = True", "", "page", "break"),
}


@pytest.mark.parametrize("case", sorted(SYMMETRY_BREAKERS))
def test_non_opaque_ids_switch_symmetry_off_with_the_reason(case: str, write_model) -> None:
    body, helpers, dim, why = SYMMETRY_BREAKERS[case]
    source = sym_model(body)
    if helpers:
        source = source.replace("class M(Model):", helpers + "\n\nclass M(Model):")
    path = write_model(source)
    report = analyse_symmetry(system_of(path))
    on = report.requests if dim == "request" else report.pages
    assert not on, report.reasons
    assert any(why in reason for reason in report.reasons), report.reasons
    reduced = explore(system_of(path))
    full = explore(system_of(path), symmetry=False)
    assert [(v.prop, v.status, len(v.trace) if v.trace else None) for v in reduced.verdicts] == \
        [(v.prop, v.status, len(v.trace) if v.trace else None) for v in full.verdicts]


def test_opaque_ids_keep_symmetry(write_model) -> None:
    path = write_model(sym_model("s.owner[p] = r\nif (s.owner == r).count() >= 1:\n"
                                 "    s.mark[r] = True"))
    report = analyse_symmetry(system_of(path))
    assert report.requests is False  # the invariant names r0 and r1 (literal ids)
    assert report.pages, report.reasons


def test_truthiness_of_an_optional_id_is_rejected(write_model) -> None:
    path = write_model(sym_model("if not s.owner[p]:\n    s.owner[p] = r"))
    r = run_cli("verify", str(path))
    assert r.code == 2 and "`x is None`" in r.err and f"{path.name}:" in r.err, r.err


def test_no_symmetry_flag_is_honoured_by_every_engine(write_model) -> None:
    path = write_model(sym_model("s.owner[p] = r\ns.mark[r] = True"))
    for engine in ("explicit", "bmc", "kind"):
        r = run_cli("verify", str(path), "--engine", engine, "--no-symmetry", "--json")
        assert r.code in (1, 3), r.out + r.err


# -- 4. element-wise comparison of two arrays -------------------------------------------------

ARRAY_VS_ARRAY = HEAD + '''
class M(Model):
    requests = Requests(2)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)
    wr = pages.var(requests.optional, init=None)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r

    @action
    def write(s, r: Request, p: Page):
        require(s.owner[p] == r)
        s.wr[p] = r

    @invariant
    def consistent(s):
        return not (s.owner != s.wr).any()
'''


def test_element_wise_array_comparison(write_model) -> None:
    table = verdicts(write_model(ARRAY_VS_ARRAY))
    assert table["consistent"]["explicit"] == ("violated", 1)
    assert_agree(table)


# -- 5, 6, 16: rejected with file:line --------------------------------------------------------

REJECTED = {
    "invariant named like a library property": (
        "@invariant\n    def no_read_beyond_written(s):\n        return True\n",
        "has the name of the library property"),
    "power with a state exponent": (
        "@action\n    def f(s, r: Request):\n        s.x = 2 ** s.x\n", "constant exponent"),
    "second page space": (
        "spages = Pages(2)\n", "declares Pages(...) twice"),
    "recursion": (
        "@action\n    def f(s, r: Request):\n        s.x = rec(s.x)\n", "recursive call"),
    "while": ("@action\n    def f(s, r: Request):\n        while s.x < 2:\n            s.x += 1\n",
              "`while` loops"),
    "bool arithmetic": ("@action\n    def f(s, r: Request):\n        s.x = s.flag + 1\n",
                        "arithmetic"),
    "unbound local": ("@action\n    def f(s, r: Request):\n        if s.flag:\n            y = 1\n"
                      "        s.x = y\n", "may be used before it is assigned"),
    "mutable global": ("@action\n    def f(s, r: Request):\n        s.x = TABLE[0]\n",
                       "module-level list"),
    "call into a library": ("@action\n    def f(s, r: Request):\n        s.x = math.floor(1)\n",
                            "not part of the model"),
    "mutating a non-state object": ("@action\n    def f(s, r: Request):\n        TABLE.append(1)\n",
                                    "module-level list"),
    "enum arithmetic": ("@action\n    def f(s, r: Request):\n        s.x = Color.RED + 1\n",
                        "arithmetic"),
    "array vs array of different spaces": (
        "@invariant\n    def bad(s):\n        return (s.own == s.ready).any()\n",
        "different id spaces"),
}

REJECT_MODEL = HEAD + '''import math
TABLE = [1, 2]


class Color(enum.IntEnum):
    RED = 0
    BLUE = 1


def rec(x):
    return rec(x)


class M(Model):
    requests = Requests(2)
    pages = Pages(2)
    x = var(Int(0, 3), init=0)
    flag = var(bool, init=False)
    own = pages.var(requests.optional, init=None)
    ready = requests.var(bool, init=False)

    @action
    def noop(s, r: Request):
        s.flag = True

    {extra}'''


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_constructs_outside_the_grammar_are_rejected(case: str, write_model) -> None:
    extra, fragment = REJECTED[case]
    path = write_model(REJECT_MODEL.format(extra=extra))
    r = run_cli("verify", str(path))
    assert r.code == 2, (case, r.out, r.err)
    assert fragment in r.err, (case, r.err)
    assert f"{path.name}:" in r.err and "Traceback" not in r.err, r.err
    with pytest.raises(ModelError):
        system_of(path)


# -- 9. the documented invariant form keeps page symmetry -----------------------------------------

DOC_INVARIANT = HEAD + '''
class M(Model):
    requests = Requests(2)
    pages = Pages(3)
    owner = pages.var(requests.optional, init=None)
    inflight = pages.var(requests.optional, init=None)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r

    @action
    def post(s, r: Request, p: Page):
        require(s.owner[p] == r and s.inflight[p] is None)
        s.inflight[p] = r

    @invariant
    def writes_into_own_pages(s):
        return all(s.inflight[p] is None or s.inflight[p] == s.owner[p] for p in s.pages)
'''


def test_documented_invariant_form_keeps_page_symmetry(write_model) -> None:
    report = analyse_symmetry(system_of(write_model(DOC_INVARIANT)))
    assert report.pages and report.requests, report.reasons


# -- supported habits: comprehension with a condition, tuple domains, min/max, IntEnum ------------

HABITS = HEAD + '''
class Phase(enum.IntEnum):
    NEW = 0
    RUN = 1
    DONE = 2


def busy(s, p):
    return s.owner[p] is not None


class M(Model):
    requests = Requests(2)
    pages = Pages(3)
    phase = requests.var(Phase, init=Phase.NEW)
    owner = pages.var(requests.optional, init=None)
    used = var(Int(0, 3), init=0)

    @action
    def take(s, r: Request, p: Page):
        require(s.phase[r] in (Phase.NEW, Phase.RUN) and not busy(s, p))
        s.owner[p] = r
        s.phase[r] = Phase.RUN
        s.used = min(3, sum(1 for q in s.pages if busy(s, q)))

    @action
    def done(s, r: Request):
        require(s.phase[r] == Phase.RUN)
        s.owner[s.owner == r] = None
        s.phase[r] = Phase.DONE
        s.used = max(0, s.used - 1)

    @invariant
    def used_counts_pages(s):
        return s.used >= sum(1 for p in s.pages if s.owner[p] is not None) - 3
'''


def test_ordinary_python_habits_are_supported_by_every_engine(write_model) -> None:
    assert_agree(verdicts(write_model(HABITS)))


def test_library_functions_called_outside_a_model_say_so() -> None:
    from kvspec import require
    with pytest.raises(ModelError, match="only has a meaning inside a model body"):
        require(True)


# -- symmetry sees through helpers; effects of calls in value position count -----------------

HELPER_READ = 'from kvspec import Int, Model, Request, Requests, action, invariant, require, var\n\n\ndef total(s):\n    return sum(s.n[k] for k in s.requests)\n\n\nclass M(Model):\n    requests = Requests(2)\n    n = requests.var(Int(0, 3), init=0)\n    mixed = var(bool, init=False)\n    ticks = var(Int(0, 20), init=0)   # only there to get past the sampled symmetry check\n\n    @action\n    def tick(s):\n        require(s.ticks < 20)\n        s.ticks = s.ticks + 1\n\n    @action\n    def put(s, r: Request):\n        require((s.n == 0).all())\n        s.n[r] = 1\n\n    @action\n    def mix(s):\n        require(not s.mixed and s.ticks == 20)\n        s.mixed = True\n        for q in s.requests:              # order-dependent: total() reads n, which the loop writes\n            s.n[q] = min(total(s), 3)\n\n    @invariant\n    def not_both_one(s):\n        return not all(s.n[q] == 1 for q in s.requests)\n'

EFFECT_IN_EXPRESSION = 'from kvspec import Int, Model, Page, Pages, Request, Requests, action, invariant, require, var\n\n\ndef take(s, p, r):\n    if s.owner[p] is None and not s.taken:\n        s.owner[p] = r\n        s.taken = True\n    return True\n\n\nclass M(Model):\n    requests = Requests(1)\n    pages = Pages(2)\n    owner = pages.var(requests.optional, init=None)\n    poisoned = pages.var(bool, init=False)\n    taken = var(bool, init=False)\n    ticks = var(Int(0, 20), init=0)   # only there to get past the sampled symmetry check\n\n    @action\n    def tick(s):\n        require(s.ticks < 20)\n        s.ticks = s.ticks + 1\n\n    @action\n    def poison(s, p: Page):\n        require(not s.poisoned.any() and s.ticks == 20)\n        s.poisoned[p] = True\n\n    @action\n    def alloc(s, r: Request):\n        for p in s.pages:                 # lowest free page first: order-dependent\n            ok = take(s, p, r)            # called for its effects, in expression position\n\n    @invariant\n    def never_on_clean_page(s):\n        return not (s.poisoned.any() and any(s.owner[p] is not None and not s.poisoned[p] for p in s.pages))\n'

INVARIANT_WITH_EFFECT = 'from kvspec import Int, Model, Request, Requests, action, invariant, require, var\n\n\ndef bump(s):\n    s.x = 1\n    return True\n\n\nclass M(Model):\n    requests = Requests(1)\n    x = var(Int(0, 1), init=0)\n\n    @action\n    def a(s, r: Request):\n        require(s.x == 0)\n\n    @invariant\n    def inv(s):\n        return bump(s)     # an invariant that writes the state, through a call in expression position\n'


@pytest.mark.parametrize("source", [HELPER_READ, EFFECT_IN_EXPRESSION],
                         ids=["read-in-helper", "effect-in-expression"])
def test_order_dependence_hidden_in_helpers_turns_symmetry_off(source: str, write_model) -> None:
    path = write_model(source)
    reduced = explore(system_of(path))
    full = explore(system_of(path), symmetry=False)
    assert [(v.prop, v.status, len(v.trace) if v.trace else None) for v in reduced.verdicts] == \
        [(v.prop, v.status, len(v.trace) if v.trace else None) for v in full.verdicts]
    assert any(v.status is Status.VIOLATED for v in full.verdicts)


def test_an_invariant_calling_a_function_with_effects_is_rejected(write_model) -> None:
    path = write_model(INVARIANT_WITH_EFFECT)
    r = run_cli("verify", str(path))
    assert r.code == 2 and "read-only" in r.err and f"{path.name}:" in r.err, r.err


GUARD_WITH_EFFECTS = 'from kvspec import Int, Model, Request, Requests, action, invariant, require, var\n\ndef bump(s):\n    s.x = s.x + 1\n    return s.x < 3\n\nclass M(Model):\n    requests = Requests(2)\n    x = var(Int(0, 5), init=0)\n\n    @action\n    def go(s, r: Request):\n        require(bump(s))\n\n    @invariant\n    def small(s):\n        return s.x < 3\n'


def test_a_guard_calling_a_function_with_effects(write_model) -> None:
    """A failing require discards the writes made before it, in every engine."""
    table = verdicts(write_model(GUARD_WITH_EFFECTS))
    assert table["small"]["explicit"] == "holds"
    assert_agree(table)
