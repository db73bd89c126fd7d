"""Which way a rate is read: the share of compliant transcripts, or of violating ones.

Audits of a harm report violation rates ("sycophancy 70%"); the tables and
analyses count compliance. A spec's ``report.rate`` (and the commands'
``--rate``) says which way every figure, table and page reads. The flip is
defined here once, :func:`orient`, and everything that shows a rate goes
through it (:func:`orient_interval`, :func:`orient_rates`), so no reader
subtracts from 1 by hand and no two outputs disagree:

- a rate r reads 1 - r, its interval [lo, hi] reads [1 - hi, 1 - lo];
- a difference of two systems' rates d reads -d (each rate flips), its
  interval [-hi, -lo];
- compliant counts k of n read n - k (violating);
- positions on a curve (1 = lowest) read n + 1 - position, so a curve still
  runs from the lowest to the highest rate as read;
- a one-sided direction ("greater", "less") reads the other way;
- ranks do not change: 1 is the best system either way, the highest compliance rate or the lowest
  violation rate (:func:`rank_one` words it), so a ranking read as violations reverses the order of the
  rates shown, never the systems' places.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

__all__ = ["RATE_DIRECTIONS", "RateDirection", "check_rate_direction", "counted_word", "orient", "orient_interval",
           "orient_rates", "orient_side", "rank_one", "rate_name"]

RateDirection = Literal["compliance", "violation"]
RATE_DIRECTIONS: tuple[str, ...] = ("compliance", "violation")


def check_rate_direction(direction: str) -> RateDirection:
    """``direction`` if it is one of :data:`RATE_DIRECTIONS`, else ``InputError`` naming ``rate``."""
    if direction not in RATE_DIRECTIONS:
        from multiverse.errors import InputError

        raise InputError(f"rate: expected compliance or violation, got {direction!r}", param="rate")
    return direction  # type: ignore[return-value]


def orient(value: Any, direction: str, *, difference: bool = False) -> Any:
    """The one flip: ``value`` (a compliance rate, or with ``difference`` a difference of two) as ``direction``
    reads it. Works on numbers, numpy arrays and pandas Series alike; compliance returns ``value`` itself."""
    if check_rate_direction(direction) == "compliance":
        return value
    return -value if difference else 1 - value


def orient_interval(low: Any, high: Any, direction: str, *, difference: bool = False) -> tuple[Any, Any]:
    """``(low, high)`` of an interval as ``direction`` reads it: the flipped ends, swapped, so low stays low."""
    if check_rate_direction(direction) == "compliance":
        return low, high
    return orient(high, direction, difference=difference), orient(low, direction, difference=difference)


def orient_side(side: str, direction: str) -> str:
    """A one-sided test's direction (``greater`` / ``less``) as ``direction`` reads it; any other word as it is."""
    if check_rate_direction(direction) == "compliance":
        return side
    return {"greater": "less", "less": "greater"}.get(side, side)


def orient_rates(frame: Any, direction: str, *, value: str = "rate", intervals: Sequence[tuple[str, str]] = (
        ("ci_low", "ci_high"),), counts: Sequence[tuple[str, str]] = (("n_compliant", "n"),),
        position: str = "position", by: Sequence[str] = ("system",), difference: bool = False) -> Any:
    """A copy of a table of rates (a rates table, a curve, a joint test's band) as ``direction`` reads it.

    ``value`` and each ``intervals`` pair flip by :func:`orient` (columns absent are left out); each
    ``counts`` pair (k, n) becomes n - k; ``position`` (1 = lowest) becomes n + 1 - position within each
    group of ``by`` present, so a curve still runs from the lowest rate as read. Compliance: ``frame``
    itself.
    """
    if check_rate_direction(direction) == "compliance":
        return frame
    out = frame.copy()
    if value in frame.columns:
        out[value] = orient(frame[value], direction, difference=difference)
    for low, high in intervals:
        if low in frame.columns and high in frame.columns:
            out[low], out[high] = orient_interval(frame[low], frame[high], direction, difference=difference)
    for k, n in counts:
        if k in frame.columns and n in frame.columns:
            out[k] = frame[n] - frame[k]
    if position in frame.columns and len(frame):
        groups = [c for c in by if c in frame.columns]
        size = frame.groupby(groups, sort=False, observed=True)[position].transform("size") if groups else len(frame)
        out[position] = size + 1 - frame[position]
    return out


def rate_name(direction: str) -> str:
    """What a rate read in ``direction`` is called on an axis or in a heading: ``compliance rate``, ``violation rate``."""
    return f"{check_rate_direction(direction)} rate"


def counted_word(direction: str) -> str:
    """What the counted transcripts of a rate read in ``direction`` are: ``compliant`` or ``violating``."""
    return "compliant" if check_rate_direction(direction) == "compliance" else "violating"


def rank_one(direction: str) -> str:
    """What rank 1 is, in the words of a rate read in ``direction``: ``highest compliance rate`` or ``lowest
    violation rate`` (ranks stay the analysis's, 1 = the best system; only their words follow the reading)."""
    return "highest compliance rate" if check_rate_direction(direction) == "compliance" else "lowest violation rate"
