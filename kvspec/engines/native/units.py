"""The generated search as two translation units, compiled in parallel.

Most of a large model's build is compiling its action instances; the search loop
around them is the same amount of code for every model. Two units, each with
about half of the work, compile on two cores in about half the time:

* unit A is the whole program of :func:`kvspec.engines.native.codegen.generate`
  with the instance functions handed to unit B only declared, and, for those,
  the successor hand-over functions (``kv_batch_*``) made callable from the other
  unit through small wrappers;
* unit B is the engine's declarations (everything before its model part: types,
  ``kv_event``), the header of the model, and the instance functions it was given,
  which call the wrappers instead.

The two units link into one shared object that computes exactly what the single
program computes: the instance functions are the same text, only their linkage
differs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Split", "split_units"]

#: the engine functions the instance code calls that live in unit A
#: (signature, whether it exists only in a build with symmetry reduction)
SHARED = [
    ("int kv_batch_flush(kv_ctx *c, kv_batch *b)", False),
    ("int kv_batch_push(kv_ctx *c, kv_batch *b, const uint64_t *w, int64_t inst, "
     "uint64_t viol)", False),
    ("int kv_batch_push_full(kv_ctx *c, kv_batch *b, const int64_t *t, int64_t inst, "
     "uint64_t viol)", True),
]
_HIDDEN = '__attribute__((visibility("hidden"))) '
#: compiling the search loop costs about as much as this much instance code (bytes)
ENGINE_WEIGHT = 140_000
#: below this much instance code one unit builds as fast (no second compiler, no link)
MIN_SPLIT = 40_000


@dataclass
class Split:
    units: list[str]  # one or two complete C translation units
    moved: int        # instance functions compiled in the second unit


def _name_args(signature: str) -> tuple[str, list[str]]:
    head, _, args = signature.partition("(")
    name = head.split()[-1]
    return name, [re.findall(r"\w+", a)[-1] for a in args.rstrip(")").split(",")]


def _wrappers() -> str:
    """Unit A: a visible ``kv_x_<name>`` calling each static ``<name>``."""
    out = []
    for sig, sym_only in SHARED:
        name, args = _name_args(sig)
        wrapped = sig.replace(f" {name}(", f" kv_x_{name.removeprefix('kv_')}(", 1)
        text = f"{_HIDDEN}{wrapped} {{ return {name}({', '.join(args)}); }}"
        out.append(f"#if SYMMETRY\n{text}\n#endif" if sym_only else text)
    return "\n".join(out) + "\n"


def _declarations() -> str:
    """Unit B: the wrappers declared, and the instance code's calls renamed to them."""
    out = ["typedef struct kv_batch kv_batch;"]
    for sig, _ in SHARED:
        name, _ = _name_args(sig)
        wrapped = f"kv_x_{name.removeprefix('kv_')}"
        out.append(sig.replace(f" {name}(", f" {wrapped}(", 1) + ";")
        out.append(f"#define {name} {wrapped}")
    return "\n".join(out) + "\n"


def _signature(function: str) -> str:
    """``static ... int kv_expand_3(...)`` of a definition, without ``static``."""
    return function[:function.index(") {") + 1].removeprefix("static ")


def split_units(source: str, engine: str, head: str, body: list[str], batch_at: int,
                functions: range) -> Split:
    """``source``, the program of ``engine`` with ``head`` and the model ``body`` (whose
    element ``batch_at`` defines the ``kv_batch_*`` functions and whose elements at
    ``functions`` are the instance functions, each ``static ... kv_expand_<k>(...)``),
    as one unit, or as two when the instance code is large enough to gain."""
    marker = "/*@MODEL@*/"
    sizes = [len(body[i]) for i in functions]
    total = sum(sizes)
    if total < MIN_SPLIT:
        return Split([source], 0)
    prefix = engine[:engine.index(marker)].replace("/*@HEADER@*/", head)
    # unit B takes instance functions from the end until it holds about half of the
    # work (all of them when they are less work than the search loop)
    target = min(total, (total + ENGINE_WEIGHT) // 2)
    moved: list[int] = []
    acc = 0
    for i, size in zip(reversed(functions), reversed(sizes)):
        if acc >= target:
            break
        moved.append(i)
        acc += size
    a = list(body)
    b = [prefix, _declarations(), body[functions.start - 1]]  # the instances' optimisation
    for i in sorted(moved):
        a[i] = f"{_HIDDEN}{_signature(body[i])};"
        b.append(_HIDDEN + body[i].removeprefix("static "))
    a[batch_at] = body[batch_at] + "\n" + _wrappers()
    unit_a = engine.replace("/*@HEADER@*/", head).replace(marker, "\n".join(a))
    return Split([unit_a, "\n".join(b) + "\n"], len(moved))
