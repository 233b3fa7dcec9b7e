"""Log audit with ids recycled across 2-D arrays: a retired request's id comes back with
its per-rank row reset, and a model page is free again only when its per-slot row is
initial and no variable still names it. Before, a row left set was inherited by the
next log request (or page), so a valid log was NONCONFORMING and an impossible one
CONFORMS, and the verdict depended on ``--size pages``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

REQUEST_ROWS = '''
import enum
from kvspec import Model, Ranks, Request, Requests, Pages, action, emit, require


class Phase(enum.Enum):
    NEW = 0
    RUN = 1
    DONE = 2


class RankRows(Model):
    properties = ()
    requests = Requests(1)
    pages = Pages(1)
    ranks = Ranks(2)
    phase = requests.var(Phase, init=Phase.NEW)
    flag = requests.by(ranks).var(bool, init=False)

    @action
    def admit(s, r: Request):
        require(s.phase[r] == Phase.NEW and not s.flag[r, 0])
        s.phase[r] = Phase.RUN
        emit.admit(r)

    @action
    def finish(s, r: Request):
        require(s.phase[r] == Phase.RUN)
        s.flag[r, 0] = True
        s.phase[r] = Phase.DONE
        emit.finish(r)

    @action
    def finish_unadmitted(s, r: Request):  # only a request whose flag is already set
        require(s.phase[r] == Phase.NEW and s.flag[r, 0])
        s.phase[r] = Phase.DONE
        emit.finish(r)
'''

PAGE_ROWS = '''
from kvspec import Model, Slots, Page, Request, Requests, Pages, action, emit, require


class SlotRows(Model):
    properties = ()
    requests = Requests(2)
    pages = Pages(1)
    slots = Slots(2)
    owner = pages.var(requests.optional, init=None)
    used = pages.by(slots).var(bool, init=False)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None and not s.used[p, 0])
        s.owner[p] = r
        emit.alloc(r, p)

    @action
    def alloc_used(s, r: Request, p: Page):  # only a page used before
        require(s.owner[p] is None and s.used[p, 0])
        s.owner[p] = r
        emit.alloc(r, p)
        emit.decode(r)

    @action
    def free(s, r: Request, p: Page):
        require(s.owner[p] == r)
        s.owner[p] = None
        s.used[p, 0] = True
        emit.free(r, p)
'''


def _log(path: Path, *events: tuple[str, str] | tuple[str, str, int]) -> Path:
    with path.open("w") as f:
        for ts, e in enumerate(events, 1):
            rec = {"ts": ts, "request": e[0], "event": e[1]}
            if len(e) == 3:
                rec["page"] = e[2]
            f.write(json.dumps(rec) + "\n")
    return path


def _audit(tmp_path: Path, model: str, log: Path, sizes: str) -> tuple[int, str]:
    path = tmp_path / "model.py"
    path.write_text(model)
    run = run_cli("audit", str(log), "--model", str(path), "--size", sizes)
    assert run.err == "" or "internal error" not in run.err, run.err
    return run.code, " ".join(run.out.split())


def test_a_recycled_request_starts_with_its_rank_row_reset(tmp_path: Path) -> None:
    ok = _log(tmp_path / "ok.jsonl", ("A", "admit"), ("A", "finish"), ("B", "admit"),
              ("B", "finish"))
    code, out = _audit(tmp_path, REQUEST_ROWS, ok, "requests=2")
    assert code == 0 and "CONFORMS" in out, out


def test_a_recycled_request_does_not_inherit_what_its_row_allows(tmp_path: Path) -> None:
    bad = _log(tmp_path / "bad.jsonl", ("A", "admit"), ("A", "finish"), ("B", "finish"))
    code, out = _audit(tmp_path, REQUEST_ROWS, bad, "requests=2")
    assert code == 1 and "NONCONFORMING" in out, out
    assert "line 3: the model RankRows cannot produce finish(B) here" in out
    # the state it could be in shows the row that decides
    assert "flag[B, 0] = False" in out


@pytest.mark.parametrize("pages", [1, 2])
def test_a_page_with_its_slot_row_set_is_not_handed_to_a_new_log_page(
        tmp_path: Path, pages: int) -> None:
    """Page 11 is fresh: it cannot come with a decode. With one model page the log's
    two pages do not fit (page 10 is not back at its initial values): UNKNOWN, never
    CONFORMS."""
    bad = _log(tmp_path / "bad.jsonl", ("A", "alloc", 10), ("A", "free", 10),
               ("B", "alloc", 11), ("B", "decode"))
    code, out = _audit(tmp_path, PAGE_ROWS, bad, f"requests=2,pages={pages}")
    if pages == 1:
        assert code == 3 and "more than 1 pages of the log are in use at once" in out, out
    else:
        assert code == 1 and "line 4: the model SlotRows cannot produce decode(B)" in out, out


def test_a_valid_log_over_recycled_pages_conforms_when_they_fit(tmp_path: Path) -> None:
    ok = _log(tmp_path / "ok.jsonl", ("A", "alloc", 10), ("A", "free", 10),
              ("B", "alloc", 11))
    code, out = _audit(tmp_path, PAGE_ROWS, ok, "requests=2,pages=2")
    assert code == 0 and "CONFORMS" in out, out
    code, out = _audit(tmp_path, PAGE_ROWS, ok, "requests=2,pages=1")
    assert code == 3 and "conformance to SlotRows: UNKNOWN" in out, out
