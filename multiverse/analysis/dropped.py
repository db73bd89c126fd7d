"""Which universes an analysis cannot use, and why: said in its notes, never silently.

A universe (or one system in it) without a single ``ok`` verdict has no rate:
every curve, agreement, ranking and variance leaves it out. The note names
the universes and the failure reasons their verdicts carry, so a typo in a
judge's name reads as "dropped 12 universes ... (judge_failed: not_found 288)"
instead of a shorter curve.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from multiverse.outcomes import reason_class

__all__ = ["dropped_notes"]

_SHOWN = 10  # ids listed in a note; the count is always whole


def _ids(values: list) -> str:
    shown = ", ".join(map(str, values[:_SHOWN]))
    return shown + (f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else "")


def _why(rows: pd.DataFrame) -> str:
    reasons = rows.get("reason", pd.Series("", index=rows.index)).fillna("").astype(str)
    counts = Counter(f"{status}: {reason_class(reason)}" if reason else str(status)
                     for status, reason in zip(rows["status"].astype(str), reasons))
    return ", ".join(f"{k} {v}" for k, v in counts.most_common(3)) + (", ..." if len(counts) > 3 else "")


def dropped_notes(verdicts: pd.DataFrame) -> list[str]:
    """Notes on the universes, and universe x system pairs, that have no ok verdict (empty when none)."""
    if "status" not in verdicts.columns or "universe_id" not in verdicts.columns or verdicts.empty:
        return []
    ok = verdicts["status"].astype(str) == "ok"
    notes = []
    by_universe = ok.groupby(verdicts["universe_id"], sort=False).any()
    gone = [u for u, has in by_universe.items() if not has]
    if gone:
        rows = verdicts[verdicts["universe_id"].isin(gone)]
        notes.append(f"dropped {len(gone)} universe{'s' if len(gone) != 1 else ''} with no ok verdicts: "
                     f"{_ids(gone)} ({_why(rows)})")
    if "system" in verdicts.columns:
        kept = verdicts[~verdicts["universe_id"].isin(gone)]
        pairs = (kept["status"].astype(str) == "ok").groupby([kept["system"], kept["universe_id"]], sort=False).any()
        for system, group in pairs[~pairs].groupby(level=0, sort=False):
            universes = list(group.index.get_level_values(1))
            rows = kept[(kept["system"] == system) & kept["universe_id"].isin(universes)]
            notes.append(f"no rate for system {system} in {len(universes)} universe{'s' if len(universes) != 1 else ''} "
                         f"with no ok verdicts for it: {_ids(universes)} ({_why(rows)})")
    return notes
