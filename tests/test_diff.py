"""``kvspec diff OLD NEW``: structure, verdicts and the shortest distinguishing behaviour."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import MODELS, run_cli

from kvspec.gate.diff import DIFF_FORMAT, diff_designs
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.trace import TRACE_FORMAT, schedule_from_json

HEADER = '''\
import enum
from kvspec import Int, Model, Page, Pages, Request, Requests, action, emit, invariant, require


class Phase(enum.Enum):
    NEW = 0
    WRITING = 1
    HELD = 2
    DONE = 3


class Design(Model):
    requests = Requests(1)
    pages = Pages(1)
    phase = requests.var(Phase, init=Phase.NEW)
    owner = pages.var(requests.optional, init=None)
    inflight = pages.var(requests.optional, init=None)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.phase[r] == Phase.NEW and s.owner[p] is None)
        s.owner[p] = r
        s.phase[r] = Phase.WRITING
        emit.alloc(r, p)

    @action
    def post(s, r: Request, p: Page):
        require(s.phase[r] == Phase.WRITING and s.owner[p] == r and s.inflight[p] is None)
        s.inflight[p] = r
        emit.post_write(r, p)

    @action
    def land(s, p: Page):
        w = s.inflight[p]
        require(w is not None)
        s.inflight[p] = None
        emit.land_write(w, p)
'''

#: the safe design: abort holds the pages until every write into them has landed
SAFE = HEADER + '''
    @action
    def abort(s, r: Request):
        require(s.phase[r] == Phase.WRITING)
        s.phase[r] = Phase.HELD
        emit.abort(r)

    @action
    def release(s, r: Request):
        require(s.phase[r] == Phase.HELD)
        require(not (s.inflight == r).any())
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.phase[r] = Phase.DONE
'''

#: its regression: abort frees the pages at once, while a write can still land
REGRESSION = HEADER + '''
    @action
    def abort(s, r: Request):
        require(s.phase[r] == Phase.WRITING)
        mine = s.owner == r
        emit.abort(r)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.phase[r] = Phase.DONE

    @action
    def release(s, r: Request):
        require(s.phase[r] == Phase.HELD)
        require(not (s.inflight == r).any())
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.phase[r] = Phase.DONE
'''

#: SAFE with locals renamed, comments, docstrings and a helper (renamed helpers too)
REFACTORED = HEADER + '''
    @action
    def abort(s, r: Request):
        """Mark the request held; keep its pages."""
        # nothing is freed here
        require(s.phase[r] == Phase.WRITING)

        s.phase[r] = Phase.HELD   # held until drained
        emit.abort(r)

    @action
    def release(s, req: Request):
        require(s.phase[req] == Phase.HELD)
        require(quiet(s, req))
        owned = s.owner == req      # the pages of the request
        emit.free(req, pages=owned)
        s.owner[owned] = None
        s.phase[req] = Phase.DONE


def quiet(state, who):
    return not (state.inflight == who).any()
'''


def _release_with_helper(body: str) -> str:
    return HEADER + '''
    @action
    def abort(s, r: Request):
        require(s.phase[r] == Phase.WRITING)
        s.phase[r] = Phase.HELD
        emit.abort(r)

    @action
    def release(s, r: Request):
        require(s.phase[r] == Phase.HELD)
        mine = s.owner == r
        emit.free(r, pages=mine)
        s.owner[mine] = None
        finish(s, r)


def finish(s, r):
''' + body


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return _write(tmp_path, "safe.py", SAFE), _write(tmp_path, "regression.py", REGRESSION)


def test_regression_structure_verdicts_and_shortest_behaviour(pair: tuple[Path, Path]) -> None:
    old, new = pair
    res = run_cli("diff", str(old), str(new), "--engine", "explicit")
    assert res.code == 1, res.err
    lines = res.out.splitlines()
    # 1. structure: only abort changed, and only its effects (its guard is the same)
    structure = lines[lines.index("Structure") + 1:lines.index("Verdicts (explicit)")]
    assert [x.strip() for x in structure if x.strip()] == [
        "actions changed:", "~ abort  effects changed"]
    # 2. verdicts: the regression violates no-reuse-before-drain, in 4 steps
    assert "  no-reuse-before-drain: HOLDS → VIOLATED (4 steps)" in lines
    # 3. the shortest behaviour: abort right after alloc frees the page in NEW only
    assert ("  NEW allows, OLD does not: alloc(r0, page 0) then abort(r0)  (2 steps)"
            in lines)
    assert "     1. alloc(r0, page 0)  alloc(r0, page 0)" in lines
    assert "     2. abort(r0)          abort(r0), free(r0, page 0)   ← NEW; differs" in lines
    assert ("    at abort(r0) OLD emits abort(r0); NEW emits abort(r0), free(r0, page 0)"
            in lines)
    # printed in this order
    order = [res.out.index(x) for x in ("Structure", "Verdicts", "Behaviour")]
    assert order == sorted(order)


def test_identical_designs_have_no_behavioural_difference(pair: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    old, _ = pair
    copy = _write(tmp_path, "copy.py", SAFE)
    res = run_cli("diff", str(old), str(copy), "--engine", "explicit")
    assert res.code == 0, res.err
    assert "  no structural change" in res.out
    assert "no verdict changed (4 properties)" in res.out
    assert "no behavioural difference (exhaustive, " in res.out
    n = int(res.out.split("no behavioural difference (exhaustive, ")[1].split()[0])
    assert n > 5


def test_renamed_locals_comments_and_helpers_are_no_structural_change(
        pair: tuple[Path, Path], tmp_path: Path) -> None:
    old, _ = pair
    new = _write(tmp_path, "refactored.py", REFACTORED)
    res = run_cli("diff", str(old), str(new), "--no-verdicts")
    assert res.code == 0, res.err
    assert "Structure\n  no structural change\n" in res.out
    assert "no behavioural difference (exhaustive" in res.out
    assert "Verdicts" not in res.out  # --no-verdicts


def test_a_semantic_change_inside_a_helper_changes_its_callers(tmp_path: Path) -> None:
    old = _write(tmp_path, "a.py", _release_with_helper("    s.phase[r] = Phase.DONE\n"))
    new = _write(tmp_path, "b.py", _release_with_helper(
        "    s.phase[r] = Phase.DONE\n    emit.finish(r)\n"))
    res = run_cli("diff", str(old), str(new), "--no-verdicts")
    assert res.code == 1
    assert "~ release  effects (via finish()) changed" in res.out
    assert "abort" not in res.out.split("Behaviour")[0]  # untouched actions are not listed
    assert "then release(r0)" in res.out
    assert "at release(r0) OLD emits free(r0, page 0); NEW emits free(r0, page 0), " \
           "finish(r0)" in res.out


def test_a_renamed_helper_with_effects_is_no_change(tmp_path: Path) -> None:
    body = "    s.phase[r] = Phase.DONE\n"
    old = _write(tmp_path, "a.py", _release_with_helper(body))
    renamed = _release_with_helper(body).replace("def finish(s, r):", "def wrap_up(state, req):") \
        .replace("finish(s, r)", "wrap_up(s, r)") \
        .replace("    s.phase[r] = Phase.DONE\n", "    state.phase[req] = Phase.DONE\n")
    new = _write(tmp_path, "b.py", "# moved around\n\n" + renamed)
    res = run_cli("diff", str(old), str(new), "--no-verdicts")
    assert res.code == 0, res.out
    assert "Structure\n  no structural change\n" in res.out


def test_timeout_is_unknown(tmp_path: Path) -> None:
    res = run_cli("diff", str(MODELS / "patched.py"), str(MODELS / "patched.py"),
                  "--no-verdicts", "--timeout", "0.2")
    assert res.code == 3
    assert "UNKNOWN: no difference within " in res.out
    assert "(the timeout was hit; this is not a proof of equivalence)" in res.out


def test_guard_parameters_variables_and_actions(tmp_path: Path) -> None:
    old = _write(tmp_path, "old.py", SAFE)
    new_src = (SAFE
               .replace("    inflight = pages.var(requests.optional, init=None)\n",
                        "    inflight = pages.var(requests.optional, init=None)\n"
                        "    retries = requests.var(Int(0, 2), init=0)\n")
               .replace("    phase = requests.var(Phase, init=Phase.NEW)\n",
                        "    phase = requests.var(Phase, init=Phase.NEW)\n"
                        "    owner_hint = var(Int(0, 3), init=0)\n")
               .replace("require(s.phase[r] == Phase.WRITING)\n        s.phase[r] = Phase.HELD",
                        "require(s.phase[r] == Phase.WRITING or s.phase[r] == Phase.NEW)\n"
                        "        s.phase[r] = Phase.HELD")
               .replace("    def land(s, p: Page):", "    def land(s, p: Page, k: Int(0, 1)):")
               .replace("from kvspec import Int,", "from kvspec import var, Int,"))
    new_src += '''
    @action
    def retry(s, r: Request):
        require(s.phase[r] == Phase.HELD and s.retries[r] < 2)
        s.retries[r] = s.retries[r] + 1
        emit.timeout(r)
'''
    new = _write(tmp_path, "new.py", new_src)
    res = run_cli("diff", str(old), str(new), "--no-verdicts")
    assert res.code == 1, res.err
    out = res.out
    assert "actions added: + retry(request)" in out
    assert "~ abort  guard changed" in out
    assert "~ land   parameters (page) → (page, int 0..1) changed" in out
    assert "state variables added: + owner_hint: int 0..3, + retries: int 0..2 per request" \
        in out
    # land(page 0) in OLD and land(page 0, 0) in NEW are different labels: the shortest
    # difference is abort(r0) from the initial state, which only NEW's guard admits
    assert "NEW allows, OLD does not: abort(r0) (from the initial state)  (1 step)" in out
    assert "OLD does not enable abort(r0) here; NEW does (abort(r0))" in out


def test_removed_and_retyped_variables(tmp_path: Path) -> None:
    old = _write(tmp_path, "old.py", SAFE)
    new = _write(tmp_path, "new.py", SAFE.replace("    HELD = 2\n    DONE = 3\n",
                                                  "    HELD = 2\n    DONE = 3\n    LOST = 4\n"))
    res = run_cli("diff", str(old), str(new), "--no-verdicts")
    assert ("state variable retyped: ~ phase: enum Phase(NEW, WRITING, HELD, DONE) per "
            "request → enum Phase(NEW, WRITING, HELD, DONE, LOST) per request") in res.out
    assert res.code == 0  # a new enum member nobody uses changes no behaviour
    res = run_cli("diff", str(new), str(old), "--no-verdicts")
    assert "enum Phase(NEW, WRITING, HELD, DONE, LOST) per request → enum Phase(NEW, " \
           "WRITING, HELD, DONE) per request" in res.out


def test_state_pair_limit_is_unknown_not_equivalence(pair: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    old, _ = pair
    copy = _write(tmp_path, "copy.py", SAFE)
    res = run_cli("diff", str(old), str(copy), "--no-verdicts", "--max-states", "2")
    assert res.code == 3
    assert "UNKNOWN: no difference within 2 state pairs (the state-pair limit was hit; " \
           "this is not a proof of equivalence)" in res.out


def test_json_document_and_trace_file(pair: tuple[Path, Path], tmp_path: Path) -> None:
    old, new = pair
    trace_file = tmp_path / "behaviour.json"
    res = run_cli("diff", str(old), str(new), "--json", "--engine", "explicit",
                  "-o", str(trace_file))
    assert res.code == 1 and res.err == ""
    doc = json.loads(res.out)
    assert doc["format"] == DIFF_FORMAT and doc["exit_code"] == 1
    assert doc["structure"]["actions"]["changed"] == [
        {"name": "abort", "guard": False, "effects": True, "params": None, "helpers": []}]
    assert doc["verdicts"]["changed"][0]["property"] == "no-reuse-before-drain"
    assert doc["verdicts"]["changed"][0]["new_status"] == "VIOLATED (4 steps)"
    d = doc["behaviour"]["distinction"]
    assert doc["behaviour"]["status"] == "different"
    assert (d["allowed_by"], d["kind"], d["length"], d["label"]) == ("new", "events", 2,
                                                                     "abort(r0)")
    assert [p["label"] for p in d["prefix"]] == ["alloc(r0, page 0)"]
    trace = json.loads(trace_file.read_text())
    assert trace == d["trace"]
    assert trace["format"] == TRACE_FORMAT
    assert [s["label"] for s in trace["steps"]] == ["alloc(r0, page 0)", "abort(r0)"]
    assert [e["kind"] for e in trace["steps"][-1]["events"]] == ["abort", "free"]
    # the trace is one of NEW's behaviours: it re-executes on NEW
    system = compile_model(load_model(new))
    assert [i.label() for i in schedule_from_json(system, trace)] == ["alloc(r0, page 0)",
                                                                      "abort(r0)"]
    assert run_cli("render", str(trace_file), "-o", str(tmp_path / "t.dot")).code == 0


def test_render_draws_the_distinguishing_behaviour(pair: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    if shutil.which("dot") is None:
        pytest.skip("graphviz dot is not installed")
    old, new = pair
    out = tmp_path / "diff.svg"
    res = run_cli("diff", str(old), str(new), "--no-verdicts", "--render", str(out))
    assert res.code == 1
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg[:400]
    assert "equivalence with OLD (safe.py)" in svg
    assert "abort" in svg


def test_nothing_to_render_without_a_difference(pair: tuple[Path, Path], tmp_path: Path) -> None:
    old, _ = pair
    out = tmp_path / "none.svg"
    res = run_cli("diff", str(old), str(old), "--no-verdicts", "--render", str(out))
    assert res.code == 0
    assert "nothing to write or draw" in res.err and not out.exists()


def test_a_model_error_in_one_design_distinguishes(tmp_path: Path) -> None:
    old = _write(tmp_path, "old.py", SAFE)
    new = _write(tmp_path, "new.py", SAFE
                 .replace("from kvspec import Int,", "from kvspec import var, Int,")
                 .replace("    pages = Pages(1)\n",
                          "    pages = Pages(1)\n    aborts = var(Int(0, 1), init=1)\n")
                 .replace("        s.phase[r] = Phase.HELD\n        emit.abort(r)\n",
                          "        s.phase[r] = Phase.HELD\n        emit.abort(r)\n"
                          "        s.aborts = s.aborts + 1\n"))
    res = run_cli("diff", str(old), str(new), "--no-verdicts")
    assert res.code == 1, res.err
    assert "OLD allows, NEW does not: alloc(r0, page 0) then abort(r0)  (2 steps)" in res.out
    assert "NEW stops with a model error at abort(r0): " in res.out
    assert "new.py:" in res.out and "write aborts = 2: 2 is outside 0..1" in res.out


def test_python_api(pair: tuple[Path, Path]) -> None:
    old, new = (compile_model(load_model(p)) for p in pair)
    diff = diff_designs(old, new, max_states=10_000, timeout=60, verdicts=False)
    assert diff.status == "different" and diff.exit_code == 1
    d = diff.distinction
    assert d is not None and len(d) == 2 and d.allowed_by == "new"
    assert d.trace is not None and d.trace.system is new
    assert d.other_trace is not None and d.other_trace.system is old
    assert [s.instance.label() for s in d.other_trace.steps] == ["alloc(r0, page 0)",
                                                                  "abort(r0)"]
    assert [e.text() for e in d.other_trace.steps[-1].events] == ["abort(r0)"]
    assert diff.to_json()["behaviour"]["distinction"]["summary"] == d.trace.reason
    same = diff_designs(old, compile_model(load_model(pair[0])), verdicts=False)
    assert same.status == "equivalent" and same.exit_code == 0


def test_shipped_buggy_pd_against_patched() -> None:
    """Both declare requests, pages, prefill_capacity and max_need with the same
    defaults, so they are compared at the same sizes."""
    res = run_cli("diff", str(MODELS / "buggy_pd.py"), str(MODELS / "patched.py"),
                  "--no-verdicts")
    assert res.code == 1, res.err
    out = res.out
    assert "sizes: requests=2, pages=4, prefill_capacity=2, max_need=3" in out
    assert "actions added: + abort(request), + drain_ack(request, page), + timeout(request), " \
           "+ release(request)" in out
    assert "~ prealloc          guard changed" in out
    assert "state variables removed: - to_finish: bool per request, - stub: bool per request" \
        in out
    assert "NEW allows, OLD does not: arrive(r0, 1), admission(r0) then abort(r0)  (3 steps)" \
        in out
    # the other shortest difference is the bug itself: a rejected request is preallocated
    assert "    OLD allows, NEW does not: arrive(r0, 3), admission(r0) then " \
           "prealloc(r0, page 0): NEW does not enable prealloc(r0, page 0) here; " \
           "OLD does (alloc(r0, page 0))" in out


# -- git:REV:path ---------------------------------------------------------------------

def _git(repo: Path, *argv: str) -> None:
    subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
                        "HOME": str(repo), "PATH": "/usr/bin:/bin:/usr/local/bin"})


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    (root / "models").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / "models" / "design.py").write_text(SAFE)
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "safe design")
    (root / "models" / "design.py").write_text(REGRESSION)
    monkeypatch.chdir(root)
    return root


def test_git_revision_against_the_working_tree(repo: Path) -> None:
    res = run_cli("diff", "git:HEAD:models/design.py", "models/design.py", "--no-verdicts")
    assert res.code == 1, res.err
    assert res.out.startswith("kvspec diff: OLD git:HEAD:models/design.py (Design) → NEW "
                              "models/design.py (Design)")
    assert "~ abort  effects changed" in res.out
    assert "NEW allows, OLD does not: alloc(r0, page 0) then abort(r0)  (2 steps)" in res.out
    # from a subdirectory, the path is relative to it
    import os
    os.chdir(repo / "models")
    res = run_cli("diff", "git:HEAD:design.py", "git:HEAD:design.py", "--no-verdicts")
    assert res.code == 0 and "no behavioural difference" in res.out


def test_git_errors_are_one_line_usage_errors(repo: Path) -> None:
    for spec, what in (("git:nope:models/design.py", "git show nope:models/design.py failed"),
                       ("git:HEAD:models/missing.py", "git show HEAD:models/missing.py failed"),
                       ("git:HEAD", "expected git:REV:path"),
                       ("git:HEAD:models", "models at HEAD is a directory, not a model file")):
        res = run_cli("diff", spec, "models/design.py")
        assert res.code == 2, spec
        assert res.err.count("\n") == 1 and what in res.err and "Traceback" not in res.err


def test_git_model_error_names_the_revision(repo: Path) -> None:
    (repo / "models" / "broken.py").write_text(SAFE.replace("emit.abort(r)", "emit.abort(r, 1)"))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "broken")
    res = run_cli("diff", "git:HEAD:models/broken.py", "models/design.py")
    assert res.code == 2
    assert res.err.startswith("kvspec: error: git:HEAD:models/broken.py:")
    assert "emit.abort: this event takes no page" in res.err


# -- usage errors ----------------------------------------------------------------------

def test_usage_errors(pair: tuple[Path, Path], tmp_path: Path) -> None:
    old, new = pair
    cases = [
        (["diff", str(old), str(tmp_path / "missing.py")], "no such model file"),
        (["diff", str(old), str(new), "--size", "max_need=2"],
         f"--size max_need: OLD ({old}) has no size parameter 'max_need'"),
        (["diff", str(old), str(new), "--max-states", "0"], "must be at least 1"),
        (["diff", str(old), str(new), "--timeout", "-1"], "must be a number of seconds > 0"),
        (["diff", str(old), str(new), "--render", "out.txt"], "unknown picture format"),
        (["diff", str(old), str(new), "-o", str(tmp_path / "nodir" / "t.json")],
         "does not exist"),
        (["diff", str(old), str(new), "--model-class", "Nope"], "no Model class named 'Nope'"),
        (["diff", str(old)], "the following arguments are required: NEW"),
    ]
    for argv, message in cases:
        res = run_cli(*argv)
        assert res.code == 2, argv
        assert message in res.err, (argv, res.err)
        assert res.err.count("\n") == 1 and "Traceback" not in res.err


def test_sizes_apply_to_both_and_differing_defaults_are_aligned(pair: tuple[Path, Path],
                                                               tmp_path: Path) -> None:
    old, _ = pair
    bigger = _write(tmp_path, "bigger.py", SAFE.replace("pages = Pages(1)", "pages = Pages(2)"))
    res = run_cli("diff", str(old), str(bigger), "--no-verdicts")
    assert "kvspec: note: size pages is 1 in OLD and 2 in NEW; both are compiled with " \
           "pages=2 (choose with --size)" in res.err
    assert "size default changed: ~ pages: 1 → 2" in res.out
    assert "sizes: requests=1, pages=2" in res.out
    assert res.code == 0  # at the same sizes, the same design
    res = run_cli("diff", str(old), str(bigger), "--no-verdicts", "--size", "pages=1,requests=2")
    assert "sizes: requests=2, pages=1" in res.out and res.err == ""


def test_the_trace_file_replays_on_the_page_pool(pair: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    pytest.importorskip("torch")
    old, new = pair
    trace_file = tmp_path / "behaviour.json"
    assert run_cli("diff", str(old), str(new), "--no-verdicts", "-o", str(trace_file)).code == 1
    res = run_cli("replay", str(trace_file), "--device", "cpu")
    assert res.code == 0, res.err  # alloc then abort: the lifecycle differs, no bytes move
    assert "abort(r0)" in res.out and "equivalence with OLD (safe.py)" in res.out
