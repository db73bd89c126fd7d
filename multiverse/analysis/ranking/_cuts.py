"""The cut as a measurement choice: each system's estimate and rank as the cut on a score moves.

Universes that differ only in how their scores are counted (the mean, or the
share at or above each cut) read the same judgments. :func:`cut_table` lines
them up, per combination of the other axes' options, in the order mean, then
the cuts from low to high; :func:`cut_flips` says in words where the top
system changes ("the top system changes between cut 6 and cut 7: atlas ->
beacon"). Ranks are 1 for the highest rate; equal rates share the best rank.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["cut_flips", "cut_table", "scoring_axes"]


def _label(estimator: str, cut: float | None) -> str:
    return f"cut {cut:g}" if estimator == "at_least" else ("win rate" if estimator == "win_rate" else "mean")


def _choices(choices: pd.DataFrame) -> pd.DataFrame:
    """universe_id, _estimator, _cut: under private names, as axes may be called estimator or cut."""
    return pd.DataFrame({"universe_id": choices["universe_id"].astype(str).to_numpy(),
                         "_estimator": choices["estimator"].to_numpy(dtype=object),
                         "_cut": pd.to_numeric(choices["cut"], errors="coerce").to_numpy(dtype=float)})


def scoring_axes(universes: pd.DataFrame, choices: pd.DataFrame, axes: Sequence[str]) -> list[str]:
    """The axes that change the scoring: two universes that differ only in such an axis count scores differently."""
    merged = universes.assign(universe_id=universes["universe_id"].astype(str)).merge(
        _choices(choices), on="universe_id", how="left")
    merged["_choice"] = [f"{e}|{c}" for e, c in zip(merged["_estimator"], merged["_cut"])]
    found = []
    for axis in axes:
        others = [a for a in axes if a != axis]
        grouped = merged.groupby(others, sort=False, dropna=False) if others else [(None, merged)]
        if any(part["_choice"].nunique() > 1 for _, part in grouped):
            found.append(axis)
    return found


def cut_table(rates: pd.DataFrame, choices: pd.DataFrame, axes: Sequence[str],
              exclude: Sequence[str] = ()) -> pd.DataFrame:
    """Estimate and rank of each system at each scoring choice, per combination of the other axes.

    ``rates``: universe x system rates (``system_rates``); ``choices``: each
    universe's estimator and cut (``estimates.scoring_choices``). Systems in
    ``exclude`` (a pairwise reference) are left out. Columns: ``group`` (the
    other axes' options, "axis=option · ..."; "all" without other axes),
    ``universe_id``, ``scoring`` (mean, win rate or "cut K"), ``estimator``,
    ``cut``, ``order``, ``system``, ``rate`` and ``rank``. Empty when no two
    universes differ only in their scoring; where several universes of a
    group count alike, the first stands for them.
    """
    axes = list(axes)
    columns = ["group", "universe_id", "scoring", "estimator", "cut", "order", "system", "rate", "rank"]
    rates = rates.assign(universe_id=rates["universe_id"].astype(str), system=rates["system"].astype(str))
    universes = rates.drop_duplicates("universe_id")[["universe_id", *axes]]
    by = scoring_axes(universes, choices, axes)
    if not by:
        return pd.DataFrame(columns=columns)
    other = [a for a in axes if a not in by]
    kept = rates[~rates["system"].isin(list(exclude))].dropna(subset=["rate"])
    table = pd.DataFrame({"universe_id": kept["universe_id"].to_numpy(), "system": kept["system"].to_numpy(),
                          "rate": kept["rate"].to_numpy(dtype=float)})
    table["group"] = ([" · ".join(f"{a}={v}" for a, v in zip(other, row))
                       for row in kept[other].astype(str).itertuples(index=False)] if other else "all")
    table = table.merge(_choices(choices), on="universe_id", how="left")
    table["estimator"], table["cut"] = table.pop("_estimator"), table.pop("_cut")
    table["cut"] = table["cut"].where(table["estimator"] == "at_least")  # a mean reads no cut
    table["scoring"] = [_label(e, c) for e, c in zip(table["estimator"], table["cut"])]
    # One universe per scoring choice in a group (the first), then the mean first and the cuts from low to high.
    first = table.drop_duplicates(["group", "scoring"])["universe_id"]
    table = table[table["universe_id"].isin(set(first))].copy()
    table["order"] = np.where(table["estimator"] == "at_least", table["cut"], -np.inf)
    table["rank"] = table.groupby("universe_id")["rate"].rank(ascending=False, method="min").astype(int)
    return table.sort_values(["group", "order", "rank", "system"], kind="stable")[columns].reset_index(drop=True)


def cut_flips(table: pd.DataFrame) -> list[str]:
    """Where the top system changes as the cut moves, and where a cut's top differs from the mean's, in words."""
    words = []
    for group, rows in table.groupby("group", sort=False):
        where = "" if group == "all" else f" ({group})"
        steps = rows.drop_duplicates("universe_id")[["universe_id", "scoring", "estimator"]]
        tops = {u: sorted(rows.loc[(rows["universe_id"] == u) & (rows["rank"] == 1), "system"].astype(str))
                for u in steps["universe_id"]}
        cuts = steps[steps["estimator"] == "at_least"]
        means = steps[steps["estimator"] != "at_least"]
        for (u1, s1), (u2, s2) in zip(cuts[["universe_id", "scoring"]].itertuples(index=False),
                                      cuts[["universe_id", "scoring"]].iloc[1:].itertuples(index=False)):
            if tops[u1] != tops[u2]:
                words.append(f"the top system changes between {s1} and {s2}{where}: "
                             f"{' = '.join(tops[u1])} -> {' = '.join(tops[u2])}")
        for u, scoring in means[["universe_id", "scoring"]].itertuples(index=False):
            differ = [f"{s}: {' = '.join(tops[c])}" for c, s in cuts[["universe_id", "scoring"]].itertuples(index=False)
                      if tops[c] != tops[u]]
            if differ:
                words.append(f"the top system by {scoring}{where} is {' = '.join(tops[u])}, but not at every cut "
                             f"({'; '.join(differ)})")
    return words
