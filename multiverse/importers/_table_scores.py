"""A table of scores: reading them on a declared scale, and the scoring options over the same judgments.

A scored table names a score column and its scale ``(low, high)`` instead of
a label column. The scale is

- ``pairwise`` when a reference system is named: each score is the row's
  system's preference over the reference, ``high`` a win, ``low`` a loss, the
  midpoint a tie;
- ``ordinal`` when both ends and every score are whole numbers (a 1-10 grade);
- ``continuous`` otherwise (a probability, a weighted preference).

Without cuts a universe's estimate is the mean score (``win_rate`` for a
pairwise scale, ties one half); each cut K adds an option "at least K" on the
axis ``scoring``: one universe per option over the same judgments (the
judgment keys do not change), so no score is read twice and the cut becomes a
measurement choice like any other. A score off the scale, or text where a
number belongs, is refused with one line naming the file and the column; an
empty cell is a missing score (the row is excluded, as a missing label is).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from multiverse.core import ScaleType, universe_id
from multiverse.errors import InputError
from multiverse.importers._table_orders import COMBINE_RULES
from multiverse.tables import ScaleRecord

__all__ = ["SCORING_AXIS", "check_score_arguments", "check_value_options", "expand", "read_scores", "scored_primary", "scoring_options",
           "tie_warnings"]

#: The axis an import's estimators and cuts make.
SCORING_AXIS = "scoring"


def check_score_arguments(path: Path, label: str | None, score: str | None, scale: tuple[float, float] | None,
                          cuts: Sequence[float], reference: str | None) -> None:
    """Refuse a label and a score together (or neither), a score without its scale, cuts or a reference on labels."""
    if (label is None) == (score is None):
        raise InputError(f"{path}: expected a `label` column or a `score` column (with its `scale`), one of them",
                         param="label")
    if score is not None and scale is None:
        raise InputError(f"{path}: {score}: a score column needs its `scale` (LOW:HIGH)", param="scale")
    if score is None and (cuts or reference is not None):
        raise InputError(f"{path}: {label}: `cut` and `reference` read scores; expected a `score` column",
                         param="cut" if cuts else "reference")


def check_value_options(path: Path, *, label: str | None, score: str | None, verdict: str | None,
                        scale: tuple[float, float] | None, reference: str | None, positive: str | None,
                        negative: Sequence[str] | None, no_grade: Sequence[str], unparsed: Sequence[str],
                        combine: Sequence[str]) -> None:
    """Refuse an option that reshapes values but cannot apply to the kind of value column named (issue 45).

    Labels, scores, pairwise scores and three-way verdicts each read some of ``positive``/``negative``,
    ``scale``, ``unparsed``, ``combine``: an option the column's kind does not read would be silently
    ignored, so it is refused in one line naming it and the column. (Naming two value columns, or none,
    is :func:`check_score_arguments`'s refusal.)
    """
    if sum(column is not None for column in (label, score, verdict)) != 1:
        return
    column = str(label if label is not None else score if score is not None else verdict)
    kind = "labels" if label is not None else "pairwise scores" if verdict or reference is not None else "scores"
    where = f"{path}: {column}:"
    _check_label_options(where, kind, label, verdict, scale, positive, negative)
    both = {str(v).strip() for v in no_grade} & {str(v).strip() for v in [positive, *(negative or [])] if v is not None}
    if both:
        # Read first, the no-grade value would leave the label it also names without a row, silently.
        raise InputError(f"{where} {sorted(both)[0]!r} is named both as a label value and by `no_grade`; expected "
                         "each value named once", param="no_grade")
    reads = "labels" if label is not None else "scores"
    for rule in combine:
        if COMBINE_RULES.get(rule) not in (None, reads):
            fits = ", ".join(r for r, k in COMBINE_RULES.items() if k == reads)
            raise InputError(f"{where} `combine` {rule!r} does not combine {kind}; expected one of {fits}",
                             param="combine")
    counted = [policy for policy in unparsed if policy != "exclude"]
    if counted and not no_grade:
        raise InputError(f"{where} `unparsed` {counted[0]} counts the values `no_grade` names, and none is named; "
                         "expected `no_grade` VALUE too", param="unparsed")
    if "tie" in unparsed and kind != "pairwise scores":
        raise InputError(f"{where} `unparsed` tie counts a reply as a tie, which {kind} have not (only pairwise "
                         "scores); expected exclude or against", param="unparsed")


def _check_label_options(where: str, kind: str, label: str | None, verdict: str | None,
                         scale: tuple[float, float] | None, positive: str | None,
                         negative: Sequence[str] | None) -> None:
    """Refuse label values named for scores, and a scale given for labels or other than a verdict's 0:1."""
    if label is None and (positive is not None or negative):
        param = "positive" if positive is not None else "negative"
        raise InputError(f"{where} `{param}` names a label value, and a {kind} column has none; expected it with a "
                         "`label` column", param=param)
    if label is not None and scale is not None:
        raise InputError(f"{where} a label column has no scale; expected scale LOW:HIGH with a score column")
    if verdict is not None and scale is not None and tuple(map(float, scale)) != (0.0, 1.0):
        raise InputError(f"{where} three-way verdicts are read on the scale 0:1; expected no other scale")


def scored_primary(primary: dict[str, str] | None, scale: ScaleRecord,
                   cuts: Sequence[float]) -> dict[str, str] | None:
    """A primary universe named without a scoring option takes the mean's (the first option)."""
    if primary and cuts and SCORING_AXIS not in primary:
        return {**primary, SCORING_AXIS: scoring_options(scale, cuts)[0][0]}
    return primary


def read_scores(path: Path, column: pd.Series, name: str, scale: tuple[float, float], reference: str | None,
                systems: np.ndarray) -> tuple[np.ndarray, np.ndarray, ScaleRecord]:
    """(scores as float64 with NaN where missing, missing mask, the scale) of a score column; see the module."""
    low, high = (float(scale[0]), float(scale[1]))
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise InputError(f"scale: expected LOW:HIGH with LOW below HIGH, got {low:g}:{high:g}", param="scale")
    if reference is not None and reference not in set(systems):
        known = ", ".join(sorted(map(str, set(systems)))[:8])
        raise InputError(f"{path}: reference: {reference!r} is not a system of the table (systems: {known})",
                         param="reference")
    text = column.astype("string").str.strip()
    missing = (text.isna() | (text == "")).to_numpy(dtype=bool)
    values = pd.to_numeric(text.where(~pd.Series(missing, index=text.index)), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan)
    unreadable = np.isnan(values) & ~missing
    if unreadable.any():
        row = int(np.flatnonzero(unreadable)[0])
        raise InputError(f"{path}: {name}: expected a number in data row {row + 1}, got {text.iloc[row]!r}")
    off = ~missing & (~np.isfinite(values) | (values < low) | (values > high))
    if off.any():
        row = int(np.flatnonzero(off)[0])
        raise InputError(f"{path}: {name}: expected a score from {low:g} to {high:g} (the scale), got "
                         f"{values[row]:g} in data row {row + 1}")
    present = values[~missing]
    if reference is not None:
        kind = "pairwise"
    elif low.is_integer() and high.is_integer() and np.all(present == np.round(present)):
        kind = "ordinal"
    else:
        kind = "continuous"
    return values, missing, ScaleRecord(type=cast(ScaleType, kind), min=low, max=high, reference=reference)


def scoring_options(scale: ScaleRecord, cuts: Sequence[float]) -> list[tuple[str, dict[str, object]]]:
    """(option name, scoring choice) per universe over the same judgments: the mean, then "at least K" per cut."""
    mean: tuple[str, dict[str, object]] = ("win rate", {"estimator": "win_rate", "ties": "half"}) \
        if scale.type == "pairwise" else ("mean", {"estimator": "mean"})
    options = [mean]
    for cut in cuts:
        cut = float(cut)
        if not scale.min <= cut <= scale.max:
            raise InputError(f"cut: expected a score from {scale.min:g} to {scale.max:g}, got {cut:g}", param="cut")
        options.append((f"at least {cut:g}", {"estimator": "at_least", "cut": cut}))
    names = [name for name, _ in options]
    if len(set(names)) < len(names):
        raise InputError("cut: a cut is given twice; expected each cut once", param="cut")
    return options


def expand(verdicts: pd.DataFrame, axes: list[str], scale: ScaleRecord,
           cuts: Sequence[float]) -> tuple[pd.DataFrame, list[str], pd.DataFrame]:
    """The verdicts once per scoring option (with cuts: a ``scoring`` axis), and each universe's choice.

    Returns (verdicts, axes, choices: universe_id, estimator, cut, ties). The
    rows of every option share their judgment and transcript keys.
    """
    options = scoring_options(scale, cuts)
    if not cuts:
        ids = pd.unique(verdicts["universe_id"])
        choice = options[0][1]
        return verdicts, axes, pd.DataFrame([{"universe_id": u, **choice} for u in ids])
    if SCORING_AXIS in axes:
        raise InputError(f"axes: {SCORING_AXIS}: this axis is made by the cuts; rename the column", param="axes")
    parts, rows = [], []
    combos = verdicts[axes].drop_duplicates() if axes else pd.DataFrame([{}])
    for name, choice in options:
        part = verdicts.copy()
        part[SCORING_AXIS] = name
        ids = {tuple(row): universe_id({**dict(zip(axes, row)), SCORING_AXIS: name})
               for row in combos.itertuples(index=False)}
        part["universe_id"] = [ids[tuple(row)] for row in part[axes].itertuples(index=False)] if axes \
            else ids[()]
        rows += [{"universe_id": u, **choice} for u in ids.values()]
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    columns = list(verdicts.columns)
    at = columns.index("system")
    out = out[[*columns[:at], SCORING_AXIS, *columns[at:]]]
    return out, [*axes, SCORING_AXIS], pd.DataFrame(rows)


def tie_warnings(verdicts: pd.DataFrame, scale: ScaleRecord, name: str) -> list[str]:
    """What the user should know about systems whose every score is the scale's midpoint (a tie).

    A reference system compared with itself ties every time: its win rate is one half by
    construction, not a measurement, so it is left out of the ranking, and said so; a system
    that only ties but was not named the reference is pointed out, never ranked silently.
    """
    midpoint = (scale.min + scale.max) / 2
    scored = verdicts[verdicts["score"].notna()]
    tied = scored.groupby("system", sort=False)["score"].agg(lambda s: bool((s == midpoint).all()))
    out = []
    for system in tied[tied].index:
        if system == scale.reference:
            out.append(f"{name}: the reference system {system!r} is compared with itself (every score a tie, "
                       f"{midpoint:g}); its rate is one half by construction and it is left out of the ranking")
        else:
            out.append(f"{name}: every score of {system!r} is a tie ({midpoint:g}), as a reference system compared "
                       "with itself would be; if it is the reference, name it so, and it is left out of the ranking")
    return out
