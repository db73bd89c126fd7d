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

from multiverse.analysis.agreement_units import Rows

__all__ = ["context_columns", "context_confounds"]


def context_columns(verdicts: pd.DataFrame, factors: Sequence[str], axes: Sequence[str]) -> list[str]:
    """The design columns to check: the factors the table has that are not axes (each once)."""
    return [f for f in dict.fromkeys(factors) if f in verdicts.columns and f not in set(axes)]


def context_confounds(rows: pd.DataFrame | Rows, columns: Sequence[str], units: np.ndarray,
                      keep: np.ndarray | None, axis: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Columns whose value differs between the options of ``axis`` inside paired units.

    ``units`` are the rows' unit ids (as ``agreement`` builds them: a unit
    has at most one row per option) and ``keep`` the units kept after merging
    repeated judgments (None: all). Returns
    ``[{"column", "share", "n_units"}]`` (``n_units`` the paired units whose
    options' values differ, ``share`` that over all paired units) and a note
    per confounded column. A missing value counts as a value of its own.
    """
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    if not columns or not len(units):
        return out, notes
    # A unit has one row per option it has (agreement tells repeated rows apart), so a unit is paired
    # where it has two rows or more.
    paired = np.bincount(units) >= 2
    if keep is not None:
        paired &= keep
    for column in columns:
        codes = rows.codes(column) if isinstance(rows, Rows) else pd.factorize(rows[column], use_na_sentinel=False)[0]
        # Each row against one row of its unit (whichever was written last): no units x options matrix.
        first = np.empty(len(paired), dtype=codes.dtype)
        first[units] = codes
        differs = np.zeros(len(paired), dtype=bool)
        differs[units[first[units] != codes]] = True
        differ = int((paired & differs).sum())
        if not differ:
            continue
        share = differ / int(paired.sum())
        out.append({"column": column, "share": share, "n_units": differ})
        notes.append(
            f"confound: in {differ:,} of {int(paired.sum()):,} paired units ({share:.0%}) the options of "
            f"{axis!r} have different values of the design column {column!r} (they did not judge the same "
            f"task, e.g. against a different reference): kappa, AC1 and the bias then mix the difference "
            f"between the options with the difference between the {column!r} values, and cannot be read "
            f"as agreement between the options alone")
    return out, notes
