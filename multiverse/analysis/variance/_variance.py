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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from multiverse.errors import InputError

from .._kernel import CaseCounts, counts_of_rates, dropped_notes
from .._kernel import dense_codes as _dense
from ..rates import system_rates
from ._terms import _decompose, _design, _Term

__all__ = ["aliasing", "variance", "variance_by_axis", "variance_decomposition", "variance_summary"]


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


def aliasing(rates: pd.DataFrame, axes: Sequence[str]) -> dict[str, list[Any]]:
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
    aliased = _aliased_groups(codes, varying)
    grouped = {a for g in aliased for a in g}
    return {"aliased": aliased, "nested": _nested_axes(codes, varying, factors, grouped)}


def _determines(codes: dict[str, np.ndarray], a: str, b: str) -> bool:
    """Whether each option of ``a`` goes with exactly one option of ``b`` in the rows present."""
    pairs = pd.unique(codes[a] * (codes[b].max() + 1) + codes[b])
    return len(pairs) == len(np.unique(codes[a]))


def _aliased_groups(codes: dict[str, np.ndarray], varying: list[str]) -> list[list[str]]:
    """Groups of two or more axes that determine each other both ways, in axis order."""
    groups: list[list[str]] = []
    for a in varying:
        for group in groups:
            if _determines(codes, a, group[0]) and _determines(codes, group[0], a):
                group.append(a)
                break
        else:
            groups.append([a])
    return [g for g in groups if len(g) > 1]


def _nested_axes(codes: dict[str, np.ndarray], varying: list[str], factors: list[str],
                 grouped: set[str]) -> list[dict[str, str]]:
    """Axes constant within each option of one other factor, or else of the other axes together.

    An aliased axis is already named with its group, so only the one-factor
    test applies to it.
    """
    nested = []
    for b in varying:
        within = [a for a in factors if a != b and _determines(codes, a, b) and not _determines(codes, b, a)]
        if within:
            nested.append({"axis": b, "within": within[0]})
        elif b not in grouped and len(varying) > 1 and _constant_within_the_others(codes, varying, b):
            nested.append({"axis": b, "within": "the other axes"})
    return nested


def _constant_within_the_others(codes: dict[str, np.ndarray], varying: list[str], b: str) -> bool:
    """Whether axis ``b`` takes one option within each combination of the other axes present."""
    others = [a for a in varying if a != b]
    joint = _dense(codes[a] for a in others)  # one code per combination of the other axes' options
    return len(pd.unique(joint.astype(np.int64) * (codes[b].max() + 1) + codes[b])) == len(np.unique(joint))


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
                     confounding: dict[str, Any] | None = None, groups: dict[str, Any] | None = None,
                     noise: dict[str, Any] | None = None) -> list[str]:
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


def _clipping_notes(terms: list[dict[str, Any]], by_axis: list[dict[str, Any]]) -> list[str]:
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
             seed: int = 0, rates: pd.DataFrame | None = None, counts: CaseCounts | None = None,
             shown: Sequence[str] | None = None) -> dict[str, Any]:
    """Variance decomposition of the universe x system rates of a verdicts table.

    ``resamples`` case-bootstrap draws (0 to skip) estimate the sampling noise
    in every share (``multiverse.analysis.variance``).

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

    ``rates`` and ``counts``: ``system_rates(verdicts, axes=axes)`` and its rows' case counts
    when the caller already has them (as ``ranking`` takes them). ``shown``: the axes reported (None: all);
    the model keeps every axis, and only the rows and summary lines of the others are left out.

    ``noise`` is a term's expected share from sampling alone, ``beyond_noise``
    its share minus that, and [low, high] the interval of ``beyond_noise``;
    all three are clipped to [0, 1] and ``clipped`` says where that changed
    one (a note names the terms whose interval went past 100%).
    """
    axes = list(axes)
    rates = system_rates(verdicts, axes=axes) if rates is None else rates
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
        total_share = float(decomposition["share"].sum())
        notes.append("the grid is unbalanced (missing universes or universe x system rates): "
                     f"type-II shares need not add up to 1 (here they add up to {total_share:.1%})")
    confounding = aliasing(rates, axes)
    notes += _confounding_notes(confounding)
    counts = counts_of_rates(verdicts, axes, rates, reuse=counts) if resamples else None
    notes += _precision_notes(counts.named_cases if counts is not None else 0, decomposition.iloc[-1], resamples)

    sums = _model_sums(rates, axes, balanced=bool(balanced), confounding=confounding)
    groups_out = _aliased_group_shares(sums, confounding)
    by_axis = variance_by_axis(decomposition)
    noise = None
    terms_out = decomposition.to_dict(orient="records")
    if resamples and sums.function is not None and sums.total > 0:
        assert counts is not None
        noise, by_axis_rows = _noise_of_terms(rates, sums, by_axis, terms_out, resamples, seed, counts)
        notes += _clipping_notes(terms_out, by_axis_rows)
    else:
        by_axis_rows = by_axis.to_dict(orient="records")
    summary = variance_summary(decomposition, confounding=confounding,
                               groups={" + ".join(g["axes"]): g for g in groups_out},
                               noise=_noise_by_name(terms_out, by_axis_rows))
    if shown is not None:
        hidden = tuple(f"{a}:" for a in axes if a not in shown)
        by_axis_rows = [r for r in by_axis_rows if r["axis"] in shown]
        terms_out = [r for r in terms_out if r.get("axis") in (*shown, None, "")]
        summary = [line for line in summary if not line.startswith(hidden)]
    return {
        "terms": terms_out,
        "by_axis": by_axis_rows,
        "balanced": bool(balanced),
        "aliasing": confounding,
        "aliased_groups": groups_out,
        "noise": noise,
        "summary": summary,
        "notes": notes,
    }


def _confounding_notes(confounding: dict[str, list[Any]]) -> list[str]:
    """One note per aliased group and per nested axis (``aliasing`` output)."""
    notes = [f"axes {', '.join(map(repr, group))} are aliased: each option of one goes with exactly "
             "one option of the other, so their effects cannot be separated (each alone shows 0%)"
             for group in confounding["aliased"]]
    notes += [f"axis {n['axis']!r} is constant within each option of {n['within']}: its effect is "
              "confounded with theirs" for n in confounding["nested"]]
    return notes


def _precision_notes(n_cases: int, residual: pd.Series, resamples: int) -> list[str]:
    """Where the noise floor or the residual rests on too little: few cases, few residual df."""
    notes = []
    if resamples and n_cases < 10:
        notes.append(f"only {n_cases} case(s): resampling so few cases underestimates the sampling noise, "
                     "so the noise floor and the intervals are too optimistic")
    if residual["df"] == 0:
        notes.append("the residual has no degrees of freedom (the model is saturated): it cannot estimate "
                     "the noise; read the noise floor instead")
    elif residual["df"] < 10:
        notes.append(f"the residual has only {residual['df']:.0f} degrees of freedom: its share is a rough "
                     "estimate of what the model leaves out")
    return notes


@dataclass(frozen=True)
class _ModelSums:
    """The model's sums of squares as a function of rate columns, for the noise and the aliased groups.

    ``function`` maps an N x B array of rates to the sums of squares of each
    term, then of each aliased group's joint term (``group_terms``, keyed by
    (group index, "main" or "interaction") in ``group_keys``), then of the
    residual; None when the model has no term. ``total`` is the total sum of
    squares of the observed rates.
    """

    frame: pd.DataFrame
    terms: list[_Term]
    group_terms: list[list[_Term]]
    group_keys: list[tuple[int, str]]
    function: Callable[[np.ndarray], np.ndarray] | None
    total: float


def _model_sums(rates: pd.DataFrame, axes: list[str], *, balanced: bool,
                confounding: dict[str, list[Any]]) -> _ModelSums:
    """The sums-of-squares function of the model, with a joint term for each aliased group's members."""
    from ._noise import balanced_sums_function, projection_sums

    frame, varying, names, terms = _design(rates, axes)
    group_terms, group_keys = [], []
    for g, group in enumerate(confounding["aliased"]):
        for kind, key in (("axis", "main"), ("interaction", "interaction")):
            members = [t for t in terms if t.kind == kind and t.axis in group]
            if members:
                group_terms.append(members)
                group_keys.append((g, key))
    # The cell-mean formulas hold on a full factorial only without joint group terms.
    use_balanced = balanced and not confounding["aliased"] and terms
    function = (balanced_sums_function(frame, [names[a] for a in varying], terms) if use_balanced
                else projection_sums(frame, terms, group_terms) if terms else None)
    total = float(((frame["y"] - frame["y"].mean()) ** 2).sum())
    return _ModelSums(frame, terms, group_terms, group_keys, function, total)


def _aliased_group_shares(sums: _ModelSums, confounding: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Each aliased group's joint main, interaction and total shares (0 when there is nothing to share)."""
    groups_out = [{"axes": group, "main": 0.0, "interaction": 0.0, "total": 0.0}
                  for group in confounding["aliased"]]
    if sums.group_terms and sums.total > 0 and sums.function is not None:
        frame = sums.frame
        joint = sums.function((frame["y"] - frame["y"].mean()).to_numpy()[:, None])[len(sums.terms):-1, 0] / sums.total
        for (g, key), value in zip(sums.group_keys, joint):
            groups_out[g][key] = float(value)
            groups_out[g]["total"] += float(value)
    return groups_out


def _noise_of_terms(rates: pd.DataFrame, sums: _ModelSums, by_axis: pd.DataFrame,
                    terms_out: list[dict[str, Any]], resamples: int, seed: int,
                    counts: CaseCounts) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Add each term's and each axis's noise fields to its row; return the noise settings and the axis rows."""
    from ._noise import noise_summary

    assert sums.function is not None  # called only for a model with terms
    names_out = [t.name for t in sums.terms] + [f"group {i}" for i in range(len(sums.group_terms))] + ["Residual"]
    # An axis's main effect and interaction together, for its by-axis row.
    combos = {row.axis: [names_out.index(t) for t in (row.axis, f"{row.axis}:system") if t in names_out]
              for row in by_axis.itertuples()}
    noise = noise_summary(counts, rates, names_out, sums.function, resamples, seed, combos=combos)
    for row in terms_out:
        row.update(noise["terms"][row["term"]])
    by_axis_rows = by_axis.to_dict(orient="records")
    for row in by_axis_rows:
        row.update(noise["combos"][row["axis"]])
    return {k: v for k, v in noise.items() if k not in ("terms", "combos")}, by_axis_rows


def _noise_by_name(terms_out: list[dict[str, Any]], by_axis_rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rows with an interval beyond noise, by axis and for ``system``, as ``variance_summary`` reads them."""
    return {**{r["axis"]: r for r in by_axis_rows if "low" in r},
            **{r["term"]: r for r in terms_out if r["term"] == "system" and "low" in r}}
