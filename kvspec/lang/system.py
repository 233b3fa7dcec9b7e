"""A model compiled for one choice of sizes: schema, initial state, action
instances, properties, and the concrete and symbolic interpretations of them.
This is the object every engine consumes.
"""
from __future__ import annotations

import itertools
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import z3

from kvspec.lang import fastpath, lowering
from kvspec.lang.concrete import ConcreteMachine
from kvspec.lang.declare import SCALAR, ModelDecl, VarDecl
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.loader import LoadedModel
from kvspec.lang.schema import Schema, State, VarInfo
from kvspec.lang.symbolic import UNDEF, SYM_RUNTIME, StepEncoding, SymKernel
from kvspec.lang.symvalues import z3_var
from kvspec.lang.types import PAGE, REQUEST, BoolType, RefType, ValueType, resolve_type
from kvspec.props import library
from kvspec.props.events import Event

LIBRARY_FILE = library.__file__


@dataclass
class ActionDef:
    name: str
    fn: Callable[..., Any]
    body: lowering.ParsedBody
    params: list[tuple[str, ValueType]]
    fast: Callable[..., Any] | None = None  # hot-path concrete form (kvspec.lang.fastpath)
    guard: tuple[Callable[..., Any], list[int]] | None = None  # hoisted leading guard
    lowered: Callable[..., Any] | None = None


@dataclass(frozen=True)
class ActionInstance:
    index: int
    action: ActionDef
    args: tuple[Any, ...]  # Python values passed to the body

    @property
    def name(self) -> str:
        return self.action.name

    def label(self) -> str:
        parts = [t.fmt(t.encode(a)) for (_, t), a in zip(self.action.params, self.args)]
        return f"{self.name}({', '.join(parts)})"

    def args_json(self) -> dict[str, Any]:
        return {n: t.to_json(t.encode(a)) for (n, t), a in zip(self.action.params, self.args)}


@dataclass
class Property:
    name: str
    kind: str  # "monitor" or "invariant"
    summary: str
    flag: int | None = None  # state slot of the violation flag (monitor properties)
    fn: Callable[..., Any] | None = None  # invariant body
    body: lowering.ParsedBody | None = None
    lowered: Callable[..., Any] | None = None


@dataclass
class StepResult:
    instance: ActionInstance
    state: State
    events: list[Event]
    violations: list[tuple[str, str, Event | None]]


@dataclass
class System:
    loaded: LoadedModel
    sizes: dict[str, int]
    schema: Schema
    initial: State
    actions: list[ActionDef]
    instances: list[ActionInstance]
    properties: list[Property]
    handlers: dict[str, list[Callable[..., Any]]]
    helper_bodies: dict[str, lowering.ParsedBody] = field(default_factory=dict)
    _machine: ConcreteMachine | None = None
    _kernel: SymKernel | None = None
    _lowered_handlers: dict[str, list[Callable[..., Any]]] | None = None
    _batches: list[Any] | None = None

    @property
    def name(self) -> str:
        return self.loaded.decl.name

    @property
    def files(self) -> set[str]:
        return {self.loaded.module.__file__ or self.loaded.file, LIBRARY_FILE}

    @property
    def flags(self) -> dict[str, int]:
        return {p.name: p.flag for p in self.properties if p.flag is not None}

    # -- concrete ------------------------------------------------------------------
    @property
    def machine(self) -> ConcreteMachine:
        if self._machine is None:
            self._machine = ConcreteMachine(self.schema, self.files, self.handlers, self.flags)
        return self._machine

    def step(self, state: State, inst: ActionInstance) -> StepResult | None:
        out = self.machine.step(state, inst.action.fast or inst.action.fn, inst.args)
        if out is None:
            return None
        nxt, events, violations = out
        return StepResult(inst, nxt, events, violations)

    def batches(self) -> list[tuple[Callable[..., Any] | None,
                                    list[tuple[tuple[Any, ...], list[ActionInstance]]]]]:
        """Instances grouped for the hot path: per action, its hoisted guard (or
        None) and the instances sharing each value of the guard's parameters."""
        if self._batches is None:
            out = []
            for a in self.actions:
                insts = [i for i in self.instances if i.action is a]
                if a.guard is None:
                    out.append((None, [((), insts)]))
                    continue
                fn, positions = a.guard
                groups: dict[tuple[Any, ...], list[ActionInstance]] = {}
                for i in insts:
                    groups.setdefault(tuple(i.args[k] for k in positions), []).append(i)
                out.append((fn, list(groups.items())))
            self._batches = out
        return self._batches

    def successors(self, state: State) -> Iterator[StepResult]:
        for inst in self.instances:
            res = self.step(state, inst)
            if res is not None:
                yield res

    def failed_invariants(self, state: State) -> list[str]:
        bad = []
        for p in self.properties:
            if p.kind == "invariant" and p.fn is not None:
                value = self.machine.evaluate(state, p.fn)
                if not isinstance(value, bool):
                    raise ModelError(f"invariant {p.name} must return a bool, got {value!r}",
                                     p.body.file if p.body else None,
                                     p.body.first_line if p.body else None)
                if not value:
                    bad.append(p.name)
        return bad

    def violated_flags(self, state: State) -> list[str]:
        return [p.name for p in self.properties if p.flag is not None and state[p.flag]]

    # -- symbolic ------------------------------------------------------------------
    def _namespace(self) -> dict[str, Any]:
        ns = dict(vars(self.loaded.module))
        ns[lowering.RUNTIME] = SYM_RUNTIME
        ns[lowering.UNDEF_NAME] = UNDEF
        return ns

    def _lower_all(self) -> None:
        if self._lowered_handlers is not None:
            return
        ns = self._namespace()
        for name, body in self.helper_bodies.items():
            ns[name] = lowering.lower(body, ns)
        for a in self.actions:
            a.lowered = lowering.lower(a.body, ns)
        for p in self.properties:
            if p.body is not None:
                p.lowered = lowering.lower(p.body, ns)
        lib_ns = dict(vars(library))
        lib_ns[lowering.RUNTIME] = SYM_RUNTIME
        lib_ns[lowering.UNDEF_NAME] = UNDEF
        self._lowered_handlers = {
            kind: [lowering.lower(lowering.parse_body(h), lib_ns) for h in hs]
            for kind, hs in self.handlers.items()}

    @property
    def kernel(self) -> SymKernel:
        if self._kernel is None:
            self._lower_all()
            self._kernel = SymKernel(self.schema, self.files)
        return self._kernel

    def state_vars(self, suffix: str = "") -> list[z3.ExprRef]:
        """One Z3 constant per state slot, named ``var[i]`` + suffix."""
        out = []
        for v in self.schema.vars:
            for i in range(v.length):
                name = v.label(None if v.dim == SCALAR else i)
                out.append(z3_var(name + suffix, v.type))
        return out

    def slot_types(self) -> list[ValueType]:
        return [v.type for v in self.schema.vars for _ in range(v.length)]

    def encode_step(self, inst: ActionInstance, current: list[z3.ExprRef]) -> StepEncoding:
        kernel = self.kernel
        assert inst.action.lowered is not None and self._lowered_handlers is not None
        try:
            return kernel.run_step(current, inst.action.lowered, inst.args, self._lowered_handlers,
                                   self.flags)
        except ModelError as exc:
            raise exc
        except Exception as exc:
            from kvspec.lang.errors import model_error_from
            raise model_error_from(exc, self.files) from None

    def encode_invariant(self, prop: Property, current: list[z3.ExprRef]) -> z3.BoolRef:
        kernel = self.kernel
        assert prop.lowered is not None
        return kernel.evaluate(current, prop.lowered)

    def encode_bad(self, prop: Property, current: list[z3.ExprRef]) -> z3.BoolRef:
        """The states that violate ``prop``."""
        if prop.flag is not None:
            return current[prop.flag]  # type: ignore[return-value]
        return z3.Not(self.encode_invariant(prop, current))


# -- compiling -------------------------------------------------------------------------

def _resolve_sizes(decl: ModelDecl, overrides: dict[str, int], file: str) -> dict[str, int]:
    known = {s.name: s for s in decl.sizes}
    for key in overrides:
        if key not in known:
            names = ", ".join(known) or "none"
            raise UsageError(f"{file}: unknown size parameter {key!r} (this model has: {names})")
    sizes = {}
    for name, s in known.items():
        value = overrides.get(name, s.default)
        try:
            s.check(value)
        except ModelError as exc:
            raise UsageError(f"{file}: {exc.message}") from None
        sizes[name] = value
    return sizes


def _init_values(decl: VarDecl, vtype: ValueType, length: int, sizes: dict[str, int]) -> list[Any]:
    init = decl.init
    if callable(init) and not isinstance(init, type):
        init = init(dict(sizes))
    values = list(init) if isinstance(init, (list, tuple)) else [init] * length
    if len(values) != length:
        raise ModelError(f"initial value of {decl.name}: expected {length} values, got {len(values)}")
    try:
        return [vtype.encode(v) for v in values]
    except ValueError as exc:
        raise ModelError(f"initial value of {decl.name}: {exc}") from None


def _param_types(fn: Callable[..., Any], module_ns: dict[str, Any], counts: dict[str, int],
                 sizes: dict[str, int], body: lowering.ParsedBody) -> list[tuple[str, ValueType]]:
    try:
        hints = typing.get_type_hints(fn, globalns=module_ns)
    except Exception as exc:
        raise ModelError(f"{fn.__name__}: cannot resolve parameter annotations: {exc}",
                         body.file, body.first_line) from None
    params = []
    for name in body.params[1:]:
        if name not in hints:
            raise ModelError(f"action {fn.__name__}: parameter {name!r} needs a type annotation "
                             "(Request, Page, Int(lo, hi), bool or an Enum)", body.file,
                             body.tree.lineno)
        try:
            vtype = resolve_type(hints[name], sizes, counts, f"parameter {name}")
        except ModelError as exc:
            raise exc.located(body.file, body.tree.lineno)
        if isinstance(vtype, RefType) and vtype.optional:
            raise ModelError(f"action parameter {name!r} cannot be optional", body.file,
                             body.tree.lineno)
        params.append((name, vtype))
    return params


def compile_model(loaded: LoadedModel, overrides: dict[str, int] | None = None,
                  properties: list[str] | None = None) -> System:
    """Resolve sizes, lay out the state, and collect actions and properties."""
    decl = loaded.decl
    file = loaded.file
    module_file = loaded.module.__file__ or file
    sizes = _resolve_sizes(decl, overrides or {}, file)
    counts = {REQUEST: 0, PAGE: 0}
    for s in decl.sizes:
        if s.dim in counts:
            counts[s.dim] = sizes[s.name]
    if counts[REQUEST] == 0:
        raise ModelError(f"{decl.name} declares no requests = Requests(n)", file)
    schema = Schema(sizes, counts)
    initial: list[Any] = []
    for v in decl.vars:
        if v.name in library.MONITOR_VARS:
            raise ModelError(f"state variable {v.name!r} clashes with a property-monitor "
                             "variable; rename it", file, v.line)
        if v.dim != SCALAR and counts.get(v.dim, 0) == 0:
            raise ModelError(f"{v.name}: the model declares no {v.dim}s", file, v.line)
        try:
            vtype = resolve_type(v.type_spec, sizes, counts, f"variable {v.name}")
            info = schema.add(v.name, v.dim, vtype, "model", v.line, file)
            initial.extend(_init_values(v, vtype, info.length, sizes))
        except ModelError as exc:
            raise exc.located(file, v.line)
    for mv in library.MONITOR_VARS.values():
        if counts.get(mv.dim, 0) == 0 and mv.dim != SCALAR:
            continue
        vtype = resolve_type(mv.type_spec, sizes, counts, mv.name)
        info = schema.add(mv.name, mv.dim, vtype, "monitor")
        initial.extend(_init_values(mv, vtype, info.length, sizes))

    # properties
    invariants = {fn.__name__.replace("_", "-"): fn for fn in decl.invariants}
    available = list(library.LIBRARY) + list(invariants)
    wanted = list(properties) if properties else list(decl.properties or library.LIBRARY)
    if not properties:
        wanted += [n for n in invariants if n not in wanted]
    for name in wanted:
        if name not in available:
            raise UsageError(f"unknown property {name!r} (available: {', '.join(available)})")
    props: list[Property] = []
    for name in wanted:
        if name in library.LIBRARY:
            if counts[PAGE] == 0 and name in (library.NRBW, library.NRBD):
                continue
            info = schema.add(f"violated:{name}", SCALAR, BoolType(), "flag")
            initial.append(False)
            props.append(Property(name, "monitor", library.LIBRARY[name].summary, flag=info.offset))
        else:
            fn = invariants[name]
            body = lowering.parse_body(fn)
            lowering.check_body(body)
            props.append(Property(name, "invariant", (fn.__doc__ or "model invariant").strip()
                                  .splitlines()[0], fn=fn, body=body))

    # actions
    module_ns = vars(loaded.module)
    actions: list[ActionDef] = []
    for fn in decl.actions:
        body = lowering.parse_body(fn)
        if not body.params:
            raise ModelError(f"action {fn.__name__} must take the state as first parameter",
                             body.file, body.tree.lineno)
        lowering.check_body(body)
        params = _param_types(fn, module_ns, counts, sizes, body)
        actions.append(ActionDef(fn.__name__, fn, body, params,
                                 fast=fastpath.fast_action(body, module_ns),
                                 guard=fastpath.hoisted_guard(body, [n for n, _ in params],
                                                              module_ns)))
    if not actions:
        raise ModelError(f"{decl.name} declares no @action", file)
    instances: list[ActionInstance] = []
    for a in actions:
        domains = [[t.decode(x) for x in t.domain()] for _, t in a.params]
        for combo in itertools.product(*domains):
            instances.append(ActionInstance(len(instances), a, tuple(combo)))

    helpers = {}
    for name, value in module_ns.items():
        if callable(value) and getattr(value, "_kv_kind", None) == "helper":
            body = lowering.parse_body(value)
            lowering.check_body(body, state_param="")
            helpers[name] = body
    handlers = {kind: [h] for kind, h in library.HANDLERS.items()}
    del module_file
    return System(loaded, sizes, schema, tuple(initial), actions, instances, props, handlers,
                  helpers)


def var_info(system: System, name: str) -> VarInfo:
    return system.schema.by_name[name]
