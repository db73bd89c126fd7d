"""Scores -> what each verdict contributes to its universe's rate: a value in [0, 1].

A universe's estimator and cut are measurement choices over the same
judgments (``spec.scoring``; an import records them per universe). Each
counted row's *contribution* is:

``pooled`` / ``cell_balanced`` (binary)
    its compliance label, 1 or 0;
``mean``
    ``(score - min) / (max - min)``: the rate is the mean score rescaled to
    [0, 1], and ``min + rate * (max - min)`` the mean in native units;
    ``min`` and ``max`` are the universe's own scale (an axis over
    ``judge.scale`` gives each universe its own: ``low`` and ``high`` of
    :func:`scoring_choices`);
``at_least``
    1 when ``score >= cut``, else 0: the rate is the share at or above the cut;
``win_rate``
    the rescaled preference over the reference system (``max`` a win, ``min`` a
    loss, the midpoint a tie, so a tie counts one half); with ``ties: exclude``
    a tie is left out of the rate.

A row without a score in a universe that reads scores (or without a label
where labels are read) does not count. Every analysis reads the
contributions through one column, ``contribution`` (:func:`with_contributions`),
so a row counts alike in the rates, the curve, the ranking and the variance.
The intervals: a share's is Wilson's with the case design effect
(:mod:`multiverse.analysis._kernel`); a mean's the cluster-robust t
interval of :func:`mean_interval`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from multiverse.core import ESTIMATORS, SCORE, SCORE_ESTIMATORS
from multiverse.errors import InputError

if TYPE_CHECKING:
    from multiverse.tables import Manifest, ScaleRecord, SpecDocument

__all__ = [
    "CONTRIBUTION",
    "FEW_OFF_EDGE",
    "MEAN_ESTIMATORS",
    "NO_SPREAD",
    "SCALE_ENDS",
    "case_mean_interval",
    "contributions",
    "edge_cases",
    "mean_interval",
    "scoring_choices",
    "with_contributions",
]

#: The derived column every analysis counts when the verdicts carry scores (never written to a folder).
CONTRIBUTION = "contribution"
#: Estimators whose rate is a mean of values in [0, 1] (a t interval), not a share (Wilson).
MEAN_ESTIMATORS = ("mean", "win_rate")

_CHOICE_COLUMNS = ("estimator", "cut", "ties")
#: The ends of each universe's own scale in a choices table: its scores are rescaled on them.
SCALE_ENDS = ("low", "high")
#: A mean's standard error at or below this is rounding of sums of equal values: no spread at all.
NO_SPREAD = 1e-12
#: Fewest cases with a value off an end of the scale (above 0, or below 1, whichever are fewer) that a mean's
#: standard error is trusted from; below it the interval holds the Wilson one at the number of cases too (as an
#: ICC needs 5 labels of the rarer kind, and the means' null stands in two points with fewer than 5 rare cases).
FEW_OFF_EDGE = 5


def scoring_choices(manifest: Manifest | None, spec: SpecDocument | None, *,
                    scores_only: bool = True) -> pd.DataFrame | None:
    """Each universe's estimator, cut, ties and scale: universe_id, estimator, cut, ties, low, high; None when
    nothing reads scores (``scores_only=False``: the table whenever there are universes, as the rates' recount
    needs a label estimator such as ``cell_balanced`` too).

    An import's manifest records them per universe (``universes[i].scoring``)
    or once (``estimator``); a run's resolved spec has ``scoring`` and may patch
    ``scoring.estimator``, ``scoring.cut`` or ``scoring.ties`` per axis option.
    ``low`` and ``high`` are the ends of the universe's own scale
    (``tables.universe_scales``): an axis over ``judge.scale`` gives each
    universe its own, and each universe's scores are read on it.
    """
    from multiverse.tables import universe_scales

    scales = universe_scales(manifest, spec)
    universes = manifest.universes if manifest is not None else []
    base: dict[str, Any] = {"estimator": None, "cut": None, "ties": None}
    if spec is not None and spec.scoring is not None:
        base.update({k: getattr(spec.scoring, k) for k in _CHOICE_COLUMNS})
    if manifest is not None and manifest.estimator is not None and base["estimator"] is None:
        base["estimator"] = manifest.estimator
    rows = []
    for universe in universes:
        choice = dict(base)
        if spec is not None:
            choice.update(_patched(universe.options, spec.axes))
        if universe.scoring is not None:
            choice.update({k: v for k, v in universe.scoring.model_dump().items() if v is not None})
        scale = scales[universe.id]
        rows.append({"universe_id": universe.id, **choice, **_ends(scale)})
    table = pd.DataFrame(rows, columns=["universe_id", *_CHOICE_COLUMNS, *SCALE_ENDS])
    if not table["estimator"].isin(SCORE_ESTIMATORS).any() and (scores_only or table.empty):
        return None
    return table


def _ends(scale: Any) -> dict[str, float]:
    # A binary universe has no scale to read a score on: NaN ends, so nothing is rescaled on 0..1 by mistake.
    return {"low": float(scale.min), "high": float(scale.max)} if scale.scored else {"low": np.nan, "high": np.nan}


def _patched(options: Mapping[str, Any], axes: Mapping[str, Mapping[str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for axis, option in options.items():
        for path, value in ((axes.get(axis) or {}).get(option) or {}).items():
            if path == "scoring" and isinstance(value, Mapping):
                found.update({k: value[k] for k in _CHOICE_COLUMNS if k in value})
            elif path.removeprefix("scoring.") in _CHOICE_COLUMNS and path.startswith("scoring."):
                found[path.removeprefix("scoring.")] = value
    return found


def contributions(frame: pd.DataFrame, scale: ScaleRecord, choices: pd.DataFrame | None) -> np.ndarray:
    """Each row's contribution to its universe's rate (float, NaN: the row does not count); see the module."""
    n = len(frame)
    label = frame["compliant"].astype("boolean").to_numpy(dtype=float, na_value=np.nan)
    if choices is None or SCORE not in frame.columns:
        return cast("np.ndarray", label)
    table = choices.drop_duplicates("universe_id").set_index("universe_id")
    ids = frame["universe_id"].astype(str) if not isinstance(frame["universe_id"].dtype, pd.CategoricalDtype) \
        else frame["universe_id"]
    estimator = table["estimator"].reindex(pd.Index(ids)).to_numpy(dtype=object)
    cut = pd.to_numeric(table["cut"], errors="coerce").reindex(pd.Index(ids)).to_numpy(dtype=float)
    ties = table["ties"].reindex(pd.Index(ids)).to_numpy(dtype=object)
    unknown = [e for e in pd.unique(estimator) if e is not None and not pd.isna(e) and e not in ESTIMATORS]
    if unknown:
        raise InputError(f"scoring.estimator: expected one of {', '.join(ESTIMATORS)}, got {unknown[0]!r}")
    score = frame[SCORE].to_numpy(dtype=float, na_value=np.nan)
    low, high = _row_ends(table, ids, scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        rescaled = (score - low) / (high - low)
    out = label.copy()
    means = np.isin(estimator, MEAN_ESTIMATORS)
    out[means] = rescaled[means]
    at_least = estimator == "at_least"
    if at_least.any() and np.isnan(cut[at_least]).any():
        raise InputError("scoring.cut: at_least needs a cut: the lowest score that counts")
    with np.errstate(invalid="ignore"):
        out[at_least] = np.where(np.isnan(score[at_least]), np.nan, (score[at_least] >= cut[at_least]).astype(float))
    exclude = (estimator == "win_rate") & (ties == "exclude") & (score == (low + high) / 2)
    out[exclude] = np.nan
    assert len(out) == n
    return cast("np.ndarray", out)


def _row_ends(table: pd.DataFrame, ids: Any, scale: ScaleRecord) -> tuple[np.ndarray, np.ndarray]:
    """Each row's scale ends: its universe's own (``low``, ``high`` of the choices), else ``scale``'s."""
    n = len(ids)
    if not set(SCALE_ENDS) <= set(table.columns):
        return np.full(n, float(scale.min)), np.full(n, float(scale.max))
    ends = []
    for column, default in zip(SCALE_ENDS, (scale.min, scale.max)):
        values = pd.to_numeric(table[column], errors="coerce").reindex(pd.Index(ids)).to_numpy(dtype=float)
        ends.append(np.where(np.isnan(values), float(default), values))
    return ends[0], ends[1]


def with_contributions(verdicts: pd.DataFrame, scale: ScaleRecord, choices: pd.DataFrame | None, *,
                       folder: Any = None) -> pd.DataFrame:
    """``verdicts`` with the ``contribution`` column, when a universe reads scores; unchanged otherwise.

    Binary verdicts are never touched, so every analysis of them stays exactly as it was. Rows of a scored
    scale holding a score and a label that no estimator tells apart are refused (``folder``: where the
    manifest lies, for the message): the labels would be counted in place of the scores, silently (a pairwise
    tie labelled compliant counted as a win).
    """
    if choices is None and scale.scored and {SCORE, "compliant"} <= set(verdicts.columns) \
            and (verdicts[SCORE].notna() & verdicts["compliant"].notna()).any():
        shown = f"{folder}/manifest.json" if folder is not None else "manifest"
        raise InputError(f"{shown}: estimator: the scale is {scale.type} and rows hold both a score and a label, "
                         f"but no universe says how they count: expected estimator {', '.join(SCORE_ESTIMATORS)} "
                         "(per universe in universes[].scoring)", param="estimator")
    if choices is None or SCORE not in verdicts.columns:
        return verdicts
    return verdicts.assign(**{CONTRIBUTION: contributions(verdicts, scale, choices)})


def mean_interval(target: np.ndarray, n_targets: int, case: np.ndarray, value: np.ndarray,
                  level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, standard error, low, high) of each target's values, clustered by case.

    The cluster-robust (CR1) variance of a mean, as a regression on a
    constant with ``cov_type='cluster'`` gives it: ``G / (G - 1) * sum_g e_g^2
    / N^2`` with ``e_g`` the sum of a case's deviations from the mean, ``G``
    cases and ``N`` rows; with one row per case it is ``s^2 / N``, the
    standard error of the mean. The interval is ``mean ± t_{G-1} se``, clipped
    to [0, 1]; with fewer than two cases it is all of [0, 1].
    """
    target = np.asarray(target, np.int64)
    case = np.asarray(case, np.int64)
    value = np.asarray(value, float)
    n = np.bincount(target, minlength=n_targets).astype(float)
    total = np.bincount(target, weights=value, minlength=n_targets)
    mean = np.divide(total, n, out=np.full(n_targets, np.nan), where=n > 0)
    pair, inverse = np.unique(target * (int(case.max(initial=0)) + 1) + case, return_inverse=True)
    pair_target = pair // (int(case.max(initial=0)) + 1)
    residual = np.bincount(inverse, weights=value - mean[target], minlength=len(pair))
    squares = np.bincount(pair_target, weights=residual**2, minlength=n_targets)
    cases = np.bincount(pair_target, minlength=n_targets).astype(float)
    from scipy import stats

    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.where(cases > 1, np.sqrt(cases / (cases - 1) * squares) / n, np.nan)
        t = stats.t.ppf(0.5 + level / 2, np.maximum(cases - 1, 1))
    low = np.where(cases > 1, np.clip(mean - t * se, 0.0, 1.0), np.where(n > 0, 0.0, np.nan))
    high = np.where(cases > 1, np.clip(mean + t * se, 0.0, 1.0), np.where(n > 0, 1.0, np.nan))
    case_sum = np.bincount(inverse, weights=value, minlength=len(pair))
    case_n = np.bincount(inverse, minlength=len(pair)).astype(float)
    off = np.minimum(*(np.bincount(pair_target, weights=side, minlength=n_targets)
                       for side in _off_edges(case_n, case_sum)))
    low, high = _without_spread(mean, se, cases, level, low, high, off < FEW_OFF_EDGE)
    return mean, se, low, high


def _off_edges(n: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each case's values (``n`` of them summing to ``k``) hold one above 0, and one below 1."""
    slack = 1e-9 * np.maximum(n, 1.0)
    return (n > 0) & (k > slack), (n > 0) & (k < n - slack)


def edge_cases(n_tc: np.ndarray, k_tc: np.ndarray) -> np.ndarray:
    """Per target (rows of (targets x cases) sums), how many cases hold a value above 0, or below 1, whichever
    are fewer: under ``FEW_OFF_EDGE`` the mean's interval is held at least as wide as Wilson's."""
    above, below = _off_edges(np.asarray(n_tc, float), np.asarray(k_tc, float))
    return cast("np.ndarray", np.minimum(above.sum(axis=-1), below.sum(axis=-1)))


def _without_spread(mean: np.ndarray, se: np.ndarray, cases: np.ndarray, level: float | np.ndarray, low: np.ndarray, high: np.ndarray,
                    few: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where a mean's standard error is 0 or unknown (every case alike, or one case), the Wilson interval of
    its value at the number of cases: the spread of a two-point value, the widest a value in [0, 1] with that
    mean can have. A t interval there is a point (or all of [0, 1]); the joint tests' z is this interval's
    score z (``mean_null``), so a universe counts as significant exactly when this interval excludes t.

    Where fewer than ``FEW_OFF_EDGE`` cases hold a value off an end of the scale (``few``), the standard error
    exists but is read from those few cases: a win rate of 0.014 from one tie among 36 cases had the t interval
    [0, 0.042], and 0.05 outside it. There the interval is the t interval widened to hold Wilson's."""
    from ._intervals import wilson

    known = (cases > 0) & np.isfinite(mean)
    flat = ~(se > NO_SPREAD) & known
    widen = np.asarray(few, bool) & known & ~flat
    levels = np.broadcast_to(np.asarray(level, float), mean.shape)
    for value in np.unique(levels[flat | widen]):
        rows = (flat | widen) & (levels == value)
        w_low, w_high = wilson(mean[rows], cases[rows], float(value))
        low[rows] = np.where(flat[rows], w_low, np.minimum(low[rows], w_low))
        high[rows] = np.where(flat[rows], w_high, np.maximum(high[rows], w_high))
    return low, high


def case_mean_interval(n_tc: np.ndarray, k_tc: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(standard error, low, high) of each target's mean from its per-case sums (targets x cases arrays).

    ``n_tc`` counts a case's counted rows and ``k_tc`` sums their values: the
    same cluster-robust t interval as :func:`mean_interval` gives the rows.
    """
    from scipy import stats

    n_tc, k_tc = np.asarray(n_tc, float), np.asarray(k_tc, float)
    n = n_tc.sum(axis=1)
    mean = np.divide(k_tc.sum(axis=1), n, out=np.full(len(n), np.nan), where=n > 0)
    residual = k_tc - mean[:, None] * n_tc
    cases = (n_tc > 0).sum(axis=1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.where(cases > 1, np.sqrt(cases / (cases - 1) * (residual**2).sum(axis=1)) / n, np.nan)
        t = stats.t.ppf(0.5 + np.asarray(level, float) / 2, np.maximum(cases - 1, 1))
    low = np.where(cases > 1, np.clip(mean - t * se, 0.0, 1.0), np.where(n > 0, 0.0, np.nan))
    high = np.where(cases > 1, np.clip(mean + t * se, 0.0, 1.0), np.where(n > 0, 1.0, np.nan))
    low, high = _without_spread(mean, se, cases, level, low, high, edge_cases(n_tc, k_tc) < FEW_OFF_EDGE)
    return se, low, high
