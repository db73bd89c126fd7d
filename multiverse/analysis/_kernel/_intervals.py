"""Confidence intervals for rates whose labels cluster by case.

A rate's transcripts are not independent: replicates of a case share it, so
they agree more than chance. Each target (a universe x system rate, or one
subgroup of it) is given as a row of per-case counts, ``n`` labels and ``k``
compliant ones, in (targets x cases) sparse matrices.

``wilson``
    Wilson's (1927) score interval at Kish's (1965) effective sample size
    ``n_eff = n / deff``, with the design effect of clustered sampling
    ``deff = 1 + (m - 1) * icc``: ``m = sum m_c^2 / sum m_c`` is the size-weighted
    mean number of labels per case and ``icc`` the intra-case correlation (the
    one-way ANOVA estimator over cases, clipped to [0, 1]), times Korn &
    Graubard's (1998) ``(t_{C-1} / z)^2`` for a variance estimated from C
    cases. With one label per case ``deff = 1`` and this is exactly
    statsmodels' Wilson interval.
    Ignoring the clustering (coverage 0.87-0.89 at 3 replicates and icc 0.3)
    is what this corrects.
``bootstrap``
    The percentile interval of a case bootstrap (cases resampled whole),
    widened to contain the ``wilson`` interval above. The percentile interval
    alone is too narrow with a few dozen cases and collapses to a point when
    no case varies (a cell without a violation gives [1, 1]); its coverage was
    0.83 at p = 0.05 with 36 cases and 0.72 for 6-case subgroups.

The ICC of a subgroup is too noisy to estimate from its own few cases, so
callers estimate it once per universe x system (``icc``) and reuse it for the
subgroups, falling back to the ICC pooled over all targets when a target's
own is not estimable (no replicates, no variation, or fewer than 5 labels of
the rarer kind), and to 1, the widest, when no target's is.
"""

from __future__ import annotations

from typing import TypeAlias, cast

import numpy as np
from scipy import sparse, special

# Bootstrap work is done a block of targets at a time, to bound memory (floats per block).
_BOOT_BLOCK = 4_000_000
# Cells (targets x cases) of one block of rows in rate_intervals: 4M, tens of MB as sparse float64.
_ROWS_CELLS = 1 << 22
# Fewest labels of the rarer kind an ICC is estimated from.
_FEW_LABELS = 5

__all__ = [
    "anova_terms", "cluster_bootstrap", "design_effect", "icc_from_terms", "rate_intervals", "share_icc", "target_icc",
    "wilson",
]


# A (targets x cases) count matrix: dense, or SciPy sparse (which ships no stubs, so mypy sees Any there).
Counts: TypeAlias = "np.ndarray | sparse.spmatrix | sparse.sparray"


def _csr(matrix: Counts) -> sparse.csr_matrix:
    return sparse.csr_matrix(matrix, dtype=np.float64)


_ROW_BLOCK = 1 << 18  # cells of a block of rows in _row_sums


def _row_sums(n_tc: Counts, k_tc: Counts | None = None) -> tuple[np.ndarray, ...]:
    """Per row: labels, cases with a label, sum of squared labels per case; with ``k_tc`` also compliant and sum k^2 / n.

    Dense arrays (a case matrix) are summed as they are; converting them to
    sparse first cost more than the sums (seconds at 10k universes).
    """
    if sparse.issparse(n_tc) or (k_tc is not None and sparse.issparse(k_tc)):
        n = _csr(n_tc)
        out = [np.asarray(n.sum(axis=1)).ravel(), np.asarray((n > 0).sum(axis=1), dtype=float).ravel(),
               np.asarray(n.multiply(n).sum(axis=1)).ravel()]
        if k_tc is not None:
            k = _csr(k_tc)
            with np.errstate(divide="ignore", invalid="ignore"):
                k_over = k.multiply(k).multiply(n.power(-1.0))
            out += [np.asarray(k.sum(axis=1)).ravel(), np.asarray(k_over.sum(axis=1)).ravel()]
        return tuple(out)
    n_all = np.asarray(n_tc, dtype=np.float64)
    k_all = None if k_tc is None else np.asarray(k_tc, dtype=np.float64)
    out = [np.empty(len(n_all)) for _ in range(3 if k_all is None else 5)]
    # A block of rows at a time: each temporary is a few MB the allocator reuses, where whole-matrix
    # ones (100k universes x 120 cases: 96 MB each) are fresh memory every call.
    step = max(1, _ROW_BLOCK // max(n_all.shape[1], 1))
    for start in range(0, len(n_all), step):
        rows = slice(start, start + step)
        n = n_all[rows]
        out[0][rows], out[2][rows] = n.sum(axis=1), np.einsum("ij,ij->i", n, n)
        out[1][rows] = (n > 0).sum(axis=1)
        if k_all is not None:
            k = k_all[rows]
            with np.errstate(divide="ignore", invalid="ignore"):
                k_over = np.divide(k * k, n, out=np.zeros_like(k), where=n > 0)
            out[3][rows], out[4][rows] = k.sum(axis=1), k_over.sum(axis=1)
    return tuple(out)


def anova_terms(n_tc: Counts, k_tc: Counts) -> np.ndarray:
    """Per target: (between-case SS, within-case SS, C - 1, N - C, N - sum m^2 / N, rarer side).

    The sums of a one-way ANOVA of binary labels with cases as groups, and
    the count of the rarer label (compliant or not); they add up over
    targets, which is how the pooled ICC is formed.
    """
    total_n, cases, square_n, total_k, q = _row_sums(n_tc, k_tc)
    with np.errstate(divide="ignore", invalid="ignore"):
        between = q - np.where(total_n > 0, total_k**2 / total_n, 0.0)
        within = total_k - q
        spread = total_n - np.where(total_n > 0, square_n / total_n, 0.0)
    rarer = np.minimum(total_k, total_n - total_k)
    return np.column_stack([between, within, cases - 1.0, total_n - cases, spread, rarer])


def icc_from_terms(terms: np.ndarray) -> np.ndarray:
    """ANOVA intra-case correlation from summed terms (rows); NaN when not estimable.

    Not estimable also where the rarer label occurs fewer than ``_FEW_LABELS``
    times: one or two violations can only look unclustered, so their ICC
    reads near 0 just when the rate sits far below its truth (coverage was
    0.72 for such draws at p = 0.02, 100 cases, 3 replicates, ICC 0.3).
    """
    terms = np.atleast_2d(terms)
    between, within, df_b, df_w, spread = terms.T[:5]
    rarer = terms[:, 5] if terms.shape[1] > 5 else np.full(len(terms), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        ms_b = between / df_b
        ms_w = within / df_w
        m0 = spread / df_b
        icc = (ms_b - ms_w) / (ms_b + (m0 - 1.0) * ms_w)
    estimable = (df_b > 0) & (df_w > 0) & (ms_b + ms_w > 0) & (rarer >= _FEW_LABELS)
    return np.where(estimable, np.clip(icc, 0.0, 1.0), np.nan)


def target_icc(terms: np.ndarray) -> np.ndarray:
    """The intra-case correlation each target's design effect uses: the one rule of every interval and count.

    ``terms`` are :func:`anova_terms` rows, one per target (a universe x
    system rate). A target's own ICC where it is estimable, else the ICC of
    the terms pooled over every target whose own is, else NaN (which
    :func:`design_effect` reads as 1, the widest). The curve's intervals, the
    joint test's count of significant universes and the rates table all take
    their targets' ICC from here, over the same targets: every universe x
    system of the run whose rate is a share.
    """
    own = icc_from_terms(terms)
    # Where no target's own is estimable (rare labels in every universe of a one-system run), the terms of
    # every target pooled: with 5 labels of the rarer kind among them, the universes' replicates estimate it
    # together (else 1, the widest, as before, and the count of significant universes had power 0.03-0.04).
    pool = terms[np.isfinite(own)] if np.isfinite(own).any() else terms
    pooled = icc_from_terms(pool.sum(axis=0))[0] if len(pool) else np.nan
    return np.where(np.isfinite(own), own, pooled)


def share_icc(included: np.ndarray, compliant: np.ndarray, means: np.ndarray | None) -> np.ndarray:
    """:func:`target_icc` of every system x universe of (systems x universes x cases) counts whose rate is a
    share (``means`` False or None), pooled over all of them; NaN for a mean of scores, whose interval is a t
    interval with no ICC. The one rule of the curve's intervals and the joint test's count (``CaseMatrix.share_icc``).
    """
    n_s, n_u, n_c = included.shape
    shares = np.ones(n_u, dtype=bool) if means is None else ~np.asarray(means, dtype=bool)
    out = np.full((n_s, n_u), np.nan)
    if shares.all():  # the matrices as they are: a mask copied both (1 GB at 100k universes x 5 systems)
        terms = anova_terms(included.reshape(-1, n_c), compliant.reshape(-1, n_c))
        out[:] = target_icc(terms).reshape(n_s, -1)
    elif shares.any():
        terms = anova_terms(included[:, shares].reshape(-1, n_c), compliant[:, shares].reshape(-1, n_c))
        out[:, shares] = target_icc(terms).reshape(n_s, -1)
    return out


def design_effect(n_tc: Counts, icc: np.ndarray, level: float) -> np.ndarray:
    """Kish's design effect ``1 + (m - 1) icc`` per target, ``m = sum m_c^2 / sum m_c``.

    Where cases hold more than one label, the variance behind it is estimated
    from C cases, so it is scaled by ``(t_{C-1} / z)^2`` too (Korn & Graubard
    1998): a few cases widen the interval instead of trusting a noisy ICC.
    With one label per case the design effect is exactly 1.
    """
    total, cases, square = _row_sums(n_tc)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(total > 0, square / total, 1.0)
    # An ICC that no target could estimate is taken as 1, the widest: n_eff
    # is then the number of cases.
    deff = 1.0 + (m - 1.0) * np.nan_to_num(np.asarray(icc, float), nan=1.0)
    # scipy.stats' norm.ppf and t.ppf are these special functions (df >= 1 and 0.5 < q < 1 here).
    z = special.ndtri(0.5 + level / 2)
    t = special.stdtrit(np.maximum(cases - 1.0, 1.0), 0.5 + level / 2)
    return cast("np.ndarray", np.where(m > 1.0, deff * (t / z) ** 2, deff))


def wilson(rate: np.ndarray, n_eff: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval at a (possibly fractional) sample size; NaN where n_eff = 0."""
    rate, n_eff = np.asarray(rate, float), np.asarray(n_eff, float)
    low = np.full(rate.shape, np.nan)
    high = np.full(rate.shape, np.nan)
    has = (n_eff > 0) & np.isfinite(rate)
    if has.any():
        lo, hi = _wilson_bounds(rate[has] * n_eff[has], n_eff[has], level)
        lo, hi = _near_the_edges(rate[has] * n_eff[has], n_eff[has], lo, hi, level)
        # At a rate of 0 or 1 the formula's bound misses the rate by a rounding error (1 - 1e-16): an
        # interval always holds its own estimate.
        low[has] = np.clip(np.fmin(lo, rate[has]), 0.0, 1.0)
        high[has] = np.clip(np.fmax(hi, rate[has]), 0.0, 1.0)
    return low, high


def _wilson_bounds(count: np.ndarray, nobs: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """statsmodels' ``proportion_confint(count, nobs, alpha=1 - level, method="wilson")``, term for term
    (its norm.isf is -ndtri): importing statsmodels (and scipy.stats with it) for this one formula cost a
    second or more of every first curve. The tests compare the two."""
    q_ = count / nobs
    crit = -special.ndtri((1 - level) / 2.0)
    crit2 = crit**2
    denom = 1 + crit2 / nobs
    center = (q_ + crit2 / (2 * nobs)) / denom
    dist = crit * np.sqrt(q_ * (1.0 - q_) / nobs + crit2 / (4.0 * nobs**2))
    dist /= denom
    return np.clip(center - dist, 0, 1), np.clip(center + dist, 0, 1)


def _near_the_edges(x: np.ndarray, n: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    level: float) -> tuple[np.ndarray, np.ndarray]:
    """Brown, Cai & DasGupta's (2001) modified Wilson interval.

    With one or two violations (or compliant labels) among a few dozen cases,
    Wilson's bound on that side sits above (below) small true rates: at
    p = 0.02 and 6 cases it covers 0.88. There the bound becomes the exact
    Poisson one, Gamma(x) at alpha/2 over n, when that is wider; elsewhere
    this is Wilson unchanged. (scipy.stats' gamma.ppf(q, a) is gammaincinv(a, q).)
    """
    tail = (1.0 - level) / 2.0
    edge = np.where(n <= 50, 2.0, np.where(n <= 100, 3.0, 0.0))
    few = (x > 0) & (x <= edge + 1e-9)
    lo = np.where(few, np.minimum(lo, special.gammaincinv(np.where(few, x, 1.0), tail) / n), lo)
    rest = n - x
    few = (rest > 0) & (rest <= edge + 1e-9)
    hi = np.where(few, np.maximum(hi, 1.0 - special.gammaincinv(np.where(few, rest, 1.0), tail) / n), hi)
    return lo, hi


def cluster_bootstrap(case: np.ndarray, n_cases: int, target: np.ndarray, n_targets: int, cells: np.ndarray,
                      included: np.ndarray, compliant: np.ndarray, level: float, n_boot: int,
                      seed: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of case-bootstrap rates (cases resampled whole), per target.

    Row arrays: ``case`` and ``target`` codes, ``cells`` codes (one cell: the
    pooled rate; several: the mean of cell rates), ``included`` and
    ``compliant`` weights (booleans per verdict, or counts per case). One draw
    of cases serves every target, so paired comparisons stay paired.
    """
    rng = np.random.default_rng(seed)
    # Case weights: how often each case is drawn in each replicate.
    weights = rng.multinomial(n_cases, np.full(n_cases, 1.0 / n_cases), size=n_boot).T.astype(np.float64)

    n_cells = int(cells.max()) + 1 if len(cells) else 1
    # Pair codes sorted by target, so a block of targets is a contiguous block of pairs.
    keys, pair = np.unique(np.asarray(target, np.int64) * n_cells + cells, return_inverse=True)
    n_pairs, target_of_pair = len(keys), keys // n_cells
    shape = (n_pairs, n_cases)
    counts = sparse.csr_matrix((included.astype(np.float64), (pair, case)), shape=shape)
    hits = sparse.csr_matrix((compliant.astype(np.float64), (pair, case)), shape=shape)
    starts = np.searchsorted(target_of_pair, np.arange(n_targets + 1))

    alpha = 1 - level
    low = np.full(n_targets, np.nan)
    high = np.full(n_targets, np.nan)
    block = max(1, _BOOT_BLOCK // max(n_boot, 1))
    for t0 in range(0, n_targets, block):
        t1 = min(n_targets, t0 + block)
        p0, p1 = starts[t0], starts[t1]
        n_b = counts[p0:p1] @ weights
        x_b = hits[p0:p1] @ weights
        has = n_b > 0
        cell_rate = np.divide(x_b, n_b, out=np.zeros_like(n_b), where=has)
        # Sum each target's pairs: rows of (x, n) for one cell, (cell rate, 1) for several.
        local = target_of_pair[p0:p1] - t0
        summing = sparse.csr_matrix(
            (np.ones(p1 - p0), (local, np.arange(p1 - p0))), shape=(t1 - t0, p1 - p0)
        )
        if n_cells == 1:
            total, denominator = summing @ x_b, summing @ n_b
        else:
            total, denominator = summing @ cell_rate, summing @ has.astype(np.float64)
        rates = np.divide(total, denominator, out=np.full_like(total, np.nan), where=denominator > 0)
        valid = ~np.all(np.isnan(rates), axis=1)
        if valid.any():
            with np.errstate(all="ignore"):
                q = np.nanquantile(rates[valid], [alpha / 2, 1 - alpha / 2], axis=1)
            low[t0:t1][valid] = q[0]
            high[t0:t1][valid] = q[1]
    return low, high


def rate_intervals(n_tc: Counts, k_tc: Counts, methods: np.ndarray, levels: np.ndarray, n_boot: int, seed: int | None,
                   icc: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Interval of each target's pooled rate, by its method and level (arrays over targets).

    ``wilson``: the design-effect Wilson interval, with each target's ICC
    (``icc`` when given, else :func:`target_icc` over these targets).
    ``bootstrap``: the case bootstrap percentile interval widened to contain it.
    """
    methods, levels = np.asarray(methods, dtype=object), np.asarray(levels, dtype=float)
    # Each target's numbers come from its own row, so the rows are taken a block at a time: the
    # whole (targets x cases) matrices as sparse float64, and their products, were GBs at 500k targets.
    n_targets, n_cases = n_tc.shape
    step = max(1, _ROWS_CELLS // max(n_cases, 1))
    blocks = [(a, min(a + step, n_targets)) for a in range(0, n_targets, step)]
    total, compliant, parts = np.zeros(n_targets), np.zeros(n_targets), []
    dense = not (sparse.issparse(n_tc) or sparse.issparse(k_tc))
    for a, b in blocks:
        n, k = (n_tc[a:b], k_tc[a:b]) if dense else (_csr(n_tc[a:b]), _csr(k_tc[a:b]))
        total[a:b] = np.asarray(n.sum(axis=1)).ravel()
        compliant[a:b] = np.asarray(k.sum(axis=1)).ravel()
        parts.append(anova_terms(n, k))
    rate = np.divide(compliant, total, out=np.full(len(total), np.nan), where=total > 0)
    if icc is None:
        icc = target_icc(np.concatenate(parts) if parts else np.zeros((0, 6)))
    low, high = np.full(len(rate), np.nan), np.full(len(rate), np.nan)
    for level in sorted(set(levels.tolist())):
        rows = levels == level
        deff = np.concatenate([design_effect(n_tc[a:b] if dense else _csr(n_tc[a:b]), icc[a:b], level) for a, b in blocks] or [np.zeros(0)])
        n_eff = total / deff
        w_low, w_high = wilson(rate[rows], n_eff[rows], level)
        low[rows], high[rows] = w_low, w_high
        boot = np.flatnonzero(rows & (methods == "bootstrap"))
        if len(boot):
            cells = _csr(n_tc[boot]).tocoo()
            b_low, b_high = cluster_bootstrap(
                cells.col, n_cases, cells.row, len(boot), np.zeros(cells.nnz, np.int64),
                cells.data, np.asarray(_csr(k_tc[boot])[cells.row, cells.col]).ravel(), level, int(n_boot), seed)
            low[boot], high[boot] = np.fmin(low[boot], b_low), np.fmax(high[boot], b_high)
    return low, high
