"""A table's compliance labels: boolean, 0/1, or a named category (``multiverse.importers._table``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from multiverse.errors import InputError

__all__ = ["compliance"]

_TRUE = {"true", "1", "1.0"}
_FALSE = {"false", "0", "0.0"}
# Spellings of "no label" that spreadsheets and pandas write; never read as a category.
_MISSING = {"nan", "na", "n/a", "null", "none", "<na>"}


def compliance(path: Path, column: pd.Series, name: str, positive: str | None,
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
    return lowered.isin(_TRUE).to_numpy(dtype=bool)


def _some(values: pd.Series) -> str:
    distinct = list(dict.fromkeys(values.tolist()))
    shown = ", ".join(map(str, distinct[:5]))
    return shown + (f", ... ({len(distinct)} distinct)" if len(distinct) > 5 else "")
