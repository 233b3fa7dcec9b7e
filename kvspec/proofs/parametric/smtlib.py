"""The SMT-LIB2 text of an all-sizes invariant, written and read strictly.

The text declares the two id sorts, their ``None`` elements and one function (or
constant) per state variable — exactly the model's, with its sorts; one per index of
a variable over a declared index space (``failed@0``, ``failed@1``) — and asserts
one quantified clause per ``assert``::

    (declare-sort Request 0)
    (declare-sort Page 0)
    (declare-fun none_request () Request)
    (declare-fun owner (Page) Request)
    (assert (forall ((p0 Page) (r0 Request)) (=> (and ...) (or ...))))

As for size-specific certificates (:mod:`kvspec.proofs.clauses`) the text is the
authority and only a small subset is accepted: the commands ``declare-sort``,
``declare-fun`` and ``assert`` (anything else, ``push``/``pop`` included, is
rejected), no symbol the model does not have, quantifiers only over the two id
sorts, and the interpreted operations of size-specific clauses.
"""
from __future__ import annotations

from typing import Any

import z3

from kvspec.proofs.clauses import _ALLOWED_OPS, _DIVISIONS, CertificateError, split_commands
from kvspec.proofs.parametric.generalise import QClause
from kvspec.proofs.parametric.model import ParamModel


def declarations(model: ParamModel) -> list[str]:
    lines = ["(declare-sort Request 0)", "(declare-sort Page 0)"]
    for dim, nil in model.sorts.nil.items():
        lines.append(f"(declare-fun {nil} () {model.sorts.sort[dim]})")
    for v in model.vars:
        sym = model.symbols[v.name]
        decl = sym.decl() if isinstance(sym, z3.ExprRef) else sym
        lines.append(decl.sexpr() if decl.arity() else
                     f"(declare-fun {_quote(v.name)} () {decl.range()})")
    for term in _size_symbols(model):
        lines.append(f"(declare-fun {_quote(str(term))} () Int)")
    return lines


def _size_symbols(model: ParamModel) -> list[z3.ArithRef]:
    return model.sizes.symbols() if model.sizes is not None else []


def _quote(name: str) -> str:
    import re
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name) else f"|{name}|"


def to_smtlib2(model: ParamModel, clauses: list[QClause]) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in model.fixed_sizes.items())
    lines = [f"; all-sizes inductive invariant of {model.system.name}"
             + (f" ({sizes})" if sizes else "")]
    lines += declarations(model)
    for c in clauses:
        lines.append("; " + " ".join(c.label.split()))
        lines.append(f"(assert {' '.join(c.formula.sexpr().split())})")
    return "\n".join(lines) + "\n"


def _head(command: str) -> str:
    body = command[1:].lstrip()
    end = 0
    while end < len(body) and not body[end].isspace() and body[end] not in "()":
        end += 1
    return body[:end]


def parse(text: str, model: ParamModel, labels: list[str] | None = None) -> list[QClause]:
    """The asserted clauses of ``text`` over ``model``'s symbols (CertificateError if the
    text is outside the accepted subset or does not match the model)."""
    if not isinstance(text, str):
        raise CertificateError("the SMT-LIB2 invariant is not a string")
    expected = {" ".join(d.split()) for d in declarations(model)}
    asserts: list[str] = []
    for command in split_commands(text):
        head = _head(command)
        if head in ("declare-sort", "declare-fun"):
            if " ".join(command.split()) not in expected:
                raise CertificateError(f"the declaration {' '.join(command.split())!r} does not "
                                       "match this model's state")
        elif head == "assert":
            asserts.append(command)
        else:
            raise CertificateError(f"unsupported SMT-LIB2 command {head or command[:40]!r} "
                                   "(only declare-sort, declare-fun and assert are accepted)")
    if not asserts:
        raise CertificateError("the SMT-LIB2 invariant asserts nothing")
    if labels is not None and len(labels) != len(asserts):
        raise CertificateError(f"the readable form lists {len(labels)} clauses but the SMT-LIB2 "
                               f"text asserts {len(asserts)}; they must correspond one to one")
    sorts = {str(s): s for s in model.sorts.sort.values()}
    decls = model_decls(model)
    known = set(decls)
    out: list[QClause] = []
    for k, command in enumerate(asserts, 1):
        try:
            parsed = z3.parse_smt2_string(command, sorts=sorts, decls=decls)
        except z3.Z3Exception as exc:
            raise CertificateError(f"clause {k} does not parse against this model: {exc}") \
                from None
        if len(parsed) != 1 or not z3.is_bool(parsed[0]):
            raise CertificateError(f"clause {k} is not one Boolean assertion")
        check_term(parsed[0], known, set(sorts), k)
        out.append(QClause(parsed[0], labels[k - 1] if labels else f"clause {k}"))
    return out


def model_decls(model: ParamModel) -> dict[str, Any]:
    """Name -> declaration of every symbol an invariant of ``model`` may use: the
    ``None`` elements, the state variables and the size symbols."""
    decls: dict[str, Any] = {str(n): n.decl() for n in model.sorts.nil.values()}
    for v in model.vars:
        sym = model.symbols[v.name]
        decls[v.name] = sym.decl() if isinstance(sym, z3.ExprRef) else sym
    for term in _size_symbols(model):
        decls[str(term)] = term.decl()
    return decls


def check_term(f: z3.ExprRef, known: set[str], sorts: set[str], k: int) -> None:
    stack = [f]
    seen: set[int] = set()
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_quantifier(t):
            if t.is_lambda():
                raise CertificateError(f"clause {k}: lambda terms are not supported")
            for i in range(t.num_vars()):
                if str(t.var_sort(i)) not in sorts:
                    raise CertificateError(f"clause {k}: a quantifier over {t.var_sort(i)}; only "
                                           "Request and Page are supported")
            stack.append(t.body())
            continue
        if z3.is_var(t) or z3.is_int_value(t):
            continue
        if not z3.is_app(t):
            raise CertificateError(f"clause {k}: unsupported term {t}")
        d = t.decl()
        if d.kind() == z3.Z3_OP_UNINTERPRETED:
            if d.name() not in known:
                raise CertificateError(f"clause {k}: unknown symbol {d.name()!r}")
        elif d.kind() in _DIVISIONS:
            if not (z3.is_int_value(t.arg(1)) and t.arg(1).as_long() != 0):
                raise CertificateError(f"clause {k}: division only by a nonzero numeral")
        elif d.kind() not in _ALLOWED_OPS:
            raise CertificateError(f"clause {k}: unsupported operation {d.name()!r}")
        stack.extend(t.children())
