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

A universe x system cell that draws none of its cases in a resample keeps its
observed rate there (it adds no noise in that resample).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

__all__ = ["balanced_sums", "noise_summary", "projection_sums"]


def balanced_sums(frame: pd.DataFrame, columns: list[str], terms: list, y: np.ndarray) -> np.ndarray:
    """Type-II sums of squares of each term and the residual, for each column of ``y`` (N x B).

    Exact on a full factorial with one rate per cell: the classical balanced
    formulas from cell means (see ``variance._balanced_sums``).
    """
    from scipy.sparse import csr_matrix

    n = len(frame)
    grand = y.mean(0)

    def means(code: np.ndarray, k: int) -> np.ndarray:
        indicator = csr_matrix((np.ones(n), (code, np.arange(n))), shape=(k, n))
        return (indicator @ y) / np.bincount(code, minlength=k)[:, None]

    codes = {c: frame[c].cat.codes.to_numpy() for c in [*columns, "s"] if c in frame}
    sizes = {c: len(frame[c].cat.categories) for c in codes}
    out = []
    for term in terms:
        if term.kind == "interaction":
            a = term.formula.split(":")[0][2:-1]  # "C(x0):C(s)" -> "x0"
            ka, ks = sizes[a], sizes["s"]
            cell = means(codes[a] * ks + codes["s"], ka * ks).reshape(ka, ks, -1)
            centred = cell - means(codes[a], ka)[:, None, :] - means(codes["s"], ks)[None, :, :] + grand
            out.append((centred**2).sum((0, 1)) * n / (ka * ks))
        else:
            column = "s" if term.kind == "system" else term.formula[2:-1]
            k = sizes[column]
            out.append(((means(codes[column], k) - grand) ** 2).sum(0) * n / k)
    total = ((y - grand) ** 2).sum(0)
    out.append(np.maximum(total - np.sum(out, axis=0), 0.0))
    return np.vstack(out)


def projection_sums(frame: pd.DataFrame, terms: list, groups: list[list] | None = None
                    ) -> Callable[[np.ndarray], np.ndarray]:
    """A function of ``y`` (N x B) giving type-II sums of squares: one row per term, then one per
    group of terms (taken together), then the residual.

    A term's (or group's) type-II sum of squares is what it adds to the fit of
    every term that does not contain it. Bases are orthonormal (SVD), so
    rank-deficient designs (aliased axes) are handled: an aliased term adds nothing.
    """
    from patsy import dmatrix

    cache: dict[frozenset, np.ndarray] = {}

    def basis(formulas: frozenset) -> np.ndarray:
        if formulas not in cache:
            ordered = [t.formula for t in terms if t.formula in formulas]
            x = np.asarray(dmatrix(" + ".join(ordered) or "1", frame, return_type="matrix"))
            u, s, _ = np.linalg.svd(x, full_matrices=False)
            cache[formulas] = u[:, : int((s > s[0] * 1e-10).sum())]
        return cache[formulas]

    pairs = []
    for members in [[t] for t in terms] + [list(g) for g in groups or []]:
        base = frozenset(t.formula for t in terms
                         if t not in members and not any(t.contains(m) for m in members))
        pairs.append((base, base | {m.formula for m in members}))
    full = frozenset(t.formula for t in terms)

    def sums(y: np.ndarray) -> np.ndarray:
        def fitted(formulas):
            q = basis(formulas)
            return ((q.T @ y) ** 2).sum(0)

        rows = [fitted(big) - fitted(base) for base, big in pairs]
        rows.append((y**2).sum(0) - fitted(full))
        return np.vstack(rows)

    return sums


def _resampled_rates(included: pd.DataFrame, rates: pd.DataFrame, resamples: int, seed: int) -> np.ndarray:
    """N x B rates under a case bootstrap shared by every universe (rows as in ``rates``)."""
    from scipy.sparse import csr_matrix

    cells = pd.MultiIndex.from_frame(rates[["universe_id", "system"]].astype(str))
    row = cells.get_indexer(pd.MultiIndex.from_frame(included[["universe_id", "system"]].astype(str)))
    case, cases = pd.factorize(included["case_id"])
    keep = row >= 0
    shape = (len(rates), len(cases))
    n = csr_matrix((np.ones(int(keep.sum())), (row[keep], case[keep])), shape=shape)
    k = csr_matrix((included["compliant"].to_numpy(float)[keep], (row[keep], case[keep])), shape=shape)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(cases), np.full(len(cases), 1.0 / len(cases)), size=resamples).T
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (k @ weights) / (n @ weights)
    observed = rates["rate"].to_numpy(float)[:, None]
    return np.where(np.isfinite(out), out, observed)


def noise_summary(
    included: pd.DataFrame, rates: pd.DataFrame, names: list[str],
    sums: Callable[[np.ndarray], np.ndarray], resamples: int, seed: int, level: float = 0.95,
    combos: dict[str, list[int]] | None = None,
) -> dict:
    """Noise floor and intervals per row of ``sums`` (named by ``names``; the last is the residual),
    and per entry of ``combos`` (a name and the rows whose sums of squares it adds up)."""
    combos = combos or {}
    if combos:
        inner = sums
        rows = list(combos.values())

        def sums(y):  # the same sums, with the combined rows appended
            out = inner(y)
            return np.vstack([out, *[out[r].sum(0, keepdims=True) for r in rows]])

    y = rates["rate"].to_numpy(float)
    observed = sums((y - y.mean())[:, None])[:, 0]
    total = float(((y - y.mean()) ** 2).sum())
    noise_ss = np.zeros(len(observed))
    boot_ss = []
    noise_total = 0.0
    chunk = max(1, min(resamples, 2_000_000 // max(len(y), 1)))
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        draw = _resampled_rates(included, rates, size, seed + done)
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
    def entry(i: int) -> dict[str, float]:
        return {"noise": float(noise_ss[i] / scale), "beyond_noise": float((observed[i] - noise_ss[i]) / scale),
                "low": float(low[i] / scale), "high": float(high[i] / scale)}

    return {
        "method": "case bootstrap: cases resampled with replacement, the same draw in every universe",
        "resamples": int(resamples), "level": level,
        "noise_floor": noise_total / resamples / scale,
        "terms": {name: entry(i) for i, name in enumerate(names)},
        "combos": {name: entry(len(names) + j) for j, name in enumerate(combos)},
    }
