"""Tests for kvspec.pool: deterministic KV data, the page pool and its leak evidence."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kvspec.pool import PagePool, PoolConfig, PoolError, Tag, request_kv, request_query  # noqa: E402
from kvspec.pool.page_pool import resolve_device  # noqa: E402

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available"),
    ),
]


def make_pool(device: str, pages: int = 8, **kw: object) -> PagePool:
    return PagePool(PoolConfig(pages=pages, device=device, **kw))  # type: ignore[arg-type]


def write(pool: PagePool, r: int, p: int) -> None:
    pool.post_write(r, p)
    pool.land_write(r, p)


# --------------------------------------------------------------------- kv data
def test_request_kv_is_deterministic_bounded_and_distinct() -> None:
    k0, v0 = request_kv(0, range(8), 2, 16)
    k0b, v0b = request_kv(0, torch.arange(8), 2, 16)
    k1, _ = request_kv(1, range(8), 2, 16)
    assert k0.shape == (8, 2, 16) and k0.dtype == torch.float32
    assert torch.equal(k0, k0b) and torch.equal(v0, v0b)
    assert not torch.equal(k0, v0)
    assert (k0 != k1).float().mean() > 0.99
    assert float(k0.abs().max()) <= 1.0 and float(k0.std()) > 0.3
    # a function of (request, position): the value at position 5 does not depend on the slice
    k5, _ = request_kv(0, [5], 2, 16)
    assert torch.equal(k5[0], k0[5])


def test_request_query_and_bad_inputs() -> None:
    q = request_query(3, 7, 2, 16, torch.float64)
    assert q.shape == (2, 16) and q.dtype == torch.float64
    assert not torch.equal(q, request_query(3, 8, 2, 16, torch.float64))
    with pytest.raises(ValueError):
        request_kv(-1, range(2), 2, 16)
    with pytest.raises(ValueError):
        request_kv(0, torch.tensor([0.5]), 2, 16)


def test_resolve_device_auto() -> None:
    expect = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expect
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(PoolError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(PoolError, match="cuda"):
            resolve_device("cuda")


# ------------------------------------------------------------------ operations
@pytest.mark.parametrize("device", DEVICES)
def test_alloc_write_free_keeps_data_and_tag(device: str) -> None:
    pool = make_pool(device, pages=4)
    assert pool.k.shape == (4, 4, 2, 16) and pool.tags.shape == (4, 2)
    assert pool.tag(2) is None
    pool.alloc(0, 2)
    pool.alloc(0, 1)
    assert pool.page_table(0) == (2, 1) and pool.owner(2) == 0
    ticket = pool.post_write(0, 1)
    assert ticket.block == 1 and pool.inflight(1) == (ticket,)
    assert pool.tag(1) is None  # held back until it lands
    landing = pool.land_write(0, 1)
    assert landing.block == 1 and not landing.late and landing.previous is None
    assert pool.tag(1) == Tag(0, 1) and pool.inflight(1) == ()
    expect_k, _ = request_kv(0, range(4, 8), 2, 16, device=pool.device)
    assert torch.equal(pool.k[1], expect_k)
    pool.free(0, 1)
    assert pool.owner(1) is None and pool.page_table(0) == (2,)
    assert pool.tag(1) == Tag(0, 1) and torch.equal(pool.k[1], expect_k)  # not zeroed


@pytest.mark.parametrize("device", DEVICES)
def test_drain_cancels_without_landing(device: str) -> None:
    pool = make_pool(device, pages=2)
    pool.alloc(0, 0)
    pool.post_write(0, 0)
    pool.post_write(0, 0)
    assert len(pool.inflight(0)) == 2
    pool.drain(0, 0)
    pool.land_write(0, 0)
    assert pool.tag(0) == Tag(0, 0) and pool.inflight(0) == ()
    with pytest.raises(PoolError, match="no write of r0 into page 0"):
        pool.drain(0, 0)


def test_impossible_operations_raise_pool_error() -> None:
    pool = make_pool("cpu", pages=2, requests=2)
    pool.alloc(0, 0)
    cases = [
        (lambda: pool.alloc(1, 0), "owned by r0"),
        (lambda: pool.alloc(0, 2), "out of range"),
        (lambda: pool.alloc(2, 1), "out of range"),
        (lambda: pool.alloc(-1, 1), "bad request id"),
        (lambda: pool.free(1, 0), "owned by r0"),
        (lambda: pool.free(0, 1), "is free"),
        (lambda: pool.land_write(0, 0), "no write of r0"),
        (lambda: pool.read(1, 0), "not in r1's page table"),
        (lambda: pool.post_write(1, 1), "never owned"),
        (lambda: pool.read(0, True), "bad page id"),  # type: ignore[arg-type]
    ]
    for call, message in cases:
        with pytest.raises(PoolError, match=message):
            call()
    assert issubclass(PoolError, ValueError)
    with pytest.raises(PoolError):
        PoolConfig(pages=0)
    with pytest.raises(PoolError):
        PoolConfig(pages=2, dtype=torch.int32)


def test_prefill_pool_smaller_than_demand_recycles_slots() -> None:
    pool = make_pool("cpu", pages=6, prefill_pages=2)
    for p in range(6):
        pool.alloc(p % 3, p)
        pool.post_write(p % 3, p)  # staged: later slot reuse cannot change it
    for p in range(6):
        pool.land_write(p % 3, p)
    for r in range(3):
        att = pool.decode(r)
        assert att.foreign_pages == () and att.max_abs_dev == 0.0
        assert all(rd.content_ok for rd in att.reads)


# ------------------------------------------------------------- leak schedules
@pytest.mark.parametrize("device", DEVICES)
def test_clean_schedule_no_foreign_and_zero_deviation(device: str) -> None:
    pool = make_pool(device, pages=8)
    for r, pages in ((0, (3, 1, 6)), (1, (0, 2))):
        for p in pages:
            pool.alloc(r, p)
            write(pool, r, p)
    for r in (0, 1):
        att = pool.decode(r, step=5)
        assert att.foreign_pages == () and not att.leaked
        assert att.max_abs_dev < 1e-5
        assert all(rd.content_ok and not rd.inflight for rd in att.reads)
    assert pool.decode(1).pages == (0, 2)


@pytest.mark.parametrize("device", DEVICES)
def test_late_landing_after_free_overwrites_new_owner(device: str) -> None:
    delay = 1_000_000 if device == "cuda" else 0  # make the GPU landing really late
    pool = make_pool(device, pages=4, land_delay_cycles=delay)
    pool.alloc(0, 0)
    pool.post_write(0, 0)
    pool.free(0, 0)  # free before drain
    pool.alloc(1, 0)
    pool.post_write(1, 0)
    assert pool.land_write(1, 0).previous is None
    assert pool.decode(1).max_abs_dev == 0.0
    late = pool.land_write(0, 0)
    assert late.late and late.clobbered_owner and late.owner == 1 and late.previous == Tag(1, 0)
    att = pool.decode(1, step=2)
    (rd,) = att.reads
    assert rd.tag == Tag(0, 0) and rd.foreign and rd.content_ok
    assert rd.describe() == "read(r1, page 0): holds r0 block 0 (FOREIGN)"
    assert att.max_abs_dev > 0 and att.leaked


@pytest.mark.parametrize("device", DEVICES)
def test_rejected_but_continues_reads_stale_pages(device: str) -> None:
    pool = make_pool(device, pages=8)
    for p in range(4):
        pool.alloc(0, p)
        write(pool, 0, p)
    for p in range(4):
        pool.free(0, p)
    for p in range(4):
        pool.alloc(1, p)
    write(pool, 1, 0)  # only one of the four transfers lands
    att = pool.decode(1)
    assert att.foreign_pages == (1, 2, 3)
    assert [rd.tag for rd in att.reads] == [Tag(1, 0), Tag(0, 1), Tag(0, 2), Tag(0, 3)]
    assert att.max_abs_dev > 0


def test_read_with_write_in_flight_and_never_written() -> None:
    pool = make_pool("cpu", pages=2)
    pool.alloc(0, 0)
    pool.post_write(0, 0)
    rd = pool.read(0, 0)
    assert rd.tag is None and rd.foreign and rd.inflight_writers == (0,) and rd.content_ok
    assert "never written" in rd.describe() and "in flight by r0" in rd.describe()
    att = pool.attend(0, [rd], step=1)
    assert att.max_abs_dev > 0
    assert pool.attend(0, []).max_abs_dev == 0.0
    with pytest.raises(PoolError, match="belongs to r0"):
        pool.attend(1, [rd])


def test_free_shifts_block_indices_and_stale_post_uses_old_block() -> None:
    pool = make_pool("cpu", pages=4)
    for p in (0, 1):
        pool.alloc(0, p)
        write(pool, 0, p)
    pool.free(0, 0)  # page 1 is now r0's block 0 but holds block 1
    assert pool.read(0, 1).foreign
    assert pool.post_write(0, 0).block == 0  # freed page: the block it held when freed


# ---------------------------------------------------------- property (Hypothesis)
REQS, PAGES = 2, 4


def _valid_ops(owner: list[int | None], pending: list[list[int]],
               ever: set[tuple[int, int]]) -> list[tuple[str, int, int]]:
    """Operations possible on the reference state; ``ever``: (request, page) once owned."""
    ops: list[tuple[str, int, int]] = []
    for r in range(REQS):
        for p in range(PAGES):
            if owner[p] is None:
                ops.append(("alloc", r, p))
            if owner[p] == r:
                ops += [("free", r, p), ("read", r, p)]
            if (r, p) in ever:
                ops.append(("post", r, p))
            if r in pending[p]:
                ops += [("land", r, p), ("drain", r, p)]
        ops.append(("decode", r, -1))
    return ops


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_foreign_iff_landed_data_is_not_readers_block(device: str, data: st.DataObject) -> None:
    pool = make_pool(device, pages=PAGES, requests=REQS)
    owner: list[int | None] = [None] * PAGES
    tables: dict[int, list[int]] = {r: [] for r in range(REQS)}
    pending: list[list[int]] = [[] for _ in range(PAGES)]  # writers, oldest first
    pending_block: list[list[int]] = [[] for _ in range(PAGES)]
    landed: list[Tag | None] = [None] * PAGES
    last_block: dict[tuple[int, int], int] = {}
    for _ in range(data.draw(st.integers(1, 30), label="length")):
        ever = set(last_block) | {(r2, p2) for r2 in range(REQS) for p2 in tables[r2]}
        kind, r, p = data.draw(st.sampled_from(_valid_ops(owner, pending, ever)))
        if kind == "alloc":
            pool.alloc(r, p)
            owner[p] = r
            tables[r].append(p)
        elif kind == "free":
            pool.free(r, p)
            last_block[(r, p)] = tables[r].index(p)
            tables[r].remove(p)
            owner[p] = None
        elif kind == "post":
            block = tables[r].index(p) if p in tables[r] else last_block[(r, p)]
            assert pool.post_write(r, p).block == block
            pending[p].append(r)
            pending_block[p].append(block)
        elif kind in ("land", "drain"):
            i = pending[p].index(r)
            pending[p].pop(i)
            block = pending_block[p].pop(i)
            if kind == "land":
                assert pool.land_write(r, p).block == block
                landed[p] = Tag(r, block)
            else:
                pool.drain(r, p)
        elif kind == "read":
            rd = pool.read(r, p)
            assert rd.tag == landed[p]
            assert rd.foreign == (landed[p] != Tag(r, tables[r].index(p)))
            assert rd.inflight_writers == tuple(pending[p])
            assert rd.content_ok
        else:
            att = pool.decode(r, step=3)
            expect = tuple(q for i, q in enumerate(tables[r]) if landed[q] != Tag(r, i))
            assert att.foreign_pages == expect
            assert (att.max_abs_dev == 0.0) == (not expect)


# ------------------------------------------------------------ earlier tenant
@pytest.mark.parametrize("device", DEVICES)
def test_earlier_tenant_seeds_every_page_recognisably(device: str) -> None:
    from kvspec.pool import EARLIER_TENANT, request_name

    pool = make_pool(device, pages=3, earlier_tenant=True)
    assert [pool.tag(p) for p in range(3)] == [Tag(EARLIER_TENANT, p) for p in range(3)]
    assert all(pool.owner(p) is None for p in range(3))  # T finished: its pages are free
    tk, _ = request_kv(EARLIER_TENANT, range(4, 8), 2, 16, device=pool.device)
    assert torch.equal(pool.k[1], tk)
    pool.alloc(0, 1)
    rd = pool.read(0, 1)
    assert rd.foreign and rd.content_ok and rd.tag is not None and rd.tag.earlier_tenant
    assert rd.describe() == "read(r0, page 1): holds tenant T block 1 (FOREIGN)"
    assert pool.attend(0, [rd]).max_abs_dev > 0
    write(pool, 0, 1)
    assert pool.decode(0).max_abs_dev == 0.0  # the tenant's bytes are overwritten by r0's
    assert request_name(EARLIER_TENANT) == "T" and request_name(3) == "r3" and request_name(None) == "-"


def test_pool_driver_maps_events_and_checks_ids() -> None:
    from kvspec.pool import PoolDriver

    driver = PoolDriver(PoolConfig(pages=4, requests=3, device="cpu"), requests=2, model="M")
    driver.initial_owners([None, 1, None, None])
    rec = driver.step(1, "serve(r1)", [("post_write", 1, 1), ("land_write", 1, 1), ("read", 1, 1),
                                       ("decode", 1, None)])
    assert [o.op for o in rec.ops] == ["post_write", "land_write", "read", "attend"]
    assert rec.ops[-1].detail["max_abs_dev"] == 0.0
    with pytest.raises(PoolError, match="out of range"):
        driver.step(2, "bad", [("admit", 2, None)])  # r2 is reserved for the aftermath
    with pytest.raises(PoolError, match="unknown event kind"):
        driver.step(2, "bad", [("teleport", 0, 0)])
    report = driver.finish()
    assert [s.index for s in report.steps] == [0, 1] and not report.leaked and report.model == "M"
    with pytest.raises(PoolError, match="at least 3"):
        PoolDriver(PoolConfig(pages=4, requests=2, device="cpu"), requests=2)
