"""Figures that only the report used to exercise: each panel and dot is where the data says."""

from __future__ import annotations

import pandas as pd

from multiverse.plots import plot_factor_rates


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


def test_the_simulated_stamp_is_once_and_moves_nothing():
    """Stamping twice stamps once; the stamp takes no part in the layout or a tight bounding box."""
    import io

    from matplotlib.figure import Figure

    from multiverse.plots._stamp import STAMP, is_stamped, stamp_simulated

    def png(figure) -> bytes:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=50, bbox_inches="tight")
        return buffer.getvalue()

    for size in ((6, 4), (12, 2.5), (3, 8)):
        plain, stamped = (Figure(figsize=size, layout="constrained") for _ in range(2))
        for figure in (plain, stamped):
            figure.add_subplot().plot([0, 1], [0, 1])
        assert stamp_simulated(stamp_simulated(stamped)) is stamped
        assert is_stamped(stamped) and not is_stamped(plain)
        assert [t.get_text() for t in stamped.texts] == [STAMP]
        a, b = png(plain), png(stamped)
        assert a[16:24] == b[16:24]  # the same width and height: nothing was pushed or grown
        assert a != b  # and the stamp is drawn
