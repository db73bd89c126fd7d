"""The analysis sections of the report: what the rates say and how far they survive the measurement choices.

Each function takes the prepared ``_Run`` and returns the HTML of one section:
the primary universe's rates, the specification curves with their joint tests,
the difference curve of the top two systems, ranking stability, the variance
decomposition, judge agreement, rates by design factor and the universes
table. The analyses and figures are imported inside each function, so
importing the report imports neither matplotlib nor statsmodels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from multiverse.core import FAILED_STATUSES, NOT_RUN, counted_word, orient, orient_rates, rank_one, rate_name

from ._markup import _collapsed, _e, _figure, _fmt, _list, _notes, _table
from ._run import _Run

if TYPE_CHECKING:
    from multiverse.results import Analysis, Flip, RankingDocument, TestStatistic

__all__ = [
    "_agreement",
    "_curves",
    "_difference",
    "_factors",
    "_primary_rates",
    "_ranking",
    "_universes",
    "_variance",
]

_RANK_BOOTSTRAP = 1000
# No universe is silently treated as pre-registered: sections about the primary say why they are empty.
_NO_PRIMARY = ('<p class="note">No primary (pre-registered) universe is declared in this source, so no universe '
               "is singled out: declare one (the primary of an import, or <code>primary:</code> in the spec) to see "
               "its rates here and to compare the other universes with it.</p>")


def _primary_rates(run: _Run) -> str:
    if run.primary is None:
        return _NO_PRIMARY
    rates = run.rates
    # The rates are recomputed from the verdicts; a stored table that disagrees is named, once, here.
    stale = run.tables.rates_note()
    declared = f'<p class="problem">Stale rates table: {_e(stale)}.</p>' if stale else ""
    rows = orient_rates(rates[(rates["universe_id"] == run.primary) & (rates["subgroup"] == "all")], run.read)
    rows = rows.sort_values("rate", ascending=False, kind="stable")
    status = run.verdicts[run.verdicts["universe_id"] == run.primary].groupby("system")["status"].value_counts() \
        if "status" in run.verdicts.columns else None
    table_rows = []
    for r in rows.itertuples(index=False):
        failed = 0 if status is None else int(sum(status.get((r.system, s), 0)
                                                  for s in (NOT_RUN, *FAILED_STATUSES)))
        excluded = 0 if status is None else int(status.get((r.system, "excluded"), 0))
        table_rows.append([r.system, int(r.n), int(r.n_compliant), float(r.rate), float(r.ci_low), float(r.ci_high),
                           excluded, failed])
    return (f"<p>The primary (pre-registered) universe is <code>{_e(run.primary)}</code>: "
            f"{_e(run.label(run.primary))}.</p>"
            f"{declared}"
            + _table(["system", "n (included)", counted_word(run.read), rate_name(run.read), "CI low", "CI high",
                      "excluded", "failed"], table_rows)
            + f'<p class="howto">{_e(rate_name(run.read).capitalize())} = share of included transcripts judged '
              f"{counted_word(run.read)}; the interval is the one the "
              "spec's scoring asks for (Wilson by default). Excluded transcripts had no applicable criterion; failed "
              "ones (or, in an import, ones never run) never got a label. Neither counts in n.</p>")


def _curves(run: _Run) -> str:
    from ..plots import plot_curves

    if run.universes.shape[0] < 2 or not run.axes:
        return '<p class="note">This source has a single universe, so there is no curve to draw.</p>'
    curve = run.curve
    tests, skipped = run.rate_tests
    # At most three panels side by side: four or more in one row shrink below legibility in the page column.
    n = len(run.systems_ok)
    figure = plot_curves(curve, axes=run.axes, systems=run.systems_ok,
                         null_bands={s: t.band for s, t in tests.items()}, reference=run.threshold,
                         col_wrap=n if n <= 3 else 2 if n == 4 else 3, options=run.options, rates=run.read)
    caption = (
        f"One panel per system. Each dot is one universe's {rate_name(run.read)} with its {_interval_name(run.curve)}, sorted "
        "from lowest to highest; the red diamond is the primary universe, and its label gives its rate, its "
        "interval and its position counted from the lowest rate (the range of positions it shares when other "
        "universes have the same rate, e.g. 7th–24th lowest of 24). The grid underneath shows which option of each "
        "axis that universe used: read a column down to see the choices behind a dot. "
        + _band_sentence(run) +
        " A flat curve means the measurement choices barely matter; a steep one means the reported rate depends "
        "on them."
    )
    alt = f"Specification curves of {n} systems over {run.universes.shape[0]} universes"
    if not run.tests:
        return _figure(figure, alt, caption, simulated=run.tables.simulated)
    all_tests = [(t, run.threshold is None) for t in tests.values()]
    if run.difference_test is not None:
        all_tests.append((run.difference_test, False))
    return (_figure(figure, alt, caption, simulated=run.tables.simulated) + "<h3>Joint tests</h3>"
            + _joint_table(all_tests, run.read)
            + _notes(skipped))


def _band_sentence(run: _Run) -> str:
    if not run.tests:
        return "Joint tests were turned off for this report, so there is no grey band and no p-value."
    if run.threshold is None:
        null = "every universe had the system's rate in the primary universe"
    else:
        null = f"the system's {rate_name(run.read)} were {orient(run.threshold, run.read):g} in every universe"
    return (f"The grey band is where the curve would lie if {null} and only the sampling of cases moved it (95% "
            "of curves drawn from a null with that rate and the cases' own correlation, shared by all universes). Where the curve leaves "
            "the band, the measurement choices, not chance, are moving the rate; the joint tests below give the "
            "p-values.")


def _joint_table(tests: Any, read: str = "compliance") -> str:
    from multiverse.analysis import adjust_tests
    from multiverse.results import JointTestEntry, Multiplicity

    summaries = [test.to_dict() for test, _ in tests]
    adjusted = adjust_tests(summaries)  # writes each statistic's Holm-adjusted p into the summaries
    family = None if adjusted is None else Multiplicity.model_validate(adjusted)

    def p(entry: TestStatistic) -> str:
        return f"{entry.p:.3f} (Holm {entry.p_holm:.3f})"

    rows = []
    for (test, at_primary), entry in zip(tests, [JointTestEntry.model_validate(s) for s in summaries]):
        stats = entry.statistics
        null = entry.null
        name = rate_name(read).replace(" ", "_") if read != "compliance" else "rate"
        if test.kind == "rate" and (at_primary or read != "compliance"):
            # The null and the effects as the rates are read (core.orient): rate - t reads (1 - rate) - (1 - t).
            t = orient(test.threshold, read)
            null = (f"{name}({test.systems[0]}) = {t:.3f} (its primary rate)" if at_primary
                    else f"{name}({test.systems[0]}) = {t:g}") + " in every universe"
        elif read != "compliance":
            null = f"{name}({test.systems[0]}) = {name}({test.systems[1]}) in every universe"
        rows.append([
            null, entry.n_universes,
            float(orient(stats["median_effect"].observed, read, difference=True)), p(stats["median_effect"]),
            f"{int(stats['n_significant'].observed)}/{entry.n_universes}", p(stats["n_significant"]),  # type: ignore[arg-type]
            float(orient(stats["stouffer_z"].observed, read, difference=True)), p(stats["stouffer_z"]),
            f"{entry.resampling}, {entry.boot} draws, {entry.n_cases} cases",
        ])
    said = (f" Holm-adjusted p-values (Holm 1979) are given beside the raw ones: {_e(family.family)}."
            if family else "")
    return (_table(["null hypothesis", "universes", "median effect", "p", "significant (dominant direction)", "p",
                    "mean z", "p", "null"], rows)
            + '<p class="howto">Each row tests one null across all universes at once, keeping the dependence '
              "between universes that share cases (Simonsohn, Simmons &amp; Nelson 2020). Effect = "
              f"{_e(rate_name(read))} − threshold, or the difference between two systems' {_e(rate_name(read))}s. Small p: the curve as a whole is unlikely under "
              f"the null.{said}</p>")


def _interval_name(curve: pd.DataFrame) -> str:
    """How the curve's intervals were computed, in words for a caption."""
    level = curve.attrs.get("level")
    method = {"wilson": "Wilson interval", "bootstrap": "case-bootstrap interval"}.get(
        curve.attrs.get("ci"), "interval (method set per universe)")
    return f"{level * 100:g}% {method}" if level is not None else method


def _difference(run: _Run) -> str:
    from multiverse.analysis import difference_curve

    from ..plots import plot_difference_curve

    if run.universes.shape[0] < 2 or not run.axes or not run.top_two:
        return ('<p class="note">A difference curve needs at least two universes and two systems with counted '
                "verdicts in the primary universe.</p>")
    a, b = run.top_two
    frame = difference_curve(run.matrix, axes=run.axes, a=a, b=b, primary=run.primary)
    test = run.difference_test
    figure = plot_difference_curve(frame, axes=run.axes, null_band=test.band if test is not None else None,
                                   options=run.options, rates=run.read)
    share = float((frame["difference"] > 0).mean())
    name = "rate" if run.read == "compliance" else rate_name(run.read)
    chosen = "in the primary universe" if run.primary is not None else "by median rate over the universes (no primary is declared)"
    band = ("The grey band is where the curve would lie if the two systems were equally compliant in every "
            "universe (the same case sign flips in every universe). " if test is not None else "")
    caption = (
        f"The two systems with the {'highest' if run.read == 'compliance' else 'lowest'} {rate_name(run.read)}s "
        f"{chosen}, {_e(a)} and {_e(b)}. Each dot is "
        f"{name}({_e(a)}) − {name}({_e(b)}) in one universe, over the cases both systems have a label for, with a "
        "95% case-clustered interval, sorted from the lowest difference to the highest; "
        f"{'above' if run.read == 'compliance' else 'below'} the dotted zero "
        f"line means {_e(a)} is more compliant. {band}"
        f"{_e(a)} is ahead in {share:.0%} of the universes."
    )
    return _figure(figure, f"Difference curve of {a} minus {b} over {len(frame)} universes", caption, simulated=run.tables.simulated)


def _ranking(run: _Run) -> str:
    if len(run.systems_ok) < 2:
        return '<p class="note">Ranking needs at least two systems.</p>'
    analysis = run.tables.ranking(boot=_RANK_BOOTSTRAP)
    result = analysis.document
    figure = analysis.figure()
    order = ("The primary universe comes first (black line), then the universes ordered by how many axes differ "
             "from it (numbers on top)." if run.primary is not None else
             "No primary universe is declared, so none is marked.")
    caption = (
        f"Top: each system's rank (1 = {rank_one(run.read)}) "
        f"in every universe. {order} Lines "
        "that cross mark universes where the ranking changes. Bottom: the share of universes in which each "
        "system takes each rank; ties share their positions (two systems tied for first get half a universe "
        "each), as P(top) below and the page's \"ranked first\" do."
    )
    out = _figure(figure, f"Rank of {len(result.systems)} systems across {result.universes} universes", caption, simulated=run.tables.simulated)
    w = result.kendall_w
    tau = result.kendall_tau
    from multiverse.analysis import separability

    unc = result.uncertainty
    top_iv = unc.p_top if unc is not None else {}
    by_top = sorted(result.systems, key=lambda s: -result.p_top[s])  # stable: ties keep the document's order
    rows = [[s, result.p_top[s], "–".join(_fmt(v) for v in top_iv[s]) if s in top_iv else ""]
            + [float(v) for v in result.rank_distribution[s]] for s in by_top]  # type: ignore[arg-type]
    level = f"{unc.level:.0%} interval" if unc is not None else "interval"
    out += _table(["system", "P(top)", f"P(top), {level}"]
                  + [f"P(rank {i + 1})" for i in range(len(result.systems))], rows)
    sentences = separability([row.model_dump() for row in unc.adjacent]) if unc is not None else []
    if sentences and unc is not None:
        out += ("<p>Can neighbours in the primary universe's order be told apart across the multiverse? "
                "P(a above b) is the share of universes in which a ranks above b; its interval comes from "
                f"resampling cases jointly in every universe ({unc.resamples} draws). Where the interval "
                "contains 1/2, these cases cannot separate the two systems:</p>" + _list(sentences))
    boot = [[b.system, orient(b.rate, run.read), b.rank, f"{b.rank_low:g}–{b.rank_high:g}", b.p_top]
            for b in sorted(result.bootstrap, key=lambda b: (b.rank, b.system))]
    if boot:
        out += (f"<p>Within the primary universe alone, with cases resampled ({_RANK_BOOTSTRAP} bootstrap draws): how "
                "sure is its ranking?</p>" + _table(["system", rate_name(run.read), "rank", "95% rank interval", "P(top)"],
                                                    boot))
    out += (f"<p>Concordance of the universes' rankings: Kendall's W = {_e(_fmt(w.w))} "
            f"(p = {_e(_fmt(w.p_value, 4))}); mean Kendall's tau between universes = {_e(_fmt(tau.mean))}.</p>")
    by_axis = [[r.axis, r.mean, r.min, r.n_pairs] for r in tau.by_axis]
    if by_axis:
        out += ("<p>Per axis: Kendall's tau between universes that differ only in that axis (1 = the axis never "
                "changes the order).</p>" + _table(["axis", "mean tau", "min tau", "pairs"], by_axis))
    out += "<h3>Top flips</h3>" + _flips(run, result.flips, result.universes)
    if result.cuts:
        out += "<h3>The cut</h3>" + _cuts(run, analysis)
    return out + _notes(result.notes)


def _cuts(run: _Run, analysis: Analysis[RankingDocument]) -> str:
    """Each system's estimate and rank as the cut on a score moves, and where the top changes, in words."""
    sentences = analysis.document.cut_flips or ["The top system is the same at the mean and at every cut."]
    below = run.read != "compliance"  # a cut's violation rate is the share below it (core.orient: 1 - at or above)
    caption = ("Universes that read the same judgments and differ only in how the scores are counted: the mean "
               f"(rescaled to 0–1{', read as 1 − it' if below else ''}; the right axis gives it in score units), then "
               f"the share of scores {'below' if below else 'at or above'} each cut. Left: each system's "
               f"{rate_name(run.read)}; right: its rank (1 = {rank_one(run.read)}). Crossing lines on the right are "
               "flips caused by the cut alone: the cut is a measurement choice like any other.")
    figure = analysis.figure(kind="cuts")
    return _figure(figure, "Estimate and rank as the cut moves", caption, simulated=run.tables.simulated) \
        + _list([s[0].upper() + s[1:] for s in sentences])


# How the flip fields the report knows are headed; any other field gets a column under its own name.
_FLIP_FIELDS = {"universe_id": "universe", "top": "top system(s)", "changes": "smallest change from the primary",
                "n_axes_differ": "axes that differ", "via_universe": "the change alone gives universe"}


def _flip_cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_flip_cell(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "; ".join(_flip_cell(v) for v in value) if any(isinstance(v, dict) for v in value) \
            else ", ".join(_flip_cell(v) for v in value)
    return _fmt(value)


def _flips(run: _Run, flips: list[Flip], n_universes: int) -> str:
    """Every universe whose top differs from the primary's, with its id, options and the smallest change."""
    if run.primary is None:
        return _NO_PRIMARY
    if not flips:
        return "<p>The top system is the same in every universe.</p>"
    # The fields the report knows in its order, then any other field a flip carries (an extra key of the model).
    given = [dict.fromkeys([*(f for f in type(flip).model_fields if f in flip.model_fields_set), *(flip.model_extra or {})])
             for flip in flips]
    fields = [f for f in _FLIP_FIELDS if any(f in names for names in given)]
    fields += [f for f in dict.fromkeys(k for names in given for k in names) if f not in _FLIP_FIELDS]
    header = [_FLIP_FIELDS.get(f, f.replace("_", " ")) for f in fields]
    rows = []
    for flip, names in zip(flips, given):
        row = [_flip_cell(getattr(flip, f) if f in names else None) for f in fields]
        row[fields.index("universe_id")] = f"{flip.universe_id} ({run.label(str(flip.universe_id))})"
        rows.append(row)
    at = run.system_rates[run.system_rates["universe_id"] == run.primary].dropna(subset=["rate"])
    top = ", ".join(map(str, at.loc[at["rate"] == at["rate"].max(), "system"])) if len(at) else ""
    intro = (f"<p>{len(flips)} of {n_universes} universes have a different top system than the primary"
             + (f" (where {_e(top)} is on top)" if top else "") + ". Each row names the universe, its top "
             "system(s) and the smallest change from the primary that already gives a different top.</p>")
    return intro + _collapsed(f"All {len(flips)} universes with a different top", _table(header, rows,
                                                                                         limit=len(rows)))


def _variance(run: _Run) -> str:
    if run.universes.shape[0] < 2 or not run.axes:
        return '<p class="note">A variance decomposition needs at least two universes.</p>'
    analysis = run.tables.variance()
    result = analysis.document
    caption = (
        "Each bar is one term's share of the variance in the universe × system rates (type-II ANOVA). Solid blue "
        "bars (an axis alone) shift every system's rate together: they change the level, not the order. Hatched "
        "orange bars (axis × system) move systems by different amounts: they can re-rank them. The residual holds "
        "interactions among axes and noise. A black tick, where drawn, is the share that sampling noise alone "
        "would give a term: a bar that barely passes its tick is not distinguishable from noise."
    )
    return (_figure(analysis.figure(), "Share of the variance in rates explained by each axis, system and interaction", caption, simulated=run.tables.simulated)
            + "<p>In plain words:</p>" + _list(result.summary) + _notes(result.notes))


def _agreement(run: _Run) -> str:
    from ..plots import agreement_figure

    parts = []
    for axis in run.tables.judge_axes():
        analysis = run.tables.agreement(axis)
        result = analysis.document
        parts.append(f"<h3>Axis <code>{_e(axis)}</code></h3>")
        if not result.pairs:
            parts.append(f'<p class="note">No pair of options labelled the same units.</p>{_notes(result.notes)}')
            continue
        pairs = analysis.frame
        declared = run.options.get(axis, [])
        options = [o for o in declared if o in set(result.options)]
        options += [o for o in result.options if o not in set(options)]
        figure = agreement_figure(pairs, options=options, axis_name=axis)
        caption = (
            f"Each off-diagonal cell compares two options of <code>{_e(axis)}</code> on the same "
            f"{_e(result.paired_on)}s ({result.n_units} units). 1 = they always agree, 0 = no better than "
            "chance. Cohen's kappa (left) drops when one label dominates even if the options rarely disagree; "
            "Gwet's AC1 (right) does not. Read both, and the bias column below: a judge that agrees often but "
            "leans one way still moves the rates."
        )
        parts.append(_figure(figure, f"Agreement heatmaps between the options of {axis}", caption, simulated=run.tables.simulated))
        rows = [[p.a, p.b, p.n, p.percent, p.cohen_kappa, p.gwet_ac1, p.bias] for p in result.pairs]
        parts.append(_table(["option a", "option b", "paired units", "percent agreement", "Cohen's kappa",
                             "Gwet's AC1", "bias: rate(a) − rate(b)"], rows))
        parts.append(f"<p>Krippendorff's alpha over all options: {_e(_fmt(result.krippendorff_alpha))}.</p>")
        per = [[c.criterion, _fmt(c.permissible), c.label, f"{p.a} vs {p.b}", p.n, p.percent, p.cohen_kappa,
                p.gwet_ac1] for c in result.per_criterion for p in c.pairs]
        if per:
            parts.append(_collapsed(f"Per-criterion agreement ({len(per)} rows)", _table(
                ["criterion", "permissible", "label", "pair", "n", "percent", "kappa", "AC1"], per)))
        parts.append(_notes(result.notes))
    if not parts:
        return ('<p class="note">No axis of this source changes the judge (no <code>judge</code> axis and no axis '
                "whose options patch judge fields), so there is no judge agreement to show.</p>")
    return "".join(parts)


def _factors(run: _Run) -> str:
    from ..plots import plot_factor_rates

    rates = run.rates
    rows = rates[(rates["subgroup"] != "all") & (rates["n"] > 0)]
    if rows.empty:
        return '<p class="note">This source has no design-factor rates.</p>'
    if run.primary is None:
        return _NO_PRIMARY
    rows = rows[rows["universe_id"] == run.primary]
    if rows.empty:
        return '<p class="note">This source has no design-factor rates.</p>'
    split = rows["subgroup"].str.split("=", n=1, expand=True)
    rows = rows.assign(factor=split[0], level=split[1])
    figure = plot_factor_rates(rows, order=[s for s in run.systems if s in set(rows["system"])], rates_read=run.read)
    rows = orient_rates(rows, run.read)
    caption = (
        f"Primary universe only. Each dot is a system's {rate_name(run.read)} among the transcripts of one level of a "
        "design factor (e.g. the interaction condition), with its confidence interval. Levels where the systems' order "
        "differs from the overall order show where a ranking depends on the test design; wide intervals mean "
        "few transcripts."
    )
    table = _table(["factor", "level", "system", "n", counted_word(run.read), rate_name(run.read), "CI low", "CI high"],
                   [[r.factor, r.level, r.system, int(r.n), int(r.n_compliant), float(r.rate), float(r.ci_low),
                     float(r.ci_high)] for r in rows.itertuples(index=False)])
    return (_figure(figure, f"{rate_name(run.read).capitalize()}s by design factor level for each system in the "
                    "primary universe", caption, simulated=run.tables.simulated)
            + _collapsed("The numbers", table))


def _universes(run: _Run) -> str:
    wide = run.system_rates.pivot_table(index="universe_id", columns="system", values="rate", aggfunc="first")
    systems = [s for s in run.systems if s in wide.columns]
    rows, classes = [], []
    for u in run.universes.to_dict("records"):
        uid = u["universe_id"]
        rates = [float(orient(wide.at[uid, s], run.read)) if uid in wide.index and pd.notna(wide.at[uid, s]) else None
                 for s in systems]
        rows.append([uid + (" (primary)" if uid == run.primary else "")] + [u[a] for a in run.axes] + rates)
        classes.append("primary" if uid == run.primary else "")
    first = "the primary comes first" if run.primary is not None else "no primary is declared"
    return (f"<p>{len(rows)} universes; {first}. {_e(rate_name(run.read).capitalize())}s are per system (share "
            f"{counted_word(run.read)} of included transcripts).</p>"
            + _table(["universe", *run.axes, *[f"{rate_name(run.read)}: {s}" for s in systems]], rows,
                     row_classes=classes))
