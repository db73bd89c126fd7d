"""Anchored rates in the shapes the curve, the ranking and the report already draw.

``calibrate`` gives one anchored rate per universe x system. These functions
turn it into a specification-curve frame (so ``multiverse.plots.plot_curve``
draws the human-anchored curve beside the judge-raw one) and answer whether
the ranking of systems survives the correction, universe by universe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._calibrate import Calibration

__all__ = ["anchored_curve", "paired_curves", "ranking_change"]


def anchored_curve(calibration: Calibration | pd.DataFrame, axes: Sequence[str], *, primary: Any = None,
                   raw: bool = False) -> pd.DataFrame:
    """A ``spec_curve``-shaped frame of the anchored rates (or, with ``raw``, of the judges' own).

    Columns: universe_id, axes, system, n, n_compliant, rate, ci_low,
    ci_high, position (1 = lowest rate within the system), is_primary; ``n`` is
    the human labels behind the anchored rate. ``raw=True`` gives the judge
    rates of the same cells (no interval: ``spec_curve`` on the verdicts has
    the judge's own), so both curves list the same universes. Cells without an
    anchored rate are left out.
    """
    rates = calibration.rates if isinstance(calibration, Calibration) else calibration
    axes = [a for a in axes if a in rates.columns]
    frame = rates[rates["rate"].notna()].copy()
    if raw:
        frame = frame.assign(rate=frame["judge_rate"], ci_low=np.nan, ci_high=np.nan, n_used=frame["n"])
    else:
        frame = frame.assign(n_used=frame["n_human"])
    frame["rate"] = frame["rate"].astype(float)
    frame["n_compliant"] = (frame["rate"] * frame["n_used"]).round().astype(np.int64)
    frame = frame.drop(columns="n").rename(columns={"n_used": "n"})
    frame = frame.sort_values(["system", "rate", "universe_id"], kind="stable")
    frame["position"] = frame.groupby("system", sort=False).cumcount() + 1
    frame["is_primary"] = (frame["universe_id"] == primary) if primary is not None else False
    out = frame[["universe_id", *axes, "system", "n", "n_compliant", "rate", "ci_low", "ci_high", "position",
                 "is_primary"]].reset_index(drop=True)
    out.attrs["ci"] = "none (judge rates)" if raw else "ppi++"
    return out


def paired_curves(judge_curve: pd.DataFrame, anchored: pd.DataFrame) -> pd.DataFrame:
    """One frame for ``plot_curves(..., col_wrap=2)``: each system's judge-raw curve, then its anchored curve.

    ``judge_curve`` is ``spec_curve`` on the verdicts (with the judges' own
    intervals), ``anchored`` is ``anchored_curve``; the judge curve keeps the
    universes that have an anchored rate, so both panels of a system list the
    same universes. Systems are renamed ``<system> · judge alone`` and
    ``<system> · anchored to people``, in pairs.
    """
    keep = judge_curve.merge(anchored[["universe_id", "system"]], on=["universe_id", "system"])
    parts = []
    for system in dict.fromkeys(anchored["system"]):
        judge = keep[keep["system"] == system].sort_values(["rate", "universe_id"], kind="stable")
        judge = judge.assign(rank=range(1, len(judge) + 1), system=f"{system} · judge alone")
        parts += [judge, anchored[anchored["system"] == system].assign(system=f"{system} · anchored to people")]
    columns = list(anchored.columns)
    return pd.concat([p[columns] for p in parts], ignore_index=True)


def ranking_change(calibration: Calibration | pd.DataFrame, *, primary: Any = None) -> dict[str, Any]:
    """Does each universe's ranking of systems survive anchoring to people?

    Per universe: the systems ordered by the judge's rate and by the anchored
    rate (highest first), whether the top system is the same, and whether the
    anchored top is separable from the runner-up (their intervals do not
    overlap). JSON-ready::

        {"universes": [{universe_id, judge_order, anchored_order, same_top, same_order,
                        anchored_top_separable}],
         "same_top": share of universes, "same_order": share, "primary": the primary's entry or None}
    """
    rates = calibration.rates if isinstance(calibration, Calibration) else calibration
    rates = rates[rates["rate"].notna()]
    entries = []
    for universe, cell in rates.groupby("universe_id", sort=False):
        if len(cell) < 2:
            continue
        judge = cell.sort_values(["judge_rate", "system"], ascending=[False, True], kind="stable")
        anchored = cell.sort_values(["rate", "system"], ascending=[False, True], kind="stable")
        top, second = anchored.iloc[0], anchored.iloc[1]
        entries.append({
            "universe_id": universe,
            "judge_order": judge["system"].tolist(),
            "anchored_order": anchored["system"].tolist(),
            "same_top": bool(judge["system"].iloc[0] == top["system"]),
            "same_order": judge["system"].tolist() == anchored["system"].tolist(),
            "anchored_top_separable": bool(top["ci_low"] > second["ci_high"]),
        })
    def share(key: str) -> float | None:
        return float(np.mean([e[key] for e in entries])) if entries else None

    return {"universes": entries, "same_top": share("same_top"), "same_order": share("same_order"),
            "primary": next((e for e in entries if e["universe_id"] == primary), None)}
