"""Monitor variables no emitted event can change are not stored, and in-flight counts
have no cap that becomes a model error: beyond the counted bound a saturated count
over-approximates, and a counterexample through it is re-decided at a larger bound."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvspec.engines.bmc import run_bmc
from kvspec.engines.explicit import explore
from kvspec.engines.refine import run_exact, saturates
from kvspec.lang.loader import load_model
from kvspec.lang.system import System, compile_model
from kvspec.runner import run
from kvspec.verdict import Result, Status

from conftest import run_cli

#: synchronous writes (land_write without post_write), no rejection: neither the
#: in-flight counts nor the rejected flags can leave their initial values
SYNC_WRITES = '''
from kvspec import Model, Page, Pages, Request, Requests, action, emit, require


class SyncWrites(Model):
    """A request allocates a page, writes it synchronously, reads it, frees it."""
    requests = Requests(2)
    pages = Pages(2)
    owner = pages.var(requests.optional, init=None)
    written = pages.var(bool, init=False)

    @action
    def alloc(s, r: Request, p: Page):
        require(s.owner[p] is None)
        s.owner[p] = r
        s.written[p] = False
        emit.alloc(r, p)

    @action
    def write(s, r: Request, p: Page):
        require(s.owner[p] == r)
        s.written[p] = True
        emit.land_write(r, p)

    @action
    def read(s, r: Request, p: Page):
        require(s.owner[p] == r{READ_GUARD})
        emit.read(r, p)
        emit.decode(r)

    @action
    def free(s, r: Request, p: Page):
        require(s.owner[p] == r)
        s.owner[p] = None
        emit.free(r, p)
'''

#: r0 posts N writes into page 0 and lands L of them, frees it, r1 allocates it
MANY_POSTS = '''
from kvspec import Int, Model, Page, Pages, Requests, action, emit, require, var


class ManyPosts(Model):
    requests = Requests(2)
    pages = Pages(1)
    posted = var(Int(0, {N}), init=0)
    landed = var(Int(0, {N}), init=0)
    step = var(Int(0, 3), init=0)
    properties = ("no-reuse-before-drain",)

    @action
    def alloc0(s, p: Page):
        require(s.step == 0)
        s.step = 1
        emit.alloc(0, p)

    @action
    def post(s, p: Page):
        require(s.step == 1 and s.posted < {N})
        s.posted = s.posted + 1
        emit.post_write(0, p)

    @action
    def land(s, p: Page):
        require(s.step == 1 and s.landed < s.posted and s.landed < {L})
        s.landed = s.landed + 1
        emit.land_write(0, p)

    @action
    def free0(s, p: Page):
        require(s.step == 1 and s.posted == {N} and s.landed == {L})
        s.step = 2
        emit.free(0, p)

    @action
    def alloc1(s, p: Page):
        require(s.step == 2)
        s.step = 3
        emit.alloc(1, p)
'''


def _system(tmp_path: Path, source: str, **kw: object) -> System:
    path = tmp_path / f"m{abs(hash(source)) % 10**8}.py"
    path.write_text(source)
    return compile_model(load_model(path), {}, None, **kw)  # type: ignore[arg-type]


def _verdicts(result: object) -> dict[str, tuple[Status, int | None]]:
    return {v.prop: (v.status, len(v.trace) if v.trace is not None else None)
            for v in result.verdicts}  # type: ignore[attr-defined]


@pytest.mark.parametrize("guard", ["", " and s.written[p]"])
def test_unchangeable_monitor_variables_are_not_stored(tmp_path: Path, guard: str) -> None:
    source = SYNC_WRITES.replace("{READ_GUARD}", guard)
    pruned = _system(tmp_path, source)
    full = _system(tmp_path, source, prune_monitor=False)
    names = {v.name for v in pruned.schema.vars if v.owner == "monitor"}
    assert names == {"page_owner", "page_written"}  # no post_write, no reject
    assert {v.name for v in full.schema.vars if v.owner == "monitor"} >= {
        "page_inflight_by", "rejected"}
    assert len(pruned.initial) < len(full.initial)
    # the verdicts, the shortest counterexamples and the state counts are the same
    a = explore(pruned, symmetry=False)
    b = explore(full, symmetry=False)
    assert _verdicts(a) == _verdicts(b)
    assert a.stats.states == b.stats.states
    assert _verdicts(run_bmc(pruned, depth=6, timeout=None)) == _verdicts(
        run_bmc(full, depth=6, timeout=None))
    status = _verdicts(a)["no-read-beyond-written"][0]
    assert status is (Status.HOLDS if guard else Status.VIOLATED)


def test_shipped_models_keep_their_verdicts_with_every_variable_stored() -> None:
    models = Path(__file__).resolve().parent.parent / "models"
    for name in ("buggy_pd.py", "free_before_drain.py"):
        loaded = load_model(models / name)
        pruned = explore(compile_model(loaded, {}, None), symmetry=True)
        full = explore(compile_model(loaded, {}, None, prune_monitor=False), symmetry=True)
        assert _verdicts(pruned) == _verdicts(full), name


def _run_explicit(system: System) -> Result:
    return run(system, "explicit")


def test_more_posts_than_the_bound_are_not_a_model_error(tmp_path: Path) -> None:
    # five writes posted, all five landed before the free: no violation, at any bound
    system = _system(tmp_path, MANY_POSTS.replace("{N}", "5").replace("{L}", "5"))
    result = run_exact(system, _run_explicit)
    assert _verdicts(result)["no-reuse-before-drain"][0] is Status.HOLDS


def test_a_counterexample_through_a_saturated_count_is_decided_at_a_larger_bound(
        tmp_path: Path) -> None:
    # five posted, four landed: one is still in flight when r1 gets the page
    system = _system(tmp_path, MANY_POSTS.replace("{N}", "5").replace("{L}", "4"))
    first = explore(system)  # one engine run at the default bound: saturated
    v = first.verdicts[0]
    assert v.status is Status.VIOLATED and v.trace is not None and saturates(v.trace)
    exact = run_exact(system, _run_explicit)
    v = exact.verdicts[0]
    assert v.status is Status.VIOLATED and v.trace is not None and not saturates(v.trace)
    assert len(v.trace) == 1 + 5 + 4 + 2
    assert v.trace.system.inflight_bound == 6
    assert "in flight from r0" in v.trace.reason


def test_a_spurious_saturated_counterexample_is_never_reported(tmp_path: Path) -> None:
    # 20 posts, all landed: at every bound tried the count saturates, and the
    # counterexample it suggests is spurious, so the verdict is UNKNOWN, not VIOLATED
    system = _system(tmp_path, MANY_POSTS.replace("{N}", "20").replace("{L}", "20"))
    result = run_exact(system, _run_explicit)
    v = result.verdicts[0]
    assert v.status is Status.UNKNOWN and "not confirmed" in v.detail
    assert result.exit_code == 3


def test_the_report_says_what_was_re_checked(tmp_path: Path) -> None:
    path = tmp_path / "many.py"
    path.write_text(MANY_POSTS.replace("{N}", "5").replace("{L}", "5"))
    res = run_cli("verify", str(path), "--engine", "explicit")
    assert res.code == 0, res.out
    assert "re-checked no-reuse-before-drain counting up to 6 writes in flight" in res.out
    assert "HOLDS (exhaustive" in res.out


def test_the_cli_reports_the_exact_counterexample(tmp_path: Path) -> None:
    path = tmp_path / "many.py"
    path.write_text(MANY_POSTS.replace("{N}", "5").replace("{L}", "4"))
    for engine in ("explicit", "bmc"):
        res = run_cli("verify", str(path), "--engine", engine, "--depth", "12")
        assert res.code == 1, res.out + res.err
        assert "12 steps" in res.out or "depth 12" in res.out, res.out
