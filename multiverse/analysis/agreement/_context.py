"""Whether the options compared by ``agreement`` judged the same thing.

A unit of ``agreement`` is a transcript (or system, case and replicate) in one
context of the other axes. Design columns that are not axes (the results'
design factors, e.g. the reference output a pairwise judge compared against)
are not part of the unit, so two judges whose rows for one unit carry
different values of such a column were not shown the same task: their
disagreement mixes the judge's difference with that column's. Such a column is
a confound of the comparison, as an aliased axis is of the variance
decomposition (``variance.aliasing``). This module finds it in the data: a
column whose value differs between the options inside paired units. A column
constant per case (a behaviour or setting of the case) never differs inside a
unit and is not flagged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._kernel import blocks
from ._units import Rows

__all__ = ["context_columns", "context_confounds"]


def context_columns(verdicts: pd.DataFrame, factors: Sequence[str], axes: Sequence[str]) -> list[str]:
    """The design columns to check: the factors the table has that are not axes (each once)."""
    return [f for f in dict.fromkeys(factors) if f in verdicts.columns and f not in set(axes)]


def context_confounds(rows: pd.DataFrame | Rows, columns: Sequence[str], units: np.ndarray,
                      paired: np.ndarray, axis: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Columns whose value differs between the options of ``axis`` inside paired units.

    ``units`` are the rows' unit ids (as ``agreement`` builds them: a unit
    has at most one row per option) and ``paired`` says, per unit, whether
    it counts: two options or more, and kept after merging repeated
    judgments. Returns ``[{"column", "share", "n_units"}]`` (``n_units`` the
    paired units whose options' values differ, ``share`` that over all
    paired units) and a note per confounded column. A missing value counts
    as a value of its own.
    """
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    if not columns or not len(units):
        return out, notes
    n_paired = int(paired.sum())
    for column in columns:
        codes = rows.codes(column) if isinstance(rows, Rows) else pd.factorize(rows[column], use_na_sentinel=False)[0]
        differs = _differs(units, codes, len(paired))
        differ = int((paired & differs).sum())
        if not differ:
            continue
        share = differ / n_paired
        out.append({"column": column, "share": share, "n_units": differ})
        notes.append(
            f"confound: in {differ:,} of {n_paired:,} paired units ({share:.0%}) the options of "
            f"{axis!r} have different values of the design column {column!r} (they did not judge the same "
            f"task, e.g. against a different reference): kappa, AC1 and the bias then mix the difference "
            f"between the options with the difference between the {column!r} values, and cannot be read "
            f"as agreement between the options alone")
    return out, notes


def _differs(units: np.ndarray, codes: np.ndarray, n_units: int) -> np.ndarray:
    """Per unit, whether its rows carry more than one value of ``codes``: each row against one row of its
    unit (the last written), with no units x options matrix. A piece of rows at a time: numpy widens an
    int32 index array to int64 for the whole of it, 460 MB at 57M rows, and this ran at the agreement's
    memory peak."""
    first = np.empty(n_units, dtype=codes.dtype)
    for start in range(0, len(units), blocks.PIECE_ROWS):
        first[units[start:start + blocks.PIECE_ROWS]] = codes[start:start + blocks.PIECE_ROWS]
    differs = np.zeros(n_units, dtype=bool)
    for start in range(0, len(units), blocks.PIECE_ROWS):
        piece = units[start:start + blocks.PIECE_ROWS]
        differs[piece[first[piece] != codes[start:start + blocks.PIECE_ROWS]]] = True
    return differs
