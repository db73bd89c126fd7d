"""Ranking stability: how the order of the audited systems depends on the universe.

Inside every universe the systems are ranked by their rate (share of included
transcripts judged compliant; higher rate = better = rank 1). This module asks
how far that ranking survives the measurement choices:

- ``rank_distribution``: per system, the share of universes in which it takes
  each rank, and ``p_top`` = P(rank 1);
- ``p_above``: per pair of systems, the share of universes where A ranks above B;
- Kendall's tau-b between the rate vectors of two universes, summarised per axis
  (mean tau over universe pairs that differ only in that axis) and Kendall's W
  (concordance of all universes, with the tie correction);
- bootstrap rank intervals inside one universe (cases resampled);
- ``flips``: the universes whose top system differs from the primary universe's,
  each with the smallest set of axis changes from the primary that flips the top.

Ties. Ranks are competition ranks ("min": rates 0.9, 0.9, 0.8 rank 1, 1, 3).
With ``ties="split"`` (default) a tie shares its positions evenly: two systems
tied for first each get half of rank 1 and half of rank 2, so every row and
column of the rank distribution sums to 1 and ``p_top`` sums to 1 over systems.
With ``ties="count"`` every tied system takes the best tied position in full,
so ``p_top`` may sum to more than 1. ``p_above`` counts a tie as one half.

The rates come from ``multiverse.analysis.rates`` (``included_verdicts``,
``system_rates``), re-exported here for the callers that import them from
this module.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from multiverse.analysis.rates import included_verdicts, system_rates
from multiverse.errors import InputError

__all__ = [
    "included_verdicts",
    "system_rates",
    "universe_ranks",
    "rank_distribution",
    "kendall_tau_b",
    "kendall_w",
    "bootstrap_ranks",
    "order_universes",
    "ranking",
]

Ties = Literal["split", "count"]


# --------------------------------------------------------------------------- ranks


def _rate_matrix(rates: pd.DataFrame) -> tuple[np.ndarray, list, list]:
    """Universe x system rate matrix (NaN where a system has no included transcript)."""
    u_codes, universes = pd.factorize(rates["universe_id"])
    s_codes, systems = pd.factorize(rates["system"])
    matrix = np.full((len(universes), len(systems)), np.nan)
    matrix[u_codes, s_codes] = rates["rate"].to_numpy(dtype=float)
    return matrix, pd.Index(universes).tolist(), pd.Index(systems).tolist()


def _min_ranks(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Competition ranks (1 = highest rate) and tie-group sizes along the last axis.

    NaN rates get NaN ranks and are not counted against anyone.
    """
    higher = (matrix[..., None, :] > matrix[..., :, None]).sum(-1)
    tied = (matrix[..., None, :] == matrix[..., :, None]).sum(-1)
    absent = np.isnan(matrix)
    ranks = np.where(absent, np.nan, higher + 1.0)
    return ranks, np.where(absent, 0, tied)


def _position_shares(ranks: np.ndarray, tied: np.ndarray, ties: Ties) -> np.ndarray:
    """Share of each rank position (last axis, 1..S) held by each system: (..., S, S)."""
    positions = np.arange(1, ranks.shape[-1] + 1)
    r = ranks[..., None]
    if ties == "count":
        return (r == positions).astype(float)
    t = tied[..., None]
    inside = (positions >= r) & (positions < r + t)
    return np.where(inside, 1.0 / np.maximum(t, 1), 0.0)


def universe_ranks(rates: pd.DataFrame) -> pd.DataFrame:
    """Add ``rank`` (competition rank, 1 = highest rate) and ``rank_avg`` (average rank) to a rates table."""
    matrix, universes, systems = _rate_matrix(rates)
    ranks, tied = _min_ranks(matrix)
    average = ranks + (tied - 1) / 2.0
    u_codes = pd.Index(universes).get_indexer(rates["universe_id"])
    s_codes = pd.Index(systems).get_indexer(rates["system"])
    out = rates.copy()
    out["rank"] = ranks[u_codes, s_codes].astype(int)
    out["rank_avg"] = average[u_codes, s_codes]
    return out


def rank_distribution(ranks: pd.DataFrame, *, ties: Ties = "split") -> pd.DataFrame:
    """Tidy rank distribution: system, rank, share (of universes where the system takes that rank).

    ``ranks`` is the output of ``universe_ranks`` (or any table with universe_id,
    system and rate). See the module docstring for ``ties``.
    """
    matrix, _, systems = _rate_matrix(ranks)
    shares = _rank_shares(matrix, ties)
    positions = np.arange(1, len(systems) + 1)
    return pd.DataFrame(
        {
            "system": np.repeat(systems, len(systems)),
            "rank": np.tile(positions, len(systems)),
            "share": shares.ravel(),
        }
    )


def _rank_shares(matrix: np.ndarray, ties: Ties) -> np.ndarray:
    ranks, tied = _min_ranks(matrix)
    ranked = ~np.isnan(ranks)
    per_universe = _position_shares(np.where(ranked, ranks, 0), tied, ties)
    counted = ranked.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return per_universe.sum(0) / counted[:, None]


# --------------------------------------------------------------------------- concordance


def _pair_signs(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per universe, sign(r_i - r_j) over all system pairs i < j, and the number of untied pairs.

    Kendall's tau-b of two universes is the dot product of their sign vectors
    over the square root of the product of their untied-pair counts.
    """
    i, j = np.triu_indices(matrix.shape[1], 1)
    signs = np.sign(matrix[:, i] - matrix[:, j])
    return signs, np.count_nonzero(signs, axis=1).astype(float)


def _tau(dots: np.ndarray, untied_a: np.ndarray, untied_b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(dots / np.sqrt(untied_a * untied_b), -1.0, 1.0)


def kendall_tau_b(first: Sequence[float], second: Sequence[float]) -> float:
    """Kendall's tau-b between two rate vectors over the same systems (NaN when either is all tied)."""
    signs, untied = _pair_signs(np.vstack([np.asarray(first, float), np.asarray(second, float)]))
    return float(_tau(signs[0] @ signs[1], untied[0], untied[1]))


def kendall_w(matrix: np.ndarray | Sequence[Sequence[float]]) -> dict[str, float]:
    """Kendall's coefficient of concordance W of universes (rows) ranking systems (columns).

    Values are rates (or any scores): each row is ranked with average ranks for
    ties and W uses the tie correction
    ``W = 12 S / (m^2 (n^3 - n) - m sum_u sum_groups (t^3 - t))``,
    with m rows, n columns and S the sum of squared deviations of the column
    rank sums from their mean. Returns {"w", "chi2", "df", "p_value", "universes",
    "systems"}; chi2 = m (n - 1) W on n - 1 degrees of freedom. W is NaN when
    every row is fully tied.
    """
    # scipy.special, not scipy.stats: the latter takes a second to import.
    from scipy.special import chdtrc

    values = np.asarray(matrix, dtype=float)
    m, n = values.shape
    ranks, tied = _min_ranks(values)
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


def _axis_pairs(codes: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
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


def _kendall_tau_summary(
    matrix: np.ndarray, codes: np.ndarray, axes: list[str], universes: list, max_matrix: int
) -> dict[str, Any]:
    signs, untied = _pair_signs(matrix)
    valid = untied > 0
    # The mean over all universe pairs needs no U x U matrix: with w_u = signs_u / sqrt(untied_u),
    # the sum of w_u . w_v over pairs u < v is (|sum w|^2 - sum |w|^2) / 2.
    w = signs[valid] / np.sqrt(untied[valid])[:, None]
    total = w.sum(0)
    n_valid = int(valid.sum())
    n_pairs = n_valid * (n_valid - 1) // 2
    mean = float(((total @ total) - (w * w).sum()) / 2.0 / n_pairs) if n_pairs else float("nan")
    by_axis = []
    for index, axis in enumerate(axes):
        first, second = _axis_pairs(codes, index)
        taus = _tau((signs[first] * signs[second]).sum(1), untied[first], untied[second])
        taus = taus[~np.isnan(taus)]
        by_axis.append({
            "axis": axis,
            "mean": float(taus.mean()) if taus.size else float("nan"),
            "min": float(taus.min()) if taus.size else float("nan"),
            "n_pairs": int(taus.size),
        })
    summary: dict[str, Any] = {"mean": mean, "n_pairs": n_pairs, "by_axis": by_axis,
                               "universes": None, "matrix": None}
    if len(universes) <= max_matrix:
        summary["universes"] = list(universes)
        summary["matrix"] = _tau(signs @ signs.T, untied[:, None], untied[None, :]).tolist()
    return summary


# --------------------------------------------------------------------------- bootstrap


def bootstrap_ranks(
    verdicts: pd.DataFrame,
    *,
    axes: Sequence[str],
    universes: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    ties: Ties = "split",
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
    included = included_verdicts(verdicts, axes=axes)
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
        ranks, tied = _min_ranks(rates)
        top = _position_shares(np.nan_to_num(ranks), tied, ties)[..., 0]
        observed_ranks, _ = _min_ranks(observed[None, :])
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


# --------------------------------------------------------------------------- flips and order


def _option_codes(rates: pd.DataFrame, axes: list[str], universes: list) -> tuple[np.ndarray, list[list]]:
    """Universe x axis matrix of option codes, and per axis the option names the codes index."""
    options = rates.drop_duplicates("universe_id").set_index("universe_id").loc[universes, axes]
    codes = np.zeros((len(universes), len(axes)), dtype=int)
    names = []
    for index, axis in enumerate(axes):
        codes[:, index], uniques = pd.factorize(options[axis], use_na_sentinel=False)
        names.append(pd.Index(uniques).tolist())
    return codes, names


def _top_sets(matrix: np.ndarray) -> list[frozenset[int]]:
    best = np.nanmax(np.where(np.isnan(matrix), -np.inf, matrix), axis=1)
    return [frozenset(np.flatnonzero(row == top)) for row, top in zip(matrix, best)]


def _flips(
    matrix: np.ndarray, codes: np.ndarray, axes: list[str], universes: list,
    systems: list, primary: int, option_names: list[list],
) -> list[dict[str, Any]]:
    tops = _top_sets(matrix)
    by_codes = {tuple(row): u for u, row in enumerate(codes.tolist())}
    base = codes[primary]
    flips = []
    for u in range(len(universes)):
        if tops[u] == tops[primary]:
            continue
        differ = np.flatnonzero(codes[u] != base).tolist()
        found, via = differ, u
        for size in range(1, len(differ)):
            for subset in itertools.combinations(differ, size):
                probe = base.copy()
                probe[list(subset)] = codes[u][list(subset)]
                candidate = by_codes.get(tuple(probe.tolist()))
                if candidate is not None and tops[candidate] != tops[primary]:
                    found, via = list(subset), candidate
                    break
            else:
                continue
            break
        flips.append({
            "universe_id": universes[u],
            "top": [systems[s] for s in sorted(tops[u])],
            "changes": {axes[a]: option_names[a][codes[u][a]] for a in found},
            "n_axes_differ": len(differ),
            "via_universe": universes[via],
        })
    flips.sort(key=lambda f: (len(f["changes"]), f["n_axes_differ"], str(f["universe_id"])))
    return flips


def order_universes(rates: pd.DataFrame, *, axes: Sequence[str], primary: str | None = None) -> pd.DataFrame:
    """Universes in reading order for a bump chart, with their distance from the primary.

    The primary comes first, then universes by the number of axes whose option
    differs from the primary's (``distance``); within a distance, universes
    with the same ranking sit together (sorted by the ranks of the primary's
    systems, best first), so lines cross only where the ranking changes.
    Returns universe_id, distance.
    """
    axes = list(axes)
    matrix, universes, _ = _rate_matrix(rates)
    codes, _ = _option_codes(rates, axes, universes)
    p = universes.index(primary) if primary is not None else 0
    distance = (codes != codes[p]).sum(1)
    ranks, _ = _min_ranks(matrix)
    by_primary = np.argsort(np.nan_to_num(ranks[p], nan=np.inf), kind="stable")
    pattern = np.nan_to_num(ranks[:, by_primary], nan=matrix.shape[1] + 1.0)
    # np.lexsort sorts by the last key first: distance, then the primary's best system's rank, ...
    keys = np.lexsort((*pattern.T[::-1], distance))
    return pd.DataFrame({"universe_id": [universes[i] for i in keys], "distance": distance[keys]})


# --------------------------------------------------------------------------- ranking


def ranking(
    verdicts: pd.DataFrame,
    *,
    axes: Sequence[str],
    primary: str | None = None,
    ties: Ties = "split",
    bootstrap: int = 1000,
    bootstrap_universes: Sequence[str] | None = None,
    seed: int = 0,
    max_matrix: int = 50,
) -> dict[str, Any]:
    """How stable the ranking of systems is across universes.

    Takes a verdicts table and the axis names. ``primary`` is the universe the
    audit reports; None means none is declared (then no flips and, by default,
    no bootstrap are computed: nothing is compared with a stand-in). Bootstrap rank
    intervals (``bootstrap`` resamples of cases, 0 to skip) are computed for
    ``bootstrap_universes`` (default: the primary only). The full Kendall tau
    matrix is included only when there are at most ``max_matrix`` universes.

    Returns a JSON-ready dict::

        {"universes": int, "primary": id, "ties": "split"|"count",
         "systems": [system, ...],
         "p_top": {system: p},                           # P(rank 1), ties per `ties`
         "rank_distribution": {system: [p_rank1, p_rank2, ...]},
         "p_above": {a: {b: p}},                         # P(a ranks above b), tie = 1/2
         "kendall_tau": {"mean": tau over all universe pairs, "n_pairs": int,
                         "by_axis": [{"axis", "mean", "min", "n_pairs"}],
                         "universes": [id, ...] | None, "matrix": [[tau]] | None},
         "kendall_w": {"w", "chi2", "df", "p_value", "universes", "systems"},
         "flips": [{"universe_id", "top": [system, ...], "changes": {axis: option},
                    "n_axes_differ": int, "via_universe": id}],
         "bootstrap": [{"universe_id", "system", "rate", "rank", "rank_low",
                        "rank_high", "p_top"}],
         "notes": [str, ...]}

    ``flips`` lists each universe whose set of top systems differs from the
    primary's. ``changes`` is the smallest subset of that universe's differences
    from the primary that, applied alone to the primary, gives an existing
    universe whose top also differs (``via_universe``); subsets are searched by
    increasing size, in axis order, falling back to all differences. Undefined
    statistics are NaN.
    """
    axes = list(axes)
    rates = system_rates(verdicts, axes=axes)
    if rates.empty:
        raise InputError("verdicts: column 'status': expected at least one row with status ok")
    matrix, universes, systems = _rate_matrix(rates)
    notes: list[str] = []
    codes, option_names = _option_codes(rates, axes, universes)
    if primary is None and len(universes) == 1:
        p = 0  # a single universe is the audit as given: there is nothing to choose
    elif primary is None:
        p = None
        notes.append("no primary universe is declared, so top flips and rank intervals against it are not reported")
    elif primary in universes:
        p = universes.index(primary)
    else:
        raise InputError(f"verdicts: column 'universe_id': expected the primary universe {primary!r}")

    shares = _rank_shares(matrix, ties)
    higher = np.nansum(matrix[:, :, None] > matrix[:, None, :], axis=0)
    equal = np.nansum(matrix[:, :, None] == matrix[:, None, :], axis=0)
    both = (~np.isnan(matrix)).astype(int).T @ (~np.isnan(matrix)).astype(int)
    with np.errstate(invalid="ignore", divide="ignore"):
        above = (higher + 0.5 * equal) / both

    complete = ~np.isnan(matrix).any(0)
    if not complete.all():
        dropped = [systems[s] for s in np.flatnonzero(~complete)]
        notes.append("Kendall's tau and W use only systems rated in every universe; "
                     f"left out: {', '.join(map(str, dropped))}")
    concordant = matrix[:, complete]
    tau = _kendall_tau_summary(concordant, codes, axes, universes, max_matrix)
    if (_pair_signs(concordant)[1] == 0).any():
        notes.append("Kendall's tau is undefined for universes in which every system has the same rate")

    chosen = ([universes[p]] if p is not None else []) if bootstrap_universes is None else list(bootstrap_universes)
    boot = (bootstrap_ranks(verdicts, axes=axes, universes=chosen, resamples=bootstrap,
                            seed=seed, ties=ties) if bootstrap and chosen else pd.DataFrame())
    return {
        "universes": len(universes),
        "primary": universes[p] if p is not None else None,
        "ties": ties,
        "systems": list(systems),
        "p_top": {s: float(shares[i, 0]) for i, s in enumerate(systems)},
        "rank_distribution": {s: shares[i].tolist() for i, s in enumerate(systems)},
        "p_above": {a: {b: float(above[i, j]) for j, b in enumerate(systems) if j != i}
                    for i, a in enumerate(systems)},
        "kendall_tau": tau,
        "kendall_w": kendall_w(concordant),
        "flips": _flips(matrix, codes, axes, universes, systems, p, option_names) if p is not None else [],
        "bootstrap": boot.to_dict(orient="records"),
        "notes": notes,
    }
