"""Pictures of counterexamples and state graphs (Graphviz).

* :mod:`kvspec.render.trace_graph` — one counterexample: request swimlanes and the
  page pool, one column per step (``kvspec render``, ``kvspec verify --render``).
* :mod:`kvspec.render.state_graph` — the reachable state graph of a small
  configuration (``kvspec graph``).
* :mod:`kvspec.render.timeline` — the grid of cells both are drawn from (no Graphviz).
"""
from __future__ import annotations

from kvspec.render.style import GraphvizMissing, RenderError, dot_available
from kvspec.render.timeline import TraceFormatError, build_timeline, extract_trace

__all__ = ["GraphvizMissing", "RenderError", "TraceFormatError", "build_timeline",
           "dot_available", "extract_trace"]
