"""How sure the ranking is, given that the cases are a sample.

Three case-bootstrap and test procedures (Efron & Tibshirani 1993):

- ``bootstrap_ranks``: rank intervals inside chosen universes (cases resampled);
- ``joint_bootstrap``: cases resampled *jointly across universes* (one draw of
  case weights is applied to every universe, so the dependence between
  universes that share cases is kept); each resample recomputes P(top), the
  share of universes where A ranks above B and the ranks in the primary
  universe, and their percentile intervals say when systems are separable;
- ``pairwise_tests``: per pair of systems in the primary universe, a paired
  test of rate(A) = rate(B) on the cases both have (exact McNemar when every
  case difference is -1, 0 or 1, else a sign-flip randomisation test of the
  mean case difference), with Holm-adjusted p-values (Holm 1979) over the
  family of all pairs.

A resample in which a universe x system cell draws none of its cases leaves
that system unrated in that universe for that resample.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pandas as pd
from scipy import special

from .._kernel import CaseCounts, Parts, case_counts, holm, included_verdicts, ratio
from ._concordance import min_ranks

__all__ = ["bootstrap_ranks", "exact_mcnemar", "joint_bootstrap", "pairwise_tests", "position_shares", "separability", "top_shares"]


def position_shares(ranks: np.ndarray, tied: np.ndarray, ties: str) -> np.ndarray:
    """Share of each rank position (last axis, 1..S) held by each system: (..., S, S)."""
    positions = np.arange(1, ranks.shape[-1] + 1)
    r = ranks[..., None]
    if ties == "count":
        return cast("np.ndarray", (r == positions).astype(float))
    t = tied[..., None]
    inside = (positions >= r) & (positions < r + t)
    return np.where(inside, 1.0 / np.maximum(t, 1), 0.0)


def top_shares(matrix: np.ndarray, ties: str) -> np.ndarray:
    """Per row (universe) and system, its share of rank 1 (0 where unrated): (..., S)."""
    ranks, tied = min_ranks(matrix)
    top = (ranks == 1) & ~np.isnan(ranks)
    if ties == "count":
        return cast("np.ndarray", top.astype(float))
    return np.where(top, 1.0 / np.maximum(tied, 1), 0.0)


def joint_bootstrap(
    included: pd.DataFrame, *, universes: list[Any], systems: list[Any], primary: int | None,
    resamples: int, seed: int = 0, ties: str = "split", level: float = 0.95, counts: CaseCounts | None = None,
) -> dict[str, Any]:
    """Case bootstrap shared by every universe: intervals for P(top), P(A above B) and primary ranks.

    ``included`` is ``included_verdicts`` output; ``counts``, its case counts when already made
    (``case_counts``' ``reuse``).
    """
    counts = case_counts(included, universes, systems, reuse=counts)
    rng = np.random.default_rng(seed)
    n_u, n_s = len(universes), len(systems)
    p_top, p_above, primary_rank = [], [], []
    chunk = counts.batch(resamples)
    done = 0
    # The comparisons are half the bootstrap at 100,000 universes (its products already use every core).
    with Parts(n_u, n_s * chunk) as parts:
        while done < resamples:
            size = min(chunk, resamples - done)
            # System x resample x universe: each system's rates are one contiguous block, so the
            # comparisons below run over pairs of systems, never a universe x system x system array, and
            # each count over universes reads contiguous memory (with universes in the middle, at 100k
            # universes a count added 100k rows of a batch's width one at a time: 3 s of the bootstrap).
            rates = np.empty((n_s, size, n_u))
            compliant, labels = counts.sums(counts.weights(rng, size))
            compliant, labels = compliant.reshape(n_u, n_s, size), labels.reshape(n_u, n_s, size)

            def tally(part: slice, compliant: np.ndarray = compliant, labels: np.ndarray = labels,
                      rates: np.ndarray = rates) -> tuple[dict[int, np.ndarray], np.ndarray]:
                ratio(compliant[part], labels[part], out=rates[:, :, part].transpose(2, 0, 1))
                return _top_counts(rates[:, :, part], ties), _above_counts(rates[:, :, part])

            tallies = parts.map(tally)
            p_top.append(_top_shares_of([top for top, _ in tallies], n_u, (n_s, size)))
            p_above.append(_above_shares_of(np.sum([above for _, above in tallies], axis=0)))
            if primary is not None:
                primary_rank.append(min_ranks(rates[:, :, primary].T)[0])
            done += size
    tail = (1.0 - level) / 2.0

    def interval(values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            low = np.nanquantile(values, tail, axis=0, method="inverted_cdf")
            high = np.nanquantile(values, 1.0 - tail, axis=0, method="inverted_cdf")
        return np.stack([low, high], -1)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: a pair never rated together
        top_iv = interval(np.concatenate(p_top))
        above_iv = interval(np.concatenate(p_above))
        rank_iv = interval(np.concatenate(primary_rank)) if primary_rank else None
    return {
        "method": "case bootstrap: cases resampled with replacement, the same draw in every universe",
        "resamples": int(resamples), "level": level,
        "p_top": {s: top_iv[i].tolist() for i, s in enumerate(systems)},
        "primary_rank": ({s: rank_iv[i].tolist() for i, s in enumerate(systems)} if rank_iv is not None else {}),
        "p_above": {a: {b: above_iv[i, j].tolist() for j, b in enumerate(systems) if j != i}
                    for i, a in enumerate(systems)},
    }


def _top_shares(rates: np.ndarray, ties: str) -> np.ndarray:
    """Resample x system: the share of universes whose rank 1 the system holds (``top_shares``, averaged).

    ``rates`` is system x resample x universe. Rank 1 is the highest rate (NaN never), shared by
    the systems that reach it.
    """
    return _top_shares_of([_top_counts(rates, ties)], rates.shape[2], rates.shape[:2])


def _top_counts(rates: np.ndarray, ties: str) -> dict[int, np.ndarray]:
    """Per number of systems tied at rank 1 (1 for every holder when ties count whole), system x resample:
    how many of ``rates``' universes (system x resample x universe) give the system rank 1 in such a tie."""
    best = np.fmax.reduce(rates, axis=0)  # NaN only where a universe rates no system
    top = rates == best
    if ties == "count":
        return {1: _count(top)}
    tied = np.add.reduce(top, axis=0, dtype=np.int32)
    return {t: _count(top & (tied == t)) for t in (np.flatnonzero(np.bincount(tied.ravel())[1:]) + 1).tolist()}


def _top_shares_of(parts: list[dict[int, np.ndarray]], n_u: int, shape: tuple[int, ...]) -> np.ndarray:
    """Resample x system shares of ``_top_counts`` of the parts of ``n_u`` universes (system x resample
    ``shape``). A split share is counted per number of systems tied, then divided: exact counts, where a
    mean of the fractions added rounding at every universe."""
    shares = np.zeros(shape)
    for t in sorted({t for part in parts for t in part}):
        shares += sum(part[t].astype(np.int64) for part in parts if t in part) / t
    return (shares / n_u).T


def _above_shares(rates: np.ndarray) -> np.ndarray:
    """Resample x system x system: the share of universes rating both where a ranks above b (a tie 1/2).

    ``rates`` is system x resample x universe.
    """
    return _above_shares_of(_above_counts(rates))


def _above_counts(rates: np.ndarray) -> np.ndarray:
    """(above, tied, both rated) x resample x system x system: of ``rates``' universes (system x resample x
    universe), how many rate a above b, a and b the same, and both. Counted per pair a < b; b above a is
    what is left: both rated, neither above nor tied."""
    n_s, size = rates.shape[0], rates.shape[1]
    counts = np.zeros((3, size, n_s, n_s), dtype=np.int64)
    higher, equal, both = counts
    rated = ~np.isnan(rates)
    everywhere = bool(rated.all())  # the usual case: every cell drew some of its cases
    for a in range(n_s):
        both[:, a, a] = equal[:, a, a] = _count(rated[a])  # a with itself: never above, always tied
        for b in range(a + 1, n_s):
            higher[:, a, b], equal[:, a, b] = _count(rates[a] > rates[b]), _count(rates[a] == rates[b])
            both[:, a, b] = both[:, b, a] = both[:, a, a] if everywhere else _count(rated[a] & rated[b])
            equal[:, b, a] = equal[:, a, b]
            higher[:, b, a] = both[:, a, b] - higher[:, a, b] - equal[:, a, b]
    return counts


def _above_shares_of(counts: np.ndarray) -> np.ndarray:
    """Resample x system x system shares of ``_above_counts`` (of one part, or the parts' sum)."""
    higher, equal, both = counts
    wins = higher + 0.5 * equal
    with np.errstate(invalid="ignore", divide="ignore"):
        return cast("np.ndarray", wins / both)


def _count(flags: np.ndarray) -> np.ndarray:
    """True flags along the last axis (universes), as int32: half the time of ``count_nonzero``'s int64."""
    return cast("np.ndarray", np.add.reduce(flags, axis=-1, dtype=np.int32))


def _case_means(rows: pd.DataFrame) -> pd.Series:
    return rows.groupby("case_id", sort=False, observed=True)["compliant"].mean()


def exact_mcnemar(positive: int, discordant: int) -> float:
    """Two-sided exact binomial test that ``positive`` of ``discordant`` pairs is a draw at 1/2: twice the
    smaller tail (the binomial at 1/2 is symmetric), 1 at the centre. scipy.stats' binomtest gives the same
    to 1e-11 relative (the tests hold it there); through scipy.special the ranking does not import
    scipy.stats (a second or more)."""
    if 2 * positive == discordant:
        return 1.0
    return min(1.0, 2.0 * float(special.bdtr(min(positive, discordant - positive), discordant, 0.5)))


def _sign_flip_p(d: np.ndarray, flips: int, rng: np.random.Generator) -> float:
    """Two-sided p of mean(d) = 0 under random sign flips of the case differences."""
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    if np.isin(d, (-1.0, 1.0)).all():  # paired binary labels: the exact McNemar test
        return exact_mcnemar(int((d > 0).sum()), int(d.size))
    observed = abs(d.sum())
    if d.size <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float((np.abs(signs @ d) >= observed - 1e-12).mean())
    signs = rng.integers(0, 2, size=(flips, d.size)) * 2.0 - 1.0
    return float((1 + (np.abs(signs @ d) >= observed - 1e-12).sum()) / (flips + 1))


def pairwise_tests(
    included: pd.DataFrame, *, universe: Any, systems: list[Any], flips: int = 4000, seed: int = 0,
) -> dict[str, Any]:
    """Paired tests of rate(A) = rate(B) in one universe, with Holm-adjusted p-values over all pairs.

    ``included`` is ``included_verdicts`` output.
    """
    rows = included[(included["universe_id"] == universe).to_numpy()]
    by_system = {s: _case_means(g) for s, g in rows.groupby("system", sort=False, observed=True)}
    rng = np.random.default_rng(seed)
    pairs = []
    for a, b in itertools.combinations(systems, 2):
        first, second = by_system.get(a), by_system.get(b)
        shared = first.index.intersection(second.index) if first is not None and second is not None else []
        entry = {"a": a, "b": b, "n_cases": len(shared), "rate_a": float("nan"),
                 "rate_b": float("nan"), "difference": float("nan"), "p": float("nan"), "p_holm": float("nan")}
        if first is not None and second is not None and len(shared):
            x, y = first.loc[shared].to_numpy(float), second.loc[shared].to_numpy(float)
            entry.update(rate_a=float(x.mean()), rate_b=float(y.mean()), difference=float((x - y).mean()),
                         p=_sign_flip_p(x - y, flips, rng))
        pairs.append(entry)
    tested = [i for i, p in enumerate(pairs) if np.isfinite(p["p"])]
    if tested:
        adjusted = holm([pairs[i]["p"] for i in tested])
        for i, value in zip(tested, adjusted):
            pairs[i]["p_holm"] = float(value)
    return {
        "universe": universe,
        "family": f"all {len(tested)} pairs of systems compared in the primary universe",
        "adjustment": "Holm",
        "method": ("paired on the cases both systems have: exact McNemar test when every case difference is "
                   "-1, 0 or 1, else a sign-flip randomisation test of the mean case difference"),
        "pairs": pairs,
    }


def bootstrap_ranks(
    verdicts: pd.DataFrame,
    *,
    axes: Sequence[str],
    universes: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    ties: str = "split",
    level: float = 0.95,
) -> pd.DataFrame:
    """Bootstrap rank intervals inside universes: cases are resampled with replacement.

    The same resampled cases are used for every system (a paired, case-level
    cluster bootstrap: all replicates of a drawn case come along). Returns one
    row per universe x system: universe_id, system, rate, rank, rank_low,
    rank_high (percentile interval of the competition rank at ``level``) and
    p_top (share of resamples in which the system ranks first; ties per ``ties``).
    ``universes`` defaults to every universe; pass a few (the primary) for big grids.
    """
    if universes is not None and "universe_id" in verdicts.columns:
        # The chosen universes' rows first: the rest of a big table is never copied.
        verdicts = verdicts[verdicts["universe_id"].isin(list(universes)).to_numpy()]
    included = included_verdicts(verdicts, axes=axes, keys=())
    if universes is not None:
        included = included[included["universe_id"].isin(list(universes))]
    rng = np.random.default_rng(seed)
    tail = (1.0 - level) / 2.0
    frames = []
    for universe_id, rows in included.groupby("universe_id", sort=False, observed=True):
        c_codes, cases = pd.factorize(rows["case_id"])
        s_codes, systems = pd.factorize(rows["system"])
        shape = (len(cases), len(systems))
        flat = c_codes * len(systems) + s_codes
        n = np.bincount(flat, minlength=shape[0] * shape[1]).reshape(shape).astype(float)
        k = np.bincount(flat, weights=rows["compliant"].to_numpy(float),
                        minlength=shape[0] * shape[1]).reshape(shape)
        draws = rng.multinomial(len(cases), np.full(len(cases), 1.0 / len(cases)), size=resamples)
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = (draws @ k) / (draws @ n)
            observed = k.sum(0) / n.sum(0)
        ranks, tied = min_ranks(rates)
        top = position_shares(np.nan_to_num(ranks), tied, ties)[..., 0]
        observed_ranks, _ = min_ranks(observed[None, :])
        frames.append(pd.DataFrame({
            "universe_id": universe_id,
            "system": pd.Index(systems).tolist(),
            "rate": observed,
            "rank": observed_ranks[0].astype(int),
            "rank_low": np.nanquantile(ranks, tail, axis=0, method="inverted_cdf"),
            "rank_high": np.nanquantile(ranks, 1.0 - tail, axis=0, method="inverted_cdf"),
            "p_top": top.mean(0),
        }))
    columns = ["universe_id", "system", "rate", "rank", "rank_low", "rank_high", "p_top"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def separability(adjacent: list[dict[str, Any]]) -> list[str]:
    """Plain sentences for neighbours in the primary's order (``ranking()["uncertainty"]["adjacent"]``):
    which system ranks above the next, or that the two are not separable, with P(a above b) and its interval."""

    def number(value: float) -> str:
        return f"{value:.2f}" if value is not None and np.isfinite(value) else "n/a"

    out = []
    for row in adjacent:
        a, b = row["a"], row["b"]
        said = (f"{a} ranks above {b}" if row["separable"] and row["low"] > 0.5 else
                f"{b} ranks above {a}" if row["separable"] else f"{a} and {b} are not separable")
        out.append(f"{said}: P({a} above {b}) = {number(row['p_above'])} "
                   f"[{number(row['low'])}, {number(row['high'])}]")
    return out
