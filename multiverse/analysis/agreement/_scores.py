"""Agreement between judges that give scores: weighted kappa, alpha, the ICC, exact agreement, mean difference.

Pure functions of score arrays in the scale's native units (NaN: no score).
Which statistic fits which scale:

- ordinal scales (whole numbers ``min``..``max``): Cohen's weighted kappa with
  linear or quadratic disagreement weights (Cohen 1968) over *every* point of
  the scale, used or not: a point no judge used between two used ones keeps
  them two steps apart (points unused at the ends scale every weight alike,
  which kappa does not see); exact agreement and agreement within one point;
  Krippendorff's alpha at the ordinal level (Krippendorff 2004, ch. 11);
- every numeric scale (ordinal, continuous, pairwise): Krippendorff's alpha at
  the interval level; the intraclass correlation of a two-way model over the
  units every judge scored, single rater: ICC(2,1) (judges random, absolute
  agreement: a judge that scores every unit one point higher disagrees) and
  ICC(3,1) (judges fixed, consistency: that judge agrees) (Shrout and Fleiss
  1979; McGraw and Wong 1996 call them ICC(A,1) and ICC(C,1)); and the mean
  difference between two judges with an interval clustered by case (the
  units of one case share its prompt, so they are not independent).

A statistic whose chance term is zero (every score the same) is NaN: there is
no spread to agree beyond chance on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from scipy import special

__all__ = ["exact_agreement", "icc", "krippendorff_alpha", "mean_difference", "scale_points", "weighted_kappa"]


def scale_points(low: float, high: float) -> np.ndarray:
    """The points of an ordinal scale: the whole numbers from ``low`` to ``high``."""
    return np.arange(np.ceil(low), np.floor(high) + 1.0)


def _positions(values: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Each value's index among ``points``; a value off the scale is an error, not a category."""
    where = np.searchsorted(points, values)
    inside = (where < len(points)) & (points[np.minimum(where, len(points) - 1)] == values)
    if not inside.all():
        raise ValueError(f"score {values[~inside][0]:g} is not a point of the scale {points[0]:g}..{points[-1]:g}")
    return where


def weighted_kappa(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, points: np.ndarray,
                   weights: Literal["linear", "quadratic"] = "quadratic") -> float:
    """Cohen's weighted kappa of two judges' scores on the units both scored.

    ``points`` are all the scale's points in order; the disagreement weight of
    points i and j is ``|i - j| / (q - 1)`` (linear) or its square (quadratic).
    kappa = 1 - sum(w * observed) / sum(w * expected), expected from the two
    judges' marginals. NaN when there is no pair or the expected disagreement is 0.
    """
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = ~(np.isnan(first) | np.isnan(second))
    q = len(points)
    if not both.any() or q < 2:
        return float("nan")
    i, j = _positions(first[both], points), _positions(second[both], points)
    observed = np.bincount(i * q + j, minlength=q * q).reshape(q, q).astype(float)
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    steps = np.abs(np.subtract.outer(np.arange(q), np.arange(q))) / (q - 1)
    weight = steps if weights == "linear" else steps**2
    chance = float((weight * expected).sum())
    if chance <= 0:
        return float("nan")
    return float(1.0 - (weight * observed).sum() / chance)


def exact_agreement(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                    within: float = 0.0) -> float:
    """The share of units both judges scored on which their scores differ by at most ``within``."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = ~(np.isnan(first) | np.isnan(second))
    if not both.any():
        return float("nan")
    # A small tolerance: scores in native units may come back from text as 6.999999.
    return float((np.abs(first[both] - second[both]) <= within + 1e-9).mean())


def krippendorff_alpha(scores: np.ndarray, level: Literal["ordinal", "interval"], *,
                       points: np.ndarray | None = None) -> float:
    """Krippendorff's alpha of a units x judges score matrix (NaN: not scored), any number of judges.

    Units scored by fewer than two judges are not pairable and drop out.
    ``ordinal`` needs the scale's ``points`` (unused points carry no weight in
    the ordinal distance, so declaring them changes nothing); ``interval``
    uses squared differences of the scores themselves.
    """
    matrix = np.asarray(scores, dtype=float)
    present = ~np.isnan(matrix)
    m = present.sum(1)
    pairable = m >= 2
    matrix, present, m = matrix[pairable], present[pairable], m[pairable]
    n = int(m.sum())
    if n < 2:
        return float("nan")
    if level == "interval":
        # sum over ordered pairs i != j of (x_i - x_j)^2 = 2 m SS for m values with sum of squares SS
        means = np.nansum(matrix, 1) / m
        within = np.nansum((matrix - means[:, None]) ** 2, 1)
        values = matrix[present]
        total = float(((values - values.mean()) ** 2).sum())
        if total <= 0:
            return float("nan")
        observed = float((2.0 * m * within / (m - 1)).sum()) / n
        expected = 2.0 * n * total / (n * (n - 1))
        return float(1.0 - observed / expected)
    if points is None:
        raise ValueError("ordinal alpha needs the scale's points")
    q = len(points)
    counts = np.zeros((len(matrix), q))
    rows, columns = np.nonzero(present)
    np.add.at(counts, (rows, _positions(matrix[rows, columns], points)), 1.0)
    weight = 1.0 / (m - 1)
    coincidence = counts.T @ (counts * weight[:, None]) - np.diag((counts * weight[:, None]).sum(0))
    n_c = coincidence.sum(1)
    cumulative = np.concatenate([[0.0], np.cumsum(n_c)])
    low, high = np.minimum.outer(np.arange(q), np.arange(q)), np.maximum.outer(np.arange(q), np.arange(q))
    distance = (cumulative[high + 1] - cumulative[low] - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2
    expected = float((np.outer(n_c, n_c) * distance).sum()) / (n - 1)
    if expected <= 0:
        return float("nan")
    return float(1.0 - (coincidence * distance).sum() / expected)


def icc(scores: np.ndarray) -> dict[str, float | int]:
    """ICC(2,1) and ICC(3,1) of a units x judges score matrix, over the units every judge scored.

    Two-way ANOVA: mean squares of units (MSR), judges (MSC) and residual (MSE)
    over n units and k judges; ICC(2,1) = (MSR - MSE) / (MSR + (k-1) MSE +
    k (MSC - MSE) / n) and ICC(3,1) = (MSR - MSE) / (MSR + (k-1) MSE).
    Returns ``{"icc2_1", "icc3_1", "n"}`` (n the complete units; NaN below two
    units or two judges, or with no spread at all).
    """
    matrix = np.asarray(scores, dtype=float)
    complete = matrix[~np.isnan(matrix).any(1)] if matrix.ndim == 2 else np.empty((0, 0))
    n, k = complete.shape if complete.size else (0, matrix.shape[1] if matrix.ndim == 2 else 0)
    undefined: dict[str, float | int] = {"icc2_1": float("nan"), "icc3_1": float("nan"), "n": int(n)}
    if n < 2 or k < 2:
        return undefined
    grand = complete.mean()
    ss_rows = k * float(((complete.mean(1) - grand) ** 2).sum())
    ss_columns = n * float(((complete.mean(0) - grand) ** 2).sum())
    ss_error = float(((complete - grand) ** 2).sum()) - ss_rows - ss_columns
    msr, msc, mse = ss_rows / (n - 1), ss_columns / (k - 1), max(ss_error, 0.0) / ((n - 1) * (k - 1))
    consistency = msr + (k - 1) * mse
    absolute = consistency + k * (msc - mse) / n
    return {
        "icc2_1": float((msr - mse) / absolute) if absolute > 0 else float("nan"),
        "icc3_1": float((msr - mse) / consistency) if consistency > 0 else float("nan"),
        "n": int(n),
    }


def mean_difference(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                    cases: Sequence[Any] | np.ndarray, *, level: float = 0.95) -> dict[str, float | int]:
    """The mean of a - b over the units both judges scored, with a t interval clustered by case.

    The standard error is the cluster-robust one of a mean (CR1: the sum over
    cases of the squared sums of deviations, times G / (G - 1), over n^2), and
    the interval uses a t distribution with G - 1 degrees of freedom for G
    cases, as an intercept-only regression with case-clustered errors does.
    Returns ``{"mean", "se", "ci_low", "ci_high", "n", "n_cases"}`` (the
    interval NaN below two cases).
    """
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = ~(np.isnan(first) | np.isnan(second))
    difference = first[both] - second[both]
    case = np.asarray(cases, dtype=object)[both]
    n = len(difference)
    groups = len(set(case.tolist())) if n else 0
    out: dict[str, float | int] = {"mean": float("nan"), "se": float("nan"), "ci_low": float("nan"),
                                   "ci_high": float("nan"), "n": n, "n_cases": groups}
    if not n:
        return out
    mean = float(difference.mean())
    out["mean"] = mean
    if groups < 2:
        return out
    codes = np.unique(case.astype(str), return_inverse=True)[1]
    sums = np.bincount(codes, weights=difference - mean)
    se = float(np.sqrt(groups / (groups - 1) * (sums**2).sum()) / n)
    half = float(special.stdtrit(groups - 1, 0.5 + level / 2.0)) * se  # t.ppf (stdtrit: df >= 1, 0.5 < q < 1)
    out.update(se=se, ci_low=mean - half, ci_high=mean + half)
    return out
