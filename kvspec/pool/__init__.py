"""Tensor page pool and trace replay: show a KV leak in real bytes (see docs/replay.md)."""

from kvspec.pool.driver import PoolDriver
from kvspec.pool.kv_data import request_kv, request_query
from kvspec.pool.lasso import HeldPage, LassoSummary, PendingWrite
from kvspec.pool.page_pool import (
    DEVIATION_TOLERANCE,
    EARLIER_TENANT,
    Attention,
    Landing,
    PagePool,
    PageRead,
    PoolConfig,
    PoolError,
    Tag,
    WriteTicket,
    request_name,
    resolve_device,
)
from kvspec.pool.replay import ReplayError, extract_trace, replay_trace
from kvspec.pool.report import (
    ForeignRead,
    LateWrite,
    OpRecord,
    ReplayReport,
    ReuseHazard,
    StepRecord,
)

__all__ = [
    "DEVIATION_TOLERANCE",
    "EARLIER_TENANT",
    "Attention",
    "ForeignRead",
    "HeldPage",
    "Landing",
    "LassoSummary",
    "LateWrite",
    "OpRecord",
    "PagePool",
    "PageRead",
    "PendingWrite",
    "PoolConfig",
    "PoolDriver",
    "PoolError",
    "ReplayError",
    "ReplayReport",
    "ReuseHazard",
    "StepRecord",
    "Tag",
    "WriteTicket",
    "extract_trace",
    "replay_trace",
    "request_kv",
    "request_name",
    "request_query",
    "resolve_device",
]
