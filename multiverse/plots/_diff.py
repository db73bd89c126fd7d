"""The difference curves of one run against another: per system, every universe's change, lowest first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from multiverse.core import rate_name
from multiverse.errors import InputError
from multiverse.plots._literal import literal

__all__ = ["plot_diff"]

_REQUIRED = ("universe_id", "system", "difference", "ci_low", "ci_high")
_POINT, _WORSE = "#1f4e79", "#b42318"
_DENSE = 60  # past this many universes a panel draws a line and a band, not points with bars
_COLUMNS = 3


class NotWorse(Protocol):
    """What a panel reads of a system's not-worse test (``gate.NotWorseTest`` is one)."""

    @property
    def system(self) -> str: ...

    @property
    def p_worse(self) -> float: ...

    @property
    def worse(self) -> bool: ...


def _panel(ax: Axes, part: pd.DataFrame, title: str, worse: bool) -> None:
    part = part.sort_values(["difference", "universe_id"], kind="stable")
    x = np.arange(1, len(part) + 1)
    y = part["difference"].to_numpy(dtype=float)
    low, high = part["ci_low"].to_numpy(dtype=float), part["ci_high"].to_numpy(dtype=float)
    colour = _WORSE if worse else _POINT
    ax.axhline(0.0, color="0.25", lw=0.8, ls=":", zorder=1)
    if len(part) <= _DENSE:
        ax.errorbar(x, y, yerr=np.clip([y - low, high - y], 0, None), fmt="o", ms=4, color=colour,
                    ecolor=colour, elinewidth=1.1, capsize=2, zorder=3)
    else:
        ax.fill_between(x, low, high, color=colour, alpha=0.25, lw=0, zorder=2)
        ax.plot(x, y, color=colour, lw=1.2, zorder=3)
    ax.set_title(literal(title), fontsize=9, loc="left")
    ax.set_xlim(0.3, len(part) + 0.7)
    ax.grid(axis="y", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def plot_diff(frame: pd.DataFrame, *, tests: Sequence[NotWorse] = (), title: str | None = None,
              fig: Figure | None = None, rates_read: str = "compliance") -> Figure:
    """One panel per system: ``rate(candidate) - rate(baseline)`` per universe with its 95% interval, sorted.

    ``rates_read`` (``compliance`` or ``violation``) names the rates on the axis; ``frame`` is already read
    that way (``Diff.read_frame``, flipped by ``core.orient``): a worse candidate sits below 0 in compliance
    and above 0 in violation.

    ``frame`` is a diff's table (``Diff.frame``); ``tests`` its per-system joint
    tests, whose Holm-adjusted p that the candidate is worse titles each panel
    (red when it is at most the diff's alpha, as ``worse`` says).
    """
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(f"frame: {', '.join(missing)}: expected the columns of a diff's table")
    if frame.empty:
        raise InputError("frame: expected at least one universe compared")
    systems = list(dict.fromkeys(frame["system"].astype(str)))
    p_worse = {t.system: float(t.p_worse) for t in tests}
    worse = {t.system for t in tests if t.worse}
    n_cols = min(_COLUMNS, len(systems))
    n_rows = -(-len(systems) // n_cols)
    figure = fig or Figure(figsize=(3.6 * n_cols + 0.6, 2.7 * n_rows + 0.8), layout="constrained")
    axes = np.atleast_1d(figure.subplots(n_rows, n_cols, sharey=True, squeeze=False)).ravel()
    for ax, system in zip(axes, systems):
        part = frame[frame["system"].astype(str) == system]
        p = p_worse.get(system)
        shown = f"{system}: median {part['difference'].median():+.3f}" + (
            f", p worse {p:.3g}" if p is not None else "")
        _panel(ax, part, shown, system in worse)
    for ax in axes[len(systems):]:
        ax.set_visible(False)
    for ax in axes[::n_cols]:
        ax.set_ylabel(f"candidate − baseline\n({rate_name(rates_read)})")
    for ax in axes[len(systems) - n_cols: len(systems)]:
        ax.set_xlabel("universe (lowest difference first)")
    figure.suptitle(literal(title or "Change from the baseline run, per universe (95% CI, clustered by case)"),
                    fontsize=10)
    return figure
