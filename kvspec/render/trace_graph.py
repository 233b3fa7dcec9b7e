"""The counterexample picture: request swimlanes and the page pool, one column per step.

Public API::

    extract_trace(data, prop=None) -> dict      # a kvspec-trace/1 from a trace or result
    build_trace_graph(trace) -> graphviz.Digraph
    trace_dot(trace) -> str                     # the DOT source (no Graphviz needed)
    render_trace(trace, path) -> Path           # .svg .png .pdf (need `dot`) or .dot
    trace_svg(trace) -> str                     # for Jupyter (Trace._repr_svg_)

The grid is one Graphviz HTML-table node per strip of at most ``columns_per_row``
steps (longer traces wrap into further strips, each repeating the row headers), a
title, a red banner naming the violated property, the violating event and the pages
that leaked, and a legend. Cells carry ``ID`` attributes (``s<step>_r<n>``,
``s<step>_p<page>``, ``h<step>``) so SVG output can be styled or inspected.

A lasso (a liveness counterexample, ``loop_start`` set) gets one more row above the
step headers (cells ``loop<step>``): the loop's columns, tinted and marked ``↻``,
and a back-edge from the last loop column to the first one labelled "repeats
forever" — or, for a run that stops, a self-loop on the last column ("nothing
enabled: stays here forever"). The pages whose obligation stays pending across
the loop (held and never freed, or with a write that never quiesces) get a purple
border and a ``⟳`` line in the loop's columns. Safety traces are drawn as before.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Mapping, Sequence

import graphviz

from kvspec.render.style import (BORDER, CHANGED, DIM, FONT, LOOP, LOOP_TINT, STALE, VIOLATION,
                                 VIOLATION_TINT, RenderError, esc, pipe, request_colour, text_on,
                                 tint, write_graph)
from kvspec.render.timeline import (Column, HeldPage, Mark, PageCell, RequestCell, Timeline,
                                    TraceFormatError, build_timeline, extract_trace, page_ranges)

__all__ = ["DEFAULT_COLUMNS_PER_ROW", "RenderError", "TraceFormatError", "build_trace_graph",
           "extract_trace", "render_trace", "trace_dot", "trace_svg"]

#: steps per strip before the picture wraps (8 pages × 15 steps fit in one strip)
DEFAULT_COLUMNS_PER_ROW = 15
CELL_WIDTH = 92
HEAD_WIDTH = 78
CHIP_W = 56
_FILLERS = 4

#: how page events are written on a cell
_MARK_TEXT = {"alloc": "alloc", "free": "free", "post_write": "write ⇢", "land_write": "landed",
              "drain": "drained", "read": "read"}
#: request events written in the swimlane
_REQ_TEXT = {"admit": "admit", "reject": "REJECT", "decode": "decode", "finish": "finish",
             "abort": "abort", "timeout": "timeout"}


def _font(text: str, size: int = 9, colour: str | None = None, bold: bool = False,
          italic: bool = False) -> str:
    inner = esc(text)
    if bold:
        inner = f"<B>{inner}</B>"
    if italic:
        inner = f"<I>{inner}</I>"
    attrs = f' POINT-SIZE="{size}"'
    if colour:
        attrs += f' COLOR="{colour}"'
    return f"<FONT{attrs}>{inner}</FONT>"


def _lines(parts: Sequence[str], align: str = "LEFT") -> str:
    return f'<BR ALIGN="{align}"/>'.join(parts) + (f'<BR ALIGN="{align}"/>' if parts else "")


def _border(changed: bool, violating: bool) -> tuple[int, str]:
    if violating:
        return 3, VIOLATION
    if changed:
        return 2, CHANGED
    return 1, BORDER


def _split_label(label: str) -> tuple[str, str]:
    """``prealloc(r0, page 2)`` -> (``prealloc``, ``r0, page 2``)."""
    if "(" in label and label.endswith(")"):
        name, _, rest = label.partition("(")
        return name, rest[:-1]
    return label, ""


# -- cells -----------------------------------------------------------------------------

def _header_cell(col: Column) -> str:
    if col.is_initial:
        return (f'<TD ID="h0" BGCOLOR="#EEEEEE" WIDTH="{CELL_WIDTH}">'
                f'{_font("0", 9, DIM)}<BR/>{_font("initial", 10, bold=True)}</TD>')
    name, args = _split_label(col.label)
    bg = VIOLATION if col.violating else LOOP_TINT if col.in_loop else "#EEEEEE"
    fg = "#FFFFFF" if col.violating else "#000000"
    step = f"step {col.index}" + ("  ✘" if col.violating else "  ↻" if col.in_loop else "")
    parts = [_font(step, 9, fg if col.violating else DIM, bold=col.violating),
             _font(name, 10, fg, bold=True)]
    if args:
        parts.append(_font(args, 9, fg))
    return f'<TD ID="h{col.index}" BGCOLOR="{bg}" WIDTH="{CELL_WIDTH}">{"<BR/>".join(parts)}</TD>'


def _mark_line(m: Mark, owner: str | None) -> str:
    text = _MARK_TEXT.get(m.kind, m.kind)
    who = m.request
    if m.kind == "read":
        if m.foreign is not None:
            held = "stale" if m.foreign == "stale" else f"{m.foreign}'s"
            body = f"✘ read by {who}: {held} KV" if m.violating else \
                f"⚠ read by {who}: {held} KV"
            return _font(body, 8, VIOLATION, bold=True)
        if m.inflight:
            return _font(f"⚠ read by {who} mid-write", 8, VIOLATION, bold=True)
        body = f"read by {who}"
        return _font(("✘ " if m.violating else "") + body, 8,
                     VIOLATION if m.violating else "#000000", bold=m.violating)
    if m.kind == "land_write" and m.foreign is not None:
        return _font(f"✘ {who}'s write landed late" if m.violating else
                     f"⚠ {who}'s write landed late", 8, VIOLATION, bold=True)
    if m.kind in ("alloc", "free"):
        body = f"{text} {who}" if (m.kind == "free" or owner != who) else f"{text} → {who}"
    else:
        body = f"{text} {who}" if m.kind != "post_write" else f"write {who} posted"
    if m.violating:
        return _font("✘ " + body, 8, VIOLATION, bold=True)
    return _font(body, 8, "#000000")


def _chip(text: str, fill: str, bold: bool = False, outline: str | None = None) -> str:
    if outline is not None:
        return (f'<TD BGCOLOR="#FFFFFF" BORDER="1" COLOR="{outline}" CELLPADDING="1" '
                f'WIDTH="{CHIP_W}">'
                f'{_font(text, 8, "#000000", bold=True)}</TD>')
    return (f'<TD BGCOLOR="{fill}" CELLPADDING="1" WIDTH="{CHIP_W}" '
            f'>{_font(text, 8, text_on(fill), bold=bold)}</TD>')


def _held_line(held: HeldPage) -> str:
    text = "⟳ write never lands" if held.kind == "write" else "⟳ held forever"
    return _font(text + (" (pending)" if held.obligation else ""), 8, LOOP, bold=True)


def _page_cell(cell: PageCell, col: Column, held: HeldPage | None = None) -> str:
    owner_fill = tint(request_colour(cell.owner)) if cell.owner else "#FFFFFF"
    width, colour = _border(cell.changed and not col.is_initial, cell.violating)
    if held is not None and not cell.violating:
        width, colour = 3, LOOP
    data_colour = request_colour(cell.data) if cell.data else STALE
    data_text = f"KV {cell.data}" if cell.data else "stale KV"
    owner_text = cell.owner if cell.owner else "free"
    writers = cell.writers or ([cell.writer or "?"] * cell.inflight)
    chips = [_chip(data_text, data_colour, bold=cell.data is not None)]
    for w in dict.fromkeys(writers):
        n = writers.count(w)
        chips.append(_chip(f"⇢ {w} write" + (f" ×{n}" if n > 1 else ""), "#FFFFFF",
                           outline=request_colour(w)))
    label = (f'<TD ALIGN="LEFT" VALIGN="TOP" CELLPADDING="1" '
             f'WIDTH="{CELL_WIDTH - 14 - CHIP_W}">'
             f'{_font(owner_text, 9, "#000000" if cell.owner else DIM, bold=cell.owner is not None)}'
             "</TD>")
    chip_table = ('<TD ALIGN="RIGHT" VALIGN="TOP"><TABLE BORDER="0" CELLBORDER="0" '
                  'CELLSPACING="1" CELLPADDING="0">' + "".join(f"<TR>{c}</TR>" for c in chips)
                  + '<TR><TD></TD></TR>' * _FILLERS + "</TABLE></TD>")
    rows = [f"<TR>{label}{chip_table}</TR>"]
    if cell.marks or held is not None:
        lines = [_mark_line(m, cell.owner) for m in cell.marks]
        if held is not None:
            lines.append(_held_line(held))
        rows.append(f'<TR><TD COLSPAN="2" ALIGN="LEFT" VALIGN="TOP" CELLPADDING="1">'
                    f'{_lines(lines)}</TD></TR>')
    # empty rows soak up the height a taller neighbour forces on this cell (Graphviz
    # shares it among the rows), so the chips keep their size
    rows.append('<TR><TD COLSPAN="2"></TD></TR>' * _FILLERS)
    inner = (f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">'
             f'{"".join(rows)}</TABLE>')
    bg = owner_fill
    if cell.violating and not cell.owner:
        bg = VIOLATION_TINT
    return (f'<TD ID="s{col.index}_p{cell.page}" BGCOLOR="{bg}" BORDER="{width}" '
            f'COLOR="{colour}" VALIGN="TOP" ALIGN="LEFT" CELLPADDING="3">{inner}</TD>')


def _request_cell(cell: RequestCell, col: Column) -> str:
    width, colour = _border(cell.changed and not col.is_initial, cell.violating)
    parts: list[str] = []
    if cell.phase is not None:
        parts.append(_font(cell.phase, 9, "#000000" if cell.phase_changed or col.is_initial
                           else DIM, bold=cell.phase_changed))
    for ch in cell.changes:
        parts.append(_font(f"{ch.var} = {_value(ch.after)}", 8, "#000000", bold=True))
    for m in cell.marks:
        text = _REQ_TEXT.get(m.kind, m.kind)
        if m.violating:
            parts.append(_font(f"✘ {text}", 9, VIOLATION, bold=True))
        else:
            parts.append(_font(text, 8, VIOLATION if m.kind == "reject" else "#000000",
                               bold=m.kind == "reject"))
    if cell.culprit is not None:
        m = cell.culprit
        parts.append(_font(f"✘ {_MARK_TEXT.get(m.kind, m.kind)} page {m.page}", 9, VIOLATION,
                           bold=True))
    if cell.rejected and not any(m.kind == "reject" for m in cell.marks):
        parts.append(_font("(rejected)", 8, VIOLATION, italic=True))
    bg = VIOLATION_TINT if cell.violating else tint(request_colour(cell.request), 0.9)
    return (f'<TD ID="s{col.index}_{cell.request}" BGCOLOR="{bg}" BORDER="{width}" '
            f'COLOR="{colour}" ALIGN="LEFT" VALIGN="TOP" CELLPADDING="3">'
            f'{_lines(parts) or " "}</TD>')


def _value(v: Any) -> str:
    if v is None:
        return "None"
    return str(v)


def _row_head(text: str, colour: str | None = None, sub: str | None = None) -> str:
    fill = colour or "#FAFAFA"
    fg = text_on(fill)
    extra = f"<BR/>{_font(sub, 8, fg)}" if sub else ""
    return (f'<TD BGCOLOR="{fill}" WIDTH="{HEAD_WIDTH}" ALIGN="CENTER">'
            f'{_font(text, 10, fg, bold=True)}{extra}</TD>')


# -- the strip table -------------------------------------------------------------------

def _loop_cell(tl: Timeline, col: Column) -> str:
    """The cell of ``col`` in a lasso's loop row (``PORT`` for the back-edge)."""
    attrs = f'ID="loop{col.index}" PORT="loop{col.index}"'
    k = tl.loop_start if tl.loop_start is not None else tl.steps
    if tl.stops and col.loop_anchor:
        return (f'<TD {attrs} BGCOLOR="{LOOP_TINT}" BORDER="2" COLOR="{LOOP}">'
                f'{_font("■ stops here", 9, LOOP, bold=True)}<BR/>'
                f'{_font("nothing enabled: forever", 8, LOOP)}</TD>')
    if col.in_loop:
        first, last = col.index == k + 1, col.index == tl.steps
        if first and last:
            parts = [_font("↻ loop", 9, LOOP, bold=True), _font("repeats forever", 8, LOOP)]
        elif first:
            parts = [_font("↻ loop starts", 9, LOOP, bold=True),
                     _font("repeats forever", 8, LOOP)]
        elif last:
            parts = [_font("↻ loop ends", 9, LOOP, bold=True),
                     _font(f"then step {k + 1} again", 8, LOOP)]
        else:
            parts = [_font("↻ loop", 9, LOOP, bold=True)]
        return (f'<TD {attrs} BGCOLOR="{LOOP_TINT}" BORDER="2" COLOR="{LOOP}">'
                f'{"<BR/>".join(parts)}</TD>')
    if col.loop_anchor:
        return (f'<TD {attrs} BORDER="0">{_font("the loop returns", 8, LOOP, italic=True)}'
                f'<BR/>{_font(f"to this state (= after step {tl.steps})", 8, LOOP, italic=True)}'
                "</TD>")
    return f'<TD {attrs} BORDER="0"> </TD>'


def _held_at(tl: Timeline, col: Column) -> dict[int, HeldPage]:
    """The pages drawn as held forever in ``col`` (the loop's states)."""
    if not tl.is_lasso or not (col.in_loop or col.loop_anchor):
        return {}
    out: dict[int, HeldPage] = {}
    for h in tl.held:
        out.setdefault(h.page, h)
    return out


def _strip(tl: Timeline, cols: list[Column]) -> str:
    n = len(cols)
    rows = []
    if tl.is_lasso:
        rows.append('<TR><TD BGCOLOR="#FAFAFA">' + _font("lasso", 9, LOOP, bold=True) + "</TD>"
                    + "".join(_loop_cell(tl, c) for c in cols) + "</TR>")
    rows.append('<TR><TD BGCOLOR="#FAFAFA">' + _font("step →", 9, DIM) + "</TD>" +
                "".join(_header_cell(c) for c in cols) + "</TR>")
    if tl.requests:
        phase = f"lifecycle phase ({tl.phase_var})" if tl.phase_var else "lifecycle"
        rows.append(f'<TR><TD COLSPAN="{n + 1}" ALIGN="LEFT" BGCOLOR="#FFFFFF" BORDER="0">'
                    f'{_font(f"requests — {phase}, flags that changed, request events", 9, DIM, italic=True)}'
                    "</TD></TR>")
    for i, r in enumerate(tl.requests):
        rows.append("<TR>" + _row_head(r, request_colour(r), "request") +
                    "".join(_request_cell(c.requests[i], c) for c in cols) + "</TR>")
    shown = tl.shown_pages
    if tl.pages:
        rows.append(f'<TR><TD COLSPAN="{n + 1}" ALIGN="LEFT" BGCOLOR="#FFFFFF" BORDER="0">'
                    + _font("page pool — fill: owner · chip: whose KV data the page holds · "
                            "⇢ rN write: a write in flight", 9, DIM, italic=True) + "</TD></TR>")
    held_pages = {h.page: h for h in reversed(tl.held)}
    for p in shown:
        head = _row_head(f"page {p}")
        if p in held_pages:
            sub = "write never lands" if held_pages[p].kind == "write" else "held forever"
            head = _row_head(f"page {p}", LOOP_TINT, f"⟳ {sub}")
        rows.append("<TR>" + head +
                    "".join(_page_cell(c.pages[p], c, _held_at(tl, c).get(p)) for c in cols)
                    + "</TR>")
    if tl.untouched_pages:
        pl = "page" if len(tl.untouched_pages) == 1 else "pages"
        rows.append("<TR>" + _row_head(f"{pl} {page_ranges(tl.untouched_pages)}") +
                    f'<TD COLSPAN="{n}" ID="untouched" BGCOLOR="#FFFFFF" ALIGN="LEFT">' +
                    _font("free, holding stale KV, untouched throughout the trace", 9, DIM,
                          italic=True) + "</TD></TR>")
    if any(c.scalars for c in tl.columns):
        cells = []
        for c in cols:
            parts = [_font(f"{ch.var} = {_value(ch.after)}", 8, bold=True) for ch in c.scalars]
            width, colour = _border(bool(c.scalars), False)
            cells.append(f'<TD BORDER="{width}" COLOR="{colour}" ALIGN="LEFT" VALIGN="TOP">'
                         f'{_lines(parts) or " "}</TD>')
        rows.append("<TR>" + _row_head("globals") + "".join(cells) + "</TR>")
    return ('<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="3" CELLPADDING="3">'
            + "".join(rows) + "</TABLE>>")


def _title(tl: Timeline) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in tl.sizes.items())
    where = f" ({tl.file})" if tl.file else ""
    steps = f"{tl.steps} step" + ("" if tl.steps == 1 else "s")
    what = f"counterexample to {tl.prop}: {steps}"
    if tl.loop_start is not None:
        what = f"lasso counterexample to {tl.prop}: {_lasso_shape(tl)}"
    return ('<<TABLE BORDER="0" CELLPADDING="2"><TR><TD ALIGN="LEFT">'
            + _font(f"{tl.model}{where}", 14, bold=True) + "  " + _font(sizes, 11, DIM) +
            '</TD></TR><TR><TD ALIGN="LEFT">' +
            _font(what, 11) +
            "</TD></TR></TABLE>>")


def _steps_text(first: int, last: int) -> str:
    return f"step {first}" if first == last else f"steps {first}–{last}"


def _lasso_shape(tl: Timeline) -> str:
    """``2-step prefix, then step 3 repeats forever`` (or ``stops after step 6``)."""
    k = tl.loop_start if tl.loop_start is not None else tl.steps
    prefix = f"{k}-step prefix" if k else "no prefix"
    if tl.stops:
        return f"{tl.steps} step" + ("" if tl.steps == 1 else "s") + \
            ", then nothing is enabled: the last state repeats forever"
    loop = _steps_text(k + 1, tl.steps)
    return f"{prefix}, then {loop} repeat" + ("s" if k + 1 == tl.steps else "") + " forever"


def _lasso_verdict(tl: Timeline) -> list[str]:
    k = tl.loop_start if tl.loop_start is not None else tl.steps
    if tl.stops:
        head = f"✘ {tl.prop} violated: the run stops after step {tl.steps} with nothing " \
            "enabled, and stays there forever"
    else:
        back = "the initial state" if k == 0 else f"the state after step {k}"
        verb = "repeats" if k + 1 == tl.steps else "repeat"
        head = f"✘ {tl.prop} violated: {_steps_text(k + 1, tl.steps)} {verb} forever " \
            f"(back to {back})"
    lines = [_font(head, 12, VIOLATION, bold=True)]
    if tl.violation_event is not None:
        opened = f" at step {tl.violation_step}" if tl.violation_step else ""
        lines.append(_font(f"pending obligation: {tl.violation_event.text()}, opened{opened}",
                           10))
    lines += [_font(part, 10, bold=True) for part in textwrap.wrap(tl.reason, 150)]
    if tl.held:
        what = "pages held across the loop" if not tl.stops else "pages held forever"
        lines.append(_font(f"{what} (their obligation stays pending):", 9, DIM))
        for h in tl.held[:8]:
            lines.append(_font(f"⟳ {h.text()}", 9, LOOP, bold=h.obligation))
        if len(tl.held) > 8:
            lines.append(_font(f"… and {len(tl.held) - 8} more", 9, DIM))
    return lines


def _verdict(tl: Timeline) -> str:
    lines: list[str] = []
    if tl.is_lasso:
        lines = _lasso_verdict(tl)
        return _verdict_box(tl, lines)
    step = tl.violation_step
    where = f"at step {step}" if step else "in the initial state"
    head = f"✘ {tl.prop} violated {where}"
    if step:
        col = tl.columns[-1]
        head += f", {col.label}"
    lines.append(_font(head, 12, VIOLATION, bold=True))
    if tl.violation_event is not None:
        lines.append(_font(f"violating event: {tl.violation_event.text()}", 10))
    lines.append(_font(tl.reason, 10, bold=True))
    leaks = [lk for lk in tl.leaks]
    if leaks:
        lines.append(_font("where KV crossed a request boundary (stale or foreign data, late writes):", 9, DIM))
        for lk in leaks[:8]:
            lines.append(_font(("✘ " if lk.violating else "⚠ ") + lk.text(), 9, VIOLATION))
        if len(leaks) > 8:
            lines.append(_font(f"… and {len(leaks) - 8} more", 9, DIM))
    return _verdict_box(tl, lines)


def _verdict_box(tl: Timeline, lines: list[str]) -> str:
    if tl.is_lasso and tl.leaks:
        lines = lines + [_font("where KV crossed a request boundary (stale or foreign data, "
                               "late writes):", 9, DIM)]
        lines += [_font("⚠ " + lk.text(), 9, VIOLATION) for lk in tl.leaks[:8]]
    return (f'<<TABLE BORDER="2" COLOR="{VIOLATION}" CELLBORDER="0" CELLPADDING="4" '
            f'BGCOLOR="{VIOLATION_TINT}"><TR><TD ID="verdict" ALIGN="LEFT">{_lines(lines)}'
            "</TD></TR></TABLE>>")


def _legend(tl: Timeline) -> str:
    chips = []
    for r in tl.requests[:8]:
        c = request_colour(r)
        chips.append(f'<TD BGCOLOR="{tint(c)}" BORDER="1" COLOR="{BORDER}">'
                     f'{_font(f"owned by {r}", 8)}</TD>'
                     f'<TD BGCOLOR="{c}">{_font(f"KV {r}", 8, text_on(c), bold=True)}</TD>')
    chips.append(f'<TD BGCOLOR="#FFFFFF" BORDER="1" COLOR="{BORDER}">{_font("free", 8, DIM)}</TD>'
                 f'<TD BGCOLOR="{STALE}">{_font("stale KV", 8, text_on(STALE))}</TD>')
    chip_row = ('<TR><TD ALIGN="LEFT"><TABLE BORDER="0" CELLSPACING="3" CELLPADDING="2"><TR>'
                + "".join(chips) + "</TR></TABLE></TD></TR>")
    expl = [
        "cell fill = the request the page is allocated to (white: free)",
        "chip = whose KV data the page holds: the last write that landed in it, kept across "
        "free and alloc; stale = data from before the trace (another tenant's)",
        "⇢ rN write = a write posted by rN into the page that has not landed or been drained "
        "yet (in flight)",
        "thick black border = changed in this step · red border and ✘ = the violating event · "
        "⚠ = a read of KV that is not the reader's, or a write landing in a page its writer "
        "no longer owns",
        "request rows: lifecycle phase (bold when it changed), model flags that changed "
        "(name = new value), request events",
    ]
    if tl.is_lasso:
        expl += [
            "lasso: ↻ purple columns repeat forever; the purple arrow goes from the loop's "
            "last step back to its first (■: the run stops, nothing is enabled)",
            "purple border and ⟳ = a page held across the loop: its obligation (free, or "
            "the write's landing) stays pending forever",
        ]
    text = "".join(f'<TR><TD ALIGN="LEFT">{_font(e, 9)}</TD></TR>' for e in expl)
    return ('<<TABLE BORDER="1" COLOR="#BBBBBB" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2">'
            f'<TR><TD ALIGN="LEFT">{_font("legend", 10, bold=True)}'
            "</TD></TR>" + chip_row + text + "</TABLE>>")


def _strips(columns: list[Column], per_row: int) -> list[list[Column]]:
    if per_row < 1:
        raise ValueError("columns_per_row must be at least 1")
    first = columns[: per_row + 1]  # the initial state plus per_row steps
    rest = columns[per_row + 1:]
    out = [first]
    for i in range(0, len(rest), per_row):
        out.append(rest[i:i + per_row])
    return out


def build_trace_graph(trace: Mapping[str, Any], *,
                      columns_per_row: int = DEFAULT_COLUMNS_PER_ROW) -> graphviz.Digraph:
    """The picture of a ``kvspec-trace/1`` (or ``kvspec-result/1``) document."""
    data = extract_trace(trace)
    tl = build_timeline(data)
    g = graphviz.Digraph("counterexample")
    g.attr("graph", rankdir="TB", nodesep="0.2", ranksep="0.25", bgcolor="white",
           fontname=FONT, margin="0.2", pad="0.1")
    g.attr("node", shape="plaintext", fontname=FONT, margin="0")
    g.attr("edge", style="invis")
    g.node("title", _title(tl))
    previous = "title"
    strips = _strips(tl.columns, columns_per_row)
    for k, cols in enumerate(strips):
        name = f"strip{k}"
        if tl.is_lasso and k == 0:  # room above the first strip for the back-edge's arc
            g.node("loop_space", "", shape="plaintext", height="0.9", width="0.1")
            g.edge(previous, "loop_space")
            previous = "loop_space"
        g.node(name, _strip(tl, cols))
        g.edge(previous, name)
        previous = name
    if tl.is_lasso:
        _back_edge(g, tl, strips)
    g.node("verdict", _verdict(tl))
    g.edge(previous, "verdict")
    g.node("legend", _legend(tl))
    g.edge("verdict", "legend")
    return g


def _back_edge(g: graphviz.Digraph, tl: Timeline, strips: list[list[Column]]) -> None:
    """The lasso's return arrow, between the ``loop<step>`` ports of the loop row: from
    the last loop column to the first, or a self-loop on the last column of a run that
    stops."""
    where = {c.index: f"strip{k}" for k, cols in enumerate(strips) for c in cols}
    last = tl.steps
    k = tl.loop_start if tl.loop_start is not None else last
    if tl.stops:
        target, label = last, "nothing enabled: stays here forever"
    else:
        back = "the initial state" if k == 0 else f"the state after step {k}"
        target = k + 1
        label = f"↻ repeats forever (step {last} returns to {back})"
    g.edge(f"{where[last]}:loop{last}:n", f"{where[target]}:loop{target}:n",
           label=label, style="bold", color=LOOP, fontcolor=LOOP, fontsize="10",
           fontname=FONT, penwidth="2", constraint="false", dir="forward", id="back_edge")


def trace_dot(trace: Mapping[str, Any], *, columns_per_row: int = DEFAULT_COLUMNS_PER_ROW) -> str:
    """The DOT source of the picture (works without Graphviz installed)."""
    source: str = build_trace_graph(trace, columns_per_row=columns_per_row).source
    return source


def render_trace(trace: Mapping[str, Any], path: Path | str, *,
                 columns_per_row: int = DEFAULT_COLUMNS_PER_ROW) -> Path:
    """Draw ``trace`` to ``path`` (.svg, .png, .pdf need Graphviz's ``dot``; .dot does not).

    Raises TraceFormatError for a malformed trace and RenderError (GraphvizMissing when
    ``dot`` is not installed) when the picture cannot be written."""
    graph = build_trace_graph(trace, columns_per_row=columns_per_row)
    return write_graph(graph, Path(path))


def trace_svg(trace: Mapping[str, Any], *,
              columns_per_row: int = DEFAULT_COLUMNS_PER_ROW) -> str:
    """The picture as an SVG string (for Jupyter's ``_repr_svg_``)."""
    graph = build_trace_graph(trace, columns_per_row=columns_per_row)
    svg: str = pipe(graph, "svg").decode("utf-8")
    return svg

