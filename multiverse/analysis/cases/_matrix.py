"""The universe x case matrix every curve and joint test is computed from, and paired differences.

:func:`case_matrix` counts the ``ok`` verdicts per system x universe x case
once (:class:`CaseMatrix`); the specification curves
(:mod:`multiverse.analysis.curve`) and the joint tests
(:mod:`multiverse.analysis.inference`) both take it, so neither depends on
the other.

Difference of two systems, paired by case. In each universe only cases that
both systems have an ok verdict for count. ``d_c`` is case c's contribution to
``rate(a) - rate(b)`` (``k_ac / n_a - k_bc / n_b``, so ``D = sum_c d_c`` is the
difference), ``w_c`` the case's share of the universe's paired transcripts,
and ``se^2 = C/(C-1) * sum_c (d_c - D w_c)^2``: the linearised
(case-clustered) variance of a difference of ratio estimators, exact in form
when both systems have the same number of transcripts per case. ``z = D / se``;
|z| is capped at ``Z_CAP`` so a perfectly separated universe (se = 0) stays
finite (the cap is monotone, so joint tests built on z stay valid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from multiverse.core import counted_rows
from multiverse.errors import InputError
from multiverse.tables import universe_ids

from .._kernel import CONTRIBUTION, blocks, in_order

__all__ = ["Z_CAP", "CaseMatrix", "as_matrix", "axes_list", "case_matrix", "paired_cases", "paired_z", "plain_number"]

#: Per-universe |z| of a difference is capped here (see the module docstring).
Z_CAP = 50.0


# --------------------------------------------------------------------------
# The universe x case matrix
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CaseMatrix:
    """Counts of ``ok`` verdicts per system x universe x case.

    ``compliant[s, u, c]`` is the number of compliant verdicts and
    ``included[s, u, c]`` the number of ok verdicts (transcripts, summed over
    replicates) of system ``systems[s]`` on case ``cases[c]`` in universe
    ``universes.universe_id[u]``. ``universes`` holds ``universe_id`` and the
    axis columns, one row per universe in array order.
    """

    universes: pd.DataFrame
    axes: tuple[str, ...]
    systems: tuple[str, ...]
    cases: pd.Index
    compliant: np.ndarray
    included: np.ndarray
    #: Per universe (array order): True where the rate is a mean of scores (a t interval), not a
    #: share; None when every rate is a share. ``compliant`` then sums contributions in [0, 1].
    means: np.ndarray | None = None
    #: With scores, the sum of each cell's squared contributions (a mean's null needs its spread within
    #: a case); None with labels, whose squares are the labels themselves.
    squares: np.ndarray | None = None

    def share_icc(self) -> np.ndarray:
        """(systems x universes) ICC of each share's design effect, NaN for a mean: ``intervals.share_icc``,
        computed once (the curve's intervals and every joint test's count read it from here)."""
        if "_share_icc" not in self.__dict__:
            from .._kernel import share_icc

            object.__setattr__(self, "_share_icc", share_icc(self.included, self.compliant, self.means))
        return cast("np.ndarray", self.__dict__["_share_icc"])

    def system_index(self, system: str) -> int:
        """Position of ``system`` in the arrays; InputError if it has no ok verdicts."""
        try:
            return self.systems.index(system)
        except ValueError:
            known = ", ".join(map(str, self.systems)) or "none"
            raise InputError(
                f"verdicts: system: expected one of {known}, got {system!r}"
            ) from None

    def seen(self, system: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, included, compliant) of system ``system``: the universes with an ok verdict, on the cases
        some of them saw. Views of the matrix when none is left out (the usual case): a joint test's null
        keeps them, and copies were 0.2 GB a system at 100k universes."""
        included, compliant = self.included[system], self.compliant[system]
        rows = np.flatnonzero(included.sum(axis=1) > 0)
        if len(rows) < len(included):
            included, compliant = included[rows], compliant[rows]
        cases = np.flatnonzero(included.sum(axis=0) > 0)
        if len(cases) < included.shape[1]:
            included, compliant = included[:, cases], compliant[:, cases]
        return rows, included, compliant

    def universe_index(self, universe_id: Any) -> int:
        """Row of ``universe_id``; InputError if no ok verdict belongs to it."""
        hits = np.flatnonzero(self.universes["universe_id"].to_numpy() == universe_id)
        if len(hits) == 0:
            raise InputError(
                f"verdicts: universe_id: expected the primary universe {universe_id!r} "
                "to have ok verdicts"
            )
        return int(hits[0])


_REQUIRED = ("system", "case_id", "compliant")


def _derived_universe_ids(ok: pd.DataFrame, axes: Sequence[str]) -> np.ndarray:
    """The ids ``tables.universe_ids`` gives, so every analysis names universes alike."""
    return cast("np.ndarray", universe_ids(ok, list(axes)).to_numpy(dtype=object))


def _ok_verdicts(
    verdicts: pd.DataFrame, axes: Sequence[str]
) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows that count (status ok when present, a compliant label) and their labels."""
    if not isinstance(verdicts, pd.DataFrame):
        raise InputError("verdicts: expected a pandas DataFrame or a CaseMatrix")
    missing = [c for c in (*_REQUIRED, *axes) if c not in verdicts.columns]
    if missing:
        raise InputError(f"verdicts: {', '.join(missing)}: expected column(s) to be present")
    scored = CONTRIBUTION in verdicts.columns
    keep = verdicts[CONTRIBUTION if scored else "compliant"].notna().to_numpy(dtype=bool, copy=True)
    keep &= counted_rows(verdicts)
    columns = [c for c in ("universe_id", *axes, *_REQUIRED, *([CONTRIBUTION] if scored else [])) if c in verdicts.columns]
    # Copy-on-write: selecting columns of a table with no failed rows is free,
    # which matters at tens of millions of verdicts.
    ok = verdicts[columns] if keep.all() else verdicts.loc[keep, columns]
    labels = ok["compliant"]
    if scored:
        # Scores: each row's contribution in [0, 1] (analysis.estimates), summed per case.
        compliant = ok[CONTRIBUTION].to_numpy(dtype=float)
    elif pd.api.types.is_bool_dtype(labels.dtype):
        compliant = labels.to_numpy(dtype=bool)
    else:
        try:
            numeric = labels.to_numpy(dtype=float)
        except (TypeError, ValueError):
            numeric = np.array([np.nan])
        if not np.isin(numeric, (0.0, 1.0)).all():
            raise InputError("verdicts: compliant: expected booleans (True/False or 1/0)")
        compliant = numeric == 1.0
    if "universe_id" not in ok.columns:
        ok = ok.assign(universe_id=_derived_universe_ids(ok, axes))
    elif ok["universe_id"].isna().any():
        raise InputError("verdicts: universe_id: expected no missing values")
    return ok, compliant


def case_matrix(
    verdicts: pd.DataFrame,
    *,
    axes: Sequence[str],
    systems: Sequence[str] | None = None,
) -> CaseMatrix:
    """Build the system x universe x case count arrays from a verdicts table.

    ``verdicts`` needs ``system``, ``case_id``, ``compliant`` and the ``axes``
    columns; ``status`` and ``universe_id`` are optional (only ``ok`` rows
    count; a missing ``universe_id`` is derived from the axis options).
    ``systems`` restricts and orders the systems (default: all, sorted).
    """
    axes = axes_list(axes)
    if (systems is None and isinstance(verdicts, pd.DataFrame) and "universe_id" in verdicts.columns
            and pd.api.types.is_bool_dtype(verdicts["compliant"].dtype) and CONTRIBUTION not in verdicts.columns
            and all(c in verdicts.columns for c in (*_REQUIRED, *axes))):
        return _case_matrix_from_codes(verdicts, axes)
    ok, compliant = _ok_verdicts(verdicts, axes)
    if systems is not None:
        systems = [systems] if isinstance(systems, str) else list(systems)
        absent = sorted(set(systems) - set(ok["system"].unique()), key=str)
        if absent:
            raise InputError(
                f"verdicts: system: expected ok verdicts for {', '.join(map(str, absent))}"
            )
        chosen = ok["system"].isin(systems).to_numpy()
        ok, compliant = ok[chosen], compliant[chosen]
    if ok.empty:
        raise InputError("verdicts: status: expected at least one ok verdict with a compliant label")
    u_codes, u_ids = pd.factorize(ok["universe_id"], sort=True)
    first = np.unique(u_codes, return_index=True)[1]
    universes = ok.iloc[first][["universe_id", *axes]].reset_index(drop=True)
    for axis in axes:
        # One option per axis per universe: every row must carry the option
        # of its universe's first row.
        a_codes = pd.factorize(ok[axis])[0]
        if (a_codes != a_codes[first][u_codes]).any():
            raise InputError(f"verdicts: {axis}: expected one option per universe_id")
    c_codes, c_ids = pd.factorize(ok["case_id"], sort=True)
    if systems is None:
        s_codes, s_ids = pd.factorize(ok["system"], sort=True)
        system_names = tuple(s_ids)
    else:
        system_names = tuple(systems)
        s_codes = pd.Index(system_names).get_indexer(ok["system"])
    n_s, n_u, n_c = len(system_names), len(u_ids), len(c_ids)
    flat = (s_codes.astype(np.int64) * n_u + u_codes) * n_c + c_codes
    del u_codes, c_codes, s_codes
    size = n_s * n_u * n_c
    included = np.bincount(flat, minlength=size).astype(float)
    squares = None
    if compliant.dtype == bool:
        n_compliant = np.bincount(flat[compliant], minlength=size).astype(float)
    else:
        n_compliant = np.bincount(flat, weights=compliant, minlength=size)
        squares = np.bincount(flat, weights=compliant * compliant, minlength=size).reshape(n_s, n_u, n_c)
    return CaseMatrix(
        universes=universes,
        axes=tuple(axes),
        systems=system_names,
        cases=pd.Index(c_ids, name="case_id"),
        compliant=n_compliant.reshape(n_s, n_u, n_c),
        included=included.reshape(n_s, n_u, n_c),
        squares=squares,
    )


def _case_matrix_from_codes(verdicts: pd.DataFrame, axes: list[str]) -> CaseMatrix:
    """:func:`case_matrix` of a table with universe ids and boolean labels, from its columns' codes.

    The same arrays as filtering the table to its ok rows and factorizing
    them, without copying the table (1 GB at 60M rows) or holding int64 codes
    of each column (0.5 GB each): a categorical's own codes are relabelled,
    the failed rows masked, and the counts taken one system at a time.
    """
    labels = verdicts["compliant"]
    keep = labels.notna().to_numpy(dtype=bool, copy=True)
    keep &= counted_rows(verdicts)
    if not keep.any():
        raise InputError("verdicts: status: expected at least one ok verdict with a compliant label")
    compliant = labels.to_numpy(dtype=bool, na_value=False)
    u_codes, u_ids = _kept_codes(verdicts["universe_id"], keep)
    s_codes, s_ids = _kept_codes(verdicts["system"], keep)
    c_codes, c_ids = _kept_codes(verdicts["case_id"], keep)
    for name, codes in (("universe_id", u_codes), ("system", s_codes), ("case_id", c_codes)):
        if ((codes < 0) & keep).any():  # a missing value's code is -1
            raise InputError(f"verdicts: {name}: expected no missing values")
    first = blocks.first_rows(u_codes, keep)  # each universe's first counted row
    # Columns first: taking rows of every column copied the text ones whole (Arrow keeps the copy).
    universes = verdicts[["universe_id", *axes]].iloc[first].reset_index(drop=True)
    _check_one_option_per_universe(verdicts, axes, u_codes, keep, first)
    n_s, n_u, n_c = len(s_ids), len(u_ids), len(c_ids)
    included, n_compliant = _cell_counts((s_codes, u_codes, c_codes), keep, compliant, (n_s, n_u, n_c), first)
    return CaseMatrix(
        universes=universes,
        axes=tuple(axes),
        systems=tuple(s_ids),
        cases=pd.Index(c_ids, name="case_id"),
        compliant=n_compliant.reshape(n_s, n_u, n_c),
        included=included.reshape(n_s, n_u, n_c),
    )


def _cell_counts(codes: tuple[np.ndarray, np.ndarray, np.ndarray], keep: np.ndarray, compliant: np.ndarray,
                 shape: tuple[int, int, int], first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kept rows and compliant kept rows per system x universe x case (flat float64 arrays), counted a piece
    of rows at a time. Rows come a universe at a time, so a piece's rows belong to a few universes that
    appear one after another: each piece is counted into the window of cells of those universes, numbered
    in order of appearance (``first``: each universe's first kept row), and the universes put in code
    order at the end. No row-length array of cell numbers (0.5 GB at 60M rows) and no count over all
    cells per row. Rows in another order (a piece whose universes spread wide) are counted all at once."""
    (s_codes, u_codes, c_codes), (n_s, n_u, n_c) = codes, shape
    appearance = np.empty(n_u, dtype=np.int64)
    appearance[np.argsort(first, kind="stable")] = np.arange(n_u)  # a universe code's place in row order
    # float64: the matrix's own memory, counted into where it lies (np.zeros maps it as it is first written)
    included, n_compliant = np.zeros((n_s, n_u * n_c)), np.zeros((n_s, n_u * n_c))

    def piece_counts(start: int) -> tuple[int, int, np.ndarray, np.ndarray] | None:
        """The piece's (first, last + 1) universe in row order and its counts in their window; None when
        its universes spread wide."""
        piece = slice(start, start + blocks.PIECE_ROWS)
        kept = keep[piece]
        u = appearance[u_codes[piece][kept]]
        if not len(u):
            return 0, 0, np.zeros(0), np.zeros(0)
        lo, hi = int(u.min()), int(u.max()) + 1
        window = (hi - lo) * n_c
        if n_s * window > 4 * len(u) + n_s * n_c:
            return None
        s, c, k = s_codes[piece][kept], c_codes[piece][kept], compliant[piece][kept]
        local = (s.astype(np.int64) * (hi - lo) + (u - lo)) * n_c + c  # system x window of universes x case
        return (lo, hi, np.bincount(local, minlength=n_s * window).reshape(n_s, window),
                np.bincount(local[k], minlength=n_s * window).reshape(n_s, window))

    # Pieces counted a core each, added in row order (whole numbers: exact in any order).
    for read in in_order(piece_counts, range(0, len(keep), blocks.PIECE_ROWS)):
        if read is None:
            return _all_cell_counts(codes, keep, compliant, shape)
        lo, hi, counted, counted_compliant = read
        if hi > lo:
            included[:, lo * n_c:hi * n_c] += counted
            n_compliant[:, lo * n_c:hi * n_c] += counted_compliant
    # Universes into code order where they lie, a system at a time through one scratch block: a fresh
    # copy of both matrices cost more in memory mapped for the first time than the counting itself.
    scratch = np.empty((n_u, n_c))
    for counts in (included, n_compliant):
        for system in range(n_s):
            block = counts[system].reshape(n_u, n_c)
            np.take(block, appearance, axis=0, out=scratch, mode="clip")  # "raise" buffers the output
            block[...] = scratch
    return included.reshape(-1), n_compliant.reshape(-1)


def _all_cell_counts(codes: tuple[np.ndarray, np.ndarray, np.ndarray], keep: np.ndarray, compliant: np.ndarray,
                     shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``_cell_counts`` of rows in any order: every row's cell number at once."""
    (s_codes, u_codes, c_codes), (n_s, n_u, n_c) = codes, shape
    size = n_s * n_u * n_c
    # One int64 array of cells, built and then overwritten in place: bincount reads int64 (intp), and on a
    # machine where fresh memory is slow to map, each large temporary costs more than the arithmetic.
    # Rows that don't count go to one extra bin, then the rows that are not compliant.
    cell = s_codes.astype(np.int64)
    cell *= n_u
    cell += u_codes
    cell *= n_c
    cell += c_codes
    np.putmask(cell, ~keep, size)
    included = _floats_in_place(np.bincount(cell, minlength=size + 1))[:size]
    np.putmask(cell, ~compliant, size)
    n_compliant = _floats_in_place(np.bincount(cell, minlength=size + 1))[:size]
    return included, n_compliant


def _check_one_option_per_universe(verdicts: pd.DataFrame, axes: list[str], u_codes: np.ndarray, keep: np.ndarray,
                                   first: np.ndarray) -> None:
    """Refuse a kept row whose option of an axis is not its universe's (the option at the universe's first
    kept row). The axes' codes are combined into one number per row, a piece of rows at a time, and
    compared once: compared axis by axis, each was a gather over every row (4 s for 8 axes at 60M rows).
    A mismatch is then looked for axis by axis, to name the axis."""
    columns, radices = [], []
    for axis in axes:
        # Equal codes, equal options: the column's own codes will do (no relabelling for the kept rows).
        column = verdicts[axis]
        if isinstance(column.dtype, pd.CategoricalDtype):
            columns.append(np.asarray(column.array.codes))  # a view: .cat.codes copies
            radices.append(len(column.cat.categories) + 1)  # + 1: a missing option's code is -1
        else:
            codes, uniques = pd.factorize(column)
            columns.append(codes)
            radices.append(len(uniques) + 1)
    groups: list[list[int]] = []  # axes whose combined codes stay below 2^62
    room = 0
    for i, radix in enumerate(radices):
        if not groups or room * radix >= 2**62:
            groups.append([])
            room = 1
        groups[-1].append(i)
        room *= radix

    def combined(group: list[int], rows: slice | np.ndarray) -> np.ndarray:
        # Mixed radix of the codes + 1 (in [0, radix)), less a constant: the codes (-1 included) combine
        # to distinct numbers. int32 where they fit: half the memory to stream.
        kind = np.int32 if np.prod([radices[i] for i in group], dtype=float) < 2**31 else np.int64
        out = np.zeros(len(u_codes[rows]), dtype=kind)
        for i in group:
            np.multiply(out, radices[i], out=out)
            np.add(out, columns[i][rows], out=out, casting="unsafe")
        return out

    for group in groups:
        expected = combined(group, first)  # per universe code, in code order
        for start in range(0, len(u_codes), blocks.PIECE_ROWS):
            piece = slice(start, start + blocks.PIECE_ROWS)
            if ((combined(group, piece) != expected[u_codes[piece]]) & keep[piece]).any():
                for i in group:
                    if ((columns[i] != columns[i][first][u_codes]) & keep).any():
                        raise InputError(f"verdicts: {axes[i]}: expected one option per universe_id")


def _floats_in_place(counts: np.ndarray) -> np.ndarray:
    """int64 counts as float64 in the same memory, a block at a time (``astype`` made a second array as
    large: at 100k universes 480 MB of fresh memory, each)."""
    floats = counts.view(np.float64)
    for start in range(0, len(counts), blocks.PIECE_ROWS):
        block = slice(start, start + blocks.PIECE_ROWS)
        floats[block] = counts[block]  # numpy copies an overlapping block first: a small buffer
    return floats



def _kept_codes(column: pd.Series, keep: np.ndarray) -> tuple[np.ndarray, Any]:
    """Codes of every row and the sorted values, as ``pd.factorize(column[keep], sort=True)`` gives them
    for the kept rows (values of no kept row left out; a missing value's code is -1)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, values = np.asarray(column.array.codes), None  # a view: .cat.codes copies
    else:
        codes, values = pd.factorize(column, sort=True)
    n = len(column.cat.categories) if values is None else len(values)
    present = np.zeros(n + 1, dtype=bool)  # the last slot takes code -1
    for start in range(0, len(codes), blocks.PIECE_ROWS):
        block = slice(start, start + blocks.PIECE_ROWS)
        present[codes[block][keep[block]]] = True
    used = present[:n]
    kept = values[used] if values is not None else pd.CategoricalIndex(
        pd.Categorical.from_codes(np.flatnonzero(used), dtype=column.dtype))
    if not used.all():  # relabelled; with every value kept the codes are already these (no copy)
        relabel = np.full(n + 1, -1, dtype=np.int64)
        relabel[:n][used] = np.arange(int(used.sum()))
        kind = np.int8 if n < 2**7 else np.int16 if n < 2**15 else np.int32 if n < 2**31 else np.int64
        codes = relabel.astype(kind)[codes]
    return codes, kept


def axes_list(axes: Sequence[str] | str | None) -> list[str]:
    if axes is None:
        return []
    return [axes] if isinstance(axes, str) else list(axes)


def as_matrix(
    verdicts: pd.DataFrame | CaseMatrix, axes: Sequence[str], systems: Sequence[str] | None
) -> CaseMatrix:
    if isinstance(verdicts, CaseMatrix):
        return verdicts
    return case_matrix(verdicts, axes=axes, systems=systems)


# --------------------------------------------------------------------------
# Paired differences
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Paired:
    """Case contributions to rate(a) - rate(b) over paired cases, per universe."""

    rows: np.ndarray  # universe rows kept (>= 1 paired case)
    contribution: np.ndarray  # d, (universes, cases), sums to the difference
    weight: np.ndarray  # w, (universes, cases), sums to 1
    n_cases: np.ndarray
    n_a: np.ndarray
    n_b: np.ndarray
    rate_a: np.ndarray
    rate_b: np.ndarray


def paired_cases(m: CaseMatrix, a: str, b: str) -> _Paired:
    if a == b:
        raise InputError(f"verdicts: system: expected two different systems, got {a!r} twice")
    ia, ib = m.system_index(a), m.system_index(b)
    both = (m.included[ia] > 0) & (m.included[ib] > 0)
    rows = np.flatnonzero(both.any(axis=1))
    both = both[rows]
    na_c = np.where(both, m.included[ia][rows], 0.0)
    nb_c = np.where(both, m.included[ib][rows], 0.0)
    ka_c = np.where(both, m.compliant[ia][rows], 0.0)
    kb_c = np.where(both, m.compliant[ib][rows], 0.0)
    n_a, n_b = na_c.sum(axis=1), nb_c.sum(axis=1)
    contribution = ka_c / n_a[:, None] - kb_c / n_b[:, None]
    weight = (na_c + nb_c) / (n_a + n_b)[:, None]
    return _Paired(
        rows=rows,
        contribution=contribution,
        weight=weight,
        n_cases=both.sum(axis=1),
        n_a=n_a,
        n_b=n_b,
        rate_a=ka_c.sum(axis=1) / n_a,
        rate_b=kb_c.sum(axis=1) / n_b,
    )


def paired_z(
    diff: np.ndarray, q_dw: np.ndarray, q_dd: np.ndarray, q_ww: np.ndarray, n_cases: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(z, se) from D = sum d, q_dw = sum d w, q_dd = sum d^2, q_ww = sum w^2.

    ``sum (d - D w)^2`` is expanded so that, under sign flips, only ``D`` and
    ``q_dw`` change and both are matrix products.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(n_cases > 1, n_cases / (n_cases - 1.0), np.nan)
        var = factor * np.maximum(q_dd - 2.0 * diff * q_dw + diff**2 * q_ww, 0.0)
        se = np.sqrt(var)
        z = diff / se
    z = np.where(np.isnan(z), 0.0, z)
    return np.clip(z, -Z_CAP, Z_CAP), se


def plain_number(x: Any) -> float | int | None:
    if x is None:
        return None
    x = x.item() if isinstance(x, np.generic) else x
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return cast("float | int | None", x)
