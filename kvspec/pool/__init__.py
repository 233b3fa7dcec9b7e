"""Tensor page pool and trace replay: show a KV leak in real bytes (see docs/replay.md)."""

from kvspec.pool.kv_data import request_kv, request_query
from kvspec.pool.page_pool import (
    DEVIATION_TOLERANCE,
    Attention,
    Landing,
    PagePool,
    PageRead,
    PoolConfig,
    PoolError,
    Tag,
    WriteTicket,
    resolve_device,
)
from kvspec.pool.replay import (
    ForeignRead,
    LateWrite,
    OpRecord,
    ReplayError,
    ReplayReport,
    ReuseHazard,
    StepRecord,
    extract_trace,
    replay_trace,
)

__all__ = [
    "DEVIATION_TOLERANCE",
    "Attention",
    "ForeignRead",
    "Landing",
    "LateWrite",
    "OpRecord",
    "PagePool",
    "PageRead",
    "PoolConfig",
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
    "request_query",
    "resolve_device",
]
