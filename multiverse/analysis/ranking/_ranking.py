"""Ranking stability: how the order of the audited systems depends on the universe.

Inside every universe the systems rated there are ranked by their rate (share
of included transcripts judged compliant; higher rate = better = rank 1). This
module asks how far that ranking survives the measurement choices:

- ``rank_distribution``: per system, the share of *all* universes in which it
  takes each rank, and ``p_top`` = P(rank 1);
- ``p_above``: per pair of systems, the share of the universes rating both
  where A ranks above B;
- Kendall's tau-b and W (``multiverse.analysis.ranking``);
- case-bootstrap intervals and paired tests with Holm's adjustment
  (``multiverse.analysis.ranking``);
- ``flips``: the universes whose top system differs from the primary universe's,
  each with the smallest set of axis changes from the primary that gives that
  same top.

Unbalanced tables. When not every system is rated in every universe (imports),
ranks are taken within each universe over the systems rated there, so rank 1
always exists and ``p_top`` sums to 1 over systems (each universe weighs 1/U).
A system not rated in a universe holds no position there: its rank
distribution sums to its ``coverage`` (the share of universes rating it), and
``p_top_when_rated`` is P(rank 1) over those universes only. A rank among
3 rated systems is not a rank among 24: read ranks together with coverage.

Ties. Ranks are competition ranks ("min": rates 0.9, 0.9, 0.8 rank 1, 1, 3).
With ``ties="split"`` (default) a tie shares its positions evenly: two systems
tied for first each get half of rank 1 and half of rank 2, so ``p_top`` sums
to 1 over systems. With ``ties="count"`` every tied system takes the best tied
position in full, so ``p_top`` may sum to more than 1. ``p_above`` counts a tie
as one half.

The rates come from ``multiverse.analysis.rates`` (``included_verdicts``,
``system_rates``), re-exported here for the callers that import them from
this module.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from multiverse.errors import InputError

from .._kernel import CaseCounts, counts_of_rates, dropped_notes, included_verdicts, resampled_rows
from ..rates import system_rates
from ._concordance import (
    kendall_tau_b,
    kendall_w,
    largest_complete_block,
    min_ranks,
    pair_signs,
    tau_notes,
    tau_summary,
)
from ._uncertainty import bootstrap_ranks, joint_bootstrap, pairwise_tests, position_shares

__all__ = ["bootstrap_ranks", "included_verdicts", "kendall_tau_b", "kendall_w", "order_universes",
           "rank_distribution", "rank_stability", "ranking", "system_rates", "universe_ranks"]

Ties = Literal["split", "count"]


# --------------------------------------------------------------------------- ranks


def _rate_matrix(rates: pd.DataFrame) -> tuple[np.ndarray, list[Any], list[Any]]:
    """Universe x system rate matrix (NaN where a system has no included transcript)."""
    u_codes, universes = pd.factorize(rates["universe_id"])
    s_codes, systems = pd.factorize(rates["system"])
    matrix = np.full((len(universes), len(systems)), np.nan)
    matrix[u_codes, s_codes] = rates["rate"].to_numpy(dtype=float)
    return matrix, pd.Index(universes).tolist(), pd.Index(systems).tolist()


def universe_ranks(rates: pd.DataFrame) -> pd.DataFrame:
    """Add ``rank`` (competition rank, 1 = highest rate), ``tied`` (how many systems share that rate in the
    universe, 1 when none does) and ``rank_avg`` (average rank) to a rates table.

    ``rank`` and ``tied`` are all ``ties="split"`` needs: the system holds
    1/tied of each position rank .. rank + tied - 1 (the explorer sums these
    over the universes a reader selects).
    """
    matrix, universes, systems = _rate_matrix(rates)
    ranks, tied = min_ranks(matrix)
    average = ranks + (tied - 1) / 2.0
    u_codes = pd.Index(universes).get_indexer(rates["universe_id"])
    s_codes = pd.Index(systems).get_indexer(rates["system"])
    out = rates.copy()
    out["rank"] = ranks[u_codes, s_codes].astype(int)
    out["tied"] = tied[u_codes, s_codes].astype(int)
    out["rank_avg"] = average[u_codes, s_codes]
    return out


def rank_distribution(ranks: pd.DataFrame, *, ties: Ties = "split") -> pd.DataFrame:
    """Tidy rank distribution: system, rank, share (of all universes, in which the system takes that rank).

    ``ranks`` is the output of ``universe_ranks`` (or any table with universe_id,
    system and rate). Over ranks, a system's shares sum to the share of
    universes that rate it. See the module docstring for ``ties``.
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
    """System x position: share of all universes in which the system holds the position."""
    ranks, tied = min_ranks(matrix)
    ranked = ~np.isnan(ranks)
    per_universe = position_shares(np.where(ranked, ranks, 0), tied, ties)
    return cast("np.ndarray", per_universe.sum(0) / max(len(matrix), 1))


# --------------------------------------------------------------------------- flips and order


def _option_codes(rates: pd.DataFrame, axes: list[str], universes: list[Any]) -> tuple[np.ndarray, list[list[Any]]]:
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


def _top_keys(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Universe x system: whether the system is top there (``_top_sets`` as a mask), and per universe
    one value per set of top systems (equal sets, equal values)."""
    best = np.nanmax(np.where(np.isnan(matrix), -np.inf, matrix), axis=1)
    top = matrix == best[:, None]
    if top.shape[1] <= 62:  # the set as bits
        return top, top.astype(np.int64) @ (np.int64(1) << np.arange(top.shape[1], dtype=np.int64))
    return top, pd.factorize(pd.Series([row.tobytes() for row in top]))[0]


def _flips(
    matrix: np.ndarray, codes: np.ndarray, axes: list[str], universes: list[Any],
    systems: list[Any], primary: int, option_names: list[list[Any]],
) -> list[dict[str, Any]]:
    """Every universe whose top differs from the primary's, with the smallest change that gives that top.

    A change is a subset of the axes on which the universe differs from the primary; applied to the primary
    it names an existing universe (``via_universe``; of equal option codes, the last) whose set of top
    systems is *this* universe's set. The search goes by increasing size, then ``itertools.combinations``
    order, and ends, at worst, at every difference (the universe itself), so "top X when <changes>" is true.
    """
    top, tops = _top_keys(matrix)
    flipped = np.flatnonzero(tops != tops[primary])
    changed, via = codes[flipped] != codes[primary], flipped.copy()  # until a smaller change hits
    n_differ = changed.sum(1).tolist()
    # One probe at a time past 16 axes (2^axes subsets at worst; the loop stops at a first hit) or int64 keys.
    if codes.shape[1] > 16 or not _search_by_arrays(codes, tops, primary, flipped, changed, via):
        by_codes = {tuple(row): u for u, row in enumerate(codes.tolist())}
        base = codes[primary].tolist()
        for i, (u, row) in enumerate(zip(flipped.tolist(), codes[flipped].tolist())):
            differ = np.flatnonzero(changed[i]).tolist()
            for subset in itertools.chain.from_iterable(
                    itertools.combinations(differ, size) for size in range(1, len(differ))):
                candidate = by_codes.get(tuple(row[a] if a in subset else b for a, b in enumerate(base)))
                if candidate is not None and tops[candidate] == tops[u]:
                    changed[i], changed[i, list(subset)], via[i] = False, True, candidate
                    break
    # Python objects only for the output: options axis by axis (dicts keep axis order), names per top set.
    changes: list[dict[str, Any]] = [{} for _ in range(len(flipped))]
    for a, axis in enumerate(axes):
        for i, code in zip(np.flatnonzero(changed[:, a]).tolist(), codes[flipped[changed[:, a]], a].tolist()):
            changes[i][axis] = option_names[a][code]
    sets, first = np.unique(tops[flipped], return_index=True)
    named = {key: [systems[s] for s in np.flatnonzero(top[u])] for key, u in zip(sets.tolist(), flipped[first])}
    flips = [{"universe_id": universes[u], "top": list(named[key]), "changes": change, "n_axes_differ": n,
              "via_universe": universes[v]}
             for u, key, change, n, v in zip(flipped.tolist(), tops[flipped].tolist(), changes, n_differ, via.tolist())]
    flips.sort(key=lambda f: (len(f["changes"]), f["n_axes_differ"], str(f["universe_id"])))
    return flips


def _search_by_arrays(codes: np.ndarray, tops: np.ndarray, primary: int, flipped: np.ndarray,
                      changed: np.ndarray, via: np.ndarray) -> bool:
    """``_flips``'s search with numpy, the same results; False, having changed nothing, if the keys overflow.

    A row of codes is one int64 key (mixed radix over each axis's distinct codes). Universes differing on d axes
    share the candidates, the size-s combinations of 0..d-1 in order as masks over their axes (ascending)."""
    terms, radix = np.zeros(codes.shape, dtype=np.int64), 1  # radix: a Python int, it may outgrow int64
    for a in reversed(range(codes.shape[1])):
        uniques, inverse = np.unique(codes[:, a], return_inverse=True)
        if radix * len(uniques) > np.iinfo(np.int64).max:  # keys (below this product) would not fit
            return False
        terms[:, a], radix = inverse.ravel() * radix, radix * len(uniques)
    keys = terms.sum(1)
    # Stable: of equal keys the last universe sits rightmost, where side="right" - 1 lands, as the loop's dict
    # keeps the last. A probe's key: the primary's plus, per changed axis, the universe's term less the primary's.
    order = np.argsort(keys, kind="stable")
    sorted_keys, delta = keys[order], terms[flipped] - terms[primary]
    n_differ = changed.sum(1)
    for d in np.unique(n_differ[n_differ > 1]).tolist():
        rows = np.flatnonzero(n_differ == d)
        at = np.nonzero(changed[rows])[1].reshape(len(rows), d)  # each row's differing axes, ascending
        for size in range(1, d):
            subsets = (np.array(list(itertools.combinations(range(d), size)))[:, :, None] == np.arange(d)).any(1)
            step, left = max(1, (1 << 21) // len(subsets)), np.ones(len(rows), dtype=bool)  # 2M probes at once
            for start in range(0, len(rows), step):
                part, part_at = rows[start:start + step], at[start:start + step]
                probes = keys[primary] + np.take_along_axis(delta[part], part_at, 1) @ subsets.T  # row x subset
                position = np.maximum(np.searchsorted(sorted_keys, probes, side="right") - 1, 0)
                hit = (sorted_keys[position] == probes) & (tops[order[position]] == tops[flipped[part], None])
                found, first = hit.any(1), hit.argmax(1)
                changed[part[found, None], part_at[found]] = subsets[first[found]]
                via[part[found]] = order[position[found, first[found]]]
                left[start:start + step] = ~found
            rows, at = rows[left], at[left]
    return True


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
    ranks, _ = min_ranks(matrix)
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
    rates: pd.DataFrame | None = None,
    counts: CaseCounts | None = None,
    shown: Sequence[str] | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    """How stable the ranking of systems is across universes, and how sure it is.

    Takes a verdicts table and the axis names. ``primary`` is the universe the
    audit reports; None means none is declared (then no flips and, by default,
    no bootstrap are computed: nothing is compared with a stand-in). Bootstrap rank
    intervals (``bootstrap`` resamples of cases, 0 to skip) are computed for
    ``bootstrap_universes`` (default: the primary only). The full Kendall tau
    matrix is included only when there are at most ``max_matrix`` universes.

    Returns a JSON-ready dict::

        {"universes": int, "primary": id, "ties": "split"|"count",
         "systems": [system, ...],
         "primary_top": [system, ...],
         "p_top": {system: p},              # P(rank 1) over all universes; sums to 1 (ties "split")
         "p_top_when_rated": {system: p},   # P(rank 1) over the universes rating the system
         "coverage": {system: share},       # share of universes rating the system
         "rank_distribution": {system: [p_rank1, p_rank2, ...]},  # over all universes; sums to coverage
         "p_above": {a: {b: p}},            # over universes rating both; tie = 1/2
         "kendall_tau": {"mean", "n_pairs", "n_pairs_two_systems", "n_pairs_undefined", "sampled_pairs": int | None,
                         "by_axis": [{"axis", "mean", "min", "n_pairs"}],
                         "universes": [id] | None, "matrix": [[tau]] | None,
                         "n_systems": [[systems both rated]] | None},
         "kendall_w": {"w", "chi2", "df", "p_value", "universes", "systems",
                       "block_systems": [system, ...], "complete": bool},
         "flips": [{"universe_id", "top": [system, ...], "changes": {axis: option},
                    "n_axes_differ": int, "via_universe": id}],
         "bootstrap": [{"universe_id", "system", "rate", "rank", "rank_low",
                        "rank_high", "p_top"}],
         "uncertainty": {"method", "resamples", "level",
                         "p_top": {system: [low, high]},
                         "primary_rank": {system: [low, high]},
                         "p_above": {a: {b: [low, high]}},
                         "adjacent": [{"a", "b", "p_above", "low", "high", "separable"}]} | None,
         "pairwise": {"universe", "family", "adjustment", "method",
                      "pairs": [{"a", "b", "n_cases", "rate_a", "rate_b",
                                 "difference", "p", "p_holm"}]},
         "notes": [str, ...]}

    ``rates`` and ``counts`` are what the analysis would compute first, when the caller
    already has them of these verdicts (``Results`` shares them with the variance):
    ``system_rates(verdicts, axes=axes)`` and the case counts of its rows
    (``case_resampling.case_counts``; used only when they are of the rates' cells).
    ``shown``: the axes given a row in ``kendall_tau.by_axis`` (None: all). ``reference``: a
    pairwise scale's reference system, whose rows are left out (every other system's scores are
    preferences over it); the document then names it and says so.

    ``flips`` lists every universe whose set of top systems differs from the
    primary's (see ``_flips``). ``uncertainty.adjacent`` takes the systems
    rated in the primary universe, in its order, and says for each neighbour
    pair whether the interval of P(a above b) excludes 1/2 (``separable``).
    ``pairwise`` tests the pairs of those systems. Undefined statistics are NaN.
    """
    axes = list(axes)
    if reference is not None:  # its own rate is one half by construction
        verdicts = verdicts[(verdicts["system"].astype(str) != reference).to_numpy()]
    rates = system_rates(verdicts, axes=axes) if rates is None else rates
    if rates.empty:
        raise InputError("verdicts: column 'status': expected at least one row with status ok")
    document = rank_stability(rates, axes=axes, primary=primary, ties=ties, max_matrix=max_matrix, shown=shown)
    notes: list[str] = dropped_notes(verdicts) + document.pop("notes")
    matrix, universes, systems = _rate_matrix(rates)
    p = universes.index(document["primary"]) if document["primary"] is not None else None
    rated, above = ~np.isnan(matrix), _Positions.of(matrix, ties).above

    chosen = ([universes[p]] if p is not None else []) if bootstrap_universes is None else list(bootstrap_universes)
    # The joint bootstrap reads every universe's counts; the rest only the rows of the universes it tests.
    counts = counts_of_rates(verdicts, axes, rates, reuse=counts) if bootstrap else None
    included = resampled_rows(verdicts, axes, universes=[*chosen, *([universes[p]] if p is not None else [])])
    boot = (bootstrap_ranks(included, axes=[], universes=chosen, resamples=bootstrap,
                            seed=seed, ties=ties) if bootstrap and chosen else pd.DataFrame())
    uncertainty = None
    if bootstrap:
        uncertainty = joint_bootstrap(included, universes=universes, systems=systems,
                                      primary=p, resamples=bootstrap, seed=seed, ties=ties, counts=counts)
        uncertainty["adjacent"] = _adjacent(matrix[p], systems, above, uncertainty["p_above"]) if p is not None else []
    pairwise: dict[str, Any] = {"universe": None, "family": "none: no primary universe is declared",
                                "adjustment": "holm", "method": None, "pairs": []}
    if p is not None:
        pairwise = _primary_pairwise(included, universes[p], systems, rated[p], seed, notes)
    if reference is not None:
        notes.append(f"the reference system {reference} is left out of the ranking: every other system's "
                     "scores are preferences over it")
    named = {"reference": reference} if reference is not None else {}
    return {**document, "bootstrap": boot.to_dict(orient="records"), "uncertainty": uncertainty,
            "pairwise": pairwise, "notes": notes, **named}


def rank_stability(rates: pd.DataFrame, *, axes: Sequence[str], primary: str | None = None, ties: Ties = "split",
                   max_matrix: int = 50, shown: Sequence[str] | None = None) -> dict[str, Any]:
    """The part of :func:`ranking` read off one value per universe x system alone (higher = better = rank 1).

    ``rates`` has universe_id, the axis columns, system and ``rate``: a rate, or any score that orders the
    systems (a Bradley-Terry score, ``bradley_terry``). Returns the keys universes, primary, ties, systems,
    primary_top, p_top, p_top_when_rated, coverage, rank_distribution, p_above, kendall_tau, kendall_w, flips
    and notes, as :func:`ranking` documents them (``shown`` as there).
    """
    axes = list(axes)
    matrix, universes, systems = _rate_matrix(rates)
    notes: list[str] = []
    codes, option_names = _option_codes(rates, axes, universes)
    p = _primary_index(primary, universes, notes)
    positions = _Positions.of(matrix, ties)
    notes += _coverage_notes(positions.rated, len(systems))
    tau = tau_summary(matrix, codes, axes, universes, max_matrix, shown)
    notes += tau_notes(tau)
    w = _kendall_w_block(matrix, positions.rated, universes, systems, notes)
    shares = positions.shares
    return {
        "universes": len(universes),
        "primary": universes[p] if p is not None else None,
        "ties": ties,
        "systems": list(systems),
        "primary_top": [systems[s] for s in sorted(_top_sets(matrix[[p]])[0])] if p is not None else [],
        "p_top": {s: float(shares[i, 0]) for i, s in enumerate(systems)},
        "p_top_when_rated": {s: float(positions.top_when_rated[i]) for i, s in enumerate(systems)},
        "coverage": {s: float(positions.coverage[i]) for i, s in enumerate(systems)},
        "rank_distribution": {s: shares[i].tolist() for i, s in enumerate(systems)},
        "p_above": {a: {b: float(positions.above[i, j]) for j, b in enumerate(systems) if j != i}
                    for i, a in enumerate(systems)},
        "kendall_tau": tau,
        "kendall_w": w,
        "flips": _flips(matrix, codes, axes, universes, systems, p, option_names) if p is not None else [],
        "notes": notes,
    }


def _primary_index(primary: str | None, universes: list[Any], notes: list[str]) -> int | None:
    """The primary universe's row, or None when none is declared (said in ``notes``); refuses an unknown id."""
    if primary is None and len(universes) == 1:
        return 0  # a single universe is the audit as given: there is nothing to choose
    if primary is None:
        notes.append("no primary universe is declared, so top flips and rank intervals against it are not reported")
        return None
    if primary in universes:
        return universes.index(primary)
    raise InputError(f"verdicts: column 'universe_id': expected the primary universe {primary!r}")


@dataclass(frozen=True)
class _Positions:
    """Where the systems stand over all universes: coverage, rank shares and P(a above b)."""

    rated: np.ndarray           # universe x system: the system has a rate there
    coverage: np.ndarray        # per system: share of universes rating it
    shares: np.ndarray          # system x position: share of all universes (``_rank_shares``)
    above: np.ndarray           # system x system: P(a above b) over universes rating both; a tie counts 1/2
    top_when_rated: np.ndarray  # per system: P(rank 1) over the universes rating it

    @classmethod
    def of(cls, matrix: np.ndarray, ties: Ties) -> _Positions:
        rated = ~np.isnan(matrix)
        coverage = rated.mean(0)
        shares = _rank_shares(matrix, ties)
        higher = np.nansum(matrix[:, :, None] > matrix[:, None, :], axis=0)
        equal = np.nansum(matrix[:, :, None] == matrix[:, None, :], axis=0)
        both = rated.astype(int).T @ rated.astype(int)
        # Systems never rated together (or never rated) give NaN, the undefined statistic.
        with np.errstate(invalid="ignore", divide="ignore"):
            above = (higher + 0.5 * equal) / both
            top_when_rated = shares[:, 0] / coverage
        return cls(rated, coverage, shares, above, top_when_rated)


def _coverage_notes(rated: np.ndarray, n_systems: int) -> list[str]:
    """How to read ranks when not every universe rates every system."""
    if rated.all():
        return []
    per_universe = rated.sum(1)
    return [f"unbalanced: {int((~rated).sum())} of {rated.size} universe x system rates are missing "
            f"(each universe rates {per_universe.min()} to {per_universe.max()} of {n_systems} systems). "
            "Ranks are taken within each universe over the systems it rates; P(top) and the rank "
            "distribution are shares of all universes, and a system's rank shares sum to its coverage"]


def _kendall_w_block(matrix: np.ndarray, rated: np.ndarray, universes: list[Any], systems: list[Any],
                     notes: list[str]) -> dict[str, Any]:
    """Kendall's W over the largest block of universes x systems all rated, with notes on that block."""
    rows, columns, exhaustive = largest_complete_block(matrix)
    w: dict[str, Any] = dict(kendall_w(matrix[np.ix_(rows, columns)]))
    w["block_systems"] = [systems[c] for c in columns]
    w["complete"] = bool(rated.all())
    if not len(rows):
        notes.append("Kendall's W needs two universes that rate the same two or more systems; "
                     "no such block exists")
    elif not rated.all():
        notes.append(f"Kendall's W uses the largest complete block"
                     f"{'' if exhaustive else ' found (the search was cut short)'}: {len(rows)} of "
                     f"{len(universes)} universes x {len(columns)} of {len(systems)} systems, all rated")
    if len(rows) and (pair_signs(matrix[np.ix_(rows, columns)])[0] == 0).all(1).any():
        notes.append("Kendall's W counts universes in which every system of its block has the same rate "
                     "as fully tied")
    return w


def _primary_pairwise(included: pd.DataFrame, universe: Any, systems: list[Any], rated: np.ndarray, seed: int,
                      notes: list[str]) -> dict[str, Any]:
    """Paired tests between the systems the primary universe rates, with notes on the pairs left out."""
    in_primary = [systems[i] for i in np.flatnonzero(rated)]
    pairwise = pairwise_tests(included, universe=universe, systems=in_primary, seed=seed)
    if len(in_primary) < len(systems):
        notes.append(f"pairwise tests and neighbour comparisons cover the {len(in_primary)} systems rated in "
                     f"the primary universe; {len(systems) - len(in_primary)} others are not rated there")
    untested = [f"{q['a']} vs {q['b']}" for q in pairwise["pairs"] if not q["n_cases"]]
    if untested:
        notes.append(f"pairwise tests: no shared cases in the primary universe for {len(untested)} pair(s): "
                     f"{', '.join(untested[:10])}{' ...' if len(untested) > 10 else ''}")
    return pairwise


def _adjacent(primary_rates: np.ndarray, systems: list[Any], above: np.ndarray,
              intervals: dict[str, Any]) -> list[dict[str, Any]]:
    """Neighbours in the primary's order (systems it rates only), with P(a above b) and its interval."""
    order = np.argsort(np.nan_to_num(-primary_rates, nan=np.inf), kind="stable")
    order = order[~np.isnan(primary_rates[order])]
    out = []
    for i, j in itertools.pairwise(order):
        a, b = systems[i], systems[j]
        low, high = intervals[a][b]
        separable = bool(np.isfinite(low) and np.isfinite(high) and (low > 0.5 or high < 0.5))
        out.append({"a": a, "b": b, "p_above": float(above[i, j]), "low": low, "high": high,
                    "separable": separable})
    return out
