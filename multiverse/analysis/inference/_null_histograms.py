"""A joint test's null, summarised: its statistics and band from whole null curves, or, for the rate test,
from histograms of counts.

``curves_summary`` takes null curves a block of replicates at a time (the
difference test's sign flips, a mean's bootstrap, the rate test's labels)
and keeps their sorted values for the band. The rest of this module spares
the rate test that (replicates x universes) work.

In the latent null of :mod:`multiverse.analysis.inference`, universes that
saw the same cases, and whose z uses the same effective size, are
exchangeable: given the case effects each one's compliant count is an
independent draw from the same Poisson-binomial. So a null curve is fully
described by how many universes of each such group had each count, a
multinomial draw per group (``LatentNull.draw_count_histograms``), and the
three statistics and the band follow from those counts without drawing a
label or holding a (replicates x universes) array:

- the mean z and the number of significant universes are the counts times
  each count's z (or its significance);
- the median is read from the cumulative counts, ordered by effect;
- the band's percentile at curve position i interpolates between order
  statistics across replicates, as ``numpy.percentile`` does: the r-th
  smallest value at position i is the smallest effect e_j for which at least
  r + 1 replicates have more than i universes at or below e_j, i.e. whose
  (r + 1)-th largest cumulative count exceeds i. Those order statistics of
  the cumulative counts are one sort over replicates per distinct effect.

The cost is per group and replicate (a Poisson-binomial over the cases,
cases^2 / 2 steps), not per universe, label and replicate: the joint test of
100,000 universes that all saw the same cases costs what one group costs.

Large multiverses whose universes saw different cases (judge failures
scattered over cells leave nearly every universe its own set) would need
one group per universe. There the null nests the universes' cases
(``nested_groups``): a universe that saw m cases sees the first m of them.
Cases are exchangeable in the null (every case effect is a fresh standard
normal), so each universe's own null distribution is unchanged; only the
cases two universes share grow, to the smaller of their two counts, which
the data's own overlap never exceeds. More shared cases make the universes'
null rates more alike, the null curves' statistics more spread and the test
conservative, never liberal (the mean z's null variance grows with every
shared case, its terms all positive); with a few cells missing here and
there the two nulls barely differ. Tested against the exact null under
simulated nulls with scattered failures and with exclusion rules.

Cells with several labels (replicates) nest the same way
(``NestedCounts``): a universe's cases in order of how many labels they
hold, most first, so two universes pair their most-labelled cases, which
makes their shared labels (and so their null covariance) as large as any
arrangement can. A universe's count is then a convolution of its cells'
count distributions given the case effects (``LatentNull.cell_count_pmfs``),
shared by the universes with the same numbers of cells of each size and
built along common prefixes; each universe's count is drawn from its
group's distribution by one uniform, so a null curve costs a draw per
universe, not a draw per label, and its statistics and band follow as for
curves drawn label by label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._rate_null import LatentNull

__all__ = [
    "TIE", "NestedCounts", "NullSummary", "UniverseGroups", "curve_statistics", "curves_summary", "grouped_summary",
    "nested_groups", "universe_groups",
]

#: A null, summarised: given the direction, the per-universe critical z and the band's
#: percentiles, the (replicates x 3) null statistics and the band's rows (one per percentile).
NullSummary = Callable[[int, float, tuple[float, ...]], tuple[np.ndarray, np.ndarray]]

# A null curve whose statistic equals the observed one up to float noise
# (matrix products vs direct sums) must count as ">=".
TIE = 1e-9

# Working arrays are (replicates x universes) float64; keep each near 32 MB (a null chunk makes
# several at once, and at 100k universes the step must stay in a few GB).
_CHUNK_CELLS = 4_000_000
# Replicates per working block: a block holds a few (replicates x cases) arrays per group.
_BLOCK = 1000


@dataclass(frozen=True)
class UniverseGroups:
    """Universes that saw the same cases at the same effective size: per group its cases, universes and size."""

    cases: list[np.ndarray]
    universes: np.ndarray
    n: np.ndarray


def universe_groups(n_uc: np.ndarray, n: np.ndarray, most: float = np.inf) -> UniverseGroups | None:
    """Group the rows of a (universes x cases) label-count array by the cases seen and the effective size ``n``.

    None when there are more than ``most`` groups (then nobody needs them).
    """
    seen = np.asarray(n_uc) > 0
    size = np.ascontiguousarray(n, dtype=np.float64).view(np.uint8).reshape(len(n), 8)
    key = np.ascontiguousarray(np.concatenate([np.packbits(seen, axis=1), size], axis=1))
    key = key.view(np.dtype((np.void, key.shape[1]))).ravel()
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    if len(first) > most:
        return None
    return UniverseGroups(cases=[np.flatnonzero(seen[i]) for i in first], universes=counts,
                          n=np.asarray(n, dtype=float)[first])


def nested_groups(n_uc: np.ndarray, n: np.ndarray) -> UniverseGroups:
    """Universes grouped by how many cases they saw (and their effective size), each seeing the first ones."""
    seen = (np.asarray(n_uc) > 0).sum(axis=1)
    key = np.column_stack([seen, np.asarray(n, dtype=float)])
    pairs, counts = np.unique(key, axis=0, return_counts=True)
    return UniverseGroups(cases=[np.arange(int(m)) for m in pairs[:, 0]], universes=counts, n=pairs[:, 1])


def grouped_summary(model: LatentNull, threshold: float, groups: UniverseGroups, draws: int,
                    rng: np.random.Generator, score_z: Callable[[np.ndarray, np.ndarray, float], np.ndarray]
                    ) -> NullSummary:
    """The joint rate test's null statistics and band from ``draws`` histograms of null counts."""
    # Every (group, count) is an item; effects as the observed ones are computed (count / cases - t).
    effect = np.concatenate([np.arange(len(c) + 1) / len(c) - threshold for c in groups.cases])
    z = np.concatenate([score_z(np.arange(len(c) + 1) / len(c) - threshold, np.full(len(c) + 1, g), threshold)
                        for c, g in zip(groups.cases, groups.n)])
    order = np.argsort(effect, kind="stable")
    values, starts = np.unique(effect[order], return_index=True)
    n_universes = int(groups.universes.sum())
    middle = np.array([(n_universes - 1) // 2, n_universes // 2])
    plan = list(zip(groups.cases, groups.universes.tolist()))

    def summary(direction: int, z_crit: float, percents: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
        null = np.empty((draws, 3))
        cumulative = np.empty((draws, len(values)), dtype=np.int64)
        significant = (z * direction > z_crit).astype(float)
        for start in range(0, draws, _BLOCK):
            size = min(_BLOCK, draws - start)
            counts = np.concatenate(model.draw_count_histograms(threshold, size, rng, plan), axis=1)
            cum = np.cumsum(np.add.reduceat(counts[:, order], starts, axis=1), axis=1)
            # The value at sorted position i is the first effect whose cumulative count exceeds i.
            at = (cum[:, :, None] <= middle).sum(axis=1)
            median = values[at].mean(axis=1)
            null[start : start + size] = np.column_stack(
                [direction * median, counts @ significant, direction * (counts @ z) / n_universes])
            cumulative[start : start + size] = cum
        return null, _band(cumulative, values, n_universes, percents)

    return summary


def curve_statistics(
    effect: np.ndarray, z: np.ndarray, z_crit: float, direction: int
) -> tuple[np.ndarray, np.ndarray]:
    """Oriented statistics of curves given as rows: effect, z are (curves x universes); the sign of each and
    (median effect, significant universes, mean z), oriented."""
    median = np.median(effect, axis=1)
    mean_z = z.mean(axis=1)
    if direction:
        sign = np.full(len(median), float(direction))
    else:
        sign = np.sign(np.where(np.abs(median) > TIE, median, 0.0))
        sign = np.where(sign == 0, np.sign(np.where(np.abs(mean_z) > TIE, mean_z, 0.0)), sign)
        sign = np.where(sign == 0, 1.0, sign)
    n_sig = (z * sign[:, None] > z_crit).sum(axis=1)
    return sign, np.column_stack([sign * median, n_sig, sign * mean_z])


def curves_summary(weights: np.ndarray, null_curves: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
                   n_universes: int) -> NullSummary:
    """A null given as whole curves: ``null_curves(block)`` turns a block of ``weights`` rows into (effects, z)."""

    def summary(direction: int, z_crit: float, percents: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
        n_rep = len(weights)
        chunk = max(1, min(n_rep, _CHUNK_CELLS // max(n_universes, 1)))
        null = np.empty((n_rep, 3))
        # Sorted null curves, float32: B x universes is the one big array we keep.
        sorted_curves = np.empty((n_rep, n_universes), dtype=np.float32)
        for start in range(0, n_rep, chunk):
            block = weights[start : start + chunk]
            effect, z = null_curves(block)
            null[start : start + len(block)] = curve_statistics(effect, z, z_crit, direction)[1]
            effect.sort(axis=1)
            sorted_curves[start : start + len(block)] = effect
        return null, np.percentile(sorted_curves, percents, axis=0)

    return summary


def _band(cumulative: np.ndarray, values: np.ndarray, n_universes: int, percents: tuple[float, ...]) -> np.ndarray:
    """Per percentile, the percentile across replicates of each sorted curve position (numpy's linear method)."""
    draws = len(cumulative)
    ordered = np.sort(cumulative, axis=0)
    positions = np.arange(n_universes)

    def order_statistic(rank: int) -> np.ndarray:
        # The rank-th smallest value: the first effect whose (rank + 1)-th largest cumulative count exceeds i.
        return values[np.searchsorted(ordered[draws - 1 - rank], positions, side="right")]

    rows = []
    for percent in percents:
        h = (draws - 1) * percent / 100.0
        low = int(np.floor(h))
        lower, upper = order_statistic(low), order_statistic(min(low + 1, draws - 1))
        rows.append(lower + (upper - lower) * (h - low))
    return np.array(rows)


class NestedCounts:
    """Null compliant counts of universes whose cells may hold several labels, their cases nested."""

    def __init__(self, model: LatentNull, n_uc: np.ndarray) -> None:
        labels = np.rint(np.asarray(n_uc)).astype(np.int64)
        self.model, self.most, self.n_universes = model, int(labels.max()), labels.shape[0]
        # Per universe, how many of its cases hold most, most - 1, ..., 1 labels.
        runs = np.stack([(labels == r).sum(axis=1) for r in range(self.most, 0, -1)], axis=1)
        self.keys, inverse = np.unique(runs, axis=0, return_inverse=True)
        order = np.argsort(inverse.ravel(), kind="stable")
        self.members = np.split(order, np.cumsum(np.bincount(inverse.ravel(), minlength=len(self.keys)))[:-1])

    def draw(self, threshold: float, size: int, rng: np.random.Generator) -> np.ndarray:
        """(size x universes) null compliant counts."""
        q = self.model.cell_count_pmfs(threshold, size, rng, self.most)
        out = np.empty((size, self.n_universes), dtype=np.int64)
        offset = np.arange(size)[:, None]
        for members, pmf in zip(self.members, self._pmfs(q)):
            cdf = np.cumsum(pmf, axis=1)
            cdf /= cdf[:, -1:]
            # One search for every replicate: row b's cumulative chances shifted by b stay in order.
            drawn = np.searchsorted((cdf + offset).ravel(), (rng.random((size, len(members))) + offset).ravel(),
                                    side="right").reshape(size, -1) - offset * cdf.shape[1]
            out[:, members] = np.minimum(drawn, cdf.shape[1] - 1)
        return out

    def _pmfs(self, q: np.ndarray) -> list[np.ndarray]:
        """Each group's count distribution, (size x labels + 1), built along the groups' common prefixes."""
        cache: dict[tuple[int, ...], np.ndarray] = {(): np.ones((q.shape[0], 1))}
        last: dict[tuple[int, ...], tuple[int, np.ndarray]] = {}
        out = []
        for key in self.keys.tolist():  # sorted: under one prefix the next run only grows
            for depth in range(1, len(key) + 1):
                prefix = tuple(key[:depth])
                if prefix in cache:
                    continue
                parent, labels = prefix[:-1], self.most - depth + 1
                done, pmf = last.get(parent, (0, cache[parent]))
                for case in range(sum(parent) + done, sum(parent) + prefix[-1]):
                    pmf = _convolve(pmf, q[:, case, labels, : labels + 1])
                cache[prefix] = pmf
                last[parent] = (prefix[-1], pmf)
            out.append(cache[tuple(key)])
        return out


def _convolve(pmf: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """Row by row, the distribution of a sum: ``pmf`` (size x L) and one cell's ``cell`` (size x m + 1)."""
    out = np.zeros((pmf.shape[0], pmf.shape[1] + cell.shape[1] - 1))
    for j in range(cell.shape[1]):
        out[:, j : j + pmf.shape[1]] += pmf * cell[:, j : j + 1]
    return out
