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
``lam_b``, two replicates of a case in one universe ``lam_w``. Given ``F``
(and ``G``), labels are independent, so a null replicate draws one case
effect per case, shared by every universe, and then each cell's count.

``lam_b`` and ``lam_w`` are estimated from the data: the label-scale
intra-case correlations (moment estimators: residuals about each universe's
own rate, so universes may differ in rate, cross-products summed over cases
with the factor C / (C - 1) that undoes centring on estimated rates, divided
by the binomial variance at the rate pooled over all universes times the
number of such pairs) are converted to the latent scale at that pooled rate,
where they were measured (tetrachoric, via Owen's T). The variance is pooled
because the null says every universe has the same rate; each universe's own
variance, as used before, is 0 in a universe without a violation, which then
dropped out of the estimate: with rare events in one case, the universes that
missed it were not counted as disagreeing, the correlation read 1 and the
null was as wide as it can be (power 0.74 / 0.89 / 0.56 for 0.01 against
0.10 with 36 cases).

Those estimates are tied to the data's deviation from t: with rare events a
data set that happens to hold few of them also looks weakly clustered (with
3 replicates per case at t = 0.05 and a true latent correlation of 0.60, the
estimate averaged 0.40 in the tenth of data sets with the fewest events), so
a null built on the estimate alone is too narrow exactly when the data lean
away from t, and the tests rejected 0.056-0.076 (about 0.10 when the data
follow this very probit model). So each null replicate uses the estimate
refitted on a case bootstrap of the data (Efron & Tibshirani 1993),
reflected upwards about the estimate: ``lam + |lam* - lam|``. The null is
never less clustered than estimated, and is more so by as much as the
estimate is uncertain, which is where it errs (rare events, few cases): a
guard on the nuisance parameter in the spirit of Berger & Boos (1994). Two
other remedies were tried and dropped: taking the larger of this estimate and
the one restricted to t left the count statistic with almost no power (all
universes move together in such a null: 0.54 for 0.30 against 0.10 with
3 replicates), and studentising each null curve by its own re-estimated
dependence made rare rates worse (0.09 for Stouffer's Z at t = 0.05, 30
cases).

The correlations are estimated on at most ``_PROBE`` universes spread evenly
over the curve (all of them in smaller multiverses), so the bootstrap refits
cost the same at 10,000 universes as at 256.

``lam_w`` below ``lam_b`` (labels of different universes more alike than
replicates, as when universes judge the same transcripts) is raised to
``lam_b``: that overstates within-universe dependence, which widens the null
and errs towards not rejecting. When no universe varies at all the
correlations cannot be estimated and are set to 1, the widest null.

Cost: a null replicate draws every label once, B x (universes x cases)
labels in blocks. One label per cell (the usual design) is a comparison of
16-bit random integers with the case's probability rounded to 1/65536 (on
the side of the smaller probability, so 0 and 1 stay exact; the rounding is
far below the estimates' own error); replicated cells draw binomials.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

import numpy as np
from scipy import special

__all__ = ["LatentNull", "fit_latent_null", "poisson_binomial", "poisson_binomial_prefixes"]

# Latent correlations are kept off 1 only where a formula divides by 1 - lam.
_ONE = 1.0 - 1e-12
# Labels per working block of a null draw (replicates x universes x cases).
_BLOCK_CELLS = 4_000_000
# Universes the dependence is estimated on, spread evenly over the curve.
_PROBE = 256
# Resolution of the one-label fast path: probabilities in steps of 1/65536.
_STEPS = 65536
# Gauss-Hermite nodes of a replicated cell's count distribution (the integral over G).
_NODES = 48


@dataclass(frozen=True, eq=False)
class LatentNull:
    """Fitted dependence of one system's labels, and a sampler of null rate curves.

    ``rho_*`` are label-scale intra-case correlations, ``lam_*`` the latent
    (tetrachoric) ones at ``pooled_rate``; ``between`` is two universes, same
    case, ``within`` two replicates of a case in one universe. ``probe`` are
    the universes the correlations are estimated on.
    """

    rho_between: float
    rho_within: float
    lam_between: float
    lam_within: float
    pooled_rate: float | None
    n_uc: np.ndarray
    k_uc: np.ndarray
    probe: np.ndarray

    @cached_property
    def one_label(self) -> bool:
        return bool(self.n_uc.max() <= 1)

    @cached_property
    def cells(self) -> np.ndarray | None:
        """Where a label can fall (None: everywhere), computed once for every block."""
        return None if self.n_uc.min() >= 1 else self.n_uc.astype(bool)

    def draw_rates(self, threshold: float, replicates: int, rng: np.random.Generator) -> np.ndarray:
        """``replicates`` null rate curves, (replicates x universes), with the data's cell sizes."""
        n_u, n_c = self.n_uc.shape
        if not replicates:
            return np.empty((0, n_u))
        step = max(1, _BLOCK_CELLS // max(n_u * n_c, 1))
        n = self.n_uc.sum(axis=1)
        return np.concatenate([self._draw(threshold, min(step, replicates - start), rng) / n
                               for start in range(0, replicates, step)])

    def _lambdas(self, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Latent correlations refitted on ``size`` case bootstraps of the probe universes."""
        n, k = self.n_uc[self.probe], self.k_uc[self.probe]
        n_c = n.shape[1]
        pick = rng.integers(0, n_c, size=(size, n_c))
        # How often each case was drawn: the same sums as over the drawn copies, as matrix products.
        drawn = np.bincount((np.arange(size)[:, None] * n_c + pick).ravel(), minlength=size * n_c)
        rho_b, rho_w = _resampled_dependence(n, k, drawn.reshape(size, n_c).astype(float))
        rate = self.pooled_rate if self.pooled_rate is not None else 0.5
        lam_b = _label_to_latent(rho_b, rate)
        lam_w = _label_to_latent(rho_w, rate)
        # Reflected upwards: the null is at least as clustered as estimated.
        lam_b = np.minimum(self.lam_between + np.abs(lam_b - self.lam_between), 1.0)
        lam_w = np.minimum(self.lam_within + np.abs(lam_w - self.lam_within), 1.0)
        return lam_b, np.maximum(lam_w, lam_b)

    def case_probabilities(self, threshold: float, size: int, rng: np.random.Generator) -> np.ndarray:
        """(size x cases) chance that a label is compliant given its case, in ``size`` null worlds; one label per cell.

        The universe-case and label terms merge into one normal, so given the
        case effects every label is an independent Bernoulli(p_c), in every universe.
        """
        lam_b = self._lambdas(size, rng)[0][:, None]
        a = special.ndtri(threshold)
        case = rng.standard_normal((size, self.n_uc.shape[1]))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = special.ndtr((a - np.sqrt(lam_b) * case) / np.sqrt(1.0 - lam_b))
        return cast("np.ndarray", np.where(lam_b < _ONE, p, case < a))

    def cell_count_pmfs(self, threshold: float, size: int, rng: np.random.Generator, most: int) -> np.ndarray:
        """(size x cases x most + 1 x most + 1): given the case effects of ``size`` null worlds, the chance that a
        cell of a case with m labels (third axis) holds j compliant ones (last axis; j > m has chance 0).

        Given its case effect F, a cell's labels are dichotomies at
        ``h = (Phi^-1(t) - sqrt(lam_b) F) / sqrt(1 - lam_b)`` of standard normals
        correlated ``rho = (lam_w - lam_b) / (1 - lam_b)`` (they share G). One
        label: Phi(h). Two: both below h with the bivariate normal's chance,
        ``Phi(h) - 2 T(h, sqrt((1 - rho) / (1 + rho)))`` (Owen's T), exactly.
        More: a binomial mixed over G by Gauss-Hermite quadrature (``_NODES``
        nodes), all or none where rho = 1.
        """
        lam_b, lam_w = self._lambdas(size, rng)
        lam_b, lam_w = lam_b[:, None], lam_w[:, None]
        a = special.ndtri(threshold)
        case = rng.standard_normal((size, self.n_uc.shape[1]))
        with np.errstate(divide="ignore", invalid="ignore"):
            h = (a - np.sqrt(lam_b) * case) / np.sqrt(1.0 - lam_b)
            rho = np.where(lam_b < _ONE, (lam_w - lam_b) / (1.0 - lam_b), 1.0)
        one = np.where(lam_b < _ONE, special.ndtr(h), np.sqrt(lam_b) * case < a)
        out = np.zeros((size, self.n_uc.shape[1], most + 1, most + 1))
        out[:, :, 0, 0] = 1.0
        if most >= 1:
            out[:, :, 1, 1], out[:, :, 1, 0] = one, 1.0 - one
        if most >= 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                both = one - 2.0 * special.owens_t(np.nan_to_num(h, posinf=40.0, neginf=-40.0),
                                                    np.sqrt((1.0 - rho) / (1.0 + rho)))
            both = np.clip(np.where(lam_b < _ONE, both, one), 0.0, one)
            out[:, :, 2, 2], out[:, :, 2, 1], out[:, :, 2, 0] = both, 2.0 * (one - both), 1.0 - 2.0 * one + both
        if most >= 3:
            nodes, weights = np.polynomial.hermite_e.hermegauss(_NODES)
            weights = weights / weights.sum()
            alike = np.broadcast_to(rho >= _ONE, h.shape)
            with np.errstate(divide="ignore", invalid="ignore"):
                given = special.ndtr((h[..., None] - np.sqrt(rho)[..., None] * nodes) / np.sqrt(1.0 - rho)[..., None])
            for m in range(3, most + 1):
                for j in range(m + 1):
                    mixed = (special.comb(m, j) * given**j * (1.0 - given) ** (m - j)) @ weights
                    # Identical labels (rho = 1): all compliant or none, exactly.
                    exact = one if j == m else (1.0 - one) if j == 0 else 0.0
                    out[:, :, m, j] = np.where(alike, exact, np.nan_to_num(mixed))
        return np.clip(out, 0.0, 1.0)

    def draw_count_histograms(self, threshold: float, size: int, rng: np.random.Generator,
                              groups: list[tuple[np.ndarray, int]]) -> list[np.ndarray]:
        """Per group of universes that saw the same cases, how many of them had each compliant count.

        ``groups`` holds (the cases the group saw, its number of universes);
        each result is (size x cases seen + 1). One label per cell only. Given
        the case effects a universe's count is a Poisson-binomial over the
        cases it saw, independent of the other universes', so a group's counts
        are a multinomial draw from that distribution: the same null as
        drawing every label, exactly, at a cost that does not grow with the
        number of universes.
        """
        p = self.case_probabilities(threshold, size, rng)
        lengths = [len(cases) for cases, _ in groups]
        if all(np.array_equal(cases, np.arange(len(cases))) for cases, _ in groups):
            # Every group saw the first cases: one recursion, read at each group's length.
            pmfs = poisson_binomial_prefixes(p, lengths)
        else:
            pmfs = [poisson_binomial(p[:, cases]) for cases, _ in groups]
        return [rng.multinomial(n_universes, pmf) for pmf, (_, n_universes) in zip(pmfs, groups)]

    def _draw(self, threshold: float, size: int, rng: np.random.Generator) -> Any:
        """Null counts, (size x universes)."""
        n_uc = self.n_uc
        if self.one_label:
            p = self.case_probabilities(threshold, size, rng)[:, None, :]
            # Compare on the side of the smaller probability, so 0 and 1 are exact.
            flip = p > 0.5
            steps = np.rint(np.where(flip, 1.0 - p, p) * _STEPS).astype(np.uint16)
            labels = rng.integers(0, _STEPS, size=(size, *n_uc.shape), dtype=np.uint16) < steps
            labels ^= flip
            if self.cells is not None:
                labels &= self.cells
            # Summing in the narrowest type that holds the case count is several times faster.
            narrow = np.uint8 if n_uc.shape[1] < 256 else np.uint16 if n_uc.shape[1] < 65536 else np.int64
            return labels.view(np.uint8).sum(axis=2, dtype=narrow).astype(np.int64)
        lam_b, lam_w = (x[:, None, None] for x in self._lambdas(size, rng))
        a = special.ndtri(threshold)
        case = rng.standard_normal((size, 1, n_uc.shape[1]))
        cell = rng.standard_normal((size, *n_uc.shape))
        shared = np.sqrt(lam_b) * case + np.sqrt(np.maximum(lam_w - lam_b, 0.0)) * cell
        with np.errstate(divide="ignore", invalid="ignore"):
            p = special.ndtr((a - shared) / np.sqrt(1.0 - lam_w))
        # Where replicates of a case in a universe are identical (lam_w = 1).
        p = np.where(lam_w < _ONE, p, shared < a)
        k = rng.binomial(n_uc.astype(np.int64)[None], p)
        return k.sum(axis=2)


def poisson_binomial(p: np.ndarray) -> np.ndarray:
    """Distribution of the number of successes of independent Bernoulli(p), along the last axis.

    (... x trials) -> (... x trials + 1), by the usual recursion over trials
    (each step a convex combination, so it stays in [0, 1] and sums to 1 up
    to rounding); renormalised so that a multinomial draw accepts it.
    """
    return poisson_binomial_prefixes(p, [np.shape(p)[-1]])[0]


def poisson_binomial_prefixes(p: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    """``poisson_binomial`` of the first ``length`` trials, for each of ``lengths``, in one recursion."""
    p = np.asarray(p, dtype=float)
    pmf = np.zeros((*p.shape[:-1], p.shape[-1] + 1))
    pmf[..., 0] = 1.0
    done: dict[int, np.ndarray] = {}
    wanted = set(lengths)
    for trial in range(max(lengths) + 1):
        if trial in wanted:
            head = np.clip(pmf[..., : trial + 1], 0.0, None)
            done[trial] = head / head.sum(axis=-1, keepdims=True)
        if trial == p.shape[-1]:
            break
        q = p[..., trial : trial + 1]
        # Only the first trial + 2 entries can be non-zero yet.
        head = pmf[..., : trial + 2]
        head[..., 1:] = head[..., 1:] * (1.0 - q) + head[..., :-1] * q
        head[..., 0] *= 1.0 - q[..., 0]
    return [done[length] for length in lengths]


def _label_to_latent(rho: np.ndarray | float, rate: float) -> np.ndarray:
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
    return np.asarray(np.interp(rho, label, grid))


def _dependence(n: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Label-scale intra-case correlations (between, within) and the pooled rate.

    ``n`` and ``k`` are (... x universes x cases) with any leading
    dimensions (one per null or bootstrap data set), broadcast against each
    other. Returns arrays over them.
    """
    n_u = n.sum(axis=-1)
    # A universe may have no case in a bootstrap sample: no rate, no variance.
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n_u > 0, k.sum(axis=-1) / n_u, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = k.sum(axis=(-2, -1)) / n.sum(axis=(-2, -1))
    var = np.nan_to_num(pooled * (1.0 - pooled))
    r = rate[..., None]
    resid = k - r * n
    # Ratios of sums (covariances summed over cells over the pooled variance
    # times the number of the same pairs), not sums of per-universe ratios: with
    # rare events a universe's estimated variance is noisy (0 without a
    # violation), and dividing by it biases the estimate.
    square = (resid * resid).sum(axis=-2)
    total = resid.sum(axis=-2)
    own = (k * (1.0 - 2.0 * r) + r * r * n).sum(axis=-2)  # squared label residuals
    pairs_w = var * (n * (n - 1.0)).sum(axis=(-2, -1))
    pairs_b = var * (n.sum(axis=-2) ** 2 - (n * n).sum(axis=-2)).sum(axis=-1)
    n_cases = (n.sum(axis=-2) > 0).sum(axis=-1)
    scale = np.where(n_cases > 1, n_cases / np.maximum(n_cases - 1.0, 1.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho_w = (scale * square.sum(axis=-1) - own.sum(axis=-1)) / pairs_w
        rho_b = scale * (total**2 - square).sum(axis=-1) / pairs_b
    rho_b, rho_w, none = _settled(rho_b, rho_w, pairs_b, pairs_w, var)
    return rho_b, rho_w, np.where(none, np.nan, pooled)


def _resampled_dependence(n: np.ndarray, k: np.ndarray, drawn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_dependence`` of case bootstraps of (universes x cases) ``n`` and ``k``, its first two outputs.

    ``drawn`` (bootstraps x cases) counts each case's copies in each
    bootstrap. Every sum over the drawn cases is a sum over cases weighted by
    their copies, and every sum over universes of a term in a bootstrap's own
    rates expands into products of those rates with per-case sums (e.g.
    ``sum_u (k - r n)^2 = sum_u k^2 - 2 r.(k n) + r^2.n^2``): matrix products
    of (bootstraps x universes) by (universes x cases), not passes over a
    (bootstraps x universes x cases) array.
    """
    # Small products, many times: numpy's own loops (einsum), not a threaded BLAS, whose threads spin for
    # nothing on matrices this size and cost two to three times the CPU on a busy machine.
    def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return cast("np.ndarray", np.einsum("ij,jk->ik", a, b) if b.ndim == 2 else np.einsum("ij,j->i", a, b))

    n_u, k_u = dot(drawn, n.T), dot(drawn, k.T)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(n_u > 0, k_u / n_u, 0.0)
        pooled = k_u.sum(axis=1) / n_u.sum(axis=1)
    var = np.nan_to_num(pooled * (1.0 - pooled))
    square = (k * k).sum(axis=0) - 2.0 * dot(rate, k * n) + dot(rate * rate, n * n)  # per bootstrap and case
    total = k.sum(axis=0) - dot(rate, n)
    own = (k_u * (1.0 - 2.0 * rate) + rate * rate * n_u).sum(axis=1)
    cases_n = n.sum(axis=0)
    pairs_w = var * dot(drawn, (n * (n - 1.0)).sum(axis=0))
    pairs_b = var * dot(drawn, cases_n**2 - (n * n).sum(axis=0))
    n_cases = dot(drawn, (cases_n > 0).astype(float))
    scale = np.where(n_cases > 1, n_cases / np.maximum(n_cases - 1.0, 1.0), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho_w = (scale * (drawn * square).sum(axis=1) - own) / pairs_w
        rho_b = scale * (drawn * (total**2 - square)).sum(axis=1) / pairs_b
    return _settled(rho_b, rho_w, pairs_b, pairs_w, var)[:2]


def _settled(rho_b: np.ndarray, rho_w: np.ndarray, pairs_b: np.ndarray, pairs_w: np.ndarray, var: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Correlations where a kind of pair is missing or nothing varies, clipped to [0, 1]; and where nothing varies."""
    # No pair of that kind (one replicate, or one universe): not estimable.
    rho_w = np.where(pairs_w > 0, rho_w, np.nan)
    rho_b = np.where(pairs_b > 0, rho_b, np.nan)
    rho_b = np.where(np.isnan(rho_b), np.where(np.isnan(rho_w), 0.0, rho_w), rho_b)
    rho_w = np.where(np.isnan(rho_w), rho_b, rho_w)
    none = var <= 0
    rho_b, rho_w = np.where(none, 1.0, rho_b), np.where(none, 1.0, rho_w)
    return np.clip(rho_b, 0.0, 1.0), np.clip(rho_w, 0.0, 1.0), none


def fit_latent_null(n_uc: np.ndarray, k_uc: np.ndarray) -> LatentNull:
    """Estimate the intra-case correlations of one system's (universes x cases) counts."""
    n_uc, k_uc = np.asarray(n_uc, float), np.asarray(k_uc, float)
    n_u = n_uc.shape[0]
    probe = np.unique(np.linspace(0, n_u - 1, min(n_u, _PROBE)).round().astype(int))
    rho_b, rho_w, _ = (float(x) for x in _dependence(n_uc[probe], k_uc[probe]))
    value = float(_dependence(n_uc, k_uc)[2])
    pooled = value if np.isfinite(value) else None
    at = pooled if pooled is not None else 0.5
    return LatentNull(
        rho_between=rho_b,
        rho_within=rho_w,
        lam_between=float(_label_to_latent(rho_b, at)),
        lam_within=float(_label_to_latent(rho_w, at)),
        pooled_rate=pooled,
        n_uc=n_uc,
        k_uc=k_uc,
        probe=probe,
    )
