"""The results tables: their columns, how they are written and read back.

A run directory (or an import directory) holds ``verdicts``, ``criteria`` and
``rates``, each as ``.parquet`` and ``.csv``, plus ``manifest.json``. Every
file is written to a temporary name and renamed into place, so a crash never
leaves half a table. ``load_run`` reads a run directory, an import directory
or a bare verdicts table, so every analysis accepts any of them.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import pandas as pd

from multiverse.core import (
    CORE_COLUMNS,
    FORMULA_START,
    LINE_END,
    QUOTE,
    atomic_write,
    atomic_write_text,
    restore_cell,
    safe_cell,
)
from multiverse.errors import InputError
from multiverse.tables._positional import csv_header, index_fields, positional

__all__ = [
    "atomic_write",
    "check_choice",
    "csv_safe",
    "infer_axes",
    "read_table",
    "require_columns",
    "split_factors",
    "universe_ids",
    "write_json",
    "write_table",
]


def write_table(frame: pd.DataFrame, directory: str | os.PathLike[str], name: str) -> None:
    """Write ``frame`` as ``<name>.parquet`` and ``<name>.csv``, each atomically."""
    directory = Path(directory)
    atomic_write(directory / f"{name}.parquet", lambda tmp: frame.to_parquet(tmp, index=False))
    atomic_write(directory / f"{name}.csv", lambda tmp: csv_safe(frame).to_csv(tmp, index=False, lineterminator=LINE_END))


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell a spreadsheet would run made inert (see ``multiverse.core._csvsafe``).

    The column names too: a header is a cell a spreadsheet reads like any
    other, and an axis named ``=HYPERLINK(...)`` is a column of verdicts and
    rates. Vectorised, as tables reach millions of rows; ``read_table`` undoes
    it. Parquet keeps the text as it is.
    """
    out = None
    names = {c: safe_cell(c) for c in frame.columns if safe_cell(c) is not c}
    if names:
        out = frame.rename(columns=names)
        frame = out
    for column in frame.columns:
        series = frame[column]
        if not _is_text(series):
            continue
        try:
            first = series.str[:1]
        except AttributeError:  # an object column without any text
            continue
        risky = first.isin((*FORMULA_START, QUOTE)).fillna(False).astype(bool)
        if risky.any():
            out = frame.copy() if out is None else out
            out[column] = series.where(~risky, QUOTE + series.astype(object).where(risky, "").astype(str))
    return frame if out is None else out


def _is_text(series: pd.Series) -> bool:
    return cast("bool", series.dtype == object or pd.api.types.is_string_dtype(series.dtype))


def _csv_restore(frame: pd.DataFrame) -> pd.DataFrame:
    names = {c: restore_cell(c) for c in frame.columns if restore_cell(c) is not c}
    if names:
        frame = frame.rename(columns=names)
    for column in frame.columns:
        series = frame[column]
        if not _is_text(series):
            continue
        try:
            quoted = series.str.startswith(QUOTE).fillna(False).astype(bool)
        except AttributeError:
            continue
        if quoted.any():
            frame[column] = series.where(~quoted, series.str[1:])
    return frame


def write_json(document: Any, path: str | os.PathLike[str]) -> None:
    """Write a JSON document atomically."""
    atomic_write_text(path, json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")


def read_table(path: str | os.PathLike[str], *, categories: bool = False, shown: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """Read a ``.parquet`` or ``.csv`` table; bad files raise ``InputError``.

    With ``categories``, every text column comes back as a pandas categorical
    (what ``load_run`` reads): a run's ids, names and keys repeat on millions
    of rows, and one integer code per row takes a fraction of the memory of
    one string object per row. Parquet's dictionary pages are read as they
    are, so the strings are never built row by row.
    """
    from multiverse.core import regular_file_problem

    path = Path(path)
    name = Path(shown) if shown is not None else path  # a folder's table is read at its checked target
    problem = regular_file_problem(path)
    if problem:
        raise InputError(f"{name}: {problem}")
    try:
        if name.suffix == ".parquet":
            return _read_parquet(path, categories)
        if name.suffix in (".csv", ".tsv"):
            frame = _read_csv(path, sep="\t" if name.suffix == ".tsv" else ",")
            frame = _restore_dtypes(_csv_restore(frame), name.stem)
            return _as_categories(frame) if categories else frame
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"{name}: cannot be read as a table ({str(exc).splitlines()[0]})") from None
    raise InputError(f"{name}: expected a .parquet or .csv table")


def _read_csv(path: Path, sep: str) -> pd.DataFrame:
    import stat

    # Opened without blocking and checked again once open: a file swapped for a FIFO after the check never hangs.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError("expected a regular file; it changed while it was read")
        # By position: the columns of an index to_csv wrote (empty headers) are left out, a header named
        # twice is refused (tables._positional).
        header = pd.read_csv(handle, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
        kept = csv_header(list(header.iloc[0])) if len(header) else []
        handle.seek(0)
        usecols = None if len(kept) == header.shape[1] else kept
        return pd.read_csv(handle, sep=sep, keep_default_na=True, usecols=usecols)


#: Rows a parquet table may declare. Its size on disk says little: run-length encoding lets a file of
#: a few kilobytes declare billions of rows, which pandas would then build in memory. The largest grid
#: the benchmarks write (100,000 universes x 5 systems x 120 cases) has 60 million.
MAX_TABLE_ROWS = 500_000_000


def _read_parquet(path: Path, categories: bool) -> pd.DataFrame:
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(path).metadata.num_rows  # the footer only: nothing is decoded yet
    if rows > MAX_TABLE_ROWS:
        raise ValueError(f"it declares {rows:,} rows; expected at most {MAX_TABLE_ROWS:,}")
    schema = pq.read_schema(path)
    # Rows by position, whatever index a writer stored (tables._positional): checked before any read.
    dropped, index_columns = index_fields(schema)
    import pyarrow as pa

    if not categories:
        return _nullable_booleans(positional(pd.read_parquet(path)), schema)

    columns: dict[str, pd.Series] = {}
    plain = set()
    # One column at a time, so the peak is the frame plus one column in Arrow's form, not the
    # whole file twice over.
    for field in schema:
        name = field.name
        if name in dropped:
            continue
        if name in index_columns:
            # A named index level is a column again; pandas would read it only as an index.
            columns[index_columns[name]] = pq.read_table(path, columns=[name]).column(0).to_pandas()
        elif not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            # With pandas' own dtypes, and without the index pandas brings along: rows by position.
            columns[name] = pd.read_parquet(path, columns=[name])[name].reset_index(drop=True)
        else:
            column = _repeating_text(path, name, rows)
            if column is None:
                plain.add(name)
                # A row group at a time: decoding the whole column at once held it twice over.
                file = pq.ParquetFile(path)
                column = pa.chunked_array([chunk for group in range(file.num_row_groups)
                                           for chunk in file.read_row_group(group, columns=[name]).column(0).chunks],
                                          type=field.type)
            # Dictionary columns become categoricals (their text as pandas' str dtype).
            columns[name] = column.to_pandas()
            del column
        # Arrow's allocator keeps freed pages for reuse; hand the decoding buffers back to the system.
        pa.default_memory_pool().release_unused()
    frame = pd.DataFrame(columns, copy=False) if columns else positional(pd.read_parquet(path))
    return _as_categories(_nullable_booleans(frame, schema), skip=plain)


def _nullable_booleans(frame: pd.DataFrame, schema: Any) -> pd.DataFrame:
    """Arrow booleans with a missing value as pandas' nullable booleans, whoever wrote the file.

    pandas records that dtype in its own metadata; a file written by pyarrow alone, Polars or another
    writer has none, and its booleans with a gap would read as Python objects (True, False, None).
    """
    import pyarrow as pa

    for field in schema:
        name = field.name
        if pa.types.is_boolean(field.type) and name in frame.columns and frame[name].dtype == object:
            frame[name] = frame[name].astype("boolean")
    return frame


def _repeating_text(path: Path, name: str, rows: int) -> Any:
    """The text column ``name`` dictionary-encoded, or None when more than ``_most_distinct(rows)`` values differ.

    Each row group brings its own dictionary. When together they may hold too
    many values, a lower bound of the distinct values comes first: the
    distinct 64-bit hashes of the row groups' dictionaries (a collision only
    lowers it), so a mostly distinct column (judgment keys: half as many values
    as rows) is refused holding 8 bytes per dictionary value, where unifying or
    counting its strings built a hash table of all of them (9 GB and minutes at
    60M rows). Otherwise the row groups' dictionaries are unified, which counts
    exactly.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    most = _most_distinct(rows)
    file = pq.ParquetFile(path, read_dictionary=[name])
    if file.num_row_groups == 0:
        return pq.read_table(path, columns=[name], read_dictionary=[name]).column(0)

    def dictionary_of(group: int) -> Any:
        # Pages of one row group may come as several chunks: one array over one dictionary.
        return file.read_row_group(group, columns=[name]).column(0).unify_dictionaries().combine_chunks()

    kept: list[Any] | None = []  # the row groups, while their dictionaries together hold at most `most` values
    entries, hashes = 0, []
    for group in range(file.num_row_groups):
        encoded = dictionary_of(group)
        entries += len(encoded.dictionary)
        hashes.append(_string_hashes(encoded.dictionary))
        if kept is not None and entries <= most:
            kept.append(encoded)
        else:
            kept = None
        del encoded
    if kept is None:
        every = np.concatenate(hashes)
        del hashes
        every.sort()
        distinct_at_least = 1 + int(np.count_nonzero(every[1:] != every[:-1]))
        del every
        if distinct_at_least > most:
            return None
        kept = [dictionary_of(group) for group in range(file.num_row_groups)]
    column = pa.chunked_array(kept).unify_dictionaries()
    del kept
    dictionary = column.chunk(0).dictionary
    if len(dictionary) > most:
        return None
    # Sorted here, a chunk at a time, so that _sorted_categories need not recode the whole column in pandas.
    order = pc.sort_indices(dictionary)
    rank = np.empty(len(order), dtype=np.int32)
    rank[order.to_numpy()] = np.arange(len(order), dtype=np.int32)
    ranks, dictionary = pa.array(rank), dictionary.take(order)
    chunks = list(column.chunks)
    del column
    for i, chunk in enumerate(chunks):
        chunks[i] = pa.DictionaryArray.from_arrays(ranks.take(chunk.indices), dictionary)
    return pa.chunked_array(chunks)


_HASH_BYTES = 1 << 23  # hash a dictionary in slices of about 8 MB of text (64 MB of 64-bit terms)


def _string_hashes(values: Any) -> Any:
    """A 64-bit hash of each string of an Arrow string array (equal strings, equal hashes)."""
    import numpy as np
    import pyarrow as pa

    values = values.cast(pa.large_string())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64, count=n + 1, offset=8 * values.offset)
    data = values.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    out = np.zeros(n, dtype=np.uint64)
    powers = np.cumprod(np.full(int((offsets[1:] - offsets[:-1]).max(initial=0)) + 1, 0x100000001B3, dtype=np.uint64))
    cuts = np.unique(np.append(np.searchsorted(offsets, np.arange(offsets[0], offsets[-1], _HASH_BYTES), "right") - 1, n))
    for a, b in itertools.pairwise(cuts):
        start, end = offsets[a:b], offsets[a + 1:b + 1]
        lengths = end - start
        some = lengths > 0
        if not some.any():
            continue
        position = np.arange(end[-1] - start[0]) - np.repeat(start - start[0], lengths)
        terms = (data[start[0]:end[-1]].astype(np.uint64) + np.uint64(1)) * powers[position]
        out[a:b][some] = np.add.reduceat(terms, (start - start[0])[some])
    # Mix in the length (so '' and a run of NULs differ) and spread the bits (splitmix64's finaliser).
    out ^= (offsets[1:] - offsets[:-1]).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    out ^= out >> np.uint64(30)
    out *= np.uint64(0xBF58476D1CE4E5B9)
    out ^= out >> np.uint64(27)
    out *= np.uint64(0x94D049BB133111EB)
    out ^= out >> np.uint64(31)
    return out


def _most_distinct(rows: int) -> int:
    # A text column with more distinct values than a quarter of its rows (e.g. judgment keys) stays
    # text: its codes would save less memory than its categories cost time to hash and sort.
    return max(rows // 4, 1)


def _as_categories(frame: pd.DataFrame, skip: Iterable[str] = ()) -> pd.DataFrame:
    """Text columns as categoricals with sorted categories, unless mostly distinct (or in ``skip``)."""
    skip = set(skip)
    for column in frame.columns:
        series = frame[column]
        if column in skip:
            continue
        if isinstance(series.dtype, pd.CategoricalDtype):
            frame[column] = _sorted_categories(series)
        elif _is_text(series) and series.nunique() <= _most_distinct(len(series)):
            frame[column] = series.astype("category")
    return frame


def _sorted_categories(series: pd.Series) -> pd.Series:
    """``series`` with its categories in sorted order (parquet's dictionaries come in order of appearance).

    Sorting, grouping and ``factorize(sort=True)`` of a categorical follow its
    category order, so sorted categories order rows exactly as the strings would.
    """
    import numpy as np

    categories = series.cat.categories
    if categories.is_monotonic_increasing:
        return series
    order = categories.argsort()
    codes = series.cat.codes.to_numpy()
    rank = np.empty(len(order), dtype=codes.dtype)
    rank[order] = np.arange(len(order), dtype=codes.dtype)
    new = rank.take(codes)  # a missing value's -1 takes the last rank: put it back
    new[codes < 0] = -1
    return pd.Series(pd.Categorical.from_codes(new, categories[order]), index=series.index, name=series.name)


# Text columns a run writes as '' when there is nothing to say, never as
# missing: CSV cannot tell the two apart, so an empty cell reads back as ''.
_EMPTY_NOT_MISSING = ("reason", "rationale")


# Boolean columns that may be missing (a verdict that failed has none), so
# their parquet copy is a nullable boolean even when every value is there.
_NULLABLE_BOOLEANS = {"verdicts": ("compliant",)}


def _restore_dtypes(frame: pd.DataFrame, table: str = "") -> pd.DataFrame:
    # CSV loses the booleans: bring back the dtypes the parquet copy has.
    for column in ("compliant", "applicable", "permissible"):
        if column not in frame.columns:
            continue
        if frame[column].dtype == object:
            frame[column] = frame[column].map({"True": True, "False": False, True: True, False: False})
        nullable = column in _NULLABLE_BOOLEANS.get(table, ()) or frame[column].isna().any()
        frame[column] = frame[column].astype("boolean" if nullable else bool)
    for column in _EMPTY_NOT_MISSING:
        if column in frame.columns and (_is_text(frame[column]) or frame[column].isna().all()):
            frame[column] = frame[column].astype(object).fillna("").astype(str)
    return frame


def infer_axes(frame: pd.DataFrame, factors: Iterable[str] = ()) -> list[str]:
    """Columns of a bare table that are neither core columns nor design factors."""
    skip = CORE_COLUMNS | set(factors)
    return [c for c in frame.columns if c not in skip]


def split_factors(frame: pd.DataFrame, columns: list[str]) -> tuple[list[str], list[str]]:
    """(axes, design factors) among candidate ``columns`` of a table with ``universe_id``.

    An axis is constant inside a universe; a column that varies inside one
    (e.g. behavior) is a design factor. Without universe ids every candidate
    stays an axis.
    """
    if "universe_id" not in frame.columns or not columns:
        return list(columns), []
    varies = frame.groupby("universe_id", sort=False)[list(columns)].nunique(dropna=False).max() > 1
    return [c for c in columns if not varies[c]], [c for c in columns if varies[c]]


def universe_ids(frame: pd.DataFrame, axes: list[str]) -> pd.Series:
    """A universe id per row: the given one, else a digest of the row's axis values.

    Every analysis derives ids through here, so a bare table gets the same
    universe ids in every analysis and in ``load_run``. One digest per
    universe, not per row: tables reach tens of millions of rows.
    """
    if "universe_id" in frame.columns:
        ids = frame["universe_id"]
        if isinstance(ids.dtype, pd.CategoricalDtype) and _is_text(ids.cat.categories.to_series()):
            return ids  # already text: one code per row, not one string per row
        return ids.astype(str)
    if not axes:
        return pd.Series("all", index=frame.index, dtype=object)
    import numpy as np

    from multiverse.core import universe_id

    codes = frame.groupby(list(axes), sort=False, observed=True, dropna=False).ngroup().to_numpy()
    first = np.unique(codes, return_index=True)[1]  # ngroup codes are 0..G-1 in order of appearance
    combos = frame.iloc[first][list(axes)].astype(str).itertuples(index=False)
    ids = np.array([universe_id(dict(zip(axes, row))) for row in combos], dtype=object)
    return pd.Series(ids[codes], index=frame.index, dtype=object)


def require_columns(frame: pd.DataFrame, name: str, columns: Sequence[str]) -> None:
    """Refuse ``frame`` (called ``name`` in the message) unless it has every one of ``columns``."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{name}: {missing[0]}: column missing (expected {', '.join(columns)})")


def check_choice(value: str, known: Sequence[str], what: str) -> None:
    """Refuse a programming slip: a rule, estimator or method name outside the vocabulary."""
    if value not in known:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(known)}")
