"""The invariant of a certificate: its SMT-LIB2 text, read strictly against a model.

The SMT-LIB2 text is the authority: the invariant that is checked is exactly the
conjunction of *every* ``assert`` command in it, one clause per ``assert``. The
readable form stored beside it (``for all p: ...``) only labels the clauses in
reports; nothing is concluded from it.

To make "every assertion is checked" hold by construction, only a small subset of
SMT-LIB2 is accepted (anything else is a :class:`CertificateError`, never skipped):

* commands: ``declare-fun NAME () SORT``, ``declare-const NAME SORT`` and
  ``assert TERM`` — no ``push``/``pop``/``reset`` (which would discard
  assertions), no ``define-fun`` or other commands;
* every declared or used constant is a state variable of the model, with the
  model's sort (``Int`` or ``Bool``); no other function symbols;
* terms use the Boolean connectives, ``=``, ``distinct``, ``ite``, integer
  comparisons, ``+``, ``-``, ``*``, ``div``/``mod``/``rem`` by a nonzero numeral,
  ``abs``, pseudo-Boolean constraints, integer numerals, and ``forall`` /
  ``exists`` over ``Int`` or ``Bool`` variables (no ``lambda``).

Each ``assert`` is parsed on its own, against constants built from the model's
slot names (the file's own declarations are only compared with the model), so a
clause means the same thing whatever the rest of the file says.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import z3


class CertificateError(ValueError):
    """A certificate that cannot be read or checked as given (the reason is the message)."""


@dataclass
class Clause:
    """One ``assert`` of the invariant."""

    index: int  # 1-based position among the assertions
    text: str  # the ``(assert ...)`` command as written
    formula: z3.BoolRef
    label: str  # the readable form from the certificate (presentation only)
    constants: frozenset[str] = field(default_factory=frozenset)
    quantified: bool = False

    def describe(self, limit: int = 120) -> str:
        text = " ".join(self.text.split())
        if len(text) > limit:
            text = text[:limit] + " …"
        if self.label and self.label != f"clause {self.index}":
            return f"clause {self.index} ({self.label}): {text}"
        return f"clause {self.index}: {text}"

    def pieces(self) -> list[z3.BoolRef]:
        """The top-level conjuncts (``for all p: ...`` is asserted as one ``and``)."""
        f = self.formula
        return list(f.children()) if z3.is_and(f) else [f]


# -- commands ---------------------------------------------------------------------------

def split_commands(text: str) -> list[str]:
    """The top-level S-expressions of ``text`` (comments dropped), as written."""
    out: list[str] = []
    depth = 0
    start = -1
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == ";":
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if ch == "|":
            end = text.find("|", i + 1)
            if end < 0:
                raise CertificateError("unterminated |quoted symbol| in the SMT-LIB2 text")
            if depth == 0:
                raise CertificateError(f"unexpected text outside a command: {text[i:end + 1]!r}")
            i = end + 1
            continue
        if ch == '"':
            end = _string_end(text, i)
            if depth == 0:
                raise CertificateError("unexpected string outside a command")
            i = end + 1
            continue
        if ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise CertificateError("unbalanced ')' in the SMT-LIB2 text")
            if depth == 0:
                out.append(text[start:i + 1])
        elif depth == 0 and not ch.isspace():
            j = i
            while j < n and not text[j].isspace() and text[j] not in "();":
                j += 1
            raise CertificateError(f"unexpected text outside a command: {text[i:j]!r}")
        i += 1
    if depth != 0:
        raise CertificateError("unbalanced '(' in the SMT-LIB2 text (a command is not closed)")
    return out


def _tokens(command: str) -> list[str]:
    """Flat tokens of a command: ``(``, ``)``, symbols (quotes removed), other atoms."""
    out: list[str] = []
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            out.append(ch)
            i += 1
        elif ch == "|":
            end = command.find("|", i + 1)
            if end < 0:
                raise CertificateError("unterminated |quoted symbol| in the SMT-LIB2 text")
            out.append(command[i + 1:end])
            i = end + 1
        elif ch == '"':
            end = _string_end(command, i)
            out.append(command[i:end + 1])
            i = end + 1
        else:
            j = i
            while j < n and not command[j].isspace() and command[j] not in '()|"':
                j += 1
            out.append(command[i:j])
            i = j
    return out


def _string_end(text: str, i: int) -> int:
    """The index of the quote closing the string literal opening at ``i`` (``""`` is
    an escaped quote inside it)."""
    j = i + 1
    while True:
        end = text.find('"', j)
        if end < 0:
            raise CertificateError("unterminated string in the SMT-LIB2 text")
        if end + 1 < len(text) and text[end + 1] == '"':
            j = end + 2
            continue
        return end


def _head(command: str) -> str:
    toks = _tokens(command)
    return toks[1] if len(toks) > 1 and toks[1] not in "()" else ""


#: the declaration kvspec writes, ``(declare-fun |name| () Int)``: read without the
#: tokenizer (a certificate at 256 pages declares thousands); anything else is tokenized
_PLAIN_DECLARATION = re.compile(r"\(declare-fun \|([^|]*)\| \(\) (Int|Bool)\)")


def _check_declaration(command: str, known: dict[str, str]) -> None:
    plain = _PLAIN_DECLARATION.fullmatch(command)
    if plain is not None:
        ok, name, sort = True, plain.group(1), plain.group(2)
    else:
        toks = _tokens(command)
        head = toks[1]
        if head == "declare-fun":
            ok = len(toks) == 7 and toks[3:5] == ["(", ")"] and toks[6] == ")"
            name, sort = (toks[2], toks[5]) if ok else ("", "")
        else:
            ok = len(toks) == 5 and toks[4] == ")"
            name, sort = (toks[2], toks[3]) if ok else ("", "")
    if not ok or name in "()" or sort in "()":
        raise CertificateError(f"unsupported declaration {' '.join(command.split())!r} "
                               "(only constants of sort Int or Bool can be declared)")
    if name not in known:
        raise CertificateError(f"the invariant declares {name!r}, which is not a state "
                               "variable of this model")
    if sort != known[name]:
        raise CertificateError(f"the invariant declares {name!r} as {sort}, but the model's "
                               f"variable is {known[name]}")


# -- terms ----------------------------------------------------------------------------------

def _op(name: str) -> int | None:
    value = getattr(z3, name, None)
    return value if isinstance(value, int) else None


_ALLOWED_OPS: frozenset[int] = frozenset(k for k in (_op(n) for n in (
    "Z3_OP_TRUE", "Z3_OP_FALSE", "Z3_OP_EQ", "Z3_OP_DISTINCT", "Z3_OP_ITE", "Z3_OP_AND",
    "Z3_OP_OR", "Z3_OP_IFF", "Z3_OP_XOR", "Z3_OP_NOT", "Z3_OP_IMPLIES", "Z3_OP_ANUM",
    "Z3_OP_LE", "Z3_OP_GE", "Z3_OP_LT", "Z3_OP_GT", "Z3_OP_ADD", "Z3_OP_SUB",
    "Z3_OP_UMINUS", "Z3_OP_MUL", "Z3_OP_ABS", "Z3_OP_PB_AT_MOST", "Z3_OP_PB_AT_LEAST",
    "Z3_OP_PB_LE", "Z3_OP_PB_GE", "Z3_OP_PB_EQ")) if k is not None)
_DIVISIONS: frozenset[int] = frozenset(k for k in (_op(n) for n in (
    "Z3_OP_IDIV", "Z3_OP_MOD", "Z3_OP_REM")) if k is not None)
_SORTS = {z3.Z3_INT_SORT: "Int", z3.Z3_BOOL_SORT: "Bool"}


def term_constants(formula: z3.ExprRef, known: dict[str, str]) -> tuple[frozenset[str], bool]:
    """The state variables ``formula`` mentions (inside quantifiers too) and whether it
    has a quantifier. Raises :class:`CertificateError` for anything outside the
    accepted term language (module docstring). A DAG walk with direct C calls."""
    ctx = formula.ctx
    c = ctx.ref()
    names: set[str] = set()
    quantified = False
    seen: set[int] = set()
    stack = [formula.as_ast()]
    while stack:
        a = stack.pop()
        key = z3.Z3_get_ast_id(c, a)
        if key in seen:
            continue
        seen.add(key)
        kind = z3.Z3_get_ast_kind(c, a)
        if kind == z3.Z3_VAR_AST:
            continue
        if kind == z3.Z3_QUANTIFIER_AST:
            q = z3.QuantifierRef(a, ctx)
            if q.is_lambda():
                raise CertificateError("lambda terms are not supported in an invariant")
            for i in range(q.num_vars()):
                if q.var_sort(i).kind() not in _SORTS:
                    raise CertificateError(f"a quantifier binds {q.var_name(i)!r} of sort "
                                           f"{q.var_sort(i)}; only Int and Bool are supported")
            quantified = True
            stack.append(z3.Z3_get_quantifier_body(c, a))
            continue
        sort_kind = z3.Z3_get_sort_kind(c, z3.Z3_get_sort(c, a))
        if sort_kind not in _SORTS:
            e = z3.ExprRef(a, ctx)
            raise CertificateError(f"the term {_short(e)} has sort {e.sort()}; only Int and "
                                   "Bool terms are supported")
        if kind == z3.Z3_NUMERAL_AST:
            continue
        if kind != z3.Z3_APP_AST:
            raise CertificateError(f"unsupported term {z3.ExprRef(a, ctx)}")
        decl = z3.Z3_get_app_decl(c, a)
        op = z3.Z3_get_decl_kind(c, decl)
        n = z3.Z3_get_app_num_args(c, a)
        if op == z3.Z3_OP_UNINTERPRETED:
            name = z3.Z3_get_symbol_string(c, z3.Z3_get_decl_name(c, decl))
            if n != 0:
                raise CertificateError(f"the invariant applies the unknown function {name!r}")
            if name not in known:
                raise CertificateError(f"the invariant mentions {name!r}, which is not a state "
                                       "variable of this model")
            if _SORTS[sort_kind] != known[name]:
                raise CertificateError(f"the invariant uses {name!r} as {_SORTS[sort_kind]}, "
                                       f"but the model's variable is {known[name]}")
            names.add(name)
            continue
        if op in _DIVISIONS:
            d = z3.Z3_get_app_arg(c, a, 1)  # (a bare ExprRef is never an int value)
            if not (z3.Z3_get_ast_kind(c, d) == z3.Z3_NUMERAL_AST
                    and z3.Z3_get_sort_kind(c, z3.Z3_get_sort(c, d)) == z3.Z3_INT_SORT
                    and z3.Z3_get_numeral_string(c, d) != "0"):
                raise CertificateError(f"{_short(z3.ExprRef(a, ctx))}: division is supported "
                                       "only by a nonzero integer numeral")
        elif op not in _ALLOWED_OPS:
            e = z3.ExprRef(a, ctx)
            raise CertificateError(f"unsupported operation {e.decl().name()!r} in {_short(e)}")
        for i in range(n):
            stack.append(z3.Z3_get_app_arg(c, a, i))
    return frozenset(names), quantified


def _short(e: z3.ExprRef, limit: int = 80) -> str:
    text = " ".join(e.sexpr().split())
    return text if len(text) <= limit else text[:limit] + " …"


# -- the invariant ------------------------------------------------------------------------

def var_names(state_vars: list[z3.ExprRef]) -> list[str]:
    """The names of ``state_vars`` (as ``str`` prints them, without the printer's cost
    or a declaration object per variable)."""
    if not state_vars:
        return []
    c = state_vars[0].ctx.ref()
    return [z3.Z3_get_symbol_string(c, z3.Z3_get_decl_name(c, z3.Z3_get_app_decl(c, v.as_ast())))
            for v in state_vars]


def var_sorts(state_vars: list[z3.ExprRef]) -> dict[str, str]:
    """Name -> ``Int`` or ``Bool`` of each of ``state_vars``."""
    return {name: ("Bool" if z3.is_bool(v) else "Int")
            for name, v in zip(var_names(state_vars), state_vars)}


def parse_invariant(text: str, state_vars: list[z3.ExprRef],
                    labels: list[str] | None = None) -> list[Clause]:
    """Every ``assert`` of ``text`` as a :class:`Clause` over ``state_vars`` (the model's
    own constants). ``labels`` (the readable form) must have one entry per
    ``assert`` when given. Raises :class:`CertificateError` with the reason."""
    if not isinstance(text, str):
        raise CertificateError("the SMT-LIB2 invariant is not a string")
    known = var_sorts(state_vars)
    asserts: list[str] = []
    for command in split_commands(text):
        head = _head(command)
        if head in ("declare-fun", "declare-const"):
            _check_declaration(command, known)
        elif head == "assert":
            asserts.append(command)
        else:
            shown = head or " ".join(command.split())[:40]
            raise CertificateError(f"unsupported SMT-LIB2 command {shown!r} in the invariant "
                                   "(only declare-fun, declare-const and assert are accepted)")
    if not asserts:
        raise CertificateError("the SMT-LIB2 invariant asserts nothing")
    if labels is not None and len(labels) != len(asserts):
        raise CertificateError(f"the readable form lists {len(labels)} clauses but the SMT-LIB2 "
                               f"text asserts {len(asserts)}; they must correspond one to one")
    parse = _Parser(state_vars)
    clauses: list[Clause] = []
    for k, command in enumerate(asserts, 1):
        label = labels[k - 1] if labels is not None else f"clause {k}"
        depth = _nesting(command)
        if depth > MAX_CLAUSE_NESTING:
            raise CertificateError(f"clause {k} is nested {depth} deep (at most "
                                   f"{MAX_CLAUSE_NESTING}; kvspec writes far flatter ones)")
        try:
            parsed = parse(command)
        except z3.Z3Exception as exc:
            raise CertificateError(f"clause {k} does not parse against this model: "
                                   f"{_z3_message(exc)}") from None
        if len(parsed) != 1 or not z3.is_bool(parsed[0]):
            raise CertificateError(f"clause {k} is not one Boolean assertion")
        try:
            names, quantified = term_constants(parsed[0], known)
        except CertificateError as exc:
            raise CertificateError(f"clause {k}: {exc}") from None
        clauses.append(Clause(k, command, parsed[0], label, names, quantified))
    return clauses


#: how deeply a clause's terms may nest: the checks walk terms recursively
MAX_CLAUSE_NESTING = 200


def _nesting(command: str) -> int:
    """The deepest nesting of parentheses in ``command`` (those inside ``|quoted|``
    symbols and string literals are not parentheses)."""
    depth = deepest = 0
    i, n = 0, len(command)
    while i < n:
        ch = command[i]
        if ch == "|":
            end = command.find("|", i + 1)
            i = n if end < 0 else end + 1
            continue
        if ch == '"':
            i = _string_end(command, i) + 1
            continue
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
        i += 1
    return deepest


class _Parser:
    """``z3.parse_smt2_string`` with the model's constants declared, prepared once."""

    def __init__(self, state_vars: list[z3.ExprRef]) -> None:
        self.ctx = state_vars[0].ctx if state_vars else z3.main_ctx()
        self.n = len(state_vars)
        self.names = (z3.Symbol * self.n)()
        self.decls = (z3.FuncDecl * self.n)()
        self.keep = [v.decl() for v in state_vars]
        for i, (name, d) in enumerate(zip(var_names(state_vars), self.keep)):
            self.names[i] = z3.to_symbol(name, self.ctx)
            self.decls[i] = d.as_func_decl()

    def __call__(self, text: str) -> list[z3.ExprRef]:
        vec = z3.Z3_parse_smtlib2_string(self.ctx.ref(), text, 0, None, None, self.n,
                                         self.names, self.decls)
        return list(z3.AstVector(vec, self.ctx))


def _z3_message(exc: z3.Z3Exception) -> str:
    msg = exc.value if isinstance(exc.value, str) else bytes(exc.value).decode(errors="replace")
    return " ".join(msg.replace('(error "', "").replace('")', "").split())
