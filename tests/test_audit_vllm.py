"""The vLLM KV connector mapping (kvspec/audit/mappings/vllm_connector.toml) on logs in
the shape vLLM would write them: the simulated engine with vLLM's names (request_id,
block_id / block_ids, engine_id, vLLM event names, scheduler lines the mapping ignores)."""
from __future__ import annotations

import json
from pathlib import Path

from kvspec.audit.simulate import VLLM_EVENTS, SimConfig, records

from test_audit import MAPPINGS, audit_json, model_violations, write_log

VLLM = str(MAPPINGS / "vllm_connector.toml")


def test_vllm_shaped_log_looks_like_vllm() -> None:
    recs = list(records(SimConfig(policy="patched", requests=40, seed=4, tensors=False,
                                  naming="vllm")))
    assert all("request_id" in r and "request" not in r for r in recs)
    assert all(r["request_id"].startswith("cmpl-") for r in recs)
    names = {r["event"] for r in recs}
    assert names - {"scheduler_stats"} <= set(VLLM_EVENTS.values())
    assert "scheduler_stats" in names  # a line the mapping does not know: ignored
    assert any("block_ids" in r for r in recs) and any("block_id" in r for r in recs)


def test_vllm_log_of_the_fixed_policy_passes_and_conforms(tmp_path: Path) -> None:
    log = write_log(tmp_path / "vllm.jsonl", "patched", 200, seed=4, naming="vllm")
    code, doc = audit_json(log, "patched.py", "--mapping", VLLM, "--size",
                           "requests=8,pages=32")
    assert code == 0, json.dumps(doc["checks"], indent=1)
    assert doc["conformance"]["status"] == "CONFORMS"
    assert doc["summary"]["requests"] == 200 and doc["summary"]["rejections"] > 0
    assert doc["stats"]["events"] > 1000


def test_vllm_log_of_free_before_drain_is_caught_naming_the_request(tmp_path: Path) -> None:
    """vLLM freed a request's blocks at once on abort (before #32255): the audit finds
    what the model checker finds in models/free_before_drain.py."""
    log = write_log(tmp_path / "vllm.jsonl", "free_before_drain", 150, seed=4, naming="vllm")
    code, doc = audit_json(log, "free_before_drain.py", "--mapping", VLLM, "--size",
                           "requests=8,pages=32")
    assert code == 1
    violated = {c["check"] for c in doc["checks"]
                if c["family"] == "property" and c["status"] == "VIOLATED"}
    assert violated == set(model_violations("free_before_drain.py"))
    first = {c["check"]: c["first"] for c in doc["checks"] if c["first"]}
    rad = first["release-after-drain"]
    assert rad["request"].startswith("cmpl-") and rad["event"]["kind"] == "free"
    assert rad["request"] in rad["reason"] and "decode-0:" in rad["reason"]
    raw = log.read_text().splitlines()[rad["line"] - 1]
    assert json.loads(raw)["event"] == "blocks_freed"
