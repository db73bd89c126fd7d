"""CSV cells a spreadsheet cannot run (CSV injection, OWASP).

A spreadsheet treats a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return as a formula. Every CSV multiverse writes (the run and
import tables, the labelling sheet, ``expand --format csv``) prefixes such a
text cell, and such a column name (a header is a cell too), with a
single quote; a cell that already starts with a quote gets one more, so that
reading takes exactly one off and the text round-trips. Numbers are never
prefixed: ``-0.5`` is a number, not a formula.

Rows end in CRLF (:data:`LINE_END`, as RFC 4180 has it). Python's CSV writer
quotes a cell that holds a character of the line ending, and with ``\n``
alone a carriage return inside a cell was written bare: a spreadsheet
starts a new row there, and the rest of the cell (``x\r=HYPERLINK(...)``)
becomes the first cell of that row, unguarded.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FORMULA_START", "LINE_END", "QUOTE", "restore_cell", "safe_cell"]

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"
LINE_END = "\r\n"


def safe_cell(value: Any) -> Any:
    """``value`` made inert if it is text a spreadsheet would run; anything else unchanged."""
    if isinstance(value, str) and value[:1] in (*FORMULA_START, QUOTE):
        return QUOTE + value
    return value


def restore_cell(value: Any) -> Any:
    """The text ``safe_cell`` was given."""
    if isinstance(value, str) and value[:1] == QUOTE:
        return value[1:]
    return value
