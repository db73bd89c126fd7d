"""The human-anchored analyses of a :class:`multiverse.results.Results`: calibrate, and the curve and ranking after it.

``Results.calibrate`` reads the human labels (a CSV or parquet file, or a
DataFrame with ``system``, ``case_id``, ``compliant`` and, where needed,
``replicate`` or ``transcript_key``) and anchors every universe x system
rate to them (``multiverse.analysis.anchoring``). A labelling sheet names
its sample, and is first checked to be that sample of this run. The anchored curve and the
ranking check reuse that calibration, so one labels file is read and checked
once per results object.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from multiverse.errors import InputError

if TYPE_CHECKING:
    from multiverse.results._analysis import Analysis, CalibrationAnalysis, ResultsView
    from multiverse.results._anchoring_documents import AnchoredCurveDocument, AnchoredRankingDocument

__all__ = ["anchored_curve", "anchored_ranking", "calibrate", "grouped_calibration", "human_key"]


def human_key(human: Any) -> tuple[Any, ...] | None:
    """A cache key for a labels file (its path, size and modification time), or None for a table (not cached).

    A file edited between two calls (more labels filled in) is read again.
    """
    if isinstance(human, (str, os.PathLike)):
        path = Path(human)
        try:
            stat = path.stat()
        except OSError:
            return (str(path), None)
        return (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    return None


def calibrate(results: ResultsView, human: Any, alpha: float, *, check: bool = True,
              source: str | None = None) -> CalibrationAnalysis:
    """PPI++ rates per universe x system, judge accuracy per universe, the notes, and the calibration figure
    (``check``: whether a sheet that names its sample is checked to be that sample of these results; ``source``:
    what messages call the labels, when not the file they were read from)."""
    from multiverse.analysis import calibrate as compute
    from multiverse.analysis import calibration_document, read_labels
    from multiverse.results._analysis import CalibrationAnalysis

    if isinstance(human, pd.DataFrame):
        labels, labels_source = human, "human labels"
    else:
        labels, labels_source = read_labels(human), str(human)
    source = source or labels_source
    notes = _check_sample(results, labels, source) if check else []
    scale = _one_scale(results, source)
    calibration = compute(results.verdicts, labels, results.axes, results.factors, alpha, source=source,
                          scale=scale, scoring=results.scoring_choices() if scale.scored else None)
    calibration = calibration._replace(notes=[*notes, *calibration.notes])
    document = calibration_document(calibration, alpha)

    def draw(*, systems: list[str] | None = None) -> Any:
        from multiverse.plots import plot_calibration

        return plot_calibration(calibration, results.axes, raw=results.rate_table(), primary=results.primary,
                                systems=systems, rates_read=results.rate_direction)

    return CalibrationAnalysis("calibrate", document, calibration.rates, draw, simulated=results.simulated,
                               calibration=calibration)


def grouped_calibration(results: Any, human: Any, alpha: float, by: str) -> Analysis[Any]:
    """``calibrate`` per value of ``by`` (``results._grouped``): each group's rows with the labels of their
    transcripts. The sheet is checked once, as the sample of the whole run it was drawn from."""
    from multiverse.analysis import labels_by_key, read_labels
    from multiverse.results._anchoring_documents import CalibrationDocument
    from multiverse.results._grouped import by_column, grouped

    by = by_column(results, by)
    if isinstance(human, pd.DataFrame):
        labels, source = human, "human labels"
    else:
        labels, source = read_labels(human), str(human)
    notes = _check_sample(results, labels, source)
    # Every row is read once against the whole run: a group sees some of the rows, renumbered from 2, so a
    # refusal there named a row the file does not have there (and "human labels" for the file).
    scale = _one_scale(results, source)
    labels_by_key(results.verdicts, labels, source, [], scale if scale.scored else None)

    def run(part: Any) -> Any:
        return calibrate(part, _labels_of(part.verdicts, labels), alpha, check=False, source=source)

    return grouped(results, by, "calibrate", run, CalibrationDocument, notes=notes)


def _labels_of(verdicts: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """The label rows of transcripts among ``verdicts``: matched on system and case, and on replicate and
    transcript key where both tables have them (a label of another group's transcript is no label here)."""
    keys = [c for c in ("system", "case_id", "replicate", "transcript_key")
            if c in verdicts.columns and c in labels.columns]
    present = set(verdicts[keys].astype(str).itertuples(index=False, name=None))
    mine = [row in present for row in labels[keys].astype(str).itertuples(index=False, name=None)]
    return labels[np.array(mine, dtype=bool)]


def _one_scale(results: ResultsView, source: str) -> Any:
    """The one scale human labels are read on; a run whose universes read verdicts on different scales is refused.

    People label a transcript once, on one scale; an axis over ``judge.scale`` (or from labels to scores) gives
    the universes scales a single column of human labels cannot stand for, and reading it on the base spec's
    scale would anchor some universes on the wrong one.
    """
    scales = results.scales
    own = {s.model_dump_json(): s for s in scales.of.values()} or {scales.base.model_dump_json(): scales.base}
    if len(own) > 1:
        shown = "; ".join(sorted({f"{s.type} {s.min:g}-{s.max:g}" if s.scored else "compliant labels"
                                  for s in own.values()}))
        raise InputError(f"{source}: the run's universes read their verdicts on different scales ({shown}: an axis "
                         "over judge.scale); human labels are on one scale, so calibrate takes a run whose universes "
                         "share one (expected a run, or a subset of its universes, on a single scale)", param="human")
    return next(iter(own.values()))


def _check_sample(results: ResultsView, labels: pd.DataFrame, source: str) -> list[str]:
    """A sheet that names its sample must be that sample of this run (``labelling.check_sheet``): drawn again here."""
    from multiverse.labelling import IDENTITY_COLUMNS, check_sheet, run_transcripts

    folder = results.source if results.source is not None and results.source.is_dir() else None
    # The transcripts are read only to draw the sample again, for a file that names one.
    named = any(c in labels.columns for c in IDENTITY_COLUMNS)
    transcripts = run_transcripts(folder) if folder is not None and named else None
    return check_sheet(labels, results.verdicts, transcripts, factors=results.factors, axes=results.axes,
                       source=source)


def anchored_curve(results: ResultsView, calibration: CalibrationAnalysis,
                   systems: list[str] | None = None) -> Analysis[AnchoredCurveDocument]:
    """The specification curve of the anchored rates, with the judge-raw curve of the same cells to draw beside it.

    The document summarises each system's rates over universes, judge alone
    and anchored: ``{"alpha", "n_universes", "systems": {system: {"judge_rate":
    {min, median, max}, "rate": {min, median, max}, "primary": {judge_rate,
    rate, ci_low, ci_high, human_ci_low, human_ci_high, anchored_wider} or
    None}}, "notes"}``: where ``anchored_wider``, the humans-only interval is
    the narrower one to quote. ``systems`` keeps only those.
    """
    from multiverse.analysis import anchored_curve as compute
    from multiverse.results._analysis import Analysis
    from multiverse.results._anchoring_documents import AnchoredCurveDocument

    frame = compute(calibration.calibration, results.axes, primary=results.primary)
    rates = calibration.frame[calibration.frame["rate"].notna()]
    if systems is not None:
        frame = frame[frame["system"].isin(systems)].reset_index(drop=True)
        rates = rates[rates["system"].isin(systems)]
    summary: dict[str, dict[str, Any]] = {}
    for system, cell in rates.groupby("system", sort=False):
        primary = cell[cell["universe_id"] == results.primary]
        summary[str(system)] = {
            "judge_rate": _spread(cell["judge_rate"]),
            "rate": _spread(cell["rate"]),
            "primary": None if primary.empty else {
                **{k: float(primary[k].iloc[0]) for k in ("judge_rate", "rate", "ci_low", "ci_high", "human_ci_low",
                                                           "human_ci_high")},
                "anchored_wider": bool(primary["anchored_wider"].iloc[0])},
        }
    document = {"alpha": calibration.document.alpha, "n_universes": int(rates["universe_id"].nunique()),
                "systems": summary, "notes": calibration.notes}

    def draw(*, axes: list[str] | None = None, title: str | None = None) -> Any:
        from multiverse.analysis import paired_curves
        from multiverse.plots import plot_curves

        shown = [a for a in results.axes if a in set(axes)] if axes else results.axes
        paired = paired_curves(results.curve_frame(), frame)
        return plot_curves(paired, axes=shown, col_wrap=2, options=results.options,
                           title=title or "judge alone (left) and anchored to people (right), PPI++",
                           rates=results.rate_direction)

    return Analysis("anchored curve", document, frame, draw, simulated=results.simulated,
                    schema=AnchoredCurveDocument)


def anchored_ranking(results: ResultsView, calibration: CalibrationAnalysis) -> Analysis[AnchoredRankingDocument]:
    """Whether each universe's ranking of systems survives anchoring (``analysis.anchored_views.ranking_change``)."""
    from multiverse.analysis import ranking_change
    from multiverse.results._analysis import Analysis
    from multiverse.results._anchoring_documents import AnchoredRankingDocument

    document = {"alpha": calibration.document.alpha, **ranking_change(calibration.calibration, primary=results.primary),
                "notes": calibration.notes}
    typed = AnchoredRankingDocument.model_validate(document)
    frame = pd.DataFrame([u.model_dump() for u in typed.universes],
                         columns=["universe_id", "judge_order", "anchored_order", "same_top", "same_order",
                                  "anchored_top_separable"])
    return Analysis("anchored ranking", document, frame, simulated=results.simulated, model=typed)


def _spread(values: pd.Series) -> dict[str, float]:
    x = values.to_numpy(float)
    return {"min": float(np.min(x)), "median": float(np.median(x)), "max": float(np.max(x))}
