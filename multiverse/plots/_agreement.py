"""Agreement heatmaps: one options x options matrix per measure, every cell annotated.

Input is the tidy pair table of ``multiverse.analysis.agreement``
(``pd.DataFrame(result["pairs"])``): one row per pair of options with columns
a, b and the measures. Options that gave scores are drawn from the document's
``scores`` section (``score_agreement_figure``): weighted kappa on the raw
scores beside kappa on the labels at each cut, and the mean difference.
Figures are built without pyplot (no global state, no GUI backend); PNGs
render with Agg.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from multiverse.analysis import pair_matrix
from multiverse.plots._literal import literal

__all__ = ["agreement_figure", "plot_agreement", "score_agreement_figure"]

_TITLES = {
    "cohen_kappa": "Cohen's kappa",
    "gwet_ac1": "Gwet's AC1",
    "percent": "percent agreement",
    "bias": "bias: rate(row) - rate(column)",
    "kappa_quadratic": "quadratic-weighted kappa (scores)",
    "kappa_linear": "linear-weighted kappa (scores)",
    "exact": "exact agreement (scores)",
    "within_one": "agreement within one point",
    "icc2_1": "ICC(2,1), absolute agreement",
    "icc3_1": "ICC(3,1), consistency",
    "mean_difference": "mean score: row - column",
}
_SHARES = ("percent", "exact", "within_one")  # 0..1 shares, not chance-corrected
_DIFFERENCES = ("bias", "mean_difference")


def _new_axes(width: float, height: float) -> Axes:
    return Figure(figsize=(width, height), layout="constrained").add_subplot()


def _text_colour(v: float, value: str, vmin: float, vmax: float) -> str:
    """White on saturated cells, black on pale ones."""
    if np.isnan(v):
        return "black"
    if value in _SHARES:  # viridis is dark at the low end only
        return "white" if v < 0.55 else "black"
    distance_from_centre = abs((v - vmin) / (vmax - vmin) - 0.5) * 2  # diverging maps are pale mid-scale
    return "white" if distance_from_centre > 0.6 else "black"


def plot_agreement(
    pairs: pd.DataFrame,
    *,
    value: str = "cohen_kappa",
    a: str = "a",
    b: str = "b",
    options: Sequence[Any] | None = None,
    title: str | None = None,
    colorbar: bool = True,
    ax: Axes | None = None,
) -> Axes:
    """Annotated heatmap of one pairwise measure over the options of an axis.

    ``pairs`` holds one row per pair (columns ``a``, ``b``, ``value``).
    Kappa and AC1 share a fixed -1..1 diverging scale so panels compare;
    percent uses 0..1; bias is centred on 0. Undefined cells read "n/a".
    """
    matrix = pair_matrix(pairs, value=value, a=a, b=b, options=options)
    values = matrix.to_numpy(dtype=float)
    k = len(matrix)
    if ax is None:
        side = max(3.2, 0.9 * k + 1.8)
        ax = _new_axes(side + (0.9 if colorbar else 0.0), side)
    if value in _SHARES:
        cmap, vmin, vmax = "viridis", 0.0, 1.0
    elif value in _DIFFERENCES:
        limit = max(float(np.abs(values[np.isfinite(values)]).max(initial=0.0)), 0.01)
        cmap, vmin, vmax = "PuOr", -limit, limit
    else:
        cmap, vmin, vmax = "RdBu", -1.0, 1.0
    # The diagonal (an option against itself) is trivial: grey it out so the eye goes to the pairs.
    shown = np.ma.masked_invalid(values)
    shown[np.diag_indices(k)] = np.ma.masked
    image = ax.imshow(shown, cmap=colormaps[cmap].with_extremes(bad="#eeeeee"), vmin=vmin, vmax=vmax)
    labels = [literal(o) for o in matrix.index]
    long = max(map(len, labels), default=0) > 6
    ax.set_xticks(range(k), labels=labels, rotation=30 if long else 0, ha="right" if long else "center")
    ax.set_yticks(range(k), labels=labels)
    ax.tick_params(length=0)
    size = 10 if k <= 6 else 9 if k <= 10 else 7
    for i, j in zip(*np.nonzero(~np.eye(k, dtype=bool))):
        v = values[i, j]
        text = "n/a" if np.isnan(v) else f"{v:+.3f}" if value == "bias" else \
            f"{round(v, 2) + 0.0:+.2f}" if value in _DIFFERENCES else f"{v:.2f}"  # + 0.0: no "-0.00"
        ax.text(j, i, text, ha="center", va="center", fontsize=size,
                color=_text_colour(v, value, vmin, vmax))
    ax.set_title(literal(title) if title is not None else _TITLES.get(value, literal(value)), fontsize=11)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return ax


def agreement_figure(
    pairs: pd.DataFrame,
    *,
    measures: Sequence[str] = ("cohen_kappa", "gwet_ac1"),
    a: str = "a",
    b: str = "b",
    options: Sequence[Any] | None = None,
    axis_name: str | None = None,
) -> Figure:
    """Side-by-side annotated heatmaps, one per measure (default: kappa and AC1)."""
    k = len(options) if options is not None else len(set(pairs[a]) | set(pairs[b]))
    side = max(3.2, 0.9 * k + 1.8)
    figure = Figure(figsize=(len(measures) * (side + 0.9), side + 0.4), layout="constrained")
    for ax, measure in zip(figure.subplots(1, len(measures), squeeze=False)[0], measures):
        plot_agreement(pairs, value=measure, a=a, b=b, options=options, ax=ax)
    if axis_name:
        figure.suptitle(f"Agreement between the options of \u2018{literal(axis_name)}\u2019", fontsize=12)
    return figure


class _Scale(Protocol):
    @property
    def type(self) -> str: ...

    @property
    def min(self) -> float: ...

    @property
    def max(self) -> float: ...


class _Row(Protocol):
    """A pair's statistics as one table row (a pydantic model is one)."""

    def model_dump(self) -> dict[str, Any]: ...


class _Mean(Protocol):
    @property
    def mean(self) -> float | None: ...


class _ScorePair(_Row, Protocol):
    @property
    def mean_difference(self) -> _Mean: ...


class _Cut(Protocol):
    @property
    def cut(self) -> float: ...

    @property
    def pairs(self) -> Sequence[_Row]: ...


class ScoreSection(Protocol):
    """What the figure reads of an agreement document's ``scores`` section (``results.ScoreAgreement`` is one)."""

    @property
    def options(self) -> Sequence[Any]: ...

    @property
    def scale(self) -> _Scale: ...

    @property
    def pairs(self) -> Sequence[_ScorePair]: ...

    @property
    def cuts(self) -> Sequence[_Cut]: ...


def _score_panels(scores: ScoreSection) -> list[tuple[pd.DataFrame, str, str]]:
    """(pair rows, measure, title) per panel: agreement on the scores, at each cut, then the mean difference."""
    pairs = pd.DataFrame([{**pair.model_dump(), "mean_difference": pair.mean_difference.mean} for pair in scores.pairs])
    pairs["mean_difference"] = pairs["mean_difference"].astype(float)  # None (no unit both scored) is NaN
    scale = scores.scale
    # On an ordinal scale kappa is the statistic a reader compares with kappa at a cut; otherwise the ICC.
    first = "kappa_quadratic" if scale.type == "ordinal" else "icc2_1"
    panels = [(pairs, first, f"{_TITLES[first]}, {scale.min:g}..{scale.max:g}")]
    for entry in scores.cuts[:3]:  # more cuts than that would squeeze the panels: the table has them all
        panels.append((pd.DataFrame([pair.model_dump() for pair in entry.pairs]), "cohen_kappa",
                       f"Cohen's kappa at score \u2265 {entry.cut:g}"))
    panels.append((pairs, "mean_difference", _TITLES["mean_difference"]))
    return panels


def score_agreement_figure(scores: ScoreSection, *, axis_name: str | None = None) -> Figure:
    """Heatmaps of agreement on scores: weighted kappa (or the ICC), kappa at each cut, the mean difference.

    ``scores`` is the ``scores`` section of an agreement document (its model). Kappa on
    the raw scores and at a cut share the -1..1 scale, so a reader sees how
    much agreement the cut loses.
    """
    options = list(scores.options)
    panels = [panel for panel in _score_panels(scores) if len(panel[0])]
    k = len(options)
    side = max(3.2, 0.9 * k + 1.8)
    figure = Figure(figsize=(max(len(panels), 1) * (side + 0.9), side + 0.4), layout="constrained")
    for ax, (pairs, measure, title) in zip(figure.subplots(1, max(len(panels), 1), squeeze=False)[0], panels):
        plot_agreement(pairs, value=measure, options=options, title=title, ax=ax)
    if axis_name:
        figure.suptitle(f"Agreement on scores between the options of \u2018{literal(axis_name)}\u2019", fontsize=12)
    return figure
