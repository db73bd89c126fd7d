"""Figures that only the report used to exercise: each panel and dot is where the data says."""

from __future__ import annotations

import pandas as pd

from multiverse.plots.factors import plot_factor_rates


def _rates() -> pd.DataFrame:
    rows = []
    for factor, levels in (("interaction_condition", ["material_reliance", "outside_basis"]), ("behavior", ["a", "b", "c"])):
        for i, level in enumerate(levels):
            for j, system in enumerate(["atlas", "beacon"]):
                rate = 0.2 + 0.1 * i + 0.3 * j
                rows.append({"factor": factor, "level": level, "system": system, "rate": rate,
                             "ci_low": rate - 0.05, "ci_high": rate + 0.05})
    return pd.DataFrame(rows)


def test_factor_rates_draw_one_panel_per_factor_with_every_level_and_rate():
    figure = plot_factor_rates(_rates())
    panels = [ax for ax in figure.axes if ax.get_yticklabels()]
    assert len(panels) == 2
    labels = [[t.get_text() for t in ax.get_yticklabels()] for ax in panels]
    assert labels[0] == ["material_reliance", "outside_basis"] or labels[0][::-1] == ["material_reliance", "outside_basis"]
    assert sorted(labels[1]) == ["a", "b", "c"]
    # every rate is drawn as a dot at its x position
    # one series of dots per system per panel, at the rates given
    drawn = sorted(round(float(x), 3) for ax in panels for line in ax.lines if line.get_marker() == "o"
                   for x in line.get_xdata())
    assert drawn == sorted(round(float(r), 3) for r in _rates()["rate"])
    legend = panels[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["atlas", "beacon"]
