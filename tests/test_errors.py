"""User mistakes give one clear message with file and line, exit code 2."""
from __future__ import annotations

import pytest
from conftest import MODELS, run_cli

PATCHED = str(MODELS / "patched.py")

HEADER = "from kvspec import Model, Requests, Pages, Request, Page, Int, action, require, emit, var\n"

BASE = HEADER + '''
class A(Model):
    requests = Requests(2)
    pages = Pages(2)
    x = var(Int(0, 3), init=0)

    @action
    def go(s, r: Request):
{body}
'''


def model_with(body: str) -> str:
    return BASE.format(body="\n".join("        " + line for line in body.splitlines()))


CASES = {
    "syntax": (HEADER + "class A(Model)\n    pass\n", 2, "syntax error"),
    "unknown variable read": (model_with("require(s.y == 1)"), 10, "unknown state variable 'y'"),
    "unknown variable write": (model_with("s.y = 1"), 10, "unknown state variable 'y'"),
    "write out of range": (model_with("s.x = s.x + 4"), 10, "outside 0..3"),
    "index out of range": (model_with("s.x = 1\nrequire(s.x == 1)\nemit.read(r, 5)"), 12,
                           "page 5 is not a page id"),
    "while on state": (model_with("while s.x < 3:\n    s.x = s.x + 1"), 10, "`while` loops"),
    "unknown event": (model_with("emit.reed(r, 0)"), 10, "unknown event kind 'reed'"),
    "import failure": ("import no_such_module_kvspec\n", 1, "failed to import"),
    "missing annotation": (BASE.replace("r: Request", "r").format(body="        s.x = 1"), 9,
                           "needs a type annotation"),
    "bad initial value": (BASE.replace("init=0", "init=9").format(body="        s.x = 1"), 6,
                          "initial value of x"),
    "mask as bool": (model_with("if s.x == 0 and (s.x == 1):\n    pass\nm = (s.x == 0)\n"
                                "require(s.x >= 0)\nemit.free(r, pages=m)"), 14,
                     "pages= must be a mask"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_mistakes_name_file_and_line(case: str, write_model) -> None:
    source, line, fragment = CASES[case]
    path = write_model(source)
    result = run_cli("verify", str(path), "--engine", "explicit")
    assert result.code == 2, result.out + result.err
    assert fragment in result.err
    assert f"{path.name}:{line}:" in result.err, result.err
    assert "Traceback" not in result.err + result.out
    assert result.err.count("\n") == 1  # one line


def test_unknown_size_parameter_is_a_usage_error() -> None:
    result = run_cli("verify", PATCHED, "--size", "requests=2,banana=3")
    assert result.code == 2
    assert "unknown size parameter 'banana'" in result.err and "requests" in result.err


def test_bad_size_value() -> None:
    result = run_cli("verify", PATCHED, "--size", "requests=two")
    assert result.code == 2 and "not an integer" in result.err
    result = run_cli("verify", PATCHED, "--size", "requests=0")
    assert result.code == 2 and "at least 1" in result.err


def test_missing_model_file() -> None:
    result = run_cli("verify", "no/such/model.py")
    assert result.code == 2 and "no such model file" in result.err


def test_file_without_a_model(write_model) -> None:
    result = run_cli("verify", str(write_model("x = 1\n")))
    assert result.code == 2 and "defines no class deriving from kvspec.Model" in result.err


def test_unknown_property() -> None:
    result = run_cli("verify", PATCHED, "--property", "no-such-thing")
    assert result.code == 2 and "unknown property" in result.err
