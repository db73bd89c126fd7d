"""Concordance of the universes' rankings: Kendall's tau-b per pair of universes and Kendall's W.

Imported results are often unbalanced: not every system is rated in every
universe. Concordance is then measured where it is defined:

- Kendall's tau-b of two universes uses the systems *both* rated (their count
  is reported); a pair with fewer than two shared systems, or with every shared
  system tied in one of the universes, has no tau (NaN) and is counted apart;
  a pair sharing only two systems has tau = +1 or -1 by construction (one pair
  of systems, ordered alike or not), so the mean tau and its per-axis means
  leave such pairs out and count them apart (``n_pairs_two_systems``), since
  on an unbalanced import they pull the mean towards +-1;
- Kendall's W (Kendall & Babington Smith 1939) needs every universe to rank
  the same systems, so it is computed on the largest complete block: a set of
  systems and every universe that rates all of them, with the most universe x
  system cells (ties: more systems). The search is exhaustive unless the
  universes' rated sets have more than 20,000 distinct intersections.

Universes are grouped by their set of rated systems ("pattern"), so the mean
tau over all pairs of universes costs O(patterns^2 x system pairs + patterns x
universes x system pairs), never a universes x universes matrix. With more
than 20 patterns and more than a million universe pairs, the mean is taken
over a fixed random sample of a million pairs (``sampled_pairs`` says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

# Candidate system sets the complete-block search examines at most.
_BLOCK_CANDIDATES = 20_000
# Universe pairs drawn for the mean tau when rated patterns are too many to group by.
_SAMPLED_PAIRS = 1_000_000
# Fewest shared systems a pair's tau must rest on to enter a mean: with two it is +-1 by construction.
MIN_SHARED = 3

__all__ = ["kendall_tau_b", "kendall_w", "largest_complete_block", "tau_notes", "tau_summary"]


def min_ranks(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Competition ranks (1 = highest rate) and tie-group sizes along the last axis.

    NaN rates get NaN ranks and are not counted against anyone.
    """
    higher = (matrix[..., None, :] > matrix[..., :, None]).sum(-1)
    tied = (matrix[..., None, :] == matrix[..., :, None]).sum(-1)
    absent = np.isnan(matrix)
    ranks = np.where(absent, np.nan, higher + 1.0)
    return ranks, np.where(absent, 0, tied)


def pair_signs(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per universe, sign(r_i - r_j) over all system pairs i < j (0 where either is unrated), and
    whether both systems of the pair are rated.

    Kendall's tau-b of two universes over their shared systems is the dot
    product of their sign vectors over the square root of the product of their
    untied-pair counts, each counted over the pairs the other universe rates.
    """
    i, j = np.triu_indices(matrix.shape[1], 1)
    rated = ~np.isnan(matrix)
    both = rated[:, i] & rated[:, j]
    signs = np.where(both, np.sign(np.nan_to_num(matrix[:, i] - matrix[:, j])), 0.0)
    return signs, both.astype(float)


def _tau(dots: np.ndarray, untied_a: np.ndarray, untied_b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return cast("np.ndarray", np.clip(dots / np.sqrt(untied_a * untied_b), -1.0, 1.0))


def tau_between(signs: np.ndarray, both: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Tau-b of universe pairs (first[k], second[k]) over the systems both rate (NaN when undefined)."""
    untied = np.abs(signs)
    shared = both[first] * both[second]
    dots = (signs[first] * signs[second]).sum(1)
    return _tau(dots, (untied[first] * shared).sum(1), (untied[second] * shared).sum(1))


def kendall_tau_b(first: Sequence[float], second: Sequence[float]) -> float:
    """Kendall's tau-b between two rate vectors over the systems both rate (NaN when undefined)."""
    signs, both = pair_signs(np.vstack([np.asarray(first, float), np.asarray(second, float)]))
    return float(tau_between(signs, both, np.array([0]), np.array([1]))[0])


def kendall_w(matrix: np.ndarray | Sequence[Sequence[float]]) -> dict[str, float]:
    """Kendall's coefficient of concordance W of universes (rows) ranking systems (columns).

    Values are rates (or any scores): each row is ranked with average ranks for
    ties and W uses the tie correction
    ``W = 12 S / (m^2 (n^3 - n) - m sum_u sum_groups (t^3 - t))``,
    with m rows, n columns and S the sum of squared deviations of the column
    rank sums from their mean. Returns {"w", "chi2", "df", "p_value", "universes",
    "systems"}; chi2 = m (n - 1) W on n - 1 degrees of freedom. W is NaN when
    every row is fully tied or the matrix is smaller than 2 x 2.
    """
    # scipy.special, not scipy.stats: the latter takes a second to import.
    from scipy.special import chdtrc

    values = np.asarray(matrix, dtype=float).reshape(len(matrix), -1) if len(matrix) else np.empty((0, 0))
    m, n = values.shape
    if m == 0 or n == 0:
        return {"w": float("nan"), "chi2": float("nan"), "df": max(n - 1, 0), "p_value": float("nan"),
                "universes": m, "systems": n}
    ranks, tied = min_ranks(values)
    average = ranks + (tied - 1) / 2.0
    sums = average.sum(0)
    spread = ((sums - m * (n + 1) / 2.0) ** 2).sum()
    tie_term = (tied**2 - 1).sum()  # each member of a tie group of size t adds t^2 - 1: t^3 - t per group
    denominator = m**2 * (n**3 - n) - m * tie_term
    w = 12.0 * spread / denominator if denominator > 0 else float("nan")
    statistic = m * (n - 1) * w
    p_value = float(chdtrc(n - 1, statistic)) if n > 1 and np.isfinite(w) else float("nan")
    return {"w": float(w), "chi2": float(statistic), "df": n - 1, "p_value": p_value,
            "universes": m, "systems": n}


def largest_complete_block(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Row and column indices of the largest all-rated block, and whether the search was exhaustive.

    The best block's systems are always an intersection of some universes'
    rated sets (then every universe rating them all joins), so the search
    closes the rated sets under intersection; past ``_BLOCK_CANDIDATES`` sets
    it stops and returns the best found. Empty arrays when no block has at
    least two rows and two columns.
    """
    rated = ~np.isnan(matrix)
    patterns, counts = np.unique(rated, axis=0, return_counts=True)
    # Rated sets as bit masks: intersection is one '&'.
    masks = [int("".join("1" if x else "0" for x in row[::-1]) or "0", 2) for row in patterns]
    candidates, frontier = set(masks), set(masks)
    while frontier and len(candidates) < _BLOCK_CANDIDATES:
        fresh = {c & m for c in frontier for m in masks} - candidates
        candidates |= fresh
        frontier = fresh
    exhaustive = not frontier
    best, best_key = 0, (0, 0)
    for candidate in candidates:
        width = candidate.bit_count()
        if width < 2:
            continue
        n_rows = sum(int(c) for m, c in zip(masks, counts) if m & candidate == candidate)
        key = (n_rows * width, width)
        if n_rows >= 2 and key > best_key:
            best, best_key = candidate, key
    if not best:
        return np.empty(0, int), np.empty(0, int), exhaustive
    columns = np.array([i for i in range(matrix.shape[1]) if best >> i & 1])
    return np.flatnonzero(rated[:, columns].all(1)), columns, exhaustive


def _pattern_sums(signs: np.ndarray, both: np.ndarray, groups: np.ndarray, n_groups: int,
                  shared: np.ndarray) -> tuple[float, int, int]:
    """Sum over universe pairs sharing at least MIN_SHARED systems of tau, the number of
    them where it is defined, and the number of defined pairs left out for sharing fewer.

    ``shared`` is the (patterns x patterns) count of systems two patterns both rate.

    Per universe u and rated pattern h, u's signs over the pairs h rates,
    scaled by u's untied count there, are w_u^h; tau(u, v) for u in pattern g
    and v in h is w_u^h . w_v^g, so a block of pairs sums to a dot product of
    two column sums.
    """
    untied = np.abs(signs)
    masks = np.vstack([both[np.flatnonzero(groups == g)[0]] for g in range(n_groups)])
    members = [np.flatnonzero(groups == g) for g in range(n_groups)]

    def weights(rows: np.ndarray, h: int) -> tuple[np.ndarray, float, int]:
        counts = untied[rows] @ masks[h]
        ok = counts > 0
        w = np.where(ok[:, None], signs[rows] * masks[h] / np.sqrt(np.where(ok, counts, 1.0))[:, None], 0.0)
        return w.sum(0), (w * w).sum(), int(ok.sum())

    total, defined, few = 0.0, 0, 0
    for g in range(n_groups):
        for h in range(g, n_groups):
            a_sum, a_sq, a_ok = weights(members[g], h)   # universes of g, over the pairs h rates
            if g == h:
                block_total, block_defined = ((a_sum @ a_sum) - a_sq) / 2.0, a_ok * (a_ok - 1) // 2
            else:
                b_sum, _, b_ok = weights(members[h], g)  # universes of h, over the pairs g rates
                block_total, block_defined = float(a_sum @ b_sum), a_ok * b_ok
            if shared[g, h] >= MIN_SHARED:
                total += block_total
                defined += block_defined
            else:
                few += block_defined
    return total, defined, few


def _sampled_sums(signs: np.ndarray, both: np.ndarray, rated: np.ndarray, pairs: int,
                  seed: int = 0) -> tuple[float, int, int]:
    """Sum of tau over ``pairs`` random universe pairs sharing at least MIN_SHARED systems, how
    many of them were defined, and how many defined ones shared fewer."""
    rng = np.random.default_rng(seed)
    n = len(signs)
    first = rng.integers(0, n, pairs)
    second = (first + rng.integers(1, n, pairs)) % n  # never the same universe
    total, defined, few = 0.0, 0, 0
    for start in range(0, pairs, 20_000):
        a, b = first[start:start + 20_000], second[start:start + 20_000]
        taus, enough = _enough_shared(tau_between(signs, both, a, b), rated, a, b)
        total += float(np.nansum(taus[enough]))
        defined += int((~np.isnan(taus) & enough).sum())
        few += int((~np.isnan(taus) & ~enough).sum())
    return total, defined, few


def _enough_shared(taus: np.ndarray, rated: np.ndarray, first: np.ndarray,
                   second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The taus, and which of the pairs share at least MIN_SHARED rated systems."""
    return taus, (rated[first] & rated[second]).sum(1) >= MIN_SHARED


def tau_summary(matrix: np.ndarray, codes: np.ndarray, axes: list[str], universes: list[Any],
                max_matrix: int, shown: Sequence[str] | None = None) -> dict[str, Any]:
    """Mean tau over universe pairs sharing at least MIN_SHARED systems, per axis over such pairs
    that differ only in that axis, and (for at most ``max_matrix`` universes) the full tau matrix
    (every pair, however few systems it shares) with the shared-system counts. ``shown``: the axes
    given a ``by_axis`` row (None: all); each axis's row reads only its own pairs."""
    signs, both = pair_signs(matrix)
    rated = ~np.isnan(matrix)
    groups, _ = pd.factorize(pd.Series([r.tobytes() for r in rated]))
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    n_universes = len(universes)
    all_pairs = n_universes * (n_universes - 1) // 2
    # Pattern blocks cost patterns^2 x system pairs; past that, a fixed sample of pairs.
    sampled = n_groups > 20 and all_pairs > _SAMPLED_PAIRS
    if sampled:
        total, defined, few = _sampled_sums(signs, both, rated, _SAMPLED_PAIRS)
        defined_share, few_share = defined / _SAMPLED_PAIRS, few / _SAMPLED_PAIRS
    else:
        pattern_rated = np.vstack([rated[np.flatnonzero(groups == g)[0]] for g in range(n_groups)]) \
            if n_groups else np.zeros((0, matrix.shape[1]), bool)
        shared = pattern_rated.astype(int) @ pattern_rated.T.astype(int)
        total, defined, few = _pattern_sums(signs, both, groups, n_groups, shared)
    by_axis = []
    for index, axis in enumerate(axes):
        if shown is not None and axis not in shown:
            continue
        first, second = axis_pairs(codes, index)
        taus, enough = _enough_shared(tau_between(signs, both, first, second), rated, first, second)
        kept = taus[~np.isnan(taus) & enough]
        by_axis.append({"axis": axis, "mean": float(kept.mean()) if kept.size else float("nan"),
                        "min": float(kept.min()) if kept.size else float("nan"), "n_pairs": int(kept.size),
                        "n_pairs_two_systems": int((~np.isnan(taus) & ~enough).sum())})
    if sampled:  # counts scaled from the sample to all pairs
        defined, few = round(defined_share * all_pairs), round(few_share * all_pairs)
    summary: dict[str, Any] = {
        "mean": float(total / (defined_share * _SAMPLED_PAIRS)) if sampled and defined
        else float(total / defined) if defined else float("nan"),
        "n_pairs": int(defined),
        "n_pairs_two_systems": int(few),
        "n_pairs_undefined": int(all_pairs - defined - few),
        "sampled_pairs": _SAMPLED_PAIRS if sampled else None,
        "by_axis": by_axis, "universes": None, "matrix": None, "n_systems": None,
    }
    if n_universes <= max_matrix:
        everyone = np.arange(n_universes)
        first, second = np.repeat(everyone, n_universes), np.tile(everyone, n_universes)
        summary["universes"] = list(universes)
        summary["matrix"] = tau_between(signs, both, first, second).reshape(n_universes, n_universes).tolist()
        summary["n_systems"] = (rated.astype(int) @ rated.T.astype(int)).tolist()
    return summary


def tau_notes(tau: dict[str, Any]) -> list[str]:
    """What the mean Kendall's tau leaves out or estimates (``tau_summary`` output)."""
    notes = []
    if tau["n_pairs_undefined"]:
        notes.append(f"Kendall's tau is undefined for {tau['n_pairs_undefined']} of "
                     f"{tau['n_pairs'] + tau['n_pairs_undefined']} universe pairs: fewer than two shared "
                     "systems, or every shared system tied in one of the two")
    if tau["n_pairs_two_systems"]:
        notes.append(f"mean Kendall's tau leaves out {tau['n_pairs_two_systems']:,} universe pairs that share "
                     f"only two systems (tau is +1 or -1 by construction there); it is over the "
                     f"{tau['n_pairs']:,} pairs sharing at least three")
    if tau["sampled_pairs"]:
        notes.append(f"the universes rate too many different sets of systems to group: mean Kendall's tau is "
                     f"estimated from {tau['sampled_pairs']:,} random universe pairs")
    return notes


def axis_pairs(codes: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs of universes whose option codes differ only at ``axis``."""
    others = np.delete(codes, axis, axis=1)
    if others.shape[1]:
        flat = np.ravel_multi_index(others.T, others.max(0) + 1)
    else:
        flat = np.zeros(len(codes), dtype=int)
    context = pd.factorize(flat)[0]
    order = np.argsort(context, kind="stable")
    sizes = np.bincount(context)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    firsts, seconds = [], []
    for size in np.unique(sizes[sizes > 1]):
        groups = starts[sizes == size][:, None] + np.arange(size)
        members = order[groups]
        a, b = np.triu_indices(size, 1)
        firsts.append(members[:, a].ravel())
        seconds.append(members[:, b].ravel())
    if not firsts:
        return np.empty(0, int), np.empty(0, int)
    return np.concatenate(firsts), np.concatenate(seconds)
