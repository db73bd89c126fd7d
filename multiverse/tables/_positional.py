"""A table is read by position, whatever index its writer stored with it.

pandas writes a frame's index into a parquet file (``to_parquet`` keeps any
index but a ``RangeIndex`` from 0 as extra columns, and a ``RangeIndex`` as
metadata) and into a CSV file (``to_csv`` writes it as the first columns,
under an empty header when unnamed). Read back by pandas, a column read on
its own comes with that index, and a frame built of such columns aligns them
on it: rows move between columns, and an index that is not a permutation of
the rows adds rows of its own. So the tables' reader takes every column in
the order its rows are stored and never aligns anything:

- an unnamed index (any ``RangeIndex``, integers in any order, text, every
  level of a ``MultiIndex``) is dropped: it holds nothing but row numbers;
- a named index level (``set_index("universe_id")``) is a column again: its
  values are data the writer moved there;
- a named index level that is also the name of a column, or a column name
  stored twice, makes the table ambiguous (which of the two is the column?):
  it is refused, in one line naming the column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

__all__ = ["csv_header", "index_fields", "positional"]

#: The name pandas gives the columns of an unnamed index in a parquet file.
_UNNAMED_LEVEL = re.compile(r"__index_level_\d+__")


def index_fields(schema: Any) -> tuple[set[str], dict[str, str]]:
    """The stored index of a parquet ``schema``: (fields to drop, field -> column name to keep it as).

    Raises ``ValueError`` (one line) when the index makes the table ambiguous.
    The pandas metadata is read as untrusted: anything but the shape pandas
    writes is taken as no index at all, so every field is then a column.
    """
    names = list(schema.names)
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"column {duplicated[0]!r} is stored twice; expected each column once")
    try:
        metadata = schema.pandas_metadata or {}
    except (ValueError, TypeError, UnicodeDecodeError):
        return set(), {}
    stored = metadata.get("index_columns") if isinstance(metadata, dict) else None
    described = metadata.get("columns") if isinstance(metadata, dict) else None
    if not isinstance(stored, list):
        return set(), {}
    level_names = {c.get("field_name"): c.get("name") for c in (described if isinstance(described, list) else [])
                   if isinstance(c, dict)}
    dropped: set[str] = set()
    kept: dict[str, str] = {}
    for field in stored:
        if not isinstance(field, str) or field not in names:
            continue  # a RangeIndex lives in the metadata alone: nothing stored, nothing to drop
        name = level_names.get(field, field)
        if name is None or not isinstance(name, str) or _UNNAMED_LEVEL.fullmatch(name):
            dropped.add(field)
        elif name != field and name in names:
            raise ValueError(f"column {name!r} is also the name of the index it was saved with; expected a table "
                             "saved without an index (index=False), or the index under a name of its own")
        else:
            kept[field] = name
    return dropped, kept


def positional(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (read by ``pd.read_parquet``) with its index undone: named levels as columns, rows 0..n-1.

    The columns of one ``read_parquet`` call share their index, so nothing is
    misaligned yet; this only takes the index out of the way, so that every
    later step (and every column read on its own) counts rows by position.
    """
    if isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1 \
            and frame.index.name is None:
        return frame
    named = [n for n in frame.index.names if n is not None and not _UNNAMED_LEVEL.fullmatch(str(n))]
    clash = [n for n in named if n in frame.columns]
    if clash:
        raise ValueError(f"column {clash[0]!r} is also the name of the index it was saved with; expected a table "
                         "saved without an index (index=False), or the index under a name of its own")
    unnamed = [i for i, n in enumerate(frame.index.names) if n not in named]
    if len(unnamed) == frame.index.nlevels:
        return frame.reset_index(drop=True)
    if unnamed:
        frame = frame.reset_index(level=unnamed, drop=True)
    return frame.reset_index()


def csv_header(first_row: Sequence[Any]) -> list[int]:
    """The positions of a CSV header's columns that hold data, or ``ValueError`` (one line).

    An empty header is an index ``to_csv`` wrote (its row numbers): left out.
    A header named twice is refused: pandas would read the second as
    ``name.1``, and either could be the column the table means.
    """
    names = ["" if v is None or (isinstance(v, float) and v != v) else str(v) for v in first_row]
    seen: set[str] = set()
    for name in names:
        if name and name in seen:
            raise ValueError(f"column {name!r} is named twice in the header; expected each column once")
        seen.add(name)
    return [i for i, name in enumerate(names) if name]
