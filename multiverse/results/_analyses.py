"""The analyses of a :class:`multiverse.results.Results`, chained the one way every caller uses.

Each function takes the results (and the caller's choices), runs the
functions of :mod:`multiverse.analysis` in order and returns an
:class:`~multiverse.results.Analysis`: the JSON-able document, its main table
as a tidy frame, and how to draw it with :mod:`multiverse.plots` (imported
only when a figure is asked for). ``Results`` caches what they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from multiverse.errors import InputError

if TYPE_CHECKING:
    from multiverse.results._analysis import Analysis, CurveAnalysis, ResultsView
    from multiverse.results._documents import AgreementDocument, PowerDocument, VarianceDocument
    from multiverse.results._ranking_documents import BradleyTerryDocument, RankingDocument

__all__ = ["agreement", "bradley_terry", "curve", "declared_scoring", "power", "ranking", "variance"]


def curve(results: ResultsView, *, systems: Sequence[str] | None, threshold: float | str | None,
          diff: tuple[str, str] | None, boot: int, seed: int) -> CurveAnalysis:
    """Curve, joint tests, their summary and the notes on dropped rows, in that order."""
    from multiverse.analysis import curve_summary, dropped_notes
    from multiverse.results._analysis import CurveAnalysis

    frame = results.curve_frame(systems)
    names = list(dict.fromkeys(frame["system"]))
    tests, untested = [], []
    if threshold == "primary":
        for system in names:
            rate, why = primary_null(frame, system, results.primary)
            if rate is None:
                untested.append(f"{system}: no joint test, as {why}.")
            else:
                tests.append(results.rate_test(system, rate, boot=boot, seed=seed))
    elif threshold is not None:
        if isinstance(threshold, str) or not 0 < threshold < 1:
            raise InputError(f"threshold: expected a rate strictly between 0 and 1 or 'primary', got {threshold!r}",
                             param="threshold")
        tests += [results.rate_test(s, threshold, boot=boot, seed=seed) for s in names]
    if diff:
        tests.append(results.difference_test(diff[0], diff[1], boot=boot, seed=seed))
    summary = curve_summary(frame, tests=tests, notes=[*dropped_notes(results.verdicts), *untested])

    def draw(*, axes: Sequence[str] | None = None, title: str | None = None) -> Any:
        from multiverse.plots import plot_curve, plot_curves, plot_difference_curve

        shown = [a for a in results.axes if a in set(axes)] if axes else results.axes
        reference = threshold if isinstance(threshold, float) else None
        if diff:
            return plot_difference_curve(results.difference_curve(*diff), axes=shown, null_band=tests[-1].band,
                                         options=results.options, title=title, rates=results.rate_direction)
        bands = {test.systems[0]: test.band for test in tests if test.kind == "rate"}
        native = _native(results)
        rates = results.rate_direction
        if len(names) == 1:
            return plot_curve(frame, axes=shown, null_band=bands.get(names[0]), reference=reference,
                              options=results.options, title=title, native=native, rates=rates)
        return plot_curves(frame, axes=shown, null_bands=bands, reference=reference, options=results.options,
                           title=title, native=native, rates=rates)

    return CurveAnalysis("curve", summary, frame, draw, simulated=results.simulated, tests=tuple(tests))


def _native(results: ResultsView) -> tuple[float, float, bool] | None:
    """(low, high, every universe a mean) when some universe's rate is a mean of scores, else None."""
    from multiverse.analysis import MEAN_ESTIMATORS

    choices = results.scoring_choices() if results.scales.scored else None
    if choices is None:
        return None
    means = choices["estimator"].isin(MEAN_ESTIMATORS)
    ends = choices.loc[means, ["low", "high"]].drop_duplicates()
    # Means on different scales (an axis over judge.scale) share no native axis: the rate's alone is drawn.
    if not means.any() or len(ends) != 1:
        return None
    return float(ends["low"].iloc[0]), float(ends["high"].iloc[0]), bool(means.all())


def primary_null(frame: pd.DataFrame, system: str, primary: str | None) -> tuple[float | None, str]:
    """The rate a joint test of ``system`` holds fixed: its rate in the primary universe, or None and why not."""
    row = frame[(frame["system"] == system) & (frame["universe_id"] == primary)]
    if primary is None or row.empty:
        return None, "it has no counted verdict in the primary universe"
    rate = float(row["rate"].iloc[0])
    if not 0 < rate < 1:
        # A rate of 0 or 1 has no sampling spread: every resample would sit on it.
        return None, f"its primary rate is {rate:g}, which leaves the null no sampling spread"
    return rate, ""


def agreement(results: ResultsView, axis: str) -> Analysis[AgreementDocument]:
    # The design factors too: options whose rows for one unit differ in one did not judge the same task.
    from multiverse.analysis import CONTRIBUTION
    from multiverse.analysis import agreement as compute
    from multiverse.results._analysis import Analysis, rows_frame
    from multiverse.results._documents import AgreementDocument

    scale, cuts = declared_scoring(results)
    # Agreement compares what judges said: labels and raw scores, never a universe's rescaled contribution.
    verdicts = results.verdicts.drop(columns=[CONTRIBUTION], errors="ignore")
    document = compute(verdicts, axes=results.axes, axis=axis, criteria=results.criteria,
                       factors=results.factors, scale=scale, cuts=cuts, orders=_orders(results, axis))
    typed = AgreementDocument.model_validate(document)
    pairs = rows_frame(typed.pairs)

    # Bias beside kappa and AC1: two judges can agree often and still shift every rate.
    def draw(*, measures: Sequence[str] = ("cohen_kappa", "gwet_ac1", "bias")) -> Any:
        from multiverse.plots import agreement_figure, score_agreement_figure

        if typed.scores is not None:  # scores: weighted kappa on them, kappa at each cut, the mean difference
            return score_agreement_figure(typed.scores, axis_name=axis)
        return agreement_figure(pairs, options=typed.options, axis_name=axis, measures=measures)

    return Analysis("agreement", document, pairs, draw, simulated=results.simulated, model=typed)


def _orders(results: ResultsView, axis: str) -> dict[str, str] | None:
    """The order (ab, ba) each option of a run's ``axis`` sets with ``judge.order``; None: not a run's order axis."""
    spec = results.resolved_spec
    if spec is None or axis not in spec.document.axes:
        return None
    found = {}
    for option, patch in spec.document.axes[axis].items():
        patch = patch or {}
        judge = patch.get("judge")
        order = patch.get("judge.order", judge.get("order") if isinstance(judge, dict) else None)
        if order in ("ab", "ba"):
            found[str(option)] = str(order)
    return found or None


def declared_scoring(results: ResultsView) -> tuple[dict[str, Any] | None, list[float]]:
    """The judge's declared scale and every scoring cut a universe uses, for agreement on scores.

    Both come from where the estimates read them (``Results.scale`` and ``Results.scoring_choices``:
    the manifest, else the resolved spec and its axis patches), so agreement shows kappa at exactly
    the cuts the curve and the ranking use. No declared scale: None (the analysis infers one and says so).
    """
    if not results.scales.scored:
        return None, []
    scale = results.scales.common
    if scale is None:
        # Raw scores on two scales are not two judges' views of one thing: a 4 of 5 is no 4 of 10.
        raise InputError(f"{results.source or 'results'}: agreement on scores: the universes are on different "
                         "scales (an axis over judge.scale); expected one scale, or an analysis of the rates")
    choices = results.scoring_choices()
    cuts = [] if choices is None else pd.to_numeric(choices["cut"], errors="coerce").dropna().tolist()
    return scale.model_dump(), sorted({float(c) for c in cuts})


def ranking(results: ResultsView, axes: list[str] | None, boot: int, seed: int = 0) -> Analysis[RankingDocument]:
    from multiverse.analysis import ranking as compute
    from multiverse.results._analysis import Analysis
    from multiverse.results._ranking_documents import RankingDocument

    reference = results.reference
    shared: dict[str, Any] = {}
    if reference is None:  # the rates and case counts the variance reads too, made once (with one: of its rows)
        shared = {"rates": results.system_rates(), "counts": results.case_counts() if boot else None}
    document = compute(results.verdicts, axes=results.axes, primary=results.primary, bootstrap=boot, seed=seed,
                       shown=axes, reference=reference, **shared)
    choices = results.scoring_choices() if results.scales.scored else None
    cuts = pd.DataFrame()
    if choices is not None:
        from multiverse.analysis import cut_flips, cut_table

        cuts = cut_table(results.system_rates(), choices, results.axes, exclude=[reference] if reference else [])
        document["cuts"] = [{**r, "cut": None if pd.isna(r["cut"]) else float(r["cut"])}
                            for r in cuts.drop(columns="order").to_dict("records")]
        document["cut_flips"] = cut_flips(cuts)
    typed = RankingDocument.model_validate(document)
    frame = pd.DataFrame({"system": list(typed.p_top), "p_top": list(typed.p_top.values())})
    frame["coverage"] = frame["system"].map(typed.coverage)

    def draw(*, kind: str = "ranking") -> Any:
        """``kind="ranking"``: ranks across universes; ``"cuts"``: each system's estimate and rank as the cut moves."""
        if kind == "cuts":
            from multiverse.plots import cut_figure

            common = results.scales.common  # means on different scales share no native axis
            return cut_figure([row.model_dump() for row in typed.cuts], scale=(common.min, common.max) if common else None,
                              rates_read=results.rate_direction)
        from multiverse.plots import ranking_figure

        rates = results.system_rates()
        if reference is not None:
            rates = rates[rates["system"].astype(str) != reference]
        return ranking_figure(rates, axes=results.axes, primary=results.primary, rates_read=results.rate_direction)

    return Analysis("ranking", document, frame, draw, simulated=results.simulated, model=typed)


def bradley_terry(results: ResultsView, axes: list[str] | None, boot: int, anchor: str | None, prior: float,
                  seed: int) -> Analysis[BradleyTerryDocument]:
    """Bradley-Terry scores from the pairwise verdicts, the reference system (if any) the opponent and the anchor."""
    from multiverse.analysis import bradley_terry as compute
    from multiverse.results._analysis import Analysis, rows_frame
    from multiverse.results._ranking_documents import BradleyTerryDocument

    document = compute(results.verdicts, axes=results.axes, reference=results.reference, anchor=anchor, prior=prior,
                       primary=results.primary, bootstrap=boot, seed=seed, shown=axes)
    typed = BradleyTerryDocument.model_validate(document)
    # The axes are a score's extra keys: put back after its universe, where the analysis wrote them.
    frame = rows_frame(typed.scores, first=("universe_id", *results.axes))
    return Analysis("ranking", document, frame, simulated=results.simulated, model=typed)


def variance(results: ResultsView, axes: list[str] | None) -> Analysis[VarianceDocument]:
    from multiverse.analysis import variance as compute
    from multiverse.results._analysis import Analysis, rows_frame
    from multiverse.results._documents import VarianceDocument

    # The model keeps every axis; only what is reported is narrowed (``shown``).
    document = compute(results.verdicts, axes=results.axes, rates=results.system_rates(),
                       counts=results.case_counts(), shown=axes)
    typed = VarianceDocument.model_validate(document)
    terms = rows_frame(typed.terms)

    def draw() -> Any:
        from multiverse.plots import plot_variance

        return plot_variance(terms).figure

    return Analysis("variance", document, terms, draw, simulated=results.simulated, model=typed)


def power(results: ResultsView, baseline_rate: float, alpha: float, power: float) -> Analysis[PowerDocument]:
    """Power at the cases each system answered per universe (the smallest count), and per design cell."""
    from multiverse.analysis import design_power
    from multiverse.results._analysis import Analysis, rows_frame
    from multiverse.results._documents import PowerDocument

    v = results.verdicts
    per = v.groupby(["universe_id", "system"], sort=False, observed=True)["case_id"].nunique()
    cases = int(per.min()) if len(per) else 0
    per_cell = None
    if results.factors:
        cells = v.groupby(["universe_id", "system", *results.factors], sort=False, observed=True)["case_id"].nunique()
        per_cell = int(cells.min()) if len(cells) else None
    if cases < 1:
        raise InputError("verdicts: expected at least one case per system and universe")
    document = design_power(cases=cases, cases_per_cell=per_cell, baseline_rate=baseline_rate, alpha=alpha,
                            power=power)
    typed = PowerDocument.model_validate(document)
    return Analysis("power", document, rows_frame(typed.comparisons), simulated=results.simulated, model=typed)
