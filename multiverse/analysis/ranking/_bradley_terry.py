"""Bradley-Terry scores from pairwise verdicts: per universe a score per system, its case-bootstrap interval and
rank, and the ranking's stability across universes measured on the scores (``rank_stability``).

A pairwise verdict row is one game: the row's system against its opponent (the ``opponent`` column where the
table has one, else the scale's reference system), and the row's counted value in [0, 1] (what its universe's
scoring makes of it: a win 1, a loss 0, a tie one half under ``ties: half``, a preference its rescaled value)
is the share of the game the row's system won. The model: P(a beats b) = 1 / (1 + exp(score_b - score_a)), fitted
by maximum likelihood with a game of share ``y`` read as ``y`` of a win and ``1 - y`` of a loss (a tie is two
half games), which is the binomial GLM with a +1/-1 design and frequency weights that statsmodels fits (the
tests hold the fit to it to 1e-6).

Scores are on the log-odds scale and fixed up to a constant: ``anchor`` (a system, e.g. the reference) is
held at 0, else the scores of a universe average 0. A finite maximum exists only when no set of systems never
loses (or never wins) against all the others (Ford 1957; the games' win graph strongly connected). Otherwise
the fit is refused in one line naming the universe and the systems, unless ``prior`` adds that many tied
games to every pair of systems that met (half a win each way): a small prior (e.g. 0.5) keeps every score
finite and pulls the scores towards each other, and the document says so. Case-bootstrap resamples (cases
drawn with replacement within each universe, seeded per universe id) without a finite fit are left out of the
intervals and counted in the notes.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse.csgraph import connected_components
from scipy.special import expit

from multiverse.errors import InputError

from .._kernel import included_verdicts
from ._ranking import rank_stability

__all__ = ["OPPONENT", "bradley_terry", "fit_bradley_terry", "pairwise_games"]

#: The column naming a verdict row's opponent, where a table's games are not all against one reference.
OPPONENT = "opponent"
_DIGITS = 9  # scores equal to this many decimals are tied ranks (a float sum's last bits order nothing)


def pairwise_games(verdicts: pd.DataFrame, *, axes: Sequence[str], reference: str | None = None) -> pd.DataFrame:
    """The counted verdict rows as games: universe_id, the axes, case_id, ``a`` (the row's system), ``b`` (its
    opponent) and ``win`` (the share of the game ``a`` won). A system's games against itself are left out."""
    axes = list(axes)
    has_opponent = OPPONENT in verdicts.columns
    if not has_opponent and reference is None:
        raise InputError("verdicts: Bradley-Terry scores need pairwise verdicts: expected a pairwise scale with a "
                         f"reference system (import table --reference) or a column {OPPONENT!r}", param="method")
    rows = included_verdicts(verdicts, axes=axes, keys=(OPPONENT,) if has_opponent else ())
    opponent = rows[OPPONENT] if has_opponent else pd.Series(reference, index=rows.index, dtype=object)
    if reference is not None:
        opponent = opponent.where(opponent.notna() & opponent.astype(str).str.strip().ne(""), reference)
    if opponent.isna().any():
        raise InputError(f"verdicts: column {OPPONENT!r}: expected the opponent's name in every counted row")
    win = rows["compliant"].to_numpy(dtype=float)
    if ((win < 0) | (win > 1)).any():
        raise InputError("verdicts: column 'compliant': expected each game's share won in [0, 1]")
    games = rows[["universe_id", *axes, "case_id"]].assign(a=rows["system"].astype(str).to_numpy(),
                                                           b=opponent.astype(str).to_numpy(), win=win)
    return games[games["a"] != games["b"]].reset_index(drop=True)


def fit_bradley_terry(wins: np.ndarray, *, anchor: int | None = None, prior: float = 0.0,
                      tol: float = 1e-12, max_iter: int = 200) -> np.ndarray:
    """Maximum-likelihood scores of a batch of win matrices: ``wins[..., i, j]`` is the share of games ``i`` won
    against ``j``; returns ``[..., k]`` scores, ``anchor``'s 0 (None: each row's scores average 0).

    Newton's method on the concave log-likelihood (steps capped at 2 log-odds, so that a far start cannot
    overshoot); the caller has checked that a finite maximum exists (``_unfit``).
    """
    wins = np.asarray(wins, float)
    single = wins.ndim == 2
    w = wins[None] if single else wins
    met = (w + np.swapaxes(w, 1, 2)) > 0
    w = w + prior / 2 * met
    n = w + np.swapaxes(w, 1, 2)
    k = w.shape[-1]
    free = np.array([i for i in range(k) if i != (anchor if anchor is not None else 0)])
    beta = np.zeros(w.shape[:2])
    won = w.sum(2)
    for _ in range(max_iter):
        p = expit(beta[:, :, None] - beta[:, None, :])
        gradient = won - (n * p).sum(2)
        c = n * p * (1 - p)
        hessian = -c  # the negative Hessian: the Laplacian of the pairs' information
        hessian[:, np.arange(k), np.arange(k)] += c.sum(2)
        step = np.linalg.solve(hessian[:, free][:, :, free], gradient[:, free, None])[..., 0]
        step /= np.maximum(1.0, np.abs(step).max(1, keepdims=True) / 2.0)
        beta[:, free] += step
        if np.abs(step).max(initial=0.0) < tol:
            break
    if anchor is None:
        beta -= beta.mean(1, keepdims=True)
    return beta[0] if single else beta


def _unfit(wins: np.ndarray, prior: float) -> tuple[list[int], str] | None:
    """None when ``wins`` has a finite maximum; else the systems that never lose (or are never compared) and why."""
    met = (wins + wins.T) > 0
    parts, labels = connected_components(met, directed=False)
    if parts > 1:
        return np.flatnonzero(labels != labels[0]).tolist(), "are never compared, directly or through others, with"
    if prior > 0:
        return None
    parts, labels = connected_components(wins > 0, directed=True, connection="strong")
    if parts == 1:
        return None
    # A set no outsider ever takes any part of a game from: a source of the components' graph.
    for part in range(parts):
        inside = labels == part
        if not (wins[np.ix_(~inside, inside)] > 0).any():
            return np.flatnonzero(inside).tolist(), "never lose any part of a game to"
    return None  # unreachable: a graph of components always has a source


def _finite(wins: np.ndarray, prior: float) -> np.ndarray:
    """Per win matrix of a batch, whether a finite maximum exists (``_unfit`` is None): every system reaches
    every other through games met (and, without a prior, through games won), by squaring the reach matrices."""
    def everywhere(edges: np.ndarray) -> np.ndarray:
        reach = (edges | np.eye(edges.shape[-1], dtype=bool)).astype(np.float32)
        for _ in range(int(np.ceil(np.log2(max(edges.shape[-1], 2))))):
            reach = ((reach @ reach) > 0).astype(np.float32)
        return np.asarray(reach.all((1, 2)))

    met = everywhere((wins + np.swapaxes(wins, 1, 2)) > 0)
    return met if prior > 0 else met & everywhere(wins > 0)


def bradley_terry(verdicts: pd.DataFrame, *, axes: Sequence[str], reference: str | None = None,
                  anchor: str | None = None, prior: float = 0.0, primary: str | None = None,
                  bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
                  shown: Sequence[str] | None = None) -> dict[str, Any]:
    """Bradley-Terry scores per universe with case-bootstrap intervals, and their ranking's stability.

    ``reference``: the opponent of rows without an ``opponent`` (a pairwise scale's reference system);
    ``anchor``: the system held at score 0 (default: the reference; None: the scores of a universe average 0).
    ``shown``: the axes given a row in the stability's ``kendall_tau.by_axis`` (None: all).
    Returns a JSON-ready dict::

        {"method": "bradley_terry", "scale": str, "anchor": system | None, "prior": float,
         "resamples": int, "seed": int, "level": float,
         "scores": [{"universe_id", <axes>, "system", "score", "low", "high", "rank", "rank_low", "rank_high",
                     "p_top", "games", "wins", "resamples_fit"}],
         "stability": {... rank_stability of the scores ...},
         "notes": [str, ...]}
    """
    if not np.isfinite(prior) or prior < 0:
        raise InputError(f"prior: expected a number of tied games >= 0, got {prior}", param="prior")
    axes = list(axes)
    anchor = reference if anchor is None else anchor
    games = pairwise_games(verdicts, axes=axes, reference=reference)
    if games.empty:
        raise InputError("verdicts: expected at least one counted game between two different systems")
    notes: list[str] = []
    records: list[dict[str, Any]] = []
    lost = 0
    for universe, rows in games.groupby("universe_id", sort=False):
        universe_records, universe_lost = _universe_scores(str(universe), rows, axes, anchor, prior, bootstrap,
                                                           seed, level)
        records += universe_records
        lost += universe_lost
    if lost:
        notes.append(f"{lost} of the case-bootstrap resamples (over all universes) have no finite fit (a system "
                     "won or lost every game drawn) and are left out of the intervals; a prior (--prior) keeps them")
    if prior:
        notes.append(f"a prior of {prior:g} tied games between every two systems that met pulls the scores "
                     "towards each other: they are not the maximum-likelihood scores")
    table = pd.DataFrame(records)
    stability_rates = table[["universe_id", *axes, "system"]].assign(rate=table["score"].round(_DIGITS))
    stability = rank_stability(stability_rates, axes=axes, primary=primary, shown=shown)
    notes += stability.pop("notes")
    return {"method": "bradley_terry",
            "scale": "log-odds: P(a beats b) = 1 / (1 + exp(score_b - score_a))",
            "anchor": anchor, "prior": float(prior), "resamples": int(bootstrap), "seed": int(seed),
            "level": float(level), "scores": records, "stability": stability, "notes": notes}


def _universe_scores(universe: str, rows: pd.DataFrame, axes: list[str], anchor: str | None, prior: float,
                     bootstrap: int, seed: int, level: float) -> tuple[list[dict[str, Any]], int]:
    """One universe's scores, intervals and ranks (records in the order of the systems' names), and how many
    resamples had no finite fit."""
    systems = sorted(set(rows["a"]) | set(rows["b"]))
    index = {s: i for i, s in enumerate(systems)}
    if anchor is not None and anchor not in index:
        raise InputError(f"anchor: universe {universe}: expected a system of its games, one of: {', '.join(systems)}",
                         param="anchor")
    k = len(systems)
    # Cases in sorted order, so that the resamples do not depend on the rows' order.
    cases, case = np.unique(rows["case_id"].astype(str).to_numpy(), return_inverse=True)
    a = rows["a"].map(index).to_numpy()
    b = rows["b"].map(index).to_numpy()
    win = rows["win"].to_numpy(float)
    per_case = np.zeros((len(cases), k, k))
    np.add.at(per_case, (case, a, b), win)
    np.add.at(per_case, (case, b, a), 1 - win)
    wins = per_case.sum(0)
    at = index[anchor] if anchor is not None else None
    why = _unfit(wins, prior)
    if why is not None:
        named = ", ".join(systems[i] for i in why[0])
        raise InputError(f"verdicts: universe {universe}: {named} {why[1]} the other systems, so the Bradley-Terry "
                         "scores have no finite maximum-likelihood fit; expected every system to win and lose part "
                         "of some game against the others, or a prior of tied games (prior=, --prior)", param="method")
    score = fit_bradley_terry(wins, anchor=at, prior=prior)
    rank = _ranks(score[None])[0]
    boot_scores = np.empty((0, k))
    lost = 0
    if bootstrap:
        rng = np.random.default_rng([seed, zlib.crc32(universe.encode())])
        draws = rng.multinomial(len(cases), np.full(len(cases), 1 / len(cases)), size=bootstrap)
        resampled = (draws @ per_case.reshape(len(cases), -1)).reshape(bootstrap, k, k)
        fit = _finite(resampled, prior)
        lost = int((~fit).sum())
        if fit.any():
            boot_scores = fit_bradley_terry(resampled[fit], anchor=at, prior=prior)
    tail = (1 - level) / 2 * 100
    boot_ranks = _ranks(boot_scores) if len(boot_scores) else np.empty((0, k))
    options = rows.iloc[0][axes].to_dict()
    games_played = wins + wins.T
    out = []
    for i, system in enumerate(systems):
        some = len(boot_scores) > 0
        low, high = np.percentile(boot_scores[:, i], [tail, 100 - tail]) if some else (np.nan, np.nan)
        rank_low, rank_high = np.percentile(boot_ranks[:, i], [tail, 100 - tail]) if some else (np.nan, np.nan)
        out.append({"universe_id": universe, **options, "system": system, "score": float(score[i]),
                    "low": float(low), "high": float(high), "rank": int(rank[i]),
                    "rank_low": float(rank_low), "rank_high": float(rank_high),
                    "p_top": float((boot_ranks[:, i] == 1).mean()) if some else float("nan"),
                    "games": float(games_played[i].sum()), "wins": float(wins[i].sum()),
                    "resamples_fit": len(boot_scores)})
    return out, lost


def _ranks(scores: np.ndarray) -> np.ndarray:
    """Competition ranks per row (1 = the highest score; scores equal to ``_DIGITS`` decimals tie)."""
    rounded = np.round(scores, _DIGITS)
    return np.asarray((rounded[:, None, :] > rounded[:, :, None]).sum(-1) + 1)
