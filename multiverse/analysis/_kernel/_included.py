"""The verdict rows that count towards a rate: which they are, and those rows with what a rate reads.

``included_verdicts`` is the one place the rule is applied (status ``ok``, a
label, or a scored row's contribution); ``rates``, ranking, variance and
agreement all start from it, so a row counts alike in all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

from multiverse.core import counted_rows
from multiverse.errors import InputError
from multiverse.tables import universe_ids

from ._estimates import CONTRIBUTION

__all__ = ["included_rows", "included_verdicts", "require_verdict_columns", "resampled_rows"]

_KEYS = ("replicate", "transcript_key", "judgment_key")



def included_verdicts(verdicts: pd.DataFrame, *, axes: Sequence[str],
                      keys: Sequence[str] = _KEYS) -> pd.DataFrame:
    """The verdict rows that count towards rates, with a ``universe_id`` and a bool ``compliant``.

    Keeps rows whose ``status`` is ``ok`` (all rows when there is no status
    column) and whose ``compliant`` is not missing. When ``universe_id`` is
    absent it is derived from the axis values as ``tables.universe_ids`` does,
    so ids agree with tables loaded by ``tables.load_run``.
    Returns universe_id, the axis columns, system, case_id, compliant and
    whichever of ``keys`` (replicate, transcript_key, judgment_key) the table
    has: an analysis that needs none passes ``keys=()``, so a big table's key
    columns are not copied.
    """
    axes = list(axes)
    require_verdict_columns(verdicts, axes)
    keep = ["system", "case_id", "compliant", *axes, *(k for k in keys if k in verdicts.columns)]
    if "universe_id" in verdicts.columns:
        keep.insert(0, "universe_id")
    rows = included_rows(verdicts)
    # Scores: what each row contributes (analysis.estimates) is what counts, as a float in [0, 1].
    scored = CONTRIBUTION in verdicts.columns
    counted = verdicts[CONTRIBUTION if scored else "compliant"]
    # Column by column: a row mask on the frame would also take (and materialise) its index.
    out = pd.DataFrame({c: verdicts[c].array[rows] for c in dict.fromkeys(keep)}, copy=False)
    out["compliant"] = counted[rows].to_numpy(dtype=float) if scored else _as_bool(out["compliant"])
    if scored:
        out[CONTRIBUTION] = out["compliant"]  # so the rows read again (system_rates of them) count alike
    if "universe_id" not in out.columns:
        out.insert(0, "universe_id", _derived_universe_ids(out, axes))
    return out.reset_index(drop=True)


def included_rows(verdicts: pd.DataFrame) -> np.ndarray:
    """Which rows ``included_verdicts`` keeps, as a bool array: counted, with a label (or a contribution)."""
    counted = verdicts[CONTRIBUTION if CONTRIBUTION in verdicts.columns else "compliant"]
    return cast("np.ndarray", counted_rows(verdicts) & counted.notna().to_numpy())


def require_verdict_columns(verdicts: pd.DataFrame, axes: Sequence[str]) -> None:
    """Refuse a verdicts table without system, case_id, compliant or one of ``axes``."""
    missing = [c for c in ("system", "case_id", "compliant", *axes) if c not in verdicts.columns]
    if missing:
        raise InputError(f"verdicts: column {missing[0]!r}: expected a column of that name")


def _as_bool(compliant: pd.Series) -> np.ndarray:
    """A label column with no missing value left, as bools (bad input: anything but true/false values)."""
    if pd.api.types.is_bool_dtype(compliant.dtype):
        return cast("np.ndarray", compliant.to_numpy(dtype=bool))
    if pd.api.types.is_numeric_dtype(compliant.dtype):
        values = compliant.to_numpy(dtype=float)
        if np.isin(values, (0.0, 1.0)).all():
            return cast("np.ndarray", values.astype(bool))
    else:
        text = compliant.astype(str).str.strip().str.lower()
        mapped = text.map({"true": True, "false": False, "1": True, "0": False})
        if mapped.notna().all():
            return cast("np.ndarray", mapped.to_numpy(dtype=bool))
    raise InputError("verdicts: column 'compliant': expected true/false values")


def _derived_universe_ids(rows: pd.DataFrame, axes: list[str]) -> np.ndarray:
    return cast("np.ndarray", universe_ids(rows, axes).to_numpy(dtype=object))  # the ids tables.universe_ids gives


def resampled_rows(verdicts: pd.DataFrame, axes: Sequence[str], *, universes: Sequence[Any] | None = None) -> pd.DataFrame:
    """The counted rows with only what a case resample reads: universe_id, system, case_id and compliant.

    The axis columns are read only to derive universe ids a table lacks; a big table's other
    columns are never copied, nor, given ``universes``, its other universes' rows.
    """
    by_id = "universe_id" in verdicts.columns
    if universes is not None:
        ids = verdicts["universe_id"] if by_id else universe_ids(verdicts, list(axes))
        verdicts = verdicts[ids.isin(list(universes)).to_numpy()]
    needed = [c for c in ("universe_id", *([] if by_id else axes), "status", "system", "case_id", "compliant",
                          CONTRIBUTION) if c in verdicts.columns]
    return included_verdicts(verdicts[list(dict.fromkeys(needed))], axes=[] if by_id else axes, keys=())
