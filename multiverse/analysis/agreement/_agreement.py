"""Agreement between the options of one axis on the same transcripts.

An axis such as ``judge`` or ``evidence`` changes how transcripts are labelled,
not which transcripts exist. Universes that differ only in that axis therefore
label the same transcripts, and their labels can be compared like raters:

- a *unit* is one transcript inside one *context* (one combination of the
  other axes' options), counted once per set of judgments: contexts that
  differ only in an axis that leaves the judgments alone (the scoring rule,
  say) repeat the same judgments, and counting them once per scoring
  universe inflated n (the demo's 772 judged transcript pairs read as 1,515
  units) and hid small samples. Labels are paired on the same ``transcript_key``; a
  table without transcript keys (an imported one), or an axis that changes the
  transcripts themselves, pairs on the same system, case and replicate instead
  (``paired_on`` says which). Rows repeated for one unit and option are paired
  in table order;
- per pair of options (a, b): percent agreement, Cohen's kappa (statsmodels),
  Gwet's AC1, bias = rate(a) - rate(b) on the paired units, and the 2 x 2
  confusion counts;
- over all options: Krippendorff's alpha (nominal, krippendorff package);
- per criterion of the rubric (from the criteria table, joined on
  ``judgment_key``, first judge sample): the same for ``applicable`` and, among
  units where both options found the criterion applicable, for ``compliant``.
  A judgment shared by several contexts (e.g. contexts that differ only in the
  scoring rule) counts once here.

Cohen's kappa is undefined (NaN, with a note) when both options give every
paired unit the same label: chance agreement is then 1. Gwet's AC1 stays
defined because its chance agreement never exceeds 1/2 for two labels.

Small samples. A pair compared on fewer than 30 paired units is marked
``small_sample`` and noted: kappa and AC1 are then too imprecise to read (on
one unit they are 0 or -1 by construction). A pair whose units all fall in one
cell of the 2 x 2 table is marked ``degenerate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import COUNTED_STATUS, SCORE_CRITERIA
from multiverse.errors import InputError

from .._kernel import CONTRIBUTION, dropped_notes, included_rows, included_verdicts, require_verdict_columns
from .._kernel import radix_codes as _radix
from ._binary import SMALL, binary_summary, cohen_kappa, gwet_ac1
from ._context import context_columns, context_confounds
from ._orders import is_order_axis, order_consistency, verdict_agreement
from ._scored import option_codes as sorted_options
from ._scored import score_agreement
from ._units import (
    Rows,
    _factorize,
    _one_per_judgment,
    _paired,
    _spread,
    _unit_ids,
    judgment_codes,
    judgment_key_matrix,
    key_positions,
)

__all__ = ["agreement", "cohen_kappa", "gwet_ac1", "pair_matrix"]

_MEASURES = ("percent", "cohen_kappa", "gwet_ac1", "bias")
# Score measures: agreement-like ones are 1 on the diagonal, differences 0 and antisymmetric.
_SCORE_MEASURES = ("kappa_linear", "kappa_quadratic", "exact", "within_one", "icc2_1", "icc3_1")
_DIFFERENCES = ("bias", "mean_difference")


def pair_matrix(
    pairs: pd.DataFrame, *, value: str, a: str = "a", b: str = "b", options: Sequence[Any] | None = None
) -> pd.DataFrame:
    """Options x options matrix of one pairwise measure from tidy pair rows.

    The matrix is symmetric, except ``bias`` (rate of the row option minus rate
    of the column option) and ``mean_difference`` (mean score of the row option
    minus the column option's), which are antisymmetric. The diagonal is 1 for
    the agreement measures (percent, kappas, AC1, exact and within-one
    agreement, the ICCs), 0 for the differences, NaN otherwise.
    """
    if options is None:
        options = list(dict.fromkeys([*pairs[a], *pairs[b]]))
    index = {option: i for i, option in enumerate(options)}
    values = np.full((len(options), len(options)), np.nan)
    sign = -1.0 if value in _DIFFERENCES else 1.0
    for first, second, measure in zip(pairs[a], pairs[b], pairs[value]):
        values[index[first], index[second]] = measure
        values[index[second], index[first]] = sign * measure
    agreeing = value in _MEASURES or value in _SCORE_MEASURES
    np.fill_diagonal(values, 0.0 if value in _DIFFERENCES else 1.0 if agreeing else np.nan)
    matrix = pd.DataFrame(values, index=list(options), columns=list(options))
    return matrix


# --------------------------------------------------------------------------- agreement


def agreement(
    verdicts: pd.DataFrame,
    *,
    axes: Sequence[str],
    axis: str = "judge",
    criteria: pd.DataFrame | None = None,
    factors: Sequence[str] = (),
    scale: Mapping[str, Any] | None = None,
    cuts: Sequence[float] = (),
    orders: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Pairwise agreement between the options of ``axis`` on identical transcripts.

    Takes a verdicts table (rows with status other than ok are left out of the
    transcript-level comparison), the axis names, the axis to compare and,
    optionally, the criteria table for per-criterion agreement and the design
    ``factors`` (columns that are not axes) checked for a confound: options
    whose rows for one unit differ in such a column (``agreement_context``).
    When counted rows carry a ``score``, the result also has a ``scores``
    section (``agreement_scored.score_agreement``: weighted kappa, alpha, the
    ICC, exact agreement and the mean difference on the ``scale``, and kappa
    and AC1 on the labels score >= cut for each of ``cuts``); without scores
    the document is the same as before scores existed.

    Returns a JSON-ready dict (undefined statistics are NaN, explained in ``notes``)::

        {"axis": str, "options": [option, ...],
         "paired_on": "transcript" | "system, case and replicate",
         "n_units": int,                                   # units labelled by >= 2 options
         "pairs": [{"a": option, "b": option, "n": int, "percent": float,
                    "cohen_kappa": float, "gwet_ac1": float,
                    "bias": float,                         # rate(a) - rate(b)
                    "small_sample": bool,                  # fewer than SMALL (30) paired units
                    "degenerate": bool,                    # every unit in one cell of the 2 x 2 table
                    "confusion": {"both_compliant", "a_only_compliant",
                                  "b_only_compliant", "both_noncompliant"}}],
         "krippendorff_alpha": float,
         "confounded": [{"column": str, "share": float, "n_units": int}],  # factors differing in units
         "per_criterion": [{"criterion": str, "permissible": bool|None,
                            "label": "applicable" | "compliant",
                            "krippendorff_alpha": float, "pairs": [same as above]}],
         "scores": {...},                                  # only with scores: see score_agreement
         "verdicts": {...},   # a pairwise scale: win / tie / loss agreement (agreement_orders.verdict_agreement)
         "orders": [{...}],   # options ab and ba (or ``orders``, option -> ab/ba, names them): each judge's
                              # consistency across orders (order_consistency)
         "notes": [str, ...]}

    Per-criterion pairs compare the criterion's label; "compliant" in their
    confusion counts then means the label is true (applicable, or compliant).
    """
    # The score is what is compared, never a context: a table read without a manifest may list it
    # among its axes, and units split by score would pair only equal scores.
    axes = [a for a in axes if a != "score"]
    if axis not in axes:
        raise InputError(f"verdicts: column {axis!r}: expected one of the axes {axes}")
    others = [a for a in axes if a != axis]
    given = verdicts
    verdicts, scores = _scores(verdicts, axes, axis, scale, cuts)
    context = context_columns(verdicts, factors, axes)
    rows, compliant = _counted_rows(verdicts, axes)
    option_codes, options = sorted_options(rows[axis])  # sorted: the same pairs whatever the row order
    # A row-length array that lives through the whole comparison: a byte a row, not pandas' eight.
    option_codes = option_codes.astype(np.int8 if len(options) < 2**7 else np.int32)
    notes: list[str] = _options_notes(axis, options, scores)

    by_transcript = "transcript_key" in rows.columns and rows.complete("transcript_key")
    units = _unit_ids(rows, others, option_codes, by_transcript)
    labels = _spread(units, option_codes, compliant, len(options))
    # A table of scores only has no labels to pair: its labels' part stays empty, with no fallback.
    if by_transcript and (options or scores is None) and not _paired(labels):
        # The axis changes the transcripts themselves (e.g. the conversation
        # setting): compare the labels of the same system, case and replicate.
        by_transcript = False
        notes.append(f"axis {axis!r} changes the transcripts: paired on system, case and replicate")
        units = _unit_ids(rows, others, option_codes, by_transcript)
        labels = _spread(units, option_codes, compliant, len(options))
    # Per unit: two options or more (a unit has one row per option it has), and kept below.
    paired = np.count_nonzero(labels >= 0, axis=1) >= 2
    if "judgment_key" in rows.columns and len(labels):
        keep, merged, differ = _one_per_judgment(labels, judgment_key_matrix(rows, units, option_codes, labels.shape))
        if merged:
            labels = labels[keep]
            paired &= keep
            notes.append(
                f"{merged:,} units repeat judgments another unit has (contexts that differ only in an axis "
                f"that does not change judgments, such as the scoring rule): each set of judgments counts once"
                + (f"; in {differ:,} of them the other axes' scoring gave other labels, and the first "
                   "context's labels are used" if differ else ""))

    result: dict[str, Any] = {
        "axis": axis,
        "options": options,
        "paired_on": "transcript" if by_transcript else "system, case and replicate",
        "n_units": int(paired.sum()),
    }
    result.update(binary_summary(labels, options, notes, "", []))
    result["confounded"], confounds = context_confounds(rows, context, units, paired, axis)
    notes.extend(confounds)
    if 0 < result["n_units"] < SMALL:
        notes.append(f"only {result['n_units']} units are labelled by two or more options "
                     f"(fewer than {SMALL}): Krippendorff's alpha is too imprecise to read")
    small: list[str] = []
    result["per_criterion"] = (
        _per_criterion(verdicts, criteria, axes, others, axis, options, by_transcript, notes, small)
        if criteria is not None else []
    )
    if criteria is None:
        # Imported results carry verdicts only: say why the section is empty instead of leaving it so.
        notes.append("per-criterion agreement needs the judges' per-criterion labels (the criteria table), "
                     "which these results do not have: only the verdict-level agreement is reported")
    if small:
        notes.append(f"per criterion: {len(small)} comparisons rest on fewer than {SMALL} paired units "
                     "(marked small_sample): read their kappa and AC1 as imprecise")
    if scores is not None:
        result["scores"] = scores
        if scores["scale"]["type"] == "pairwise":
            # A preference is a verdict too (win, tie, loss), and two orders of one judge are a judge asked twice.
            pairwise = {**scores["scale"], "reference": (scale or {}).get("reference")}
            result["verdicts"] = verdict_agreement(given, axes=axes, axis=axis, scale=pairwise)
            if is_order_axis(result["verdicts"]["options"], orders):
                result["orders"] = order_consistency(given, axes=axes, axis=axis, scale=pairwise, orders=orders)
    result["notes"] = dropped_notes(verdicts) + notes
    return result


def _counted_rows(verdicts: pd.DataFrame, axes: list[str]) -> tuple[Rows, np.ndarray]:
    """The rows that count (as ``included_verdicts`` keeps them) and their labels as int8.

    Only the columns a label needs are copied at those rows; the rest are read one at a time,
    as codes, by the units' helpers.
    """
    require_verdict_columns(verdicts, axes)
    narrow = [c for c in ("universe_id", "status", "system", "case_id", "compliant", CONTRIBUTION) if c in verdicts.columns]
    compliant = included_verdicts(verdicts[narrow], axes=[], keys=())["compliant"].to_numpy().astype(np.int8)
    return Rows(verdicts, included_rows(verdicts)), compliant


def _options_notes(axis: str, options: list[Any], scores: dict[str, Any] | None) -> list[str]:
    if len(options) >= 2:
        return []
    if scores is not None and not options:
        return [f"the options of {axis!r} gave scores, not compliance labels: see the agreement on scores "
                f"(and on the labels at each cut)"]
    return [f"axis {axis!r} has fewer than two options with included verdicts"]


def _scores(verdicts: pd.DataFrame, axes: list[str], axis: str, scale: Mapping[str, Any] | None,
            cuts: Sequence[float]) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """The scores section (None without scores) and the verdicts for the labels' part.

    A table of scores only may have no compliance labels at all: its labels' part is then empty.
    """
    scores = score_agreement(verdicts, axes=axes, axis=axis, scale=scale, cuts=cuts)
    if scores is not None and "compliant" not in verdicts.columns:
        verdicts = verdicts.assign(compliant=pd.array([pd.NA] * len(verdicts), dtype="boolean"))
    return verdicts, scores


def _judged_rows(verdicts: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """Verdict rows that carry a judgment: status ok or excluded (no applicable criterion)."""
    columns = [c for c in ("system", "case_id", "replicate", "transcript_key", "judgment_key", *axes)
               if c in verdicts.columns]
    rows = verdicts["judgment_key"].notna().to_numpy().copy()
    if "status" in verdicts.columns:
        # Excluded verdicts were judged too (the rule found no criterion applicable): they are agreement data.
        rows &= verdicts["status"].isin([COUNTED_STATUS, "excluded"]).to_numpy(dtype=bool, na_value=False)
    return verdicts.loc[rows, list(dict.fromkeys(columns))].reset_index(drop=True)


def _criterion_labels(criteria: pd.DataFrame) -> tuple[tuple[pd.Index, int | None], list[Any], np.ndarray, np.ndarray, list[Any]]:
    """Judgment x criterion label arrays (1 true, 0 false, -1 missing) from the first judge sample.

    Returns the judgment keys (row index; with their width when read as numbers,
    ``agreement_units.judgment_codes``), the criterion names, the applicable
    and compliant arrays, and each criterion's permissible flag (or None).
    The criteria table can hold tens of millions of rows, so no column is
    copied wider than it needs to be.
    """
    for column in ("judgment_key", "criterion", "applicable", "compliant"):
        if column not in criteria.columns:
            raise InputError(f"criteria: column {column!r}: expected a column of that name")
    judgment, judgments, width = judgment_codes(criteria["judgment_key"])
    criterion, names = _factorize(criteria["criterion"])
    applicable_flags = criteria["applicable"].to_numpy(dtype=np.int8, na_value=0)
    compliant_flags = criteria["compliant"].to_numpy(dtype=np.int8, na_value=-1)
    keep = (judgment >= 0) & (criterion >= 0)
    if "sample" in criteria.columns:
        sample = criteria["sample"].to_numpy(dtype=np.int64, na_value=0)
        if sample.min(initial=0) != sample.max(initial=0):
            lowest = np.full(len(judgments), sample.max() + 1)
            np.minimum.at(lowest, judgment[keep], sample[keep])
            keep &= sample == lowest[np.maximum(judgment, 0)]
    if not keep.all():
        judgment, criterion = judgment[keep], criterion[keep]
        applicable_flags, compliant_flags = applicable_flags[keep], compliant_flags[keep]
    applicable = np.full((len(judgments), len(names)), -1, dtype=np.int8)
    compliant = applicable.copy()
    applicable[judgment, criterion] = applicable_flags != 0
    compliant[judgment, criterion] = compliant_flags
    permissible: list[Any] = [None] * len(names)
    if "permissible" in criteria.columns:
        # permissible belongs to the criterion, so any one row of each criterion tells it.
        some_row = np.full(len(names), -1)
        some_row[criterion] = np.flatnonzero(keep)
        values = criteria["permissible"].to_numpy()
        permissible = [None if r < 0 or pd.isna(values[r]) else bool(values[r]) for r in some_row]
    return (judgments, width), pd.Index(names).tolist(), applicable, compliant, permissible


def _per_criterion(
    verdicts: pd.DataFrame, criteria: pd.DataFrame, axes: list[str], others: list[str],
    axis: str, options: list[Any], by_transcript: bool, notes: list[str], small: list[str],
) -> list[dict[str, Any]]:
    # A scored judge call's row holds one score, not a criterion's labels (agreement on scores has its own section).
    scored = criteria["criterion"].isin(list(SCORE_CRITERIA.values())).to_numpy(dtype=bool, na_value=False)
    if scored.any():
        criteria = criteria[~scored]
    judgments, names, applicable, compliant, permissible = _criterion_labels(criteria)
    if "judgment_key" not in verdicts.columns:
        notes.append("per-criterion agreement needs a judgment_key column in the verdicts")
        return []
    judged = _judged_rows(verdicts, axes)
    option = pd.Index(options).get_indexer(judged[axis])
    judged, option = judged[option >= 0], option[option >= 0]
    units = _unit_ids(judged, others, option, by_transcript)
    keys = _spread(units, option, key_positions(*judgments, judged["judgment_key"]), len(options))
    # A judgment shared by several contexts (e.g. ones that differ only in the scoring rule) counts once.
    keys = keys[(keys >= 0).sum(1) >= 2]
    if not len(keys):  # no judgment with labels is shared (scored judgments carry a score, not labels)
        return []
    lowest = np.where(keys >= 0, keys, np.iinfo(np.int64).max).min(1, initial=np.iinfo(np.int64).max)
    if len(keys) and (lowest == keys.max(1)).all():  # e.g. a scoring axis: one judgment per unit
        notes.append(f"the options of {axis!r} share their judgments: per-criterion labels cannot differ")
        return []
    _, distinct = np.unique(_radix(keys.T + 1), return_index=True)
    keys = keys[distinct]

    out = []
    for c, name in enumerate(names):
        for label, table in (("applicable", applicable), ("compliant", compliant)):
            values = np.where(keys >= 0, table[np.maximum(keys, 0), c], -1).astype(np.int8)
            entry = {"criterion": name, "permissible": permissible[c], "label": label}
            entry.update(binary_summary(values, options, notes, f"{name} ({label}): ", small))
            out.append(entry)
    return out
