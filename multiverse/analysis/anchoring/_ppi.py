"""The anchored (PPI++) estimate of a 0/1 rate and an interval that holds with a few dozen labels.

The point estimate is ppi-python's (``ppi_mean_pointestimate``, lambda
power-tuned and clipped to [0, 1]; README › Human anchoring). Its interval
(``ppi_mean_ci``) is a Wald interval, the variance taken at the estimate.
With 20-100 labels and rare violations that variance is often near zero: one
or two violations seen, or none, when lambda is 0 and the interval is the
point [1, 1]. It covered 0.61 at rate 0.05 with 20 labels.

So the interval here is a score interval, as Wilson's is for one proportion:
the rates theta0 that a z-test of ``rate = theta0`` does not reject, with the
variance taken *under theta0*. Under theta0 the labelled (human, judge) pairs
follow the 2 x 2 table with human margin theta0, judge margin the judge's
rate over all transcripts of the cell, and the odds ratio seen on the
labelled pairs with half a count added to every cell (a cell nobody saw is
not taken as impossible; Haldane 1956). That is the observed table raked to
those margins (Deming & Stephan 1940), which keeps its association. The
variance of the rectifier ``Y - lambda f`` follows from it; that of the
unlabelled mean is the judge's binomial one. A rate far from what the
judge's verdicts allow is tested against the disagreement it would take.
Where lambda > 0 the variance leans on what n labels say of the judge, and
the test's reference is Student's t with n - 1 degrees of freedom (normal
reference: coverage 0.931-0.939 in the weakest cells, noisy or biased judges
with 50 labels and replicates).
Where every label is alike lambda is 0 and this is the humans-only Wilson
interval: never a point.

With replicates, a case's transcripts share it, labelled or not: the
variance is multiplied by the estimator's design effect, the case-clustered
(sandwich) variance of its influence over the independent one, at the
estimate (``design_effects``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
import pandas as pd
from scipy import special

__all__ = ["design_effects", "ppi_binary", "ppi_bounded_mean", "ppi_lambda", "score_interval"]

# Half a count in every cell of the labelled 2 x 2 table when estimating its odds ratio.
_PSEUDO = 0.5
# Bisection steps for each bound: to 2**-40 of the unit interval.
_STEPS = 40
# Half an observation at each end of a bounded scale when estimating how much of its widest variance the labels have.
_PSEUDO_ENDS = 0.5


def ppi_lambda(n: np.ndarray, sum_y: np.ndarray, sum_f: np.ndarray, sum_yf: np.ndarray, big_n: np.ndarray,
               sum_f_unlabelled: np.ndarray, sum_ff_all: np.ndarray | None = None) -> np.ndarray:
    """PPI++'s power-tuned lambda from per-cell sums, as ppi-python's ``_calc_lam_glm`` for a mean.

    lambda = Cov(Y, f) / ((1 + n/N) Var(f)): the covariance over the labelled
    set (1/n), the variance over labelled and unlabelled verdicts (ddof 1);
    clipped to [0, 1], and 0 where ppi-python divides by zero (a judge
    constant over the cell, or no unlabelled transcript). ``sum_ff_all`` is
    the sum of f squared over all verdicts; None for 0/1 verdicts, where it is
    the sum of f.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = sum_yf / n - (sum_y / n) * (sum_f / n)
        total, sum_all = n + big_n, sum_f + sum_f_unlabelled
        squares = sum_all if sum_ff_all is None else sum_ff_all
        var_f = np.where(total > 1, (squares - sum_all**2 / total) / (total - 1), 0.0)
        lam = np.where(big_n > 0, cov / ((1.0 + n / big_n) * var_f), 0.0)
    return np.clip(np.where(np.isfinite(lam), lam, 0.0), 0.0, 1.0)


def ppi_binary(n: np.ndarray, sum_y: np.ndarray, sum_f: np.ndarray, sum_yf: np.ndarray, big_n: np.ndarray,
               sum_f_unlabelled: np.ndarray, alpha: float,
               deff: np.ndarray | float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PPI++ rates of 0/1 labels and verdicts from per-cell sums, with the score interval: (rate, low, high, lam).

    ``n`` labelled transcripts with label sum ``sum_y``, verdict sum ``sum_f``
    and ``sum_yf``; ``big_n`` unlabelled ones with verdict sum
    ``sum_f_unlabelled``; ``deff`` the design effect (1 without replicates).
    With 0/1 data every moment PPI++ needs is a sum, so thousands of
    universes need no loop. The rate is not clipped; the interval is in [0, 1].
    """
    n, sum_y, sum_f, sum_yf, big_n, sum_fu = (
        np.asarray(x, float) for x in (n, sum_y, sum_f, sum_yf, big_n, sum_f_unlabelled))
    lam = ppi_lambda(n, sum_y, sum_f, sum_yf, big_n, sum_fu)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_u = np.where(big_n > 0, sum_fu / big_n, 0.0)
        rate = lam * mean_u + (sum_y - lam * sum_f) / n
    low, high = score_interval(n, sum_y, sum_f, sum_yf, big_n, sum_fu, rate, lam, alpha, deff)
    return rate, low, high, lam


def _null_cell(theta: np.ndarray, m: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """P(Y = 1, f = 1) of the 2 x 2 table with margins ``theta`` (Y) and ``m`` (f) and odds ratio ``omega``.

    The root of (1 - omega) p^2 + (1 - theta - m + omega (theta + m)) p - omega theta m = 0
    that lies between the Frechet bounds.
    """
    lo, hi = np.maximum(0.0, theta + m - 1.0), np.minimum(theta, m)
    a = 1.0 - omega
    b = (1.0 - theta - m) + omega * (theta + m)
    c = -omega * theta * m
    disc = np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        root = (2.0 * c) / (-b - disc)  # the same root as (-b + disc) / 2a, without the cancellation (b > 0)
    root = np.where(np.isfinite(root), root, theta * m)
    return cast("np.ndarray", np.clip(root, lo, hi))


def score_interval(n: np.ndarray, sum_y: np.ndarray, sum_f: np.ndarray, sum_yf: np.ndarray, big_n: np.ndarray,
                   sum_f_unlabelled: np.ndarray, rate: np.ndarray, lam: np.ndarray, alpha: float,
                   deff: np.ndarray | float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per cell: the rates a z-test around ``rate`` (PPI++ with ``lam``) does not reject at ``alpha``."""
    n, sum_y, sum_f, sum_yf, big_n, sum_fu, rate, lam = (
        np.asarray(x, float) for x in (n, sum_y, sum_f, sum_yf, big_n, sum_f_unlabelled, rate, lam))
    deff = np.broadcast_to(np.asarray(deff, float), n.shape)
    table = np.stack([sum_yf, sum_y - sum_yf, sum_f - sum_yf, n - sum_y - sum_f + sum_yf]) + _PSEUDO
    omega = table[0] * table[3] / (table[1] * table[2])
    with np.errstate(divide="ignore", invalid="ignore"):
        m = (sum_f + sum_fu) / (n + big_n)
        m_u = np.where(big_n > 0, sum_fu / big_n, 0.0)
        imputed = np.where(big_n > 0, lam**2 * m_u * (1.0 - m_u) / big_n, 0.0)
    # Where lambda > 0 the variance leans on what the n labels say of the judge (its odds ratio, lambda itself):
    # the reference is t with n - 1 degrees of freedom. At lambda = 0 nothing is estimated, and it is Wilson's z.
    z2 = np.where(lam > 0, special.stdtrit(np.maximum(n - 1, 1), 1 - alpha / 2), special.ndtri(1 - alpha / 2)) ** 2
    centre = np.clip(rate, 0.0, 1.0)

    def accepted(theta: np.ndarray) -> np.ndarray:
        joint = _null_cell(theta, m, omega)
        rectifier = theta * (1 - theta) + lam**2 * m * (1 - m) - 2 * lam * (joint - theta * m)
        return cast("np.ndarray", (centre - theta) ** 2 <= z2 * deff * (np.maximum(rectifier, 0.0) / n + imputed))

    low, high = _bisect(centre, accepted)
    valid = (n > 0) & np.isfinite(rate)
    return np.where(valid, low, np.nan), np.where(valid, high, np.nan)


def design_effects(cell: np.ndarray, case: np.ndarray, labelled: np.ndarray, y: np.ndarray, f: np.ndarray,
                   lam: np.ndarray, n: np.ndarray, big_n: np.ndarray, sum_y: np.ndarray, sum_f: np.ndarray,
                   sum_f_unlabelled: np.ndarray) -> np.ndarray:
    """The PPI++ estimator's design effect per cell, from one row per transcript.

    Row arrays: ``cell`` (0..cells-1) and ``case`` codes, ``labelled``, the
    label ``y`` (any value where unlabelled) and verdict ``f``; cell arrays:
    ``lam`` and the sums the estimate came from. Each transcript's influence
    on the estimate is (Y - lam f - mean)/n if labelled, lam (f - mean)/N if
    not; the design effect is the variance of their case sums (times C/(C-1))
    over the sum of their squares, at least 1. Cells where no case has two
    transcripts get exactly 1. Where the influences are all 0 (every label
    alike, lam = 0) nothing can be estimated and the case size of the labels,
    sum m_c^2 / sum m_c, stands in: Kish's design effect at intra-case
    correlation 1, the widest.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        rectifier_mean = (sum_y - lam * sum_f) / n
        unlabelled_mean = np.where(big_n > 0, sum_f_unlabelled / big_n, 0.0)
        psi = np.where(labelled, (y - lam[cell] * f - rectifier_mean[cell]) / n[cell],
                       lam[cell] * (f - unlabelled_mean[cell]) / big_n[cell])
    psi = np.nan_to_num(psi)
    frame = pd.DataFrame({"cell": cell, "case": case, "psi": psi, "squared": psi**2, "size": 1.0,
                          "labels": labelled.astype(float)})
    cases = frame.groupby(["cell", "case"], sort=False).sum()
    cases["clustered"] = cases["psi"] ** 2
    cases["labels_squared"] = cases["labels"] ** 2
    grouped = cases.groupby(level="cell")
    per_cell = grouped[["clustered", "squared", "labels", "labels_squared"]].sum()
    count = grouped.size().to_numpy(float)
    replicated = grouped["size"].max().to_numpy() > 1
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (per_cell["clustered"].to_numpy() * count / np.maximum(count - 1, 1)
                 / per_cell["squared"].to_numpy())
        kish = per_cell["labels_squared"].to_numpy() / per_cell["labels"].to_numpy()
    estimated = np.where(np.isfinite(ratio), ratio, np.nan_to_num(kish, nan=1.0))
    deff = np.ones(len(n))
    deff[per_cell.index.to_numpy()] = np.where(replicated, np.maximum(estimated, 1.0), 1.0)
    return deff


def ppi_bounded_mean(n: np.ndarray, sum_y: np.ndarray, sum_yy: np.ndarray, sum_f: np.ndarray, sum_ff: np.ndarray,
                     sum_yf: np.ndarray, big_n: np.ndarray, sum_f_unlabelled: np.ndarray, sum_ff_unlabelled: np.ndarray,
                     alpha: float, deff: np.ndarray | float = 1.0, *,
                     judge: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PPI++ means of values in [0, 1] (a rescaled score) from per-cell sums, with a score interval: (rate, low, high, lam).

    The estimate and lambda are ppi-python's (``ppi_mean_pointestimate``, as
    ``ppi_lambda``). The interval holds the means theta0 that a t-test of
    ``mean = theta0`` on n - 1 degrees of freedom does not reject, with the
    variance of a human score taken *under theta0*: r theta0 (1 - theta0),
    where theta0 (1 - theta0) is the widest variance a [0, 1] value of mean
    theta0 can have (Bhatia & Davis 2000) and r the share of it the labels
    show (their variance over ybar (1 - ybar), with half an observation added
    at each end of the scale, so that labels all alike do not claim a
    variance of 0). With 0/1 labels r = 1 and, at lambda = 0, this is
    Wilson's interval with a t quantile. The judge's part keeps the labelled
    pairs' correlation and the judge's spread: var(Y - lam f) = V - 2 lam rho
    sqrt(V) s_f + lam^2 s_f^2, plus lam^2 var(f unlabelled) / N. With
    ``judge=False`` it is the humans-only interval (lambda = 0). README ›
    Human anchoring › Scores has the coverage.
    """
    n, sum_y, sum_yy, sum_f, sum_ff, sum_yf, big_n, sum_fu, sum_ffu = (
        np.asarray(x, float) for x in (n, sum_y, sum_yy, sum_f, sum_ff, sum_yf, big_n, sum_f_unlabelled,
                                       sum_ff_unlabelled))
    lam = ppi_lambda(n, sum_y, sum_f, sum_yf, big_n, sum_fu, sum_ff + sum_ffu) if judge else np.zeros(n.shape)
    deff = np.broadcast_to(np.asarray(deff, float), n.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_u = np.where(big_n > 0, sum_fu / big_n, 0.0)
        rate = lam * mean_u + (sum_y - lam * sum_f) / n
        var_y = np.where(n > 1, (sum_yy - sum_y**2 / n) / (n - 1), 0.0)
        var_f = np.where(n > 1, (sum_ff - sum_f**2 / n) / (n - 1), 0.0)
        cov = np.where(n > 1, (sum_yf - sum_y * sum_f / n) / (n - 1), 0.0)
        rho = np.clip(np.nan_to_num(np.where((var_y > 0) & (var_f > 0), cov / np.sqrt(var_y * var_f), 0.0)), -1, 1)
        weight = n + 2 * _PSEUDO_ENDS
        padded_mean = (sum_y + _PSEUDO_ENDS) / weight
        padded_var = (sum_yy + _PSEUDO_ENDS - weight * padded_mean**2) / (weight - 1)
        share = np.clip(np.nan_to_num(padded_var / (padded_mean * (1 - padded_mean))), 0.0, 1.0)
        var_fu = np.where(big_n > 1, (sum_ffu - sum_fu**2 / big_n) / (big_n - 1), 0.0)
        imputed = np.where(big_n > 0, lam**2 * np.maximum(var_fu, 0.0) / big_n, 0.0)
    q2 = special.stdtrit(np.maximum(n - 1, 1), 1 - alpha / 2) ** 2
    centre = np.clip(rate, 0.0, 1.0)
    spread_f = np.sqrt(np.maximum(var_f, 0.0))

    def accepted(theta: np.ndarray) -> np.ndarray:
        v = share * theta * (1 - theta)
        rectifier = v - 2 * lam * rho * np.sqrt(v) * spread_f + lam**2 * spread_f**2
        return cast("np.ndarray", (centre - theta) ** 2 <= q2 * deff * (np.maximum(rectifier, 0.0) / n + imputed))

    low, high = _bisect(centre, accepted)
    valid = (n > 0) & np.isfinite(rate)
    return rate, np.where(valid, low, np.nan), np.where(valid, high, np.nan), lam


def _bisect(centre: np.ndarray, accepted: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The ends of the acceptance region around ``centre`` in [0, 1], per cell (the region holds its centre)."""

    def bound(edge: float) -> np.ndarray:
        inside, outside = centre.copy(), np.full(centre.shape, edge)
        for _ in range(_STEPS):
            middle = (inside + outside) / 2
            ok = accepted(middle)
            inside, outside = np.where(ok, middle, inside), np.where(ok, outside, middle)
        return np.where(accepted(np.full(centre.shape, edge)), edge, (inside + outside) / 2)

    with np.errstate(divide="ignore", invalid="ignore"):
        return bound(0.0), bound(1.0)
