"""What a model file declares: sizes, state variables, actions, invariants, and the
model's own temporal properties (``@eventually``, ``@always_eventually``,
``leads_to(p, q)``; see ``docs/liveness.md``).

A model is a class deriving from :class:`Model`::

    class Serving(Model):
        requests = Requests(2)
        pages = Pages(4)
        capacity = Size(2)
        phase = requests.var(Phase, init=Phase.NEW)
        owner = pages.var(requests.optional, init=None)

        @action
        def alloc(s, r: Request, p: Page):
            require(s.owner[p] is None)
            s.owner[p] = r
            emit.alloc(r, p)
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from kvspec.lang.errors import ModelError
from kvspec.lang.types import PAGE, REQUEST, IndexRef, OptionalRef, Page, Request, SizeView

SCALAR = "scalar"


def _caller_line() -> int | None:
    """The line of the model code that made the declaration (the first frame outside
    this module: a subclass's ``__init__`` calls up through several)."""
    frame = inspect.currentframe()
    try:
        caller = frame.f_back if frame else None
        while caller is not None and caller.f_code.co_filename == __file__:
            caller = caller.f_back
        return caller.f_lineno if caller else None
    finally:
        del frame


@dataclass
class VarDecl:
    """A declared state variable (scalar, per request or per page)."""

    type_spec: Any
    init: Any
    dim: str
    name: str = ""
    line: int | None = None
    #: the id spaces it is indexed by, outermost first (resolved to ``dim`` when the
    #: model is declared: an ``Index`` learns its name only after the class body ran)
    spaces: tuple[Any, ...] = ()

    def resolve_dim(self) -> None:
        if not self.spaces:
            return
        names = [sp.dim for sp in self.spaces]
        if any(n is None for n in names):
            raise ModelError(f"{self.name}: its index space is not an attribute of the model "
                             "class (declare `ranks = Index(n)` in the class body)", None,
                             self.line)
        self.dim = "*".join(names)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name


class SizeParam:
    """A model size parameter with a default, overridable with ``--size name=value``."""

    dim: str | None = None
    derived: Callable[[Any], int] | None = None

    def __init__(self, default: int, *, minimum: int = 0, maximum: int | None = None) -> None:
        if isinstance(default, bool) or not isinstance(default, int):
            raise ModelError(f"size default must be an int, not {default!r}")
        self.default = default
        self.minimum = minimum
        self.maximum = maximum
        self.name = ""
        self.line = _caller_line()

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def check(self, value: int) -> None:
        if value < self.minimum or (self.maximum is not None and value > self.maximum):
            hi = "" if self.maximum is None else f" and at most {self.maximum}"
            raise ModelError(f"size {self.name}={value}: must be at least {self.minimum}{hi}")


class Size(SizeParam):
    """A plain integer parameter (a capacity, a length), or a size derived from the
    others: ``prefill_capacity = Size(derived=lambda sz: sz.pages // 2)``. A derived
    size is computed once per compilation from the resolved sizes (the function gets
    them as ``sz.name`` or ``sz["name"]``; derived sizes declared before it included),
    is checked against ``minimum``/``maximum`` like any size, and cannot be set with
    ``--size`` (set the sizes it is derived from)."""

    def __init__(self, default: int | None = None, *,
                 derived: Callable[[Any], int] | None = None, minimum: int = 0,
                 maximum: int | None = None) -> None:
        if derived is None:
            super().__init__(default if default is not None else _missing_default(),
                             minimum=minimum, maximum=maximum)
            self.derived = None
            return
        if default is not None:
            raise ModelError("a derived size has no default: give Size(derived=...) alone",
                             None, _caller_line())
        if not callable(derived):
            raise ModelError(f"Size(derived=...) takes a function of the sizes, not "
                             f"{derived!r}", None, _caller_line())
        super().__init__(0, minimum=minimum, maximum=maximum)
        self.default = None  # type: ignore[assignment]
        self.derived = derived


def _missing_default() -> int:
    raise ModelError("Size() needs a default value, or derived=... (a function of the "
                     "other sizes)", None, _caller_line())


class _IdSpace(SizeParam):
    def var(self, type_spec: Any, *, init: Any) -> VarDecl:
        """A state variable with one element per id."""
        return VarDecl(type_spec, init, self.dim or "", line=_caller_line(), spaces=(self,))

    def by(self, inner: "_IdSpace") -> "Grid":
        """The pairs (id of this space, id of ``inner``): ``requests.by(ranks).var(T,
        init=...)`` is a variable with one element per (request, rank), read
        ``s.x[r, k]``, one row ``s.x[r]`` / ``s.x[r, :]``, one column ``s.x[:, k]``."""
        if not isinstance(inner, _IdSpace):
            raise ModelError(f"{type(self).__name__}.by() takes another id space (a Requests, "
                             f"Pages or Index declared in the model), not {inner!r}")
        return Grid(self, inner)

    @property
    def id(self) -> Any:
        """The type "an id of this space" (an action parameter: ``k: ranks.id``)."""
        return IndexRef(self, False)

    @property
    def optional(self) -> Any:
        """The type "one of these ids, or None"."""
        if self.dim in (REQUEST, PAGE):
            return OptionalRef(self.dim)
        return IndexRef(self, True)


@dataclass
class Grid:
    """Two id spaces, for declaring a two-dimensional variable (see ``_IdSpace.by``)."""

    outer: _IdSpace
    inner: _IdSpace

    def var(self, type_spec: Any, *, init: Any) -> VarDecl:
        """A state variable with one element per (outer id, inner id). ``init`` is one
        value for every element, a nested list ``[[...] per inner id] per outer id``,
        or a function of the sizes returning either."""
        return VarDecl(type_spec, init, "", line=_caller_line(), spaces=(self.outer, self.inner))


class Requests(_IdSpace):
    """The interchangeable request ids ``r0 .. r{n-1}``."""

    dim = REQUEST

    def __init__(self, default: int, *, maximum: int | None = None) -> None:
        super().__init__(default, minimum=1, maximum=maximum)

    @property
    def id(self) -> Any:
        return Request


class Pages(_IdSpace):
    """The interchangeable page ids ``0 .. n-1`` of the (decode) page pool."""

    dim = PAGE

    def __init__(self, default: int, *, maximum: int | None = None) -> None:
        super().__init__(default, minimum=1, maximum=maximum)

    @property
    def id(self) -> Any:
        return Page


class Index(_IdSpace):
    """A declared index space ``0 .. n-1`` beyond requests and pages: TP ranks, transfer
    handles, buffer slots. ``ranks = Index(2)`` names the space after the attribute
    (``ranks``); its size is overridable with ``--size ranks=3``. Its ids are *not*
    interchangeable: symmetry reduction never permutes them (a model may treat rank 0
    specially, index with literals, loop with carried state)."""

    def __init__(self, default: int, *, minimum: int = 1, maximum: int | None = None) -> None:
        if minimum < 1:
            raise ModelError(f"an index space has at least one id (minimum={minimum})")
        super().__init__(default, minimum=minimum, maximum=maximum)

    def __set_name__(self, owner: type, name: str) -> None:
        super().__set_name__(owner, name)
        if name in (REQUEST, PAGE, "requests", "pages") or "*" in name:
            raise ModelError(f"an index space cannot be called {name!r}", None, self.line)
        self.dim = name


class Ranks(Index):
    """Tensor-parallel ranks (an :class:`Index`)."""


class Handles(Index):
    """Transfer handles (an :class:`Index`)."""


class Slots(Index):
    """Buffer slots (an :class:`Index`)."""


def var(type_spec: Any, *, init: Any) -> VarDecl:
    """A scalar state variable."""
    return VarDecl(type_spec, init, SCALAR, line=_caller_line())


#: the fairness an action may declare (``@action(fair=...)``); None: unfair
FAIRNESS = ("weak", "strong")


def _caller_location() -> tuple[str | None, int | None]:
    """File and line of the model code that called the decorator factory."""
    frame = inspect.currentframe()
    try:
        caller = frame.f_back.f_back if frame and frame.f_back else None
        return (caller.f_code.co_filename, caller.f_lineno) if caller else (None, None)
    finally:
        del frame


def _mark_action(fn: Any, fair: str | None, where: tuple[str | None, int | None]
                 ) -> Callable[..., None]:
    if not inspect.isfunction(fn):
        raise ModelError(f"@action applies to a function (a method of the model), not "
                         f"{type(fn).__name__}", *where)
    fn._kv_kind = "action"  # type: ignore[attr-defined]
    fn._kv_fair = fair  # type: ignore[attr-defined]
    return fn


def action(fn: Callable[..., None] | None = None, *, fair: str | None = None) -> Any:
    """Mark a method as an action. Parameters are annotated ``Request``, ``Page``,
    ``Int(lo, hi)``, ``bool`` or an Enum; every combination is an action instance.

    ``@action(fair="weak")`` / ``@action(fair="strong")`` declare fairness for the
    liveness checks (``docs/liveness.md``), per action instance: weak, an instance
    that stays enabled forever is eventually taken; strong, an instance enabled
    infinitely often is eventually taken. Plain ``@action`` (or ``fair=None``) is
    unfair: the liveness checks assume nothing about when it runs."""
    if fn is not None:
        if isinstance(fn, str):
            where = _caller_location()
            raise ModelError(f"@action({fn!r}): give the fairness as a keyword, "
                             f"@action(fair={fn!r})", *where)
        return _mark_action(fn, None, _caller_location())
    where = _caller_location()
    if fair is not None and (not isinstance(fair, str) or fair not in FAIRNESS):
        raise ModelError(f"@action(fair={fair!r}): fairness must be \"weak\" or \"strong\" "
                         "(or left out: unfair)", *where)

    def mark(f: Callable[..., None]) -> Callable[..., None]:
        return _mark_action(f, fair, where)

    return mark


def final_state(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a method ``def final(s) -> bool`` as a legitimately final state: a state
    where it holds and no action is enabled is not a deadlock (``docs/liveness.md``).
    It is read-only like an invariant; several such predicates mean "any of them"."""
    fn._kv_kind = "final_state"  # type: ignore[attr-defined]
    return fn


#: the kinds of user temporal property
EVENTUALLY = "eventually"
ALWAYS_EVENTUALLY = "always_eventually"
LEADS_TO = "leads_to"


@dataclass
class TemporalDecl:
    """A temporal property the model states about its own state predicates.

    ``p`` (and ``q`` for ``leads_to``) are predicate functions ``(s) -> bool`` or
    ``(s, r: Request) -> bool`` / ``(s, p: Page) -> bool``, or names of methods of
    the model (resolved through the MRO, so a subclass may override them)."""

    kind: str
    p: Any
    q: Any = None
    name: str = ""
    file: str | None = None
    line: int | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @property
    def prop(self) -> str:
        """The property's name: the attribute name with ``_`` written ``-``."""
        return self.name.replace("_", "-")


def _mark_temporal(fn: Any, kind: str, where: tuple[str | None, int | None]) -> Any:
    if not inspect.isfunction(fn):
        raise ModelError(f"@{kind} applies to a state predicate (a method "
                         f"def name(s) -> bool of the model), not {type(fn).__name__}", *where)
    fn._kv_kind = kind  # type: ignore[attr-defined]
    return fn


def eventually(fn: Callable[..., bool]) -> Callable[..., bool]:
    """``@eventually`` on a state predicate ``def done(s) -> bool``: every fair run
    reaches a state where it holds (F done). With one ``Request`` (or ``Page``)
    parameter, ``def done(s, r: Request) -> bool``, it must hold eventually for
    every id (one obligation per id). Property name: ``done`` with ``_`` → ``-``."""
    return _mark_temporal(fn, EVENTUALLY, _caller_location())


def always_eventually(fn: Callable[..., bool]) -> Callable[..., bool]:
    """``@always_eventually`` on a state predicate: on every fair run it holds
    infinitely often (GF p); per id when it takes a ``Request`` or ``Page``."""
    return _mark_temporal(fn, ALWAYS_EVENTUALLY, _caller_location())


def leads_to(p: Callable[..., bool] | str, q: Callable[..., bool] | str) -> TemporalDecl:
    """``served_when_admitted = leads_to(admitted, served)`` in a model class body:
    on every fair run, whenever ``admitted`` holds, ``served`` holds then or later
    (p ~> q). ``p`` and ``q`` are state predicates (methods, functions, or method
    names) taking the state, and at most one ``Request`` or ``Page`` each; with an
    id parameter the property is quantified over every id. The property's name is
    the attribute name with ``_`` → ``-``."""
    where = _caller_location()
    for what, f in (("p", p), ("q", q)):
        if not (isinstance(f, str) or inspect.isfunction(f)):
            raise ModelError(f"leads_to({what}=...): expected a state predicate (a method of "
                             f"the model or its name), not {type(f).__name__}", *where)
    return TemporalDecl(LEADS_TO, p, q, file=where[0], line=where[1])


def invariant(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a method as a state invariant: it returns a bool over the state."""
    fn._kv_kind = "invariant"  # type: ignore[attr-defined]
    return fn


def helper(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a module-level function called from actions so that it is lowered too
    (needed when it branches on state)."""
    fn._kv_kind = "helper"  # type: ignore[attr-defined]
    return fn


@dataclass
class ModelDecl:
    """Everything a model class declares, in declaration order."""

    cls: type
    sizes: list[SizeParam] = field(default_factory=list)
    vars: list[VarDecl] = field(default_factory=list)
    actions: list[Callable[..., Any]] = field(default_factory=list)
    invariants: list[Callable[..., Any]] = field(default_factory=list)
    properties: tuple[str, ...] | None = None
    #: action name -> "weak" / "strong" (unfair actions are absent)
    fairness: dict[str, str] = field(default_factory=dict)
    #: ``@final_state`` predicates (a state where one holds is legitimately final)
    final_states: list[Callable[..., Any]] = field(default_factory=list)
    #: the model's own temporal properties, in declaration order
    temporal: list[TemporalDecl] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.cls.__name__


class Model:
    """Base class of models. Subclasses declare sizes, variables and actions."""

    #: names of the library properties to check (default: all of them)
    properties: tuple[str, ...] | None = None

    @classmethod
    def declaration(cls) -> ModelDecl:
        """Sizes, variables, actions and invariants, resolved through the MRO: the
        body Python would call is the body kvspec checks. A name is an action (or
        invariant) if any class in the MRO marks it so; an undecorated override in
        a subclass replaces the body and stays an action."""
        decl = ModelDecl(cls)
        order: list[str] = []
        for klass in reversed(cls.__mro__):
            for name in vars(klass):
                if name not in order:
                    order.append(name)
        for name in order:
            marks = {getattr(vars(k).get(name), "_kv_kind", None) for k in cls.__mro__
                     if name in vars(k)} - {None}
            value = getattr(cls, name, None)
            if isinstance(value, SizeParam):
                decl.sizes.append(value)
            elif isinstance(value, VarDecl):
                value.resolve_dim()
                decl.vars.append(value)
            elif isinstance(value, TemporalDecl):
                decl.temporal.append(_resolved(cls, value, name))
            elif marks:
                if len(marks) > 1:
                    raise ModelError(f"{name} is marked both as " + " and as ".join(sorted(marks))
                                     + " in the class hierarchy of " + cls.__name__)
                kind = marks.pop()
                if not inspect.isfunction(value):
                    raise ModelError(f"{cls.__name__}.{name} overrides an @{kind} with something "
                                     "that is not a function")
                if kind == "action":
                    decl.actions.append(value)
                    fair = _declared_fairness(cls, name)
                    if fair is not None:
                        decl.fairness[name] = fair
                elif kind == "invariant":
                    decl.invariants.append(value)
                elif kind == "final_state":
                    decl.final_states.append(value)
                elif kind in (EVENTUALLY, ALWAYS_EVENTUALLY):
                    code = value.__code__
                    decl.temporal.append(TemporalDecl(kind, value, name=name,
                                                      file=code.co_filename,
                                                      line=code.co_firstlineno))
        props = getattr(cls, "properties", None)
        decl.properties = tuple(props) if props is not None else None
        return decl


def _declared_fairness(cls: type, name: str) -> str | None:
    """The fairness of action ``name``: from its most derived ``@action`` decorator
    (an undecorated override keeps the fairness of the action it overrides)."""
    for klass in cls.__mro__:
        fn = vars(klass).get(name)
        if getattr(fn, "_kv_kind", None) == "action":
            return getattr(fn, "_kv_fair", None)
    return None


def _resolved(cls: type, decl: TemporalDecl, name: str) -> TemporalDecl:
    """``decl`` (a ``leads_to``) with its predicates resolved: a method of the model
    (named, or given as the function defined in the class body) is the body Python
    would call on an instance of ``cls`` (an override in a subclass replaces it)."""
    out = TemporalDecl(decl.kind, None, None, name=name, file=decl.file, line=decl.line)
    for what in ("p", "q"):
        f = getattr(decl, what)
        key = f if isinstance(f, str) else f.__name__
        in_class = any(vars(k).get(key) is f for k in cls.__mro__) if not isinstance(f, str) \
            else True
        target = getattr(cls, key, None) if in_class else f
        if not inspect.isfunction(target):
            raise ModelError(f"leads_to: {cls.__name__} has no predicate method {key!r}",
                             decl.file, decl.line)
        setattr(out, what, target)
    return out
