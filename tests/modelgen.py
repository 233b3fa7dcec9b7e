"""Random *valid* kvspec models, for differential testing.

:func:`models` is a Hypothesis strategy; :func:`random_model` draws the same
models from a :class:`random.Random` (for coverage statistics and quick
reproduction). Both drive one generator, :class:`ModelGen`, through a
*chooser* (``int``/``choice``/``chance``), so a Hypothesis-drawn model shrinks
towards fewer variables, fewer statements and the first (simplest) production.

Every construct of the model grammar (``docs/modelling.md``, ``kvspec/lang/ir.py``)
is generated somewhere:

* sizes (``Requests``, ``Pages``, ``Size``), module and class constants, enums;
* scalar / per-request / per-page state of every type (bool, ``Int`` with bounds
  that may name a size, Enum, optional request and page ids, a plain request id),
  uniform or per-element initial values;
* actions with 0-3 parameters (``Request``, ``Page``, ``Int(lo, hi)``, ``bool``,
  an Enum), invariants, lifecycle events, a ``properties`` selection;
* undecorated helpers, module-level or methods of the model class (``s.m(x)``):
  with and without the state parameter, returning bool / int / an optional id
  (early returns, also inside loops) / a mask, taking a mask or a whole state
  array (``f(s.owner, r)``), value helpers that also write and ``require``, and
  effect-only helpers (writes, events, ``require``) called as statements;
* a base model and a variant deriving from it, with an undecorated override of
  an inherited action (loaded with ``class_name="Gen"``);
* ``if/elif/else``, ``for`` over ``s.pages`` / ``s.requests`` / ``range`` / a
  tuple or list of constants (ints, enum members) with ``break`` / ``continue`` /
  ``return``, locals (also annotated, tuple and augmented assignment, on locals
  and state), ``require`` (also with a message) anywhere;
* masks (``==``/``!=``/``<``.. against scalars and other arrays, ``is_none()``,
  ``&``, ``|``, ``~``, mask locals), reductions (``.count()``, ``.any()``,
  ``.all()``, ``count()``, ``any_()``, ``all_()``, ``any(m)``, ``sum(m)``,
  ``s.x.count(v)``), masked stores and ``emit.free(r, pages=mask)``;
* ``is None``/``is not None``, ``in (...)``/``not in``, chained comparisons,
  ``and/or/not``, ``&``/``|`` on bools, conditional expressions, arithmetic
  (``+ - * // % **``, unary minus), ``min``/``max``/``abs``/``len``,
  ``any``/``all``/``sum`` over generators with ``if``;
* writes and indexes that can leave their range at run time (``risky`` models):
  model errors must be found alike by every interpretation.

``small=True`` (the engine comparisons) draws a lifecycle instead: ``owner``,
``phase``, ``inflight`` and a few random variables, actions from templates
(admit, alloc, post/land/drain a write, read, decode, free, finish, reject, ...)
whose guards are each dropped with some probability, so the library properties
get violated at various depths, plus random actions and invariants; ids stay
opaque in most of them, so symmetry reduction is exercised.

The static checker must accept every generated model; a ModelError while
compiling one is a bug here (or in the checker), never an expected outcome.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import strategies as st

EVENTS_REQ = ["admit", "reject", "decode", "abort", "timeout", "finish"]
EVENTS_PAGE = ["alloc", "post_write", "land_write", "drain", "read", "free"]
LIBRARY_PROPS = ["no-decode-after-rejection", "rejection-is-terminal", "no-read-beyond-written",
                 "no-reuse-before-drain"]
ENUMS = {"Color": ["RED", "GREEN", "BLUE"], "Mode": ["OFF", "ON"]}

#: constructs the generator leaves out while a known kvspec bug is open (each with a
#: regression test in tests/test_differential.py); empty: every construct is drawn.
AVOID: set[str] = set()

#: every construct the generator can produce (see :data:`ModelGen.features`)
FEATURES = frozenset("""
param_request param_page param_int param_bool param_enum params_3
helper_bool helper_int helper_opt_page helper_opt_request helper_pure helper_effect
helper_value_effect helper_nested_call helper_early_return
loop_pages loop_requests loop_range loop_tuple break continue return_in_loop early_return
mask_eq mask_ne mask_order mask_none mask_and mask_or mask_invert mask_vec_vec mask_boolvec
mask_local count_method any_method all_method count_fn any_fn all_fn any_builtin sum_builtin
array_count mask_store emit_pages_mask
is_none is_not_none enum_eq enum_in enum_not_in id_eq id_order
cond_expr and or not bool_bitop chained_compare
add sub mul floordiv mod pow neg min max abs len
fold_any fold_all fold_sum fold_if nested_fold
risky_write risky_index risky_emit index_int index_optional
require require_nested if_elif else tuple_assign aug_assign_local aug_assign_state
local_bool local_int local_enum local_oreq local_mask
store_scalar store_indexed store_oreq store_opage store_enum
invariant invariant_loop invariant_helper
size_param size_bound module_const class_const list_init docstring
scalar_request_var opt_page_var properties_subset
helper_method helper_mask helper_array subclass override annotated_assign aug_assign_mul
aug_assign_div aug_assign_bool unary_plus require_message list_in enum_loop_domain
""".split()) | {f"emit_{k}" for k in EVENTS_REQ + EVENTS_PAGE}


# -- choosers ------------------------------------------------------------------------------

class RandomChooser:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, seq: list[Any]) -> Any:
        return seq[self.rng.randrange(len(seq))]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p


class DrawChooser:
    """Hypothesis draws; every choice shrinks towards its first option / False."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))  # type: ignore[no-any-return]

    def choice(self, seq: list[Any]) -> Any:
        return seq[self.draw(st.integers(0, len(seq) - 1))]

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 99)) >= 100 - round(p * 100)  # type: ignore[no-any-return]


# -- model description -------------------------------------------------------------------------

@dataclass
class Var:
    name: str
    dim: str  # "scalar" | "request" | "page"
    tag: str  # bool | int | enum:Color | enum:Mode | oreq | opage | req
    decl: str


@dataclass
class Helper:
    name: str
    params: list[str]  # tags of the value parameters
    ret: str | None  # tag of the result; None for an effect-only helper
    state: bool  # takes the state as first parameter
    safe: bool  # cannot raise a model error (may be called from invariants)
    effects: bool
    method: bool = False  # a method of the model class, called as s.name(...)
    array: bool = False  # takes a whole state array (s.owner) as first argument


@dataclass
class GenModel:
    source: str
    requests: int
    pages: int
    risky: bool
    features: set[str] = field(default_factory=set)
    class_name: str = "Gen"

    def __repr__(self) -> str:  # Hypothesis notes the source itself
        return (f"GenModel({self.source.count(chr(10))} lines, requests={self.requests}, "
                f"pages={self.pages}, risky={self.risky})")


@dataclass
class Ctx:
    """What a body being generated can see."""

    kind: str  # action | invariant | helper | proc
    names: dict[str, str]  # visible locals / parameters -> tag
    state: bool = True
    effects: bool = False  # may write state, emit, require
    safe: bool = False  # no construct that can raise a model error
    loops: int = 0
    ret: str | None = None  # tag of the returned value (value functions)
    counter: list[int] = field(default_factory=lambda: [0])
    gated: bool = False  # evaluated only if an earlier operand allows (and/or, if-else, generator)
    in_require: bool = False  # the condition of a require

    def child(self, **kw: Any) -> "Ctx":
        c = Ctx(self.kind, dict(self.names), self.state, self.effects, self.safe, self.loops,
                self.ret, self.counter, self.gated, self.in_require)
        for k, v in kw.items():
            setattr(c, k, v)
        return c

    def fresh(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"

    def of(self, tag: str) -> list[str]:
        return [n for n, t in self.names.items() if t == tag]


Lines = list[tuple[int, str]]  # (indent level, text)


class ModelGen:
    """One random model. ``small`` keeps the state space small (engine comparisons)."""

    def __init__(self, ch: Any, *, small: bool = False) -> None:
        self.ch = ch
        self.small = small
        self.features: set[str] = set()
        self.vars: list[Var] = []
        self.helpers: list[Helper] = []
        self.helper_src: list[str] = []
        self.method_src: list[str] = []

    # -- plumbing --------------------------------------------------------------------
    def f(self, *names: str) -> None:
        self.features.update(names)

    def pick(self, options: list[tuple[int, Callable[[], str | None]]],
             optional: bool = False) -> Any:
        """A weighted choice among productions; a production may decline (None)."""
        options = [o for o in options if o[0] > 0]
        while options:
            total = sum(w for w, _ in options)
            x = self.ch.int(0, total - 1)
            for i, (w, fn) in enumerate(options):
                if x < w:
                    out = fn()
                    if out is not None:
                        return out
                    options = options[:i] + options[i + 1:]
                    break
                x -= w
        if optional:
            return None
        raise AssertionError("no production applies")

    def vars_of(self, tag: str, dim: str | None = None) -> list[Var]:
        return [v for v in self.vars if v.tag == tag and (dim is None or v.dim == dim)]

    # -- the model ----------------------------------------------------------------------
    def model(self) -> GenModel:
        ch = self.ch
        if self.small:  # two ids first: symmetry needs them (and shrinking keeps them)
            self.R, self.P = ch.choice([2, 1]), ch.choice([2, 1])
        else:
            self.R, self.P = ch.int(1, 2), ch.int(1, 3)
        self.risky = ch.chance(0.5)
        self.cap = ch.int(1, 2)
        self.declare_vars()
        class_lines: list[str] = []
        if ch.chance(0.3):
            self.f("properties_subset")
            k = ch.int(1, 3)
            props = []
            for _ in range(k):
                p = ch.choice(LIBRARY_PROPS)
                if p not in props:
                    props.append(p)
            class_lines.append(f"    properties = {tuple(props)!r}")
        class_lines += [f"    requests = Requests({self.R})", f"    pages = Pages({self.P})",
                        f"    cap = Size({self.cap})", "    STEP = 1"]
        for v in self.vars:
            class_lines.append(f"    {v.name} = {v.decl}")
        n_helpers = ch.int(0, 2 if self.small else 4)
        for _ in range(n_helpers):
            self.helper()
        actions: list[tuple[str, list[tuple[str, Any, str]], str]] = []
        if self.small:
            # a lifecycle: admit and alloc open the way for the other steps
            names = [n for n in ("admit", "alloc") if not ch.chance(0.1)]
            for _ in range(ch.int(1, 3)):
                names.append(ch.choice(list(self.TEMPLATES)))
            for i, name in enumerate(names):
                actions.append(self.template_action(i, name))
            if ch.chance(0.5):
                actions.append(self.action(len(names)))
        else:
            for i in range(ch.int(1, 4)):
                actions.append(self.action(i))
        invariants = []
        for i in range(ch.int(0, 1) if self.small else ch.int(0, 2)):
            invariants.append(self.invariant(i))
        head = [
            "import enum",
            "from kvspec import (Int, Model, Page, Pages, Request, Requests, Size, action, "
            "all_, any_, count, emit, invariant, require, var)",
            "",
            "LIMIT = 2",
            "",
        ]
        for name, members in ENUMS.items():
            head += ["", f"class {name}(enum.Enum):"]
            head += [f"    {m} = {i}" for i, m in enumerate(members)]
            head.append("")
        body = "\n".join(head) + "\n"
        for h in self.helper_src:
            body += "\n" + h + "\n"
        sub = ch.chance(0.15) and len(actions) >= 2
        if not sub:
            body += "\nclass Gen(Model):\n" + "\n".join(class_lines) + "\n"
            for m in self.method_src:
                body += "\n" + m + "\n"
            for _, _, text in actions:
                body += "\n" + text + "\n"
        else:
            # a base model and a variant: inherited actions, one overridden undecorated
            self.f("subclass")
            cut = ch.int(1, len(actions) - 1)
            body += "\nclass Base(Model):\n" + "\n".join(class_lines) + "\n"
            for _, _, text in actions[:cut]:
                body += "\n" + text + "\n"
            body += "\nclass Gen(Base):\n    STEP = 1\n"
            for m in self.method_src:
                body += "\n" + m + "\n"
            for _, _, text in actions[cut:]:
                body += "\n" + text + "\n"
            if ch.chance(0.7):
                self.f("override")
                name, params, _ = actions[ch.int(0, cut - 1)]
                _, _, text = self.action(0, params=params, name=name, decorate=False)
                body += "\n" + text + "\n"
        for text in invariants:
            body += "\n" + text + "\n"
        return GenModel(body, self.R, self.P, self.risky, self.features)

    def declare_vars(self) -> None:
        ch = self.ch
        R, P = self.R, self.P
        uniform = not ch.chance(0.15)
        init_owner = "None" if uniform else repr([ch.choice([None, 0]) for _ in range(P)])
        if not uniform:
            self.f("list_init")
        self.vars.append(Var("owner", "page", "oreq",
                             f"pages.var(requests.optional, init={init_owner})"))
        if self.small:
            self.vars.append(Var("phase", "request", "enum:Color",
                                 "requests.var(Color, init=Color.RED)"))
            self.vars.append(Var("inflight", "page", "bool", "pages.var(bool, init=False)"))
            if ch.chance(0.5):
                self.vars.append(Var("landed", "page", "bool", "pages.var(bool, init=False)"))
        pool: list[tuple[str, str]] = [
            ("page", "bool"), ("page", "int"), ("page", "enum:Color"), ("page", "oreq"),
            ("request", "bool"), ("request", "int"), ("request", "enum:Color"),
            ("request", "enum:Mode"), ("request", "oreq"),
            ("scalar", "bool"), ("scalar", "int"), ("scalar", "enum:Mode"), ("scalar", "oreq"),
            ("request", "opage"), ("scalar", "opage"), ("scalar", "req"),
        ]
        n = ch.int(0, 2) if self.small else ch.int(1, 5)
        counts: dict[str, int] = {}
        for _ in range(n):
            dim, tag = ch.choice(pool)
            if tag in ("opage", "req") and not ch.chance(0.5):
                continue
            k = counts.get(dim + tag, 0)
            counts[dim + tag] = k + 1
            prefix = {"page": "p", "request": "r", "scalar": "g"}[dim]
            short = {"bool": "b", "int": "n", "enum:Color": "c", "enum:Mode": "m",
                     "oreq": "o", "opage": "slot", "req": "turn"}[tag]
            name = f"{prefix}{short}{k}"
            length = {"page": P, "request": R, "scalar": 1}[dim]
            if tag == "bool":
                spec, vals = "bool", [False, True]
            elif tag == "int":
                lo, hi = ch.choice([(0, 1), (0, 2), (0, 3), (-1, 1), (0, "cap")])
                if self.small:
                    lo, hi = ch.choice([(0, 1), (0, 2), (0, "cap")])
                if hi == "cap":
                    self.f("size_bound")
                spec = f"Int({lo}, {hi!r})"
                vals = list(range(lo, (self.cap if hi == "cap" else hi) + 1))
            elif tag.startswith("enum:"):
                cls = tag[5:]
                spec, vals = cls, [f"{cls}.{m}" for m in ENUMS[cls]]
            elif tag == "oreq":
                spec, vals = "requests.optional", [None] + list(range(R))
            elif tag == "opage":
                spec, vals = ch.choice(["pages.optional", "Page | None"]), [None] + list(range(P))
                self.f("opage_var" if dim == "scalar" else "opt_page_var")
            else:
                spec, vals = "Request", list(range(R))
                self.f("scalar_request_var")
            first = vals[0] if tag != "int" else ch.choice(vals)
            if dim != "scalar" and ch.chance(0.1):
                self.f("list_init")
                init = "[" + ", ".join(str(ch.choice(vals)) for _ in range(length)) + "]"
            else:
                init = str(first)
            maker = {"page": "pages.var", "request": "requests.var", "scalar": "var"}[dim]
            self.vars.append(Var(name, dim, tag, f"{maker}({spec}, init={init})"))

    # -- function bodies ----------------------------------------------------------------
    def render(self, header: list[str], lines: Lines, base: int) -> str:
        out = list(header)
        for level, text in lines:
            out.append("    " * (base + level) + text)
        return "\n".join(out)

    def action(self, i: int, params: list[tuple[str, Any, str]] | None = None,
               name: str | None = None, decorate: bool = True
               ) -> tuple[str, list[tuple[str, Any, str]], str]:
        """(name, parameters, source) of a random action."""
        ch = self.ch
        if params is None:
            params = self.action_params()
        ctx = Ctx("action", {n: t for n, _, t in params}, effects=True, safe=not self.risky)
        lines: Lines = []
        if ch.chance(0.15):
            lines.append((0, '"""A generated action."""'))
            self.f("docstring")
        if ch.chance(0.7):
            lines += self.require_stmt(ctx, nested=False)
        lines += self.block(ctx, depth=2, n=ch.int(1, 3 if self.small else 4))
        sig = ", ".join(["s"] + [f"{n}: {a}" for n, a, _ in params])
        name = name or f"act{i}"
        header = (["    @action"] if decorate else []) + [f"    def {name}({sig}):"]
        return name, params, self.render(header, lines, 2)

    def action_params(self) -> list[tuple[str, Any, str]]:
        ch = self.ch
        params: list[tuple[str, Any, str]] = []  # name, annotation, tag
        kinds = [("r", "Request", "req"), ("p", "Page", "page"), ("q", "Request", "req"),
                 ("k", None, "int"), ("b", "bool", "bool"), ("c", None, "enum")]
        n = ch.int(0, 3)
        used: set[str] = set()
        if self.small:
            params += [("r", "Request", "req"), ("p", "Page", "page")]
            used |= {"r", "p"}
            n = ch.int(0, 1)
        for _ in range(n):
            name, ann, tag = ch.choice(kinds)
            if name in used:
                continue
            used.add(name)
            if name == "k":
                lo, hi = ch.choice([(0, 1), (0, 2), (-1, 1), (1, "cap")])
                ann = f"Int({lo}, {hi!r})"
                self.f("param_int")
            elif name == "c":
                cls = ch.choice(list(ENUMS))
                ann, tag = cls, f"enum:{cls}"
                self.f("param_enum")
            else:
                self.f({"req": "param_request", "page": "param_page", "bool": "param_bool"}[tag])
            params.append((name, ann, tag))
        if len(params) >= 3:
            self.f("params_3")
        return params

    def invariant(self, i: int) -> str:
        self.f("invariant")
        ctx = Ctx("invariant", {}, safe=True, ret="bool")
        if self.small and self.ch.chance(0.7):
            # about every request and page (folds keep the ids opaque), true initially
            inner = ctx.child(gated=True)
            inner.names["q"], inner.names["pg"] = "req", "page"
            self.f("fold_all", "nested_fold")
            pre = self.ch.choice(["s.owner[pg] != q", "s.phase[q] == Color.RED",
                                  "not s.inflight[pg]", "s.owner[pg] is None"])
            body = f"({pre}) or {self.bexpr(inner, 2)}"
            lines: Lines = [(0, f"return all(all({body} for pg in s.pages) for q in s.requests)")]
        else:
            lines = self.value_body(ctx, "bool")
        return self.render(["    @invariant", f"    def inv{i}(s):"], lines, 2)

    # lifecycle steps (for the engine comparisons): each guard may be left out, which
    # is how the library properties get violated
    TEMPLATES = {
        "admit": (["s.phase[r] == Color.RED"], ["s.phase[r] = Color.GREEN", "emit.admit(r)"]),
        "reject": (["s.phase[r] == Color.RED"], ["s.phase[r] = Color.BLUE", "emit.reject(r)"]),
        "alloc": (["s.owner[p] is None", "s.phase[r] == Color.GREEN", "not s.inflight[p]"],
                  ["s.owner[p] = r", "emit.alloc(r, p)"]),
        "write": (["s.owner[p] == r", "not s.inflight[p]", "s.phase[r] != Color.BLUE"],
                  ["emit.post_write(r, p)", "emit.land_write(r, p)"]),
        "post": (["s.owner[p] == r", "not s.inflight[p]"],
                 ["s.inflight[p] = True", "emit.post_write(r, p)"]),
        "land": (["s.inflight[p]", "s.owner[p] == r"],
                 ["s.inflight[p] = False", "emit.land_write(r, p)"]),
        "drain": (["s.inflight[p]"], ["s.inflight[p] = False", "emit.drain(r, p)"]),
        "read": (["s.owner[p] == r", "s.phase[r] == Color.GREEN", "not s.inflight[p]"],
                 ["emit.read(r, p)"]),
        "decode": (["s.phase[r] == Color.GREEN", "(s.owner == r).any()"],
                   ["emit.decode(r)", "emit.read(r, pages=s.owner == r)"]),
        "free": (["(s.owner == r).count() > 0", "not ((s.owner == r) & s.inflight).any()"],
                 ["emit.free(r, pages=s.owner == r)", "s.owner[s.owner == r] = None"]),
        "finish": (["s.phase[r] == Color.GREEN"],
                   ["s.phase[r] = Color.BLUE", "emit.finish(r)"]),
        "reset": (["s.phase[r] == Color.BLUE", "not (s.owner == r).any()"],
                  ["s.phase[r] = Color.RED"]),
    }

    def template_action(self, i: int, name: str) -> tuple[str, list[tuple[str, Any, str]], str]:
        ch = self.ch
        guards, effects = self.TEMPLATES[name]
        params = "s, r: Request, p: Page"
        ctx = Ctx("action", {"r": "req", "p": "page"}, effects=True, safe=not self.risky)
        self.f("param_request")
        lines: Lines = []
        for g in guards:
            if not ch.chance(0.25):
                why = f", {g.split('[')[0]!r}" if ch.chance(0.1) else ""
                lines.append((0, f"require({g}{why})"))
                self.f("require")
        if "landed" in self.vars_by_name():
            if name == "land":
                effects = effects + ["s.landed[p] = True"]
            elif name == "read" and ch.chance(0.7):
                lines.append((0, "require(s.landed[p])"))
            elif name == "free":
                effects = [effects[0], "s.landed[s.owner == r] = False", effects[1]]
        for e in effects:
            if e.startswith("emit.") and ch.chance(0.1):
                continue
            lines.append((0, e))
        if ch.chance(0.3):  # some random statement for variety
            lines += self.statement(ctx, 1)
        if not lines:  # every guard and effect left out
            lines.append((0, "pass"))
        sig = [("r", "Request", "req"), ("p", "Page", "page")]
        return (f"{name}{i}", sig,
                self.render(["    @action", f"    def {name}{i}({params}):"], lines, 2))

    def vars_by_name(self) -> dict[str, Var]:
        return {v.name: v for v in self.vars}

    def helper(self) -> None:
        ch = self.ch
        k = len(self.helpers)
        kind = ch.choice(["bool", "int", "opt", "effect", "pure", "bool", "int", "mask", "array"])
        ptag = ch.choice(["req", "page", "int", "req"])
        method = ch.chance(0.25) and kind not in ("pure", "array")
        if method:
            self.f("helper_method")
        if kind == "array":
            self.f("helper_array")
            h = Helper(f"h{k}_arr", ["oreq"], "int", False, True, False, array=True)
            ret = ch.choice(["(a == x).count()", "a.count(x)", "(a != x).count() - len(a)",
                             "sum(a == x) + min(len(a), 1)"])
            self.helper_src.append(f"def {h.name}(a, x):\n    return {ret}")
            self.helpers.append(h)
            return
        if kind == "mask":
            self.f("helper_mask", "helper_state_param")
            h = Helper(f"h{k}_mask", ["pmask"], "pmask", True, True, False, method=method)
            ctx = Ctx("helper", {"x": "pmask"}, safe=True, ret="pmask")
            inner = self.mask(ctx, "page", 1)
            op = ch.choice(["&", "|"])
            lines: Lines = []
            if ch.chance(0.4):
                lines += [(0, f"if {self.bexpr(ctx, 1)}:"), (1, "return ~x")]
            lines.append((0, f"return (x {op} {inner})"))
            self.add_helper(h, lines, "s, x")
            return
        if kind == "pure":
            self.f("helper_pure")
            params = ["int", "int"]
            h = Helper(f"h{k}_pure", params, "int", False, True, False)
            ctx = Ctx("helper", {"x": "int", "y": "int"}, state=False, safe=True, ret="int")
            lines = self.value_body(ctx, "int")
            self.helper_src.append(self.render([f"def {h.name}(x, y):"], lines, 1))
            self.helpers.append(h)
            return
        if kind == "effect":
            self.f("helper_effect")
            h = Helper(f"h{k}_do", [ptag], None, True, not self.risky, True, method=method)
            ctx = Ctx("proc", {"x": ptag}, effects=True, safe=h.safe)
            lines = self.block(ctx, depth=2, n=ch.int(1, 3))
            self.add_helper(h, lines, "s, x")
            return
        if kind == "opt":
            dim = ch.choice(["page", "request"])
            ret = "opage" if dim == "page" else "oreq"
            self.f("helper_opt_page" if dim == "page" else "helper_opt_request",
                   "return_in_loop", "helper_early_return", "helper_state_param")
            safe = not self.risky or ch.chance(0.5)
            h = Helper(f"h{k}_find", [ptag], ret, True, safe, False, method=method)
            ctx = Ctx("helper", {"x": ptag}, safe=safe, ret=ret)
            v = ctx.fresh("f")
            inner = ctx.child(loops=1)
            inner.names[v] = "page" if dim == "page" else "req"
            space = "s.pages" if dim == "page" else "s.requests"
            lines: Lines = [(0, f"for {v} in {space}:"),
                            (1, f"if {self.bexpr(inner, 2)}:"), (2, f"return {v}")]
            lines.append((0, "return None" if ch.chance(0.7) else
                          f"return {self.oexpr(ctx, 1, ret, allow_none=True)}"))
            self.add_helper(h, lines, "s, x")
            return
        self.f("helper_bool" if kind == "bool" else "helper_int", "helper_state_param")
        safe = not self.risky or ch.chance(0.5)
        effects = self.risky and ch.chance(0.3)
        h = Helper(f"h{k}_{kind}", [ptag], kind, True, safe and not effects, effects,
                   method=method)
        ctx = Ctx("helper", {"x": ptag}, safe=safe, ret=kind, effects=effects)
        if effects:
            self.f("helper_value_effect")
        lines = self.value_body(ctx, kind)
        self.add_helper(h, lines, "s, x")

    def add_helper(self, h: Helper, lines: Lines, params: str) -> None:
        """A module-level function, or a method of the model class."""
        if h.method:
            self.method_src.append(self.render([f"    def {h.name}({params}):"], lines, 2))
        else:
            self.helper_src.append(self.render([f"def {h.name}({params}):"], lines, 1))
        self.helpers.append(h)

    def value_body(self, ctx: Ctx, tag: str) -> Lines:
        """Statements, then ``return <tag value>`` (every path returns)."""
        ch = self.ch
        lines: Lines = []
        if ch.chance(0.4):
            self.f("helper_early_return" if ctx.kind == "helper" else "early_return")
            lines += [(0, f"if {self.bexpr(ctx, 2)}:"), (1, f"return {self.expr(ctx, tag, 2)}")]
        if ch.chance(0.4):
            lines += self.local(ctx, 2)
        if ch.chance(0.4):
            if ctx.kind == "invariant":
                self.f("invariant_loop")
            lines += self.for_loop(ctx, 2)
        if ch.chance(0.2) and ctx.effects:
            lines += self.statement(ctx, 1)
        if ch.chance(0.2):
            lines += [(0, f"if {self.bexpr(ctx, 2)}:"), (1, f"return {self.expr(ctx, tag, 2)}"),
                      (0, "else:"), (1, f"return {self.expr(ctx, tag, 2)}")]
        else:
            lines.append((0, f"return {self.expr(ctx, tag, 3)}"))
        return lines

    # -- statements -------------------------------------------------------------------------
    def block(self, ctx: Ctx, depth: int, n: int) -> Lines:
        lines: Lines = []
        for _ in range(n):
            lines += self.statement(ctx, depth)
        if not lines:
            lines.append((0, "pass"))
        return lines

    def statement(self, ctx: Ctx, depth: int) -> Lines:
        ch = self.ch
        eff = ctx.effects
        opts: list[tuple[int, Callable[[], Any]]] = [
            (6 if eff else 0, lambda: self.store(ctx)),
            (4 if eff else 0, lambda: self.emit(ctx)),
            (2 if eff else 0, lambda: self.require_stmt(ctx)),
            (3, lambda: self.local(ctx, depth)),
            (3 if depth > 0 else 0, lambda: self.if_stmt(ctx, depth)),
            (3 if depth > 0 else 0, lambda: self.for_loop(ctx, depth)),
            (2 if eff and self.effect_helpers(ctx) else 0, lambda: self.call_effect(ctx)),
            (1 if ctx.kind in ("action", "proc") else 0, lambda: [(0, "pass")]),
        ]
        opts = [o for o in opts if o[0] > 0]
        total = sum(w for w, _ in opts)
        x = ch.int(0, total - 1)
        for w, fn in opts:
            if x < w:
                return fn()  # type: ignore[no-any-return]
            x -= w
        raise AssertionError

    def require_stmt(self, ctx: Ctx, nested: bool = True) -> Lines:
        self.f("require", "require_nested" if nested else "require")
        why = ""
        if self.ch.chance(0.15):
            self.f("require_message")
            why = ', "generated guard"'
        return [(0, f"require({self.bexpr(ctx.child(in_require=True), 2)}{why})")]

    def exit_stmt(self, ctx: Ctx) -> Lines:
        """break / continue / return, as the last statement of a branch."""
        opts = []
        if ctx.loops:
            opts += ["break", "continue"]
        if ctx.ret is None and ctx.kind in ("action", "proc"):
            opts.append("return")
        if ctx.ret is not None:
            opts.append("return_value")
        if not opts:
            return []
        what = self.ch.choice(opts)
        if what == "return_value":
            if ctx.loops:
                self.f("return_in_loop")
            self.f("helper_early_return" if ctx.kind == "helper" else "early_return")
            return [(0, f"return {self.expr(ctx, ctx.ret, 2)}")]  # type: ignore[arg-type]
        if what == "return":
            self.f("early_return")
            if ctx.loops:
                self.f("return_in_loop")
        else:
            self.f(what)
        return [(0, what)]

    def if_stmt(self, ctx: Ctx, depth: int) -> Lines:
        ch = self.ch
        lines: Lines = [(0, f"if {self.bexpr(ctx, 2)}:")]
        body = self.block(ctx.child(), depth - 1, ch.int(1, 2))
        if ch.chance(0.5):
            body += self.exit_stmt(ctx)
        lines += [(l + 1, t) for l, t in body]
        if ch.chance(0.3):
            self.f("if_elif")
            lines.append((0, f"elif {self.bexpr(ctx, 2)}:"))
            body = self.block(ctx.child(), depth - 1, 1)
            lines += [(l + 1, t) for l, t in body]
        if ch.chance(0.4):
            self.f("else")
            lines.append((0, "else:"))
            body = self.block(ctx.child(), depth - 1, ch.int(1, 2))
            if ch.chance(0.3):
                body += self.exit_stmt(ctx)
            lines += [(l + 1, t) for l, t in body]
        return lines

    def for_loop(self, ctx: Ctx, depth: int) -> Lines:
        ch = self.ch
        v = ctx.fresh("i")
        inner = ctx.child(loops=ctx.loops + 1)
        kind = ch.choice(["pages", "requests", "range", "tuple", "pages"] if ctx.state
                         else ["range", "tuple"])
        if kind == "pages":
            head, inner.names[v] = "s.pages", "page"
        elif kind == "requests":
            head, inner.names[v] = "s.requests", "req"
        elif kind == "range":
            head = ch.choice(["range(2)", "range(1, 3)", "range(len(s.pages))", "range(s.cap)",
                              "range(LIMIT)", "range(3, 0, -1)"] if ctx.state
                             else ["range(2)", "range(LIMIT)", "range(3, 0, -1)"])
            if "len" in head:
                self.f("len")
            inner.names[v] = "int"
        elif ch.chance(0.3):
            self.f("enum_loop_domain")
            cls = ch.choice(list(ENUMS))
            head = "(" + ", ".join(f"{cls}.{m}" for m in ENUMS[cls][:ch.int(1, 3)]) + ",)"
            inner.names[v] = f"enum:{cls}"
        else:
            head = ch.choice(["(0, 2)", "(1,)", "(2, 0, 1)", "[1, 2]"])
            inner.names[v] = "int"
        self.f({"pages": "loop_pages", "requests": "loop_requests", "range": "loop_range",
                "tuple": "loop_tuple"}[kind])
        body: Lines = []
        if ch.chance(0.6):
            cond = self.bexpr(inner, 2)
            exit_ = self.exit_stmt(inner)
            if exit_:
                body += [(0, f"if {cond}:")] + [(l + 1, t) for l, t in exit_]
        body += self.block(inner, depth - 1, ch.int(1, 2))
        return [(0, f"for {v} in {head}:")] + [(l + 1, t) for l, t in body]

    def local(self, ctx: Ctx, depth: int) -> Lines:
        ch = self.ch
        tags = ["int", "bool", "oreq", "pmask", "enum:Color", "int"]
        existing = [n for n, t in ctx.names.items() if t in ("int",) and n.startswith("l")]
        bools = [n for n, t in ctx.names.items() if t == "bool" and n.startswith("l")]
        if bools and ch.chance(0.1):
            self.f("aug_assign_bool")
            return [(0, f"{ch.choice(bools)} {ch.choice(['&=', '|='])} {self.bexpr(ctx, 1)}")]
        if existing and ch.chance(0.4):
            n = ch.choice(existing)
            if ch.chance(0.5):
                self.f("aug_assign_local")
                op = ch.choice(["+=", "-=", "+=", "*=", "//=", "%="])
                if op in ("*=", "//=", "%="):
                    self.f("aug_assign_mul" if op == "*=" else "aug_assign_div")
                    return [(0, f"{n} {op} {ch.choice(['2', '3'])}")]
                return [(0, f"{n} {op} {self.iexpr(ctx, 1)}")]
            return [(0, f"{n} = {self.iexpr(ctx, 2)}")]
        if ch.chance(0.15):
            self.f("tuple_assign")
            a, b = ctx.fresh("la"), ctx.fresh("lb")
            va, vb = self.iexpr(ctx, 1), self.bexpr(ctx, 1)
            ctx.names[a], ctx.names[b] = "int", "bool"
            return [(0, f"{a}, {b} = {va}, {vb}")]
        tag = ch.choice(tags if ctx.state else ["int", "bool"])
        name = ctx.fresh("l")
        if tag == "pmask":
            value = self.mask(ctx, "page", 2)
            if value.startswith("s.") and value.replace("_", "").replace(".", "").isalnum():
                value = f"({value} == True)"  # a local holds a mask, not a whole array
            self.f("local_mask", "mask_local")
        elif tag == "oreq":
            value = self.oexpr(ctx, 2, "oreq", allow_none=False) or \
                f"s.owner[{self.index(ctx, 'page')}]"
            self.f("local_oreq")
        else:
            value = self.expr(ctx, tag, 2)
            self.f({"int": "local_int", "bool": "local_bool"}.get(tag, "local_enum"))
        ctx.names[name] = tag
        if tag in ("int", "bool") and ch.chance(0.1):
            self.f("annotated_assign")
            return [(0, f"{name}: {tag} = {value}")]
        return [(0, f"{name} = {value}")]

    def call_effect(self, ctx: Ctx) -> Lines:
        h = self.ch.choice(self.effect_helpers(ctx))
        t = h.params[0]
        a = self.req(ctx, t, 1) if t in ("req", "page") else self.expr(ctx, t, 1)
        if a is None:
            return [(0, "pass")]
        self.f("helper_effect")
        if h.method:
            return [(0, f"s.{h.name}({a})")]
        return [(0, f"{h.name}(s, {a})")]

    def effect_helpers(self, ctx: Ctx) -> list[Helper]:
        return [h for h in self.helpers if h.ret is None and (h.safe or not ctx.safe)]

    def store(self, ctx: Ctx) -> Lines:
        ch = self.ch
        v = ch.choice(self.vars)
        target = f"s.{v.name}"
        if v.dim != "scalar":
            if ch.chance(0.25):
                dim = v.dim
                m = self.mask(ctx, dim, 2)
                self.f("mask_store")
                return [(0, f"{target}[{m}] = {self.store_value(ctx, v)}")]
            target += f"[{self.index(ctx, v.dim)}]"
        if v.tag == "bool" and ch.chance(0.15):
            self.f("aug_assign_bool", "aug_assign_state")
            return [(0, f"{target} {ch.choice(['&=', '|='])} {self.bexpr(ctx, 1)}")]
        if v.tag == "int" and ch.chance(0.2):
            if ctx.safe or ch.chance(0.3):
                self.f("aug_assign_state")
                form = ch.int(0, 2)
                if form == 1:  # within range for every Int(lo, hi) with lo <= 0 < hi
                    self.f("aug_assign_div")
                    return [(0, f"{target} //= 2")]
                if form == 2:
                    self.f("aug_assign_div")
                    return [(0, f"{target} %= 2")]
                return [(0, f"{target} = ({target} + 1) % 2 if {target} >= 0 else 0")]
            self.f("aug_assign_state", "risky_write")
            return [(0, f"{target} {ch.choice(['+=', '-='])} 1")]
        self.f("store_indexed" if v.dim != "scalar" else "store_scalar")
        return [(0, f"{target} = {self.store_value(ctx, v)}")]

    def store_value(self, ctx: Ctx, v: Var) -> str:
        ch = self.ch
        tag = v.tag
        if tag == "int":
            cur = f"s.{v.name}" + ("" if v.dim == "scalar" else f"[{self.index(ctx, v.dim)}]")
            lo, hi = self.bounds(v)
            safe = [f"{ch.choice(range(lo, hi + 1))}",
                    f"min({cur} + 1, {hi})", f"max({cur} - 1, {lo})",
                    f"min(max({self.iexpr(ctx, 2)}, {lo}), {hi})",
                    f"({cur} + 1) % {hi + 1}" if lo == 0 else f"{lo}"]
            if ctx.safe or ch.chance(0.5):
                return ch.choice(safe)
            self.f("risky_write")
            return ch.choice([f"{cur} + {self.iexpr(ctx, 1)}", f"{cur} - 1",
                              f"{self.iexpr(ctx, 2, nc=True)}"])
        if tag == "oreq":
            self.f("store_oreq")
            if not ctx.safe and ch.chance(0.15):
                self.f("risky_write")
                return self.iexpr(ctx, 1, nc=True)  # an int stored as a request id
            return self.oexpr(ctx, 2, "oreq", allow_none=True)
        if tag == "opage":
            self.f("store_opage")
            return self.oexpr(ctx, 2, "opage", allow_none=True)
        if tag == "req":
            return self.req(ctx, "req", 2, lit=True)  # type: ignore[return-value]
        if tag.startswith("enum:"):
            self.f("store_enum")
        return self.expr(ctx, tag, 2)

    def bounds(self, v: Var) -> tuple[int, int]:
        import re
        m = re.search(r"Int\((-?\d+), (-?\d+|'cap')\)", v.decl)
        assert m
        hi = self.cap if m.group(2) == "'cap'" else int(m.group(2))
        return int(m.group(1)), hi

    def emit(self, ctx: Ctx) -> Lines:
        ch = self.ch
        if ch.chance(0.45):
            kind = ch.choice(EVENTS_REQ)
            self.f(f"emit_{kind}")
            return [(0, f"emit.{kind}({self.emit_request(ctx)})")]
        kind = ch.choice(EVENTS_PAGE)
        self.f(f"emit_{kind}")
        r = self.emit_request(ctx)
        if ch.chance(0.25):
            self.f("emit_pages_mask")
            return [(0, f"emit.{kind}({r}, pages={self.mask(ctx, 'page', 2)})")]
        if not ctx.safe and ch.chance(0.15):
            self.f("risky_emit")
            page = ch.choice([self.iexpr(ctx, 1, nc=True),
                              self.oexpr(ctx, 1, "opage", allow_none=False)]) \
                or self.iexpr(ctx, 1, nc=True)
        else:
            page = self.req(ctx, "page", 1, lit=True)
        if ch.chance(0.2):
            return [(0, f"emit.{kind}({r}, page={page})")]
        return [(0, f"emit.{kind}({r}, {page})")]

    def emit_request(self, ctx: Ctx) -> str:
        if not ctx.safe and self.ch.chance(0.15):
            got = self.oexpr(ctx, 1, "oreq", allow_none=False)
            if got is not None:
                self.f("risky_emit")
                return got  # type: ignore[no-any-return]
        return self.req(ctx, "req", 1, lit=True)  # type: ignore[return-value]

    # -- expressions -------------------------------------------------------------------------
    def expr(self, ctx: Ctx, tag: str, d: int) -> str:
        if tag == "bool":
            return self.bexpr(ctx, d)
        if tag == "int":
            return self.iexpr(ctx, d)
        if tag.startswith("enum"):
            return self.eexpr(ctx, d, tag if ":" in tag else "enum:Color")
        if tag in ("oreq", "opage"):
            return self.oexpr(ctx, d, tag, allow_none=True)
        if tag == "opt":
            return self.oexpr(ctx, d, "opage", allow_none=True)
        if tag == "pmask":
            return self.mask(ctx, "page", d)
        return self.req(ctx, tag, d, lit=True)  # type: ignore[return-value]

    def index(self, ctx: Ctx, dim: str) -> str:
        """An index into a per-``dim`` array (possibly out of range in risky bodies)."""
        ch = self.ch
        tag = "req" if dim == "request" else "page"
        if not ctx.safe and ch.chance(0.12):
            self.f("risky_index")
            if ch.chance(0.5):
                self.f("index_int")
                return self.iexpr(ctx, 1, nc=True)
            got = self.oexpr(ctx, 1, "oreq" if dim == "request" else "opage", allow_none=False)
            if got is not None:
                self.f("index_optional")
                return got  # type: ignore[no-any-return]
        return self.req(ctx, tag, 1, lit=True)  # type: ignore[return-value]

    def req(self, ctx: Ctx, tag: str, d: int, lit: bool = False) -> str | None:
        """A request id (tag req) or page id (tag page), never None. Without ``lit``
        no literal id (a literal is an int, which cannot meet None or join an id);
        then there may be no such expression here (None)."""
        names = ctx.of(tag)
        dim_vars = self.vars_of("req") if tag == "req" and ctx.state else []

        def cond() -> str | None:
            g = ctx.child(gated=True)
            a, b = self.req(g, tag, d - 1), self.req(g, tag, d - 1)
            if a is None or b is None:
                return None
            self.f("cond_expr")
            return f"({a} if {self.bexpr(ctx, d - 1)} else {b})"

        opts: list[tuple[int, Callable[[], str | None]]] = [
            (6, lambda: self.ch.choice(names) if names else None),
            (2, lambda: f"s.{self.ch.choice(dim_vars).name}" if dim_vars else None),
            (1 if d > 0 else 0, cond),
        ]
        got = self.pick(opts, optional=True)
        if got is None and lit:
            return self.literal_id(tag)
        if lit and self.ch.chance(0.01 if self.small else 0.05):
            return self.literal_id(tag)
        return got  # type: ignore[no-any-return]

    def literal_id(self, tag: str) -> str:
        n = self.R if tag == "req" else self.P
        self.f("literal_id")
        return str(self.ch.int(0, n - 1))

    def oexpr(self, ctx: Ctx, d: int, tag: str, allow_none: bool) -> str | None:
        """An optional request (oreq) or page (opage) id. Without ``allow_none`` it
        is never the literal None, and there may be none here (None)."""
        ch = self.ch
        base = "req" if tag == "oreq" else "page"
        arrays = self.vars_of(tag) if ctx.state else []
        helpers = self.value_helpers(ctx, tag)

        def maybe() -> str | None:
            x = self.req(ctx.child(gated=True), base, d - 1)
            if x is None:
                return None
            # a BoolOp is never folded: `x if False else None` would be None, not optional
            return f"({x} if ({self.bexpr(ctx, d - 1)} and {self.bexpr(ctx, 0)}) else None)"

        opts: list[tuple[int, Callable[[], str | None]]] = [
            (2 if allow_none else 0, lambda: "None"),
            (4 if arrays else 0, lambda: self.load(ctx, ch.choice(arrays))),
            (2, lambda: self.req(ctx, base, d)),
            (2 if ctx.of(tag) else 0, lambda: ch.choice(ctx.of(tag))),
            (1 if d > 0 else 0, maybe),
            (2 if helpers and d > 0 else 0, lambda: self.call(ctx, ch.choice(helpers), d)),
        ]
        return self.pick(opts, optional=not allow_none)  # type: ignore[no-any-return]

    def load(self, ctx: Ctx, v: Var) -> str:
        if v.dim == "scalar":
            return f"s.{v.name}"
        return f"s.{v.name}[{self.index(ctx, v.dim)}]"

    def cond(self, ctx: Ctx, d: int, branch: Callable[[Ctx], str]) -> str:
        self.f("cond_expr")
        g = ctx.child(gated=True)
        return f"({branch(g)} if {self.bexpr(ctx, d - 1)} else {branch(g)})"

    def call(self, ctx: Ctx, h: Helper, d: int) -> str | None:
        args = []
        for t in h.params:
            a = self.req(ctx, t, 0) if t in ("req", "page") else self.expr(ctx, t, max(d - 1, 0))
            if a is None:
                return None
            args.append(a)
        if ctx.kind == "helper":
            self.f("helper_nested_call")
        if ctx.kind == "invariant":
            self.f("invariant_helper")
        if h.method:
            return f"s.{h.name}({', '.join(args)})"
        if h.array:
            args = ["s.owner"] + args
        elif h.state:
            args = ["s"] + args
        return f"{h.name}({', '.join(args)})"

    def value_helpers(self, ctx: Ctx, ret: str) -> list[Helper]:
        """Helpers returning ``ret`` that this body may call (no effects from
        invariants, nothing that can fail from safe bodies)."""
        out: list[Helper] = []
        if ctx.gated and "dead_call" in AVOID:
            return out
        for h in self.helpers:
            if h.ret != ret:
                continue
            if (h.state or h.array) and not ctx.state:
                continue
            if h.effects and ctx.kind != "action":
                continue  # the checker rejects effects in invariants; helpers stay simple
            if h.effects and ctx.in_require and "effects_in_leading_require" in AVOID:
                continue
            if ctx.safe and not h.safe:
                continue
            out.append(h)
        return out

    def eexpr(self, ctx: Ctx, d: int, tag: str) -> str:
        ch = self.ch
        cls = tag[5:]
        arrays = self.vars_of(tag)
        opts: list[tuple[int, Callable[[], str | None]]] = [
            (3, lambda: f"{cls}.{ch.choice(ENUMS[cls])}"),
            (3 if ctx.of(tag) else 0, lambda: ch.choice(ctx.of(tag))),
            (4 if arrays and ctx.state else 0, lambda: self.load(ctx, ch.choice(arrays))),
            (1 if d > 0 else 0, lambda: self.cond(ctx, d, lambda g: self.eexpr(g, d - 1, tag))),
        ]
        return self.pick(opts)

    def iexpr(self, ctx: Ctx, d: int, nc: bool = False) -> str:
        """An int expression; ``nc``: never folded to a constant by the checker."""
        ch = self.ch
        ints = self.vars_of("int")
        names = ctx.of("int")
        st_ok = ctx.state
        helpers = self.value_helpers(ctx, "int")

        def arith() -> str:
            op = ch.choice(["+", "-", "*", "//", "%", "+", "-"])
            a = self.iexpr(ctx, d - 1, nc=nc)
            if op in ("//", "%"):
                self.f("floordiv" if op == "//" else "mod")
                k = ch.choice(['2', '3', 's.cap', 'LIMIT'] if st_ok else ['2', '3', 'LIMIT'])
                self.const_feature(k)
                return f"({a} {op} {k})"
            if op == "*":
                self.f("mul")
                b = ch.choice(["2", "-1", "s.STEP"] if st_ok else ["2", "-1"]) \
                    if ch.chance(0.7) else self.iexpr(ctx, 0)
                self.const_feature(b)
                return f"({a} * {b})"
            self.f("add" if op == "+" else "sub")
            return f"({a} {op} {self.iexpr(ctx, d - 1)})"

        def minmax() -> str:
            op = ch.choice(["min", "max"])
            self.f(op)
            k = ch.int(2, 3)
            return f"{op}(" + ", ".join(self.iexpr(ctx, d - 1) for _ in range(k)) + ")"

        def reduce() -> str | None:
            if not st_ok:
                return None
            dim = ch.choice(["page", "request"]) if any(v.dim == "request" for v in self.vars) \
                else "page"
            m = self.mask(ctx, dim, d - 1)
            form = ch.choice(["method", "fn", "sum"])
            self.f({"method": "count_method", "fn": "count_fn", "sum": "sum_builtin"}[form])
            return {"method": f"{m}.count()", "fn": f"count({m})", "sum": f"sum({m})"}[form]

        def array_count() -> str | None:
            if not st_ok:
                return None
            self.f("array_count")
            return f"s.owner.count({self.oexpr(ctx, 0, 'oreq', allow_none=True)})"

        def fold_sum() -> str | None:
            if not st_ok:
                return None
            return self.fold(ctx, d, "sum")

        opts: list[tuple[int, Callable[[], str | None]]] = [
            (0 if nc else 3, lambda: str(ch.int(-1, 3))),
            (1 if nc and st_ok and not names and not ints else 0,
             lambda: "(s.owner == None).count()"),
            (0 if nc else 1, lambda: self.const_feature(
                ch.choice(["LIMIT", "s.cap", "s.STEP", "len(s.pages)", "len(s.requests)",
                           "len(s.owner)", f"len({self.mask(ctx, 'page', 0)})"])
                if st_ok else "LIMIT")),
            (1 if d > 0 else 0,
             lambda: (self.f("unary_plus"), f"(+{self.iexpr(ctx, d - 1, nc)})")[1]),
            (4 if names else 0, lambda: ch.choice(names)),
            (5 if ints and st_ok else 0, lambda: self.load(ctx, ch.choice(ints))),
            (2 if d > 0 else 0, arith),
            (1 if d > 0 else 0, lambda: self.neg(ctx, d, nc)),
            (1 if d > 0 else 0, minmax),
            (1 if d > 0 else 0, lambda: (self.f("abs"), f"abs({self.iexpr(ctx, d - 1)})")[1]),
            (2 if d > 0 else 0, reduce),
            (1 if d > 0 else 0, array_count),
            (1 if d > 0 else 0, fold_sum),
            (1 if d > 0 else 0, lambda: self.cond(ctx, d, lambda g: self.iexpr(g, d - 1, nc))),
            (2 if helpers and d > 0 else 0, lambda: self.call(ctx, ch.choice(helpers), d)),
            (1 if d > 0 and not nc else 0,
             lambda: (self.f("pow"), f"({self.iexpr(ctx, 0, nc=True)} ** 2)")[1]
             if (names or (ints and st_ok)) else None),
        ]
        return self.pick(opts)

    def const_feature(self, k: str) -> str:
        feature = {"LIMIT": "module_const", "s.cap": "size_param", "s.STEP": "class_const"}.get(
            k, "len" if k.startswith("len(") else None)
        if feature:
            self.f(feature)
        return k

    def neg(self, ctx: Ctx, d: int, nc: bool) -> str:
        self.f("neg")
        return f"(-{self.iexpr(ctx, d - 1, nc)})"

    def mask(self, ctx: Ctx, dim: str, d: int) -> str:
        """A mask over ``dim`` ids."""
        ch = self.ch
        arrays = [v for v in self.vars if v.dim == dim]
        locals_ = ctx.of("pmask") if dim == "page" else []

        def compare() -> str:
            v = ch.choice(arrays)
            if v.tag == "bool":
                if ch.chance(0.5):
                    self.f("mask_boolvec")
                    return f"s.{v.name}"
                self.f("mask_eq")
                return f"(s.{v.name} == {self.bexpr(ctx, 0)})"
            if v.tag in ("oreq", "opage"):
                what = ch.choice(["eq", "ne", "none", "none_method", "vec"])
                if what == "none_method":
                    self.f("mask_none")
                    return f"s.{v.name}.is_none()"
                if what == "none":
                    self.f("mask_none")
                    return f"(s.{v.name} == None)"
                if what == "vec":
                    others = [w for w in arrays if w.tag == v.tag]
                    self.f("mask_vec_vec")
                    return f"(s.{v.name} != s.{ch.choice(others).name})"
                op = "==" if what == "eq" else "!="
                self.f("mask_eq" if what == "eq" else "mask_ne")
                return f"(s.{v.name} {op} {self.oexpr(ctx, d, v.tag, allow_none=True)})"
            if v.tag == "int":
                op = ch.choice(["<", "<=", ">", ">=", "==", "!="])
                self.f("mask_order" if op in ("<", "<=", ">", ">=") else "mask_eq")
                others = [w for w in arrays if w.tag == "int"]
                if ch.chance(0.2):
                    self.f("mask_vec_vec")
                    return f"(s.{v.name} {op} s.{ch.choice(others).name})"
                return f"(s.{v.name} {op} {self.iexpr(ctx, max(d - 1, 0))})"
            if v.tag.startswith("enum:"):
                self.f("mask_eq")
                return f"(s.{v.name} == {self.eexpr(ctx, 0, v.tag)})"
            self.f("mask_eq")
            return f"(s.{v.name} == {self.req(ctx, 'page', 0, lit=True)})"  # opage handled above

        def combine() -> str:
            op = ch.choice(["&", "|"])
            self.f("mask_and" if op == "&" else "mask_or")
            return f"({self.mask(ctx, dim, d - 1)} {op} {self.mask(ctx, dim, d - 1)})"

        def invert() -> str:
            self.f("mask_invert")
            return f"(~{self.mask(ctx, dim, d - 1)})"

        helpers = self.value_helpers(ctx, "pmask") if dim == "page" else []
        opts: list[tuple[int, Callable[[], str | None]]] = [
            (5 if arrays else 0, compare),
            (3 if locals_ else 0, lambda: ch.choice(locals_)),
            (1 if helpers and d > 0 else 0, lambda: self.call(ctx, ch.choice(helpers), d)),
            (2 if d > 0 else 0, combine),
            (1 if d > 0 else 0, invert),
        ]
        if not arrays and not locals_:  # no per-request array: compare the scalars
            return f"(s.owner == {self.oexpr(ctx, 0, 'oreq', allow_none=True)})" \
                if dim == "page" else self.fallback_request_mask(ctx)
        return self.pick(opts)

    def fallback_request_mask(self, ctx: Ctx) -> str:
        # every model has `owner` over pages; over requests there may be no array
        raise AssertionError("no request array")

    def fold(self, ctx: Ctx, d: int, op: str) -> str:
        ch = self.ch
        v = ctx.fresh("v")
        inner = ctx.child(gated=True)
        kind = ch.choice(["pages", "requests", "range"])
        if kind == "pages":
            dom, inner.names[v] = "s.pages", "page"
        elif kind == "requests":
            dom, inner.names[v] = "s.requests", "req"
        else:
            dom, inner.names[v] = ch.choice(["range(3)", "range(s.cap)", "(0, 1)"]), "int"
        if ctx.kind in ("helper", "invariant", "action") and d > 1 and ch.chance(0.2):
            self.f("nested_fold")
        self.f({"any": "fold_any", "all": "fold_all", "sum": "fold_sum"}[op])
        elt = self.iexpr(inner, d - 1) if op == "sum" else self.bexpr(inner, d - 1)
        cond = ""
        if ch.chance(0.5):
            self.f("fold_if")
            cond = f" if {self.bexpr(inner, d - 1)}"
        if ch.chance(0.15):
            return f"{op}([{elt} for {v} in {dom}{cond}])"
        return f"{op}({elt} for {v} in {dom}{cond})"

    def bexpr(self, ctx: Ctx, d: int) -> str:
        ch = self.ch
        st_ok = ctx.state
        bools = self.vars_of("bool") if st_ok else []
        enums = [t for t in ("enum:Color", "enum:Mode")
                 if (self.vars_of(t) and st_ok) or ctx.of(t)]
        opt_tags = [t for t in ("oreq", "opage")
                    if (self.vars_of(t) and st_ok) or ctx.of(t)
                    or self.value_helpers(ctx, t)]
        req_names = ctx.of("req") + ctx.of("page")
        helpers = self.value_helpers(ctx, "bool")
        has_req_array = any(v.dim == "request" for v in self.vars)

        def int_cmp() -> str:
            op = ch.choice(["==", "!=", "<", "<=", ">", ">="])
            return f"({self.iexpr(ctx, d - 1)} {op} {self.iexpr(ctx, d - 1)})"

        def chained() -> str:
            self.f("chained_compare")
            g = ctx.child(gated=True)  # the middle is evaluated twice, once under the first
            return (f"({self.iexpr(ctx, 0)} <= {self.iexpr(g, d - 1)} < "
                    f"{self.iexpr(g, 0)})")

        def enum_cmp() -> str:
            tag = ch.choice(enums)
            cls = tag[5:]
            x = self.eexpr(ctx, d - 1, tag)
            form = ch.choice(["eq", "ne", "in", "not_in"])
            if form in ("eq", "ne"):
                self.f("enum_eq")
                return f"({x} {'==' if form == 'eq' else '!='} {cls}.{ch.choice(ENUMS[cls])})"
            self.f("enum_in" if form == "in" else "enum_not_in")
            members = ", ".join(f"{cls}.{m}" for m in ENUMS[cls][:ch.int(1, 2)])
            if ch.chance(0.3):
                self.f("list_in")
                return f"({x} {'in' if form == 'in' else 'not in'} [{members}])"
            return f"({x} {'in' if form == 'in' else 'not in'} ({members},))"

        def opt_cmp() -> str | None:
            tag = ch.choice(opt_tags)
            x = self.oexpr(ctx, d - 1, tag, allow_none=False)
            if x is None:
                return None
            form = ch.choice(["is", "is_not", "eq", "ne"])
            if form in ("is", "is_not"):
                self.f("is_none" if form == "is" else "is_not_none")
                return f"({x} is {'not ' if form == 'is_not' else ''}None)"
            self.f("id_eq")
            other = self.req(ctx, "req" if tag == "oreq" else "page", 0, lit=True)
            return f"({x} {'==' if form == 'eq' else '!='} {other})"

        def id_cmp() -> str | None:
            tag = ch.choice(["req", "page"])
            if not ctx.of(tag):
                return None
            a, b = self.req(ctx, tag, 0), self.req(ctx, tag, 0)
            if ch.chance(0.15):
                self.f("id_order")
                return f"({a} < {b})"
            self.f("id_eq")
            return f"({a} {'==' if ch.chance(0.5) else '!='} {b})"

        def logic() -> str:
            op = ch.choice(["and", "or", "and", "or", "&", "|"])
            if op in ("&", "|"):
                self.f("bool_bitop")
            else:
                self.f(op)
            n = ch.int(2, 3) if op in ("and", "or") else 2
            g = ctx.child(gated=True) if op in ("and", "or") else ctx
            items = [self.bexpr(ctx, d - 1)] + [self.bexpr(g, d - 1) for _ in range(n - 1)]
            return "(" + f" {op} ".join(items) + ")"

        def reduce() -> str:
            dim = "page" if not has_req_array or ch.chance(0.6) else "request"
            m = self.mask(ctx, dim, d - 1)
            form = ch.choice(["any", "all", "any_", "all_", "anyb", "allb", "count"])
            if form == "count":
                self.f("count_method")
                return f"({m}.count() {ch.choice(['==', '>=', '<'])} {ch.int(0, 2)})"
            self.f({"any": "any_method", "all": "all_method", "any_": "any_fn", "all_": "all_fn",
                    "anyb": "any_builtin", "allb": "any_builtin"}[form])
            return {"any": f"{m}.any()", "all": f"{m}.all()", "any_": f"any_({m})",
                    "all_": f"all_({m})", "anyb": f"any({m})", "allb": f"all({m})"}[form]

        opts: list[tuple[int, Callable[[], str | None]]] = [
            (1, lambda: ch.choice(["True", "False"])),
            (3 if ctx.of("bool") else 0, lambda: ch.choice(ctx.of("bool"))),
            (4 if bools else 0, lambda: self.load(ctx, ch.choice(bools))),
            (4 if d > 0 else 0, int_cmp),
            (1 if d > 0 else 0, chained),
            (3 if d > 0 and enums else 0, enum_cmp),
            (3 if d > 0 and opt_tags else 0, opt_cmp),
            (1 if d > 0 else 0, id_cmp),
            (1 if d > 0 else 0, lambda: (self.f("not"), f"(not {self.bexpr(ctx, d - 1)})")[1]),
            (3 if d > 0 else 0, logic),
            (3 if d > 0 and st_ok else 0, reduce),
            (2 if d > 0 and st_ok else 0,
             lambda: self.fold(ctx, d, ch.choice(["any", "all"]))),
            (1 if d > 0 else 0, lambda: self.cond(ctx, d, lambda g: self.bexpr(g, d - 1))),
            (2 if helpers and d > 0 else 0, lambda: self.call(ctx, ch.choice(helpers), d)),
        ]
        return self.pick(opts)


# -- entry points --------------------------------------------------------------------------------

def generate(ch: Any, *, small: bool = False) -> GenModel:
    return ModelGen(ch, small=small).model()


@st.composite
def models(draw: Any, small: bool = False) -> GenModel:
    """A random valid model (Hypothesis strategy)."""
    return generate(DrawChooser(draw), small=small)


def random_model(seed: int, *, small: bool = False) -> GenModel:
    return generate(RandomChooser(random.Random(seed)), small=small)
