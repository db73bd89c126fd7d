"""The commands that anchor rates to people: label (draw the sample to label) and calibrate (use the labels).

``label`` calls ``multiverse.labelling.label_run``; ``calibrate`` asks the
:class:`~multiverse.results._results.Results` for ``calibrate(human, alpha=...)`` and
prints its document (the text from its typed model, ``Analysis.document``).
``curve``, ``ranking`` and ``report`` take the same ``--human FILE``
(``_analyses``); ``power --human N`` is in ``_audit``.
"""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any

from ._output import interval, number, print_json, print_table, save_figure, say, say_rates_note

if TYPE_CHECKING:
    from ..results import AnchoredCurveDocument, AnchoredRankingDocument, CalibrationDocument, Results

__all__ = ["cmd_calibrate", "cmd_label", "print_anchored_curve", "print_anchored_ranking", "universe_labels"]


def cmd_label(args: Namespace) -> int:
    from .. import label

    csv_path, html_path, notes = label(args.source, args.n, args.out, seed=args.seed, force=args.force,
                                       blind_systems=args.blind_systems, rate=args.rate)
    rows = _count_rows(csv_path)
    say(f"sheet: {csv_path} ({rows} transcripts to label)")
    say(f"page:  {html_path} (open it in a browser, label, then export the filled CSV)")
    for note in notes:
        say(f"note: {note}")
    return 0


def _count_rows(path: Any) -> int:
    import pandas as pd

    return len(pd.read_csv(path, dtype=str, keep_default_na=False))


def cmd_calibrate(args: Namespace) -> int:
    from .. import load_run

    results: Results = load_run(args.source)  # annotated: the facade's lazy load_run reads as untyped
    if args.by:
        return _print_grouped_judges(results, args)
    analysis = results.calibrate(args.human, alpha=args.alpha)
    if args.figure:
        # The figure's judge-alone intervals are the rates table's, recomputed from the verdicts.
        say_rates_note(results)
        save_figure(analysis.figure(), args.figure)
    if args.json:
        print_json(analysis.to_dict())
        return 0
    document = analysis.document
    level = f"{1 - document.alpha:.0%}"
    counted = document.labelled
    say(f"{counted.transcripts} labelled transcripts of the run"
        + (f" ({counted.per_cell} per system in each of {counted.rollout_configurations} rollout configurations)"
           if counted.per_cell is not None and counted.rollout_configurations > 1 else ""))
    labels = universe_labels(results)
    if any(r.mean is not None for r in document.rates):
        _print_means(document, labels, level)
    say(f"rates anchored to {args.human} (PPI++, {level} intervals; a mean score rescaled to 0-1):")
    rows: list[list[Any]] = [["universe", "system", "n", "n_human", "judge", "anchored", f"{level} interval",
                         "humans only", f"{level} interval", "anchored wider"]]
    for r in document.rates:
        rows.append([labels.get(r.universe_id, r.universe_id), r.system, r.n, r.n_human,
                     number(r.judge_rate), number(r.rate), interval([r.ci_low, r.ci_high]),
                     number(r.human_rate), interval([r.human_ci_low, r.human_ci_high]),
                     "yes" if r.anchored_wider else ""])
    print_table(rows)
    say("judges against the human labels (pooled over systems; --by system: per system):")
    scored = any(j.mean_difference is not None for j in document.judges)
    rows = [["universe", "n_human", "accuracy", "sensitivity", f"{level} interval", "specificity", f"{level} interval",
             "kappa"] + (["judge - people (mean score)", "correlation"] if scored else [])]
    for j in document.judges:
        rows.append([labels.get(j.universe_id, j.universe_id), j.n_human, number(j.accuracy), number(j.sensitivity),
                     interval(j.sensitivity_ci), number(j.specificity), interval(j.specificity_ci), number(j.kappa)]
                    + ([number(j.mean_difference), number(j.correlation)] if scored else []))
    print_table(rows)
    for note in document.notes:
        say(f"note: {note}")
    if args.figure:
        say(f"figure: {args.figure}")
    return 0


def _print_grouped_judges(results: Results, args: Namespace) -> int:
    """``calibrate --by``: each group's judges against people in one table, the group its first column."""
    if args.figure:
        from multiverse.errors import InputError

        raise InputError("--figure: expected calibrate without --by", param="by")
    analysis = results.calibrate(args.human, alpha=args.alpha, by=args.by)
    if args.json:
        print_json(analysis.to_dict())
        return 0
    grouped = analysis.document
    level = f"{1 - args.alpha:.0%}"
    labels = universe_labels(results)
    say(f"judges against the human labels, per {grouped.by} ({level} Wilson intervals):")
    rows: list[list[Any]] = [[grouped.by, "universe", "n_human", "accuracy", f"{level} interval", "sensitivity",
                         "specificity", "kappa"]]
    for group in grouped.groups:
        for j in group.document.judges:
            rows.append([group.group, labels.get(j.universe_id, j.universe_id), j.n_human, number(j.accuracy),
                         interval(j.accuracy_ci), number(j.sensitivity), number(j.specificity), number(j.kappa)])
    print_table(rows)
    for note in grouped.notes:
        say(f"note: {note}")
    return 0


def _print_means(document: CalibrationDocument, labels: dict[str, str], level: str) -> None:
    """A scored run's universes of a mean, in the scale's units: judge alone, anchored, humans only."""
    say(f"mean scores anchored to people, in the scale's units (PPI++, {level} intervals):")
    rows: list[list[Any]] = [["universe", "system", "n_human", "judge", "anchored", f"{level} interval", "humans only",
                         f"{level} interval"]]
    for r in document.rates:
        if r.mean is not None:
            rows.append([labels.get(r.universe_id, r.universe_id), r.system, r.n_human, number(r.judge_mean),
                         number(r.mean), interval([r.mean_ci_low, r.mean_ci_high]), number(r.human_mean),
                         interval([r.human_mean_ci_low, r.human_mean_ci_high])])
    print_table(rows)


def universe_labels(results: Results) -> dict[str, str]:
    """Each universe's label by its id, ``* `` before the primary's: how the command line's tables name one."""
    universes = results.universes
    star = {results.primary: "* "} if results.primary else {}
    return {u: star.get(u, "") + str(label) for u, label in zip(universes["universe_id"], universes["label"])}


def print_anchored_curve(document: AnchoredCurveDocument) -> None:
    """The lines ``curve --human`` adds: each system's rates over universes, judge alone and anchored."""
    say(f"anchored to people (PPI++, {1 - document.alpha:.0%} intervals), {document.n_universes} universes:")
    for system, s in document.systems.items():
        judge, anchored, where = s.judge_rate, s.rate, s.primary
        primary = (f"; primary {where.judge_rate:.3f} -> {where.rate:.3f} "
                   f"{interval([where.ci_low, where.ci_high])}") if where else ""
        if where and where.anchored_wider:
            primary += (f" (the humans-only interval {interval([where.human_ci_low, where.human_ci_high])} "
                        "is narrower: quote it)")
        say(f"  {system}: judge {judge.min:.3f} .. {judge.median:.3f} .. {judge.max:.3f}, anchored "
              f"{anchored.min:.3f} .. {anchored.median:.3f} .. {anchored.max:.3f} (min .. median .. max){primary}")


def print_anchored_ranking(document: AnchoredRankingDocument) -> None:
    """The lines ``ranking --human`` adds: whether each universe's ranking survives anchoring."""
    entries = document.universes
    if not entries:
        say("anchored to people: no universe has two systems with an anchored rate; nothing to rank")
        return
    same_top = sum(e.same_top for e in entries)
    same_order = sum(e.same_order for e in entries)
    separable = sum(e.anchored_top_separable for e in entries)
    say(f"anchored to people: the top system survives in {same_top} of {len(entries)} universes, the whole order in "
          f"{same_order}; the anchored top is separable from the runner-up in {separable}")
    primary = document.primary
    if primary is not None:
        say(f"  primary {primary.universe_id}: judge order {', '.join(primary.judge_order)}; anchored order "
              f"{', '.join(primary.anchored_order)}")
    for e in entries:
        # The primary is its own entry of the universes (one per universe): it is said above, not as a flip here.
        if not e.same_top and (primary is None or e.universe_id != primary.universe_id):
            say(f"  {e.universe_id}: top {e.judge_order[0]} by the judge, {e.anchored_order[0]} anchored")
