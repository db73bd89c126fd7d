"""Specification-curve figures: the sorted curve over its indicator panel.

Top panel: each universe's estimate with its interval, sorted from lowest to
highest, the primary universe marked, and optionally the joint test's
expected-under-null band. Bottom panel: one row per axis option, grouped by
axis, with a mark where a universe uses that option; it shares the x axis
with the curve, so column i of the panel is point i of the curve. Axes and
options keep the order given (the spec's declared order, in the report).
The primary's label sits above the plotting area, beside the top of its
guide line, so it never covers a point. Panels of several systems are all
the same size (``multiverse.plots._panels``).

Figures are built on ``matplotlib.figure.Figure`` (Agg canvas, no pyplot
state), so nothing leaks between calls and no display is needed. Past
``DENSE`` universes points become a line with a shaded interval and the
indicator rows become raster strips, which stays legible at 10,000
universes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.gridspec import SubplotSpec
from matplotlib.ticker import MaxNLocator

from multiverse.analysis import indicator_matrix, position_words, tied_positions
from multiverse.core import orient, orient_rates, rate_name
from multiverse.errors import InputError
from multiverse.plots._literal import literal
from multiverse.plots._panels import fit_panels

__all__ = ["DENSE", "plot_curve", "plot_curves", "plot_difference_curve"]

#: Above this many universes the curve is drawn as a line and a band.
DENSE = 60
# Above this many the indicator rows are raster strips, not one mark each.
_RASTER = 400

_PALETTE = sns.color_palette("deep")
_CURVE, _PRIMARY, _BAND = _PALETTE[0], _PALETTE[3], (0.55, 0.55, 0.55)


@dataclass(frozen=True)
class _Columns:
    value: str
    low: str
    high: str
    ylabel: str
    xlabel: str
    reference_label: str = "reference {:g}"


_RATE = _Columns("rate", "ci_low", "ci_high", "compliance rate", "universes, from lowest to highest rate")


def _difference_columns(curve: pd.DataFrame, rates: str = "compliance") -> _Columns:
    a = curve["system_a"].iloc[0] if "system_a" in curve.columns and len(curve) else "a"
    b = curve["system_b"].iloc[0] if "system_b" in curve.columns and len(curve) else "b"
    name = "rate" if rates == "compliance" else rate_name(rates)
    return _Columns(
        "difference", "ci_low", "ci_high", f"{name}({a}) \u2212 {name}({b})",
        "universes, from lowest to highest difference", "no difference",
    )


def _one_system(curve: pd.DataFrame, system: str | None) -> pd.DataFrame:
    if "system" not in curve.columns:
        return curve
    names = list(dict.fromkeys(curve["system"]))
    if system is None:
        if len(names) > 1:
            raise InputError(
                f"curve: system: expected one system, got {len(names)}; pass system= or use "
                "plot_curves"
            )
        return curve
    if system not in names:
        raise InputError(f"curve: system: expected one of {', '.join(map(str, names))}")
    return curve[curve["system"] == system]


def _check_columns(curve: pd.DataFrame, columns: _Columns, axes: Sequence[str]) -> None:
    need = ["universe_id", "position", columns.value, columns.low, columns.high, *axes]
    missing = [c for c in need if c not in curve.columns]
    if missing:
        raise InputError(f"curve: {', '.join(missing)}: expected column(s) to be present")
    if curve.empty:
        raise InputError("curve: expected at least one universe")


def _check_band(band: pd.DataFrame | None, n: int) -> None:
    if band is None:
        return
    missing = [c for c in ("position", "low", "median", "high") if c not in band.columns]
    if missing:
        raise InputError(f"null_band: {', '.join(missing)}: expected JointTest.band columns")
    if len(band) != n:
        raise InputError(
            f"null_band: position: expected {n} rows (one per universe of the curve), got {len(band)}"
        )


def _layout(n_rows: int) -> tuple[float, float]:
    """Heights (inches) of the curve panel and the indicator panel."""
    return 3.2, max(0.9, 0.24 * n_rows + 0.3)


def _draw_curve(
    ax: Axes,
    frame: pd.DataFrame,
    columns: _Columns,
    band: pd.DataFrame | None,
    reference: float | None,
    legend: bool,
    compact: bool = False,
) -> None:
    """Band, reference line, points (or line) with intervals, and the primary.

    ``compact`` (small multiples) puts the primary's label on two lines, to
    fit a narrow panel.
    """
    x = frame["position"].to_numpy()
    y = frame[columns.value].to_numpy()
    low, high = frame[columns.low].to_numpy(), frame[columns.high].to_numpy()
    n = len(frame)
    if band is not None:
        b = band.sort_values("position")
        ax.fill_between(
            b["position"], b["low"], b["high"], color=_BAND, alpha=0.28, lw=0, step="mid",
            label="expected under the null", zorder=1,
        )
        ax.plot(b["position"], b["median"], color=_BAND, lw=1, ls="--", drawstyle="steps-mid",
                zorder=1)
    if reference is not None:
        ax.axhline(reference, color="0.25", lw=0.8, ls=":", zorder=1,
                   label=columns.reference_label.format(reference))
    if n <= DENSE:
        ax.errorbar(
            x, y, yerr=np.clip([y - low, high - y], 0, None), fmt="o", ms=5, color=_CURVE, ecolor=_CURVE,
            elinewidth=1.2, capsize=2, label="universe (95% CI)" if legend else None, zorder=3,
        )
    else:
        ax.fill_between(x, low, high, color=_CURVE, alpha=0.25, lw=0, zorder=2,
                        label="95% CI" if legend else None)
        ax.plot(x, y, color=_CURVE, lw=1.2, zorder=3, label="universes" if legend else None)
    primary = frame[frame["is_primary"]] if "is_primary" in frame.columns else frame.iloc[:0]
    if not primary.empty:
        row = primary.iloc[0]
        px, py = float(row["position"]), float(row[columns.value])
        ax.errorbar(
            # Clipped: a Wilson bound can sit a rounding error inside a rate of 0 or 1.
            [px], [py], yerr=np.clip([[py - row[columns.low]], [row[columns.high] - py]], 0, None),
            fmt="D",
            ms=7, color=_PRIMARY, ecolor=_PRIMARY, elinewidth=1.6, capsize=3, zorder=5,
            label="primary universe" if legend else None,
        )
        ax.axvline(px, color=_PRIMARY, lw=0.8, alpha=0.5, zorder=0)
        interval = f"[{row[columns.low]:.2f}, {row[columns.high]:.2f}]"
        # Position from the lowest, spelled out: "rank" means 1 = highest elsewhere (ranking).
        # Universes that share the primary's value share its position: the label names the range.
        where = position_words(*tied_positions(y.astype(float), py), n)
        text = f"primary {py:.2f} {interval}" + ("\n" if compact else " \u00b7 ") + where
        # Above the plotting area, beside the top of the primary's guide line and on the roomier
        # side: the points live inside the area, so the label can never cover one.
        right = px <= (n + 1) / 2
        ax.annotate(
            text, xy=(px, 1.0), xycoords=("data", "axes fraction"),
            xytext=(3 if right else -3, 5), textcoords="offset points", annotation_clip=False,
            ha="left" if right else "right", va="bottom", fontsize=8, color=_PRIMARY, zorder=6,
        )
    ax.set_ylabel(literal(columns.ylabel))
    ax.grid(axis="y", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _title_pad(compact: bool) -> float:
    """Points between a panel and its title: room for the primary's label (one or two lines of 8 pt)."""
    return 30.0 if compact else 19.0


def _set_ylim(ax: Axes, frames: list[pd.DataFrame], columns: _Columns, bands: Sequence[pd.DataFrame | None],
              reference: float | None) -> None:
    lows = [f[columns.low].min() for f in frames]
    highs = [f[columns.high].max() for f in frames]
    for band in bands:
        if band is not None:
            lows.append(band["low"].min())
            highs.append(band["high"].max())
    if reference is not None:
        lows.append(reference)
        highs.append(reference)
    lo, hi = float(np.nanmin(lows)), float(np.nanmax(highs))
    pad = max(hi - lo, 0.05) * 0.22
    if columns.value == "rate":
        lo, hi = max(lo - pad, -0.02), min(hi + pad, 1.02)
    else:
        lo, hi = lo - pad, hi + pad
    ax.set_ylim(lo, hi)


def _draw_indicators(ax: Axes, frame: pd.DataFrame, axes: Sequence[str], labels: bool,
                     groups: bool) -> None:
    matrix = indicator_matrix(frame, axes)
    n = matrix.shape[1]
    x = np.arange(1, n + 1)
    # y from the top; one empty slot between axis groups.
    rows: list[float] = []
    y, spans = 0.0, []
    for axis in axes:
        options = [o for (a, o) in matrix.index if a == axis]
        start = y
        for _ in options:
            rows.append(y)
            y += 1
        spans.append((axis, start, y - 1))
        y += 0.6
    ys = np.asarray(rows)
    primary = frame.sort_values("position")["is_primary"].to_numpy() \
        if "is_primary" in frame.columns else np.zeros(n, bool)
    for k, (_axis, top, bottom) in enumerate(spans):
        if k % 2 == 0:
            ax.axhspan(top - 0.5, bottom + 0.5, color="0.95", lw=0, zorder=0)
    strip = LinearSegmentedColormap.from_list("strip", [(1, 1, 1, 0), _CURVE])
    for row, yy in zip(matrix.to_numpy(), ys):
        if n > _RASTER:
            # One raster strip per option: columns average into shades, so
            # density stays visible where marks would overplot.
            ax.imshow(row[None, :].astype(float), extent=(0.5, n + 0.5, yy + 0.32, yy - 0.32),
                      aspect="auto", cmap=strip, vmin=0, vmax=1, interpolation="antialiased",
                      zorder=2)
        elif n > DENSE:
            ax.vlines(x[row], yy - 0.32, yy + 0.32, color=_CURVE, lw=max(0.4, 180 / n),
                      zorder=2)
        else:
            ax.scatter(x[row], np.full(row.sum(), yy), s=26, color=_CURVE, zorder=2, lw=0)
            ax.scatter(x[~row], np.full((~row).sum(), yy), s=6, color="0.8", zorder=1, lw=0)
        if primary.any():
            hit = row & primary
            if hit.any():
                ax.scatter(x[hit], [yy], s=40 if n <= DENSE else 22, marker="D",
                           color=_PRIMARY, zorder=4, lw=0)
    if primary.any():
        ax.axvline(x[primary][0], color=_PRIMARY, lw=0.8, alpha=0.5, zorder=0)
    ax.set_ylim(y - 0.6 + 0.4 if len(ys) else 0.5, -0.6)
    ax.set_xlim(0.5, n + 0.5)
    ax.set_yticks(ys)
    ax.set_yticklabels([literal(o) for (_, o) in matrix.index] if labels else [], fontsize=8)
    ax.tick_params(axis="y", length=0)
    if groups:
        for axis, top, bottom in spans:
            ax.text(1.03, (top + bottom) / 2, literal(axis), transform=ax.get_yaxis_transform(),
                    ha="left", va="center", fontsize=8.5, fontweight="bold")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def _figure(fig: Figure | None) -> Figure:
    if fig is None:
        fig = Figure()
    if fig.axes:
        raise InputError("fig: expected an empty Figure")
    # The panels are laid out by fit_panels; a layout engine would undo their equal widths.
    fig.set_layout_engine("none")
    return fig


def _in_declared_order(frame: pd.DataFrame, axes: Sequence[str],
                       options: Mapping[str, Sequence[Any]] | None) -> pd.DataFrame:
    """The axis columns as categoricals in the declared option order (unknown options after, as first seen)."""
    if not options:
        return frame
    frame = frame.copy()
    for axis in axes:
        declared = options.get(axis)
        if declared is None:
            continue
        by_text = {str(v): v for v in frame[axis].dropna()}
        order = [by_text[str(o)] for o in declared if str(o) in by_text]
        order += [v for v in dict.fromkeys(frame[axis].dropna()) if v not in set(order)]
        # From the plain values: a categorical column may hold categories no universe uses (a subset of a run),
        # and recoding those onto fewer categories is deprecated (pandas 4 raises).
        frame[axis] = pd.Categorical(frame[axis].to_numpy(dtype=object), categories=order)
    return frame


def _panel_pair(fig: Figure, spec: SubplotSpec, n_ind_rows: int) -> tuple[Axes, Axes]:
    top_h, bottom_h = _layout(n_ind_rows)
    inner = spec.subgridspec(2, 1, height_ratios=[top_h, bottom_h], hspace=0.02)
    ax_curve = fig.add_subplot(inner[0])
    ax_ind = fig.add_subplot(inner[1], sharex=ax_curve)
    ax_curve.tick_params(labelbottom=False)
    return ax_curve, ax_ind


def _position_ticks(ax: Axes, n: int, nbins: int) -> None:
    # A tick per universe while they fit; past that a few round positions, never
    # per-universe labels.
    if n <= 2 * nbins:
        ax.set_xticks(np.arange(1, n + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=nbins))


def _n_option_rows(frame: pd.DataFrame, axes: Sequence[str]) -> int:
    return int(sum(frame[a].nunique() for a in axes))


def _single(curve: pd.DataFrame, axes: str | Sequence[str], columns: _Columns, null_band: pd.DataFrame | None,
            reference: float | None, title: str | None, fig: Figure | None,
            options: Mapping[str, Sequence[Any]] | None) -> Figure:
    axes = [axes] if isinstance(axes, str) else list(axes)
    _check_columns(curve, columns, axes)
    frame = _in_declared_order(curve.sort_values("position", kind="stable"), axes, options)
    _check_band(null_band, len(frame))
    n_rows = _n_option_rows(frame, axes)
    top_h, bottom_h = _layout(n_rows)
    fig = _figure(fig)
    grid = fig.add_gridspec(1, 1)
    ax_curve, ax_ind = _panel_pair(fig, grid[0], n_rows)
    _set_ylim(ax_curve, [frame], columns, [null_band], reference)
    _draw_curve(ax_curve, frame, columns, null_band, reference, legend=True)
    _draw_indicators(ax_ind, frame, axes, labels=True, groups=True)
    _position_ticks(ax_ind, len(frame), nbins=10)
    ax_ind.set_xlabel(f"{columns.xlabel} (n = {len(frame)})")
    ax_curve.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax_curve.set_title(literal(title) if title else "", loc="left", fontsize=11, pad=_title_pad(False))
    return fit_panels(fig, grid, {(0, 0): (ax_curve, ax_ind)}, width=7.0, height=top_h + bottom_h)


def _read_as(rates: str, curve: pd.DataFrame, bands: Mapping[Any, pd.DataFrame | None], reference: float | None
             ) -> tuple[pd.DataFrame, dict[Any, pd.DataFrame | None], float | None]:
    """The curve, its null bands and reference as ``rates`` reads them (``core.orient``: one flip for all)."""
    oriented = {k: None if b is None else orient_rates(b, rates, value="median", intervals=(("low", "high"),), by=())
                for k, b in bands.items()}
    return (orient_rates(curve, rates), oriented, None if reference is None else float(orient(reference, rates)))


def plot_curve(
    curve: pd.DataFrame,
    *,
    axes: Sequence[str],
    system: str | None = None,
    null_band: pd.DataFrame | None = None,
    reference: float | None = None,
    title: str | None = None,
    options: Mapping[str, Sequence[Any]] | None = None,
    fig: Figure | None = None,
    native: tuple[float, float, bool] | None = None,
    rates: str = "compliance",
) -> Figure:
    """Draw one system's specification curve over its indicator panel.

    ``curve`` is a :func:`~multiverse.analysis.curve.spec_curve` frame (pass
    ``system=`` when it holds several); ``axes`` names the axis columns for
    the indicator rows, in the order drawn. ``options`` maps an axis to its
    options in the order to draw them (e.g. the spec's); without it they
    follow :func:`~multiverse.analysis.curve.indicator_matrix`. ``null_band``
    is ``JointTest.band`` of a rate test on the same system; ``reference``
    draws a horizontal line (e.g. the threshold). ``native`` (low, high,
    every universe a mean) marks a curve of mean scores: the rate axis says
    so and a second axis gives the mean in the scale's units. ``rates``
    (``compliance`` or ``violation``) is which way the rates read: the curve,
    its intervals, the band and the reference flip by ``core.orient``, and the
    axis says so. Returns the Figure (two Axes: curve, indicators).
    """
    frame = _one_system(curve, system)
    if title is None and "system" in frame.columns and len(frame):
        title = f"Specification curve: {frame['system'].iloc[0]}"
    frame, bands, reference = _read_as(rates, frame, {0: null_band}, reference)
    figure = _single(frame, axes, _rate_columns(native, rates), bands[0], reference, title, fig, options)
    _native_axis(figure.axes[0], native)
    return figure


def _rate_columns(native: tuple[float, float, bool] | None, rates: str = "compliance") -> _Columns:
    if native is None:
        return _Columns("rate", "ci_low", "ci_high", rate_name(rates), f"universes, from lowest to highest {rate_name(rates)}")
    label = "mean score, rescaled to 0–1" if native[2] else "rate: rescaled mean, or share at a cut"
    if rates != "compliance":
        label = f"1 − ({label})"
    return _Columns("rate", "ci_low", "ci_high", label, "universes, from lowest to highest rate")


def _native_axis(ax: Axes, native: tuple[float, float, bool] | None) -> None:
    """A right-hand axis with the mean in the scale's own units (a mean's rate is (mean - low) / (high - low))."""
    if native is None:
        return
    low, high, only_means = native
    def to_native(r: Any) -> Any:
        return low + np.asarray(r, float) * (high - low)

    def to_rate(m: Any) -> Any:
        return (np.asarray(m, float) - low) / (high - low)

    right = ax.secondary_yaxis("right", functions=(to_native, to_rate))
    right.set_ylabel(f"mean score ({low:g}–{high:g}){'' if only_means else ', means only'}", fontsize=8)


def plot_difference_curve(
    curve: pd.DataFrame,
    *,
    axes: Sequence[str],
    null_band: pd.DataFrame | None = None,
    title: str | None = None,
    options: Mapping[str, Sequence[Any]] | None = None,
    fig: Figure | None = None,
    rates: str = "compliance",
) -> Figure:
    """Draw a :func:`~multiverse.analysis.curve.difference_curve` with a zero line.

    ``null_band`` is ``JointTest.band`` of the matching difference test;
    ``options`` and ``rates`` as in :func:`plot_curve` (a difference of violation rates is the negated one).
    """
    columns = _difference_columns(curve, rates)
    curve = orient_rates(curve, rates, value="difference", counts=(), by=(), difference=True)
    if null_band is not None:
        null_band = orient_rates(null_band, rates, value="median", intervals=(("low", "high"),), counts=(), by=(),
                                 difference=True)
    if title is None:
        title = f"Difference curve: {columns.ylabel}"
    return _single(curve, axes, columns, null_band, 0.0, title, fig, options)


def plot_curves(
    curve: pd.DataFrame,
    *,
    axes: Sequence[str],
    systems: Sequence[str] | None = None,
    null_bands: Mapping[str, pd.DataFrame] | None = None,
    reference: float | None = None,
    col_wrap: int | None = None,
    title: str | None = None,
    options: Mapping[str, Sequence[Any]] | None = None,
    fig: Figure | None = None,
    native: tuple[float, float, bool] | None = None,
    rates: str = "compliance",
) -> Figure:
    """Small multiples: one curve + indicator panel per system, on one rate scale.

    Each system is sorted by its own rates, so each has its own indicator
    panel; every panel has the same size. ``null_bands`` maps system ->
    ``JointTest.band``; ``options`` and ``rates`` as in :func:`plot_curve`.
    ``col_wrap`` defaults to all systems in one row up to 4, else 3 per row.
    """
    axes = [axes] if isinstance(axes, str) else list(axes)
    if "system" not in curve.columns:
        raise InputError("curve: system: expected a spec_curve() table")
    curve, null_bands, reference = _read_as(rates, curve, dict(null_bands or {}), reference)
    names = list(systems) if systems is not None else list(dict.fromkeys(curve["system"]))
    frames = [_in_declared_order(_one_system(curve, name).sort_values("position", kind="stable"), axes, options)
              for name in names]
    bands = [(null_bands or {}).get(name) for name in names]
    for frame, band in zip(frames, bands):
        _check_columns(frame, _RATE, axes)
        _check_band(band, len(frame))
    ncols = col_wrap or (len(names) if len(names) <= 4 else 3)
    nrows = -(-len(names) // ncols)
    n_rows = max(_n_option_rows(f, axes) for f in frames)
    top_h, bottom_h = _layout(n_rows)
    fig = _figure(fig)
    grid = fig.add_gridspec(nrows, ncols)
    curve_axes, cells = [], {}
    for i, (name, frame, band) in enumerate(zip(names, frames, bands)):
        r, c = divmod(i, ncols)
        ax_curve, ax_ind = _panel_pair(fig, grid[r, c], n_rows)
        cells[(r, c)] = (ax_curve, ax_ind)
        curve_axes.append(ax_curve)
        _set_ylim(ax_curve, frames, _RATE, bands, reference)
        _draw_curve(ax_curve, frame, _rate_columns(native, rates), band, reference, legend=(i == 0), compact=True)
        if c == ncols - 1 or i == len(names) - 1:
            _native_axis(ax_curve, native)
        _draw_indicators(ax_ind, frame, axes, labels=(c == 0),
                         groups=(c == ncols - 1 or i == len(names) - 1))
        _position_ticks(ax_ind, len(frame), nbins=5)
        ax_ind.set_xlabel(f"lowest to highest {'rate' if rates == 'compliance' else rate_name(rates)} "
                          f"(n = {len(frame)})", fontsize=9)
        ax_curve.set_title(literal(name), loc="left", fontsize=10, pad=_title_pad(True))
        if c:
            ax_curve.set_ylabel("")
    handles, labels = curve_axes[0].get_legend_handles_labels()
    legend = fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    heading = fig.suptitle(literal(title), x=0.01, ha="left", fontsize=11) if title else None
    return fit_panels(fig, grid, cells, width=3.4, height=top_h + bottom_h, legend=legend, title=heading)
