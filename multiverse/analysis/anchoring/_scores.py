"""Anchoring a scored run: human scores on the judge's scale, and what each universe's estimator makes of them.

A scored judge (``judge.scale`` ordinal or continuous) gives each transcript
a score; people then give the transcripts of the labelling sample a score on
the same scale. Each universe reads both through its own estimator, exactly
as its rate reads the judge's (``analysis.estimates``):

``mean``
    the score rescaled to [0, 1], ``(score - min) / (max - min)``: the
    anchored rate is the human mean score, rescaled (PPI++ for a bounded
    mean, ``ppi_interval.ppi_bounded_mean``), and ``min + rate (max - min)``
    the mean in the scale's units;
``at_least``
    1 when the score is at or above the universe's cut: the anchored rate is
    the share of transcripts people score at or above it (the 0/1 PPI++ of
    ``ppi_interval.ppi_binary``).

What cannot be anchored is refused in one line: a pairwise scale (its score
compares two transcripts; people label one at a time), a win rate, a human
score off the scale (outside it, or not a whole number on an ordinal scale),
and a labels file that gives compliant labels where the run has scores, or
scores where it has compliant labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from multiverse.core import SCORE
from multiverse.errors import InputError

from .._kernel import MEAN_ESTIMATORS, contributions

if TYPE_CHECKING:
    from multiverse.tables import ScaleRecord

__all__ = ["check_anchorable", "human_contributions", "human_scores", "mean_agreement", "native", "scale_words"]


def scale_words(scale: ScaleRecord) -> str:
    """The scale as a message names it: "a whole number from 1 to 5 (the ordinal scale)"."""
    kind = "a whole number" if scale.type == "ordinal" else "a number"
    return f"{kind} from {scale.min:g} to {scale.max:g} (the judge's {scale.type} scale)"


def check_anchorable(scale: ScaleRecord, scoring: pd.DataFrame | None, source: str) -> None:
    """Refuse (one line) a scored run that human scores cannot anchor: a pairwise scale or a win rate."""
    if scale.type == "pairwise":
        raise InputError(f"{source}: scale: the run's judge gives pairwise scores (each system against "
                         f"{scale.reference or 'a reference'}); people label one transcript at a time, so those cannot be "
                         "anchored; expected a run with an ordinal or continuous scale, or compliant labels", param="human")
    if scoring is not None:
        wins = scoring.loc[scoring["estimator"].eq("win_rate"), "universe_id"]
        if len(wins):
            raise InputError(f"{source}: scoring.estimator: universe {wins.iloc[0]} reads a win rate, which people "
                             "labelling one transcript at a time cannot anchor; expected mean or at_least", param="human")


def human_scores(human: pd.DataFrame, scale: ScaleRecord, source: str) -> tuple[pd.Series, int]:
    """The human scores as floats on the judge's scale, blank rows dropped; refuses a score off the scale.

    ``human``'s index is the row's position in its file (messages count file rows from 2, after the header).
    """
    if SCORE not in human.columns:
        hint = (" (it has compliant labels, but this run's judge gives scores: people score each transcript on "
                "the same scale)") if "compliant" in human.columns else ""
        raise InputError(f"{source}: score: column missing; expected each labelled transcript's human score, "
                         f"{scale_words(scale)}{hint}", param="human")
    raw = human[SCORE]
    text = raw.astype(object).where(raw.notna(), "").astype(str).str.strip()
    blank = text.eq("")
    value = pd.to_numeric(text[~blank], errors="coerce").astype(float)
    with np.errstate(invalid="ignore"):
        bad = (~np.isfinite(value) | (value < scale.min) | (value > scale.max)
               | ((scale.type == "ordinal") & (value != np.round(value))))
    if bad.any():
        row = bad.idxmax()
        more = f", and {int(bad.sum()) - 1} more rows" if bad.sum() > 1 else ""
        shown = text[row] if len(text[row]) <= 40 else text[row][:40] + "..."
        raise InputError(f"{source}: row {int(np.flatnonzero(human.index == row)[0]) + 2}: score: expected "
                         f"{scale_words(scale)}, got {shown!r}{more}", param="human")
    return value, int(blank.sum())


def human_contributions(frame: pd.DataFrame, human: pd.Series, scale: ScaleRecord,
                        scoring: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's human contribution (NaN: not labelled) and whether its universe reads a mean.

    ``frame`` has ``universe_id``; ``human`` is each row's human score (NaN
    where nobody scored it). The contribution is the judge's own rule
    (``estimates.contributions``) applied to the human score.
    """
    as_verdicts = pd.DataFrame({"universe_id": frame["universe_id"].to_numpy(),
                                "compliant": pd.array([pd.NA] * len(frame), dtype="boolean"),
                                SCORE: np.asarray(human, float)})
    y = contributions(as_verdicts, scale, scoring)
    if scoring is None:
        return y, np.zeros(len(frame), bool)
    estimator = scoring.drop_duplicates("universe_id").set_index("universe_id")["estimator"]
    means = estimator.reindex(pd.Index(frame["universe_id"].astype(str))).isin(MEAN_ESTIMATORS).to_numpy()
    return y, means


def native(rates: pd.DataFrame, scale: ScaleRecord, means: np.ndarray) -> pd.DataFrame:
    """``rates`` with each mean universe's rates in the scale's units (NaN for a share): ``*_mean`` columns."""
    span = scale.max - scale.min
    out = rates.copy()
    for column, source in (("judge_mean", "judge_rate"), ("mean", "rate"), ("mean_ci_low", "ci_low"),
                           ("mean_ci_high", "ci_high"), ("human_mean", "human_rate"),
                           ("human_mean_ci_low", "human_ci_low"), ("human_mean_ci_high", "human_ci_high")):
        out[column] = np.where(means, scale.min + rates[source].to_numpy(float) * span, np.nan)
    return out


def mean_agreement(people: pd.DataFrame, scale: ScaleRecord) -> pd.DataFrame:
    """Per universe, the judge against people on the labelled transcripts of a mean: mean_difference, correlation.

    ``people``: universe_id, ``_y`` and ``_f`` (both rescaled to [0, 1]).
    ``mean_difference`` is the judge's mean score minus the people's, in the
    scale's units; ``correlation`` is Pearson's (None where either is constant).
    """
    span = scale.max - scale.min
    rows: list[dict[str, Any]] = []
    for universe, part in people.groupby("universe_id", sort=False):
        y, f = part["_y"].to_numpy(float), part["_f"].to_numpy(float)
        r = float(np.corrcoef(y, f)[0, 1]) if len(y) > 1 and y.std() > 0 and f.std() > 0 else None
        rows.append({"universe_id": universe, "mean_difference": float((f - y).mean() * span), "correlation": r})
    return pd.DataFrame(rows, columns=["universe_id", "mean_difference", "correlation"])
