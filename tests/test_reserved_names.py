"""Names a model cannot take from the checker: a state variable named like an SMT-LIB2
reserved word is a model error with its line (it broke writing or reading back every
certificate, exit 70); a certificate declaring one count twice is rejected (it crashed);
the symbolic liveness search's own flag is no model variable's name (a scalar named like
it hid a violation)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, system_of

from kvspec.lang.system import SMT_RESERVED
from kvspec.proofs.clauses import CertificateError

NAMED = '''
from kvspec import Model, Page, Pages, Request, Requests, action, invariant, require, var


class Named(Model):
    requests = Requests(2)
    pages = Pages(2)
    {name} = var(bool, init=False)
    own = pages.var(requests.optional, init=None)

    @action
    def grab(s, r: Request, p: Page):
        require(s.own[p] is None)
        s.own[p] = r

    @action
    def flip(s):
        s.{name} = not s.{name}

    @invariant
    def ok(s):
        return True
'''


@pytest.mark.parametrize("name", ["true", "distinct", "xor", "let", "exists", "ite"])
def test_a_variable_named_like_an_smt_lib_word_is_a_model_error(tmp_path: Path,
                                                                name: str) -> None:
    assert name in SMT_RESERVED
    path = tmp_path / "named.py"
    path.write_text(NAMED.format(name=name))
    run = run_cli("verify", str(path), "--engine", "pdr")
    assert run.code == 2
    assert f"named.py:8: state variable '{name}' is a reserved word of SMT-LIB2" in run.err
    assert "internal error" not in run.err


def test_an_ordinary_name_still_verifies(tmp_path: Path) -> None:
    path = tmp_path / "named.py"
    path.write_text(NAMED.format(name="flag"))
    assert run_cli("verify", str(path), "--engine", "pdr").code == 0


def test_a_count_declared_twice_is_rejected(tmp_path: Path) -> None:
    from kvspec.proofs.parametric.cardinality import ghosts_in
    from kvspec.proofs.parametric.model import parametric_model

    path = tmp_path / "named.py"
    path.write_text(NAMED.format(name="flag"))
    model = parametric_model(system_of(path))
    count = "|count{p: (= (own p) none_request)}|"
    once = f"(declare-fun {count} () Int)\n"
    assert len(ghosts_in(model, once)) == 1
    with pytest.raises(CertificateError, match="declared twice"):
        ghosts_in(model, once + f"(declare-fun {count} (Request) Int)\n")


SPIN = '''
from kvspec import Model, Page, Pages, Request, Requests, action, eventually, var


class Spin(Model):
    requests = Requests(1)
    pages = Pages(1)
    {name} = var(bool, init=False)
    got = var(bool, init=False)

    @action
    def spin(s):
        s.{name} = not s.{name}

    @action
    def grab(s, r: Request, p: Page):
        s.got = True

    @eventually
    def grabbed(s):
        return s.got
'''


@pytest.mark.parametrize("name", ["mstuck", "flagx"])
def test_the_liveness_search_finds_the_lasso_whatever_the_variables_are_named(
        tmp_path: Path, name: str) -> None:
    path = tmp_path / "spin.py"
    path.write_text(SPIN.format(name=name))
    run = run_cli("live", str(path), "--engine", "bmc", "--depth", "6",
                  "--property", "grabbed")
    assert run.code == 1, run.out + run.err
    assert "VIOLATED" in run.out
