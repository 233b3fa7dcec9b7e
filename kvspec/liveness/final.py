"""``@final_state`` predicates: states a model declares legitimately final.

A final-state predicate is checked like an invariant (read-only, returns a bool on
every path, the closed language of ``docs/modelling.md``) into the system's IR and
compiled by the same concrete code generator, into a module of its own (the
system's generated module is left as it is).
"""
from __future__ import annotations

from typing import Any, Callable

from kvspec.lang import ir
from kvspec.lang.check import build_function, parse_body
from kvspec.lang.errors import ModelError
from kvspec.lang.pygen import PyGen
from kvspec.lang.schema import State
from kvspec.lang.system import System
from kvspec.props.events import format_reason

FinalFn = Callable[[State], bool]


def final_predicate(system: System) -> FinalFn | None:
    """The disjunction of the model's ``@final_state`` predicates (None: it has none)."""
    fns = system.loaded.decl.final_states
    if not fns:
        return None
    assert system.scope is not None
    built: list[ir.Function] = []
    for fn in fns:
        body = parse_body(fn)
        if len(body.params) != 1:
            raise ModelError(f"@final_state {fn.__name__} must take exactly the state",
                             body.file, body.tree.lineno)
        built.append(build_function(system.scope, fn, "invariant", [ir.StateT()]))
    gen = PyGen(system.schema, format_reason, system.flags)
    for f in ir.reachable(built):
        gen.function(f)
    ns: dict[str, Any] = gen.compile(f"{system.name}.final")
    compiled = [ns[f.key] for f in built]

    def final(state: State) -> bool:
        return any(bool(c(state, None, None)) for c in compiled)

    return final
