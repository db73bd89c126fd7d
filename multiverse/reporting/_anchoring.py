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

from typing import TYPE_CHECKING, Any

from ._markup import _e, _figure, _fmt, _notes, _table
from ._run import _Run

if TYPE_CHECKING:
    from multiverse.results import LabelCount

__all__ = ["ANCHOR", "TITLE", "_anchored"]

ANCHOR, TITLE = "anchored", "Anchored to people"


def _anchored(run: _Run) -> str:
    human = run.human
    calibration = run.tables.calibrate(human)
    level = f"{1 - calibration.document.alpha:.0%}"
    out = (f"<p>People labelled a uniform random sample of {_counted(calibration.document.labelled)} "
           f"({_e(_source(human))}). Each universe x system rate below is "
           "anchored to their labels with prediction-powered inference (PPI++): the estimate targets the rate people "
           "would give, whatever the judge's bias; a judge that agrees with people narrows the interval. "
           f"Intervals are {level} score intervals, clustered by case where cases have replicates. Where a judge "
           "does not help (near chance, or too few labels to tell), the anchored interval can be wider than the "
           "labels' own; the notes below count those cells, where the humans-only rate is the one to quote. "
           "What this assumes is in README › Human anchoring.</p>")
    if "mean" in calibration.frame.columns and calibration.frame["mean"].notna().any():
        scale = run.tables.scale
        out += (f"<p>People scored the transcripts on the judge's scale, {scale.min:g} to {scale.max:g}. "
                "For a universe that reads the mean score, a rate here is that mean rescaled to 0–1, "
                f"(mean − {scale.min:g}) / {scale.max - scale.min:g}, as on every curve of this report; "
                "a universe that reads the share at or above a cut takes the share of people's scores at or above "
                "it. <code>multiverse calibrate</code> prints the means in the scale's units.</p>")
    out += _judges(run, calibration, level)
    out += _curve(run, human, level)
    out += _ranking(run, human)
    return out + _notes(calibration.notes)


def _counted(labelled: LabelCount) -> str:
    """"48 transcripts (12 per system in each of 2 rollout configurations)": each labelled transcript counted once."""
    total, configurations, per_cell = labelled.transcripts, labelled.rollout_configurations, labelled.per_cell
    systems = labelled.systems
    words = f"{total} transcript{'s' if total != 1 else ''}"
    where = f" in each of {configurations} rollout configurations" if configurations > 1 else ""
    if per_cell is not None and (len(systems) > 1 or configurations > 1):
        return f"{words} ({per_cell} per system{where})"
    if len(systems) > 1:
        each = ", ".join(f"{_e(name)} {count}" for name, count in systems.items())
        return f"{words} ({each}{', over ' + str(configurations) + ' rollout configurations' if where else ''})"
    return words


def _source(human: Any) -> str:
    return str(human) if isinstance(human, (str, bytes)) or hasattr(human, "__fspath__") else "a table of labels"


def _judges(run: _Run, calibration: Any, level: str) -> str:
    def interval(pair: Any) -> str:
        return "—" if pair is None else f"{_fmt(pair[0], 2)}–{_fmt(pair[1], 2)}"

    judges = calibration.document.judges
    rows = [[run.label(j.universe_id), j.n_human, j.sensitivity, interval(j.sensitivity_ci),
             j.specificity, interval(j.specificity_ci)] for j in judges]
    head = ["universe", "labels", "sensitivity", f"{level} interval", "specificity", f"{level} interval"]
    text = ("<h3>Each judge against the people</h3><p>Sensitivity: the share of the violations people found that "
            "the universe's judge flags too. Specificity: the share of the transcripts people call compliant that "
            "the judge calls compliant. Pooled over systems, with Wilson intervals.")
    if any("mean_difference" in j.model_fields_set for j in judges):
        # A scored run: a universe of a mean score has no violations to catch; its judge is told by its bias instead.
        for row, j in zip(rows, judges):
            row += [j.mean_difference, j.correlation]
        head += ["judge − people (mean score)", "correlation"]
        text += (" For a universe that reads the mean score: the judge's mean score minus the people's on the "
                 "labelled transcripts, in the scale's units, and their correlation (Pearson's); sensitivity and "
                 "specificity are for a universe that reads the share at or above a cut.")
    return text + "</p>" + _table(head, rows)


def _curve(run: _Run, human: Any, level: str) -> str:
    analysis = run.tables.anchored_curve(human)
    if analysis.frame.empty:
        return '<p class="note">No universe x system has enough labels for an anchored rate.</p>'
    caption = (f"Left: each system's specification curve as its judges rate it (with the judges' own {level} "
               f"intervals); right: the same universes anchored to the human labels, with the PPI++ {level} "
               "intervals. Where the judges are biased, the left curve sits away from the right one; a curve that "
               "flattens on the right was spread by the judges, not by the systems.")
    figure = analysis.figure()
    rows = [[system, s.judge_rate.min, s.judge_rate.max, s.rate.min, s.rate.max]
            for system, s in analysis.document.systems.items()]
    return ("<h3>The corrected curve</h3>"
            + _figure(figure, "Specification curves, judge alone and anchored to people", caption, simulated=run.tables.simulated)
            + _table(["system", "judge: lowest", "judge: highest", "anchored: lowest", "anchored: highest"], rows))


def _ranking(run: _Run, human: Any) -> str:
    document = run.tables.anchored_ranking(human).document
    entries = document.universes
    if not entries:
        return "<h3>Does the ranking survive?</h3><p class=\"note\">No universe has two systems with an anchored rate.</p>"
    same_top = sum(e.same_top for e in entries)
    same_order = sum(e.same_order for e in entries)
    text = (f"<p>The top system stays on top after anchoring in {same_top} of {len(entries)} universes; the whole "
            f"order of systems stays in {same_order}. \"Separable\" says whether the anchored top system's interval "
            "clears the runner-up's.</p>")
    primary = document.primary
    rows = [[run.label(e.universe_id) + (" (primary)" if primary and e.universe_id == primary.universe_id else ""),
             ", ".join(e.judge_order), ", ".join(e.anchored_order), e.same_top, e.same_order,
             e.anchored_top_separable] for e in entries]
    # The universes whose top changes first: they are the finding.
    order = sorted(range(len(rows)), key=lambda i: (entries[i].same_top, entries[i].same_order))
    return ("<h3>Does the ranking survive?</h3>" + text
            + _table(["universe", "judge's order", "anchored order", "same top", "same order", "separable"],
                     [rows[i] for i in order]))
