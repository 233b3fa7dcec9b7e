"""Files that are not what they should be never produce a traceback or a verdict:
certificates (``check-proof`` and the stored ones ``verify`` re-checks), traces, output
paths; and replays of genuine traces in which a request reads a page it does not own."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import MODELS, ROOT, run_cli

import kvspec.engines.auto
import kvspec.engines.fuzz
import kvspec.engines.pdr
from kvspec.runner import certificate_problem
from kvspec.trace import MAX_JSON_DEPTH, DocumentError, json_depth, load_json_document

#: the default sizes' certificate
STORED = next(p for p in (ROOT / "proofs").glob("patched.*.json") if "=all" not in p.name)
#: small sizes for the runs that meet a broken stored certificate
SMALL = "requests=1,pages=2"
SMALL_NAME = "patched.PatchedPD.requests=1,pages=2,prefill_capacity=2,max_need=3.json"
DEEP = "[" * 100_000 + "]" * 100_000


def _no_engine(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("an engine ran although the command line was bad")


def _one_line_error(res: Any, *fragments: str) -> None:
    assert res.code == 2, (res.code, res.err)
    assert "Traceback" not in res.err and len(res.err.splitlines()) == 1, res.err
    assert res.err.startswith("kvspec: error: ")
    for fragment in fragments:
        assert fragment in res.err, (fragment, res.err)


# -- certificates given to check-proof -------------------------------------------------------

def _mutated(mutate: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    doc = json.loads(STORED.read_text())
    mutate(doc)
    return doc


WRONG_TYPES = [
    ("model", lambda d: d.update(model="PatchedPD")),
    ("model.sha256", lambda d: d["model"].update(sha256=12)),
    ("sizes", lambda d: d.update(sizes=[2, 4])),
    ("sizes", lambda d: d.update(sizes={"requests": "two"})),
    ("properties", lambda d: d.update(properties="no-read-beyond-written")),
    ("properties", lambda d: d.update(properties=[{"name": "x"}])),
    ("invariant", lambda d: d.update(invariant=["(assert true)"])),
    ("invariant", lambda d: d.pop("invariant")),
    ("invariant.smtlib2", lambda d: d["invariant"].update(smtlib2=["(assert true)"])),
    ("invariant.readable", lambda d: d["invariant"].update(readable=7)),
    ("invariant.readable", lambda d: d["invariant"].update(readable=[1, 2])),
    ("invariant.sha256", lambda d: d["invariant"].update(sha256=None)),
    ("invariant.clauses", lambda d: d["invariant"].update(clauses="30")),
    ("library_sha256", lambda d: d.update(library_sha256=["x"])),
    ("format", lambda d: d.update(format="kvspec-proof/9")),
]


@pytest.mark.parametrize(("field", "mutate"), WRONG_TYPES)
def test_check_proof_of_a_certificate_with_wrong_types(tmp_path: Path, field: str,
                                                       mutate: Any) -> None:
    cert = tmp_path / STORED.name
    cert.write_text(json.dumps(_mutated(mutate)))
    res = run_cli("check-proof", str(cert), str(MODELS / "patched.py"))
    _one_line_error(res, "is not a kvspec certificate", field)
    assert "PROVED" not in res.out


def test_check_proof_of_a_directory_a_list_deep_json_and_a_missing_file(tmp_path: Path) -> None:
    model = str(MODELS / "patched.py")
    _one_line_error(run_cli("check-proof", str(tmp_path), model), "is a directory")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    _one_line_error(run_cli("check-proof", str(listed), model), "not a kvspec certificate")
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    _one_line_error(run_cli("check-proof", str(deep), model), "not a kvspec certificate")
    _one_line_error(run_cli("check-proof", str(tmp_path / "none.json"), model), "no such file")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    _one_line_error(run_cli("check-proof", str(binary), model), "not a kvspec certificate")


def test_the_shipped_certificates_have_the_right_shape() -> None:
    for cert in (ROOT / "proofs").glob("*.json"):
        assert certificate_problem(json.loads(cert.read_text())) is None, cert


# -- broken stored certificates during plain verify -------------------------------------------

def _broken_entries(tmp_path: Path) -> dict[str, Path]:
    """Proofs directories whose entry for patched.py at its default sizes is broken."""
    dirs = {}
    for kind in ("directory", "wrong-types", "not-json", "deep", "list"):
        proofs = tmp_path / kind
        proofs.mkdir()
        entry = proofs / SMALL_NAME
        if kind == "directory":
            entry.mkdir()
        elif kind == "wrong-types":
            entry.write_text(json.dumps(_mutated(lambda d: d.update(model="x", invariant=[]))))
        elif kind == "not-json":
            entry.write_text("{not json")
        elif kind == "deep":
            entry.write_text(DEEP)
        else:
            entry.write_text("[]")
        dirs[kind] = proofs
    return dirs


def test_verify_ignores_a_broken_stored_certificate_with_a_warning(tmp_path: Path) -> None:
    for kind, proofs in _broken_entries(tmp_path).items():
        res = run_cli("verify", str(MODELS / "patched.py"), "--size", SMALL, "--proofs-dir",
                      str(proofs))
        assert res.code == 0, (kind, res.err)
        assert "Traceback" not in res.err
        warnings = [line for line in res.err.splitlines() if line.startswith("kvspec: warning:")]
        assert len(warnings) == 1 and SMALL_NAME in warnings[0], (kind, res.err)
        assert "PROVED" not in res.out and "certificate re-checked" not in res.out, kind
        assert res.out.count("HOLDS (exhaustive") == 4, kind


def test_verify_json_with_a_broken_stored_certificate(tmp_path: Path) -> None:
    proofs = _broken_entries(tmp_path)["wrong-types"]
    res = run_cli("verify", str(MODELS / "patched.py"), "--size", SMALL, "--proofs-dir",
                  str(proofs), "--json")
    doc = json.loads(res.out)
    assert res.code == 0 and {v["status"] for v in doc["verdicts"]} == {"HOLDS"}
    assert "kvspec-proofs-" not in json.dumps(doc)


def test_save_proof_replaces_a_broken_stored_certificate(tmp_path: Path) -> None:
    """PDR proves, the new certificate replaces the broken file, and it re-checks."""
    model = tmp_path / "single_node.py"
    shutil.copy(MODELS / "single_node.py", model)
    proofs = tmp_path / "proofs"
    proofs.mkdir()
    entry = proofs / "single_node.SingleNode.requests=1,pages=2,capacity=2,max_need=3.json"
    entry.write_text('{"format": "kvspec-proof/1", "invariant": 5}')
    res = run_cli("verify", str(model), "--size", SMALL, "--proofs-dir", str(proofs),
                  "--save-proof", "--max-states", "1", "--json")
    assert "kvspec: warning: ignoring the stored certificate" in res.err
    assert "kvspec-proofs-" not in res.out + res.err
    doc = json.loads(res.out)
    assert res.code == 0 and {v["method"] for v in doc["verdicts"]} == {"pdr"}, res.out
    assert all(v["detail"].endswith(f"saved to {entry}") for v in doc["verdicts"])
    assert certificate_problem(json.loads(entry.read_text())) is None
    again = run_cli("check-proof", str(entry), str(model), "--size", SMALL)
    assert again.code == 0, again.out


@pytest.mark.parametrize("engine", ["auto", "pdr"])
def test_save_proof_into_a_regular_file_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine: str) -> None:
    monkeypatch.setattr(kvspec.engines.auto, "run_auto", _no_engine)
    monkeypatch.setattr(kvspec.engines.pdr, "run_pdr", _no_engine)
    target = tmp_path / "proofs"
    target.write_text("not a directory")
    res = run_cli("verify", str(MODELS / "patched.py"), "--engine", engine, "--save-proof",
                  "--proofs-dir", str(target))
    _one_line_error(res, "--proofs-dir", "not a directory")
    below = target / "sub"
    res = run_cli("verify", str(MODELS / "patched.py"), "--engine", engine, "--save-proof",
                  "--proofs-dir", str(below))
    _one_line_error(res, "--proofs-dir", "not a directory")
    assert target.read_text() == "not a directory"


def test_save_proof_where_the_certificate_is_a_directory(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setattr(kvspec.engines.auto, "run_auto", _no_engine)
    (tmp_path / STORED.name).mkdir()
    res = run_cli("verify", str(MODELS / "patched.py"), "--save-proof", "--proofs-dir",
                  str(tmp_path))
    _one_line_error(res, "--save-proof", "is a directory")


# -- output paths ------------------------------------------------------------------------------

def test_fuzz_output_into_a_missing_directory(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setattr(kvspec.engines.fuzz, "run_fuzz", _no_engine)
    res = run_cli("fuzz", str(MODELS / "patched.py"), "-o", str(tmp_path / "no" / "x.json"))
    _one_line_error(res, "-o", "does not exist")
    res = run_cli("fuzz", str(MODELS / "patched.py"), "-o", str(tmp_path))
    _one_line_error(res, "-o", "is a directory")


def test_picture_into_a_missing_directory(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(kvspec.engines.auto, "run_auto", _no_engine)
    missing = str(tmp_path / "no" / "cex.svg")
    _one_line_error(run_cli("verify", str(MODELS / "buggy_pd.py"), "--render", missing),
                    "does not exist")
    _one_line_error(run_cli("graph", str(MODELS / "patched.py"), "-o", missing),
                    "does not exist")
    trace = tmp_path / "t.json"
    trace.write_text("{}")
    _one_line_error(run_cli("render", str(trace), "-o", missing), "does not exist")


# -- traces ----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["render", "replay"])
def test_deeply_nested_json_is_not_a_trace(tmp_path: Path, command: str) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    argv = [command, str(deep)] + (["-o", str(tmp_path / "x.dot")] if command == "render" else [])
    _one_line_error(run_cli(*argv), "not a kvspec trace")
    # nested just past the limit inside an otherwise fine trace document
    inner: Any = 0
    for _ in range(MAX_JSON_DEPTH):
        inner = [inner]
    deep.write_text(json.dumps({"format": "kvspec-trace/1", "steps": inner}))
    _one_line_error(run_cli(*argv), "not a kvspec trace")


@pytest.mark.parametrize("command", ["render", "replay"])
def test_a_directory_is_not_a_trace(tmp_path: Path, command: str) -> None:
    argv = [command, str(tmp_path)] + (["-o", str(tmp_path / "x.dot")] if command == "render" else [])
    _one_line_error(run_cli(*argv), "is a directory")


def test_json_loading_limits(tmp_path: Path) -> None:
    assert json_depth(0) == 0 and json_depth([]) == 1 and json_depth({"a": [[1]]}) == 3
    path = tmp_path / "ok.json"
    nested: Any = []
    for _ in range(MAX_JSON_DEPTH - 1):
        nested = [nested]
    path.write_text(json.dumps(nested))
    assert json_depth(load_json_document(path)) == MAX_JSON_DEPTH
    path.write_text(json.dumps([nested]))
    with pytest.raises(DocumentError, match="nests deeper"):
        load_json_document(path)


# -- replay: a request reads a page it does not own ---------------------------------------------

BORROWED = '''
"""Decode reads a page that another request wrote (a prefix hit without ownership)."""
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class BorrowedPage(Model):
    requests = Requests(2)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)
    landed = pages.var(bool, init=False)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r
        emit.alloc(r, p)

    @action
    def write(s, r: Request, p: Page):
        require(s.owner[p] == r and not s.landed[p])
        emit.post_write(r, p)
        emit.land_write(r, p)
        s.landed[p] = True

    @action
    def decode(s, r: Request, p: Page):
        require(s.landed[p])              # any written page, whoever owns it: the bug
        emit.read(r, p)
        emit.decode(r)
'''

DECODE_AFTER_ABORT = '''
"""An abort frees a request's pages, but the decode batch scheduled before the abort
still runs over the request's old page table."""
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class DecodeAfterAbort(Model):
    requests = Requests(2)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)
    table = pages.var(requests.optional, init=None)   # the batch's copy of the page table
    aborted = requests.var(bool, init=False)

    @action
    def alloc(s, r: Request, p: Page):
        require(not s.aborted[r] and s.owner[p] is None)
        s.owner[p] = r
        s.table[p] = r
        emit.alloc(r, p)

    @action
    def abort(s, r: Request):
        mine = s.owner == r
        require(not s.aborted[r] and mine.any())
        emit.abort(r)
        emit.free(r, pages=mine)
        s.owner[mine] = None
        s.aborted[r] = True

    @action
    def decode(s, r: Request):
        require(s.aborted[r] and (s.table == r).any())
        emit.read(r, pages=s.table == r)
        emit.decode(r)
        s.table[s.table == r] = None
'''


@pytest.mark.parametrize(("source", "reader", "owner", "held", "where"), [
    (BORROWED, "r1", "r0", "holds r0 block 0", "(owned by r0)"),
    (DECODE_AFTER_ABORT, "r0", None, "holds tenant T block 0",
     "(free since r0 freed it at step 2)"),
])
def test_replay_shows_the_read_of_a_page_the_reader_does_not_own(
        write_model: Callable[[str], Path], tmp_path: Path, source: str, reader: str,
        owner: str | None, held: str, where: str) -> None:
    pytest.importorskip("torch")
    model = write_model(source)
    res = run_cli("verify", str(model), "--engine", "explicit", "--json")
    assert res.code == 1
    doc = json.loads(res.out)
    (violated,) = [v for v in doc["verdicts"] if v["status"] == "VIOLATED"]
    assert violated["property"] == "no-read-beyond-written"
    assert "is not allocated to" in violated["trace"]["reason"]
    cex = tmp_path / "cex.json"
    cex.write_text(res.out)

    res = run_cli("replay", str(cex), "--device", "cpu")
    assert res.code == 1, res.err
    assert res.err == ""
    line = next(x for x in res.out.splitlines() if x.strip().startswith(f"read({reader}, page 0)"))
    assert f"{held} (FOREIGN)" in line and f"page 0 is NOT in {reader}'s page table {where}" in line
    assert "LEAK: a request read foreign KV data in the trace" in res.out
    assert "foreign pages read: 1" in res.out

    res = run_cli("replay", str(cex), "--device", "cpu", "--json")
    assert res.code == 1
    summary = json.loads(res.out)["summary"]
    assert summary["leaked"] and summary["leaked_in_trace"] and summary["max_abs_dev"] > 0
    (read,) = summary["foreign_reads"]
    assert read["reader"] == reader and read["outside_table"] and read["owner"] == owner


def test_replay_without_torch_is_a_usage_error(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"format": "kvspec-trace/1", "steps": []}))
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    for name in [m for m in sys.modules if m == "kvspec.pool" or m.startswith("kvspec.pool.")]:
        monkeypatch.delitem(sys.modules, name)
    _one_line_error(run_cli("replay", str(trace)), "replay needs torch", "kvspec[replay]")
