"""The compliance labels of a table's label column (``import table``; see :mod:`._table`'s docstring).

Labels are never guessed: booleans and 0/1 (any case), or categories that
``positive`` and ``negative`` name; a value named by neither is refused, listed,
and a missing one (the spellings of :data:`_MISSING` unless named) is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from multiverse.core import JUDGE_FAILED
from multiverse.errors import InputError

__all__ = ["check_label_values", "compliance_labels", "mark_no_grade", "no_grade_cells"]

# What a binary label column holds, lower-cased.
_TRUE = {"true", "1", "1.0"}
_FALSE = {"false", "0", "0.0"}
# Spellings of "no label" that spreadsheets and pandas write; never read as a category.
_MISSING = {"nan", "na", "n/a", "null", "none", "<na>"}


def check_label_values(**named: Any) -> None:
    """Refuse a value of ``positive``, ``negative`` or ``no_grade`` (one, None or several) that is not text a
    table can hold.

    A command line's bytes that are not UTF-8 arrive as lone surrogates: no cell read from a file
    holds one, and comparing them with a column ended in a UnicodeEncodeError traceback.
    """
    for option, given in named.items():
        for value in [] if given is None else [given] if isinstance(given, str) else list(given):
            try:
                str(value).encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(f"{option}: {str(value)!a} is not text (bytes that are not UTF-8); expected a label "
                                 "value as the table writes it", param=option) from None


def compliance_labels(path: Path, column: pd.Series, name: str, positive: str | None,
                negative: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(compliant, missing) boolean arrays from the label column; see the module docstring."""
    text = column.astype("string").str.strip()
    named = {str(v).strip() for v in ([positive] if positive is not None else []) + negative}
    missing = (text.isna() | (text == "") | (text.str.lower().isin(_MISSING) & ~text.isin(named))).to_numpy(dtype=bool)
    present = text[~missing]
    if negative and positive is None:
        raise InputError(f"{path}: {name}: `negative` needs `positive` too; expected both or neither",
                         param="negative")
    lowered = present.str.lower()
    binary = pd.api.types.is_bool_dtype(column) or set(lowered) <= _TRUE | _FALSE
    if positive is None:
        if not binary:
            raise InputError(
                f"{path}: {name}: expected a binary label (true/false or 0/1), found {_some(present)}; "
                "name the compliant value (`positive`) and the non-compliant ones (`negative`)", param="positive"
            )
        matches = _binary(lowered)
    else:
        wanted = str(positive).strip()
        if wanted in {str(v).strip() for v in negative}:
            raise InputError(f"{path}: {name}: {wanted!r} is named both by `positive` and by `negative`",
                             param="positive")
        if binary and not negative:
            # Booleans and 0/1 compare by meaning: positive true matches True, 1 matches 1.0.
            if wanted.lower() not in _TRUE | _FALSE:
                raise InputError(f"{path}: {name}: `positive` {positive!r} is not a value of the binary label column",
                                 param="positive")
            matches = _binary(lowered) == (wanted.lower() in _TRUE)
        else:
            is_positive = (present == wanted).to_numpy(dtype=bool)
            is_negative = present.isin([str(v).strip() for v in negative]).to_numpy(dtype=bool)
            unexpected = present[~(is_positive | is_negative)]
            if len(unexpected):
                expected = (f"`negative` ({', '.join(map(repr, negative))})" if negative
                            else "`negative` naming the non-compliant ones")
                raise InputError(
                    f"{path}: {name}: {len(unexpected)} labels are neither `positive` {wanted!r} nor in "
                    f"`negative`: {_some(unexpected)}; expected each value named, by `positive` or "
                    f"{expected} (labels are never guessed)", param="positive" if not negative else "negative"
                )
            matches = is_positive
    compliant = np.zeros(len(column), dtype=bool)
    compliant[~missing] = matches
    return compliant, missing


def _binary(lowered: pd.Series) -> np.ndarray:
    return cast("np.ndarray", lowered.isin(_TRUE).to_numpy(dtype=bool))


def _some(values: pd.Series) -> str:
    distinct = list(dict.fromkeys(values.tolist()))
    shown = ", ".join(map(str, distinct[:5]))
    return shown + (f", ... ({len(distinct)} distinct)" if len(distinct) > 5 else "")


def no_grade_cells(column: pd.Series, no_grade: Sequence[str]) -> tuple[pd.Series, np.ndarray]:
    """(the column with each ``no_grade`` value read as a missing cell, where they were).

    A value named as no grade is the grader's reply without a grade: read as missing here, so
    no label or score is made of it, then made an unparsed reply (:func:`mark_no_grade`).
    """
    ungraded = column.astype("string").str.strip().isin([str(v).strip() for v in no_grade]).to_numpy(bool)
    return (column.where(~ungraded) if ungraded.any() else column), ungraded


def mark_no_grade(verdicts: pd.DataFrame, column: pd.Series, ungraded: np.ndarray) -> None:
    """Make the ``ungraded`` rows ``judge_failed`` with reason ``no grade: VALUE`` (``core.unparsed_rows``)."""
    verdicts.loc[ungraded, "status"] = JUDGE_FAILED
    verdicts.loc[ungraded, "reason"] = "no grade: " + column.astype("string").str.strip()[ungraded].to_numpy(str)
