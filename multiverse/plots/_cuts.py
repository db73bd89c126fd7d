"""The cut as a measurement choice: each system's estimate and its rank as the cut on a score moves.

Drawn from the ranking document's ``cuts`` rows (``analysis.cuts.cut_table``):
left, each system's rate at the mean (rescaled to [0, 1], with the native
mean on a second axis) and at each cut (the share at or above it); right,
its rank (1 = the best system: the highest compliance rate, or the lowest
violation rate when rates are read as violations) at each. Lines that cross on the right are the flips
the ranking reports in words. One pair of panels per combination of the
other axes' options, at most four. Built without pyplot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from multiverse.core import orient, rank_one, rate_name
from multiverse.plots._literal import literal

__all__ = ["cut_figure"]

_MAX_GROUPS = 4


def cut_figure(rows: Sequence[Mapping[str, Any]], *, scale: tuple[float, float] | None = (0.0, 1.0),
               rates_read: str = "compliance") -> Figure:
    """Estimate and rank of each system per scoring choice (``RankingDocument.cuts`` rows).

    ``scale``: the ends of the scores' one scale, for the mean's native axis; None (universes on different
    scales) draws the rates alone. ``rates_read`` (``compliance`` or ``violation``): the rows' compliance
    rates are drawn as read (``core.orient``), the native axis still gives the mean score (it runs down
    when read as violations), and ranks stay 1 = the best system, worded as ``core.rank_one``.
    """
    table = pd.DataFrame([dict(r) for r in rows])
    if table.empty:
        figure = Figure(figsize=(5, 2), layout="constrained")
        figure.text(0.5, 0.5, "no universes differ only in their cut", ha="center", va="center")
        return figure
    groups = list(dict.fromkeys(table["group"]))[:_MAX_GROUPS]
    figure = Figure(figsize=(10, 3.6 * len(groups)), layout="constrained")
    grid = figure.subplots(len(groups), 2, squeeze=False)
    low, high = scale if scale is not None else (0.0, 1.0)
    # One colour per system in every panel, systems in name order.
    systems = sorted(table["system"].astype(str).unique())
    palette = dict(zip(systems, [f"C{i % 10}" for i in range(len(systems))]))
    for row, group in enumerate(groups):
        part = table[table["group"] == group]
        steps = list(dict.fromkeys(part["scoring"]))
        x = {s: i for i, s in enumerate(steps)}
        rate_ax, rank_ax = grid[row]
        for system in systems:
            mine = part[part["system"].astype(str) == system]
            if mine.empty:
                continue
            xs = [x[s] for s in mine["scoring"]]
            rate_ax.plot(xs, orient(mine["rate"], rates_read), marker="o", color=palette[system], label=literal(system))
            rank_ax.plot(xs, mine["rank"], marker="o", color=palette[system], label=literal(system))
        for ax in (rate_ax, rank_ax):
            ax.set_xticks(range(len(steps)), [literal(s) for s in steps])
            # A cut's rate read as violations is the share below it (1 - the share at or above).
            ax.set_xlabel("the mean, then the share " + ("at or above" if rates_read == "compliance" else "below")
                          + " each cut")
        rate_ax.set_ylim(-0.02, 1.02)
        rate_ax.set_ylabel(f"{rate_name(rates_read)} (0–1)")
        if scale is not None and not part["scoring"].str.startswith("cut").all():
            # The flip is its own inverse: a rate as read back to the rescaled mean, and the mean to a rate as read.
            native = rate_ax.secondary_yaxis("right", functions=(
                lambda r, lo=low, hi=high: lo + orient(r, rates_read) * (hi - lo),
                lambda m, lo=low, hi=high: orient((m - lo) / (hi - lo), rates_read)))
            native.set_ylabel(f"the mean in score units ({low:g}–{high:g})")
        n_systems = part["system"].nunique()
        rank_ax.set_ylim(n_systems + 0.5, 0.5)
        rank_ax.set_yticks(range(1, n_systems + 1))
        rank_ax.set_ylabel(f"rank (1 = {rank_one(rates_read)})")
        title = "" if group == "all" else f" ({literal(group)})"
        rate_ax.set_title(f"Estimate as the cut moves{title}")
        rank_ax.set_title(f"Rank as the cut moves{title}")
        rank_ax.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    return figure
