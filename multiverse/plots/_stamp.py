"""The stamp every figure drawn from a simulated run carries: SIMULATED, across the figure.

A figure travels alone (pasted into slides, attached to a mail) and loses the
page or the script that said where its numbers came from. Numbers from the
built-in simulated world (``sim/`` models) must never pass for measurements of
real models, so such a figure says SIMULATED on itself, large, faint and
diagonal: it stays readable, cannot be cropped away with a margin and does not
move anything the figure lays out (it takes no part in the layout or in a
tight bounding box). :meth:`multiverse.results.Analysis.figure` and the
report apply it; a script drawing its own figure of a simulated run calls
:func:`stamp_simulated` too.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure, SubFigure

__all__ = ["STAMP", "is_stamped", "stamp_simulated"]

STAMP = "SIMULATED"
_GID = "multiverse-simulated-stamp"
_COLOUR = "#b42318"
# Share of the figure's diagonal the word spans, and a bold glyph's width over its font size (DejaVu Sans).
_SPAN, _GLYPH = 0.55, 0.68


def stamp_simulated(figure: Figure | SubFigure) -> Figure | SubFigure:
    """Write SIMULATED across ``figure`` (once: a stamped figure is returned as it is) and return it."""
    if is_stamped(figure):
        return figure
    width, height = (float(v) for v in figure.get_figure(root=True).get_size_inches())
    diagonal = math.hypot(width, height) * 72.0  # points
    size = _SPAN * diagonal / (_GLYPH * len(STAMP))
    text = figure.text(0.5, 0.5, STAMP, transform=figure.transFigure, ha="center", va="center",
                       rotation=math.degrees(math.atan2(height, width)), rotation_mode="anchor",
                       fontsize=size, fontweight="bold", color=_COLOUR, alpha=0.11, zorder=1000, gid=_GID)
    text.set_in_layout(False)
    return figure


def is_stamped(figure: Figure | SubFigure) -> bool:
    """Whether ``figure`` carries the SIMULATED stamp."""
    return any(t.get_gid() == _GID for t in figure.texts)
