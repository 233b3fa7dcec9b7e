"""Deterministic per-request K/V data for the tensor page pool.

Every value is a pure function of ``(request id, token position, head, dim, kind)``,
computed with an integer hash that never overflows int64, so the bytes are identical
on CPU and CUDA and a page holding another request's data can always be recognised by
recomputing what it should hold.  Values are uniform in ``[-1, 1)``.
"""

from __future__ import annotations

from typing import Final

import torch
from torch import Tensor

__all__ = ["KIND_K", "KIND_V", "KIND_Q", "kv_values", "request_kv", "request_query"]

_MASK: Final[int] = 0x7FFFFFFF  # keep every intermediate below 2**31 ...
_MUL1: Final[int] = 0x5BD1E995 & _MASK  # ... so x * MUL < 2**62 fits in int64
_MUL2: Final[int] = 0x27D4EB2F
_SALT: Final[int] = 0x2545F491

KIND_K: Final[int] = 0
KIND_V: Final[int] = 1
KIND_Q: Final[int] = 2


def _mix(x: Tensor) -> Tensor:
    """One round of a 31-bit avalanche hash (int64 tensor in, int64 tensor in [0, 2**31) out)."""
    x = ((x ^ (x >> 15)) * _MUL1) & _MASK
    x = ((x ^ (x >> 13)) * _MUL2) & _MASK
    return x ^ (x >> 16)


def _as_positions(positions: Tensor | range | list[int], device: torch.device) -> Tensor:
    if isinstance(positions, Tensor):
        if positions.dtype.is_floating_point or positions.dtype == torch.bool:
            raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
        if positions.dim() != 1:
            raise ValueError(f"positions must be 1-D, got shape {tuple(positions.shape)}")
        pos = positions.to(device=device, dtype=torch.int64)
    else:
        pos = torch.tensor(list(positions), dtype=torch.int64, device=device)
    if pos.numel() and int(pos.min()) < 0:
        raise ValueError("positions must be non-negative")
    return pos


def kv_values(
    kind: int,
    request: int,
    positions: Tensor | range | list[int],
    heads: int,
    head_dim: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> Tensor:
    """Values of ``kind`` (K, V or Q) for ``request`` at ``positions``: ``[len(positions), heads, head_dim]``."""
    if request < 0:
        raise ValueError(f"request id must be non-negative, got {request}")
    dev = torch.device(device)
    pos = _as_positions(positions, dev)
    head = torch.arange(heads, dtype=torch.int64, device=dev)
    dim = torch.arange(head_dim, dtype=torch.int64, device=dev)
    h = _mix(torch.full((1, 1, 1), (_SALT + kind) & _MASK, dtype=torch.int64, device=dev))
    h = _mix((h + (request & _MASK)) & _MASK)
    h = _mix((h + (pos & _MASK).view(-1, 1, 1)) & _MASK)
    h = _mix((h + head.view(1, -1, 1)) & _MASK)
    h = _mix((h + dim.view(1, 1, -1)) & _MASK)
    unit = h.to(torch.float64) / float(1 << 30) - 1.0  # exact in float64, in [-1, 1)
    return unit.to(dtype)


def request_kv(
    request: int,
    positions: Tensor | range | list[int],
    heads: int,
    head_dim: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[Tensor, Tensor]:
    """The K and V a request owns at ``positions``, each ``[len(positions), heads, head_dim]``."""
    k = kv_values(KIND_K, request, positions, heads, head_dim, dtype, device)
    v = kv_values(KIND_V, request, positions, heads, head_dim, dtype, device)
    return k, v


def request_query(
    request: int,
    step: int,
    heads: int,
    head_dim: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> Tensor:
    """The decode query of ``request`` at decode ``step``: ``[heads, head_dim]``."""
    if step < 0:
        raise ValueError(f"step must be non-negative, got {step}")
    return kv_values(KIND_Q, request, [step], heads, head_dim, dtype, device)[0]
