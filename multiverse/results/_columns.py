"""Two questions ``Results`` asks of a verdicts column without a pass over its millions of strings."""

from __future__ import annotations

import pandas as pd

__all__ = ["holds", "is_text"]


def holds(column: pd.Series, value: str) -> bool:
    if isinstance(column.dtype, pd.CategoricalDtype):  # no pass over millions of strings
        code = column.cat.categories.get_indexer([value])[0]
        return bool(code >= 0 and (column.cat.codes.to_numpy() == code).any())
    return value in set(column)


def is_text(series: pd.Series) -> bool:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):  # load_run's text columns
        dtype = dtype.categories.dtype
    return bool(pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype))
