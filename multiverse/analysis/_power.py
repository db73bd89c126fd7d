"""Design power: how many cases an audit needs to tell two rates apart.

Comparisons are of two rates (two systems in one universe, or two options of
an axis for one system), each over ``n`` transcripts. The calculation is the
two-sample z-test for proportions on Cohen's effect size
h = 2 asin(sqrt(p2)) - 2 asin(sqrt(p1)) (statsmodels ``NormalIndPower`` with
``proportion_effectsize``).

Assumption: the two rates are independent proportions. In a multiverse they
usually are not: both systems answer the same cases and both judges label the
same transcripts. Such paired designs have at least this power when the pairs
are positively correlated, so the numbers here are conservative for them.
Replicates of one case are correlated too, so cases, not transcripts, are the
safe count for ``n``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, cast

from multiverse.errors import InputError

__all__ = ["cases_needed", "design_power", "detectable_difference"]

Alternative = Literal["two-sided", "larger", "smaller"]
Direction = Literal["toward_half", "lower", "higher"]

ASSUMPTION = (
    "two independent proportions (z-test on Cohen's h); paired designs, where both rates "
    "come from the same cases or transcripts, have at least this power, so the figures are conservative"
)


@contextmanager
def _quiet_solver() -> Iterator[None]:
    """statsmodels warns when its root finder gives up; the callers check for NaN and say why instead."""
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _check_rate(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise InputError(f"power: {name}: expected a rate between 0 and 1, got {value}")


def detectable_difference(
    n_per_group: float,
    baseline_rate: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    ratio: float = 1.0,
    alternative: Alternative = "two-sided",
    direction: Direction = "toward_half",
) -> float:
    """Smallest difference in rate from ``baseline_rate`` detectable with ``n_per_group`` per rate.

    ``ratio`` is n2 / n1. The same effect size h is a larger difference in rate
    near 0.5 than near 0 or 1, so the answer depends on the direction: by
    default it moves ``toward_half`` (the larger, conservative difference);
    ``lower`` and ``higher`` fix it. Returns a positive difference, or NaN when
    the detectable rate would leave [0, 1].
    """
    from statsmodels.stats.power import NormalIndPower

    _check_rate("baseline_rate", baseline_rate)
    with _quiet_solver():
        h = NormalIndPower().solve_power(
            effect_size=None, nobs1=n_per_group, alpha=alpha, power=power, ratio=ratio,
            alternative=alternative,
        )
    h = abs(float(h))
    if direction == "toward_half":
        direction = "higher" if baseline_rate < 0.5 else "lower"
    angle = math.asin(math.sqrt(baseline_rate)) + (h / 2 if direction == "higher" else -h / 2)
    if not 0.0 <= angle <= math.pi / 2:
        return float("nan")
    return abs(math.sin(angle) ** 2 - baseline_rate)


def cases_needed(
    diff: float,
    baseline_rate: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    ratio: float = 1.0,
    alternative: Alternative = "two-sided",
) -> int:
    """Cases per rate needed to detect a change of ``diff`` from ``baseline_rate`` (rounded up).

    ``diff`` is signed: the other rate is ``baseline_rate + diff``. ``ratio`` is n2 / n1.
    """
    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize

    _check_rate("baseline_rate", baseline_rate)
    _check_rate("baseline_rate + diff", baseline_rate + diff)
    if diff == 0:
        raise InputError("power: diff: expected a non-zero difference in rate")
    h = proportion_effectsize(baseline_rate + diff, baseline_rate)
    if alternative == "two-sided":
        h = abs(h)
    with _quiet_solver():
        n = NormalIndPower().solve_power(
            effect_size=h, nobs1=None, alpha=alpha, power=power, ratio=ratio, alternative=alternative
        )
    n = float(n)
    if not math.isfinite(n):
        # The root finder gives up below its bracket (tiny n for huge effects):
        # the normal approximation it refines answers there.
        from scipy.stats import norm

        tails = 2 if alternative == "two-sided" else 1
        n = ((norm.ppf(1 - alpha / tails) + norm.ppf(power)) / abs(h)) ** 2 * (1 + 1 / ratio)
    # solve_power finds n by root finding: round off its last digits before taking the ceiling.
    return cast("int", math.ceil(round(n, 6)))


def design_power(
    *,
    cases: int,
    baseline_rate: float,
    cases_per_cell: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    differences: Sequence[float] = (0.05, 0.10, 0.15, 0.20),
) -> dict[str, Any]:
    """Power of an audit design, for the ``multiverse power SPEC`` report.

    ``cases`` is the number of cases each system answers in a universe (the
    test design's total), ``cases_per_cell`` the cases in one design cell (for
    comparisons within a cell, e.g. one behaviour x interaction condition).

    Returns a JSON-ready dict::

        {"assumption": str, "alpha": float, "power": float, "baseline_rate": float,
         "comparisons": [{"scope": "all cases" | "one cell", "n_per_group": int,
                          "detectable_difference": float | None, "direction": "lower" | "higher",
                          "detectable": {"lower": float | None, "higher": float | None},
                          "note": str (only when None: no difference is detectable)}],
         "cases_needed": [{"difference": float, "direction": "lower" | "higher", "n_per_group": int}]}

    ``detectable_difference`` is the change toward 0.5 (the larger of the
    two, since one effect size is a larger change in rate near 0.5), and
    ``direction`` says which way that is; ``detectable`` gives both ways
    (None where that way leaves [0, 1] before it is detectable).

    A comparison is two systems in one universe, or two options of an axis for
    one system: either way two rates over the same number of cases.
    """
    scopes = [("all cases", cases)] + ([("one cell", cases_per_cell)] if cases_per_cell else [])
    comparisons = []
    toward = "lower" if baseline_rate >= 0.5 else "higher"
    for scope, n in scopes:
        detectable = detectable_difference(n, baseline_rate, alpha=alpha, power=power)
        both = {way: detectable_difference(n, baseline_rate, alpha=alpha, power=power, direction=way)
                for way in ("lower", "higher")}
        entry: dict[str, Any] = {"scope": scope, "n_per_group": int(n), "detectable_difference": detectable,
                                 "direction": toward,
                                 "detectable": {way: None if math.isnan(d) else d for way, d in both.items()}}
        if math.isnan(detectable):
            # Even the largest possible change (to 0 or to 1, whichever is farther) is too small an effect.
            extreme = 0.0 if baseline_rate >= 0.5 else 1.0
            entry["detectable_difference"] = None
            needed = cases_needed(extreme - baseline_rate, baseline_rate, alpha=alpha, power=power)
            entry["note"] = (f"no difference is detectable with {int(n)} per group: even a rate of {extreme:g} "
                             f"against {baseline_rate:g} needs {needed} per group")
        comparisons.append(entry)
    return {
        "assumption": ASSUMPTION,
        "alpha": alpha,
        "power": power,
        "baseline_rate": baseline_rate,
        "comparisons": comparisons,
        "cases_needed": [
            {"difference": d, "direction": toward,
             "n_per_group": cases_needed(-d if baseline_rate >= 0.5 else d, baseline_rate,
                                         alpha=alpha, power=power)}
            for d in differences
            if 0.0 <= (baseline_rate - d if baseline_rate >= 0.5 else baseline_rate + d) <= 1.0
        ],
    }
