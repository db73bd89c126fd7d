"""The joint test of a curve of mean scores: is one system's rescaled mean ``threshold`` in every universe?

A mean of scores rescaled to [0, 1] (``mean``, ``win_rate``; see
:mod:`multiverse.analysis._kernel`) is not a share: its spread is not
``t (1 - t)``, so the rate null of :mod:`multiverse.analysis.inference` does
not fit it. The centred case bootstrap (Simonsohn, Simmons & Nelson 2020)
used before rejected 0.10-0.18 under a true null at t = 0.05 with 30-60
cases (0.07-0.13 at t = 0.1): near the bottom of the scale the mean of a few
dozen skewed scores is skewed, and a bootstrap centred on the data cannot
impose t. So this null is built as the rate null is, parametric at the score
level with the data's case dependence:

Every contribution is ``Q(Phi(score))`` with the latent score of the rate
null's Gaussian copula (``sqrt(lam_b) F_c + sqrt(lam_w - lam_b) G_uc +
sqrt(1 - lam_w) E_ucr``) and ``Q`` the quantile function of the Beta
distribution with mean t and the data's dispersion, ``phi = v / (m (1 - m))``
(``v`` the variance of the contributions about their universe's mean, pooled
over universes, ``m`` the pooled mean; a Beta's variance is
``t (1 - t) / (a + b + 1)``, so phi is kept and ``a + b = 1 / phi - 1``). So
every contribution has mean t exactly, the spread a bounded value with the
data's dispersion has at t, and a Beta's skew. Where no contribution varies
within a universe (phi unknown) the two-point distribution, the widest, stands
in, as it does where phi is near 1, and where fewer than ``_FEW_CASES`` cases
hold a score on the rarer side of t: a rare mean's data that happen to hold
few high scores also look less dispersed than they are (at t = 0.02 with 30
cases the median effect rejected 0.21 on the estimate alone, 0.02 without). ``Q`` is tabulated as the means of
``_TABLE`` equal-probability bins (exact incomplete-Beta integrals, so the
table's mean is t).

The between-universe and within-universe correlations are moment estimates on
the label scale (residuals about each universe's mean, over the pooled
variance, as in the rate null), mapped to the latent scale through this
Beta's own Pearson correlation curve (Gauss-Hermite quadrature). Each null
replicate draws its latent correlations from the upper half of their
confidence distribution (``MeanNull._confidence``: data sets of the data's
own design, mean and dispersion drawn at a grid of latent correlations, the
share whose estimate reads above the observed one), a guard against a
dependence estimate that reads low exactly when the data lean away from t.
The rate null's case bootstrap, reflected upwards, could not see that: a few
scattered events resample to a correlation near 0 every time (the median
effect rejected 0.10 at t = 0.02 with 120 cases; 0.065 with this guard).

Per-universe z: ``(rate - t) / se`` with the cluster-robust standard error
of the curve's own t interval (:func:`~multiverse.analysis._kernel.case_mean_interval`),
mapped through the t distribution with ``cases - 1`` degrees of freedom to
the normal quantile of the same tail, so a universe counts as significant
exactly when its t interval excludes t; where the standard error is 0 (every
case alike) the curve's interval is Wilson's at the number of cases, and z
its score z. Null curves get the same z from their
own data (their own standard errors): the statistic is studentised, as the
data's is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

import numpy as np
import pandas as pd
from scipy import special

from multiverse.errors import InputError

from .._kernel import FEW_OFF_EDGE, NO_SPREAD, case_mean_interval, edge_cases
from ..cases import Z_CAP, CaseMatrix
from ._joint import JointTest, _check_common, _direction, _run
from ._null_histograms import curves_summary

__all__ = ["MEAN_NULL", "MeanNull", "fit_mean_null", "joint_mean_test", "mean_z"]

#: The name of this null, as every document and the CLI give it.
MEAN_NULL = "latent case-effect null for means (Gaussian copula, Beta scores of mean t)"

# Equal-probability bins of the tabulated quantile function.
_TABLE = 1024
# Latent correlations the Pearson curve is tabulated at.
_GRID = np.linspace(0.0, 0.999, 100)
_NODES = 24
# A dispersion this near 1 is a two-point distribution (the Beta's parameters underflow).
_TWO_POINT = 1.0 - 1e-3
# Fewest cases with a score on the rarer side of t that a dispersion is estimated from (as an ICC needs 5
# labels of the rarer kind, intervals.py): below it the two-point distribution, the widest, stands in.
_FEW_CASES = 5
# Labels per working block of a null draw.
_BLOCK_CELLS = 2_000_000
# Universes the dependence is estimated on, spread evenly over the curve.
_PROBE = 256
# Latent correlations the confidence distribution of the dependence is computed at, and data sets drawn at each.
_CONFIDENCE = np.linspace(0.0, 0.99, 12)
_CONFIDENCE_SETS = 48
_CONFIDENCE_PROBE = 16
_LAM_MAX = 0.999


def mean_z(effect: np.ndarray, se: np.ndarray, cases: np.ndarray, threshold: float, level: float,
           few: np.ndarray | None = None) -> np.ndarray:
    """A mean's z, significant exactly when the curve's interval of it excludes ``threshold``.

    Its t statistic ``effect / se`` as the normal quantile of the same tail
    (``cases - 1`` df), capped; where ``se`` is 0 or unknown, the score z of
    the Wilson interval that stands in there (``estimates.case_mean_interval``);
    where ``few`` (fewer than ``FEW_OFF_EDGE`` cases off an end of the scale:
    the interval is the t one widened to hold Wilson's), the smaller of the two.
    """
    from ._joint import _score_z

    se = np.broadcast_to(se, np.shape(effect))
    stat = np.divide(effect, se, out=np.zeros(np.shape(effect)), where=se > NO_SPREAD)
    df = np.maximum(np.asarray(cases, float) - 1.0, 1.0)
    z = np.clip(np.sign(stat) * np.nan_to_num(-special.ndtri(special.stdtr(df, -np.abs(stat))), posinf=Z_CAP), -Z_CAP, Z_CAP)
    flat = ~(se > NO_SPREAD)
    widen = np.zeros(z.shape, bool) if few is None else np.broadcast_to(few, z.shape) & ~flat
    if flat.any() or widen.any():
        score = _score_z(effect, np.broadcast_to(np.asarray(cases, float), z.shape), threshold, level)
        # Both have the effect's sign: outside the widened interval is outside both.
        z = np.where(flat, score, np.where(widen, np.sign(z) * np.minimum(np.abs(z), np.abs(score)), z))
    return cast("np.ndarray", z)


def _moments(n: np.ndarray, k: np.ndarray, s: np.ndarray, drawn: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pooled mean, pooled variance about each universe's mean and the correlations (between, within).

    (universes x cases) sums ``n`` (labels), ``k`` (contributions), ``s``
    (squared contributions); ``drawn`` (data sets x cases) counts each case's
    copies in each data set (ones: the data). Returns arrays over data sets.
    """
    n_u, k_u = drawn @ n.T, drawn @ k.T
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n_u > 0, k_u / n_u, 0.0)
        pooled = k_u.sum(axis=1) / n_u.sum(axis=1)
    # Squared residuals of every contribution about its universe's mean, and of every case's sum.
    own = (drawn @ s.T - 2.0 * rate * k_u + rate * rate * n_u).sum(axis=1)
    labels = n_u.sum(axis=1)
    var = own / np.maximum(labels - (n_u > 0).sum(axis=1), 1.0)
    square = (k * k).sum(axis=0) - 2.0 * rate @ (k * n) + (rate * rate) @ (n * n)
    total = k.sum(axis=0) - rate @ n
    cases_n = n.sum(axis=0)
    pairs_w = var * (drawn @ (n * (n - 1.0)).sum(axis=0))
    pairs_b = var * (drawn @ (cases_n**2 - (n * n).sum(axis=0)))
    n_cases = drawn @ (cases_n > 0).astype(float)
    scale = np.where(n_cases > 1, n_cases / np.maximum(n_cases - 1.0, 1.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho_b = scale * (drawn * (total**2 - square)).sum(axis=1) / pairs_b
        rho_w = (scale * (drawn * square).sum(axis=1) - own) / pairs_w
    # No pair of a kind: that correlation is the other's; nothing varies: 1, the widest.
    rho_b = np.where(pairs_b > 0, rho_b, np.nan)
    rho_w = np.where(pairs_w > 0, rho_w, np.nan)
    rho_b, rho_w = np.where(np.isnan(rho_b), np.nan_to_num(rho_w, nan=0.0), rho_b), np.where(np.isnan(rho_w), rho_b, rho_w)
    none = ~(var > 0)
    rho_b, rho_w = np.where(none, 1.0, rho_b), np.where(none, 1.0, rho_w)
    return pooled, np.where(none, 0.0, var), np.clip(rho_b, 0.0, 1.0), np.clip(rho_w, 0.0, 1.0)


def _set_moments(n: np.ndarray, k: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_moments`` of many data sets of one design at once: ``n`` (universes x cases), ``k`` and ``s`` (sets x
    universes x cases). Returns (variance, between, within), each over the sets; the same numbers as
    ``_moments(n, k[i], s[i], ones)`` (a test holds them equal)."""
    n_u = n.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n_u > 0, k.sum(axis=2) / n_u, 0.0)
    residual = k - rate[:, :, None] * n
    own = (s.sum(axis=2) - rate * k.sum(axis=2)).sum(axis=1)
    var = own / max(float(n_u.sum() - (n_u > 0).sum()), 1.0)
    square = (residual * residual).sum(axis=1)
    total = residual.sum(axis=1)
    cases_n = n.sum(axis=0)
    pairs_w = var * (n * (n - 1.0)).sum()
    pairs_b = var * (cases_n**2 - (n * n).sum(axis=0)).sum()
    n_cases = float((cases_n > 0).sum())
    scale = n_cases / (n_cases - 1.0) if n_cases > 1 else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rho_b = scale * (total**2 - square).sum(axis=1) / pairs_b
        rho_w = (scale * square.sum(axis=1) - own) / pairs_w
    rho_b = np.where(pairs_b > 0, rho_b, np.nan)
    rho_w = np.where(pairs_w > 0, rho_w, np.nan)
    rho_b, rho_w = np.where(np.isnan(rho_b), np.nan_to_num(rho_w, nan=0.0), rho_b), np.where(np.isnan(rho_w), rho_b, rho_w)
    none = ~(var > 0)
    rho_b, rho_w = np.where(none, 1.0, rho_b), np.where(none, 1.0, rho_w)
    return np.where(none, 0.0, var), np.clip(rho_b, 0.0, 1.0), np.clip(rho_w, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class MeanNull:
    """Fitted dispersion and dependence of one system's means, and a sampler of null mean curves."""

    pooled_mean: float
    dispersion: float
    rho_between: float
    rho_within: float
    n_uc: np.ndarray
    k_uc: np.ndarray
    s_uc: np.ndarray
    probe: np.ndarray

    def table(self, threshold: float) -> np.ndarray:
        """The contribution of each of ``_TABLE`` equal-probability bins of the null's marginal (mean t)."""
        edges = np.linspace(0.0, 1.0, _TABLE + 1)
        if self.dispersion >= _TWO_POINT or self.rarer_side(threshold) < _FEW_CASES:
            # Two points, 0 and 1: each bin's share of the top t of the probability.
            return np.clip((edges[1:] - (1.0 - threshold)) * _TABLE, 0.0, 1.0)
        size = 1.0 / self.dispersion - 1.0
        a, b = threshold * size, (1.0 - threshold) * size
        x = special.betaincinv(a, b, edges)
        x[0], x[-1] = 0.0, 1.0
        # Each bin's mean: the integral of x over it, t * I_x(a + 1, b), times the bins.
        return cast("np.ndarray", np.clip(np.diff(threshold * special.betainc(a + 1.0, b, x)) * _TABLE, 0.0, 1.0))

    def rarer_side(self, threshold: float) -> int:
        """How many cases hold a contribution above t, or below it, whichever are fewer (universes pooled)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(self.n_uc > 0, self.k_uc / self.n_uc, threshold)
        return int(min((value > threshold).any(axis=0).sum(), (value < threshold).any(axis=0).sum()))

    @staticmethod
    def _pearson(table: np.ndarray) -> np.ndarray:
        """Pearson correlation of two contributions at each latent correlation of ``_GRID`` (monotone)."""
        z, w = np.polynomial.hermite_e.hermegauss(_NODES)
        w = w / w.sum()

        def q(x: np.ndarray) -> np.ndarray:
            return cast("np.ndarray", table[np.minimum((special.ndtr(x) * _TABLE).astype(np.int64), _TABLE - 1)])

        qx = q(z)
        mu, var = qx @ w, (qx * qx) @ w - (qx @ w) ** 2
        if not var > 0:
            return _GRID.copy()
        lam = _GRID[:, None, None]
        qy = q(lam * z[None, :, None] + np.sqrt(1.0 - lam * lam) * z[None, None, :])
        curve = (np.einsum("i,gij,j->g", qx * w, qy, w) - mu * mu) / var
        return np.maximum.accumulate(curve)

    @cached_property
    def most(self) -> int:
        return int(np.rint(self.n_uc.max())) if self.n_uc.size else 0

    def draw(self, threshold: float, size: int, rng: np.random.Generator, level: float
             ) -> tuple[np.ndarray, np.ndarray]:
        """``size`` null curves: (effects, z), each (size x universes), every universe's mean t in the null."""
        table = self.table(threshold)
        n_u, n_c = self.n_uc.shape
        labels = self.n_uc.sum(axis=1)
        cases = (self.n_uc > 0).sum(axis=1)
        step = max(1, _BLOCK_CELLS // max(n_u * n_c * max(self.most, 1), 1))
        effects, zs = [], []
        for start in range(0, size, step):
            block = min(step, size - start)
            lam_b, lam_w = self._guarded(block, rng, threshold)
            sums = self._sums(table, lam_b, lam_w, block, rng)
            mean = sums.sum(axis=2) / labels
            residual = sums - mean[:, :, None] * self.n_uc
            with np.errstate(divide="ignore", invalid="ignore"):
                se = np.sqrt(cases / np.maximum(cases - 1.0, 1.0) * (residual * residual).sum(axis=2)) / labels
            effects.append(mean - threshold)
            zs.append(mean_z(mean - threshold, se, cases, threshold, level, edge_cases(self.n_uc, sums) < FEW_OFF_EDGE))
        return np.concatenate(effects), np.concatenate(zs)

    def _guarded(self, size: int, rng: np.random.Generator, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """Latent correlations for ``size`` null curves: the upper half of each one's confidence distribution."""
        grid, between, within = self._confidence(rng, threshold)

        def upper(confidence: np.ndarray) -> np.ndarray:
            # Fold about the median: a draw below it is reflected above it, as far from it.
            median = float(np.interp(0.5, confidence, grid))
            drawn = np.interp(rng.random(size), confidence, grid)
            return cast("np.ndarray", np.minimum(median + np.abs(drawn - median), _LAM_MAX))

        lam_b = upper(between)
        return lam_b, np.maximum(upper(within), lam_b) if within is not None else lam_b

    def _confidence(self, rng: np.random.Generator, threshold: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The confidence distributions of the latent correlations (between, within): C(lam) on ``_CONFIDENCE``.

        C(lam) is the chance that the data's moment estimate would read above
        the one observed (ties count half) if the latent correlation were lam,
        in the null's world, among data sets whose mean reads as the data's
        does: data sets of the data's own design are drawn from the null's
        marginal (mean t, the data's dispersion) at every lam of the grid with
        common random numbers, the estimate read from each as from the data,
        and regressed on the data set's mean, so the chance is read at the
        data's own mean (within the means the drawn sets reach). Rising in lam
        from near 0 to near 1, it is a distribution over lam, wide exactly where
        the data inform little.

        Why conditional: a skewed case effect whose few high cases a data set
        happens to miss reads both lower and less dependent, so under the null
        the estimate is low exactly when the curve leans away from t. Drawn at
        the data's own mean instead (as before), the sets knew nothing of that
        lean: with 3 replicates at t = 0.1 and 36 cases, the data sets whose
        mean z fell in the null's lowest 2.5% read a between-universe
        correlation of 0.08 where the truth is 0.24, and Stouffer's Z rejected
        0.062-0.065.
        """
        grid = _CONFIDENCE
        if not self.rho_between < 1.0 or not 0.0 < self.pooled_mean < 1.0:
            # Nothing varies: the widest dependence, as the estimate says.
            ones = np.ones_like(grid)
            return grid, np.where(grid >= grid[-1], 1.0, 0.0 * ones), np.where(grid >= grid[-1], 1.0, 0.0 * ones)
        # On at most _CONFIDENCE_PROBE universes of the probe, the observed estimate too: the universes
        # share their cases, so more of them add little to what the estimate knows, and much to its cost.
        sub = self.probe[np.unique(np.linspace(0, len(self.probe) - 1, min(len(self.probe), _CONFIDENCE_PROBE))
                                   .round().astype(int))]
        n = self.n_uc[sub]
        observed_mean, _, observed_b, observed_w = (
            float(x[0]) for x in _moments(n, self.k_uc[sub], self.s_uc[sub], np.ones((1, n.shape[1]))))
        most = max(self.most, 1)
        table = self.table(threshold)
        shape = (_CONFIDENCE_SETS, *n.shape)
        shared = rng.standard_normal((_CONFIDENCE_SETS, 1, n.shape[1]))
        own = rng.standard_normal(shape) if most > 1 else np.zeros(shape)
        noise = rng.standard_normal((most, *shape))
        pearson = self._pearson(table)
        lam_w_hat = float(np.interp(self.rho_within, pearson, _GRID))
        lam_b_hat = float(np.interp(self.rho_between, pearson, _GRID))

        def above(lam_b: float, lam_w: float, observed: float, which: int) -> float:
            latent_shared = np.sqrt(lam_b) * shared + np.sqrt(max(lam_w - lam_b, 0.0)) * own
            k, s = np.zeros(shape), np.zeros(shape)
            for replicate in range(most):
                latent = latent_shared + np.sqrt(1.0 - lam_w) * noise[replicate]
                value = np.where(n > replicate, table[np.minimum((special.ndtr(latent) * _TABLE).astype(np.int64),
                                                                 _TABLE - 1)], 0.0)
                k += value
                s += value * value
            var, rho_b, rho_w = _set_moments(n, k, s)
            # A data set in which nothing varies says nothing of its dependence.
            varied = var > 0
            estimates, means = (rho_b, rho_w)[which][varied], k.sum(axis=(1, 2))[varied] / n.sum()
            if not len(estimates):
                return 0.5
            return _conditional_above(estimates, means, observed, observed_mean)

        between = np.maximum.accumulate([above(lam, max(lam, lam_w_hat) if most > 1 else lam, observed_b, 0)
                                         for lam in grid])
        within = (np.maximum.accumulate([above(min(lam_b_hat, lam), lam, observed_w, 1) for lam in grid])
                  if most > 1 else None)
        return grid, between, within

    def _sums(self, table: np.ndarray, lam_b: np.ndarray, lam_w: np.ndarray, size: int, rng: np.random.Generator
              ) -> np.ndarray:
        """(size x universes x cases) null sums of contributions, with the data's labels per cell."""
        n_u, n_c = self.n_uc.shape
        lb, lw = lam_b[:, None, None], lam_w[:, None, None]
        shared = np.sqrt(lb) * rng.standard_normal((size, 1, n_c))
        if self.most > 1:
            shared = shared + np.sqrt(lw - lb) * rng.standard_normal((size, n_u, n_c))
        sums = np.zeros((size, n_u, n_c))
        for replicate in range(max(self.most, 1)):
            latent = shared + np.sqrt(1.0 - (lw if self.most > 1 else lb)) * rng.standard_normal((size, n_u, n_c))
            value = table[np.minimum((special.ndtr(latent) * _TABLE).astype(np.int64), _TABLE - 1)]
            sums += np.where(self.n_uc > replicate, value, 0.0)
        return sums

    def describe(self) -> dict[str, Any]:
        """The fit, for a document: dispersion and intra-case correlations."""
        return {"dispersion": float(self.dispersion),
                "intra_case_correlation": {"between_universes": float(self.rho_between),
                                           "within_universe": float(self.rho_within)}}


def _conditional_above(estimates: np.ndarray, means: np.ndarray, observed: float, observed_mean: float) -> float:
    """The share of simulated ``estimates`` above ``observed`` (ties half) among sets whose mean is the data's:
    each estimate moved along the least-squares line of estimate on mean to ``observed_mean`` (clipped to the
    means the sets reach, so the line is never read beyond its data)."""
    spread = means - means.mean()
    scale = float(spread @ spread)
    slope = float(spread @ (estimates - estimates.mean())) / scale if scale > 0 else 0.0
    moved = estimates + slope * (np.clip(observed_mean, means.min(), means.max()) - means)
    # The smaller of the conditional and the plain chance: a lean that makes the estimate read low widens the
    # null; one that makes it read high never narrows it below what the estimate alone gives.
    return float(min(np.mean(moved > observed) + 0.5 * np.mean(moved == observed),
                     np.mean(estimates > observed) + 0.5 * np.mean(estimates == observed)))


def fit_mean_null(n_uc: np.ndarray, k_uc: np.ndarray, s_uc: np.ndarray) -> MeanNull:
    """Estimate the dispersion and intra-case correlations of one system's (universes x cases) sums."""
    n_uc, k_uc, s_uc = (np.asarray(x, float) for x in (n_uc, k_uc, s_uc))
    n_u = n_uc.shape[0]
    probe = np.unique(np.linspace(0, n_u - 1, min(n_u, _PROBE)).round().astype(int))
    ones = np.ones((1, n_uc.shape[1]))
    pooled, var, _, _ = (float(x[0]) for x in _moments(n_uc, k_uc, s_uc, ones))
    _, _, rho_b, rho_w = (float(x[0]) for x in _moments(n_uc[probe], k_uc[probe], s_uc[probe], ones))
    spread = pooled * (1.0 - pooled)
    dispersion = min(var / spread, 1.0) if spread > 0 and var > 0 else 1.0
    return MeanNull(pooled_mean=pooled, dispersion=dispersion, rho_between=rho_b, rho_within=rho_w,
                    n_uc=n_uc, k_uc=k_uc, s_uc=s_uc, probe=probe)


def joint_mean_test(m: CaseMatrix, *, system: str, threshold: float, boot: int = 1000, seed: int = 0,
                    alpha: float = 0.05, direction: str = "dominant", band_level: float = 0.95) -> JointTest:
    """Joint test that ``system``'s rate (a mean rescaled to [0, 1]) equals ``threshold`` in every universe."""
    _check_common(boot, alpha, band_level)
    if not 0 < threshold < 1:
        raise InputError(f"threshold: expected a rate strictly between 0 and 1, got {threshold!r}")
    s = m.system_index(system)
    rows, n_uc, k_uc = m.seen(s)
    squares = m.squares[s][rows] if m.squares is not None else k_uc * k_uc / np.maximum(n_uc, 1.0)
    if squares.shape != n_uc.shape:  # seen() dropped cases no universe saw
        squares = squares[:, m.included[s][rows].sum(axis=0) > 0]
    rate = k_uc.sum(axis=1) / n_uc.sum(axis=1)
    cases = (n_uc > 0).sum(axis=1)
    se = case_mean_interval(n_uc, k_uc, 1.0 - alpha)[0]
    effect = rate - threshold
    z = mean_z(effect, np.where(np.isfinite(se), se, 0.0), cases, threshold, 1.0 - alpha, edge_cases(n_uc, k_uc) < FEW_OFF_EDGE)
    model = fit_mean_null(n_uc, k_uc, squares)
    rng = np.random.default_rng(seed)

    def null_curves(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return model.draw(threshold, len(block), rng, 1.0 - alpha)

    sign, observed, p, null, band = _run(
        observed_effect=effect, observed_z=z,
        null_summary=curves_summary(np.empty((int(boot), 0)), null_curves, len(effect)), exact=False, alpha=alpha,
        direction=_direction(direction), band_level=band_level, band_offset=threshold)
    return JointTest(
        kind="rate", systems=(system,), threshold=float(threshold), direction=sign, observed=observed, p=p,
        effects=pd.DataFrame({"universe_id": m.universes["universe_id"].to_numpy()[rows], "effect": effect,
                              "z": z}),
        band=band, null_stats=null, boot=int(boot), exact=False, alpha=alpha, band_level=band_level,
        resampling=MEAN_NULL, n_cases=n_uc.shape[1], seed=seed, estimates="means", null_fit=model.describe(),
    )
