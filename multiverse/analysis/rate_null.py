"""The null world of a joint rate test: every universe's rate equals t, cases shared.

A case bootstrap centred on the observed rates draws null curves whose spread
follows rate * (1 - rate), not t * (1 - t): when the observed rate sits below
t by chance, the null is too narrow and the test rejects too often (at
t = 0.05 with 36 cases, about three times as often as it should). With rare
events it is worse still: a universe with no violation has no spread at all.
So the null is parametric at the label level and nonparametric only in what it
must keep, the dependence between labels of the same case.

The model is a Gaussian copula (a multivariate probit). Label r of case c in
universe u is compliant when its latent score is below ``Phi^-1(t)``::

    score = sqrt(lam_b) * F_c + sqrt(lam_w - lam_b) * G_uc + sqrt(1 - lam_w) * E_ucr

with independent standard normals ``F`` (the case), ``G`` (the case in one
universe) and ``E`` (the label). Every label is then Bernoulli(t) exactly;
two labels of a case in different universes have latent correlation
``lam_b``, two replicates of a case in one universe ``lam_w``. Given ``F`` and
``G``, a cell's count is binomial, so a null replicate costs one binomial draw
per observed (universe, case) cell, with the observed cell sizes.

``lam_b`` and ``lam_w`` are estimated from the data: the label-scale
intra-case correlations (moment estimators: residuals about each universe's
own rate, so universes may differ in rate, cross-products summed over cases
with the factor C / (C - 1) that undoes centring on estimated rates, divided
by the summed binomial variances of the same pairs) are converted to the
latent scale at the pooled observed rate, where they were measured
(tetrachoric, via Owen's T). With a few dozen cases these estimates are noisy
(standard error 0.07 at 36 cases and t = 0.3, 0.16 at t = 0.05), so each
null replicate uses its own estimate, refitted on a case bootstrap of the
data: the null integrates over the uncertainty in the dependence it imposes.

Known limit: with several replicates per case the estimates' error is tied to
the data's deviation from t (few events look weakly clustered), and the tests
reject 0.06-0.08 at t = 0.05-0.10 (about 0.10 when the data follow this very
probit model). Taking the larger of this estimate and the restricted one
about t fixes that but leaves the count statistic with almost no power under
alternatives (all universes move together in such a null), so it is not done.

``lam_w`` below ``lam_b`` (labels of different universes more alike than
replicates, as when universes judge the same transcripts) is raised to
``lam_b``: that overstates within-universe dependence, which widens the null
and errs towards not rejecting. When no universe varies at all the
correlations cannot be estimated and are set to 1, the widest null.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse, special

__all__ = ["LatentNull", "fit_latent_null"]

# Latent correlations are kept off 1 only where a formula divides by 1 - lam.
_ONE = 1.0 - 1e-12
# Floats per working array of a null block (replicates x universes x cases).
_BLOCK_CELLS = 2_000_000


@dataclass(frozen=True, eq=False)
class LatentNull:
    """Fitted dependence of one system's labels, and a sampler of null rate curves.

    ``rho_*`` are label-scale intra-case correlations, ``lam_*`` the latent
    (tetrachoric) ones at ``pooled_rate``; ``between`` is two universes, same
    case, ``within`` two replicates of a case in one universe.
    """

    rho_between: float
    rho_within: float
    lam_between: float
    lam_within: float
    pooled_rate: float | None
    n_uc: np.ndarray
    k_uc: np.ndarray

    def draw_rates(self, threshold: float, replicates: int, rng: np.random.Generator) -> np.ndarray:
        """``replicates`` null rate curves, (replicates x universes), with the data's cell sizes."""
        n_u = self.n_uc.shape[0]
        u_idx, c_idx = np.nonzero(self.n_uc)
        to_universe = sparse.csr_matrix(
            (np.ones(len(u_idx)), (u_idx, np.arange(len(u_idx)))), shape=(n_u, len(u_idx))
        )
        cells = (u_idx, c_idx, to_universe)
        step = max(1, _BLOCK_CELLS // max(len(u_idx), 1))
        return np.concatenate(
            [self._draw(threshold, min(step, replicates - start), rng, cells)
             for start in range(0, replicates, step)]
        ) if replicates else np.empty((0, n_u))

    def _draw(self, threshold: float, replicates: int, rng: np.random.Generator, cells) -> np.ndarray:
        n_uc = self.n_uc
        n_c = n_uc.shape[1]
        u_idx, c_idx, to_universe = cells
        sizes = n_uc[u_idx, c_idx].astype(np.int64)
        weights = rng.multinomial(n_c, np.full(n_c, 1.0 / n_c), size=replicates).astype(float)
        rho_b, rho_w, _ = _correlations(n_uc, self.k_uc, weights)
        rate = self.pooled_rate if self.pooled_rate is not None else threshold
        lam_b = _label_to_latent(rho_b, rate)
        lam_w = np.maximum(_label_to_latent(rho_w, rate), lam_b)[:, None]
        lam_b = lam_b[:, None]
        a = special.ndtri(threshold)
        case = rng.standard_normal((replicates, n_c))[:, c_idx]
        if (sizes == 1).all():
            # One label per cell (the common case): the universe-case and the
            # label terms merge into one normal, so draw the label directly.
            noise = rng.standard_normal((replicates, len(u_idx)))
            k = np.sqrt(lam_b) * case + np.sqrt(1.0 - lam_b) * noise < a
        else:
            cell = rng.standard_normal((replicates, len(u_idx)))
            shared = np.sqrt(lam_b) * case + np.sqrt(np.maximum(lam_w - lam_b, 0.0)) * cell
            with np.errstate(divide="ignore", invalid="ignore"):
                p = special.ndtr((a - shared) / np.sqrt(1.0 - lam_w))
            # Where replicates of a case in a universe are identical (lam_w = 1).
            p = np.where(lam_w < _ONE, p, (shared < a).astype(float))
            k = rng.binomial(sizes[None, :], p)
        return np.asarray(to_universe @ k.T.astype(float)).T / n_uc.sum(axis=1)[None, :]


def _label_to_latent(rho: np.ndarray, rate: float) -> np.ndarray:
    """Latent correlations whose dichotomies at ``rate`` have label correlations ``rho``.

    Inverts P(X < a, Y < a) = rate^2 + rho rate (1 - rate), which increases
    with the latent correlation, by interpolation on a fine grid (its error,
    below 1e-4, is far under the sampling error of rho).
    """
    rho = np.clip(np.asarray(rho, dtype=float), 0.0, 1.0)
    a = special.ndtri(rate)
    grid = np.linspace(0.0, 1.0, 801)
    both = rate - 2.0 * special.owens_t(a, np.sqrt((1.0 - grid) / (1.0 + grid)))
    label = (both - rate * rate) / (rate * (1.0 - rate))
    return np.interp(rho, label, grid)


def _correlations(n: np.ndarray, k: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Label-scale intra-case correlations (between, within) and the pooled rate.

    ``n``, ``k`` are (universes x cases); ``weights`` (draws x cases) count
    each case (all ones: the data as observed), and each draw re-estimates
    the universes' rates. Every per-case sum over universes is expanded into
    matrix products of the (draws x universes) rates with fixed (universes x
    cases) arrays, so no (draws x universes x cases) array is formed.
    Returns arrays over draws.
    """
    n_w, k_w = weights @ n.T, weights @ k.T
    rate = np.divide(k_w, n_w, out=np.zeros_like(n_w), where=n_w > 0)
    var = rate * (1.0 - rate)
    sd = np.sqrt(var)
    varies = var > 0
    # Ratios of sums (covariances summed over cells over variances summed over
    # the same pairs), not sums of per-universe ratios: with rare events a
    # universe's estimated variance is noisy, and dividing by it biases low.
    # Per draw and case, with resid = k - rate * n summed over universes:
    square = (k * k).sum(axis=0) - 2 * rate @ (k * n) + (rate**2) @ (n * n)
    total = k.sum(axis=0) - rate @ n  # sum over universes of resid
    own = k.sum(axis=0) - 2 * rate @ k + (rate**2) @ n  # sum of squared label residuals
    pairs_w = var @ (n * (n - 1.0))
    spread = sd @ n
    pairs_b = spread**2 - var @ (n * n)
    n_cases = int((n.sum(axis=0) > 0).sum())
    scale = n_cases / (n_cases - 1.0) if n_cases > 1 else 1.0

    def weighted(x: np.ndarray) -> np.ndarray:
        return (weights * x).sum(axis=1)

    with np.errstate(divide="ignore", invalid="ignore"):
        rho_w = (scale * weighted(square) - weighted(own)) / weighted(pairs_w)
        rho_b = scale * weighted(total**2 - square) / weighted(pairs_b)
    # No pair of that kind (one replicate, or one universe): not estimable.
    rho_w = np.where(weighted(pairs_w) > 0, rho_w, np.nan)
    rho_b = np.where(weighted(pairs_b) > 0, rho_b, np.nan)
    rho_b = np.where(np.isnan(rho_b), np.where(np.isnan(rho_w), 0.0, rho_w), rho_b)
    rho_w = np.where(np.isnan(rho_w), rho_b, rho_w)
    none = ~varies.any(axis=1)
    rho_b, rho_w = np.where(none, 1.0, rho_b), np.where(none, 1.0, rho_w)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = (k_w * varies).sum(axis=1) / (n_w * varies).sum(axis=1)
    return np.clip(rho_b, 0.0, 1.0), np.clip(rho_w, 0.0, 1.0), pooled


def fit_latent_null(n_uc: np.ndarray, k_uc: np.ndarray) -> LatentNull:
    """Estimate the intra-case correlations of one system's (universes x cases) counts."""
    n_uc, k_uc = np.asarray(n_uc, float), np.asarray(k_uc, float)
    rho_b, rho_w, pooled = (x[0] for x in _correlations(n_uc, k_uc, np.ones((1, n_uc.shape[1]))))
    pooled = float(pooled) if np.isfinite(pooled) else None
    at = pooled if pooled is not None else 0.5
    return LatentNull(
        rho_between=float(rho_b),
        rho_within=float(rho_w),
        lam_between=float(_label_to_latent(rho_b, at)),
        lam_within=float(_label_to_latent(rho_w, at)),
        pooled_rate=pooled,
        n_uc=n_uc,
        k_uc=k_uc,
    )
