"""The rates and case counts of the ranking and the variance, read off the curve's case matrix.

``system_rates`` and ``case_counts`` count every counted verdict row by
universe, system and case; the curve's :class:`CaseMatrix` of the same
verdicts already holds those counts. What the matrix lacks is order: rates
list their cells, and case counts their cases, in order of first appearance
in the rows (a resample's case weights go to cases in that order, so the
order is part of the resampled numbers). Only that order is read from the
rows here, and only where a value changes from the row before: at 100k
universes (60M rows) about 2 s for both, where counting the rows again took
15 s. Both return None where the table is not one they can read this way
(text columns that are not categorical, scored rows, a dense matrix too
large); the caller then counts the rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from .._kernel import CONTRIBUTION, CaseCounts, blocks, included_rows, sort_order
from .._kernel import DENSE_LIMIT as _DENSE_LIMIT
from ._matrix import CaseMatrix

__all__ = ["counts_of_matrix", "rates_of_matrix"]


def rates_of_matrix(matrix: CaseMatrix, verdicts: pd.DataFrame) -> pd.DataFrame | None:
    """``rates.system_rates(verdicts, axes=matrix.axes)``, the same frame, from ``matrix`` (the
    ``case_matrix`` of these verdicts): each cell's counts summed over its cases."""
    if not _readable(matrix, verdicts, ("universe_id", "system")):
        return None
    keep = included_rows(verdicts)
    universe, system = _codes(verdicts["universe_id"]), _codes(verdicts["system"])
    n_systems = len(verdicts["system"].cat.categories)
    cells = (universe[piece][keep[piece]].astype(np.int64) * n_systems + system[piece][keep[piece]]
             for piece in _pieces(len(keep)))
    order = blocks.appearance_order(cells)
    u_code, s_code = order // n_systems, order % n_systems
    u, s = _rows_of(matrix, verdicts, u_code, s_code)
    if u is None or s is None:
        return None
    n, k = matrix.included.sum(axis=2)[s, u], matrix.compliant.sum(axis=2)[s, u]
    rates = pd.DataFrame({"universe_id": pd.Categorical.from_codes(u_code, dtype=verdicts["universe_id"].dtype)})
    for axis in matrix.axes:
        rates[axis] = matrix.universes[axis].to_numpy()[u]
    rates["system"] = pd.Categorical.from_codes(s_code, dtype=verdicts["system"].dtype)
    rates["n"] = n.astype(np.int64)
    rates["n_compliant"] = k.astype(int)
    rates["rate"] = rates["n_compliant"] / rates["n"]
    return rates


def counts_of_matrix(matrix: CaseMatrix, verdicts: pd.DataFrame, rates: pd.DataFrame) -> CaseCounts | None:
    """``case_resampling.counts_of_rates(verdicts, axes, rates)``, the same counts, from ``matrix``
    (the ``case_matrix`` of these verdicts; ``rates`` is their ``system_rates``)."""
    if not _readable(matrix, verdicts, ("universe_id", "system", "case_id")):
        return None
    universes, systems = pd.unique(rates["universe_id"]).tolist(), pd.unique(rates["system"]).tolist()
    n_cases = len(matrix.cases)
    if len(universes) * len(systems) * n_cases > _DENSE_LIMIT:
        return None
    u = pd.Index(matrix.universes["universe_id"]).get_indexer(universes)
    s = pd.Index(matrix.systems).get_indexer(systems)
    keep = included_rows(verdicts)
    case = _codes(verdicts["case_id"])
    order = blocks.appearance_order((case[piece][keep[piece]] for piece in _pieces(len(keep))), expected=n_cases)
    # The counted cases in sorted order, as counts_of_rates numbers them (sorted_codes): a resample's weight
    # then goes to the same case through either door, whatever the order of the rows.
    names = verdicts["case_id"].cat.categories[order]
    c = pd.Index(matrix.cases).get_indexer(names[sort_order(names)])
    if (u < 0).any() or (s < 0).any() or (c < 0).any() or len(c) != n_cases:
        return None
    n = np.empty((len(universes), len(systems), n_cases), dtype=np.float32)
    k = np.empty_like(n)
    for j, row in enumerate(s.tolist()):  # a system at a time: no float64 copy of the whole matrix
        n[:, j] = matrix.included[row].take(u, axis=0).take(c, axis=1)
        k[:, j] = matrix.compliant[row].take(u, axis=0).take(c, axis=1)
    counts = CaseCounts.of_dense(n.reshape(-1, n_cases), k.reshape(-1, n_cases))
    counts.universes, counts.systems = universes, systems
    return counts


def _readable(matrix: CaseMatrix, verdicts: pd.DataFrame, columns: tuple[str, ...]) -> bool:
    """Whether the matrix's cells are the table's boolean labels, keyed by categorical columns."""
    return (matrix.means is None and CONTRIBUTION not in verdicts.columns
            and pd.api.types.is_bool_dtype(verdicts["compliant"].dtype)
            and all(c in verdicts.columns and isinstance(verdicts[c].dtype, pd.CategoricalDtype) for c in columns))


def _codes(column: pd.Series) -> np.ndarray:
    return np.asarray(column.array.codes)  # a view: .cat.codes copies


def _pieces(n_rows: int) -> Iterator[slice]:
    for start in range(0, n_rows, blocks.PIECE_ROWS):
        yield slice(start, start + blocks.PIECE_ROWS)


def _rows_of(matrix: CaseMatrix, verdicts: pd.DataFrame, u_code: np.ndarray,
             s_code: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The matrix's universe and system positions of categorical codes (None where one is not there)."""
    u = pd.Index(matrix.universes["universe_id"]).get_indexer(verdicts["universe_id"].cat.categories)[u_code]
    s = pd.Index(matrix.systems).get_indexer(verdicts["system"].cat.categories)[s_code]
    return (u if (u >= 0).all() else None), (s if (s >= 0).all() else None)
