"""``kvspec audit``: logs of the simulated engine against the properties, the seed
acceptance checks and the models (docs/audit.md)."""
from __future__ import annotations

import argparse
import io
import json
import xml.etree.ElementTree as ET
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvspec.audit import audit_cmd
from kvspec.audit.logformat import LogEvent, base_schema
from kvspec.audit.mapping import Mapping, load_mapping
from kvspec.audit.properties import PropertyAudit, _host_model
from kvspec.audit.run import audit_stream
from kvspec.audit.simulate import SimConfig, records, simulate
from kvspec.lang.loader import load_model
from kvspec.lang.system import compile_model
from kvspec.props import library
from kvspec.props.events import EVENT_KINDS, Event
from kvspec.runner import run
from kvspec.verdict import Status

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
MAPPINGS = ROOT / "kvspec" / "audit" / "mappings"


# -- helpers ------------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    """The subcommand as ``kvspec.cli`` registers it (through a ParserKit-like kit)."""
    top = argparse.ArgumentParser(prog="kvspec")
    sub = top.add_subparsers(dest="command", required=True)

    class Kit:
        @staticmethod
        def command(name: str, help_text: str, func: Any) -> argparse.ArgumentParser:
            p = sub.add_parser(name, help=help_text)
            p.set_defaults(func=func)
            return p

    audit_cmd.register(Kit())
    return top


def cli(*argv: str) -> tuple[int, str, str]:
    args = parser().parse_args(["audit", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out, err)
    return code, out.getvalue(), err.getvalue()


def write_log(path: Path, policy: str, requests: int, seed: int = 7, **kw: Any) -> Path:
    with path.open("w") as f:
        simulate(SimConfig(policy=policy, requests=requests, seed=seed, tensors=False, **kw), f)
    return path


@lru_cache(maxsize=None)
def model_violations(model: str) -> frozenset[str]:
    """The properties the model checker finds violated in a shipped model."""
    system = compile_model(load_model(MODELS / model))
    result = run(system, "explicit", coverage=False)
    return frozenset(v.prop for v in result.verdicts if v.status is Status.VIOLATED)


def audit_json(log: Path, model: str, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = cli(str(log), "--model", str(MODELS / model), "--json", *extra)
    assert err == "", err
    return code, json.loads(out)


def violated_properties(doc: dict[str, Any]) -> set[str]:
    return {c["check"] for c in doc["checks"]
            if c["family"] == "property" and c["status"] == "VIOLATED"}


# -- the buggy policies: the same violations as the model checker --------------------------------

def test_buggy_pd_log_violates_what_the_model_checker_finds(tmp_path: Path) -> None:
    log = write_log(tmp_path / "buggy.jsonl", "buggy_pd", 150)
    code, doc = audit_json(log, "buggy_pd.py", "--size", "requests=6,pages=32")
    assert code == 1
    assert violated_properties(doc) == set(model_violations("buggy_pd.py"))
    assert violated_properties(doc) == {library.NDAR, library.RIT, library.NRBW}
    first = {c["check"]: c["first"] for c in doc["checks"] if c["first"]}
    ndar = first[library.NDAR]
    req = ndar["request"]
    # the report names the request, its rejection and the offending event
    assert ndar["event"]["kind"] in ("read", "decode") and req in ndar["reason"]
    assert any(f"reject({req})" in h for h in ndar["history"])
    lines = [ln for ln in log.read_text().splitlines()]
    rec = json.loads(lines[ndar["line"] - 1])
    assert rec["request"] == req and rec["event"] == ndar["event"]["kind"]
    # the seed acceptance checks: rejected requests did not stop, read beyond written
    assert first["rejected-stops"]["request"] and first["written-covers-read"]
    assert doc["summary"]["rejections"] > 0
    # and the log is a behaviour of the buggy model itself
    assert doc["conformance"]["status"] == "CONFORMS"


def test_free_before_drain_log_violates_what_the_model_checker_finds(tmp_path: Path) -> None:
    log = write_log(tmp_path / "fbd.jsonl", "free_before_drain", 300, seed=3)
    code, doc = audit_json(log, "free_before_drain.py", "--size", "requests=10,pages=32")
    assert code == 1
    assert violated_properties(doc) == set(model_violations("free_before_drain.py"))
    assert violated_properties(doc) == {library.NRBD}
    first = {c["check"]: c["first"] for c in doc["checks"] if c["first"]}
    nrbd = first[library.NRBD]
    assert nrbd["event"]["kind"] in ("alloc", "land_write")
    assert "in flight" in nrbd["reason"] or "freed" in nrbd["reason"] or \
        "handed to" in nrbd["reason"]
    # release only after drain ack: the abort freed a page with a write in flight
    rad = first["release-after-drain"]
    assert rad["event"]["kind"] == "free" and "in flight" in rad["reason"]
    assert any(f"abort({rad['request']})" in h for h in rad["history"])
    assert doc["conformance"]["status"] == "CONFORMS"
    assert doc["summary"]["aborts"] > 0


def test_fixed_policy_passes_every_check(tmp_path: Path) -> None:
    log = write_log(tmp_path / "patched.jsonl", "patched", 400, seed=11)
    code, doc = audit_json(log, "patched.py", "--size", "requests=8,pages=32")
    assert code == 0, doc
    assert all(c["status"] == "HOLDS" for c in doc["checks"])
    assert doc["conformance"]["status"] == "CONFORMS"
    s = doc["summary"]
    assert s["violations"] == 0 and s["requests"] == 400
    assert s["rejections"] > 0 and s["aborts"] > 0  # the faults were exercised
    assert doc["stats"]["events"] > 2000


@pytest.mark.slow
def test_fixed_policy_passes_on_a_long_log(tmp_path: Path) -> None:
    log = write_log(tmp_path / "long.jsonl", "patched", 16_000, seed=5, concurrency=6)
    code, doc = audit_json(log, "patched.py", "--size", "requests=12,pages=32")
    assert doc["stats"]["events"] >= 100_000
    assert code == 0, doc["conformance"]
    # memory is per live request: far fewer live at once than requests in the log
    assert doc["stats"]["peak_live_requests"] < 50


def test_text_report_and_junit(tmp_path: Path) -> None:
    log = write_log(tmp_path / "buggy.jsonl", "buggy_pd", 60)
    junit = tmp_path / "audit.xml"
    code, out, err = cli(str(log), "--model", str(MODELS / "buggy_pd.py"), "--junit",
                         str(junit))
    assert code == 1 and err == ""
    assert "no-decode-after-rejection" in out and "VIOLATED" in out
    assert "history of req-" in out and "requests" in out and "rejections" in out
    suite = ET.parse(junit).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == set(library.LIBRARY) | {"rejected-stops", "written-covers-read",
                                                 "release-after-drain", "conformance"}
    assert cases[library.NDAR].find("failure") is not None
    assert cases[library.NRBD].find("failure") is None
    assert cases["conformance"].find("failure") is None


# -- conformance ---------------------------------------------------------------------------------

def test_free_on_abort_log_does_not_conform_to_the_patched_model(tmp_path: Path) -> None:
    log = write_log(tmp_path / "fbd.jsonl", "free_before_drain", 200, seed=3)
    code, doc = audit_json(log, "patched.py", "--size", "requests=10,pages=32")
    assert code == 1
    conf = doc["conformance"]
    assert conf["status"] == "NONCONFORMING"
    first = conf["first"]
    rec = json.loads(log.read_text().splitlines()[first["line"] - 1])
    # the first event patched cannot produce: freeing an aborted request's page while
    # its write is in flight (patched holds the page until the drain ack)
    assert rec["event"] == "free" and first["event"]["kind"] == "free"
    assert "cannot produce" in first["reason"]
    enabled = [e for s in first["states"] for e in s["enabled"]]
    assert any(e.startswith("drain_ack(") for e in enabled)
    assert any("phase[" in v and "HELD" in v for s in first["states"] for v in s["state"])


def test_free_on_timeout_log_does_not_conform_to_the_quarantine_model(tmp_path: Path) -> None:
    """No client aborts: the pages freed with writes in flight are freed because the
    transfer timed out — which patched.py (the quarantine design: a timeout only warns)
    cannot do."""
    log = write_log(tmp_path / "fot.jsonl", "free_before_drain", 300, seed=5, abort_rate=0.0,
                    lost_write_rate=0.1)
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    assert not any(r["event"] == "abort" and r.get("reason") == "client" for r in recs)
    code, doc = audit_json(log, "patched.py", "--size", "requests=10,pages=32")
    assert code == 1
    first = doc["conformance"]["first"]
    rec = recs[first["line"] - 1]
    assert rec["event"] == "free" and "cannot produce" in first["reason"]
    rid = rec["request"]
    before = [r for r in recs[:first["line"] - 1] if r["request"] == rid]
    assert before[-1]["event"] == "abort" and before[-1]["reason"] == "timeout"
    assert first["event"]["request"] == rid


def test_rejected_request_that_continues_does_not_conform_to_patched(tmp_path: Path) -> None:
    log = write_log(tmp_path / "buggy.jsonl", "buggy_pd", 80)
    code, doc = audit_json(log, "patched.py", "--size", "requests=6,pages=32")
    first = doc["conformance"]["first"]
    assert code == 1 and first["event"]["kind"] == "alloc"
    assert "retired" in first["reason"]  # the rejected request was done in the model


def test_conformance_needs_enough_request_ids(tmp_path: Path) -> None:
    log = write_log(tmp_path / "p.jsonl", "patched", 40, concurrency=6)
    code, doc = audit_json(log, "patched.py", "--size", "requests=2,pages=32")
    assert code == 3
    assert doc["conformance"]["status"] == "UNKNOWN"
    assert "--size requests=N" in doc["conformance"]["unknown"]


# -- mappings and format errors ------------------------------------------------------------------

SGLANG_EVENTS = {"reject": "req_rejected", "admit": "req_admitted", "alloc": "kv_prealloc",
                 "post_write": "kv_write_posted", "read": "decode_attend",
                 "decode": "decode_step", "free": "kv_release", "abort": "req_aborted",
                 "timeout": "transfer_timeout", "finish": "req_finished"}


def to_sglang(rec: dict[str, Any]) -> dict[str, Any]:
    """A simulator record as SGLang would log it through the shipped mapping."""
    kind = rec["event"]
    out: dict[str, Any] = {"time": rec["ts"], "rid": rec["request"], "dp_rank": 0}
    if kind in ("land_write", "drain"):
        out["event"] = "kv_write_done"
        out["status"] = "Success" if kind == "land_write" else "Drained"
        out["dst_kv_indices"] = [rec["page"]]
    elif kind == "post_write":
        out["event"] = "kv_write_posted"
        out["dst_kv_indices"] = [rec["page"]]
    else:
        out["event"] = SGLANG_EVENTS[kind]
        if "page" in rec:
            out["kv_index"] = rec["page"]
        if "pages" in rec:
            out["kv_indices"] = rec["pages"]
    return out


def test_sglang_mapping_gives_the_same_findings(tmp_path: Path) -> None:
    cfg = SimConfig(policy="free_before_drain", requests=120, seed=4, tensors=False)
    plain = tmp_path / "plain.jsonl"
    sgl = tmp_path / "sglang.jsonl"
    recs = list(records(cfg))
    plain.write_text("".join(json.dumps(r) + "\n" for r in recs))
    noise = {"time": 0.0, "rid": "x", "event": "transfer_committed"}
    sgl.write_text(json.dumps(noise) + "\n" + "".join(json.dumps(to_sglang(r)) + "\n"
                                                      for r in recs))
    _, a = audit_json(plain, "free_before_drain.py", "--size", "requests=10,pages=32")
    _, b = audit_json(sgl, "free_before_drain.py", "--size", "requests=10,pages=32",
                      "--mapping", str(MAPPINGS / "sglang_pd.toml"))
    assert [(c["check"], c["status"], c["occurrences"]) for c in a["checks"]] == \
        [(c["check"], c["status"], c["occurrences"]) for c in b["checks"]]
    fa = {c["check"]: c["first"] for c in a["checks"] if c["first"]}
    fb = {c["check"]: c["first"] for c in b["checks"] if c["first"]}
    assert {k: (v["line"] + 1, v["request"]) for k, v in fa.items()} == \
        {k: (v["line"], v["request"]) for k, v in fb.items()}
    assert b["conformance"]["status"] == "CONFORMS"


def test_shipped_mappings_load() -> None:
    for path in sorted(MAPPINGS.glob("*.toml")):
        m = load_mapping(path)
        assert m.rules, path
        assert all(r.kind in EVENT_KINDS or r.kind == "ignore"
                   for rules in m.rules.values() for r in rules)


def test_shipped_schema_is_a_valid_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft7Validator.check_schema(base_schema())
    v = jsonschema.Draft7Validator(base_schema())
    assert v.is_valid({"ts": 1, "request": 3, "event": "alloc", "page": 2})
    assert not v.is_valid({"ts": 1, "event": "alloc"})
    assert not v.is_valid({"ts": 1, "request": "a", "event": "free", "page": 1, "pages": [1]})


@pytest.mark.parametrize("line, expected", [
    ("{not json", "not JSON"),
    ('{"ts": 1, "event": "alloc", "page": 1}', "'request'"),
    ('{"ts": 1, "request": "a", "event": "alloc", "page": 1, "pages": [1]}', "not both"),
    ('{"ts": 1, "request": "a", "event": "kv_alloc", "page": 1}', "unknown event 'kv_alloc'"),
    ('{"ts": 1, "request": "a", "event": "alloc"}', "names no page"),
    ('{"ts": 1, "request": [1], "event": "admit"}', "'request'"),
])
def test_bad_log_line_is_one_line_naming_file_and_line(tmp_path: Path, line: str,
                                                        expected: str) -> None:
    log = tmp_path / "bad.jsonl"
    good = '{"ts": 0, "request": "a", "event": "admit"}'
    log.write_text(good + "\n\n" + line + "\n")
    code, out, err = cli(str(log), "--model", str(MODELS / "patched.py"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{log}:3:" in err and expected in err


@pytest.mark.parametrize("text, line, expected", [
    ('[events]\n"kv_alloc" = {kind = "alocc"}\n', 2, "not a kvspec event kind"),
    ('[events]\n"a" = {kind = "alloc"}\n"b" = {kind = "free", size = 3}\n', 3, "unknown key"),
    ('[fields]\nrequest = "rid"\nwhat = "x"\n', 3, "unknown field"),
    ('[events\n"a" = 1\n', 1, "not TOML"),
    ('[conformance]\nunlogged_events = ["admitt"]\n', 2, "not an event kind"),
])
def test_bad_mapping_is_one_line_naming_file_and_line(tmp_path: Path, text: str, line: int,
                                                       expected: str) -> None:
    mapping = tmp_path / "map.toml"
    mapping.write_text(text)
    log = write_log(tmp_path / "p.jsonl", "patched", 3)
    code, out, err = cli(str(log), "--model", str(MODELS / "patched.py"), "--mapping",
                         str(mapping))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"{mapping}:{line}:" in err and expected in err


def test_unknown_silent_action_and_missing_files(tmp_path: Path) -> None:
    mapping = tmp_path / "map.toml"
    mapping.write_text('[conformance]\nsilent_actions = ["teleport"]\n')
    log = write_log(tmp_path / "p.jsonl", "patched", 3)
    code, _, err = cli(str(log), "--model", str(MODELS / "patched.py"), "--mapping",
                       str(mapping))
    assert code == 2 and "teleport" in err
    code, _, err = cli(str(tmp_path / "nope.jsonl"), "--model", str(MODELS / "patched.py"))
    assert code == 2 and "no such log file" in err


# -- the monitor with id renaming agrees with the library monitor --------------------------------

class Reference:
    """The library monitor on a host with one id per live request and page: no renaming."""

    def __init__(self, requests: int, pages: int) -> None:
        self.system = compile_model(_host_model(), {"requests": requests, "pages": pages},
                                    None, inflight_bound=4095, prune_monitor=False)
        self.W = list(self.system.initial)
        self.system.generated["_fmt"] = self.fmt

    @staticmethod
    def fmt(fmt: str, args: dict[str, Any]) -> str:
        import re
        out = {}
        for k, v in args.items():
            spec = re.search(r"\{%s(:[a-z]+)?\}" % k, fmt)
            s = spec.group(1) if spec else None
            if s == ":req":
                out[k] = "None" if v < 0 else f"q{v}"
            elif s == ":reqs":
                out[k] = ", ".join(f"q{i}" for i, b in enumerate(v) if b) or "none"
            else:
                out[k] = str(v)
        return re.sub(r"\{(\w+):reqs?\}", r"{\1}", fmt).format(**out)

    def feed(self, kind: str, r: int, p: int | None) -> list[tuple[str, str]]:
        V: list[Any] = []
        self.system.generated["_dispatch"](self.W, V, (Event(kind, r, p),))
        return [(prop, reason) for prop, reason, _ in V]


EVENTS = st.lists(st.tuples(st.sampled_from(sorted(EVENT_KINDS)), st.integers(0, 4),
                            st.integers(0, 3)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(EVENTS)
def test_renamed_monitor_agrees_with_the_library_monitor(events: list[tuple[str, int, int]]
                                                         ) -> None:
    ref = Reference(5, 4)
    audit = PropertyAudit(requests=2, pages=1)  # tiny pools: retirement and growth
    for i, (kind, r, p) in enumerate(events):
        page = p if EVENT_KINDS[kind] else None
        expected = ref.feed(kind, r, page)
        got = audit.feed(LogEvent(i + 1, None, kind, f"q{r}",
                                  None if page is None else ("", page)))
        assert [(h.prop, h.reason) for h in got] == expected, (i, kind, r, page)


def test_retired_rejected_request_is_still_caught() -> None:
    audit = PropertyAudit(requests=2, pages=1)
    assert audit.feed(LogEvent(1, 0, "reject", "a", None)) == []
    assert audit.live_requests == 0  # retired at once: it holds nothing
    for n in range(50):  # many other requests come and go
        audit.feed(LogEvent(2 + n, 0, "admit", f"b{n}", None))
        audit.feed(LogEvent(2 + n, 0, "finish", f"b{n}", None))
    hits = audit.feed(LogEvent(99, 0, "decode", "a", None))
    assert {h.prop for h in hits} == {library.NDAR, library.RIT}
    assert all("decode(a) after reject(a)" == h.reason for h in hits)


def test_a_retire_event_ends_a_remembered_rejection() -> None:
    """reject(a) retires a's state at once, its rejection remembered; retire(a) brings
    it back and clears it; after abort(a) retires it again, a later alloc(a) is a new
    request's (found by the property test above). Without the retire it is caught."""
    audit = PropertyAudit(requests=2, pages=1)
    for n, kind in enumerate(["reject", "retire", "abort"], 1):
        assert audit.feed(LogEvent(n, 0, kind, "a", None)) == []
    assert audit.feed(LogEvent(4, 0, "alloc", "a", ("", 0))) == []
    audit = PropertyAudit(requests=2, pages=1)
    for n, kind in enumerate(["reject", "abort"], 1):
        audit.feed(LogEvent(n, 0, kind, "a", None))
    hits = audit.feed(LogEvent(3, 0, "alloc", "a", ("", 0)))
    assert library.RIT in {h.prop for h in hits}
    # rejected again after the retire: remembered again
    audit = PropertyAudit(requests=2, pages=1)
    for n, kind in enumerate(["reject", "retire", "reject", "abort"], 1):
        audit.feed(LogEvent(n, 0, kind, "a", None))
    hits = audit.feed(LogEvent(5, 0, "alloc", "a", ("", 0)))
    assert library.RIT in {h.prop for h in hits}


# -- the simulator --------------------------------------------------------------------------------

def test_simulator_is_deterministic_and_covers_the_lifecycle() -> None:
    cfg = SimConfig(policy="patched", requests=80, seed=9, tensors=False)
    a, b = list(records(cfg)), list(records(cfg))
    assert a == b
    kinds = {r["event"] for r in a}
    assert kinds >= {"admit", "reject", "alloc", "post_write", "land_write", "drain", "read",
                     "decode", "free", "abort", "finish"}
    assert list(records(SimConfig(policy="patched", requests=80, seed=10, tensors=False))) != a


def test_simulator_on_the_tensor_pool_shows_the_stale_kv() -> None:
    pytest.importorskip("torch")
    recs = list(records(SimConfig(policy="buggy_pd", requests=30, seed=2, tensors=True)))
    reads = [r for r in recs if r["event"] == "read"]
    assert reads and all("foreign" in r for r in reads)
    assert any(r["foreign"] for r in reads)  # a rejected request read someone else's KV
    fixed = list(records(SimConfig(policy="patched", requests=30, seed=2, tensors=True)))
    assert not any(r.get("foreign") for r in fixed if r["event"] == "read")


def test_audit_stream_is_usable_as_a_library() -> None:
    text = "".join(json.dumps(r) + "\n" for r in
                   records(SimConfig(policy="buggy_pd", requests=20, seed=1, tensors=False)))
    result = audit_stream(io.StringIO(text), "mem.jsonl", Mapping())
    assert result.exit_code == 1 and not result.conformance_checked
    assert library.RIT in result.findings


def test_writers_in_a_message_are_named_in_order_whatever_their_pool_ids() -> None:
    """Was a bug: the writers were listed in the order of the pool ids they happened to
    get (q1 arrived first), not by name."""
    audit = PropertyAudit(requests=2, pages=1)
    audit.feed(LogEvent(1, None, "post_write", "q1", ("", 2)))
    audit.feed(LogEvent(2, None, "post_write", "q0", ("", 2)))
    (hit,) = audit.feed(LogEvent(3, None, "alloc", "q0", ("", 2)))
    assert hit.reason.endswith("(writes in flight from q0, q1)"), hit.reason
