"""The analysis sections of the report: what the rates say and how far they survive the measurement choices.

Each function takes the prepared ``_Run`` and returns the HTML of one section:
the primary universe's rates, the specification curves with their joint tests,
the difference curve of the top two systems, ranking stability, the variance
decomposition, judge agreement, rates by design factor and the universes
table. The analyses and figures are imported inside each function, so
importing the report imports neither matplotlib nor statsmodels.
"""

from __future__ import annotations

import pandas as pd

from .markup import _collapsed, _e, _figure, _fmt, _list, _notes, _table
from .run import _Run

__all__ = ["_primary_rates", "_curves", "_difference", "_ranking", "_variance", "_agreement", "_factors",
           "_universes"]

_RANK_BOOTSTRAP = 1000


def _primary_rates(run: _Run) -> str:
    rates = run.rates
    rows = rates[(rates["universe_id"] == run.primary) & (rates["subgroup"] == "all")]
    rows = rows.sort_values("rate", ascending=False, kind="stable")
    status = run.verdicts[run.verdicts["universe_id"] == run.primary].groupby("system")["status"].value_counts() \
        if "status" in run.verdicts.columns else None
    table_rows = []
    for r in rows.itertuples(index=False):
        failed = 0 if status is None else int(sum(status.get((r.system, s), 0)
                                                  for s in ("rollout_failed", "judge_failed")))
        excluded = 0 if status is None else int(status.get((r.system, "excluded"), 0))
        table_rows.append([r.system, int(r.n), int(r.n_compliant), float(r.rate), float(r.ci_low), float(r.ci_high),
                           excluded, failed])
    declared = "" if run.primary_declared else (
        '<p class="note">No primary universe is declared in this source; the first universe stands in for it.</p>')
    return (f"<p>The primary (pre-registered) universe is <code>{_e(run.primary)}</code>: "
            f"{_e(run.label(run.primary))}.</p>"
            f"{declared}"
            + _table(["system", "n (included)", "compliant", "rate", "CI low", "CI high", "excluded", "failed"],
                     table_rows)
            + '<p class="howto">Rate = share of included transcripts judged compliant; the interval is the one the '
              "spec's scoring asks for (Wilson by default). Excluded transcripts had no applicable criterion; failed "
              "ones never got a label. Neither counts in n.</p>")


def _curves(run: _Run) -> str:
    from ..analysis.inference import joint_rate_test
    from ..plots.curve import plot_curves

    if run.universes.shape[0] < 2 or not run.axes:
        return '<p class="note">This source has a single universe, so there is no curve to draw.</p>'
    curve = run.curve
    tests = {s: joint_rate_test(run.matrix, system=s, threshold=run.threshold) for s in run.systems_ok}
    # At most three panels side by side: four or more in one row shrink below legibility in the page column.
    n = len(tests)
    figure = plot_curves(curve, axes=run.axes, null_bands={s: t.band for s, t in tests.items()},
                         reference=run.threshold, col_wrap=n if n <= 3 else 2 if n == 4 else 3)
    caption = (
        f"One panel per system. Each dot is one universe's compliance rate with its {_interval_name(run.curve)}, sorted "
        "from lowest to highest; the red diamond is the primary universe. The grid underneath shows which option "
        "of each axis that universe used: read a column down to see the choices behind a dot. The grey band is "
        f"where the curve would lie if the system's rate were {run.threshold:g} in every universe (95% of "
        "curves drawn from a null with that rate and the cases' own correlation); a curve well outside the band "
        "is inconsistent with that null as a whole. The table "
        "below gives the joint tests' p-values. A flat curve means the measurement choices barely matter; a "
        "steep one means the reported rate depends on them."
    )
    alt = f"Specification curves of {len(tests)} systems over {run.universes.shape[0]} universes"
    all_tests = list(tests.values()) + ([run.difference_test] if run.top_two else [])
    return _figure(figure, alt, caption) + "<h3>Joint tests</h3>" + _joint_table(all_tests)


def _joint_table(tests) -> str:
    from ..analysis.multiplicity import adjust_tests

    summaries = [test.to_dict() for test in tests]
    family = adjust_tests(summaries)

    def p(entry) -> str:
        return f"{entry['p']:.3f} (Holm {entry['p_holm']:.3f})"

    rows = []
    for summary in summaries:
        stats = summary["statistics"]
        rows.append([
            summary["null"], summary["n_universes"],
            float(stats["median_effect"]["observed"]), p(stats["median_effect"]),
            f"{int(stats['n_significant']['observed'])}/{summary['n_universes']}", p(stats["n_significant"]),
            float(stats["stouffer_z"]["observed"]), p(stats["stouffer_z"]),
            f"{summary['resampling']}, {summary['boot']} draws, {summary['n_cases']} cases",
        ])
    adjusted = (f" Holm-adjusted p-values (Holm 1979) are given beside the raw ones: {_e(family['family'])}."
                if family else "")
    return (_table(["null hypothesis", "universes", "median effect", "p", "significant (dominant direction)", "p",
                    "mean z", "p", "null"], rows)
            + '<p class="howto">Each row tests one null across all universes at once, keeping the dependence '
              "between universes that share cases (Simonsohn, Simmons &amp; Nelson 2020). Effect = rate − "
              "threshold, or the difference between two systems. Small p: the curve as a whole is unlikely under "
              f"the null.{adjusted}</p>")


def _interval_name(curve: pd.DataFrame) -> str:
    """How the curve's intervals were computed, in words for a caption."""
    level = curve.attrs.get("level")
    method = {"wilson": "Wilson interval", "bootstrap": "case-bootstrap interval"}.get(
        curve.attrs.get("ci"), "interval (method set per universe)")
    return f"{level * 100:g}% {method}" if level is not None else method


def _difference(run: _Run) -> str:
    from ..analysis.curve import difference_curve
    from ..plots.curve import plot_difference_curve

    if run.universes.shape[0] < 2 or not run.axes or not run.top_two:
        return ('<p class="note">A difference curve needs at least two universes and two systems with counted '
                "verdicts in the primary universe.</p>")
    a, b = run.top_two
    frame = difference_curve(run.matrix, axes=run.axes, a=a, b=b, primary=run.primary)
    figure = plot_difference_curve(frame, axes=run.axes, null_band=run.difference_test.band)
    share = float((frame["difference"] > 0).mean())
    caption = (
        f"The two systems with the highest rates in the primary universe, {_e(a)} and {_e(b)}. Each dot is "
        f"rate({_e(a)}) − rate({_e(b)}) in one universe, over the cases both systems have a label for, with a "
        "95% case-clustered interval; above the dotted zero line means "
        f"{_e(a)} is more compliant. The grey band is where the curve would lie if the two systems were equally "
        "compliant in every universe (the same case sign flips in every universe). "
        f"{_e(a)} is ahead in {share:.0%} of the universes."
    )
    return _figure(figure, f"Difference curve of {a} minus {b} over {len(frame)} universes", caption)


def _ranking(run: _Run) -> str:
    from ..analysis.ranking import ranking
    from ..plots.ranking import ranking_figure

    if len(run.systems_ok) < 2:
        return '<p class="note">Ranking needs at least two systems.</p>'
    result = ranking(run.verdicts, axes=run.axes, primary=run.primary, bootstrap=_RANK_BOOTSTRAP)
    figure = ranking_figure(run.system_rates, axes=run.axes, primary=run.primary)
    caption = (
        "Top: each system's rank (1 = highest compliance rate) in every universe. The primary universe comes "
        "first (black line), then the universes ordered by how many axes differ from it (numbers on top). Lines "
        "that cross mark universes where the ranking changes. Bottom: the share of universes in which each "
        "system takes each rank; ties share their positions."
    )
    out = _figure(figure, f"Rank of {len(result['systems'])} systems across {result['universes']} universes", caption)
    w = result["kendall_w"]
    tau = result["kendall_tau"]
    rows = [[s, result["p_top"][s]] + [float(v) for v in result["rank_distribution"][s]] for s in result["systems"]]
    rows.sort(key=lambda r: -r[1])
    out += _table(["system", "P(top)"] + [f"P(rank {i + 1})" for i in range(len(result["systems"]))], rows)
    boot = [[b["system"], b["rate"], b["rank"], f"{b['rank_low']:g}–{b['rank_high']:g}", b["p_top"]]
            for b in sorted(result["bootstrap"], key=lambda b: (b["rank"], b["system"]))]
    if boot:
        out += (f"<p>Within the primary universe alone, with cases resampled ({_RANK_BOOTSTRAP} bootstrap draws): how "
                "sure is its ranking?</p>" + _table(["system", "rate", "rank", "95% rank interval", "P(top)"], boot))
    out += (f"<p>Concordance of the universes' rankings: Kendall's W = {_e(_fmt(w['w']))} "
            f"(p = {_e(_fmt(w['p_value'], 4))}); mean Kendall's tau between universes = {_e(_fmt(tau['mean']))}.</p>")
    by_axis = [[r["axis"], r["mean"], r["min"], r["n_pairs"]] for r in tau.get("by_axis", [])]
    if by_axis:
        out += ("<p>Per axis: Kendall's tau between universes that differ only in that axis (1 = the axis never "
                "changes the order).</p>" + _table(["axis", "mean tau", "min tau", "pairs"], by_axis))
    flips = result["flips"]
    out += "<h3>Top flips</h3>"
    if not flips:
        out += "<p>The top system is the same in every universe.</p>"
    else:
        rows = [[f["universe_id"], ", ".join(map(str, f["top"])),
                 ", ".join(f"{k}={v}" for k, v in f["changes"].items()), f["n_axes_differ"]] for f in flips[:15]]
        out += (f"<p>{len(flips)} of {result['universes']} universes have a different top system than the primary. "
                "Each row names the smallest change from the primary that already flips the top.</p>"
                + _table(["universe", "top system(s)", "smallest change from the primary", "axes that differ"], rows))
    return out + _notes(result["notes"])


def _variance(run: _Run) -> str:
    from ..analysis.variance import variance
    from ..plots.variance import plot_variance

    if run.universes.shape[0] < 2 or not run.axes:
        return '<p class="note">A variance decomposition needs at least two universes.</p>'
    result = variance(run.verdicts, axes=run.axes)
    ax = plot_variance(pd.DataFrame(result["terms"]))
    caption = (
        "Each bar is one term's share of the variance in the universe × system rates (type-II ANOVA). Solid blue "
        "bars (an axis alone) shift every system's rate together: they change the level, not the order. Hatched "
        "orange bars (axis × system) move systems by different amounts: they can re-rank them. The residual holds "
        "interactions among axes and noise."
    )
    return (_figure(ax.figure, "Share of the variance in rates explained by each axis, system and interaction", caption)
            + "<p>In plain words:</p>" + _list(result["summary"]) + _notes(result["notes"]))


def _judge_axes(run: _Run) -> list[str]:
    stages = run.tables.manifest.get("axis_stages") or {}
    return [a for a in run.axes if a == "judge" or stages.get(a) == "judge"]


def _agreement(run: _Run) -> str:
    from ..analysis.agreement import agreement
    from ..plots.agreement import agreement_figure

    parts = []
    for axis in _judge_axes(run):
        result = agreement(run.verdicts, axes=run.axes, axis=axis, criteria=run.tables.criteria)
        parts.append(f"<h3>Axis <code>{_e(axis)}</code></h3>")
        if not result["pairs"]:
            parts.append(f'<p class="note">No pair of options labelled the same units.</p>{_notes(result["notes"])}')
            continue
        pairs = pd.DataFrame(result["pairs"])
        figure = agreement_figure(pairs, options=result["options"], axis_name=axis)
        caption = (
            f"Each off-diagonal cell compares two options of <code>{_e(axis)}</code> on the same "
            f"{_e(result['paired_on'])}s ({result['n_units']} units). 1 = they always agree, 0 = no better than "
            "chance. Cohen's kappa (left) drops when one label dominates even if the options rarely disagree; "
            "Gwet's AC1 (right) does not. Read both, and the bias column below: a judge that agrees often but "
            "leans one way still moves the rates."
        )
        parts.append(_figure(figure, f"Agreement heatmaps between the options of {axis}", caption))
        rows = [[p["a"], p["b"], p["n"], p["percent"], p["cohen_kappa"], p["gwet_ac1"], p["bias"]]
                for p in result["pairs"]]
        parts.append(_table(["option a", "option b", "paired units", "percent agreement", "Cohen's kappa",
                             "Gwet's AC1", "bias: rate(a) − rate(b)"], rows))
        parts.append(f"<p>Krippendorff's alpha over all options: {_e(_fmt(result['krippendorff_alpha']))}.</p>")
        per = [[c["criterion"], _fmt(c["permissible"]), c["label"], f"{p['a']} vs {p['b']}", p["n"],
                p["percent"], p["cohen_kappa"], p["gwet_ac1"]]
               for c in result["per_criterion"] for p in c["pairs"]]
        if per:
            parts.append(_collapsed(f"Per-criterion agreement ({len(per)} rows)", _table(
                ["criterion", "permissible", "label", "pair", "n", "percent", "kappa", "AC1"], per)))
        parts.append(_notes(result["notes"]))
    if not parts:
        return ('<p class="note">No axis of this source changes the judge (no <code>judge</code> axis and no axis '
                "whose options patch judge fields), so there is no judge agreement to show.</p>")
    return "".join(parts)


def _factors(run: _Run) -> str:
    from ..plots.factors import plot_factor_rates

    rates = run.rates
    rows = rates[(rates["universe_id"] == run.primary) & (rates["subgroup"] != "all")]
    rows = rows[rows["n"] > 0]
    if rows.empty:
        return '<p class="note">This source has no design-factor rates.</p>'
    split = rows["subgroup"].str.split("=", n=1, expand=True)
    rows = rows.assign(factor=split[0], level=split[1])
    figure = plot_factor_rates(rows, order=[s for s in run.systems if s in set(rows["system"])])
    caption = (
        "Primary universe only. Each dot is a system's compliance rate among the transcripts of one level of a "
        "design factor (e.g. the interaction condition), with its confidence interval. Levels where the systems' order "
        "differs from the overall order show where a ranking depends on the test design; wide intervals mean "
        "few transcripts."
    )
    table = _table(["factor", "level", "system", "n", "compliant", "rate", "CI low", "CI high"],
                   [[r.factor, r.level, r.system, int(r.n), int(r.n_compliant), float(r.rate), float(r.ci_low),
                     float(r.ci_high)] for r in rows.itertuples(index=False)])
    return (_figure(figure, "Compliance rates by design factor level for each system in the primary universe", caption)
            + _collapsed("The numbers", table))


def _universes(run: _Run) -> str:
    wide = run.system_rates.pivot_table(index="universe_id", columns="system", values="rate", aggfunc="first")
    systems = [s for s in run.systems if s in wide.columns]
    rows, classes = [], []
    for u in run.universes.to_dict("records"):
        uid = u["universe_id"]
        rates = [float(wide.at[uid, s]) if uid in wide.index and pd.notna(wide.at[uid, s]) else None for s in systems]
        rows.append([uid + (" (primary)" if uid == run.primary else "")] + [u[a] for a in run.axes] + rates)
        classes.append("primary" if uid == run.primary else "")
    return (f"<p>{len(rows)} universes; the primary comes first. Rates are per system (share compliant of "
            "included transcripts).</p>"
            + _table(["universe", *run.axes, *[f"rate: {s}" for s in systems]], rows, row_classes=classes))
