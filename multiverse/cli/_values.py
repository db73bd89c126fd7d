"""The command line's value types: each flag value is checked as argparse parses it, so a bad one is refused
with argparse's one line (naming the flag) before any command runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

__all__ = ["MAX_BOOT", "MAX_JOBS", "budget", "count", "finite", "primary_option", "rate", "rate_or_primary",
           "scale", "scorer_scale", "size", "store_place"]

def store_place(text: str) -> Path | str:
    """A ``--store``: a directory, or a ``postgresql://`` URL kept as it is (a path would fold its ``//``)."""
    from multiverse.store import is_server

    return text if is_server(text) else Path(text)


MAX_BOOT = 100_000
MAX_JOBS = 1024


def count(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number in [minimum, maximum]; argparse names the flag in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            top = f" and <= {maximum:,}" if maximum is not None else ""
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}{top}, got {value}")
        return value

    return parse


def finite(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def scale(text: str) -> tuple[float, float]:
    low, sep, high = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected LOW:HIGH (e.g. 1:10), got {text!r}")
    ends = finite(low), finite(high)
    if not ends[0] < ends[1]:
        raise argparse.ArgumentTypeError(f"expected LOW below HIGH, got {text!r}")
    return ends


def scorer_scale(text: str) -> tuple[str, tuple[float, float]]:
    scorer, sep, ends = text.rpartition("=")
    return (scorer.strip() if sep else "*"), scale(ends)


def rate(text: str) -> float:
    value = finite(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {text!r}")
    return value


def rate_or_primary(text: str) -> float | str:
    # The API's threshold="primary": each system against its own primary rate.
    return "primary" if text.strip().lower() == "primary" else rate(text)


def budget(text: str) -> float:
    try:
        value = finite(text)
    except argparse.ArgumentTypeError:
        # nan would compare false against every spend and silently switch the cap off.
        raise argparse.ArgumentTypeError(f"expected a finite amount in USD, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a budget >= 0, got {text!r}")
    return value


def primary_option(text: str) -> tuple[str, str]:
    axis, sep, option = text.partition("=")
    if not sep or not axis.strip() or not option.strip():
        raise argparse.ArgumentTypeError(f"expected AXIS=OPTION, got {text!r}")
    return axis.strip(), option.strip()


def size(text: str) -> int:
    """An argparse type: a size in bytes, with an optional K, M or G (powers of 1024)."""
    number, unit = text.strip().upper().rstrip("B") or "x", 1
    if number[-1:] in ("K", "M", "G"):
        number, unit = number[:-1], 2 ** (10 * ("KMG".index(number[-1]) + 1))
    try:
        value = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 1G, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a size >= 1, got {text!r}")
    return value * unit
