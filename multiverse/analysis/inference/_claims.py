"""One-sided tests of a pre-registered claim, per universe and across universes.

A claim says that a quantity lies on one side of a bound in (a share of) the
universes: a system's rate against a bound, the difference of two systems'
rates against 0 or a margin, a system's rank against a place. Each universe
gets two one-sided p-values: ``p_hold`` (small when the data show the claim
holds there) and ``p_fail`` (small when they show it breaks there).

Per universe (the curve's own inference, so replicates and paired cases are
never counted as independent evidence):

- a rate: the exact one-sided binomial p-value at Kish's effective sample
  size (the design effect of the curve's Wilson intervals,
  :func:`multiverse.analysis.inference._joint._effective_n`), ``P(X >= x | n_eff, b)``
  as a regularised incomplete beta function, so it is defined for a
  non-integer ``n_eff`` and, for a mean of scores in [0, 1], conservative
  (their variance is at most ``b (1 - b)``);
- a difference: the paired, case-clustered score statistic of
  ``D + margin = 0``, the variance of
  :func:`multiverse.analysis.curve.difference_curve` taken at the bound
  (the observed-variance z ran at 0.053 on a boundary null of equal rates
  over 5,000 draws), referred to Student's t with ``cases - 1`` degrees of
  freedom;
- a rank: a system holds rank <= r when it beats all but r - 1 of the other
  m systems; its p-values combine the m pairwise difference tests by the
  partial conjunction rule below.

Across universes, the partial conjunction rule (Benjamini & Heller 2008,
Bonferroni combination): the p-value that at least ``k`` of ``n`` one-sided
nulls are false is ``(n - k + 1) * p_(k)``, ``p_(k)`` the k-th smallest. It is
valid under any dependence between the tests, which universes sharing cases
have. ``k = n`` is the intersection-union test (the largest p-value; a claim
over every universe), ``k = 1`` Bonferroni.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import numpy as np
import pandas as pd

from multiverse.errors import InputError

from ..cases import Z_CAP, CaseMatrix
from ..cases import paired_cases as _paired
from ..cases import paired_z as _paired_z
from ._joint import _effective_n
from ._null_histograms import TIE

__all__ = ["difference_claim_tests", "partial_conjunction", "rank_claim_tests", "rate_claim_tests", "universes_needed"]


def universes_needed(share: float, n: int) -> int:
    """How many of ``n`` universes a share must cover: ``ceil(share * n)``, at least 1 (float noise rounded away)."""
    return max(1, min(n, math.ceil(round(share * n, 9))))


def partial_conjunction(p: Sequence[float] | np.ndarray, k: int) -> float:
    """The p-value that at least ``k`` of the nulls behind ``p`` are false: ``(n - k + 1) * p_(k)``, capped at 1."""
    values = np.sort(np.asarray(p, dtype=float))
    n = len(values)
    if not 1 <= k <= n:
        raise InputError(f"k: expected 1 to {n}, got {k}")
    return float(min(1.0, (n - k + 1) * values[k - 1]))


def _universe_ids(m: CaseMatrix, rows: np.ndarray) -> np.ndarray:
    return cast("np.ndarray", m.universes["universe_id"].to_numpy()[rows])


def rate_claim_tests(m: CaseMatrix, *, system: str, bound: float, side: str, level: float = 0.95) -> pd.DataFrame:
    """Per universe rating ``system``: ``universe_id``, ``estimate`` (the rate), ``n_eff``, ``p_hold``, ``p_fail``.

    ``side="at_least"``: the claim is rate >= bound (held when rate > bound is shown);
    ``"at_most"``: rate <= bound.
    """
    if side not in ("at_least", "at_most"):
        raise InputError(f"side: expected at_least or at_most, got {side!r}")
    if not 0 < bound < 1:
        raise InputError(f"bound: expected a rate strictly between 0 and 1, got {bound!r}")
    s = m.system_index(system)
    n_uc = m.included[s]
    rows = np.flatnonzero(n_uc.sum(axis=1) > 0)
    n_uc, k_uc = n_uc[rows], m.compliant[s][rows]
    rate = k_uc.sum(axis=1) / n_uc.sum(axis=1)
    n_eff = _effective_n(n_uc, m.share_icc()[s, rows], level)  # the curve's ICC rule
    x = rate * n_eff
    from scipy import stats  # a second or more to import: only the claims' tests need it

    # P(X >= x) and P(X <= x) for X ~ Binomial(n_eff, bound), continuous in x and n_eff.
    upper = np.where(x <= 0, 1.0, stats.beta.cdf(bound, np.maximum(x, 1e-12), n_eff - x + 1.0))
    lower = np.where(x >= n_eff, 1.0, stats.beta.sf(bound, x + 1.0, np.maximum(n_eff - x, 1e-12)))
    means = np.zeros(len(rows), dtype=bool) if m.means is None else np.asarray(m.means, dtype=bool)[rows]
    if means.any():
        # A mean of scores is tested as the curve shows it: its t interval, cluster-robust by case (mean_null.mean_z,
        # the Wilson interval at the number of cases where nothing varies), not a share's binomial at an ICC of 1.
        from .._kernel import FEW_OFF_EDGE, case_mean_interval, edge_cases
        from ._mean_null import mean_z

        se = case_mean_interval(n_uc[means], k_uc[means], level)[0]
        cases = (n_uc[means] > 0).sum(axis=1)
        z = mean_z(rate[means] - bound, np.where(np.isfinite(se), se, 0.0), cases, bound, level,
                   edge_cases(n_uc[means], k_uc[means]) < FEW_OFF_EDGE)
        upper[means], lower[means] = stats.norm.sf(z), stats.norm.cdf(z)
        n_eff[means] = cases
    p_hold, p_fail = (upper, lower) if side == "at_least" else (lower, upper)
    return pd.DataFrame({"universe_id": _universe_ids(m, rows), "estimate": rate, "n_eff": n_eff,
                         "p_hold": p_hold, "p_fail": p_fail})


def difference_claim_tests(m: CaseMatrix, *, a: str, b: str, margin: float = 0.0) -> pd.DataFrame:
    """Per universe rating both: the claim rate(a) - rate(b) > -margin, tested on the cases both have.

    Columns: ``universe_id``, ``estimate`` (the difference), ``se`` (paired, clustered
    by case, as the curve's), ``n_cases``, ``z``, ``p_hold``, ``p_fail``. ``z`` is the
    score statistic of ``difference + margin = 0``: each case's share of
    ``difference + margin`` is ``d_c + margin * w_c``, and its variance is estimated
    under that null, ``C / (C - 1) * sum_c (d_c + margin * w_c)^2`` (the curve's
    ``sum (d_c - D w_c)^2`` with D at the bound), referred to Student's t with C - 1
    degrees of freedom. A universe where the two systems agree on every case has no
    spread to judge a margin by: it shows neither side (both p-values 1).
    """
    pair = _paired(m, a, b)
    w = pair.weight
    diff = pair.contribution.sum(axis=1)
    _, se = _paired_z(diff, (pair.contribution * w).sum(axis=1), (pair.contribution ** 2).sum(axis=1),
                      (w * w).sum(axis=1), pair.n_cases)
    shifted = pair.contribution + margin * w
    n = pair.n_cases.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        se0 = np.sqrt(np.where(n > 1, n / (n - 1.0), np.nan) * (shifted ** 2).sum(axis=1))
        z = (diff + margin) / se0
    # No spread at all: the two systems agree on every case and the difference is exactly 0.
    z = np.clip(np.where(np.isfinite(z), z, 0.0), -Z_CAP, Z_CAP)
    df = np.maximum(n - 1.0, 1.0)
    from scipy import stats  # a second or more to import: only the claims' tests need it

    p_hold, p_fail = stats.t.sf(z, df), stats.t.cdf(z, df)
    blind = ~np.any(np.abs(pair.contribution) > TIE, axis=1)
    if margin:
        p_hold, p_fail = np.where(blind, 1.0, p_hold), np.where(blind, 1.0, p_fail)
    return pd.DataFrame({"universe_id": _universe_ids(m, pair.rows), "estimate": diff, "se": se,
                         "n_cases": pair.n_cases.astype(np.int64), "z": z, "p_hold": p_hold, "p_fail": p_fail})


def rank_claim_tests(m: CaseMatrix, *, system: str, rank: int) -> pd.DataFrame:
    """Per universe rating ``system`` and another: the claim that ``system`` ranks ``rank`` or better (1 = top).

    Columns: ``universe_id``, ``estimate`` (its competition rank by rate among the
    systems rated there), ``p_hold`` (it beats at least m - rank + 1 of the m others)
    and ``p_fail`` (at least ``rank`` others beat it), each a partial conjunction of
    the pairwise difference tests.
    """
    others = [o for o in m.systems if o != system]
    m.system_index(system)
    if not 1 <= rank <= len(others):
        raise InputError(f"rank: expected 1 to {len(others)} (a place some system could miss), got {rank!r}")
    tests = [difference_claim_tests(m, a=system, b=o).set_index("universe_id") for o in others]
    universes = _universe_ids(m, np.arange(len(m.universes)))
    hold = pd.DataFrame({o: t["p_hold"] for o, t in zip(others, tests)}).reindex(universes)
    fail = pd.DataFrame({o: t["p_fail"] for o, t in zip(others, tests)}).reindex(universes)
    n = m.included.sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = pd.DataFrame((m.compliant.sum(axis=2) / n).T, index=universes, columns=list(m.systems))
    rows = []
    for universe in universes:
        p_h = hold.loc[universe].dropna().to_numpy()
        p_f = fail.loc[universe].dropna().to_numpy()
        if len(p_h) == 0:
            continue  # the system, or every other, is not rated here
        # Beating all but rank - 1 of the others rated here; beaten by rank of them.
        k_hold = len(p_h) - rank + 1
        row = rates.loc[universe].dropna()
        rows.append({
            "universe_id": universe,
            "estimate": int((row > row[system]).sum()) + 1 if system in row else np.nan,
            "p_hold": partial_conjunction(p_h, k_hold) if k_hold >= 1 else 0.0,
            "p_fail": partial_conjunction(p_f, rank) if rank <= len(p_f) else 1.0,
        })
    return pd.DataFrame(rows, columns=["universe_id", "estimate", "p_hold", "p_fail"])
