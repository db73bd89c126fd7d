"""Units of ``agreement`` read off a run's layout, where hashing every row's unit would be slow.

A run writes each universe's rows together, and universes that differ only in the
compared axis (a *context*) list the same transcripts in the same order. Then a
transcript's unit is its context's number plus its position in the universe's rows,
and no row's (context, transcript) pair has to be hashed: at 60M rows hashing them
took 9-13 s, reading them by position 2-3 s.

``run_units`` checks every assumption on the whole table, rows that do not count
included (they keep the layout even where they lack a label), and returns None
when one fails: the caller then hashes, so the units are the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from .._kernel import blocks

__all__ = ["run_units"]

# Below this many rows hashing is quick enough.
_RUN_ROWS = 1 << 16


def run_units(frame: pd.DataFrame, mask: np.ndarray | None, others: Sequence[str],
              transcript: str = "transcript_key") -> np.ndarray | None:
    """Per counted row (``mask``; None for all rows), a number per (other axes' options, transcript) pair,
    equal for equal pairs and different for different ones, or None if the table is not laid out so.

    The numbers are positions in the first universe of each context, not yet dense: the caller numbers
    them in order of first appearance. The layout read:

    - the universe id, the other axes and the transcript key are categorical (their codes are read);
    - each universe's rows come together, and the other axes do not change inside a universe;
    - the universes of one context have as many rows as its first, with the same transcript at
      each position (a transcript missing where the row does not count, as a failed rollout's is);
    - a transcript comes once in its context's first universe.
    """
    columns = ["universe_id", transcript, *others]
    if len(frame) < _RUN_ROWS or not all(c in frame.columns and isinstance(frame[c].dtype, pd.CategoricalDtype)
                                         for c in columns):
        return None
    universe = _raw(frame["universe_id"])
    starts = blocks.change_rows(universe)
    if len(np.unique(universe[starts])) != len(starts):
        return None  # a universe whose rows are split
    for column in others:
        if not np.isin(blocks.change_rows(_raw(frame[column])), starts).all():
            return None  # an axis that changes inside a universe
    context = _context_numbers(frame, others, starts)
    lengths = np.diff(np.append(starts, len(frame)))
    first = blocks.first_appearances(context)  # each context's first run
    reference = first[context]
    if (lengths != lengths[reference]).any():
        return None
    codes = _raw(frame[transcript])
    if not (_same_sequences(codes, starts, lengths, reference) and _distinct_in_runs(codes, starts[first],
                                                                                      lengths[first])):
        return None
    base = np.zeros(len(first), dtype=np.int64)
    np.cumsum(lengths[first][:-1], out=base[1:])
    return _unit_numbers(starts, lengths, base[context] - starts, mask)


def _raw(column: pd.Series) -> np.ndarray:
    return np.asarray(column.array.codes)  # a view: .cat.codes copies


def _context_numbers(frame: pd.DataFrame, others: Sequence[str], starts: np.ndarray) -> np.ndarray:
    """One number per run for its other axes' options, 0, 1, 2 ... in order of first appearance (a missing
    option is one more option)."""
    number = np.zeros(len(starts), dtype=np.int64)
    for column in others:
        codes = _raw(frame[column])[starts].astype(np.int64) + 1
        number = pd.factorize(number * (len(frame[column].cat.categories) + 1) + codes)[0]
    return number


def _spans(lengths: np.ndarray) -> Iterator[tuple[int, int]]:
    """(first run, last run + 1) of pieces of whole runs of about ``blocks.PIECE_ROWS`` rows."""
    ends = np.cumsum(lengths)
    run = 0
    while run < len(lengths):
        stop = max(int(np.searchsorted(ends, ends[run] - lengths[run] + blocks.PIECE_ROWS, side="right")), run + 1)
        yield run, stop
        run = stop


def _same_sequences(codes: np.ndarray, starts: np.ndarray, lengths: np.ndarray, reference: np.ndarray) -> bool:
    """Whether every run lists the codes its reference run lists, position by position."""
    for run, stop in _spans(lengths):
        here = slice(starts[run], starts[run] + int(lengths[run:stop].sum()))
        shift = np.repeat(starts[reference[run:stop]] - starts[run:stop], lengths[run:stop])
        if not np.array_equal(codes[here], codes[np.arange(here.start, here.stop) + shift]):
            return False
    return True


def _distinct_in_runs(codes: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether no code but missing (-1) comes twice in one run, the runs sorted a piece at a time."""
    for run, stop in _spans(lengths):
        rows = np.concatenate([codes[s:s + n] for s, n in zip(starts[run:stop], lengths[run:stop])])
        pair = np.repeat(np.arange(stop - run, dtype=np.int64), lengths[run:stop]) << 32
        pair += rows.astype(np.int64) + 1  # codes are below 2**31; 0 is missing
        pair.sort()
        if ((pair[1:] == pair[:-1]) & (pair[1:] & 0xFFFFFFFF != 0)).any():
            return False
    return True


def _unit_numbers(starts: np.ndarray, lengths: np.ndarray, shift: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Each row's number plus its run's ``shift``, at the counted rows, a piece of runs at a time."""
    # Rows and positions are below the table's length: int32 halves the array while that allows.
    kind = np.int32 if int(lengths.sum()) < 2**31 else np.int64
    shift = shift.astype(kind)
    out = [np.zeros(0, dtype=kind)]
    for run, stop in _spans(lengths):
        rows = np.arange(starts[run], starts[run] + int(lengths[run:stop].sum()), dtype=kind)
        rows += np.repeat(shift[run:stop], lengths[run:stop])
        out.append(rows if mask is None else rows[mask[starts[run]:starts[run] + len(rows)]])
    return np.concatenate(out)
