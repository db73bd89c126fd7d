"""Variance figure: the share of variance in rates explained by each term.

Input is the tidy table of ``multiverse.analysis.variance.variance_decomposition``
(term, kind, share, ...). Main effects (which shift every system's rate) and
axis x system interactions (which re-rank systems) get different colours and
the interactions are hatched, so the two readings never blur. Built without pyplot.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from multiverse.plots._literal import literal

__all__ = ["plot_variance"]

_STYLE = {
    "axis": ("#3b75af", "", "axis: shifts all rates"),
    "interaction": ("#ef8636", "///", "axis x system: re-ranks systems"),
    "system": ("#6b6b6b", "", "system"),
    "residual": ("#c8c8c8", "", "residual: axis x axis, higher order, noise"),
}


# Points between the end of a bar (or its noise tick) and its value label: half the tick's width and a gap.
_LABEL_GAP = 6.0


def plot_variance(
    terms: pd.DataFrame,
    *,
    term: str = "term",
    share: str = "share",
    kind: str = "kind",
    ax: Axes | None = None,
) -> Axes:
    """Horizontal bars of each term's share of the variance in rates, largest first.

    ``kind`` is one of axis, interaction, system, residual; bars are labelled
    with their percentage. When ``terms`` has a ``noise`` column (the share
    sampling noise alone would give, from ``variance``), a black tick marks it
    on each bar: a bar that barely passes its tick is mostly noise.
    """
    rows = terms.sort_values(share, ascending=True, kind="stable")
    if ax is None:
        ax = Figure(figsize=(7.5, max(2.6, 0.38 * len(rows) + 1.5)), layout="constrained").add_subplot()
    positions = range(len(rows))
    noisy = "noise" in rows and rows["noise"].notna().any()
    floors = rows["noise"].fillna(0.0).to_numpy(float) if noisy else [0.0] * len(rows)
    for y, (_name, value, what), floor in zip(positions, rows[[term, share, kind]].itertuples(index=False), floors):
        colour, hatch, _ = _STYLE.get(what, _STYLE["residual"])
        ax.barh(y, value, color=colour, hatch=hatch, edgecolor="white" if not hatch else "#8a4a1a",
                linewidth=0.6, height=0.7)
        # Past the bar and past its noise tick (which may lie beyond a small bar), a few points clear of
        # both at any scale, so the number never sits on the tick.
        ax.annotate(f"{value:.1%}", xy=(max(value, floor), y), xytext=(_LABEL_GAP, 0), textcoords="offset points",
                    va="center", fontsize=8)
    if noisy:
        ax.scatter(rows["noise"].to_numpy(float), list(positions), marker="|", s=160, color="black",
                   linewidths=1.6, zorder=3, label="sampling-noise floor")
    ax.set_yticks(list(positions), labels=[literal(t).replace(":", " x ") for t in rows[term]], fontsize=9)
    top = float(max(rows[share].max(), rows["noise"].max() if noisy else 0.0)) if len(rows) else 1.0
    ax.set_xlim(0, min(1.0, top * 1.18 + 0.02))
    ax.xaxis.set_major_formatter(lambda x, _: f"{x:.0%}")
    ax.set_xlabel("share of variance in universe x system rates (type-II sums of squares)")
    ax.spines[["top", "right"]].set_visible(False)
    present = [k for k in _STYLE if k in set(rows[kind])]
    handles: list[Artist] = [Patch(facecolor=_STYLE[k][0], hatch=_STYLE[k][1], edgecolor="#8a4a1a" if _STYLE[k][1]
                     else _STYLE[k][0], label=_STYLE[k][2]) for k in present]
    if noisy:
        handles.append(Line2D([], [], color="black", marker="|", linestyle="none", markersize=10,
                              label="expected share from sampling noise alone"))
    ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    ax.set_title("What moves the rates", fontsize=11)
    return ax
