"""Units of ``agreement``: one id per transcript (or system, case and replicate) in one context.

The helpers ``agreement`` pairs labels with: integer codes of columns, dense
ids of their combinations, unit ids, the units x options matrices, and the
merging of units that repeat the same judgments. Everything works on integer
codes, never on one Python object per row: tables reach tens of millions of rows.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

__all__ = ["_codes", "_dense", "_factorize", "_one_per_judgment", "_paired", "_positions", "_radix",
           "_spread", "_unit_ids"]


def _radix(codes: Iterable[np.ndarray]) -> np.ndarray:
    """One int64 per distinct tuple of non-negative codes (mixed radix; sparse, not dense).

    ``codes`` is consumed one array at a time, so a generator keeps only two
    row-length arrays alive however many columns are combined.
    """
    combined: np.ndarray | None = None
    for more in codes:
        more = np.asarray(more, dtype=np.int64)
        if combined is None:
            combined = more.copy()
            continue
        base = int(more.max(initial=0)) + 1
        if int(combined.max(initial=0)) >= np.iinfo(np.int64).max // base - base:
            combined = pd.factorize(combined)[0].astype(np.int64)  # re-densify before overflow
        combined *= base
        combined += more
    if combined is None:
        raise ValueError("_radix needs at least one code array")
    return combined


def _dense(codes: Iterable[np.ndarray]) -> np.ndarray:
    """Dense codes 0..n-1, one per distinct tuple of non-negative codes."""
    return pd.factorize(_radix(codes))[0]


def _codes(column: pd.Series) -> np.ndarray:
    """Non-negative integer codes of a column; categorical columns need no hashing."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return np.add(column.cat.codes.to_numpy(), 1, dtype=np.int64)  # 0 = missing; one row-length array
    return pd.factorize(column, use_na_sentinel=False)[0]


def _factorize(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """pd.factorize: values in order of first appearance, as plain values whatever the column's dtype.

    A categorical column is factorized through its codes (no hashing of its text), and the order
    stays that of appearance, so a table gives the same result with text or categorical columns.
    """
    codes, uniques = pd.factorize(column)
    if isinstance(uniques, pd.CategoricalIndex):
        uniques = pd.Index(uniques.categories.take(uniques.codes))
    return codes, pd.Index(uniques)


def _positions(index: pd.Index, values: pd.Series) -> np.ndarray:
    """``index.get_indexer(values)`` as int64, without a Python string per row.

    Judgment keys are mostly distinct, so ``load_run`` keeps them as Arrow-backed text: Arrow
    looks them up in its own hash table (pandas' would make millions of Python strings).
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        where = np.append(index.get_indexer(values.cat.categories), -1)  # code -1 (missing) -> -1
        return where[values.cat.codes.to_numpy()].astype(np.int64)
    if getattr(values.dtype, "storage", None) == "pyarrow" and getattr(index.dtype, "storage", None) == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc

        found = pc.index_in(pa.chunked_array(pa.array(values.array)), value_set=pa.array(index.array))
        return found.fill_null(-1).to_numpy().astype(np.int64)
    return index.get_indexer(values).astype(np.int64)


def _occurrence(key: np.ndarray) -> np.ndarray:
    """0, 1, 2 ... for repeated values of ``key``, in row order."""
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(len(key)), 0))
    occurrence = np.empty(len(key), dtype=np.int64)
    occurrence[order] = np.arange(len(key)) - first
    return occurrence


def _unit_ids(rows: pd.DataFrame, others: list[str], option: np.ndarray, by_transcript: bool) -> np.ndarray:
    """Dense unit id per row: one unit per context (other axes' options) x transcript.

    Rows that repeat a unit and option are told apart by their order of appearance.
    """
    parts = ["transcript_key"] if by_transcript else [
        c for c in ("system", "case_id", "replicate") if c in rows.columns]
    unit = _dense(_codes(rows[c]) for c in (*others, *parts))
    k = int(option.max(initial=0)) + 1
    if np.bincount(unit * k + option).max(initial=0) > 1:
        unit = _dense((unit, _occurrence(unit * k + option)))
    return unit


def _spread(unit: np.ndarray, option: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Units x options matrix of ``values`` (-1 where a unit has no row for an option)."""
    matrix = np.full((int(unit.max(initial=-1)) + 1, k), -1, dtype=values.dtype)
    matrix[unit, option] = values
    return matrix


def _one_per_judgment(labels: np.ndarray, units: np.ndarray, option: np.ndarray,
                      judgment_key: pd.Series) -> tuple[np.ndarray, int, int]:
    """Which units (rows of ``labels``) to keep so that each set of judgments counts once.

    Contexts that differ only in an axis that does not change judgments (the
    scoring rule, say) show the same judgments again: each is one comparison,
    however many universes score it. A unit whose options' judgment keys
    another unit already has is dropped (the first in table order is kept).
    Returns the mask, how many units were dropped and in how many of those
    the labels differed from the kept unit's (the scoring changed them).
    """
    key = _spread(units, option, pd.factorize(judgment_key)[0].astype(np.int64), labels.shape[1])
    judged = (key >= 0).sum(1) >= 2
    group = _dense(column + 1 for column in key.T)
    _, first = np.unique(group, return_index=True)
    representative = first[np.searchsorted(np.unique(group), group)]
    keep = ~judged | (representative == np.arange(len(group)))
    differ = int((labels[~keep] != labels[representative[~keep]]).any(1).sum())
    return keep, int((~keep).sum()), differ


def _paired(matrix: np.ndarray) -> bool:
    return bool(((matrix >= 0).sum(1) >= 2).any())
