"""Rates by design factor: one dot-and-interval panel per factor, levels down, systems side by side.

Input is a tidy rates table with one row per factor x level x system: the
rate and its confidence interval, e.g. the rows of the rates table
(``multiverse.analysis.rates.compute_rates``) whose subgroup is ``factor=level``,
split into a factor and a level column. Built without pyplot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from multiverse.plots._literal import literal

__all__ = ["plot_factor_rates"]


def plot_factor_rates(
    rates: pd.DataFrame,
    *,
    factor: str = "factor",
    level: str = "level",
    system: str = "system",
    rate: str = "rate",
    ci_low: str = "ci_low",
    ci_high: str = "ci_high",
    order: Sequence[Any] | None = None,
    rates_read: str = "compliance",
) -> Figure:
    """One panel per design factor: its levels down, the rate across, one dot and interval per system.

    Factors and levels keep their order of first appearance; ``order`` gives
    the systems (colours and legend), by default in order of first appearance.
    A system with no rate at a level leaves that row empty. ``rates_read``
    (``compliance`` or ``violation``): which way the rates read (``core.orient``).
    """
    from multiverse.core import orient_rates, rate_name

    rates = orient_rates(rates, rates_read, value=rate, intervals=((ci_low, ci_high),), counts=(), position="")
    systems = list(order) if order is not None else list(dict.fromkeys(rates[system]))
    factors = list(dict.fromkeys(rates[factor]))
    sizes = [rates.loc[rates[factor] == name, level].nunique() for name in factors]
    figure = Figure(figsize=(9.0, 0.9 + sum(0.42 * max(n, 1) + 0.7 for n in sizes)), layout="constrained")
    panels = figure.subplots(len(factors), 1, squeeze=False, height_ratios=[max(n, 1) + 1.2 for n in sizes])[:, 0]
    offsets = np.linspace(-0.25, 0.25, len(systems)) if len(systems) > 1 else np.zeros(1)
    for ax, name in zip(panels, factors):
        part = rates[rates[factor] == name]
        levels = list(dict.fromkeys(part[level]))
        for k, one in enumerate(systems):
            mine = part[part[system] == one].set_index(level).reindex(levels)
            y = np.arange(len(levels)) + offsets[k]
            value = mine[rate].to_numpy(float)
            error = np.clip([value - mine[ci_low].to_numpy(float), mine[ci_high].to_numpy(float) - value], 0, None)
            ax.errorbar(value, y, xerr=error, fmt="o", ms=5, capsize=2, color=f"C{k % 10}", label=literal(one))
        ax.set_yticks(range(len(levels)), labels=[literal(x) for x in levels])
        ax.set_ylim(len(levels) - 0.5, -0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(literal(name), loc="left", fontsize=10)
        ax.grid(axis="x", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
    panels[-1].set_xlabel(f"{rate_name(rates_read)} (confidence interval)")
    panels[0].legend(title=literal(system), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    return figure
