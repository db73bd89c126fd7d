"""Agreement between the options of an axis on the scores they gave the same transcripts.

The ``scores`` section of ``agreement`` when the verdicts carry a ``score``
column (native units, NaN where there is none). Units are paired exactly as
for the labels: one transcript (``transcript_key``) in one context of the
other axes, or system, case and replicate when the table has no transcript
keys or the axis changes the transcripts, and a set of judgments scored by
several scoring universes (an axis over the cut, say) counts once.

The scale says which statistics apply (``agreement_scores``): on an ordinal
scale, weighted kappa over all its points, exact and within-one agreement and
ordinal alpha; on every scale, interval alpha, ICC(2,1) and ICC(3,1) and the
mean difference with a case-clustered interval. Without a declared scale,
scores that are all whole numbers are read as an ordinal scale from the
lowest to the highest score any option gave, every whole number between them
a point (points unused at the ends would change none of the statistics:
weighted kappa's weights all scale alike, and alpha's distances ignore
unused values), other scores as a continuous range; a note says which.

Each ``cut`` turns the scores into labels (score >= cut) compared with Cohen's
kappa, Gwet's AC1 and nominal alpha, as labels are: agreement on raw scores
and at a cut can differ a lot (a quadratic kappa of 0.81 on 1-10 scores can
be 0.67 at a cut of 7), and both are shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import counted_rows
from multiverse.errors import InputError

from ._binary import SMALL, binary_summary
from ._scores import exact_agreement, icc, krippendorff_alpha, mean_difference, scale_points, weighted_kappa
from ._units import Rows, _one_per_judgment, _unit_ids, judgment_key_matrix

__all__ = ["option_codes", "resolve_scale", "score_agreement"]


def resolve_scale(scores: np.ndarray, scale: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """The scale the scores are on, ``{"type", "min", "max", "declared"}``, and a note when it was inferred.

    A declared ordinal scale's scores must be its points: anything else is bad
    input (a reply off the scale is a judge failure upstream, never a score).
    """
    observed = scores[np.isfinite(scores)]
    low, high = (float(observed.min()), float(observed.max())) if len(observed) else (0.0, 1.0)
    kind = str(scale.get("type", "")) if scale else ""
    if kind and kind != "binary":
        try:
            # A spec may leave min and max to their defaults (judge.scale: 0 and 1).
            bottom, top = float(scale.get("min", 0.0)), float(scale.get("max", 1.0))  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise InputError(f"scale: min and max: expected two numbers, got {dict(scale)!r}") from None  # type: ignore[arg-type]
        if not bottom < top:
            raise InputError(f"scale: min and max: expected min below max, got {bottom:g} and {top:g}")
        if kind == "ordinal":
            off = observed[~np.isin(observed, scale_points(bottom, top))]
            if len(off):
                raise InputError(f"verdicts: column 'score': {off[0]:g} is not a point of the ordinal scale "
                                 f"{bottom:g}..{top:g}: expected whole numbers on it")
        return {"type": kind, "min": bottom, "max": top, "declared": True}, []
    if len(observed) and np.all(observed == np.round(observed)):
        return {"type": "ordinal", "min": low, "max": high, "declared": False}, [
            f"scores: no scale declared; the scores are whole numbers, read as an ordinal scale from the lowest "
            f"to the highest score given ({low:g}..{high:g}), every whole number between them a point, used or "
            f"not (points beyond them would change none of the statistics)"]
    return {"type": "continuous", "min": low, "max": high, "declared": False}, [
        f"scores: no scale declared; the scores are not all whole numbers, read as a continuous range "
        f"({low:g}..{high:g}): weighted kappa, exact agreement and ordinal alpha need an ordinal scale"]


def _scored_rows(verdicts: pd.DataFrame, axes: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The counted rows with a score, their pairing columns, and the scores as floats."""
    try:
        score = pd.to_numeric(verdicts["score"], errors="raise").to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):
        raise InputError("verdicts: column 'score': expected numbers (NaN where there is no score)") from None
    rows = np.asarray(counted_rows(verdicts), dtype=bool) & np.isfinite(score)
    columns = [c for c in ("system", "case_id", "replicate", "transcript_key", "judgment_key", *axes)
               if c in verdicts.columns]
    return verdicts.loc[rows, list(dict.fromkeys(columns))].reset_index(drop=True), score[rows]


def _matrix(units: np.ndarray, option: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Units x options matrix of scores (NaN where a unit has no score from an option)."""
    matrix = np.full((int(units.max(initial=-1)) + 1, k), np.nan)
    matrix[units, option] = values
    return matrix


def _pair(a: np.ndarray, b: np.ndarray, case: np.ndarray, points: np.ndarray | None,
          level: float) -> dict[str, Any]:
    both = ~(np.isnan(a) | np.isnan(b))
    nan = float("nan")
    pair_icc = icc(np.column_stack([a, b]))
    return {
        "n": int(both.sum()),
        "kappa_linear": weighted_kappa(a, b, points=points, weights="linear") if points is not None else nan,
        "kappa_quadratic": weighted_kappa(a, b, points=points, weights="quadratic") if points is not None else nan,
        "exact": exact_agreement(a, b) if points is not None else nan,
        "within_one": exact_agreement(a, b, within=1.0) if points is not None else nan,
        "icc2_1": pair_icc["icc2_1"],
        "icc3_1": pair_icc["icc3_1"],
        "mean_difference": mean_difference(a, b, case, level=level),
        "small_sample": bool(0 < both.sum() < SMALL),
    }


def _pair_notes(pair: dict[str, Any], a: Any, b: Any, ordinal: bool) -> list[str]:
    name = f"scores: {a} vs {b}"
    if pair["n"] == 0:
        return [f"{name}: no unit scored by both"]
    notes = []
    if ordinal and np.isnan(pair["kappa_quadratic"]):
        notes.append(f"{name}: weighted kappa undefined (both gave every paired unit the same score)")
    if pair["small_sample"]:
        notes.append(f"{name}: only {pair['n']} paired units (fewer than {SMALL}): the statistics are too "
                     f"imprecise to read")
    return notes


def _units(scored: pd.DataFrame, axes: Sequence[str], axis: str, option: np.ndarray, score: np.ndarray,
           k: int, notes: list[str]) -> tuple[np.ndarray, np.ndarray, str]:
    """The units x options score matrix, each unit's case code, and what units are paired on."""
    others = [a for a in axes if a != axis]
    by_transcript = "transcript_key" in scored.columns and scored["transcript_key"].notna().all()
    units = _unit_ids(scored, others, option, by_transcript)
    matrix = _matrix(units, option, score, k)
    if by_transcript and not ((~np.isnan(matrix)).sum(1) >= 2).any():
        by_transcript = False  # the axis changes the transcripts: pair on system, case and replicate
        units = _unit_ids(scored, others, option, by_transcript)
        matrix = _matrix(units, option, score, k)
    case = np.zeros(len(matrix), dtype=np.int64)
    case[units] = pd.factorize(scored["case_id"], use_na_sentinel=False)[0]
    if "judgment_key" in scored.columns and len(matrix):
        keep, merged, _ = _one_per_judgment(np.nan_to_num(matrix, nan=-np.inf),
                                            judgment_key_matrix(Rows(scored), units, option, matrix.shape))
        if merged:
            matrix, case = matrix[keep], case[keep]
            notes.append(f"scores: {merged:,} units repeat judgments another unit has (contexts that differ only "
                         f"in an axis that does not change judgments): each set of judgments counts once")
    return matrix, case, "transcript" if by_transcript else "system, case and replicate"


def option_codes(column: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """An axis's options in sorted order (as plain values) and each row's code: pairs (a, b) whatever the row order.

    In order of first appearance, a table with its rows reversed compared (b, a)
    and flipped the sign of every bias and mean difference. Options of mixed
    types that do not sort are ordered by their text.
    """
    try:
        codes, uniques = pd.factorize(column, sort=True, use_na_sentinel=False)
    except TypeError:
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        order = np.argsort([str(u) for u in uniques], kind="stable")
        codes = np.argsort(order)[codes]
        uniques = pd.Index(uniques).take(order)
    if isinstance(uniques, pd.CategoricalIndex):
        uniques = pd.Index(uniques.categories.take(uniques.codes))
    return np.asarray(codes), pd.Index(uniques).tolist()


def score_agreement(
    verdicts: pd.DataFrame,
    *,
    axes: Sequence[str],
    axis: str,
    scale: Mapping[str, Any] | None = None,
    cuts: Sequence[float] = (),
    level: float = 0.95,
) -> dict[str, Any] | None:
    """Agreement of the options of ``axis`` on their scores, or None when no counted row has a score.

    ``scale`` is the declared scale (``{"type", "min", "max"}``, as the spec's
    ``judge.scale``), None to infer it; ``cuts`` the thresholds at which the
    scores are also compared as labels (score >= cut). Returns (undefined
    statistics NaN)::

        {"scale": {"type", "min", "max", "declared"}, "options": [...], "paired_on": str,
         "n_units": int, "level": float,
         "krippendorff_alpha_ordinal": float, "krippendorff_alpha_interval": float,
         "icc": {"icc2_1", "icc3_1", "n"},                # over units every option scored
         "pairs": [{"a", "b", "n", "kappa_linear", "kappa_quadratic", "exact", "within_one",
                    "icc2_1", "icc3_1", "small_sample",
                    "mean_difference": {"mean", "se", "ci_low", "ci_high", "n", "n_cases"}}],  # a - b
         "cuts": [{"cut": float, "krippendorff_alpha": float, "pairs": [binary pair rows]}],
         "notes": [str, ...]}
    """
    if "score" not in verdicts.columns:
        return None
    scored, score = _scored_rows(verdicts, axes)
    if not len(score):
        return None
    notes: list[str] = []
    resolved, inferred = resolve_scale(score, scale)
    notes.extend(inferred)
    option, options = option_codes(scored[axis])  # sorted, as the labels' pairs are: whatever the row order
    matrix, case, paired_on = _units(scored, axes, axis, option, score, len(options), notes)
    points = scale_points(resolved["min"], resolved["max"]) if resolved["type"] == "ordinal" else None
    pairs = []
    for i in range(len(options)):
        for j in range(i + 1, len(options)):
            pair = {"a": options[i], "b": options[j], **_pair(matrix[:, i], matrix[:, j], case, points, level)}
            notes.extend(_pair_notes(pair, options[i], options[j], points is not None))
            pairs.append(pair)
    n_units = int(((~np.isnan(matrix)).sum(1) >= 2).sum())
    if 0 < n_units < SMALL:
        notes.append(f"scores: only {n_units} units are scored by two or more options (fewer than {SMALL}): "
                     f"alpha and the ICC are too imprecise to read")
    return {
        "scale": resolved,
        "options": options,
        "paired_on": paired_on,
        "n_units": n_units,
        "level": level,
        "krippendorff_alpha_ordinal": (krippendorff_alpha(matrix, "ordinal", points=points)
                                       if points is not None else float("nan")),
        "krippendorff_alpha_interval": krippendorff_alpha(matrix, "interval"),
        "icc": icc(matrix),
        "pairs": pairs,
        "cuts": _at_cuts(matrix, options, cuts, notes),
        "notes": notes,
    }


def _at_cuts(matrix: np.ndarray, options: list[Any], cuts: Sequence[float], notes: list[str]) -> list[dict[str, Any]]:
    """Binary agreement on the labels score >= cut, one entry per distinct cut in increasing order."""
    out = []
    for cut in sorted({float(c) for c in cuts if np.isfinite(c)}):
        labels = np.where(np.isnan(matrix), -1, matrix >= cut).astype(np.int8)
        summary = binary_summary(labels, options, notes, f"scores at {cut:g} or more: ", [])
        out.append({"cut": cut, **summary})
    return out
