"""Pairwise verdicts: three-way agreement (A / tie / B) and a judge's consistency across the two orders.

A pairwise score is the row's system's preference over the reference: above the scale's midpoint a
win, at it a tie, below it a loss. Read as a three-way verdict (win 1, tie 0, loss -1), two options
are compared as raters of a nominal label: percent agreement, Cohen's kappa on the 3 x 3 table
(sklearn's ``cohen_kappa_score``, held to it by a test) and Krippendorff's alpha (nominal, the
``krippendorff`` package) over all options.

When the options compared are the two orders of a pairwise comparison (``ab``: the system shown
first, ``ba``: the reference shown first), each group of universes that differ only in the order
(one judge, say) is a judge asked twice. Pooling judges hides one judge's inconsistency behind
the others' (a judge consistent in 0.756 of pairs read 0.961 pooled), so each group is reported on
its own:

- ``consistency``: the share of pairs with the same verdict in both orders;
- ``position_bias``: the share of decisive (non-tie) verdicts, both orders together, that went to
  the transcript shown first; one half is no bias. A system is first in ``ab`` and second in
  ``ba``, so its quality cancels out of this share;
- ``favours_first`` / ``favours_second``: the share of pairs whose first (second) transcript won in
  both orders: the inconsistencies that are position bias (MT-Bench's breakdown);
- ``cohen_kappa``: 3-class kappa between the two orders.

Units pair on system, case and replicate within a group; the reference system's own rows (a tie
with itself by construction) are left out. An axis whose options all hold the same judgments (a
scoring option such as a cut) makes no groups: it would repeat each judge's row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from multiverse.core import counted_rows

from ._binary import SMALL, cohen_kappa

__all__ = ["FIRST", "SECOND", "VERDICTS", "is_order_axis", "order_consistency", "three_way", "verdict_agreement"]

#: The order options: the system shown first (``ab``) or second (``ba``), as ``judge.order`` names them.
FIRST, SECOND = "ab", "ba"
#: The three-way verdicts in code order (-1, 0, 1), on the row's system's side.
VERDICTS = ("loss", "tie", "win")
_KEYS = ("system", "case_id", "replicate")


def three_way(scores: np.ndarray | pd.Series, scale: Mapping[str, Any]) -> np.ndarray:
    """Win 1, tie 0, loss -1 (float, NaN where there is no score) of pairwise scores on ``scale``."""
    values = np.asarray(scores, dtype=float)
    midpoint = (float(scale["min"]) + float(scale["max"])) / 2
    # A preference read back from text may sit a rounding error off the midpoint: still a tie.
    return np.where(np.isnan(values), np.nan, np.sign(np.where(np.isclose(values, midpoint), midpoint, values)
                                                        - midpoint))


def is_order_axis(options: Sequence[Any], orders: Mapping[str, str] | None = None) -> bool:
    """Whether an axis's options include both orders of a pairwise comparison (``orders``: option -> order)."""
    return {FIRST, SECOND} <= {(orders or {}).get(str(o), str(o)) for o in options}


def _verdict_rows(verdicts: pd.DataFrame, scale: Mapping[str, Any]) -> pd.DataFrame:
    """Counted rows with a score, as three-way verdicts; the reference system's own rows left out."""
    rows = verdicts[counted_rows(verdicts) & verdicts["score"].notna().to_numpy()]
    reference = scale.get("reference")
    if reference is not None:
        rows = rows[rows["system"].astype(str) != str(reference)]
    rows = rows.assign(verdict=three_way(rows["score"], scale))
    if "replicate" not in rows.columns:
        rows = rows.assign(replicate=0)
    return rows


def _wide(rows: pd.DataFrame, group: list[str], axis: str) -> pd.DataFrame:
    """Units (group, system, case, replicate) x options of ``axis``: the verdict, NaN where not given.

    A unit given twice by one option keeps its first row, as the labels' agreement pairs in table order.
    """
    keys = [*group, *_KEYS]
    first = rows.drop_duplicates([*keys, axis])
    return first.pivot(index=keys, columns=axis, values="verdict")


def _table(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The 3 x 3 table of two verdict arrays (codes -1, 0, 1)."""
    table = np.zeros((3, 3))
    np.add.at(table, (a.astype(int) + 1, b.astype(int) + 1), 1.0)
    return table


def _alpha(matrix: np.ndarray) -> float:
    """Nominal Krippendorff alpha of a units x options verdict matrix (NaN: not given)."""
    import krippendorff

    pairable = np.count_nonzero(~np.isnan(matrix), axis=1) >= 2
    data = matrix[pairable].T
    if data.size == 0 or len(np.unique(data[~np.isnan(data)])) < 2:
        return float("nan")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal",
                                     value_domain=[-1.0, 0.0, 1.0]))


def verdict_agreement(verdicts: pd.DataFrame, *, axes: Sequence[str], axis: str,
                      scale: Mapping[str, Any]) -> dict[str, Any]:
    """Agreement of the options of ``axis`` on three-way verdicts (see the module).

    Returns ``{"options", "n_units", "pairs": [{"a", "b", "n", "percent", "cohen_kappa", "small_sample",
    "table"}], "krippendorff_alpha", "notes"}``; ``table`` is the 3 x 3 counts, rows a's loss, tie, win.
    """
    rows = _verdict_rows(verdicts, scale)
    others = [a for a in axes if a != axis and a != "score"]
    wide = _wide(rows, others, axis)
    options = sorted(wide.columns, key=str)
    wide = wide[options]
    matrix = wide.to_numpy(dtype=float)
    pairs, notes = [], []
    for i, a in enumerate(options):
        for j in range(i + 1, len(options)):
            both = ~np.isnan(matrix[:, i]) & ~np.isnan(matrix[:, j])
            x, y = matrix[both, i], matrix[both, j]
            table = _table(x, y)
            kappa = cohen_kappa(table)
            pairs.append({"a": a, "b": options[j], "n": int(both.sum()),
                          "percent": float((x == y).mean()) if both.any() else float("nan"),
                          "cohen_kappa": kappa, "small_sample": bool(both.sum() < SMALL),
                          "table": table.astype(int).tolist()})
            if both.any() and np.isnan(kappa):
                notes.append(f"{a} vs {options[j]}: every paired verdict is the same: kappa is undefined")
    n_units = int((np.count_nonzero(~np.isnan(matrix), axis=1) >= 2).sum())
    return {"options": options, "n_units": n_units, "pairs": pairs, "krippendorff_alpha": _alpha(matrix),
            "notes": notes}


def order_consistency(verdicts: pd.DataFrame, *, axes: Sequence[str], axis: str, scale: Mapping[str, Any],
                      orders: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Per group of universes that differ only in the order (``axis``): a judge asked both ways.

    The options named ``ab`` and ``ba`` are the orders, or those ``orders`` maps to them (a spec's
    axis may name its options as it likes: ``{first: {judge.order: ab}, ...}``).

    Returns one dict per group, in the groups' sorted order::

        {"group": {other axis: option}, "n": int,   # pairs judged in both orders
         "consistency": float, "position_bias": float, "first_wins": int, "decisive": int,
         "favours_first": float, "favours_second": float, "ties": float, "cohen_kappa": float,
         "small_sample": bool}

    Undefined shares (no pairs, no decisive verdict) are NaN.
    """
    rows = _verdict_rows(verdicts, scale)
    named = rows[axis].astype(str)
    rows = rows.assign(**{axis: named.map(lambda o: (orders or {}).get(o, o))})
    rows = rows[rows[axis].isin((FIRST, SECOND)).to_numpy()]
    others = [a for a in axes if a != axis and a != "score"]
    # An axis that repeats the same judgments (a scoring option) would repeat each judge's row: not a group.
    others = [a for a in others if not _repeats_judgments(rows, a)]
    out = []
    groups = rows.groupby(others, sort=True, dropna=False) if others else [((), rows)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        wide = _wide(part, [], axis).reindex(columns=[FIRST, SECOND])
        wide = wide.dropna()
        # Plain Python values: a numeric axis's options come out of the groups as numpy scalars.
        group = {a: v.item() if isinstance(v, np.generic) else v for a, v in zip(others, key)}
        out.append({"group": group, **_consistency(wide[FIRST].to_numpy(), wide[SECOND].to_numpy())})
    return out


def _repeats_judgments(rows: pd.DataFrame, axis: str) -> bool:
    """Whether every option of ``axis`` holds the same judgments (as contexts differing only in scoring do)."""
    if "judgment_key" not in rows.columns or rows["judgment_key"].isna().any():
        return False
    sets = [frozenset(keys) for _, keys in rows.groupby(axis, sort=False)["judgment_key"]]
    return len(sets) > 1 and all(s == sets[0] for s in sets[1:])


def _consistency(ab: np.ndarray, ba: np.ndarray) -> dict[str, Any]:
    """The order measures of one judge's paired verdicts (system's side: ``ab`` shows it first)."""
    n = len(ab)
    # The first transcript wins: the system's win when it is first (ab), its loss when second (ba).
    first_wins = int((ab == 1).sum() + (ba == -1).sum())
    decisive = int((ab != 0).sum() + (ba != 0).sum())

    def share(count: float, of: int) -> float:
        return float(count / of) if of else float("nan")

    return {
        "n": n,
        "consistency": share((ab == ba).sum(), n),
        "position_bias": share(first_wins, decisive),
        "first_wins": first_wins,
        "decisive": decisive,
        "favours_first": share(((ab == 1) & (ba == -1)).sum(), n),
        "favours_second": share(((ab == -1) & (ba == 1)).sum(), n),
        "ties": share((ab == 0).sum() + (ba == 0).sum(), 2 * n),
        "cohen_kappa": cohen_kappa(_table(ab, ba)) if n else float("nan"),
        "small_sample": n < SMALL,
    }
