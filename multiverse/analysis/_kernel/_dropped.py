"""Which universes an analysis cannot use, and why: said in its notes, never silently.

A universe (or one system in it) without a single ``ok`` verdict has no rate:
every curve, agreement, ranking and variance leaves it out. The note names
the universes and the failure reasons their verdicts carry, so a typo in a
judge's name reads as "dropped 12 universes ... (judge_failed: not_found 288)"
instead of a shorter curve.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import counted_rows, reason_class

from . import _codes as blocks

__all__ = ["dropped_notes"]

_SHOWN = 10  # ids listed in a note; the count is always whole


def _ids(values: list[Any]) -> str:
    shown = ", ".join(map(str, values[:_SHOWN]))
    return shown + (f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else "")


def _why(rows: pd.DataFrame) -> str:
    reasons = rows.get("reason", pd.Series("", index=rows.index)).fillna("").astype(str)
    counts = Counter(f"{status}: {reason_class(reason)}" if reason else str(status)
                     for status, reason in zip(rows["status"].astype(str), reasons))
    return ", ".join(f"{k} {v}" for k, v in counts.most_common(3)) + (", ..." if len(counts) > 3 else "")


def _codes(column: pd.Series) -> tuple[np.ndarray, int]:
    if isinstance(column.dtype, pd.CategoricalDtype):
        return np.asarray(column.array.codes), len(column.cat.categories)
    codes, values = pd.factorize(column)
    return codes, len(values)


def _all_have_ok(verdicts: pd.DataFrame, ok: np.ndarray) -> bool:
    """Whether every universe x system pair (every universe, without systems) has an ok row.

    Counted on the columns' codes: grouping a table of tens of millions of
    rows by two columns made int64 codes of each and a str copy of the status.
    """
    universe, n_universes = _codes(verdicts["universe_id"])
    if len(universe) and universe.min() < 0:
        return False  # a missing universe id: the notes say what pandas makes of it
    system: np.ndarray = np.zeros(len(universe), np.int8)
    n_systems = 1
    if "system" in verdicts.columns:
        system, n_systems = _codes(verdicts["system"])
    if len(system) and system.min() < 0:
        return False
    present = np.zeros(n_universes * n_systems, dtype=bool)
    has_ok = np.zeros(n_universes * n_systems, dtype=bool)
    # A block of rows at a time: small temporaries are reused by the allocator, where row-length
    # ones are fresh memory each time (seconds of page faults at 60M rows).
    for start in range(0, len(universe), blocks.PIECE_ROWS):
        block = slice(start, start + blocks.PIECE_ROWS)
        cell = universe[block].astype(np.int64) * n_systems + system[block]
        present[cell] = True
        has_ok[cell[ok[block]]] = True
    return bool((has_ok == present).all())


def dropped_notes(verdicts: pd.DataFrame) -> list[str]:
    """Notes on the universes, and universe x system pairs, that have no ok verdict (empty when none)."""
    if "status" not in verdicts.columns or "universe_id" not in verdicts.columns or verdicts.empty:
        return []
    ok = pd.Series(counted_rows(verdicts), index=verdicts.index)
    if _all_have_ok(verdicts, ok.to_numpy()):
        return []
    # Only the columns a note reads: a big table is not copied whole below.
    verdicts = verdicts[[c for c in ("universe_id", "system", "status", "reason") if c in verdicts.columns]]
    notes = []
    by_universe = ok.groupby(verdicts["universe_id"], sort=False).any()
    gone = [u for u, has in by_universe.items() if not has]
    if gone:
        rows = verdicts[verdicts["universe_id"].isin(gone)]
        notes.append(f"dropped {len(gone)} universe{'s' if len(gone) != 1 else ''} with no ok verdicts: "
                     f"{_ids(gone)} ({_why(rows)})")
    if "system" in verdicts.columns:
        kept = verdicts[~verdicts["universe_id"].isin(gone)]
        pairs = pd.Series(counted_rows(kept), index=kept.index).groupby([kept["system"], kept["universe_id"]], sort=False).any()
        for system, group in pairs[~pairs].groupby(level=0, sort=False):
            universes = list(group.index.get_level_values(1))
            rows = kept[(kept["system"] == system) & kept["universe_id"].isin(universes)]
            notes.append(f"no rate for system {system} in {len(universes)} universe{'s' if len(universes) != 1 else ''} "
                         f"with no ok verdicts for it: {_ids(universes)} ({_why(rows)})")
    return notes
