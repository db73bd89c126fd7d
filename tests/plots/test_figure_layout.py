"""Figures as a reader sees them: nothing cut off, panels of one size, labels off the data, options in the
spec's order, and run-supplied names drawn literally (never as mathtext).

Every check measures the drawn figure (Agg): artists' window extents against
the figure's box, axes positions, and the points' display coordinates.
"""

from __future__ import annotations

import io
import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib import cbook
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from multiverse.analysis import difference_curve, joint_difference_test, joint_rate_test, spec_curve

# Declared orders that sorting by text would change.
OPTIONS = {"user": ["cooperative", "adversarial"], "evidence": ["strict", "lenient", "balanced"],
           "scoring": ["zeta_rule", "impermissible_only_and_then_some", "all"]}
NASTY = ["$", "$x^2$", "a $\\b $_c", "snake_case_name", "back\\slash", "<script>alert(1)</script>"]


def _verdicts(systems, *, axes=OPTIONS, n_cases=12, seed=0, shift=None) -> pd.DataFrame:
    """Verdicts whose rates rise with the universe index, so curves are steep and points reach the top."""
    rng = np.random.default_rng(seed)
    combos = list(itertools.product(*axes.values()))
    rows = []
    for u, combo in enumerate(combos):
        for k, system in enumerate(systems):
            base = shift[k] if shift is not None else 0.15 + 0.8 * u / max(len(combos) - 1, 1)
            for c in range(n_cases):
                rows.append({"universe_id": f"u{u:03d}", **dict(zip(axes, combo)), "system": system,
                             "case_id": f"c{c}", "status": "ok", "compliant": bool(rng.random() < base)})
    return pd.DataFrame(rows)


def _drawn(fig):
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _outside(fig, renderer) -> list[str]:
    """What reaches past the figure's edge by more than a pixel: an Axes with everything it draws (tick
    labels, title, legend, texts), or a figure-level legend or title."""
    box = fig.bbox

    def past(extent) -> bool:
        return extent.x0 < box.x0 - 1 or extent.y0 < box.y0 - 1 or extent.x1 > box.x1 + 1 or extent.y1 > box.y1 + 1

    found = [f"axes {ax.get_title(loc='left') or ax.get_title()!r}" for ax in fig.axes
             if past(ax.get_tightbbox(renderer))]
    found += ["figure legend" for legend in fig.legends if past(legend.get_window_extent(renderer))]
    found += [t.get_text() for t in fig.texts if t.get_text() and past(t.get_window_extent(renderer))]
    return found


def _curve_figures():
    from multiverse.plots import agreement_figure, plot_curve, plot_curves, plot_difference_curve, plot_factor_rates

    v = _verdicts(["atlas", "beacon_with_a_long_name", "cobalt"], shift=[0.3, 0.6, 0.9])
    axes = list(OPTIONS)
    curve = spec_curve(v, axes=axes, primary="u004")
    band = joint_rate_test(v, axes=axes, system="atlas", threshold=0.5, boot=50).band
    diff = difference_curve(v, axes=axes, a="cobalt", b="atlas", primary="u004")
    diff_band = joint_difference_test(v, axes=axes, a="cobalt", b="atlas", boot=50).band
    rates = pd.DataFrame([{"factor": f, "level": lvl, "system": s, "rate": 0.5, "ci_low": 0.4, "ci_high": 0.6}
                          for f, levels in (("behavior", ["fabricate_evidence", "b"]), ("condition", ["x"]))
                          for lvl in levels for s in ("atlas", "a_system_with_a_rather_long_name")])
    pairs = pd.DataFrame([{"a": "judge_a", "b": "judge_b", "cohen_kappa": 0.5, "gwet_ac1": 0.6}])
    yield "curve", plot_curve(curve, axes=axes, system="atlas", null_band=band, reference=0.5)
    yield "curves", plot_curves(curve, axes=axes, reference=0.5)
    yield "difference", plot_difference_curve(diff, axes=axes, null_band=diff_band)
    yield "factors", plot_factor_rates(rates)
    yield "agreement", agreement_figure(pairs, axis_name="judge")


@pytest.mark.parametrize("name", ["curve", "curves", "difference", "factors", "agreement"])
def test_every_legend_and_label_lies_inside_the_figure(name):
    fig = dict(_curve_figures())[name]
    assert _outside(fig, _drawn(fig)) == []


@pytest.mark.parametrize("n_systems,col_wrap", [(2, None), (3, None), (4, None), (4, 2), (5, None), (7, 3)])
def test_small_multiples_have_panels_of_one_width(n_systems, col_wrap):
    from multiverse.plots import plot_curves

    systems = [f"s{k}" for k in range(n_systems)]
    curve = spec_curve(_verdicts(systems), axes=list(OPTIONS), primary="u000")
    fig = plot_curves(curve, axes=list(OPTIONS), col_wrap=col_wrap)
    _drawn(fig)
    widths = [ax.get_window_extent().width for ax in fig.axes]
    heights = {round(ax.get_window_extent().height, 1) for ax in fig.axes[0::2]}
    assert max(widths) - min(widths) < 1.0, widths  # pixels
    assert len(heights) == 1
    assert _outside(fig, fig.canvas.get_renderer()) == []


def _points_px(ax, frame, value="rate") -> np.ndarray:
    return ax.transData.transform(np.column_stack([frame["position"], frame[value]]).astype(float))


@pytest.mark.parametrize("n_universes_axes,primary_at", [
    ({"a": ["x", "y"], "b": ["p", "q", "r"]}, "first"),
    ({"a": ["x", "y"], "b": ["p", "q", "r"]}, "last"),
    (OPTIONS, "first"), (OPTIONS, "middle"), (OPTIONS, "last"),
])
def test_primary_label_covers_no_point(n_universes_axes, primary_at):
    from multiverse.plots import plot_curves

    v = _verdicts(["atlas", "beacon"], axes=n_universes_axes, n_cases=40)
    curve = spec_curve(v, axes=list(n_universes_axes))
    ordered = curve[curve["system"] == "atlas"].sort_values("position")["universe_id"].tolist()
    primary = {"first": ordered[0], "middle": ordered[len(ordered) // 2], "last": ordered[-1]}[primary_at]
    curve = spec_curve(v, axes=list(n_universes_axes), primary=primary)
    fig = plot_curves(curve, axes=list(n_universes_axes))
    renderer = _drawn(fig)
    marker = 5 / 72 * fig.dpi  # the dots' size, in pixels
    for ax, system in zip(fig.axes[0::2], ["atlas", "beacon"]):
        labels = [t for t in ax.texts if t.get_text().startswith("primary")]
        assert len(labels) == 1
        box = labels[0].get_window_extent(renderer).expanded(1.0, 1.0)
        frame = curve[curve["system"] == system]
        for (x, y), low, high in zip(_points_px(ax, frame), _points_px(ax, frame, "ci_low")[:, 1],
                                     _points_px(ax, frame, "ci_high")[:, 1]):
            # The dot, and its interval's vertical extent, stay clear of the label box.
            assert not (box.x0 - marker < x < box.x1 + marker and box.y0 - marker < y < box.y1 + marker)
            assert not (box.x0 < x < box.x1 and min(low, high) < box.y1 and max(low, high) > box.y0)
        title = ax.title.get_window_extent(renderer)
        assert not box.overlaps(title)


def test_primary_label_says_position_from_lowest_not_rank():
    from multiverse.plots import plot_curve

    v = _verdicts(["atlas"], n_cases=30)
    curve = spec_curve(v, axes=list(OPTIONS), primary="u001")
    row = curve[curve["is_primary"]].iloc[0]
    fig = plot_curve(curve, axes=list(OPTIONS))
    text = next(t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("primary"))
    assert "rank" not in text
    rates = curve["rate"].to_numpy()
    low, high = int((rates < row["rate"]).sum()) + 1, int((rates <= row["rate"]).sum())
    assert low <= int(row["position"]) <= high

    def ordinal(k):
        return f"{k}" + {1: "st", 2: "nd", 3: "rd"}.get(k % 10 if k % 100 not in (11, 12, 13) else 0, "th")
    expected = (f"{ordinal(low)} lowest of {len(curve)}" if low == high
                else f"{ordinal(low)}–{ordinal(high)} lowest of {len(curve)} ({high - low + 1} tied)")
    assert expected in text
    assert "lowest to highest" in fig.axes[1].get_xlabel()


def test_a_primary_tied_with_other_universes_is_labelled_with_the_range_they_share():
    from multiverse.plots import plot_curve

    v = _verdicts(["atlas"], n_cases=30)
    curve = spec_curve(v, axes=list(OPTIONS), primary="u001")
    primary = curve[curve["is_primary"]].iloc[0]
    # every universe but one other at the primary's rate: the label must name the range they share
    other = curve.loc[~curve["is_primary"], "universe_id"].iloc[0]
    tied = curve.assign(rate=np.where(curve["universe_id"] == other, primary["rate"] + 0.1, primary["rate"]))
    tied = tied.assign(ci_low=tied["rate"] * 0.9, ci_high=np.minimum(tied["rate"] * 1.1, 1.0))
    fig = plot_curve(tied, axes=list(OPTIONS))
    text = next(t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("primary"))
    n = len(curve)
    assert f"1st–{n - 1}th lowest of {n} ({n - 1} tied)" in text


def test_options_follow_the_declared_order():
    from multiverse.plots import plot_curve, plot_curves, plot_difference_curve

    v = _verdicts(["atlas", "beacon"])
    axes = list(OPTIONS)
    curve = spec_curve(v, axes=axes, primary="u000")
    expected = [o for a in axes for o in OPTIONS[a]]
    figures = [plot_curve(curve, axes=axes, system="atlas", options=OPTIONS),
               plot_curves(curve, axes=axes, options=OPTIONS),
               plot_difference_curve(difference_curve(v, axes=axes, a="atlas", b="beacon"), axes=axes,
                                     options=OPTIONS)]
    for fig in figures:
        labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
        assert labels == expected
        assert expected != sorted(expected)  # the test would pass by accident if the order were the sorted one


def test_categorical_axes_with_unused_options_draw_in_declared_order_without_a_deprecation():
    """A run's tables hold axis columns as categoricals; a subset of its universes leaves categories no row uses.
    Reordering those onto the declared options is deprecated in pandas 3 (it raises in 4): the plot must not."""
    import warnings

    from multiverse.plots import plot_curve, plot_curves

    declared = {**OPTIONS, "evidence": ["strict", "unused", "lenient", "balanced"]}
    v = _verdicts(["atlas", "beacon"])
    for axis in OPTIONS:
        v[axis] = pd.Categorical(v[axis], categories=sorted({*declared[axis], "never_declared"}))
    axes = list(OPTIONS)
    curve = spec_curve(v, axes=axes, primary="u000")
    assert isinstance(curve["evidence"].dtype, pd.CategoricalDtype), "the check needs categorical axis columns"
    expected = [o for a in axes for o in OPTIONS[a]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures = [plot_curve(curve, axes=axes, system="atlas", options=declared),
                   plot_curves(curve, axes=axes, options=declared)]
    for fig in figures:
        assert [t.get_text() for t in fig.axes[1].get_yticklabels()] == expected


def test_run_supplied_names_are_drawn_literally():
    from multiverse.plots import agreement_figure, plot_curves, plot_difference_curve, plot_factor_rates

    axes = {NASTY[2]: ["$", "$x^2$"], "b_\\axis": ["p$q", "r"]}
    v = _verdicts(NASTY[:4], axes=axes)
    curve = spec_curve(v, axes=list(axes))
    rates = pd.DataFrame([{"factor": "$f$", "level": lvl, "system": s, "rate": 0.5, "ci_low": 0.4, "ci_high": 0.6}
                          for lvl in NASTY[:2] for s in NASTY])
    pairs = pd.DataFrame([{"a": NASTY[0], "b": NASTY[1], "cohen_kappa": 0.5, "gwet_ac1": 0.6}])
    from multiverse.analysis import system_rates, variance
    from multiverse.plots import plot_variance, ranking_figure

    terms = pd.DataFrame(variance(v, axes=list(axes))["terms"])
    figures = [plot_curves(curve, axes=list(axes)),
               ranking_figure(system_rates(v, axes=list(axes)), axes=list(axes)),
               plot_variance(terms).figure,
               plot_difference_curve(difference_curve(v, axes=list(axes), a=NASTY[1], b=NASTY[2]), axes=list(axes)),
               plot_factor_rates(rates),
               agreement_figure(pairs, axis_name=NASTY[2])]
    shown = []
    for fig in figures:
        fig.savefig(io.BytesIO(), format="png")  # raises on a mathtext parse error
        for text in fig.findobj(Text):
            raw = text.get_text()
            assert not cbook.is_math_text(raw), raw
            shown.append(raw.replace("\\$", "$"))
    drawn = "\n".join(shown)
    for name in NASTY[:4] + ["$f$", "b_\\axis", "p$q"]:
        assert name in drawn, name


def test_variance_value_labels_clear_the_bar_and_its_noise_tick():
    """A label sits past whichever ends later, its bar or its noise tick (a tick can lie beyond a small bar)."""
    from multiverse.plots import plot_variance

    terms = pd.DataFrame({
        "term": ["judge", "user", "judge:system", "system", "Residual"],
        "kind": ["axis", "axis", "interaction", "system", "residual"],
        "share": [0.194, 0.12, 0.002, 0.017, 0.055],
        "noise": [0.001, 0.15, 0.004, 0.005, 0.017],
    })
    ax = plot_variance(terms)
    fig = ax.figure
    renderer = _drawn(fig)
    labels = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    ordered = terms.sort_values("share", kind="stable").reset_index(drop=True)
    tick_half = 1.6 / 2 * fig.dpi / 72  # the tick's line width, in pixels
    for y, row in ordered.iterrows():
        box = labels[f"{row['share']:.1%}"]
        bar_end = ax.transData.transform((row["share"], y))[0]
        tick = ax.transData.transform((row["noise"], y))[0]
        assert box.x0 > bar_end and box.x0 > tick + tick_half + 1, row["term"]
        assert box.x1 <= ax.get_window_extent(renderer).x1 + 1  # inside the axes, not cut off
