"""Equal panels: size a figure so every cell of a grid gets the same plotting area, with room for its labels.

matplotlib's constrained layout gives each column the margins its own labels
need, so panels with labels (the first column's option names, the last
column's axis names) come out narrower than the rest. Here the margins and
gaps are measured from the drawn labels, then the figure is sized around
cells of a fixed size in inches: every panel is exactly as wide as the
others, and every label, title and legend lies inside the figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import Bbox

__all__ = ["fit_panels"]

_PAD = 0.08  # inches around everything and between neighbours


def _overhangs(fig: Figure, renderer: RendererBase, axes: Sequence[Any]) -> tuple[float, float, float, float]:
    """How far (inches) the axes' labels reach past their plotting area: left, right, bottom, top."""
    area = Bbox.union([ax.get_position().transformed(fig.transFigure) for ax in axes])
    drawn = Bbox.union([ax.get_tightbbox(renderer) for ax in axes])
    dpi = fig.dpi
    return (max(area.x0 - drawn.x0, 0) / dpi, max(drawn.x1 - area.x1, 0) / dpi,
            max(area.y0 - drawn.y0, 0) / dpi, max(drawn.y1 - area.y1, 0) / dpi)


def fit_panels(fig: Figure, grid: GridSpec, cells: Mapping[tuple[int, int], Sequence[Any]], *, width: float,
               height: float, legend: Legend | None = None, title: Text | None = None, rounds: int = 3) -> Figure:
    """Lay out ``fig`` (no layout engine) so each occupied cell of ``grid`` is ``width`` x ``height`` inches.

    ``cells`` maps (row, column) to the Axes drawn in that cell (a cell may
    hold a nested grid, e.g. a curve over its indicator panel). ``legend`` is
    a figure legend kept centred below the panels; ``title`` a figure title
    (``fig.suptitle``) kept above them. The figure's size is set here.
    """
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    nrows, ncols = grid.get_geometry()
    for _ in range(rounds):
        renderer = canvas.get_renderer()
        over = {cell: _overhangs(fig, renderer, axes) for cell, axes in cells.items()}
        zero = (0.0, 0.0, 0.0, 0.0)
        left = max((o[0] for (r, c), o in over.items() if c == 0), default=0.0)
        right = max((o[1] for (r, c), o in over.items() if c == ncols - 1), default=0.0)
        top = max((o[3] for (r, c), o in over.items() if r == 0), default=0.0)
        bottom = max((o[2] for (r, c), o in over.items() if r == nrows - 1), default=0.0)
        # A cell's labels may reach into its neighbour's gap from either side.
        wgap = max((over.get((r, c), zero)[1] + over.get((r, c + 1), zero)[0]
                    for r in range(nrows) for c in range(ncols - 1)), default=0.0)
        hgap = max((over.get((r, c), zero)[2] + over.get((r + 1, c), zero)[3]
                    for r in range(nrows - 1) for c in range(ncols)), default=0.0)
        # A last row with fewer cells leaves an empty cell whose neighbour above draws its x labels.
        bottom = max([bottom] + [o[2] - (nrows - 1 - r) * (height + hgap) for (r, c), o in over.items()])
        extra_bottom = legend.get_window_extent(renderer).height / fig.dpi + _PAD if legend is not None else 0.0
        extra_top = title.get_window_extent(renderer).height / fig.dpi + _PAD if title is not None else 0.0
        left, right = left + _PAD, right + _PAD
        top, bottom = top + extra_top + _PAD, bottom + extra_bottom + _PAD
        wgap, hgap = wgap + 2 * _PAD, hgap + 2 * _PAD
        w = left + ncols * width + (ncols - 1) * wgap + right
        h = top + nrows * height + (nrows - 1) * hgap + bottom
        fig.set_size_inches(w, h)
        grid.update(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h,
                    wspace=wgap / width, hspace=hgap / height)
        for ax in fig.axes:
            spec = ax.get_subplotspec()
            if spec is not None:
                ax.set_position(spec.get_position(fig))
        if legend is not None:
            legend.set_bbox_to_anchor((0.5, _PAD / h), transform=fig.transFigure)
        if title is not None:
            title.set_y(1 - _PAD / h)
    return fig
