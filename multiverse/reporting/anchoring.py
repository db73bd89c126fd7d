"""The report's section "Anchored to people": the rates corrected by human labels (``report --human FILE``).

Shown only when the report is given human labels. It has each universe's
judge against the people (sensitivity, specificity), the specification
curve judge-raw beside the curve anchored with PPI++, and whether each
universe's ranking of systems survives the correction. Everything comes from
``Results.calibrate``, ``Results.anchored_curve`` and
``Results.anchored_ranking``, so the page says what ``multiverse calibrate``,
``curve --human`` and ``ranking --human`` print.
"""

from __future__ import annotations

from .markup import _e, _figure, _fmt, _notes, _table
from .run import _Run

__all__ = ["ANCHOR", "TITLE", "_anchored"]

ANCHOR, TITLE = "anchored", "Anchored to people"


def _anchored(run: _Run) -> str:
    human = run.human
    calibration = run.tables.calibrate(human)
    level = f"{1 - calibration['alpha']:.0%}"
    rates = calibration.frame
    labelled = int(rates.groupby("system")["n_human"].max().sum()) if len(rates) else 0
    out = (f"<p>People labelled a uniform random sample of {labelled} transcripts ({_e(_source(human))}). Each universe x system rate below is "
           "anchored to their labels with prediction-powered inference (PPI++): the estimate targets the rate people "
           "would give, whatever the judge's bias; a judge that agrees with people narrows the interval. "
           f"Intervals are {level} score intervals, clustered by case where cases have replicates. Where a judge "
           "does not help (near chance, or too few labels to tell), the anchored interval can be wider than the "
           "labels' own; the notes below count those cells, where the humans-only rate is the one to quote. "
           "What this assumes is in README › Human anchoring.</p>")
    out += _judges(run, calibration, level)
    out += _curve(run, human, level)
    out += _ranking(run, human)
    return out + _notes(calibration.notes)


def _source(human) -> str:
    return str(human) if isinstance(human, (str, bytes)) or hasattr(human, "__fspath__") else "a table of labels"


def _judges(run: _Run, calibration, level: str) -> str:
    def interval(pair) -> str:
        return "—" if pair is None else f"{_fmt(pair[0], 2)}–{_fmt(pair[1], 2)}"

    rows = [[run.label(j["universe_id"]), j["n_human"], j["sensitivity"], interval(j["sensitivity_ci"]),
             j["specificity"], interval(j["specificity_ci"])] for j in calibration["judges"]]
    return ("<h3>Each judge against the people</h3><p>Sensitivity: the share of the violations people found that "
            "the universe's judge flags too. Specificity: the share of the transcripts people call compliant that "
            "the judge calls compliant. Pooled over systems, with Wilson intervals.</p>"
            + _table(["universe", "labels", "sensitivity", f"{level} interval", "specificity", f"{level} interval"],
                     rows))


def _curve(run: _Run, human, level: str) -> str:
    analysis = run.tables.anchored_curve(human)
    if analysis.frame.empty:
        return '<p class="note">No universe x system has enough labels for an anchored rate.</p>'
    caption = (f"Left: each system's specification curve as its judges rate it (with the judges' own {level} "
               f"intervals); right: the same universes anchored to the human labels, with the PPI++ {level} "
               "intervals. Where the judges are biased, the left curve sits away from the right one; a curve that "
               "flattens on the right was spread by the judges, not by the systems.")
    figure = analysis.figure()
    rows = [[system, s["judge_rate"]["min"], s["judge_rate"]["max"], s["rate"]["min"], s["rate"]["max"]]
            for system, s in analysis.document["systems"].items()]
    return ("<h3>The corrected curve</h3>"
            + _figure(figure, "Specification curves, judge alone and anchored to people", caption, simulated=run.tables.simulated)
            + _table(["system", "judge: lowest", "judge: highest", "anchored: lowest", "anchored: highest"], rows))


def _ranking(run: _Run, human) -> str:
    document = run.tables.anchored_ranking(human).document
    entries = document["universes"]
    if not entries:
        return "<h3>Does the ranking survive?</h3><p class=\"note\">No universe has two systems with an anchored rate.</p>"
    same_top = sum(e["same_top"] for e in entries)
    same_order = sum(e["same_order"] for e in entries)
    text = (f"<p>The top system stays on top after anchoring in {same_top} of {len(entries)} universes; the whole "
            f"order of systems stays in {same_order}. \"Separable\" says whether the anchored top system's interval "
            "clears the runner-up's.</p>")
    primary = document["primary"]
    rows = [[run.label(e["universe_id"]) + (" (primary)" if primary and e["universe_id"] == primary["universe_id"] else ""),
             ", ".join(e["judge_order"]), ", ".join(e["anchored_order"]), e["same_top"], e["same_order"],
             e["anchored_top_separable"]] for e in entries]
    # The universes whose top changes first: they are the finding.
    order = sorted(range(len(rows)), key=lambda i: (entries[i]["same_top"], entries[i]["same_order"]))
    return ("<h3>Does the ranking survive?</h3>" + text
            + _table(["universe", "judge's order", "anchored order", "same top", "same order", "separable"],
                     [rows[i] for i in order]))
