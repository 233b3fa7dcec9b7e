"""Colours, fonts and output handling shared by the trace and state-graph pictures."""
from __future__ import annotations

import html
import shutil
from pathlib import Path

import graphviz

#: Okabe–Ito colours (colour-blind safe) for requests r0, r1, ...; red is kept for
#: violations and grey for stale data, so neither appears here
REQUEST_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#8C6D31",
                   "#7B3294", "#1B9E77")
VIOLATION = "#D62728"
VIOLATION_TINT = "#FDE3E3"
STALE = "#9E9E9E"
FREE = "#FFFFFF"
BORDER = "#C8C8C8"
CHANGED = "#1F1F1F"
DIM = "#6B6B6B"
#: the loop of a lasso (liveness counterexample) and the pages it holds forever
LOOP = "#6A3D9A"
LOOP_TINT = "#EEE6F5"
FONT = "DejaVu Sans,Helvetica,Arial,sans-serif"

#: ``-o`` suffix -> graphviz output format (None: the DOT source itself)
FORMATS: dict[str, str | None] = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": None,
                                  ".gv": None}


class RenderError(RuntimeError):
    """A picture cannot be produced (unknown output format, Graphviz missing, …)."""


class GraphvizMissing(RenderError):
    """The Graphviz ``dot`` program is not installed."""


def request_colour(r: str | int | None) -> str:
    if r is None:
        return STALE
    i = r if isinstance(r, int) else int(str(r)[1:]) if str(r)[1:].isdigit() else 0
    return REQUEST_COLOURS[i % len(REQUEST_COLOURS)]


def tint(colour: str, amount: float = 0.78) -> str:
    """``colour`` mixed with white (``amount`` of white)."""
    c = colour.lstrip("#")
    rgb = [int(c[i:i + 2], 16) for i in (0, 2, 4)]
    mixed = [round(x + (255 - x) * amount) for x in rgb]
    return "#" + "".join(f"{x:02X}" for x in mixed)


def text_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour``."""
    c = colour.lstrip("#")
    r, g, b = (int(c[i:i + 2], 16) for i in (0, 2, 4))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#FFFFFF"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def dot_available() -> bool:
    return shutil.which("dot") is not None


def output_format(path: Path) -> str | None:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise RenderError(f"cannot write {path}: unknown picture format {suffix or '(none)'!r}; "
                          "use .svg, .png, .pdf or .dot")
    return FORMATS[suffix]


def missing_dot_message(fmt: str) -> str:
    return (f"the Graphviz 'dot' program is needed to write {fmt.upper()} but was not found "
            "on PATH; install Graphviz (apt-get install graphviz, brew install graphviz, "
            "conda install graphviz) or write the DOT source with -o out.dot")


def write_graph(graph: graphviz.Digraph, path: Path) -> Path:
    """Write ``graph`` to ``path`` in the format its suffix names."""
    path = Path(path)
    fmt = output_format(path)
    if path.parent and not path.parent.exists():
        raise RenderError(f"cannot write {path}: directory {path.parent} does not exist")
    if fmt is None:
        path.write_text(graph.source, encoding="utf-8")
        return path
    data = pipe(graph, fmt)
    path.write_bytes(data)
    return path


def pipe(graph: graphviz.Digraph, fmt: str) -> bytes:
    """Run ``dot`` on ``graph``; a clear GraphvizMissing when it is not installed."""
    if not dot_available():
        raise GraphvizMissing(missing_dot_message(fmt))
    try:
        data: bytes = graph.pipe(format=fmt, quiet=True)
        return data
    except graphviz.ExecutableNotFound:
        raise GraphvizMissing(missing_dot_message(fmt)) from None
    except graphviz.CalledProcessError as exc:
        stderr = exc.stderr.decode(errors="replace").strip() if isinstance(exc.stderr, bytes) \
            else str(exc.stderr or "")
        raise RenderError(f"Graphviz failed: {stderr or exc}") from None
