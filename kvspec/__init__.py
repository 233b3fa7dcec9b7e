"""kvspec: a model checker for the KV-cache request lifecycle of LLM inference engines."""
from kvspec.lang.declare import (Handles, Index, Model, Pages, Ranks, Requests, Size, Slots,
                                 action, always_eventually, eventually, final_state, helper,
                                 invariant, leads_to, var)
from kvspec.lang.runtime import all_, any_, count, emit, require
from kvspec.lang.types import Int, Page, Request

__version__ = "0.1.0"

__all__ = [
    "Handles", "Index", "Int", "Model", "Page", "Pages", "Ranks", "Request", "Requests", "Size",
    "Slots", "action", "all_",
    "always_eventually", "any_", "count", "emit", "eventually", "final_state", "helper",
    "invariant", "leads_to", "require", "var", "__version__",
]
