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

__all__ = ["aliasing", "variance", "variance_by_axis", "variance_decomposition", "variance_summary"]

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


def _design(rates: pd.DataFrame, axes: list[str]):
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
    from statsmodels.formula.api import ols
    from statsmodels.stats.anova import anova_lm
    from statsmodels.tools.sm_exceptions import SingularMatrixWarning

    notes: list[str] = []
    frame, varying, names, terms = _design(rates, axes)
    total = float(((frame["y"] - frame["y"].mean()) ** 2).sum())
    rows = []
    balanced = _balanced_sums(frame, [names[a] for a in varying], terms) if terms else None
    projected = _projected_sums(frame, terms) if terms and balanced is None else None
    if balanced is not None:
        rows, residual = balanced
    elif projected is not None:
        rows, residual = projected
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
    # Refits and projections leave rounding dust (-1e-17) where a term adds nothing.
    out.loc[out["sum_sq"].abs() <= 1e-12 * max(total, 1e-300), "sum_sq"] = 0.0
    # Object dtype so that "no axis" stays None (JSON null) rather than becoming NaN.
    out["axis"] = pd.Series([r[2] for r in rows], dtype=object)
    out["share"] = out["sum_sq"] / total if total > 0 else np.nan
    return out, notes


def _balanced_sums(frame: pd.DataFrame, columns: list[str], terms: list[_Term]):
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
    from multiverse.analysis.variance_noise import balanced_sums

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


def _projected_sums(frame: pd.DataFrame, terms: list[_Term]):
    """Type-II sums of squares of a full-rank design from projections (``variance_noise.projection_sums``).

    What ``anova_lm(typ=2)`` computes there (tested against it), without
    statsmodels' SVDs over every rate (most of the time of an unbalanced grid,
    e.g. one with an exclude rule). A saturated model's df are the rank each
    term adds, as the refits give. Returns None for a rank-deficient design,
    which goes through statsmodels (and its note).
    """
    from multiverse.analysis.variance_noise import projection_sums

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


def aliasing(rates: pd.DataFrame, axes: Sequence[str]) -> dict[str, list]:
    """Axes the grid cannot tell apart, from the universe x system rows present.

    Returns {"aliased": [[axis, ...]], "nested": [{"axis", "within"}]}:
    ``aliased`` groups axes that determine each other (each option of one goes
    with exactly one option of the other, both ways): their effects are
    confounded and type-II gives each 0. ``nested`` names an axis that is
    constant within each option of another axis (``within``, which may be
    ``system``) or of the other axes together (``within`` = "the other axes"):
    its effect cannot be told from theirs.
    """
    varying = [a for a in axes if rates[a].nunique(dropna=False) > 1]
    factors = [*varying, "system"] if rates["system"].nunique() > 1 else list(varying)
    codes = {f: pd.factorize(rates[f].astype(str))[0] for f in factors}

    def determines(a, b) -> bool:
        pairs = pd.unique(codes[a] * (codes[b].max() + 1) + codes[b])
        return len(pairs) == len(np.unique(codes[a]))

    groups: list[list[str]] = []
    for a in varying:
        for group in groups:
            if determines(a, group[0]) and determines(group[0], a):
                group.append(a)
                break
        else:
            groups.append([a])
    aliased = [g for g in groups if len(g) > 1]
    grouped = {a for g in aliased for a in g}
    nested = []
    for b in varying:
        within = [a for a in factors if a != b and determines(a, b) and not determines(b, a)]
        if within:
            nested.append({"axis": b, "within": within[0]})
        elif b not in grouped and len(varying) > 1:
            others = [a for a in varying if a != b]
            joint = pd.factorize(pd.MultiIndex.from_arrays([codes[a] for a in others]))[0]
            if len(pd.unique(joint * (codes[b].max() + 1) + codes[b])) == len(np.unique(joint)):
                nested.append({"axis": b, "within": "the other axes"})
    return {"aliased": aliased, "nested": nested}


def variance_by_axis(decomposition: pd.DataFrame) -> pd.DataFrame:
    """Per axis: main (share of its main effect), interaction (share of axis x system), total."""
    axes = decomposition.dropna(subset=["axis"])
    wide = axes.pivot_table(index="axis", columns="kind", values="share", aggfunc="sum", sort=False)
    wide = wide.reindex(columns=["axis", "interaction"], fill_value=0.0).fillna(0.0)
    out = pd.DataFrame({"axis": wide.index, "main": wide["axis"].to_numpy(),
                        "interaction": wide["interaction"].to_numpy()})
    out["total"] = out["main"] + out["interaction"]
    return out.sort_values("total", ascending=False, kind="stable").reset_index(drop=True)


def variance_summary(decomposition: pd.DataFrame, *, negligible: float = 0.01,
                     confounding: dict | None = None, groups: dict | None = None,
                     noise: dict | None = None) -> list[str]:
    """Plain-language lines: which axes shift all rates and which re-rank systems.

    An axis whose interaction with ``system`` has the larger share mostly
    re-ranks the systems; one whose main effect is larger mostly shifts every
    system's rate together. Axes below ``negligible`` total share are said to
    matter little, unless ``confounding`` (``aliasing`` output) says the grid
    cannot separate them; ``groups`` maps an aliased group's key (its axes
    joined by " + ") to its joint {"main", "interaction", "total"} shares.
    ``noise`` maps an axis to its {"beyond_noise", "low", "high"}: each line
    then says how much is beyond sampling noise, and an axis whose interval
    reaches 0 is said to be indistinguishable from noise.
    """
    if decomposition["share"].isna().all():
        return ["Every rate is the same: there is no variance to explain."]
    confounding = confounding or {"aliased": [], "nested": []}
    groups = groups or {}
    aliased = {a: g for g in confounding["aliased"] for a in g}
    nested = {n["axis"]: n["within"] for n in confounding["nested"]}
    lines = []
    for group in confounding["aliased"]:
        joint = groups.get(" + ".join(group))
        together = (f"; together {joint['total']:.1%} of the variance (shift of all rates {joint['main']:.1%}, "
                    f"re-ranking {joint['interaction']:.1%})") if joint else ""
        lines.append(f"{' and '.join(group)} change together in this grid (aliased): their effects "
                     f"cannot be separated, and each alone shows 0%{together}.")
    noise = noise or {}

    def beyond(axis: str) -> str:
        n = noise.get(axis)
        if not n:
            return ""
        said = ": not distinguishable from noise" if n["low"] <= 0 else ""
        return f" Beyond sampling noise: {n['beyond_noise']:.1%} [{n['low']:.1%}, {n['high']:.1%}]{said}."

    for row in variance_by_axis(decomposition).itertuples():
        if row.axis in aliased:
            continue
        if row.axis in nested:
            lines.append(f"{row.axis}: {row.total:.1%} of the variance in rates, but {row.axis} is constant "
                         f"within each option of {nested[row.axis]}: its effect cannot be told from theirs." + beyond(row.axis))
        elif row.total < negligible:
            lines.append(f"{row.axis}: {row.total:.1%} of the variance in rates; it matters little." + beyond(row.axis))
        elif row.interaction > row.main:
            lines.append(
                f"{row.axis}: {row.total:.1%} of the variance in rates, mostly by re-ranking systems "
                f"({row.axis} x system {row.interaction:.1%}; shift of all rates {row.main:.1%})." + beyond(row.axis)
            )
        else:
            lines.append(
                f"{row.axis}: {row.total:.1%} of the variance in rates, mostly by shifting every "
                f"system's rate together (main effect {row.main:.1%}; {row.axis} x system "
                f"{row.interaction:.1%})." + beyond(row.axis)
            )
    share = decomposition.set_index("term")["share"]
    if "system" in share.index:
        lines.append(f"system: {share['system']:.1%} of the variance lies between the systems themselves."
                     + beyond("system"))
    lines.append(f"Residual: {share['Residual']:.1%} "
                 "(interactions among axes, higher-order terms and sampling noise).")
    return lines


def _clipping_notes(terms: list[dict], by_axis: list[dict]) -> list[str]:
    """Say which intervals beyond noise went past 100% before clipping (and drop the working flag)."""
    above = [f"term {str(r['term']).replace(':', ' x ')}" for r in terms if r.pop("clipped_above", False)]
    above += [f"axis {r['axis']} (main effect and interaction together)" for r in by_axis
              if r.pop("clipped_above", False)]
    if not above:
        return []
    return [f"the interval beyond noise of {' and of '.join(above)} reached past 100% and is clipped to 100%: a "
            "share cannot exceed it, but a resample of cases can spread the rates more than the observed ones "
            "do (few cases or few universes make this likely)"]


def variance(verdicts: pd.DataFrame, *, axes: Sequence[str], resamples: int = 200,
             seed: int = 0) -> dict[str, Any]:
    """Variance decomposition of the universe x system rates of a verdicts table.

    ``resamples`` case-bootstrap draws (0 to skip) estimate the sampling noise
    in every share (``multiverse.analysis.variance_noise``).

    Returns a JSON-ready dict::

        {"terms": [{"term", "kind", "axis", "sum_sq", "df", "share",
                    "noise", "beyond_noise", "low", "high", "clipped"}],   # the last five with resamples > 0
         "by_axis": [{"axis", "main", "interaction", "total",
                      "noise", "beyond_noise", "low", "high", "clipped"}],
         "balanced": bool,        # every universe x system rate present
         "aliasing": {"aliased": [[axis, ...]], "nested": [{"axis", "within"}]},
         "aliased_groups": [{"axes": [axis, ...], "main", "interaction", "total"}],
         "noise": {"method", "resamples", "level", "noise_floor"} | None,
         "summary": [str, ...],   # plain-language reading of the shares
         "notes": [str, ...]}

    ``noise`` is a term's expected share from sampling alone, ``beyond_noise``
    its share minus that, and [low, high] the interval of ``beyond_noise``;
    all three are clipped to [0, 1] and ``clipped`` says where that changed
    one (a note names the terms whose interval went past 100%).
    """
    from multiverse.analysis.rates import included_verdicts
    from multiverse.analysis.variance_noise import (
        balanced_sums_function,
        noise_summary,
        projection_sums,
    )

    axes = list(axes)
    included = included_verdicts(verdicts, axes=axes, keys=())
    rates = system_rates(included, axes=axes)
    if rates.empty:
        raise InputError("verdicts: column 'status': expected at least one row with status ok")
    decomposition, model_notes = _decompose(rates, axes)
    universes = rates["universe_id"].nunique()
    combinations = int(np.prod([rates[a].nunique() for a in axes])) if axes else 1
    balanced = len(rates) == universes * rates["system"].nunique() and universes == combinations
    notes = dropped_notes(verdicts) + [f"axis {a!r} has a single option and is left out" for a in axes
                                       if rates[a].nunique() <= 1]
    notes += model_notes
    total_share = float(decomposition["share"].sum())
    if not balanced:
        notes.append("the grid is unbalanced (missing universes or universe x system rates): "
                     f"type-II shares need not add up to 1 (here they add up to {total_share:.1%})")
    confounding = aliasing(rates, axes)
    for group in confounding["aliased"]:
        notes.append(f"axes {', '.join(map(repr, group))} are aliased: each option of one goes with exactly "
                     "one option of the other, so their effects cannot be separated (each alone shows 0%)")
    for n in confounding["nested"]:
        notes.append(f"axis {n['axis']!r} is constant within each option of {n['within']}: its effect is "
                     "confounded with theirs")
    n_cases = included["case_id"].nunique()
    if resamples and n_cases < 10:
        notes.append(f"only {n_cases} case(s): resampling so few cases underestimates the sampling noise, "
                     "so the noise floor and the intervals are too optimistic")
    residual = decomposition.iloc[-1]
    if residual["df"] == 0:
        notes.append("the residual has no degrees of freedom (the model is saturated): it cannot estimate "
                     "the noise; read the noise floor instead")
    elif residual["df"] < 10:
        notes.append(f"the residual has only {residual['df']:.0f} degrees of freedom: its share is a rough "
                     "estimate of what the model leaves out")

    frame, varying, names, terms = _design(rates, axes)
    group_terms, group_keys = [], []
    for g, group in enumerate(confounding["aliased"]):
        for kind, key in (("axis", "main"), ("interaction", "interaction")):
            members = [t for t in terms if t.kind == kind and t.axis in group]
            if members:
                group_terms.append(members)
                group_keys.append((g, key))
    use_balanced = balanced and not confounding["aliased"] and terms
    sums = (balanced_sums_function(frame, [names[a] for a in varying], terms) if use_balanced
            else projection_sums(frame, terms, group_terms) if terms else None)
    total = float(((frame["y"] - frame["y"].mean()) ** 2).sum())
    groups_out = [{"axes": group, "main": 0.0, "interaction": 0.0, "total": 0.0}
                  for group in confounding["aliased"]]
    if group_terms and total > 0 and sums is not None:
        joint = sums((frame["y"] - frame["y"].mean()).to_numpy()[:, None])[len(terms):-1, 0] / total
        for (g, key), value in zip(group_keys, joint):
            groups_out[g][key] = float(value)
            groups_out[g]["total"] += float(value)
    by_axis = variance_by_axis(decomposition)
    noise = None
    terms_out = decomposition.to_dict(orient="records")
    if resamples and sums is not None and total > 0:
        names_out = [t.name for t in terms] + [f"group {i}" for i in range(len(group_terms))] + ["Residual"]
        combos = {row.axis: [names_out.index(t) for t in (row.axis, f"{row.axis}:system") if t in names_out]
                  for row in by_axis.itertuples()}
        noise = noise_summary(included, rates, names_out, sums,
                              resamples, seed, combos=combos)
        for row in terms_out:
            row.update(noise["terms"][row["term"]])
        by_axis_rows = by_axis.to_dict(orient="records")
        for row in by_axis_rows:
            row.update(noise["combos"][row["axis"]])
        noise = {k: v for k, v in noise.items() if k not in ("terms", "combos")}
        notes += _clipping_notes(terms_out, by_axis_rows)
    else:
        by_axis_rows = by_axis.to_dict(orient="records")
    return {
        "terms": terms_out,
        "by_axis": by_axis_rows,
        "balanced": bool(balanced),
        "aliasing": confounding,
        "aliased_groups": groups_out,
        "noise": noise,
        "summary": variance_summary(decomposition, confounding=confounding,
                                    groups={" + ".join(g["axes"]): g for g in groups_out},
                                    noise={**{r["axis"]: r for r in by_axis_rows if "low" in r},
                                           **{r["term"]: r for r in terms_out
                                              if r["term"] == "system" and "low" in r}}),
        "notes": notes,
    }
