"""A JSON Lines table (``.jsonl``, ``.ndjson``): one JSON object a line, read as the rows of a table.

What pandas' ``to_json(orient="records", lines=True)``, lm-eval's and most harnesses'
logs write. Read within the import's budget like a CSV (the file's bytes first, then its
rows a piece at a time), and by position: a row is a line, its columns are the keys in
the order they first appear, and a key a line lacks is a missing value there (as an
empty CSV cell). JSON's own types are kept (true stays a boolean, 7 a number, "007"
text), so a label or replicate reads as it would from a parquet table. A nested value
(an object or a list) is kept as its JSON text: a table's cells are scalars.

Refused in one line naming the file and line: a line that is not JSON, not an object,
or names a key twice (which of the two would be the column?), and text that is not
UTF-8. Blank lines are skipped, as JSON Lines readers do.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd

from multiverse.core import ImportBudget
from multiverse.errors import InputError

__all__ = ["JSONL_SUFFIXES", "read_jsonl_table"]

JSONL_SUFFIXES = (".jsonl", ".ndjson")
#: Rows parsed before they are counted against the budget: a file past ``max_rows`` stops early.
_PIECE = 100_000


def read_jsonl_table(path: Path, handle: BinaryIO, size: int, budget: ImportBudget) -> pd.DataFrame:
    """The table in ``handle`` (``size`` bytes, already checked a regular file); see the module docstring."""
    budget.take_bytes(size, str(path))
    rows: list[dict[str, Any]] = []
    columns: dict[str, None] = {}
    counted = 0
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        row = _row(path, number, line)
        columns.update(dict.fromkeys(row))
        rows.append(row)
        if len(rows) - counted >= _PIECE:
            budget.take_rows(len(rows) - counted, str(path))
            counted = len(rows)
    budget.take_rows(len(rows) - counted, str(path))
    # Object columns: each cell keeps its JSON type, and nothing is inferred across rows (an item 7 stays 7,
    # never 7.0 because another row lacks it).
    frame = pd.DataFrame({name: pd.Series([row.get(name) for row in rows], dtype=object) for name in columns},
                         index=pd.RangeIndex(len(rows)), columns=list(columns))
    return frame


def _row(path: Path, number: int, line: bytes) -> dict[str, Any]:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: line {number}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected "
                         "one JSON object a line") from None
    try:
        value = json.loads(text, object_pairs_hook=_object)
    except _TwiceNamed as exc:
        raise InputError(f"{path}: line {number}: key {exc.args[0]!r} is named twice; expected each column once "
                         "a line") from None
    except (ValueError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:120]
        raise InputError(f"{path}: line {number}: cannot read as JSON ({detail}); expected one JSON object a line"
                         ) from None
    if not isinstance(value, dict):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise InputError(f"{path}: line {number}: {shown}; expected a JSON object (one row: column to value)")
    return {key: _cell(cell) for key, cell in value.items()}


class _TwiceNamed(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _TwiceNamed(key)
        seen[key] = value
    return seen


def _cell(value: Any) -> Any:
    """A scalar as it is; NaN (Python's JSON extension) is a missing value; a nested value its JSON text."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, allow_nan=True)
    return value
