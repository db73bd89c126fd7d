"""What names a universe: its id and its label, one rule each for runs, imports and bare tables alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multiverse.core._keys import digest

__all__ = ["universe_id", "universe_label"]


def universe_id(options: Mapping[str, Any]) -> str:
    """A universe's id: the digest of its options, ``{axis: option}``, each as text.

    The one rule for every source (a run, a table import, an ASSERT import, a
    bare table), so a universe has the same id wherever its verdicts came from,
    and two runs of one design can be matched universe by universe. Options
    are compared as text, as they appear in a table's columns.
    """
    return digest({str(axis): str(option) for axis, option in options.items()}, 12)


def universe_label(options: Mapping[str, Any], *, compact: bool = False) -> str:
    """``axis=option · axis=option``, or ``base`` for the one universe of a grid without axes.

    ``compact`` leaves the axis names out (``option · option``), for the
    narrow row labels of a figure whose axes are named elsewhere.
    """
    if not options:
        return "base"
    return " · ".join(str(o) if compact else f"{a}={o}" for a, o in options.items())
