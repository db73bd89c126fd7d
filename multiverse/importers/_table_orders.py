"""A table of pairwise comparisons asked in both orders: the order column, three-way verdicts, combined games.

A pairwise judge is asked twice, the row's system shown first (``ab``) and second (``ba``), because
judges favour a position. ``order`` names the column holding which: ``ab`` or ``ba`` in any case,
nothing else (a third value is refused), and every pair (the other axes, system, item, replicate)
must have both orders: a pair with one is refused, since the consistency of a judge across orders
is read on pairs judged both ways. The column becomes an axis with options ``ab`` and ``ba``.

``verdict`` names a column of three-way verdicts as judges write them: ``A`` (the transcript
shown first is better), ``tie``, ``B`` (any case). Read on the row's system's side through the
order (without an order column the system is A), they are a pairwise score on 0:1: a win 1, a tie
0.5, a loss 0, so the win rate counts a tie as half.

``combine`` adds universes that combine both games of each pair, as options of the order axis:

- ``agree``: the verdict both orders agree on (the mean of the two scores), a tie when they
  disagree (pairwise scores);
- ``mean``: the mean of the two preferences (pairwise scores; what ``judge.order: both`` gives);
- ``both``: compliant only when compliant in both orders (labels: a judge "correct in both orders").

A combined row is counted when both of its games are; otherwise it is excluded, saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from multiverse.analysis import three_way
from multiverse.core import OK, nfc, universe_id
from multiverse.errors import InputError
from multiverse.tables import ScaleRecord

__all__ = ["COMBINE_RULES", "both_orders", "check_both_orders", "combine_orders", "pairwise_columns", "read_orders",
           "read_verdicts"]

#: The rules that combine both games, and which kind of table each reads.
COMBINE_RULES = {"agree": "scores", "mean": "scores", "both": "labels"}
_ORDERS = ("ab", "ba")
_VERDICTS = {"a": 1.0, "tie": 0.5, "b": 0.0}


def pairwise_columns(path: Path, frame: pd.DataFrame, order: str | None, verdict: str | None, score: str | None,
                     scale: tuple[float, float] | None, reference: str | None, combine: Sequence[str],
                     axes: list[str], no_grade: Sequence[str] = ()
                     ) -> tuple[pd.DataFrame, str | None, tuple[float, float] | None, list[str], str | None]:
    """The table with its order column read (an axis) and its verdicts read as scores on 0:1.

    Returns (frame, score column, scale, axes, order column) for the rest of the import, which reads
    scores as usual (a verdict named by ``no_grade`` is read as missing, for the import to mark); the columns named in one spelling (NFC), as the table's are.
    """
    order, verdict = (nfc(order) if order is not None else None), (nfc(verdict) if verdict is not None else None)
    if combine and order is None:
        raise InputError(f"{path}: combine: combining both games needs the `order` column", param="combine")
    for role, column in (("order", order), ("verdict", verdict)):
        if column is not None and column not in frame.columns:
            raise InputError(f"{path}: {column}: column not found (the `{role}` column)", param=role)
    frame = frame.copy() if order is not None or verdict is not None else frame
    orders = None
    if order is not None:
        orders = read_orders(path, frame[order], order)
        frame[order] = orders
        # Compared in one spelling, as the import names its axes (NFC).
        axes = axes if order in {nfc(a) for a in axes} else [*axes, order]
    if verdict is not None:
        if score is not None or reference is None:
            raise InputError(f"{path}: {verdict}: three-way verdicts are preferences over a `reference` system; "
                             "expected a `reference` and no `score` column", param="reference" if score is None
                             else "score")
        frame[verdict] = read_verdicts(path, frame[verdict], verdict, orders, no_grade)
        score, scale = verdict, (0.0, 1.0)
    return frame, score, scale, axes, order


def both_orders(path: Path, verdicts: pd.DataFrame, axes: Sequence[str], order: str | None, combine: Sequence[str],
                scale: ScaleRecord | None) -> pd.DataFrame:
    """The verdicts of a table with an order column, every pair checked for both orders and the games combined
    by each of ``combine``; the verdicts as they are without one."""
    if order is None:
        return verdicts
    check_both_orders(path, verdicts, axes, order)
    return combine_orders(path, verdicts, axes, order, combine, None if scale is None else (scale.min, scale.max))


def read_orders(path: Path, column: pd.Series, name: str) -> np.ndarray:
    """The order column as ``ab``/``ba``; anything else (empty included) refused in one line."""
    text = column.astype("string").str.strip().str.lower()
    bad = ~text.isin(_ORDERS).to_numpy(dtype=bool, na_value=False) | text.isna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{path}: {name}: expected the order ab (the row's system shown first) or ba (shown "
                         f"second), got {column.iloc[row]!r} in data row {row + 1}", param="order")
    return np.asarray(text.to_numpy(dtype=object))


def read_verdicts(path: Path, column: pd.Series, name: str, orders: np.ndarray | None,
                  no_grade: Sequence[str] = ()) -> pd.Series:
    """Three-way verdicts (A, tie, B) as the row's system's score on 0:1, as text (empty where missing or where
    a value ``no_grade`` names, read before the verdicts: ``no_grade=["tie"]`` makes a tie no grade)."""
    text = column.astype("string").str.strip()
    missing = (text.isna() | (text == "") | text.isin([str(v).strip() for v in no_grade])).to_numpy(bool)
    lowered = text.str.lower()
    bad = ~lowered.isin(list(_VERDICTS)).to_numpy(dtype=bool, na_value=False) & ~missing
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{path}: {name}: expected a three-way verdict A, tie or B, got {column.iloc[row]!r} in "
                         f"data row {row + 1}", param="verdict")
    first = lowered.map(_VERDICTS).to_numpy(dtype=float, na_value=np.nan)
    # A is the transcript shown first: the system's own in ab, the reference's in ba.
    score = first if orders is None else np.where(orders == "ba", 1.0 - first, first)
    return pd.Series(np.where(missing, "", pd.Series(score).map("{:g}".format)), index=column.index)


def check_both_orders(path: Path, verdicts: pd.DataFrame, axes: Sequence[str], order: str) -> None:
    """Refuse a pair (the other axes, system, item, replicate) judged in one order only."""
    keys = [a for a in axes if a != order] + ["system", "case_id", "replicate"]
    counts = verdicts.groupby(keys, sort=False)[order].nunique()
    one = counts[counts < 2]
    if len(one):
        where = ", ".join(f"{k}={v}" for k, v in zip(keys, one.index[0] if len(keys) > 1 else (one.index[0],)))
        have = verdicts.set_index(keys).loc[one.index[0], order]
        have = have.iloc[0] if isinstance(have, pd.Series) else have
        raise InputError(f"{path}: {order}: {len(one)} pairs have one order only ({where}: {have} only); expected "
                         "both orders, ab and ba, of every pair", param="order")


def combine_orders(path: Path, verdicts: pd.DataFrame, axes: Sequence[str], order: str, rules: Sequence[str],
                   scale: tuple[float, float] | None) -> pd.DataFrame:
    """The verdicts with one universe per rule added on the order axis: both games of each pair combined."""
    kind = "scores" if scale is not None else "labels"
    if len(set(rules)) < len(rules):
        raise InputError(f"{path}: combine: a rule is given twice; expected each rule once", param="combine")
    for rule in rules:
        if COMBINE_RULES.get(rule) != kind:
            fits = ", ".join(r for r, k in COMBINE_RULES.items() if k == kind)
            raise InputError(f"{path}: combine: {rule!r} does not combine {kind}; expected one of {fits}",
                             param="combine")
    if not rules:
        return verdicts
    others = [a for a in axes if a != order]
    keys = [*others, "system", "case_id", "replicate"]
    ab = verdicts[verdicts[order] == "ab"].set_index(keys)
    ba = verdicts[verdicts[order] == "ba"].set_index(keys).reindex(ab.index)
    both_ok = ((ab["status"] == OK) & (ba["status"] == OK)).to_numpy()
    parts = [verdicts]
    for rule in rules:
        part = ab.copy()
        part[order] = rule
        if scale is not None:
            first, second = ab["score"].to_numpy(dtype=float), ba["score"].to_numpy(dtype=float)
            ends = {"min": scale[0], "max": scale[1]}
            agree, midpoint = three_way(first, ends) == three_way(second, ends), (scale[0] + scale[1]) / 2
            mean = (first + second) / 2
            part["score"] = np.where(both_ok, mean if rule == "mean" else np.where(agree, mean, midpoint), np.nan)
        else:
            part["compliant"] = pd.array(np.where(both_ok, ab["compliant"].to_numpy(dtype=bool, na_value=False)
                                                  & ba["compliant"].to_numpy(dtype=bool, na_value=False), False),
                                         dtype="boolean")
            part.loc[~both_ok, "compliant"] = pd.NA
        part["status"] = np.where(both_ok, OK, "excluded")
        part["reason"] = np.where(both_ok, "", f"combine {rule}: an order without a counted verdict")
        part = part.reset_index()
        part["universe_id"] = [universe_id({**dict(zip(others, row)), order: rule})
                               for row in part[others].itertuples(index=False)] if others \
            else universe_id({order: rule})
        # Its own judgment: the combination of two, never one of them.
        hashed = pd.util.hash_pandas_object(part[["universe_id", "system", "case_id", "replicate"]], index=False)
        part["judgment_key"] = np.char.mod("%016x", hashed.to_numpy()).astype(object)
        parts.append(part[verdicts.columns])
    return pd.concat(parts, ignore_index=True)
