"""Integer codes of key columns, and counting by them a block of rows at a time.

The rates path groups tens of millions of verdict rows by universe, system
and design cell. It does so on int32 codes (half the memory of pandas' int64
factorize codes) and counts with ``np.bincount`` a block of rows at a time,
so no row-length int64 array is ever made whole.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import cast

import numpy as np
import pandas as pd

__all__ = ["BLOCK_ROWS", "PIECE_ROWS", "appearance_order", "change_rows", "codes", "codes_and_first_rows", "combine", "count",
           "dense_codes", "first_appearances", "first_rows", "index_type", "numbered_codes", "radix_codes", "sort_order", "sorted_codes",
           "target_blocks"]


def codes(values: pd.Series | np.ndarray) -> tuple[np.ndarray, int]:
    """Integer codes 0..k-1 of a column in order of first appearance, and k.

    Codes are int32 while k allows (a row-length array of them is half the
    memory of int64 at tens of millions of rows).
    """
    if isinstance(values, np.ndarray) and values.dtype.kind == "i" and len(values):
        # Combined codes of earlier columns: a bounded range compacts faster by counting.
        top = int(values.max()) + 1
        if top <= 4 * len(values) + 1024:
            present = np.bincount(values, minlength=top) > 0
            remap = np.cumsum(present) - 1
            return remap.astype(index_type(top))[values], int(present.sum())
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        found, first = _categorical_codes(values)
        return found, len(first)
    found, uniques = pd.factorize(values, sort=False, use_na_sentinel=False)
    return found.astype(index_type(len(uniques)), copy=False), len(uniques)


def sorted_codes(values: pd.Series) -> tuple[np.ndarray, int]:
    """Integer codes 0..k-1 of a column in the sorted order of its values (missing last), and k.

    What a resample draws per code (a case's bootstrap weight) then goes to the
    same case whatever the order of the table's rows: in order of first
    appearance, a table with its rows shuffled gave other bootstrap intervals
    and another noise floor from the same seed. Values of mixed types that do
    not sort are ordered by their text.
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        # Codes shifted by one (missing: 0) in int32, not int64 with a shifted copy: at 60M rows each
        # int64 temporary was 0.5 GB, three of them alive at once.
        shifted = np.asarray(values.array.codes).astype(np.int32)
        shifted += 1
        categories = values.cat.categories
        present = np.bincount(shifted, minlength=len(categories) + 1) > 0
        order = _sort_order(categories)
        # Rank of each category among those present, in sorted order; missing after them all.
        rank = np.full(len(categories) + 1, -1, dtype=np.int64)
        shown = order[present[1:][order]]
        rank[shown + 1] = np.arange(len(shown))
        rank[0] = len(shown)
        k = len(shown) + int(present[0])
        return rank.astype(index_type(k))[shifted], k
    try:
        found, uniques = pd.factorize(values, sort=True, use_na_sentinel=False)
    except TypeError:
        found, uniques = pd.factorize(values, use_na_sentinel=False)
        order = _sort_order(pd.Index(uniques))
        found = np.argsort(order)[found]
    return np.asarray(found).astype(index_type(len(uniques)), copy=False), len(uniques)


def sort_order(index: pd.Index) -> np.ndarray:
    """Positions that put ``index`` in sorted order (by text where its values do not sort): ``sorted_codes``'s order."""
    return _sort_order(index)


def _sort_order(index: pd.Index) -> np.ndarray:
    try:
        return np.asarray(index.argsort())
    except TypeError:
        return np.argsort(np.array([str(v) for v in index]), kind="stable")


def codes_and_first_rows(values: pd.Series) -> tuple[np.ndarray, int, np.ndarray]:
    """``codes(values)`` and ``first_rows`` of them, a categorical's found in one pass."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        found, first = _categorical_codes(values)
        return found, len(first), first
    found, k = codes(values)
    return found, k, first_rows(found)


def _categorical_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    # The categorical's own codes, relabelled in order of first appearance (a missing value, -1,
    # is one more value): no int64 codes of the whole column, as factorize makes. The rows where
    # each code first appears come with them, in code order.
    raw = np.asarray(values.array.codes)  # a view: .cat.codes copies
    first = first_appearances(raw)
    order = raw[first]
    relabel: np.ndarray = np.zeros(len(values.cat.categories) + 1, dtype=index_type(len(order)))
    relabel[order] = np.arange(len(order))
    return relabel[raw], first


def index_type(k: int) -> type:
    return np.int32 if k < 2**31 - 1 else np.int64


def combine(a: np.ndarray, k: int, b: np.ndarray) -> np.ndarray:
    """``a * k + b`` (codes of a pair), in int32 unless that could overflow."""
    kind = index_type((int(a.max(initial=0)) + 1) * k)
    return cast("np.ndarray", a.astype(kind, copy=False) * kind(k) + b.astype(kind, copy=False))


def first_rows(codes: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Row position of the first appearance of each code (among the ``keep`` rows), in code order."""
    positions = first_appearances(codes, keep)
    return positions[np.argsort(codes[positions], kind="stable")]


def first_appearances(codes: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Rows where a code first appears (among the ``keep`` rows), in row order. A code first appears
    where it differs from the row before, so only those rows are hashed: rows of one universe or cell
    come together, so at 60M rows a few hundred thousand, not 60M."""
    candidates = []
    for start in range(0, len(codes), PIECE_ROWS):
        piece = slice(start, start + PIECE_ROWS)
        candidates.append(change_rows(codes[piece], None if keep is None else keep[piece]) + start)
    rows = np.concatenate(candidates) if candidates else np.zeros(0, dtype=np.int64)
    return cast("np.ndarray", rows[~pd.Series(codes[rows]).duplicated().to_numpy()])


def change_rows(piece: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Positions of a piece where a value can first appear: the first, and each that differs from the one
    before (or, with ``keep``, follows a row not kept); only kept positions."""
    change = piece[1:] != piece[:-1]
    if keep is not None:
        change |= ~keep[:-1]
    rows = np.concatenate([np.zeros(min(len(piece), 1), dtype=np.int64), np.flatnonzero(change) + 1])
    return rows if keep is None else rows[keep[rows]]


# Rows taken at once where a row-length array would otherwise be copied whole (bincount casts its
# codes to int64; a design effect's sparse matrices hold every row): 4M rows, tens of MB.
BLOCK_ROWS = 1 << 22
# Rows taken at once where only temporaries need them (a mask, a gather, the digits of keys): a piece of
# a few MB the allocator hands back next time, where a row-length array at 60M rows is hundreds of MB of
# pages never touched before, and on some machines those page faults are most of an analysis's time.
PIECE_ROWS = 1 << 20


def appearance_order(pieces: Iterable[np.ndarray], expected: int | None = None) -> np.ndarray:
    """The distinct values of consecutive pieces of a column, in order of first appearance
    (``pd.unique`` of them all), hashing only the values that differ from the row before (as
    ``first_appearances``). With ``expected`` (how many distinct values there are) the pieces stop
    being read once all are found.
    """
    found: list[np.ndarray] = []
    order = np.empty(0, dtype=np.int64)
    for piece in pieces:
        if not len(piece):
            continue
        found.append(piece[change_rows(piece)])
        if expected is not None:
            order = pd.unique(np.concatenate([order, *found]))
            found = []
            if len(order) >= expected:
                return cast("np.ndarray", order)
    return pd.unique(np.concatenate([order, *found])) if found else order


def count(codes: np.ndarray, selected: np.ndarray, n: int) -> np.ndarray:
    """``np.bincount(codes[selected], minlength=n)``, a block of rows at a time."""
    out = np.zeros(n, dtype=np.int64)
    for start in range(0, len(codes), BLOCK_ROWS):
        block = slice(start, start + BLOCK_ROWS)
        out += np.bincount(codes[block][selected[block]], minlength=n)
    return out


def target_blocks(target: np.ndarray, n_targets: int) -> Iterator[tuple[int, int, np.ndarray | slice]]:
    """(first target, last target + 1, rows or a slice of all) for ranges of target codes of about
    ``BLOCK_ROWS`` rows each (targets are about equally large)."""
    n_blocks = max(1, -(-len(target) // BLOCK_ROWS))
    if n_blocks == 1:
        yield 0, n_targets, slice(None)
        return
    bounds = np.linspace(0, n_targets, n_blocks + 1).round().astype(np.int64)
    for lo, hi in itertools.pairwise(bounds):
        yield int(lo), int(hi), np.flatnonzero((target >= lo) & (target < hi))


def radix_codes(codes: Iterable[np.ndarray]) -> np.ndarray:
    """One integer per distinct tuple of non-negative codes (mixed radix; sparse, not dense).

    ``codes`` is consumed one array at a time, so a generator keeps only two
    row-length arrays alive however many columns are combined. The tuple stays
    int32 while the product of the columns' ranges allows (half the memory, and
    every fresh row-length array costs its pages), int64 after.
    """
    combined: np.ndarray | None = None
    top = 0  # the combined codes are below this
    for more in codes:
        more = np.asarray(more)
        base = int(more.max(initial=0)) + 1
        if combined is None:
            combined, top = more.astype(np.int32 if base < 2**31 else np.int64), base
            continue
        if top * base >= 2**31 and combined.dtype == np.int32:
            combined = combined.astype(np.int64)
        if top >= np.iinfo(np.int64).max // base - base:
            combined = pd.factorize(combined)[0].astype(np.int64)  # re-densify before overflow
            top = int(combined.max(initial=0)) + 1
        combined *= base
        combined += more
        top *= base
    if combined is None:
        raise ValueError("radix_codes needs at least one code array")
    return combined


def dense_codes(codes: Iterable[np.ndarray]) -> np.ndarray:
    """Dense codes 0..n-1, one per distinct tuple of non-negative codes, in order of first appearance
    (``pd.factorize``'s codes)."""
    return numbered_codes(radix_codes(codes))


def numbered_codes(key: np.ndarray) -> np.ndarray:
    """``dense_codes`` of tuples already combined by ``radix_codes``."""
    top = int(key.max(initial=-1)) + 1
    if len(key) < _DIRECT_ROWS or top > 4 * len(key):
        return _first_seen(key)
    return _direct_codes(key, top)


# Below this many rows hashing is quick; above, tuples whose mixed-radix numbers stay below four per
# row are numbered through a table of every number instead (at 60M rows: 6 s, not pd.factorize's 12),
# and other integers are hashed by Arrow.
_DIRECT_ROWS = 1 << 16


def _first_seen(key: np.ndarray) -> np.ndarray:
    """``pd.factorize(key)[0]`` of integers. Above ``_DIRECT_ROWS`` Arrow's hash table numbers them, in
    the same order of first appearance: at 57M row keys of a unit and transcript it took 7-19 s where
    pandas' took 18-48 s (the same machine, one run)."""
    if len(key) < _DIRECT_ROWS:
        return cast("np.ndarray", pd.factorize(key)[0])
    import pyarrow as pa

    return cast("np.ndarray", pa.array(key).dictionary_encode().indices.to_numpy().astype(np.int64))


def _direct_codes(key: np.ndarray, top: int) -> np.ndarray:
    """``pd.factorize(key)[0]`` for non-negative ``key`` below ``top``, through a table of ``top`` entries
    (int32 below 2**31: arithmetic on the codes casts first)."""
    present = np.zeros(top, dtype=bool)
    for start in range(0, len(key), PIECE_ROWS):
        present[key[start:start + PIECE_ROWS]] = True
    rank = np.cumsum(present, dtype=np.int32 if top < 2**31 else np.int64)
    np.subtract(rank, 1, out=rank)
    del present
    code = np.empty(len(key), dtype=rank.dtype)
    _take_pieces(rank, key, code)  # numbered in the keys' sorted order
    del rank
    groups = int(code.max(initial=-1)) + 1
    # Each number's first row, a piece at a time (no row-length array of positions), then the numbers
    # relabelled in the order their first rows come.
    first = np.full(groups, len(key), dtype=np.int64)
    for start in range(0, len(key), PIECE_ROWS):
        piece = code[start:start + PIECE_ROWS]
        np.minimum.at(first, piece, np.arange(start, start + len(piece)))
    is_first = np.zeros(len(key), dtype=bool)
    is_first[first] = True
    relabel = np.empty(groups, dtype=code.dtype)
    relabel[code[is_first]] = np.arange(groups)
    del is_first
    # Into the codes' own array, int32 while ``top`` allows: the units live through the whole agreement
    # (at 60M rows 240 MB, not 480). Each place reads its own code before it is written.
    return _take_pieces(relabel, code, code)


def _take_pieces(table: np.ndarray, index: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[:] = table[index]`` a piece of rows at a time: numpy widens an int32 index to int64 for the
    whole of it first (460 MB at 57M rows, at the agreement's memory peak); ``out`` may be ``index``."""
    for start in range(0, len(index), PIECE_ROWS):
        piece = slice(start, start + PIECE_ROWS)
        np.take(table, index[piece], out=out[piece], mode="clip")
    return out
