"""Universe x system rates under a case bootstrap shared by every universe.

Cases are the sampling unit of an audit: the same cases are run in every
universe, so a resample draws case weights once (multinomial, as drawing cases
with replacement) and applies them to every universe x system cell. A cell's
resampled rate is sum_c w_c k_c / sum_c w_c n_c over its labels n_c and
compliant labels k_c per case (replicates of a case come along together).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from ._codes import sorted_codes

__all__ = ["DENSE_LIMIT", "CaseCounts", "case_counts", "counts_of_rates", "ratio"]

# Dense count matrices are much faster to multiply than sparse ones; above this
# many cells x cases (float32: 4 bytes each, two matrices) they stay sparse.
DENSE_LIMIT = 60_000_000

# Every batch of resamples reads the whole count matrix once (hundreds of MB at 100k universes),
# and a product a few resamples wide is bound by that read, not by arithmetic. So a batch holds
# this many cells x resamples, or a quarter of the count matrix's cells x cases when that is more:
# its temporaries (about 24 bytes a cell and resample) then stay near the matrices' own size (8 bytes
# a cell and case). Measured 2026-12-04 at 10k universes (50k cells, 120 cases) 4M beat 16M (0.5 s,
# 0.3 GB less); at 100k, 15M beat 4M by 10 s.
_BATCH_CELLS = 4_000_000
_MATRIX_SHARE = 4


class CaseCounts:
    """Per cell (rows) and case (columns): labels ``n`` and compliant labels ``k``."""

    def __init__(self, rows: np.ndarray, cases: np.ndarray, compliant: np.ndarray, n_rows: int, n_cases: int):
        from scipy.sparse import csr_matrix

        shape = (n_rows, n_cases)
        n: Any
        k: Any
        if n_rows * n_cases <= DENSE_LIMIT:
            # Counted straight into the dense matrices: a sparse matrix of every row first held
            # several copies of the row arrays (GBs at tens of millions of rows).
            # Counted at flat positions of the matrices' memory. Labels and booleans are whole numbers,
            # exact in float32 below 2^24, so bincount gives add.at's sums several times faster; a
            # score's contribution is added in float32 in row order, as add.at with a (row, case) pair.
            # One int64 array of positions made in place, and the non-compliant rows sent to one extra
            # bin rather than the compliant ones copied: each int64 temporary is 0.5 GB at 60M rows.
            flat = rows.astype(np.int64)
            flat *= n_cases
            flat += cases
            size = n_rows * n_cases
            n = np.bincount(flat, minlength=size).astype(np.float32)
            if compliant.dtype == bool:
                np.putmask(flat, ~compliant, size)
                k = np.bincount(flat, minlength=size + 1)[:size].astype(np.float32)
            else:
                k = np.zeros(size, dtype=np.float32)
                np.add.at(k, flat, compliant.astype(np.float32))
            del flat
            n, k = n.reshape(shape), k.reshape(shape)
        else:
            n = csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cases)), shape=shape)
            k = csr_matrix((compliant.astype(np.float32), (rows, cases)), shape=shape)
        self._hold(n, k)

    @classmethod
    def of_dense(cls, n: np.ndarray, k: np.ndarray) -> CaseCounts:
        """Counts of dense float32 cells x cases matrices of labels and compliant labels, counted elsewhere."""
        counts = cls.__new__(cls)
        counts._hold(n, k)
        return counts

    def _hold(self, n: Any, k: Any) -> None:
        self.n_cases = n.shape[1]
        self.named_cases = self.n_cases  # less a missing case id's code (set by ``case_counts``)
        self.universes: list[Any] = []  # what the rows are (set by ``case_counts``), so a caller can reuse them
        self.systems: list[Any] = []
        self._missing: tuple[np.float32, Any] | None = _mostly(n) if isinstance(n, np.ndarray) else None
        # With the usual count and its shortfall at hand the dense labels are not kept: ``Results``
        # keeps these counts for the ranking and the variance (240 MB less at 100k universes).
        self._n = n if self._missing is None else None
        self.k = k

    @property
    def n(self) -> Any:
        """Labels per cell and case (made again from the usual count and its shortfall when not kept)."""
        if self._n is not None:
            return self._n
        assert self._missing is not None
        usual, shortfall = self._missing
        return usual - shortfall.toarray()

    def weights(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Case weights of ``size`` resamples: cases x size."""
        draws = rng.multinomial(self.n_cases, np.full(self.n_cases, 1.0 / self.n_cases), size=size)
        return draws.T.astype(np.float32)

    def sums(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cells x resamples weighted sums of compliant labels and of labels (float32)."""
        if self._missing is None:
            return np.asarray(self.k @ weights), np.asarray(self._n @ weights)
        # Most cells have the same number of labels per case (one, without replicates): the
        # labels' sums are that number times the resample's weights, less the sparse shortfall.
        # Whole numbers below 2^24 are exact in float32, so the sums are the matrix product's.
        usual, shortfall = self._missing
        labels = np.asarray(shortfall @ weights)
        np.subtract(usual * weights.sum(0, dtype=np.float32), labels, out=labels)
        return np.asarray(self.k @ weights), labels

    def batch(self, resamples: int) -> int:
        """How many of ``resamples`` to draw and sum at once (see ``_BATCH_CELLS``)."""
        cells = max(self.k.shape[0], 1)
        budget = max(_BATCH_CELLS, cells * self.n_cases // _MATRIX_SHARE)
        return cast("int", max(1, min(resamples, budget // cells)))

    def fits(self, universes: list[Any], systems: list[Any]) -> bool:
        """Whether these are the counts of the cells of ``universes`` x ``systems``, in that order."""
        return self.universes == list(universes) and self.systems == list(systems)

    def rates(self, weights: np.ndarray) -> np.ndarray:
        """Cells x resamples rates (NaN where a cell drew none of its cases)."""
        return ratio(*self.sums(weights))


def _mostly(n: np.ndarray) -> tuple[np.float32, Any] | None:
    """(the usual number of labels of a cell and case, the sparse shortfall from it), or None
    when more than a quarter of the cells and cases differ from it (the dense product is then cheaper)."""
    from scipy.sparse import csr_matrix

    if not n.size:
        return None
    usual = np.float32(np.bincount(n[:, 0].astype(np.int64)).argmax()) if n.shape[1] else np.float32(1.0)
    shortfall = usual - n
    # Sums stay below 2^24 (exact in float32) when the largest count times all the weights does.
    if np.count_nonzero(shortfall) > n.size // 4 or max(float(n.max()), float(usual)) * n.shape[1] >= 2**24:
        return None
    return usual, csr_matrix(shortfall)


def ratio(compliant: np.ndarray, labels: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``compliant / labels`` in float64 (NaN where nothing was drawn), into ``out`` when given;
    float32 sums are cast on the fly, never copied whole."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return cast("np.ndarray", np.divide(compliant, labels, out=out, dtype=np.float64))


def case_counts(included: pd.DataFrame, universes: list[Any], systems: list[Any], *,
                reuse: CaseCounts | None = None) -> CaseCounts:
    """Counts for the cells (universe u, system s) in row u * len(systems) + s.

    ``included`` is ``included_verdicts`` output; rows of other universes or
    systems are left out. ``reuse``: counts already made of the same rows
    (ranking and variance share one), returned when they are of these cells.
    """
    if reuse is not None and reuse.fits(universes, systems):
        return reuse
    n_cells = len(universes) * len(systems)
    kind = np.int32 if n_cells < 2**31 else np.int64
    u = _positions(pd.Index(universes), included["universe_id"], kind)
    s = _positions(pd.Index(systems), included["system"], kind)
    # Codes in the sorted order of the case ids (the weights a resample draws go to the same cases
    # whatever the order of the rows), from a categorical's own codes rather than hashing every row.
    c, n_cases = sorted_codes(included["case_id"])
    keep = (u >= 0) & (s >= 0)
    cell = u * kind(len(systems)) + s
    del u, s
    labels = included["compliant"].to_numpy()
    # Scores count as their contribution in [0, 1] (a float column); labels as booleans.
    labels = labels.astype(bool) if labels.dtype != np.float64 else labels
    # Every row kept (the usual case): the arrays as they are, not copies (0.6 GB at 60M rows).
    counts = (CaseCounts(cell, c, labels, n_cells, n_cases) if keep.all()
              else CaseCounts(cell[keep], c[keep], labels[keep], n_cells, n_cases))
    counts.universes, counts.systems = list(universes), list(systems)
    # Cases as nunique counts them (a missing case id is a code above but no case): a note reads it.
    counts.named_cases = n_cases - int(bool(included["case_id"].isna().any()))
    return counts


def counts_of_rates(verdicts: pd.DataFrame, axes: list[str], rates: pd.DataFrame, *,
                    reuse: CaseCounts | None = None) -> CaseCounts:
    """The case counts of ``rates``' cells (``system_rates`` output: its universes x systems in order of
    appearance): ``reuse`` when it is of those cells, else counted from the verdicts, whose counted rows
    are copied only then (60M rows at 100k universes)."""
    from ._included import resampled_rows

    universes, systems = pd.unique(rates["universe_id"]).tolist(), pd.unique(rates["system"]).tolist()
    if reuse is not None and reuse.fits(universes, systems):
        return reuse
    return case_counts(resampled_rows(verdicts, axes), universes, systems)


def _positions(index: pd.Index, column: pd.Series, kind: type) -> np.ndarray:
    """``index.get_indexer(column)`` in ``kind``; a categorical column through its categories."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        where: np.ndarray = np.append(index.get_indexer(column.cat.categories), -1).astype(kind)  # code -1 (missing) -> -1
        return cast("np.ndarray", where[np.asarray(column.array.codes)])
    return cast("np.ndarray", index.get_indexer(column).astype(kind))
