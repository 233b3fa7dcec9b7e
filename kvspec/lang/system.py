"""A model compiled for one choice of sizes: schema, initial state, action
instances, properties, and the concrete and symbolic interpretations of them.
This is the object every engine consumes.
"""
from __future__ import annotations

import itertools
import typing
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple

import z3

from kvspec.lang import ir
from kvspec.lang.check import Scope, build_function, parse_body
from kvspec.lang.check_types import of_value_type
from kvspec.lang.declare import SCALAR, Index, ModelDecl, SizeParam, SizeView, VarDecl
from kvspec.lang.errors import ModelError, UsageError
from kvspec.lang.loader import LoadedModel
from kvspec.lang.pygen import PyGen
from kvspec.lang.schema import Schema, State, VarInfo
from kvspec.lang.symvalues import z3_var
from kvspec.lang.types import (PAGE, REQUEST, SYMMETRIC_DIMS, BoolType, RefType, ValueType,
                               axes_of, resolve_type)
from kvspec.lang.z3gen import StepEncoding, SymExec
from kvspec.props import library
from kvspec.props.events import EVENT_KINDS, Event, format_reason

LIBRARY_FILE = library.__file__

#: the largest id spaces and state a model may be compiled with (checked before allocating)
MAX_IDS = 4096
MAX_SLOTS = 1_000_000
MAX_INSTANCES = 1_000_000


@dataclass
class ActionDef:
    name: str
    fn: Callable[..., Any]  # compiled step: (state, *args) -> (next, events, violations) | None
    ir: ir.Function
    params: list[tuple[str, ValueType]]
    pyfn: Callable[..., Any] | None = None  # the model's own function (docstring, source)
    guard: tuple[Callable[..., Any], list[int]] | None = None  # leading guard, its parameters
    fast: Callable[..., Any] | None = None  # kept for engines that prefer a fast form

    @property
    def line(self) -> int:
        return self.ir.line


@dataclass(frozen=True)
class ActionInstance:
    index: int
    action: ActionDef
    args: tuple[Any, ...]  # encoded values (ints, bools)

    @property
    def name(self) -> str:
        return self.action.name

    def label(self) -> str:
        parts = [t.fmt(a) for (_, t), a in zip(self.action.params, self.args)]
        return f"{self.name}({', '.join(parts)})"

    def args_json(self) -> dict[str, Any]:
        return {n: t.to_json(a) for (n, t), a in zip(self.action.params, self.args)}


@dataclass
class Property:
    name: str
    kind: str  # "monitor" or "invariant"
    summary: str
    flag: int | None = None  # state slot of the violation flag (monitor properties)
    fn: Callable[..., Any] | None = None  # compiled invariant: (state) -> bool
    ir: ir.Function | None = None
    file: str | None = None
    line: int | None = None


@dataclass
class StepResult:
    instance: ActionInstance
    state: State
    events: list[Event]
    violations: list[tuple[str, str, Event | None]]


class Machine:
    """The concrete interpretation's entry points used by the engines."""

    def __init__(self, system: "System") -> None:
        self.system = system

    def step(self, state: State, fn: Callable[..., Any], args: tuple[Any, ...]
             ) -> tuple[State, list[Event], list[tuple[str, str, Event | None]]] | None:
        out = fn(state, *args)
        if out is None:
            return None
        w, events, violations = out
        return tuple(w), events, violations

    def guard(self, state: State, fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
        """A leading guard; True when it holds or raises (the full step then reports it)."""
        try:
            return bool(fn(state, *args))
        except ModelError:
            return True

    @contextmanager
    def session(self) -> Iterator[None]:
        yield

    def evaluate(self, state: State, fn: Callable[..., Any]) -> Any:
        return fn(state, None, None)


#: names Z3's SMT-LIB2 reader takes for its own (reserved words and core functions): a
#: state variable of that name cannot be written into, or read back from, a certificate
SMT_RESERVED = frozenset({
    "_", "as", "let", "exists", "forall", "match", "par", "lambda", "true", "false",
    "distinct", "xor", "and", "or", "not", "ite", "abs", "div", "mod", "to_int", "to_real",
    "is_int"})


class _InvariantErrors(NamedTuple):
    """The invariants' model-error conditions on some state variables, kept."""

    variables: tuple[z3.ExprRef, ...]
    ids: tuple[int, ...]  # the variables' Z3 ids (the same terms made again match)
    errors: list[tuple[z3.BoolRef, str]]
    reads: set[int]  # the slots evaluating the invariants reads


@dataclass
class System:
    loaded: LoadedModel
    sizes: dict[str, int]
    schema: Schema
    initial: State
    actions: list[ActionDef]
    instances: list[ActionInstance]
    properties: list[Property]
    handlers: dict[str, list[ir.Function]]
    scope: Scope | None = None
    generated: dict[str, Any] = field(default_factory=dict)
    _machine: Machine | None = None
    _sym: SymExec | None = None
    _batches: list[Any] | None = None
    _inv_errors: _InvariantErrors | None = None
    inflight_bound: int = library.INFLIGHT_BOUND
    #: suffix -> the state's Z3 constants (made once: tens of thousands at large sizes)
    _state_vars: dict[str, list[z3.ExprRef]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.loaded.decl.name

    @property
    def files(self) -> set[str]:
        return {self.loaded.module.__file__ or self.loaded.file, LIBRARY_FILE}

    @property
    def flags(self) -> dict[str, int]:
        return {p.name: p.flag for p in self.properties if p.flag is not None}

    @property
    def symmetry_breaks(self) -> dict[str, list[str]]:
        return self.scope.breaks if self.scope is not None else {}

    @property
    def sized_constants(self) -> list[tuple[str, ir.Const]]:
        """(file, constant) of every read of a size as the compiler made it."""
        return self.scope.sized if self.scope is not None else []

    # -- concrete ------------------------------------------------------------------
    @property
    def machine(self) -> Machine:
        if self._machine is None:
            self._machine = Machine(self)
        return self._machine

    def step(self, state: State, inst: ActionInstance) -> StepResult | None:
        out = self.machine.step(state, inst.action.fn, inst.args)
        if out is None:
            return None
        nxt, events, violations = out
        return StepResult(inst, nxt, events, violations)

    def batches(self) -> list[tuple[Callable[..., Any] | None,
                                    list[tuple[tuple[Any, ...], list[ActionInstance]]]]]:
        """Instances grouped for the hot path: per action, its leading guard (or
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
        return [p.name for p in self.properties
                if p.kind == "invariant" and p.fn is not None and not p.fn(state, None, None)]

    def violated_flags(self, state: State) -> list[str]:
        return [p.name for p in self.properties if p.flag is not None and state[p.flag]]

    # -- symbolic ------------------------------------------------------------------
    @property
    def kernel(self) -> SymExec:
        if self._sym is None:
            self._sym = SymExec(self.schema, self.flags)
        return self._sym

    def state_vars(self, suffix: str = "") -> list[z3.ExprRef]:
        """One Z3 constant per state slot, named ``var[i]`` + suffix (a new list of the
        same constants at every call)."""
        made = self._state_vars.get(suffix)
        if made is None:
            made = self._state_vars[suffix] = [
                z3_var(v.label(None if v.dim == SCALAR else v.logical(i)) + suffix, v.type)
                for v in self.schema.vars for i in range(v.length)]
        return list(made)

    def slot_types(self) -> list[ValueType]:
        return [v.type for v in self.schema.vars for _ in range(v.length)]

    def encode_step(self, inst: ActionInstance, current: list[z3.ExprRef]) -> StepEncoding:
        """The step of ``inst`` from ``current``. Its model-error conditions include
        those of evaluating the invariants on ``current``: the concrete engines
        evaluate every invariant on every state they reach, so such an error is
        reached together with the state (see ``transition.replay_error``)."""
        enc = self.kernel.run_step(current, inst.action.ir, inst.args, self.handlers)
        errors, reads = self._invariant_errors(current)
        enc.errors = errors + enc.errors
        if errors:  # the invariants enter the step only through these conditions
            enc.reads |= reads
        return enc

    def invariant_errors(self, current: list[z3.ExprRef]) -> list[tuple[z3.BoolRef, str]]:
        """Model-error conditions of evaluating the invariants on ``current``."""
        return self._invariant_errors(current)[0]

    def _invariant_errors(self, current: list[z3.ExprRef]
                          ) -> tuple[list[tuple[z3.BoolRef, str]], set[int]]:
        """:meth:`invariant_errors`, and the slots evaluating the invariants reads
        (kept for the next call on the same variables)."""
        cached = self._inv_errors
        if cached is not None and len(cached.variables) == len(current) and \
                all(a is b for a, b in zip(cached.variables, current)):  # the very same
            return list(cached.errors), set(cached.reads)
        key = tuple(v.get_id() for v in current)
        if cached is not None and cached.ids == key:
            self._inv_errors = cached._replace(variables=tuple(current))
            return list(cached.errors), set(cached.reads)
        errors: list[tuple[z3.BoolRef, str]] = []
        reads: set[int] = set()
        for p in self.properties:
            if p.ir is not None:
                errors.extend(self.kernel.evaluate(current, p.ir)[1])
                reads |= self.kernel.reads
        self._inv_errors = _InvariantErrors(tuple(current), key, errors, reads)
        return list(errors), set(reads)

    def encode_invariant(self, prop: Property, current: list[z3.ExprRef]) -> z3.BoolRef:
        assert prop.ir is not None
        return self.kernel.evaluate(current, prop.ir)[0]

    def encode_bad(self, prop: Property, current: list[z3.ExprRef]) -> z3.BoolRef:
        """The states that violate ``prop``."""
        if prop.flag is not None:
            return current[prop.flag]  # type: ignore[return-value]
        return z3.Not(self.encode_invariant(prop, current))


# -- compiling -------------------------------------------------------------------------

def _resolve_sizes(decl: ModelDecl, overrides: dict[str, int], file: str,
                   derived_values: dict[str, int] | None = None) -> dict[str, int]:
    known = {s.name: s for s in decl.sizes}
    for key in overrides:
        if key not in known:
            names = ", ".join(known) or "none"
            raise UsageError(f"{file}: unknown size parameter {key!r} (this model has: {names})")
    sizes = {}
    for name, s in known.items():
        if s.derived is not None:
            continue
        value = overrides.get(name, s.default)
        try:
            s.check(value)
        except ModelError as exc:
            raise UsageError(f"{file}: {exc.message}") from None
        sizes[name] = value
    for name, s in known.items():
        if s.derived is not None and derived_values and name in derived_values:
            try:
                s.check(derived_values[name])
            except ModelError as exc:  # at the declaration's line
                raise exc.located(file, s.line) from None
            sizes[name] = derived_values[name]
            continue
        if s.derived is not None:
            sizes[name] = _derived_size(s, sizes, file)
            # a full set of sizes (a trace's, a certificate's) names it with the value it
            # has; any other value is an attempt to set it
            if name in overrides and overrides[name] != sizes[name]:
                raise UsageError(f"{file}: size {name} is derived from the other sizes; set "
                                 f"those instead (here it is {sizes[name]})")
    return {name: sizes[name] for name in known}


def settable_sizes(loaded: LoadedModel, sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` (a compiled system's, say) without the derived ones: what
    :func:`compile_model` takes to compile the model again (it recomputes the derived
    sizes from the others, and rejects them as overrides)."""
    derived = {s.name for s in loaded.decl.sizes if s.derived is not None}
    return {k: v for k, v in sizes.items() if k not in derived}


def compiled_again(system: System, sizes: dict[str, int] | None = None,
                   properties: list[str] | None = None) -> System:
    """``system``'s model compiled again, with its in-flight bound: at ``sizes`` (sizes
    :func:`compile_model` takes; default: ``system``'s own) checking ``properties``
    (default: ``system``'s)."""
    return compile_model(system.loaded,
                         settable_sizes(system.loaded, system.sizes) if sizes is None else sizes,
                         [p.name for p in system.properties] if properties is None
                         else properties,
                         inflight_bound=system.inflight_bound)


def _derived_size(s: SizeParam, sizes: dict[str, int], file: str) -> int:
    """The value of a derived size from the sizes resolved so far."""
    assert s.derived is not None
    try:
        value = s.derived(SizeView(sizes))
    except Exception as exc:  # noqa: BLE001 - the model's own function: report, located
        raise ModelError(f"size {s.name}: its derived=... function failed: "
                         f"{type(exc).__name__}: {exc}", file, s.line) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(f"size {s.name}: its derived=... function returned {value!r}, not "
                         "an int", file, s.line)
    try:
        s.check(value)
    except ModelError as exc:
        raise ModelError(f"{exc.message} (derived from the sizes "
                         f"{', '.join(f'{k}={v}' for k, v in sizes.items())})",
                         file, s.line) from None
    return value


def _init_values(decl: VarDecl, vtype: ValueType, length: int, sizes: dict[str, int],
                 info: VarInfo | None = None) -> list[Any]:
    init = decl.init
    if callable(init) and not isinstance(init, type):
        init = init(dict(sizes))
    if info is not None and info.two_d and isinstance(init, (list, tuple)):
        return _grid_init(decl, vtype, info, init)
    values = list(init) if isinstance(init, (list, tuple)) else [init] * length
    if len(values) != length:
        raise ModelError(f"initial value of {decl.name}: expected {length} values, got {len(values)}")
    try:
        return [vtype.encode(v) for v in values]
    except ValueError as exc:
        raise ModelError(f"initial value of {decl.name}: {exc}") from None


def _grid_init(decl: VarDecl, vtype: ValueType, info: VarInfo, init: Any) -> list[Any]:
    """The slots of a two-dimensional array from a nested list ``[[...] per inner id]
    per outer id``, in the array's storage order."""
    n0, n1 = info.shape
    if len(init) != n0 or not all(isinstance(row, (list, tuple)) and len(row) == n1
                                  for row in init):
        raise ModelError(f"initial value of {decl.name}: expected {n0} lists of {n1} values "
                         f"(one list per {info.axes[0]} id)")
    out: list[Any] = [None] * info.length
    try:
        for i in range(n0):
            for j in range(n1):
                out[info.slot(i, j)] = vtype.encode(init[i][j])
    except ValueError as exc:
        raise ModelError(f"initial value of {decl.name}: {exc}") from None
    return out


def _class_namespace(cls: type) -> dict[str, Any]:
    """The names a model's class body defines (through the MRO), for resolving
    annotations such as ``k: ranks.id``."""
    ns: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        ns.update(vars(klass))
    return ns


def action_hints(loaded: LoadedModel, fn: Callable[..., Any]) -> dict[str, Any]:
    """The annotations of action ``fn`` as compiling resolves them: names of the model's
    class body first, then of its module (``k: Int(0, BOUND)`` with a class-level
    ``BOUND`` under ``from __future__ import annotations``). Whatever reads the types
    again resolves them here, so that it reads the ones the model was compiled with."""
    return typing.get_type_hints(fn, globalns=vars(loaded.module),
                                 localns=_class_namespace(loaded.decl.cls))


def _param_types(fn: Callable[..., Any], loaded: LoadedModel, counts: dict[str, int],
                 sizes: dict[str, int], file: str, line: int, names: list[str]
                 ) -> list[tuple[str, ValueType]]:
    try:
        hints = action_hints(loaded, fn)
    except Exception as exc:
        raise ModelError(f"{fn.__name__}: cannot resolve parameter annotations: {exc}",
                         file, line) from None
    params = []
    for name in names:
        if name not in hints:
            raise ModelError(f"action {fn.__name__}: parameter {name!r} needs a type annotation "
                             "(Request, Page, an index space's ids such as ranks.id, Int(lo, hi), "
                             "bool or an Enum)", file, line)
        try:
            vtype = resolve_type(hints[name], sizes, counts, f"parameter {name}")
        except ModelError as exc:
            raise exc.located(file, line)
        if isinstance(vtype, RefType) and vtype.optional:
            raise ModelError(f"action parameter {name!r} cannot be optional", file, line)
        if isinstance(vtype, RefType) and counts.get(vtype.ref_dim or "", 0) == 0:
            raise ModelError(f"action parameter {name!r}: the model declares no "
                             f"{vtype.ref_dim}s", file, line)
        params.append((name, vtype))
    return params


def _check_var_axes(v: VarDecl, counts: dict[str, int], file: str) -> None:
    """The id spaces of a declared variable exist, and a two-dimensional one has at
    most one symmetric axis (requests or pages)."""
    if v.dim == SCALAR:
        return
    axes = axes_of(v.dim)
    for axis in axes:
        if counts.get(axis, 0) == 0:
            raise ModelError(f"{v.name}: the model declares no {axis}s", file, v.line)
    if len(axes) > 2:
        raise ModelError(f"{v.name}: at most two dimensions are supported", file, v.line)
    if len(axes) == 2 and all(a in SYMMETRIC_DIMS for a in axes):
        raise ModelError(f"{v.name}: a variable over {axes[0]}s and {axes[1]}s is not "
                         "supported (at most one of its axes may be requests or pages; "
                         "hold a page's owner in pages.var(requests.optional, ...))",
                         file, v.line)


def _check_size_bounds(counts: dict[str, int], decl: ModelDecl, sizes: dict[str, int],
                       file: str) -> None:
    for dim, n in counts.items():
        if n > MAX_IDS:
            raise UsageError(f"{file}: {dim}s={n} is too large (at most {MAX_IDS} ids per space)")
    slots = 0
    for v in decl.vars:
        n = 1
        for axis in ([] if v.dim == SCALAR else axes_of(v.dim)):
            n *= counts.get(axis, 0)
        slots += n
    if slots > MAX_SLOTS:
        raise UsageError(f"{file}: the state would have {slots:,} slots (at most {MAX_SLOTS:,})")
    for name, value in sizes.items():
        if abs(value) > 10**9:
            raise UsageError(f"{file}: size {name}={value} is too large")


def compile_model(loaded: LoadedModel, overrides: dict[str, int] | None = None,
                  properties: list[str] | None = None, *,
                  inflight_bound: int = library.INFLIGHT_BOUND,
                  prune_monitor: bool = True,
                  derived_values: dict[str, int] | None = None) -> System:
    """Resolve sizes, lay out the state, check every body and build its IR, and
    compile the concrete interpretation.

    ``properties``: the properties to check (None: the model's own selection and its
    invariants; ``[]``: none, for searches that bring their own, like liveness).
    ``inflight_bound``: writes per (page, request) the monitor counts exactly (see
    :mod:`kvspec.props.library`). ``prune_monitor=False`` stores every monitor
    variable of the selected properties, even those no emitted event can change
    (for testing that leaving them out changes nothing). ``derived_values``: values
    for derived sizes instead of their functions' (the reading for every size compiles
    once more with each of them moved on its own; never a user's override)."""
    decl = loaded.decl
    file = loaded.file
    sizes = _resolve_sizes(decl, overrides or {}, file, derived_values)
    counts = {REQUEST: 0, PAGE: 0}
    for s in decl.sizes:
        if isinstance(s, Index):
            if s.dim in counts:
                raise ModelError(f"index space {s.dim!r} is declared twice", file, s.line)
            counts[s.dim] = sizes[s.name]
        elif s.dim in counts:
            if counts[s.dim]:
                what = "Requests" if s.dim == REQUEST else "Pages"
                raise ModelError(f"{decl.name} declares {what}(...) twice ({s.name!r}); a model "
                                 f"has one {s.dim} id space", file, s.line)
            counts[s.dim] = sizes[s.name]
    if counts[REQUEST] == 0:
        raise ModelError(f"{decl.name} declares no requests = Requests(n)", file)
    _check_size_bounds(counts, decl, sizes, file)
    schema = Schema(sizes, counts)
    initial: list[Any] = []
    for v in decl.vars:
        if v.name in library.MONITOR_VARS:
            raise ModelError(f"state variable {v.name!r} clashes with a property-monitor "
                             "variable; rename it", file, v.line)
        if v.name in SMT_RESERVED:
            raise ModelError(f"state variable {v.name!r} is a reserved word of SMT-LIB2, "
                             "the language the solvers and certificates read; rename it",
                             file, v.line)
        _check_var_axes(v, counts, file)
        try:
            vtype = resolve_type(v.type_spec, sizes, counts, f"variable {v.name}")
            info = schema.add(v.name, v.dim, vtype, "model", v.line, file)
            initial.extend(_init_values(v, vtype, info.length, sizes, info))
        except ModelError as exc:
            raise exc.located(file, v.line)

    # properties
    invariants = {fn.__name__.replace("_", "-"): fn for fn in decl.invariants}
    for name, fn in invariants.items():
        if name in library.ALL:
            body = parse_body(fn)
            raise ModelError(f"invariant {fn.__name__} has the name of the library property "
                             f"{name!r}; rename it", body.file, body.tree.lineno)
    available = list(library.ALL) + list(invariants)
    wanted = list(properties) if properties is not None \
        else list(library.LIBRARY if decl.properties is None else decl.properties)
    if properties is None:
        wanted += [n for n in invariants if n not in wanted]
    for name in wanted:
        if name not in available:
            raise UsageError(f"unknown property {name!r} (available: {', '.join(available)})")
        if counts[PAGE] == 0 and name in library.PAGE_PROPERTIES and properties:
            raise UsageError(f"property {name!r} watches pages, but {decl.name} declares no "
                             "pages = Pages(n)")
    selected = [n for n in wanted if n in library.ALL
                and not (counts[PAGE] == 0 and n in library.PAGE_PROPERTIES)]
    scope = Scope(schema, decl.cls, dict(EVENT_KINDS), set(library.ALL))
    scope.handler_names[library.SATURATED] = inflight_bound + 1
    state_t = ir.StateT()

    # actions (model code never reads monitor variables, so they come first: what they
    # emit decides which monitor variables are stored)
    actions: list[ActionDef] = []
    for fn in decl.actions:
        body = parse_body(fn)
        if not body.params:
            raise ModelError(f"action {fn.__name__} must take the state as first parameter",
                             body.file, body.tree.lineno)
        params = _param_types(fn, loaded, counts, sizes, body.file, body.tree.lineno,
                              body.params[1:])
        types = [state_t] + [of_value_type(t) for _, t in params]
        f_ir = build_function(scope, fn, "action", types)
        actions.append(ActionDef(fn.__name__, fn, f_ir, params, pyfn=fn))
    if not actions:
        raise ModelError(f"{decl.name} declares no @action", file)
    emitted = emitted_kinds([a.ir for a in actions])
    if not prune_monitor:
        emitted = set(EVENT_KINDS)

    for mv in library.monitor_vars(selected, inflight_bound):
        if mv.dim != SCALAR and schema.length_of(mv.dim) == 0:
            continue
        vtype = resolve_type(mv.type_spec, sizes, counts, mv.name)
        values = _init_values(mv, vtype, schema.length_of(mv.dim), sizes)
        if library.stored(mv.name, emitted):
            schema.add(mv.name, mv.dim, vtype, "monitor")
            initial.extend(values)
        else:
            scope.constants[mv.name] = (VarInfo(mv.name, mv.dim, vtype, -1, len(values),
                                                "constant"), values[0])
    props: list[Property] = []
    for name in wanted:
        if name in library.ALL:
            if name not in selected:
                continue
            info = schema.add(f"violated:{name}", SCALAR, BoolType(), "flag")
            initial.append(False)
            props.append(Property(name, "monitor", library.ALL[name].summary,
                                  flag=info.offset))
        else:
            fn = invariants[name]
            props.append(Property(name, "invariant", (fn.__doc__ or "model invariant").strip()
                                  .splitlines()[0], fn=fn))

    for p in props:
        if p.kind == "invariant":
            pyfn = p.fn
            body = parse_body(pyfn)
            if len(body.params) != 1:
                raise ModelError(f"invariant {pyfn.__name__} must take exactly the state",
                                 body.file, body.tree.lineno)
            p.ir = build_function(scope, pyfn, "invariant", [state_t])
            p.file, p.line = body.file, body.tree.lineno

    n_instances = 0
    for a in actions:
        k = 1
        for _, t in a.params:
            k *= len(t.domain())
        n_instances += k
    if n_instances > MAX_INSTANCES:
        raise UsageError(f"{file}: {n_instances:,} action instances at these sizes "
                         f"(at most {MAX_INSTANCES:,})")
    instances: list[ActionInstance] = []
    for a in actions:
        domains = [t.domain() for _, t in a.params]
        for combo in itertools.product(*domains):
            instances.append(ActionInstance(len(instances), a, tuple(combo)))

    handlers: dict[str, list[ir.Function]] = {}
    monitored = [p.name for p in props if p.kind == "monitor"]
    for kind, pyfns in library.handlers(monitored, emitted).items():
        for h in pyfns:
            types = [state_t, ir.RefT(REQUEST, False)]
            if EVENT_KINDS[kind]:
                if counts[PAGE] == 0:
                    continue
                types.append(ir.RefT(PAGE, False))
            handlers.setdefault(kind, []).append(build_function(scope, h, "handler", types))

    system = System(loaded, sizes, schema, tuple(initial), actions, instances, props, handlers,
                    scope, inflight_bound=inflight_bound)
    _generate(system)
    return system


def emitted_kinds(functions: list[ir.Function]) -> set[str]:
    """The event kinds the given bodies (and every function they call) can emit."""
    return {st.kind for fn in ir.reachable(functions) for st in ir.walk_stmts(fn.body)
            if isinstance(st, ir.Emit)}


def _generate(system: System) -> None:
    """Compile the concrete interpretation of every body into one Python module."""
    assert system.scope is not None
    gen = PyGen(system.schema, format_reason, system.flags)
    main = {id(a.ir) for a in system.actions} | {id(p.ir) for p in system.properties}
    for f in system.scope.functions:
        if id(f) not in main:
            gen.function(f)
    for p in system.properties:
        if p.ir is not None:
            gen.function(p.ir)
    gen.dispatch(system.handlers)
    entries = [gen.action(a.ir, k) for k, a in enumerate(system.actions)]
    ns = gen.compile(system.name)
    system.generated = ns
    for a, (step, guard, positions) in zip(system.actions, entries):
        a.fn = ns[step]
        a.fn.__doc__ = a.pyfn.__doc__ if a.pyfn is not None else None
        a.guard = (ns[guard], positions) if guard is not None else None
    for p in system.properties:
        if p.ir is not None:
            p.fn = ns[p.ir.key]


def var_info(system: System, name: str) -> VarInfo:
    return system.schema.by_name[name]
