"""Deciding, from the model itself, whether request ids and page ids are
interchangeable, so that symmetry reduction is sound.

Two checks, both must pass for an id space:

1. **Static** — a light type inference over every action, invariant and helper
   body. Request (page) symmetry is broken by: an ordering comparison or
   arithmetic on an id; comparing an id with a literal; indexing a per-request
   (per-page) array with anything but a request (page) id; a literal id passed to
   ``emit``/stored in a reference variable; a loop over ids that carries a local
   from one iteration to the next (e.g. a lowest-numbered-free-page allocator);
   an id passed to a function that is not part of kvspec; non-uniform initial
   values of a per-id array.
2. **Dynamic** — on states sampled by a short random walk, the successors of a
   permuted state must be the permuted successors (compared as canonical forms),
   with the same property violations.
"""
from __future__ import annotations

import ast
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvspec.lang.declare import SCALAR
from kvspec.lang.lowering import ParsedBody
from kvspec.lang.types import PAGE, REQUEST

if TYPE_CHECKING:
    from kvspec.lang.system import System

_SAFE_CALLS = {"require", "count", "any_", "all_", "len", "any", "all", "sum"}
_DIMS = (REQUEST, PAGE)


@dataclass
class SymmetryReport:
    enabled: bool
    requests: bool
    pages: bool
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "requests": self.requests, "pages": self.pages,
                "reasons": list(self.reasons)}

    def summary(self) -> str:
        if not self.enabled:
            return "symmetry reduction off (--no-symmetry)"
        on = [d for d, ok in (("requests", self.requests), ("pages", self.pages)) if ok]
        text = "symmetry reduction over " + (" and ".join(on) if on else "nothing")
        return text


class _Typer(ast.NodeVisitor):
    """Infers id types of expressions in one body and records symmetry breaks."""

    def __init__(self, body: ParsedBody, var_dims: dict[str, tuple[str, str | None]],
                 param_types: dict[str, str | None], helpers: set[str],
                 breaks: dict[str, list[str]]) -> None:
        self.body = body
        self.var_dims = var_dims  # var -> (array dim, ref dim of its values)
        self.env: dict[str, Any] = dict(param_types)
        self.state = body.params[0] if body.params else None
        self.helpers = helpers
        self.breaks = breaks

    def brk(self, dim: str, node: ast.AST, why: str) -> None:
        line = getattr(node, "lineno", self.body.first_line)
        file = self.body.file.rsplit("/", 1)[-1]
        self.breaks[dim].append(f"{file}:{line}: {why}")

    # -- types ----------------------------------------------------------------------
    def type_of(self, node: ast.expr) -> Any:
        """'request'/'page' for ids, ('mask', dim)/('array', dim) for vectors, else None."""
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Attribute) and self._is_state(node.value):
            if node.attr in self.var_dims:
                dim, ref = self.var_dims[node.attr]
                return ("array", dim) if dim != SCALAR else ref
            if node.attr == "requests":
                return ("ids", REQUEST)
            if node.attr == "pages":
                return ("ids", PAGE)
            return None
        if isinstance(node, ast.Subscript):
            base = self.type_of(node.value)
            if isinstance(base, tuple) and base[0] == "array":
                assert isinstance(node.value, ast.Attribute)
                return self.var_dims[node.value.attr][1]
            return None
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left = self.type_of(node.left)
            if isinstance(left, tuple) and left[0] == "array":
                return ("mask", left[1])
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            left = self.type_of(node.left)
            return left if isinstance(left, tuple) and left[0] == "mask" else \
                self.type_of(node.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self.type_of(node.operand)
        if isinstance(node, ast.IfExp):
            a, b = self.type_of(node.body), self.type_of(node.orelse)
            return a if a == b else (a or b if _is_none(node.body) or _is_none(node.orelse)
                                     else None)
        return None

    def _is_state(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == self.state

    # -- visiting ----------------------------------------------------------------------
    def run(self) -> None:
        for stmt in self.body.tree.body:
            self.visit(stmt)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        t = self.type_of(node.value)
        for target in node.targets:
            self._store(target, node.value, t)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self.visit(node.target)
        t = self.type_of(node.target)
        if t in _DIMS:
            self.brk(t, node, f"arithmetic on a {t} id")

    def _store(self, target: ast.expr, value: ast.expr, t: Any) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = t
            return
        if isinstance(target, ast.Subscript):
            self.visit(target)
            base = self.type_of(target.value)
            if isinstance(base, tuple) and base[0] == "array":
                assert isinstance(target.value, ast.Attribute)
                self._check_value(self.var_dims[target.value.attr][1], value, t, target)
            return
        if isinstance(target, ast.Attribute) and self._is_state(target.value):
            if target.attr in self.var_dims:
                self._check_value(self.var_dims[target.attr][1], value, t, target)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._store(elt, value, None)

    def _check_value(self, ref: str | None, value: ast.expr, t: Any, node: ast.AST) -> None:
        """Storing ``value`` (of type ``t``) into a variable whose values are ``ref`` ids."""
        if t in _DIMS and ref != t:
            self.brk(t, node, f"a {t} id is stored in a variable that does not hold {t} ids")
        if ref in _DIMS and _is_int_constant(value):
            self.brk(ref, node, f"a literal {ref} id is stored")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.generic_visit(node)
        base = self.type_of(node.value)
        if isinstance(base, tuple) and base[0] in ("array", "mask", "ids"):
            dim = base[1]
            idx = self.type_of(node.slice)
            if idx == dim or (isinstance(idx, tuple) and idx == ("mask", dim)):
                return
            if _is_int_constant(node.slice):
                self.brk(dim, node, f"a per-{dim} array is indexed with a literal")
            else:
                self.brk(dim, node, f"a per-{dim} array is indexed with something that is not "
                                    f"a {dim} id")

    def visit_Compare(self, node: ast.Compare) -> None:
        self.generic_visit(node)
        operands = [node.left] + list(node.comparators)
        for op, (a, b) in zip(node.ops, zip(operands, operands[1:])):
            ta, tb = self._id_type(a), self._id_type(b)
            for t, other in ((ta, b), (tb, a)):
                if t not in _DIMS:
                    continue
                if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                    self.brk(t, node, f"{t} ids are compared by order")
                elif _is_int_constant(other):
                    self.brk(t, node, f"a {t} id is compared with a literal")

    def _id_type(self, node: ast.expr) -> Any:
        t = self.type_of(node)
        if isinstance(t, tuple) and t[0] == "array":
            return self.var_dims[node.attr][1] if isinstance(node, ast.Attribute) else None
        return t

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.generic_visit(node)
        if isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            return
        for side in (node.left, node.right):
            t = self.type_of(side)
            if t in _DIMS:
                self.brk(t, node, f"arithmetic on a {t} id")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        self.generic_visit(node)
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            t = self.type_of(node.operand)
            if t in _DIMS:
                self.brk(t, node, f"arithmetic on a {t} id")

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "emit":
            args = list(node.args)
            if args and _is_int_constant(args[0]):
                self.brk(REQUEST, node, "emit with a literal request id")
            if len(args) > 1 and _is_int_constant(args[1]):
                self.brk(PAGE, node, "emit with a literal page id")
            return
        name = func.id if isinstance(func, ast.Name) else None
        if isinstance(func, ast.Attribute) and func.attr in ("any", "all", "count", "is_none"):
            return
        if name in _SAFE_CALLS or name in self.helpers:
            return
        for arg in list(node.args) + [k.value for k in node.keywords]:
            t = self.type_of(arg)
            if t in _DIMS:
                self.brk(t, node, f"a {t} id is passed to {name or 'a function'}(), which kvspec "
                                  "cannot see into")

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        it = self.type_of(node.iter)
        loop_dim = it[1] if isinstance(it, tuple) and it[0] == "ids" else None
        if isinstance(node.target, ast.Name):
            self.env[node.target.id] = loop_dim
        if loop_dim is not None:
            carried = _carried_locals(node, self.body)
            for name in carried:
                self.brk(loop_dim, node, f"the loop over {loop_dim}s carries local {name!r} from "
                                         "one iteration to the next (order-dependent; use masks)")
        for stmt in node.body:
            self.visit(stmt)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_int_constant(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int) \
        and not isinstance(node.value, bool)


def _carried_locals(loop: ast.For, body: ParsedBody) -> list[str]:
    """Locals assigned in the loop body that are also assigned before the loop
    or read after it: their value flows between iterations."""
    assigned = {n.id for stmt in loop.body for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(loop.target, ast.Name):
        assigned.discard(loop.target.id)
    if not assigned:
        return []
    before: set[str] = set()
    after: set[str] = set()
    loop_nodes = {id(n) for n in ast.walk(loop)}
    for n in ast.walk(body.tree):
        if isinstance(n, ast.Name) and id(n) not in loop_nodes:
            if getattr(n, "lineno", 0) < loop.lineno and isinstance(n.ctx, ast.Store):
                before.add(n.id)
            elif getattr(n, "lineno", 0) > loop.lineno and isinstance(n.ctx, ast.Load):
                after.add(n.id)
    return sorted(name for name in assigned if name in before or name in after)


def static_breaks(system: "System") -> dict[str, list[str]]:
    """Reasons, per id space, why the model does not treat its ids interchangeably."""
    breaks: dict[str, list[str]] = {REQUEST: [], PAGE: []}
    var_dims: dict[str, tuple[str, str | None]] = {
        v.name: (v.dim, v.type.ref_dim) for v in system.schema.vars}
    helpers = set(system.helper_bodies)
    for a in system.actions:
        params = {name: t.ref_dim for name, t in a.params}
        _Typer(a.body, var_dims, params, helpers, breaks).run()
    for p in system.properties:
        if p.body is not None:
            _Typer(p.body, var_dims, {}, helpers, breaks).run()
    for body in system.helper_bodies.values():
        _Typer(body, var_dims, {n: None for n in body.params}, helpers, breaks).run()
    # initial values must not single out an id
    s0 = system.initial
    for v in system.schema.vars:
        values = s0[v.offset:v.offset + v.length]
        if v.dim in _DIMS and len(set(values)) > 1:
            breaks[v.dim].append(f"variable {v.name!r} starts with different values for "
                                 f"different {v.dim}s")
        if v.type.ref_dim in _DIMS and any(x >= 0 for x in values):
            breaks[v.type.ref_dim].append(f"variable {v.name!r} starts holding a {v.type.ref_dim} id")
        if v.type.ref_dim == PAGE:
            breaks[PAGE].append(f"variable {v.name!r} holds page ids (page symmetry is only "
                                "applied to models whose state does not name pages)")
    return breaks


def dynamic_check(system: "System", requests: bool, pages: bool, *, walks: int = 12,
                  depth: int = 25, seed: int = 0) -> list[str]:
    """Sampled check that transitions commute with the permutations. Returns problems."""
    from kvspec.engines.canon import Canonicalizer

    canon = Canonicalizer(system.schema, requests, pages)
    if not canon.active:
        return []
    rng = random.Random(seed)
    R, P = system.schema.requests, system.schema.pages
    perms = []
    if canon.req_sym:
        perms.append(((1, 0) + tuple(range(2, R)), tuple(range(P))))
        perms.append((tuple((i + 1) % R for i in range(R)), tuple(range(P))))
    if canon.page_sym:
        perms.append((tuple(range(R)), (1, 0) + tuple(range(2, P))))
        perms.append((tuple(range(R)), tuple((i + 1) % P for i in range(P))))

    def signature(state: Any) -> set[Any]:
        return {(canon.canon(res.state)[0], tuple(sorted(v[0] for v in res.violations)))
                for res in system.successors(state)}

    for _ in range(walks):
        state = system.initial
        for _ in range(depth):
            succ = list(system.successors(state))
            mine = signature(state)
            for perm in perms:
                if signature(canon.apply(state, perm)) != mine:
                    dims = [d for d, moved in (("requests", perm[0] != tuple(range(R))),
                                               ("pages", perm[1] != tuple(range(P)))) if moved]
                    return [f"a sampled state behaves differently when its {dims[0]} are "
                            "renamed (dynamic check)"]
            if not succ:
                break
            state = rng.choice(succ).state
    return []


def analyse_symmetry(system: "System", enabled: bool = True) -> SymmetryReport:
    if not enabled:
        return SymmetryReport(False, False, False, ["disabled on the command line"])
    cached = getattr(system, "_symmetry_cache", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    breaks = static_breaks(system)
    req_ok = not breaks[REQUEST] and system.schema.requests > 1
    page_ok = not breaks[PAGE] and system.schema.pages > 1
    reasons = [f"request symmetry off: {r}" for r in breaks[REQUEST][:3]]
    reasons += [f"page symmetry off: {r}" for r in breaks[PAGE][:3]]
    if req_ok or page_ok:
        problems = dynamic_check(system, req_ok, page_ok)
        if problems:
            reasons += problems
            req_ok = page_ok = False
    report = SymmetryReport(True, req_ok, page_ok, reasons)
    system._symmetry_cache = report  # type: ignore[attr-defined]
    return report
