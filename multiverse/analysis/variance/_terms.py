"""The linear model of a variance decomposition: its terms and their type-II sums of squares.

``variance`` fits rate ~ axes + system + axis:system to one rate per universe
x system. The sums of squares come from the cheapest route that gives
``anova_lm(typ=2)``'s numbers: cell means on a full factorial
(``_balanced_sums``), projections on a full-rank design (``_projected_sums``),
else statsmodels itself (and its rank-deficiency note), with refits for a
saturated model that leaves ``anova_lm`` no residual (``_type2_by_refits``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd

from multiverse.errors import InputError

__all__ = ["_Term", "_balanced_sums", "_decompose", "_design", "_projected_sums", "_type2_by_refits"]

_COLUMNS = ["term", "kind", "axis", "sum_sq", "df", "share"]
# A term's row of the table (term, kind, axis, sum_sq, df), and the terms' rows with the residual's (sum_sq, df).
_Row: TypeAlias = "tuple[str, str, str | None, float, float]"
_Sums: TypeAlias = "tuple[list[_Row], tuple[float, float]]"


def _design(rates: pd.DataFrame, axes: list[str]) -> tuple[pd.DataFrame, list[str], dict[str, str], list[_Term]]:
    """The model frame (plain column names x0, x1 ..., s, y), the varying axes, their names and terms."""
    for column in ("system", "rate", *axes):
        if column not in rates.columns:
            raise InputError(f"rates: column {column!r}: expected a column of that name")
    varying = [a for a in axes if rates[a].nunique(dropna=False) > 1]
    # Plain column names keep the formula safe whatever the axes are called.
    names = {a: f"x{i}" for i, a in enumerate(varying)}
    # Categoricals spare patsy a Python-level scan of every cell for missing values.
    frame = pd.DataFrame({names[a]: pd.Categorical(rates[a].astype(str).to_numpy()) for a in varying})
    frame["s"] = pd.Categorical(rates["system"].astype(str).to_numpy())
    frame["y"] = rates["rate"].to_numpy(dtype=float)
    terms: list[_Term] = [_Term(a, "axis", a, f"C({names[a]})") for a in varying]
    if frame["s"].nunique() > 1:
        terms.append(_Term("system", "system", None, "C(s)"))
        terms += [_Term(f"{a}:system", "interaction", a, f"C({names[a]}):C(s)") for a in varying]
    return frame, varying, names, terms


def _decompose(rates: pd.DataFrame, axes: list[str]) -> tuple[pd.DataFrame, list[str]]:
    notes: list[str] = []
    frame, varying, names, terms = _design(rates, axes)
    total = float(((frame["y"] - frame["y"].mean()) ** 2).sum())
    rows: list[_Row] = []
    balanced = _balanced_sums(frame, [names[a] for a in varying], terms) if terms else None
    projected = _projected_sums(frame, terms) if terms and balanced is None else None
    if balanced is not None:
        rows, residual = balanced
    elif projected is not None:
        rows, residual = projected
    elif terms:
        # statsmodels' formulas only here: importing them costs more than the balanced sums themselves.
        from statsmodels.formula.api import ols
        from statsmodels.stats.anova import anova_lm
        from statsmodels.tools.sm_exceptions import SingularMatrixWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SingularMatrixWarning)
            model = ols("y ~ " + " + ".join(t.formula for t in terms), data=frame).fit()
            if model.df_resid > 0:
                table = anova_lm(model, typ=2)
                rows = [(t.name, t.kind, t.axis, float(table.loc[t.formula, "sum_sq"]),
                         float(table.loc[t.formula, "df"])) for t in terms]
            else:
                # Saturated (e.g. a single axis): no residual variance for anova_lm's
                # Wald tests, so take each type-II sum of squares from two refits.
                rows = [(t.name, t.kind, t.axis, *_type2_by_refits(frame, terms, t)) for t in terms]
        if any(issubclass(w.category, SingularMatrixWarning) for w in caught):
            notes.append("the model is rank-deficient (axis x system combinations without a rate, "
                         "or axes that change together): its sums of squares are not unique")
        residual = (float(model.ssr), float(model.df_resid))
    if not terms:
        residual = (total, float(len(frame) - 1))
    rows.append(("Residual", "residual", None, *residual))
    out = pd.DataFrame(rows, columns=_COLUMNS[:-1])
    # Refits and projections leave rounding dust (-1e-17) where a term adds nothing.
    out.loc[out["sum_sq"].abs() <= 1e-12 * max(total, 1e-300), "sum_sq"] = 0.0
    # Object dtype so that "no axis" stays None (JSON null) rather than becoming NaN.
    out["axis"] = pd.Series([r[2] for r in rows], dtype=object)
    out["share"] = out["sum_sq"] / total if total > 0 else np.nan
    return out, notes


def _balanced_sums(frame: pd.DataFrame, columns: list[str], terms: list[_Term]) -> _Sums | None:
    """Exact type-II sums of squares from cell means, when the grid is a full factorial.

    With every combination of axis options x system present exactly once, the
    terms are orthogonal and type-II sums of squares equal the classical
    balanced-ANOVA ones: n_l (mean_l - grand)^2 for main effects and the
    double-centred cell means for axis x system. This is what ``anova_lm``
    computes there, without an SVD over every rate (minutes at 100k
    universes). Returns None when the grid is not a full factorial.
    """
    factors = [*columns, "s"] if any(t.kind == "system" for t in terms) else list(columns)
    codes = {c: frame[c].cat.codes.to_numpy() for c in factors}
    sizes = {c: len(frame[c].cat.categories) for c in factors}
    if len(frame) != int(np.prod([sizes[c] for c in factors])) or frame["y"].isna().any():
        return None
    flat = np.ravel_multi_index([codes[c] for c in factors], [sizes[c] for c in factors])
    if np.bincount(flat, minlength=len(frame)).max() != 1:
        return None
    from ._noise import balanced_sums

    sums = balanced_sums(frame, list(columns), terms, frame["y"].to_numpy(dtype=float)[:, None])[:, 0]
    rows, used_df = [], 0
    for term, ss in zip(terms, sums):
        if term.kind == "interaction":
            a = term.formula.split(":")[0][2:-1]  # "C(x0):C(s)" -> "x0"
            df = (sizes[a] - 1) * (sizes["s"] - 1)
        else:
            df = sizes["s" if term.kind == "system" else term.formula[2:-1]] - 1
        rows.append((term.name, term.kind, term.axis, float(ss), float(df)))
        used_df += df
    return rows, (float(sums[-1]), float(len(frame) - 1 - used_df))


def _projected_sums(frame: pd.DataFrame, terms: list[_Term]) -> _Sums | None:
    """Type-II sums of squares of a full-rank design from projections (``variance_noise.projection_sums``).

    What ``anova_lm(typ=2)`` computes there (tested against it), without
    statsmodels' SVDs over every rate (most of the time of an unbalanced grid,
    e.g. one with an exclude rule). A saturated model's df are the rank each
    term adds, as the refits give. Returns None for a rank-deficient design,
    which goes through statsmodels (and its note).
    """
    from ._noise import projection_sums

    sizes = {c: len(frame[c].cat.categories) for c in frame.columns if c != "y"}
    columns = [int(np.prod([sizes[part[2:-1]] - 1 for part in t.formula.split(":")])) for t in terms]
    if frame["y"].isna().any():
        return None
    projections = projection_sums(frame, terms)
    if projections.rank != 1 + sum(columns):
        return None
    sums = projections(frame["y"].to_numpy(dtype=float)[:, None])[:, 0]
    df_resid = len(frame) - projections.rank
    df = columns if df_resid > 0 else projections.df
    rows = [(t.name, t.kind, t.axis, float(ss), float(d)) for t, ss, d in zip(terms, sums, df)]
    return rows, (float(sums[-1]), float(df_resid))


@dataclass(frozen=True)
class _Term:
    name: str
    kind: str
    axis: str | None
    formula: str

    def contains(self, other: _Term) -> bool:
        """Whether this term is a higher-order term containing ``other`` (type-II marginality)."""
        mine, theirs = set(self.formula.split(":")), set(other.formula.split(":"))
        return self is not other and theirs < mine


def _type2_by_refits(frame: pd.DataFrame, terms: list[_Term], term: _Term) -> tuple[float, float]:
    """Type-II sum of squares and df of ``term``: the fit it adds to every term not containing it."""
    from statsmodels.formula.api import ols

    base = [t.formula for t in terms if t is not term and not t.contains(term)]
    without = ols("y ~ " + (" + ".join(base) or "1"), data=frame).fit()
    with_term = ols("y ~ " + " + ".join([*base, term.formula]), data=frame).fit()
    return float(without.ssr - with_term.ssr), float(with_term.df_model - without.df_model)
