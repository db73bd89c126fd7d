"""How much of a variance decomposition is sampling noise, and how sure each share is.

Every rate is an estimate from a sample of cases, so part of each term's sum of
squares is noise: E[SS_term(rates)] = SS_term(true rates) + E[SS_term(noise)],
because a type-II sum of squares is a quadratic form (a difference of two
projections). Cases are resampled with replacement, with the *same* draw in
every universe (a case bootstrap, Efron & Tibshirani 1993, which keeps the
dependence between universes that rate the same cases). Per term:

- ``noise``: the mean over resamples of SS_term(rates* - rates) over the total
  sum of squares of the observed rates: the share the term would show if the
  axes had no effect at all (its noise floor);
- ``beyond_noise`` = share - noise: the bias-corrected share;
- an interval for ``beyond_noise``: the percentile interval of
  (SS_term(rates*) - 2 noise SS) / total SS. Resampled rates carry the
  observed noise plus a second helping of it, hence the 2.

Both the estimate and the interval are clipped to [0, 1], the range a share
takes (``clipped`` says one of them was; ``clipped_above`` that the raw
interval went past 100%, which a resample whose sums of squares exceed the
observed total can do).

A universe x system cell that draws none of its cases in a resample keeps its
observed rate there (it adds no noise in that resample).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pandas as pd

from .._kernel import CaseCounts

__all__ = ["balanced_sums", "balanced_sums_function", "noise_summary", "projection_sums"]


def balanced_sums(frame: pd.DataFrame, columns: list[str], terms: list[Any], y: np.ndarray) -> np.ndarray:
    """Type-II sums of squares of each term and the residual, for each column of ``y`` (N x B).

    Exact on a full factorial with one rate per cell: the classical balanced
    formulas from cell means (see ``variance_terms._balanced_sums``).
    """
    return balanced_sums_function(frame, columns, terms)(y)


def balanced_sums_function(frame: pd.DataFrame, columns: list[str], terms: list[Any]
                           ) -> Callable[[np.ndarray], np.ndarray]:
    """``balanced_sums`` with its layout worked out once, for many calls.

    Every combination of options x system present once: the rates are laid out as a
    factors x resamples array and each mean is a reduction over its other factors (an
    axis x system interaction's cells one pass over the rates; the axis's and the
    system's means are the cells' means, the grid being balanced). Otherwise the
    group means come from sparse indicators.
    """
    factors = [*columns, "s"]
    codes = [frame[c].cat.codes.to_numpy() for c in factors]
    sizes = [len(frame[c].cat.categories) for c in factors]
    n = len(frame)
    place = np.ravel_multi_index(codes, sizes) if n else np.zeros(0, dtype=np.int64)
    if n == 0 or n != int(np.prod(sizes)) or np.bincount(place, minlength=n).max() != 1:
        return _indicator_sums_function(frame, columns, terms)
    at = {c: i for i, c in enumerate(factors)}
    s = at["s"]
    plan = [(term.kind, at["s" if term.kind == "system" else term.formula.split(":")[0][2:-1]]) for term in terms]

    def sums(y: np.ndarray) -> np.ndarray:
        grid = np.empty_like(y)
        grid[place] = y
        grid = grid.reshape(*sizes, y.shape[1])
        grand = y.mean(0)
        cells: dict[int, np.ndarray] = {}

        def cell(a: int) -> np.ndarray:  # (options of a) x systems x resamples
            if a not in cells:
                cells[a] = grid.mean(axis=tuple(i for i in range(len(sizes)) if i not in (a, s)))
            return cells[a]

        out = []
        for kind, a in plan:
            if kind == "system":
                axis = next((b for other, b in plan if other != "system"), None)
                means = cell(s) if axis is None else cell(axis).mean(0)
                out.append(((means - grand) ** 2).sum(0) * n / sizes[s])
                continue
            table = cell(a)
            by_option, by_system = table.mean(1), table.mean(0)
            if kind == "interaction":
                centred = table - by_option[:, None, :] - by_system[None, :, :] + grand
                out.append((centred**2).sum((0, 1)) * n / (sizes[a] * sizes[s]))
            else:
                out.append(((by_option - grand) ** 2).sum(0) * n / sizes[a])
        total = ((y - grand) ** 2).sum(0)
        out.append(np.maximum(total - np.sum(out, axis=0), 0.0))
        return np.vstack(out)

    return sums


def _indicator_sums_function(frame: pd.DataFrame, columns: list[str], terms: list[Any]
                             ) -> Callable[[np.ndarray], np.ndarray]:
    """``balanced_sums`` with its group indicators built once (a grid with a combination missing or repeated)."""
    from scipy.sparse import csr_matrix

    n = len(frame)
    codes = {c: frame[c].cat.codes.to_numpy() for c in [*columns, "s"] if c in frame}
    sizes = {c: len(frame[c].cat.categories) for c in codes}
    groups: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def group(key: tuple[Any, ...], code: np.ndarray, k: int) -> tuple[Any, ...]:
        if key not in groups:
            indicator = csr_matrix((np.ones(n), (code, np.arange(n))), shape=(k, n))
            groups[key] = (indicator, np.bincount(code, minlength=k)[:, None])
        return groups[key]

    plan: list[tuple[str, Any, Any]] = []
    for term in terms:
        if term.kind == "interaction":
            a = term.formula.split(":")[0][2:-1]  # "C(x0):C(s)" -> "x0"
            ka, ks = sizes[a], sizes["s"]
            plan.append(("interaction", (group((a, "s"), codes[a] * ks + codes["s"], ka * ks),
                                         group((a,), codes[a], ka), group(("s",), codes["s"], ks)), (ka, ks)))
        else:
            column = "s" if term.kind == "system" else term.formula[2:-1]
            plan.append(("main", group((column,), codes[column], sizes[column]), sizes[column]))

    def means(g: tuple[Any, ...], y: np.ndarray) -> np.ndarray:
        return cast("np.ndarray", (g[0] @ y) / g[1])

    def sums(y: np.ndarray) -> np.ndarray:
        grand = y.mean(0)
        out = []
        for kind, g, size in plan:
            if kind == "interaction":
                ka, ks = size
                cell = means(g[0], y).reshape(ka, ks, -1)
                centred = cell - means(g[1], y)[:, None, :] - means(g[2], y)[None, :, :] + grand
                out.append((centred**2).sum((0, 1)) * n / (ka * ks))
            else:
                out.append(((means(g, y) - grand) ** 2).sum(0) * n / size)
        total = ((y - grand) ** 2).sum(0)
        out.append(np.maximum(total - np.sum(out, axis=0), 0.0))
        return np.vstack(out)

    return sums


def projection_sums(frame: pd.DataFrame, terms: list[Any], groups: list[list[Any]] | None = None) -> _Projections:
    """A function of ``y`` (N x B) giving type-II sums of squares: one row per term, then one per
    group of terms (taken together), then the residual.

    A term's (or group's) type-II sum of squares is what it adds to the fit of
    every term that does not contain it. A model's fit is ``b' G^+ b`` with
    ``G = X'X`` and ``b = X'y``, X the intercept and every term's cell
    indicators (the column space patsy's coding of the same formula spans).
    Both are products of sparse indicators, so a fit costs a small
    eigendecomposition, not an SVD over every rate; directions with an
    eigenvalue below 1e-10 of the largest are dropped, so rank-deficient
    designs (aliased axes) are handled: an aliased term adds nothing.
    """
    from scipy.sparse import csr_matrix, hstack

    n = len(frame)
    blocks = {"1": csr_matrix(np.ones((n, 1)))}
    for term in terms:
        cell = np.zeros(n, dtype=np.int64)
        for part in term.formula.split(":"):  # "C(x0)", "C(x0):C(s)"
            column = frame[part[2:-1]]
            cell = cell * len(column.cat.categories) + column.cat.codes.to_numpy()
        cell = pd.factorize(cell)[0]
        blocks[term.formula] = csr_matrix((np.ones(n), (np.arange(n), cell)), shape=(n, int(cell.max()) + 1))
    x = hstack(list(blocks.values()), format="csc")
    spans, start = {}, 0
    for name, block in blocks.items():
        spans[name] = np.arange(start, start + block.shape[1])
        start += block.shape[1]
    gram = (x.T @ x).toarray()
    xt = x.T.tocsr()
    cache: dict[frozenset[Any], np.ndarray] = {}

    def basis(formulas: frozenset[Any]) -> np.ndarray:
        """``W`` with ``b' G^+ b = ||W' b||^2`` over the columns of ``formulas`` (and the intercept)."""
        if formulas not in cache:
            columns = np.concatenate([spans["1"], *[spans[t.formula] for t in terms if t.formula in formulas]])
            values, vectors = np.linalg.eigh(gram[np.ix_(columns, columns)])
            keep = values > values.max() * 1e-10
            w = np.zeros((start, int(keep.sum())))
            w[columns] = vectors[:, keep] / np.sqrt(values[keep])
            cache[formulas] = w
        return cache[formulas]

    pairs = []
    for members in [[t] for t in terms] + [list(g) for g in groups or []]:
        base = frozenset(t.formula for t in terms
                         if t not in members and not any(t.contains(m) for m in members))
        pairs.append((base, base | {m.formula for m in members}))
    full = frozenset(t.formula for t in terms)

    def sums(y: np.ndarray) -> np.ndarray:
        b = xt @ y

        def fitted(formulas: frozenset[str]) -> np.ndarray:
            return cast("np.ndarray", ((basis(formulas).T @ b) ** 2).sum(0))

        rows = [fitted(big) - fitted(base) for base, big in pairs]
        rows.append((y**2).sum(0) - fitted(full))
        return np.vstack(rows)

    return _Projections(sums, [(basis(big).shape[1] - basis(base).shape[1]) for base, big in pairs],
                        basis(full).shape[1])


class _Projections:
    """``projection_sums``' function of ``y``, with each row's degrees of freedom (rank added) and the
    full model's rank."""

    def __init__(self, sums: Callable[[np.ndarray], np.ndarray], df: list[int], rank: int) -> None:
        self.sums, self.df, self.rank = sums, df, rank

    def __call__(self, y: np.ndarray) -> np.ndarray:
        return self.sums(y)


def noise_summary(
    counts: CaseCounts, rates: pd.DataFrame, names: list[str],
    sums: Callable[[np.ndarray], np.ndarray], resamples: int, seed: int, level: float = 0.95,
    combos: dict[str, list[int]] | None = None,
) -> dict[str, Any]:
    """Noise floor and intervals per row of ``sums`` (named by ``names``; the last is the residual),
    and per entry of ``combos`` (a name and the rows whose sums of squares it adds up). ``counts``:
    the case counts of ``rates``' cells (``case_counts`` of their universes x systems)."""
    combos = combos or {}
    if combos:
        inner = sums
        rows = list(combos.values())

        def sums(y: np.ndarray) -> np.ndarray:  # the same sums, with the combined rows appended
            out = inner(y)
            return np.vstack([out, *[out[r].sum(0, keepdims=True) for r in rows]])

    y = rates["rate"].to_numpy(float)
    observed = sums((y - y.mean())[:, None])[:, 0]
    total = float(((y - y.mean()) ** 2).sum())
    universes, systems = pd.unique(rates["universe_id"]).tolist(), pd.unique(rates["system"]).tolist()
    cell = (pd.Index(universes).get_indexer(rates["universe_id"]) * len(systems)
            + pd.Index(systems).get_indexer(rates["system"]))
    in_order = len(cell) == counts.k.shape[0] and bool((cell == np.arange(len(cell))).all())  # no gather needed
    rng = np.random.default_rng(seed)
    noise_ss = np.zeros(len(observed))
    boot_ss = []
    noise_total = 0.0
    chunk = counts.batch(resamples)
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        draw = counts.rates(counts.weights(rng, size))
        draw = draw if in_order else draw[cell]
        draw = np.where(np.isfinite(draw), draw, y[:, None])
        deviation = draw - y[:, None]
        noise_ss += sums(deviation - deviation.mean(0)).sum(1)
        noise_total += float(((deviation - deviation.mean(0)) ** 2).sum())
        boot_ss.append(sums(draw - draw.mean(0)))
        done += size
    noise_ss /= resamples
    boot = np.hstack(boot_ss)
    tail = (1.0 - level) / 2.0
    low = np.quantile(boot, tail, axis=1) - 2 * noise_ss
    high = np.quantile(boot, 1.0 - tail, axis=1) - 2 * noise_ss
    scale = total if total > 0 else np.nan

    def entry(i: int) -> dict[str, Any]:
        raw = np.array([observed[i] - noise_ss[i], low[i], high[i]]) / scale
        # A share lies in [0, 1], and so does the true share beyond noise. The estimate and its
        # percentile interval need not: a resample's sums of squares can exceed the observed total
        # (above 100%), and subtracting the noise can go below 0. Clipping to the range the quantity
        # can take never drops a true value from the interval, so coverage is unchanged.
        clipped = np.clip(raw, 0.0, 1.0)
        return {"noise": float(noise_ss[i] / scale), "beyond_noise": float(clipped[0]),
                "low": float(clipped[1]), "high": float(clipped[2]),
                "clipped": bool(np.any(clipped != raw)), "clipped_above": bool(np.any(raw > 1.0))}

    return {
        "method": "case bootstrap: cases resampled with replacement, the same draw in every universe",
        "resamples": int(resamples), "level": level,
        "noise_floor": noise_total / resamples / scale,
        "terms": {name: entry(i) for i, name in enumerate(names)},
        "combos": {name: entry(len(names) + j) for j, name in enumerate(combos)},
    }
