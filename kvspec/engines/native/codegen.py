"""The model part of the native search, written in C from the transition system.

For every action instance, :func:`kvspec.engines.transition.encode_instance` gives
its enabling term, one next-value term per slot it may write, its model-error
conditions and its events' guards — the symbolic interpretation of the very body
the concrete interpretation runs. This module lowers them (with the invariants'
bad-state terms and their error conditions) to straight-line C:

* ``kv_expand`` runs every instance on an unpacked state in the order of
  :meth:`System.batches` (the Python search's order, so states get the same
  indices): first its error conditions, then its guard, then its updates into a
  packed (or, under symmetry, unpacked) successor handed to ``kv_succ``;
* ``kv_inv_bad`` / ``kv_inv_err``: the invariants violated on a state, and whether
  evaluating some invariant raises a model error there;
* ``kv_decode`` / ``kv_pack``: the layout of :mod:`kvspec.engines.native.layout`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import z3

from kvspec.engines.canon import Canonicalizer
from kvspec.engines.native.layout import Layout, plan
from kvspec.engines.native.terms import Lowering, Unsupported, literal
from kvspec.engines.native.units import split_units
from kvspec.engines.transition import (BitVecImage, EncodingOverflow, InstanceEncoding,
                                       encode_instance, simplified)
from kvspec.lang.system import ActionInstance, Property, System
from kvspec.lang.types import PAGE, PAGE_BY_REQUEST, REQUEST, ValueType
from kvspec.lang.z3gen import StepEncoding, int_value, is_false, is_true

__all__ = ["GENERATOR_VERSION", "Generated", "Unsupported", "generate"]

#: part of the build cache key: bump when the generated code changes meaning
GENERATOR_VERSION = "5"
_HERE = Path(__file__).parent
#: the most properties one run tracks (a bit each)
MAX_PROPERTIES = 64
#: instances per generated C function (one huge function makes the compiler slow)
CHUNK = 8
#: how the instance functions are optimised (see :func:`generate`)
INSTANCE_OPTIMIZE = '"O1"'



@dataclass
class Generated:
    source: str
    layout: Layout
    order: list[ActionInstance]       # the instances in the search's order
    kinds: list[str]                  # event kinds, in the order of the coverage counts
    symmetry: tuple[bool, bool]       # (requests, pages) canonicalised in the code
    notes: dict[str, int] = field(default_factory=dict)
    #: ``source`` as the translation units to compile (two, in parallel, when large)
    units: list[str] = field(default_factory=list)


def search_order(system: System) -> list[ActionInstance]:
    """The instances in the order the Python search tries them on a state."""
    return [inst for _guard, groups in system.batches() for _key, group in groups
            for inst in group]


def _kept_for_symmetry(system: System, canon: Canonicalizer | None) -> set[int]:
    """Constant slots that must still be stored: a permutation can change their value."""
    keep: set[int] = set()
    if canon is None or not canon.active:
        return keep
    moved = {REQUEST} if canon.req_sym else set()
    if canon.page_sym:
        moved.add(PAGE)
    for v in system.schema.vars:
        vals = list(system.initial[v.offset:v.offset + v.length])
        is_ref = v.type.ref_dim == REQUEST and canon.req_sym
        permuted = v.dim in moved or v.dim == PAGE_BY_REQUEST and bool(moved)
        uniform = len(set(vals)) <= 1
        if (permuted and not uniform) or (is_ref and any(x >= 0 for x in vals)):
            keep.update(range(v.offset, v.offset + v.length))
    return keep


def generate(system: System, canon: Canonicalizer | None) -> Generated:
    """The C source of the native search for ``system`` (``canon``: the symmetry
    reduction to build in, None for none). Raises :class:`Unsupported`."""
    props = system.properties
    if len(props) > MAX_PROPERTIES:
        raise Unsupported(f"more than {MAX_PROPERTIES} properties")
    cur = system.state_vars()
    slot_of = {str(v): i for i, v in enumerate(cur)}
    order = search_order(system)
    encoded = [encode_instance(system, inst, cur) for inst in order]
    inv_errors = [z3.simplify(c) for c, _ in system.invariant_errors(cur)]
    inv_ids = {c.get_id() for c in inv_errors}
    written = {slot for ie, _ in encoded for slot in ie.updates}
    types = system.slot_types()
    try:
        layout = plan(types, [int(x) for x in system.initial], written,
                      _kept_for_symmetry(system, canon))
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    sym = (canon.req_sym, canon.page_sym) if canon is not None and canon.active else (False, False)
    kinds: list[str] = []
    for _, enc in encoded:
        for ev in enc.events:
            if ev.kind not in kinds:
                kinds.append(ev.kind)
    low = Lowering(slot_of, layout)
    head = _header(system, layout, len(order), len(kinds), sym)
    body = [_decode(layout), _pack(layout)]
    body.append(_invariants(system, cur, low, inv_errors))
    if any(sym):
        assert canon is not None
        body.append(_canon_tables(canon))
        body.append((_HERE / "canon.c").read_text())
    batch_at = len(body)
    body.append(BATCH)
    parts = []
    # The instances are straight-line code the compiler optimises at -O1 (at -O2 they
    # took most of the build for a few percent of the search's speed); the search
    # loop, hashing and canonicalisation around them keep the command line's -O2.
    body.append(f'#pragma GCC push_options\n#pragma GCC optimize ({INSTANCE_OPTIMIZE})')
    first_function = len(body)
    for first in range(0, len(encoded), CHUNK):
        low.lines = []
        low.indent = 1
        for ie, enc in encoded[first:first + CHUNK]:
            _instance(low, layout, ie, enc, inv_ids, kinds, props, any(sym))
        parts.append(f"kv_expand_{len(parts)}")
        # restrict: the coverage counters do not alias the state (fewer reloads, and
        # less work for the compiler)
        body.append(f"static __attribute__((noinline)) int {parts[-1]}(kv_ctx *c, "
                    "kv_batch *restrict b, const uint64_t *restrict w, "
                    "const int64_t *restrict s) {\n"
                    "    int64_t *restrict ci = c->cov_inst, *restrict ce = c->cov_ev;\n"
                    "    (void)b; (void)w; (void)s; (void)ci; (void)ce;\n" +
                    "\n".join(low.lines) + "\n    return 0;\n}\n")
    functions = range(first_function, len(body))
    body.append("#pragma GCC pop_options")
    calls = "".join(f"    if ({name}(c, &b, w, s)) return 1;\n" for name in parts)
    body.append("static int kv_expand(kv_ctx *c, const uint64_t *w, const int64_t *s) {\n"
                f"    kv_batch b;\n    b.n = 0;\n{calls}    return kv_batch_flush(c, &b);\n}}\n")
    invariant_terms = inv_errors + [z3.simplify(system.encode_bad(p, cur)) for p in props
                                    if p.kind == "invariant" and p.flag is None]
    _check_range(low, types, [ie for ie, _ in encoded], [enc for _, enc in encoded],
                 invariant_terms)
    engine = (_HERE / "engine.c").read_text().replace("/*@WINDOWS@*/",
                                                     (_HERE / "windows.c").read_text())
    source = engine.replace("/*@HEADER@*/", head).replace("/*@MODEL@*/", "\n".join(body))
    split = split_units(source, engine, head, body, batch_at, functions)
    notes = {"slots": len(types), "stored_slots": sum(s.const is None for s in layout.slots),
             "bits": layout.bits, "state_bytes": layout.state_bytes, "instances": len(order)}
    return Generated(source, layout, order, kinds, sym, notes, split.units)


#: values (and literals) up to this magnitude, without products, cannot overflow int64
SMALL_VALUES = 2 ** 20
INT64_REACH = 2 ** 62


def _check_range(low: Lowering, types: list[ValueType], steps: list[InstanceEncoding],
                 encs: list[StepEncoding], extra: list[z3.BoolRef]) -> None:
    """Every value the generated code computes fits a C ``int64_t``: obvious for small
    domains and literals without products, otherwise shown by the interval analysis
    of the bit-vector encoding (:class:`BitVecImage`); Unsupported when not."""
    bounds = {}
    widest = 0
    for i, t in enumerate(types):
        if t.kind != "bool":
            dom = [int(x) for x in t.domain()]
            bounds[i] = (min(dom), max(dom))
            widest = max(widest, abs(bounds[i][0]), abs(bounds[i][1]))
    if widest <= SMALL_VALUES and low.largest <= SMALL_VALUES and not low.products:
        return
    names = {name: bounds[slot] for name, slot in low.slot_of.items() if slot in bounds}
    probe = BitVecImage(names, 64)
    terms: list[z3.ExprRef] = list(extra)
    for ie, enc in zip(steps, encs):
        terms += [ie.enabled, *ie.updates.values(), *[c for c, _ in ie.errors]]
        terms += [ev.guard for ev in enc.events]
    try:
        reach = max([0] + [probe.reach(t) for t in terms])
    except EncodingOverflow as exc:
        raise Unsupported(str(exc)) from None
    if reach >= INT64_REACH:
        raise Unsupported(f"values up to {reach} do not fit 64-bit integers")


def _instance(low: Lowering, layout: Layout, ie: InstanceEncoding, enc: StepEncoding,
              inv_ids: set[int], kinds: list[str], props: list[Property], sym: bool) -> None:
    """One instance: its error conditions, its guard, its successor."""
    errors = [c for c, _ in ie.errors if c.get_id() not in inv_ids]
    updates = sorted(ie.updates.items())
    guards = [(kinds.index(ev.kind), simplified(ev.guard)) for ev in enc.events]
    # the events themselves, for the edge mode (the monitor of the liveness product)
    emitted = [(k, g, simplified(ev.request), None if ev.page is None else simplified(ev.page))
               for (k, g), ev in zip(guards, enc.events)]
    args = [t for _, _, r, p in emitted for t in (r, p) if t is not None]
    low.begin([ie.enabled, *errors, *[t for _, t in updates], *[g for _, g in guards], *args])
    low.put(f"{{ /* {ie.inst.label()} */")
    with low.nested():
        if errors:  # the successors before it were found first
            cond = " || ".join(low.expr(c) for c in errors)
            low.put(f"if ({cond}) {{ if (!kv_batch_flush(c, b)) c->r->err_inst = {ie.inst.index}; "
                    "return 1; }")
        if is_false(ie.enabled):
            low.put("(void)0;")
        else:
            low.put(f"if ({low.expr(ie.enabled)}) {{")
            with low.nested():
                _successor(low, layout, updates, guards, ie.inst.index, props, sym, emitted)
            low.put("}")
    low.put("}")


def _header(system: System, layout: Layout, ninst: int, nkinds: int,
            sym: tuple[bool, bool]) -> str:
    via = "uint16_t" if ninst < 0xFFFF else "uint32_t"
    return "\n".join([
        f"#define NSLOTS {len(layout.slots)}", f"#define NW {layout.words}",
        f"#define SB {layout.state_bytes}", f"#define NINST {ninst}",
        f"#define NPROPS {len(system.properties)}", f"#define NKINDS {max(nkinds, 1)}",
        f"#define SYMMETRY {int(any(sym))}", f"typedef {via} via_t;",
        "static inline int64_t kv_fdiv(int64_t a, int64_t b) {",
        "    int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }",
        "static inline int64_t kv_fmod(int64_t a, int64_t b) {",
        "    int64_t m = a % b; return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; }", ""])


def _decode(layout: Layout) -> str:
    lines = ["static inline void kv_decode(const uint64_t *w, int64_t *s) {", "    (void)w;"]
    for i, sl in enumerate(layout.slots):
        if sl.const is not None:
            lines.append(f"    s[{i}] = {literal(sl.const)};")
        else:
            lines.append(f"    s[{i}] = (int64_t)((w[{sl.word}] >> {sl.shift}) & "
                         f"UINT64_C({sl.mask})) + {literal(sl.lo)};")
    return "\n".join(lines) + "\n}\n"


def _pack(layout: Layout) -> str:
    """``w`` must be zero; constant slots are not stored."""
    lines = ["static inline void kv_pack(const int64_t *s, uint64_t *w) {", "    (void)s; (void)w;"]
    for i, sl in enumerate(layout.slots):
        if sl.const is None:
            lines.append(f"    w[{sl.word}] |= (uint64_t)(s[{i}] - {literal(sl.lo)}) << {sl.shift};")
    return "\n".join(lines) + "\n}\n"


def _invariants(system: System, cur: list[z3.ExprRef], low: Lowering,
                inv_errors: list[z3.BoolRef]) -> str:
    bads = [(k, z3.simplify(system.encode_bad(p, cur))) for k, p in enumerate(system.properties)
            if p.kind == "invariant" and p.flag is None]
    low.lines = []
    low.begin([c for c in inv_errors])
    cond = " || ".join(low.expr(c) for c in inv_errors) or "0"
    err = "static int kv_inv_err(const int64_t *s) {\n    (void)s;\n" + "\n".join(low.lines) + \
        f"\n    return {cond};\n}}\n"
    low.lines = []
    low.begin([b for _, b in bads])
    terms = [f"({low.expr(b)} ? UINT64_C(1) << {k} : 0)" for k, b in bads]
    bad = "static uint64_t kv_inv_bad(const int64_t *s) {\n    (void)s;\n" + \
        "\n".join(low.lines) + f"\n    return {' | '.join(terms) or '0'};\n}}\n"
    return err + bad


def _successor(low: Lowering, layout: Layout, updates: list[tuple[int, z3.ExprRef]],
               guards: list[tuple[int, z3.BoolRef]], index: int, props: list[Property],
               sym: bool, emitted: list[tuple[int, z3.BoolRef, z3.ExprRef, z3.ExprRef | None]]
               ) -> None:
    names: list[tuple[int, str]] = []  # (slot, its new value: a local or a literal)
    consts: dict[int, int] = {}        # slots written a constant
    for slot, term in updates:
        value = _constant(term)
        if value is not None:
            consts[slot] = value
            names.append((slot, literal(value)))
            continue
        text = low.expr(term)
        name = f"u{len(names)}"
        low.put(f"const int64_t {name} = {text};")
        names.append((slot, name))
    flag_bit = {p.flag: k for k, p in enumerate(props) if p.flag is not None}
    viol = [f"({name} ? UINT64_C(1) << {flag_bit[slot]} : 0)" for slot, name in names
            if slot in flag_bit and slot not in consts]
    fixed = sum(1 << flag_bit[slot] for slot, v in consts.items() if slot in flag_bit and v)
    if fixed:
        viol.append(f"UINT64_C({fixed})")
    low.put(f"ci[{index}]++;")
    counted: dict[int, int] = {}
    for kind, g in guards:
        if is_true(g):
            counted[kind] = counted.get(kind, 0) + 1
        elif not is_false(g):
            low.put(f"ce[{kind}] += ({low.expr(g)}) ? 1 : 0;")
    for kind, times in counted.items():
        low.put(f"ce[{kind}] += {times};")
    low.put(f"const uint64_t viol = {' | '.join(viol) or '0'};")
    if sym:
        low.put("int64_t t[NSLOTS]; memcpy(t, s, sizeof t);")
        for slot, name in names:
            low.put(f"t[{slot}] = {name};")
        low.put(f"if (kv_batch_push_full(c, b, t, {index}, viol)) return 1;")
        return
    if emitted:
        low.put("if (c->edge_cap >= 0) {  /* edge mode: the events of this transition */")
        with low.nested():
            for kind, g, r, p in emitted:
                if is_false(g):
                    continue
                page = "-1" if p is None else low.expr(p)
                call = f"if (kv_event(c, {kind}, {low.expr(r)}, {page})) return 1;"
                low.put(call if is_true(g) else f"if ({low.expr(g)}) {{ {call} }}")
        low.put("}")
    low.put("uint64_t n[NW]; memcpy(n, w, sizeof n);")
    # one assignment per word written: the constant part folded into one literal
    words: dict[int, tuple[int, int, list[str]]] = {}
    for slot, name in names:
        sl = layout.slots[slot]
        clear, bits, parts = words.get(sl.word, (0, 0, []))
        clear |= sl.mask << sl.shift
        if slot in consts:
            bits |= ((consts[slot] - sl.lo) & sl.mask) << sl.shift
        else:
            parts.append(f"((uint64_t)({name} - {literal(sl.lo)}) << {sl.shift})")
        words[sl.word] = (clear, bits, parts)
    for word, (clear, bits, parts) in words.items():
        terms = [f"(w[{word}] & UINT64_C({~clear & (2 ** 64 - 1)}))"] + parts
        if bits:
            terms.append(f"UINT64_C({bits})")
        low.put(f"n[{word}] = {' | '.join(terms)};")
    low.put(f"if (kv_batch_push(c, b, n, {index}, viol)) return 1;")


#: The successors of the state being expanded are collected (up to KV_BATCH) and
#: handed to ``kv_succ`` in the order they were found, so the states get the same
#: indices; the hash-table slot of each is prefetched as it is computed, so the
#: table's cache misses overlap instead of stalling one transition each. An
#: instance's model error hands the successors found before it over first. In edge
#: mode a successor goes straight to ``kv_succ`` (its events are recorded just
#: before it). In the breadth-first search of one thread (``c->solo``) it goes
#: straight to the records of the window of states being expanded (``kv_collect``),
#: looked up only when they are stored, with prefetching that runs further ahead
#: (windows.c, ``kv_store_window``).
BATCH = r"""
#define KV_BATCH 64
static inline uint64_t kv_hash(const uint64_t *w);
typedef struct kv_batch {
    int n;
    struct { uint64_t w[NW]; int64_t inst; uint64_t viol; } e[KV_BATCH];
} kv_batch;

static __attribute__((noinline)) int kv_batch_flush(kv_ctx *c, kv_batch *b) {
    int n = b->n;
    b->n = 0;
    for (int i = 0; i < n; i++)
        if (kv_succ(c, b->e[i].w, b->e[i].inst, b->e[i].viol)) return 1;
    return 0;
}

static __attribute__((noinline)) int kv_batch_push(kv_ctx *c, kv_batch *b, const uint64_t *w,
                                             int64_t inst, uint64_t viol) {
    if (c->solo) return kv_collect(c, w, inst, viol);
    if (c->edge_cap >= 0) return kv_succ(c, w, inst, viol);
    if (b->n == KV_BATCH && kv_batch_flush(c, b)) return 1;
    memcpy(b->e[b->n].w, w, sizeof b->e[b->n].w);
    b->e[b->n].inst = inst;
    b->e[b->n].viol = viol;
    b->n++;
    uint64_t k = (kv_hash(w) >> 32) & c->mask;
    if (c->fingerprint) __builtin_prefetch(&c->fp[k]);
    else __builtin_prefetch(&c->table[k]);
    return 0;
}
#if SYMMETRY
static __attribute__((noinline)) int kv_batch_push_full(kv_ctx *c, kv_batch *b, const int64_t *t,
                                                  int64_t inst, uint64_t viol) {
    int64_t k[NSLOTS];
    uint64_t w[NW];
    kv_canon(t, k);
    memset(w, 0, sizeof w);
    kv_pack(k, w);
    return kv_batch_push(c, b, w, inst, viol);
}
#endif
"""


def _constant(term: z3.ExprRef) -> int | None:
    """The value of a literal term (an integer or a truth value), else None."""
    if is_true(term):
        return 1
    if is_false(term):
        return 0
    return int_value(term)


def _canon_tables(canon: Canonicalizer) -> str:
    def table(name: str, rows: list[tuple[int, bool]]) -> list[str]:
        offs = ", ".join(str(o) for o, _ in rows) or "0"
        refs = ", ".join(str(int(r)) for _, r in rows) or "0"
        return [f"#define N{name} {len(rows)}",
                f"static const int {name}_OFF[] = {{{offs}}};",
                f"static const int {name}_REF[] = {{{refs}}};"]
    lines = [f"#define CR {canon.R}", f"#define CP {canon.P}",
             f"#define REQ_SYM {int(canon.req_sym)}", f"#define PAGE_SYM {int(canon.page_sym)}",
             f"#define SCALAR_REFS {int(canon._scalar_refs)}"]
    lines += table("SC", canon.scalars) + table("RV", canon.req_vars)
    lines += table("PV", canon.page_vars) + table("GV", canon.grid_vars)
    return "\n".join(lines) + "\n"
