"""Ranking figures: the rank-distribution heatmap and the bump chart across universes.

Inputs are tidy tables from ``multiverse.analysis.ranking``:
``rank_distribution(...)`` (system, rank, share) and ``universe_ranks(...)``
(universe_id, system, rank, ...). Figures are built without pyplot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from multiverse.analysis import order_universes, rank_distribution, universe_ranks
from multiverse.core import rank_one
from multiverse.plots._literal import literal

__all__ = ["plot_rank_bump", "plot_rank_distribution", "ranking_figure"]


def _new_axes(width: float, height: float) -> Axes:
    return Figure(figsize=(width, height), layout="constrained").add_subplot()


def plot_rank_distribution(
    distribution: pd.DataFrame,
    *,
    system: str = "system",
    rank: str = "rank",
    value: str = "share",
    order: Sequence[Any] | None = None,
    ax: Axes | None = None,
    rates_read: str = "compliance",
) -> Axes:
    """Heatmap of the share of universes in which each system (row) takes each rank (column).

    Systems are ordered by expected rank (best first) unless ``order`` is given.
    When shares are of all universes and some systems are not rated in every
    universe (``rank_distribution`` of an unbalanced table), a last column
    "not rated" holds the rest, so every row sums to 1.
    Cells are annotated in percent; empty cells stay blank. ``rates_read`` (``compliance`` or ``violation``)
    words what rank 1 is (``core.rank_one``); ranks themselves stay 1 = the best system.
    """
    wide = distribution.pivot_table(index=system, columns=rank, values=value, aggfunc="sum", sort=True)
    if order is None:
        expected = (wide.fillna(0.0) * wide.columns.to_numpy()).sum(axis=1) / wide.fillna(0.0).sum(axis=1)
        order = expected.sort_values(kind="stable").index
    wide = wide.loc[list(order)]
    unrated = 1.0 - wide.fillna(0.0).sum(axis=1)
    if (unrated > 1e-9).any():  # unbalanced: shares are of all universes, so say where the rest went
        wide["not rated"] = unrated.clip(lower=0.0)
    n_systems, n_ranks = wide.shape
    if ax is None:
        ax = _new_axes(max(4.0, 0.75 * n_ranks + 2.6), max(2.6, 0.45 * n_systems + 1.4))
    values = wide.to_numpy(dtype=float)
    image = ax.imshow(values, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(n_ranks), labels=[str(r) for r in wide.columns])
    ax.set_yticks(range(n_systems), labels=[literal(s) for s in wide.index])
    ax.set_xlabel(f"rank (1 = {rank_one(rates_read)})")
    ax.tick_params(length=0)
    for i in range(n_systems):
        for j in range(n_ranks):
            v = values[i, j]
            if np.isfinite(v) and v > 0.0005:
                ax.text(j, i, f"{v:.0%}" if v >= 0.01 else "<1%", ha="center", va="center",
                        fontsize=9, color="white" if v > 0.55 else "black")
    ax.set_title("Share of universes in which each system takes each rank", fontsize=11)
    ax.figure.colorbar(image, ax=ax, shrink=0.8, format=PercentFormatter(xmax=1.0, decimals=0))
    return ax


def plot_rank_bump(
    ranks: pd.DataFrame,
    *,
    universe: str = "universe_id",
    system: str = "system",
    rank: str = "rank",
    order: Sequence[Any] | None = None,
    group: str | None = None,
    label: str | None = None,
    highlight: str | None = None,
    ax: Axes | None = None,
    rates_read: str = "compliance",
) -> Axes:
    """Bump chart: each system's rank (y, 1 at the top) across universes (x, in ``order``).

    ``order`` lists universe ids left to right (e.g. ``order_universes`` output:
    primary first, then by distance from it); default is table order. ``group``
    names a column (e.g. ``distance``) whose changes along the x axis are marked
    by separators and labels. ``label`` names a column that names each universe
    on the x axis (default: the universe id). ``highlight`` marks one universe
    (the primary).
    With many universes the lines become steps without markers and the x axis
    shows positions instead of ids; systems are nudged apart vertically so
    tied lines stay visible. ``rates_read`` words what rank 1 is (``core.rank_one``).
    """
    order = list(dict.fromkeys(ranks[universe])) if order is None else list(order)
    names = ranks.drop_duplicates(universe).set_index(universe)[label] if label else pd.Series(dtype=object)
    tick_labels = [literal(names.get(u, u)) for u in order]
    position = pd.Series(np.arange(len(order)), index=order)
    n_ranks = int(ranks[rank].max())
    many = len(order) > 40
    if ax is None:
        width = 8.0 if not many else min(16.0, 8.0 + len(order) / 100)
        # Rotated universe ids need room below the plot, or constrained layout squashes it.
        labels_height = 0.0 if many else 0.06 * max(len(str(u)) for u in tick_labels)
        ax = _new_axes(width, max(3.2, 0.55 * n_ranks + 1.8) + labels_height)
    _draw_rank_lines(ax, ranks, universe=universe, system=system, rank=rank, position=position, many=many)
    if group is not None:
        labels = ranks.drop_duplicates(universe).set_index(universe)[group].reindex(order).to_numpy()
        _mark_groups(ax, labels, many=many)
    if highlight is not None and highlight in position.index:
        ax.axvline(position[highlight], color="black", linewidth=1.0, alpha=0.6)
    ax.set_ylim(n_ranks + 0.5, 0.5)
    ax.set_yticks(range(1, n_ranks + 1))
    ax.set_ylabel(f"rank (1 = {rank_one(rates_read)})")
    ax.set_xlim(-0.5, len(order) - 0.5)
    _label_universes(ax, tick_labels, group=group, many=many)
    ax.legend(title=literal(system), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    ax.set_title("Rank of each system across universes", fontsize=11, pad=16 if group is not None else 6)
    return ax


def _draw_rank_lines(ax: Axes, ranks: pd.DataFrame, *, universe: str, system: str, rank: str,
                     position: pd.Series, many: bool) -> None:
    """One line per system through its rank in each universe, nudged apart so tied lines stay visible.

    ``position`` maps each universe shown to its x; past 150 universes the
    lines become steps without markers.
    """
    systems = list(dict.fromkeys(ranks[system]))
    colours = [f"C{i % 10}" for i in range(len(systems))]
    nudge = np.linspace(-0.12, 0.12, len(systems)) if len(systems) > 1 else np.zeros(1)
    for index, name in enumerate(systems):
        rows = ranks[ranks[system] == name]
        x = position.reindex(rows[universe]).to_numpy()
        keep = ~np.isnan(x)
        order_x = np.argsort(x[keep])
        xs = x[keep][order_x]
        ys = rows[rank].to_numpy(dtype=float)[keep][order_x] + nudge[index]
        if len(position) > 150:
            ax.step(xs, ys, where="mid", color=colours[index], linewidth=1.2, label=literal(name))
        elif many:
            # Small markers keep swaps between neighbouring universes legible.
            ax.plot(xs, ys, color=colours[index], linewidth=1.0, marker="o", markersize=2.5, label=literal(name))
        else:
            ax.plot(xs, ys, color=colours[index], linewidth=1.8, marker="o", markersize=5, label=literal(name))


def _mark_groups(ax: Axes, labels: np.ndarray, *, many: bool) -> None:
    """Separators where the group changes along the x axis, and each group's label on top."""
    starts = [0] + [i for i in range(1, len(labels)) if labels[i] != labels[i - 1]]
    spans = list(zip(starts, starts[1:] + [len(labels)]))
    for start, _ in spans[1:]:
        ax.axvline(start - 0.5, color="#999999", linewidth=0.8, linestyle=":")
    # Label the widest groups first and skip labels that would run into a placed one.
    placed: list[float] = []
    gap = 0.04 * len(labels) if many else 0.0
    for start, end in sorted(spans, key=lambda span: span[0] - span[1]):
        centre = (start + end - 1) / 2
        if all(abs(centre - other) >= gap for other in placed):
            ax.text(centre, 1.01, literal(labels[start]), ha="center", va="bottom", fontsize=8,
                    color="#555555", clip_on=False, transform=ax.get_xaxis_transform())
            placed.append(centre)


def _label_universes(ax: Axes, tick_labels: list[str], *, group: str | None, many: bool) -> None:
    """The x axis: every universe named, or with many universes only their count; and what groups them."""
    if group == "distance":
        grouped = ", grouped by how many axes differ from the primary (numbers on top)"
    else:
        grouped = f", grouped by {group} (labels on top)" if group is not None else ""
    if many:
        ax.set_xlabel(f"universes ({len(tick_labels)}){grouped}")
    else:
        ax.set_xlabel(f"universes{grouped}")
        ax.set_xticks(range(len(tick_labels)), labels=tick_labels, rotation=60, ha="right",
                      fontsize=7 if len(tick_labels) > 15 else 8)


def ranking_figure(
    rates: pd.DataFrame, *, axes: Sequence[str], primary: str | None = None, ties: Literal["split", "count"] = "split",
    rates_read: str = "compliance",
) -> Figure:
    """Bump chart over universes (primary first, grouped by distance) above the rank distribution.

    ``rates`` is a universe x system rates table (``system_rates`` output), in compliance terms;
    ``rates_read`` (``compliance`` or ``violation``) words the rank axes (``core.rank_one``).
    """
    ranks = universe_ranks(rates)
    order = order_universes(rates, axes=axes, primary=primary)
    ranks = ranks.merge(order, on="universe_id")
    many = len(order) > 40
    figure = Figure(figsize=(12.0 if many else 10.0, 9.0 if many else 11.0), layout="constrained")
    top, bottom = figure.subfigures(2, 1, squeeze=False, height_ratios=[3, 2] if many else [3, 1.6]).ravel()
    labels = None
    if not many and axes:
        ranks["universe"] = ranks[list(axes)].astype(str).agg(" / ".join, axis=1)
        labels = "universe"
    # Without a declared primary no universe is marked or used as the reference the groups count from.
    declared = primary is not None
    plot_rank_bump(ranks, order=order["universe_id"], group="distance" if declared else None, label=labels,
                   highlight=order["universe_id"].iloc[0] if declared else None, ax=top.add_subplot(),
                   rates_read=rates_read)
    plot_rank_distribution(rank_distribution(ranks, ties=ties), ax=bottom.add_subplot(), rates_read=rates_read)
    return figure
