"""The ``calibrate --figure``: each universe's judge rate beside its human-anchored rate.

Input is ``multiverse.analysis.anchoring.calibrate``'s result. One panel per
system, one row per universe: the judge's own rate (grey, with its interval
when the run's rates table is given), the PPI++ rate anchored to the human
labels (blue) and the labels alone (orange). Built without pyplot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from multiverse.analysis import Calibration
from multiverse.core import universe_label
from multiverse.plots._literal import literal

__all__ = ["plot_calibration"]

JUDGE, ANCHORED, HUMAN = "#8c8c8c", "#2b6cb0", "#d9822b"


def plot_calibration(calibration: Calibration | pd.DataFrame, axes: Sequence[str], *,
                     raw: pd.DataFrame | None = None, primary: str | None = None,
                     systems: Sequence[str] | None = None, rates_read: str = "compliance") -> Figure:
    """Draw judge-raw, anchored and humans-only rates per universe (rows) and system (panels).

    ``raw``: the run's rates table (``universe_id``, ``system``, ``ci_low``,
    ``ci_high``; the ``all`` subgroup is used) for the judges' own intervals.
    ``primary`` marks that universe's row label with a star. ``rates_read``
    (``compliance`` or ``violation``): which way every rate reads (``core.orient``).
    """
    from multiverse.core import orient_rates, rate_name

    rates = calibration.rates if isinstance(calibration, Calibration) else calibration
    rates = rates[rates["rate"].notna()]
    axes = [a for a in axes if a in rates.columns]
    systems = list(systems) if systems is not None else list(dict.fromkeys(rates["system"]))
    universes = list(dict.fromkeys(rates["universe_id"]))
    labels = _row_labels(rates, axes, universes, primary)
    if raw is not None:
        raw = raw[raw["subgroup"] == "all"] if "subgroup" in raw.columns else raw
        rates = rates.merge(raw[["universe_id", "system", "ci_low", "ci_high"]]
                            .rename(columns={"ci_low": "judge_ci_low", "ci_high": "judge_ci_high"}),
                            on=["universe_id", "system"], how="left")
    for value, low, high in (("judge_rate", "judge_ci_low", "judge_ci_high"), ("rate", "ci_low", "ci_high"),
                             ("human_rate", "human_ci_low", "human_ci_high")):
        rates = orient_rates(rates, rates_read, value=value, intervals=((low, high),), counts=(), position="")
    height = 1.4 + 0.26 * len(universes)
    fig = Figure(figsize=(2.2 + 2.6 * len(systems), height), layout="constrained")
    panels = fig.subplots(1, max(len(systems), 1), sharex=True, sharey=True, squeeze=False)[0]
    y_of = {u: i for i, u in enumerate(universes)}
    for ax, system in zip(panels, systems):
        cell = rates[rates["system"] == system]
        y = cell["universe_id"].map(y_of).to_numpy(float)
        if "judge_ci_low" in cell.columns:
            ax.errorbar(cell["judge_rate"], y - 0.2, xerr=_spread(cell, "judge_rate", "judge_ci_low", "judge_ci_high"),
                        fmt="o", ms=3.5, color=JUDGE, lw=1)
        else:
            ax.plot(cell["judge_rate"], y - 0.2, "o", ms=3.5, color=JUDGE)
        ax.errorbar(cell["human_rate"], y + 0.2, xerr=_spread(cell, "human_rate", "human_ci_low", "human_ci_high"),
                    fmt="s", ms=3, color=HUMAN, lw=1, alpha=0.8)
        ax.errorbar(cell["rate"], y, xerr=_spread(cell, "rate", "ci_low", "ci_high"), fmt="D", ms=3.5,
                    color=ANCHORED, lw=1.5)
        ax.set_title(literal(system), fontsize=10)
        ax.set_xlim(-0.02, 1.02)
        ax.grid(axis="x", color="#e5e5e5", lw=0.6)
        ax.set_xlabel(rate_name(rates_read))
    first = panels[0]
    first.set_yticks(range(len(universes)), [literal(label) for label in labels], fontsize=8)
    first.set_ylim(len(universes) - 0.5, -0.5)
    fig.legend([Line2D([], [], color=JUDGE, marker="o", lw=1), Line2D([], [], color=ANCHORED, marker="D", lw=1.5),
                Line2D([], [], color=HUMAN, marker="s", lw=1)],
               ["judge alone", "anchored to the human labels (PPI++)", "human labels alone"],
               loc="outside lower center", ncol=3, frameon=False, fontsize=9)
    return fig


def _row_labels(rates: pd.DataFrame, axes: list[str], universes: list[Any], primary: str | None) -> list[str]:
    options = rates.drop_duplicates("universe_id").set_index("universe_id")
    out = []
    for u in universes:
        text = universe_label({a: options.at[u, a] for a in axes}, compact=True) if axes else str(u)
        out.append(("★ " if u == primary else "") + text)
    return out


def _spread(frame: pd.DataFrame, centre: str, low: str, high: str) -> np.ndarray:
    c = frame[centre].to_numpy(float)
    return cast("np.ndarray", np.nan_to_num(np.vstack([c - frame[low].to_numpy(float), frame[high].to_numpy(float) - c]).clip(min=0)))
