"""HTML building blocks of the report: escaping, formatting, tables, figures, collapsible blocks.

Everything from the run passes through ``_e`` (HTML-escape) or ``_table``
(which escapes every cell that is not ``_Raw``, markup built here). ``_figure``
turns a matplotlib Figure into an inline PNG (a ``data:`` URI) with its
"How to read this" caption, so the page needs no other file.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import escaped

__all__ = ["_Raw", "_collapsed", "_e", "_figure", "_fmt", "_list", "_notes", "_table", "_without_markers"]

# Longer tables are cut with a note, so the page stays readable.
_MAX_ROWS = 300
_DPI = 130


class _Raw(str):
    """Markup built here, already safe: the table helper does not escape it again."""


# The simulated world's hidden ground truth, ``[[sim:<tag> key=value ...]]`` (multiverse.sim._markers): the
# same grammar, kept here so the report needs nothing from the simulated world to hide it.
_SIM_MARKER = re.compile(r"[ \t]*\[\[sim:[a-z_]+(?:[ \t][^\[\]]*)?\]\]")


def _without_markers(text: str) -> str:
    """``text`` as a reader should see it: without the simulated world's hidden markers (the store keeps them)."""
    return _SIM_MARKER.sub("", text).rstrip() if "[[sim:" in text else text


def _e(value: Any) -> str:
    # The one rule for outputs: a control, invisible or non-text character (U+0001, a bidi override,
    # U+FFFE, a lone surrogate) is shown as a visible escape, so the page always parses and encodes.
    return html.escape(escaped(value, whitespace=True), quote=True)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or value is pd.NA:
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return "—" if not np.isfinite(value) else f"{value:.{digits}f}"
    return str(value)


def _cell(value: Any, tag: str = "td") -> str:
    if isinstance(value, _Raw):
        return f"<{tag}>{value}</{tag}>"
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    klass = ' class="num"' if numeric else ""
    return f"<{tag}{klass}>{_e(_fmt(value))}</{tag}>"


def _table(header: Sequence[str] | None, rows: Sequence[Sequence[Any]], *, row_classes: Sequence[str] | None = None,
           limit: int = _MAX_ROWS) -> str:
    """An escaped HTML table (cells may be ``_Raw``); rows past ``limit`` are cut with a note."""
    head = "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead>" if header else ""
    body = []
    for i, row in enumerate(rows[:limit]):
        klass = f' class="{_e(row_classes[i])}"' if row_classes and row_classes[i] else ""
        body.append(f"<tr{klass}>" + "".join(_cell(v) for v in row) + "</tr>")
    more = f'<p class="note">{len(rows) - limit} more rows not shown.</p>' if len(rows) > limit else ""
    return f'<div class="scroll"><table>{head}<tbody>{"".join(body)}</tbody></table></div>{more}'


def _png(figure: Any) -> tuple[str, int, int]:
    """A matplotlib Figure as a base64 PNG and its display size in CSS pixels."""
    buffer = io.BytesIO()
    # Tight: whatever a figure draws past its own edge (a legend, a label) is kept, not cut off.
    figure.savefig(buffer, format="png", dpi=_DPI, facecolor="white", bbox_inches="tight", pad_inches=0.08)
    data = buffer.getvalue()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    scale = 96 / _DPI  # show at the figure's own size, not the PNG's pixel count
    return base64.b64encode(data).decode("ascii"), round(width * scale), round(height * scale)


def _figure(figure: Any, alt: str, caption: str, *, simulated: bool) -> str:
    """The figure as an inline PNG with its caption; ``simulated`` (required: every caller decides) stamps it."""
    if simulated:
        from ..plots import stamp_simulated

        stamp_simulated(figure)
    encoded, width, height = _png(figure)
    return (f'<figure><img src="data:image/png;base64,{encoded}" width="{width}" height="{height}" '
            f'alt="{_e(alt)}"><figcaption><b>How to read this.</b> {caption}</figcaption></figure>')


def _list(lines: Sequence[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in lines) + "</ul>" if lines else ""


def _notes(lines: Sequence[str]) -> str:
    return "".join(f'<p class="note">Note: {_e(line)}</p>' for line in lines)


def _collapsed(summary: str, body: str, *, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{_e(summary)}</summary>{body}</details>"
