"""kvspec: a model checker for the KV-cache request lifecycle of LLM inference engines."""
from kvspec.lang.declare import (Model, Pages, Requests, Size, action, final_state, helper,
                                 invariant, var)
from kvspec.lang.runtime import all_, any_, count, emit, require
from kvspec.lang.types import Int, Page, Request

__version__ = "0.1.0"

__all__ = [
    "Int", "Model", "Page", "Pages", "Request", "Requests", "Size", "action", "all_", "any_",
    "count", "emit", "final_state", "helper", "invariant", "require", "var", "__version__",
]
