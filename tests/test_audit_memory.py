"""``kvspec audit`` in bounded memory: retired rejected request ids (kvspec/audit/rejected.py)
— the recent ones exactly, older ones in a Bloom filter whose findings are POSSIBLE."""
from __future__ import annotations

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kvspec.audit.logformat import LogEvent
from kvspec.audit.mapping import Mapping
from kvspec.audit.properties import PropertyAudit
from kvspec.audit.rejected import EXACT, POSSIBLE, RejectedIds
from kvspec.audit.run import audit_stream
from kvspec.props import library
from kvspec.verdict import EXIT_UNKNOWN, EXIT_VIOLATED

ids = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(ids, min_size=1, max_size=200, unique=True), st.integers(0, 20))
def test_no_rejected_id_is_ever_forgotten(rejected: list[str], exact: int) -> None:
    """The Bloom filter has no false negatives: every id put in is found again."""
    table = RejectedIds(exact=exact, filter_bits=512, hashes=3)  # tiny: many collisions
    for n, rid in enumerate(rejected):
        table.add(rid, n + 1)
    assert len(table.exact) == min(exact, len(rejected))
    for n, rid in enumerate(rejected):
        got = table.lookup(rid)
        assert got is not None
        if n >= len(rejected) - exact:  # among the last ``exact``: exact, with its line
            assert got == (EXACT, n + 1)
        else:
            assert got.how == POSSIBLE and got.line is None


def test_memory_of_the_table_is_bounded() -> None:
    table = RejectedIds(exact=100, filter_bits=1 << 12)
    for n in range(5000):
        table.add(f"req-{n}", n)
    assert len(table.exact) == 100 and table.filtered == 4900
    assert table.filter is not None and len(table.filter) == (1 << 12) // 8 + 1
    assert table.lookup("req-4999") == (EXACT, 4999)
    assert table.lookup("never-seen-xyz") in (None, (POSSIBLE, None))


def _log(lines: list[dict[str, object]]) -> io.StringIO:
    return io.StringIO("".join(json.dumps(x) + "\n" for x in lines))


def _comeback_log(others: int) -> list[dict[str, object]]:
    """req-x is rejected, ``others`` rejected requests follow, then req-x decodes."""
    lines: list[dict[str, object]] = [{"ts": 0, "request": "req-x", "event": "reject"}]
    lines += [{"ts": 1, "request": f"r{n}", "event": "reject"} for n in range(others)]
    lines.append({"ts": 2, "request": "req-x", "event": "decode"})
    return lines


def test_a_rejected_request_coming_back_within_the_window_is_a_violation() -> None:
    result = audit_stream(_log(_comeback_log(10)), "w.jsonl", Mapping(), exact_rejected=50)
    assert result.exit_code == EXIT_VIOLATED
    f = result.findings["rejected-stops"]
    assert f.event.request == "req-x" and "after reject(req-x) at line 1" in f.reason
    assert library.NDAR in result.findings and not result.possible


def test_a_rejected_request_coming_back_after_the_window_is_possible_not_missed() -> None:
    result = audit_stream(_log(_comeback_log(10)), "w.jsonl", Mapping(), exact_rejected=4)
    assert result.stats["rejected_ids_exact"] == 4 and result.stats["rejected_ids_filtered"] == 7
    assert not result.findings  # nothing definite ...
    assert set(result.possible) == {"rejected-stops", library.NDAR, library.RIT}  # ... not missed
    assert all(p.possible and p.event.request == "req-x" for p in result.possible.values())
    assert "false alarm" in result.possible["rejected-stops"].reason
    assert result.status("rejected-stops") == "POSSIBLE"
    assert result.exit_code == EXIT_UNKNOWN  # never printed as success
    doc = result.to_json()
    (c,) = [c for c in doc["checks"] if c["check"] == "rejected-stops"]
    assert c["status"] == "POSSIBLE" and c["first"]["possible"] is True
    assert doc["summary"]["violations"] == 0


def test_a_new_request_the_filter_does_not_know_is_not_flagged() -> None:
    lines = _comeback_log(10)[:-1] + [{"ts": 2, "request": "fresh", "event": "admit"},
                                       {"ts": 3, "request": "fresh", "event": "decode"}]
    result = audit_stream(_log(lines), "w.jsonl", Mapping(), exact_rejected=4)
    # "fresh" may collide in the filter only with probability ~1e-30 at 7 ids in 2^26 bits
    assert result.exit_code == 0 and not result.possible and not result.findings


def test_property_audit_keeps_nothing_per_finished_request() -> None:
    """The per-request state of the monitor and the acceptance checks is dropped after
    the terminal event; only the bounded table of rejected ids remains."""
    table = RejectedIds(exact=8)
    audit = PropertyAudit(requests=2, pages=1, rejected=table)
    for n in range(2000):
        audit.feed(LogEvent(2 * n + 1, 0, "admit" if n % 3 else "reject", f"q{n}", None))
        if n % 3:
            audit.feed(LogEvent(2 * n + 2, 0, "finish", f"q{n}", None))
    assert audit.live_requests == 0 and not audit.reject_line and not audit.possible
    assert len(table.exact) == 8 and table.filtered == 667 - 8
    assert audit.host.R <= 4  # the pool of model ids did not grow


def test_retired_rejections_cleared_by_retire_stay_bounded() -> None:
    """Each ``retire`` of a remembered rejected id is remembered too (its old rejection
    no longer applies); that memory stays within twice the table's exact capacity, and
    a recent one still keeps the id's later events clean."""
    table = RejectedIds(exact=8, filter_bits=1 << 12)
    audit = PropertyAudit(requests=2, pages=1, rejected=table)
    line = 0
    for n in range(200):
        for kind in ("reject", "retire", "abort"):
            line += 1
            audit.feed(LogEvent(line, 0, kind, f"r{n}", None))
        assert len(audit.cleared) <= 2 * table.capacity
    hits = audit.feed(LogEvent(line + 1, 0, "alloc", "r199", ("", 0)))
    assert library.RIT not in {h.prop for h in hits}
