"""Rates of scored universes: the mean score, the share at or above a cut, the win rate.

:func:`multiverse.analysis.rates.compute_rates` hands the universes whose
estimator reads scores (``mean``, ``at_least``, ``win_rate``) here, with each
row's contribution in [0, 1] (:mod:`multiverse.analysis._kernel`). The rows
come out as the share estimators' do (universe x system, overall and per
design-factor level, in the same order), with two more columns:

``mean``
    the mean score in the scale's native units, ``min + rate * (max - min)``
    (``mean`` and ``win_rate``; NaN for ``at_least``, whose rate is a share);
``se``
    the standard error of ``rate``, clustered by case (CR1; with one row per
    case it is the standard error of the mean over cases).

``n_compliant`` is the sum of the contributions (``rate * n``): the count of
scores at or above the cut for ``at_least``, a fraction for a mean. The
interval of a mean is the cluster-robust t interval (``ci: bootstrap``: the
case bootstrap's percentile interval widened to contain it); a share's is the
Wilson interval with the case design effect, exactly as for binary labels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from multiverse.core import counted_rows

from .._kernel import MEAN_ESTIMATORS, codes, combine, first_rows, mean_interval

__all__ = ["score_rates"]


def score_rates(frame: pd.DataFrame, value: np.ndarray, *, axes: list[str], factors: list[str], estimator: str,
                ci: str, level: float, n_boot: int, seed: int, low: float, high: float) -> pd.DataFrame:
    """Rate rows of the universes in ``frame`` (all of one scored ``estimator``); ``value``: each row's contribution.

    ``low`` and ``high`` are the scale's ends, for the mean in native units.
    """
    counted = counted_rows(frame) & ~np.isnan(value)
    case = codes(frame["case_id"])[0] if "case_id" in frame.columns else np.arange(len(frame))
    universe, _ = codes(frame["universe_id"])
    system, n_systems = codes(frame["system"])
    group, _ = codes(combine(universe, n_systems, system))
    pieces = []
    targets: list[tuple[np.ndarray, str | None, np.ndarray | None]] = [(group, None, None)]
    for name in factors:
        levels, n_levels = codes(frame[name])
        targets.append((codes(combine(group, n_levels, levels))[0], name, levels))
    for spec, (target, factor, factor_levels) in enumerate(targets):
        first = first_rows(target)
        n_targets = len(first)
        rate, se, ci_low, ci_high = mean_interval(target[counted], n_targets, case[counted], value[counted], level)
        n = np.bincount(target[counted], minlength=n_targets)
        if ci == "bootstrap" and estimator in MEAN_ESTIMATORS:
            ci_low, ci_high = _widened(case, target, n_targets, counted, value, level, n_boot, seed, ci_low, ci_high)
        keys = frame[["universe_id", *axes, "system", *([factor] if factor else [])]].take(first)
        piece = pd.DataFrame({"universe_id": keys["universe_id"].to_numpy()})
        for axis in axes:
            piece[axis] = keys[axis].to_numpy()
        piece["system"] = keys["system"].to_numpy()
        piece["subgroup"] = "all" if factor is None else (f"{factor}=" + keys[factor].astype(str)).to_numpy()
        piece["n"] = n.astype(np.int64)
        piece["n_compliant"] = np.bincount(target[counted], weights=value[counted], minlength=n_targets)
        piece["rate"] = rate
        piece["ci_low"], piece["ci_high"] = ci_low, ci_high
        piece["mean"] = low + rate * (high - low) if estimator in MEAN_ESTIMATORS else np.nan
        piece["se"] = se
        piece["_group"], piece["_spec"] = group[first], spec
        piece["_level"] = 0 if factor_levels is None else factor_levels[first]
        pieces.append(piece)
    rates = pd.concat(pieces, ignore_index=True)
    order = np.lexsort((rates["_level"].to_numpy(), rates["_spec"].to_numpy(), rates["_group"].to_numpy()))
    return rates.iloc[order].drop(columns=["_group", "_spec", "_level"]).reset_index(drop=True)


def _widened(case: np.ndarray, target: np.ndarray, n_targets: int, counted: np.ndarray, value: np.ndarray, level: float,
             n_boot: int, seed: int, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The case bootstrap's percentile interval of each mean, widened to contain the t interval."""
    from .._kernel import cluster_bootstrap

    case_codes, n_cases = codes(np.asarray(case))
    weights = np.where(counted, np.nan_to_num(value), 0.0)
    boot_low, boot_high = cluster_bootstrap(case_codes, n_cases, target, n_targets, np.zeros(len(target), np.int8),
                                            counted.astype(np.float64), weights, level, n_boot, seed)
    return np.fmin(low, boot_low), np.fmax(high, boot_high)
