"""Which measurement choices move the rates, and which re-rank the systems.

The universe x system rates are decomposed with a linear model

    rate ~ axis_1 + ... + axis_k + system + axis_1:system + ... + axis_k:system

fitted by OLS (statsmodels) and summarised by an ANOVA with type-II sums of
squares (``anova_lm(typ=2)``). Each term's share is its sum of squares over the
total sum of squares of the rates. Reading the shares:

- an axis *main effect* shifts the rates of all systems together;
- an *axis x system interaction* moves systems by different amounts, i.e. it
  can re-rank them;
- ``system`` is the part of the variance due to the systems themselves;
- ``Residual`` holds what the model leaves out: interactions among axes,
  higher-order terms and the sampling noise of the rates.

On a balanced grid (every universe x system rate present) the terms are
orthogonal, type-II equals sequential sums of squares, and the shares add up
to exactly 1. With missing cells they need not: each share is still the term's
type-II sum of squares over the total. A saturated model (one axis: nothing
left for the residual) has no residual variance for ``anova_lm``'s tests; its
type-II sums of squares come from refitting without each term instead (the
same quantity, checked against ``anova_lm`` in the tests). Rates are
unweighted, one per universe x system, whatever the number of transcripts
behind them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from multiverse.analysis.dropped import dropped_notes
from multiverse.analysis.rates import system_rates
from multiverse.errors import InputError

__all__ = ["variance_decomposition", "variance_by_axis", "variance_summary", "variance"]

_COLUMNS = ["term", "kind", "axis", "sum_sq", "df", "share"]


def variance_decomposition(rates: pd.DataFrame, *, axes: Sequence[str]) -> pd.DataFrame:
    """Type-II ANOVA of a universe x system rates table.

    ``rates`` has the axis columns, ``system`` and ``rate`` (``system_rates``
    output). Returns one row per term, in model order: term ("judge",
    "system", "judge:system", "Residual"), kind ("axis", "system",
    "interaction", "residual"), axis (the axis name, or None), sum_sq, df, and
    share (sum_sq over the total sum of squares of the rates).
    Axes with a single option carry no variance and are left out.
    """
    return _decompose(rates, list(axes))[0]


def _decompose(rates: pd.DataFrame, axes: list[str]) -> tuple[pd.DataFrame, list[str]]:
    from statsmodels.formula.api import ols
    from statsmodels.stats.anova import anova_lm
    from statsmodels.tools.sm_exceptions import SingularMatrixWarning

    for column in ("system", "rate", *axes):
        if column not in rates.columns:
            raise InputError(f"rates: column {column!r}: expected a column of that name")
    notes: list[str] = []
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
    total = float(((frame["y"] - frame["y"].mean()) ** 2).sum())
    rows = []
    balanced = _balanced_sums(frame, [names[a] for a in varying], terms) if terms else None
    if balanced is not None:
        rows, residual = balanced
    elif terms:
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
    # Object dtype so that "no axis" stays None (JSON null) rather than becoming NaN.
    out["axis"] = pd.Series([r[2] for r in rows], dtype=object)
    out["share"] = out["sum_sq"] / total if total > 0 else np.nan
    return out, notes


def _balanced_sums(frame: pd.DataFrame, columns: list[str], terms: list["_Term"]):
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
    y = frame["y"].to_numpy(dtype=float)
    grand = y.mean()

    def effect(code: np.ndarray, k: int) -> np.ndarray:
        return np.bincount(code, weights=y, minlength=k) / np.bincount(code, minlength=k)

    rows, used_ss, used_df = [], 0.0, 0
    for term in terms:
        if term.kind == "interaction":
            a = term.formula.split(":")[0][2:-1]  # "C(x0):C(s)" -> "x0"
            ka, ks = sizes[a], sizes["s"]
            cell = effect(codes[a] * ks + codes["s"], ka * ks).reshape(ka, ks)
            centred = cell - effect(codes[a], ka)[:, None] - effect(codes["s"], ks)[None, :] + grand
            ss, df = float((centred**2).sum() * len(y) / (ka * ks)), (ka - 1) * (ks - 1)
        else:
            column = "s" if term.kind == "system" else term.formula[2:-1]
            k = sizes[column]
            ss, df = float(((effect(codes[column], k) - grand) ** 2).sum() * len(y) / k), k - 1
        rows.append((term.name, term.kind, term.axis, ss, float(df)))
        used_ss, used_df = used_ss + ss, used_df + df
    total = float(((y - grand) ** 2).sum())
    return rows, (max(total - used_ss, 0.0), float(len(y) - 1 - used_df))


@dataclass(frozen=True)
class _Term:
    name: str
    kind: str
    axis: str | None
    formula: str

    def contains(self, other: "_Term") -> bool:
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


def variance_by_axis(decomposition: pd.DataFrame) -> pd.DataFrame:
    """Per axis: main (share of its main effect), interaction (share of axis x system), total."""
    axes = decomposition.dropna(subset=["axis"])
    wide = axes.pivot_table(index="axis", columns="kind", values="share", aggfunc="sum", sort=False)
    wide = wide.reindex(columns=["axis", "interaction"], fill_value=0.0).fillna(0.0)
    out = pd.DataFrame({"axis": wide.index, "main": wide["axis"].to_numpy(),
                        "interaction": wide["interaction"].to_numpy()})
    out["total"] = out["main"] + out["interaction"]
    return out.sort_values("total", ascending=False, kind="stable").reset_index(drop=True)


def variance_summary(decomposition: pd.DataFrame, *, negligible: float = 0.01) -> list[str]:
    """Plain-language lines: which axes shift all rates and which re-rank systems.

    An axis whose interaction with ``system`` has the larger share mostly
    re-ranks the systems; one whose main effect is larger mostly shifts every
    system's rate together. Axes below ``negligible`` total share are said to
    matter little.
    """
    if decomposition["share"].isna().all():
        return ["Every rate is the same: there is no variance to explain."]
    lines = []
    for row in variance_by_axis(decomposition).itertuples():
        if row.total < negligible:
            lines.append(f"{row.axis}: {row.total:.1%} of the variance in rates; it matters little.")
        elif row.interaction > row.main:
            lines.append(
                f"{row.axis}: {row.total:.1%} of the variance in rates, mostly by re-ranking systems "
                f"({row.axis} x system {row.interaction:.1%}; shift of all rates {row.main:.1%})."
            )
        else:
            lines.append(
                f"{row.axis}: {row.total:.1%} of the variance in rates, mostly by shifting every "
                f"system's rate together (main effect {row.main:.1%}; {row.axis} x system "
                f"{row.interaction:.1%})."
            )
    share = decomposition.set_index("term")["share"]
    if "system" in share.index:
        lines.append(f"system: {share['system']:.1%} of the variance lies between the systems themselves.")
    lines.append(f"Residual: {share['Residual']:.1%} "
                 "(interactions among axes, higher-order terms and sampling noise).")
    return lines


def variance(verdicts: pd.DataFrame, *, axes: Sequence[str]) -> dict[str, Any]:
    """Variance decomposition of the universe x system rates of a verdicts table.

    Returns a JSON-ready dict::

        {"terms": [{"term", "kind", "axis", "sum_sq", "df", "share"}],
         "by_axis": [{"axis", "main", "interaction", "total"}],
         "balanced": bool,        # every universe x system rate present
         "summary": [str, ...],   # plain-language reading of the shares
         "notes": [str, ...]}
    """
    axes = list(axes)
    rates = system_rates(verdicts, axes=axes)
    if rates.empty:
        raise InputError("verdicts: column 'status': expected at least one row with status ok")
    decomposition, model_notes = _decompose(rates, axes)
    universes = rates["universe_id"].nunique()
    combinations = int(np.prod([rates[a].nunique() for a in axes])) if axes else 1
    balanced = len(rates) == universes * rates["system"].nunique() and universes == combinations
    notes = dropped_notes(verdicts) + [f"axis {a!r} has a single option and is left out" for a in axes
                                       if rates[a].nunique() <= 1]
    notes += model_notes
    if not balanced:
        notes.append("the grid is unbalanced (missing universes or universe x system rates): "
                     "type-II shares need not add up to 1")
    return {
        "terms": decomposition.to_dict(orient="records"),
        "by_axis": variance_by_axis(decomposition).to_dict(orient="records"),
        "balanced": bool(balanced),
        "summary": variance_summary(decomposition),
        "notes": notes,
    }
