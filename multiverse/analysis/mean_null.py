"""The joint test of a curve of mean scores: is one system's rescaled mean ``threshold`` in every universe?

:func:`~multiverse.analysis.inference.joint_rate_test` draws labels from a
latent binary null: right for shares, not for a mean of scores in [0, 1],
whose spread is not ``t (1 - t)``. For a curve with a universe whose
estimate is a mean (``CaseMatrix.means``), this test runs instead, on the
same [0, 1] scale and with the same three statistics (median effect, count
of significant universes, mean z; :mod:`multiverse.analysis.inference`).

Null: the centred case bootstrap of Simonsohn, Simmons & Nelson (2020).
Each replicate draws cases with replacement (the same draw for every
universe, so their dependence is kept) and re-estimates every universe; the
null curve is the replicate's rates minus the observed ones, plus the
threshold, a world in which every universe's mean is ``threshold`` and the
data vary as they did. Per-universe z is ``(rate - threshold) / se`` with the
cluster-robust standard error of the mean (:func:`estimates.case_mean_interval`);
where every score of a universe is equal (se 0) the widest spread a value in
[0, 1] with mean ``threshold`` can have, ``sqrt(t (1 - t) / cases)``, stands in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from multiverse.errors import InputError

from .case_matrix import CaseMatrix
from .estimates import case_mean_interval
from .inference import JointTest, _check_common, _direction, _run
from .null_histograms import curves_summary

__all__ = ["joint_mean_test"]


def joint_mean_test(m: CaseMatrix, *, system: str, threshold: float, boot: int = 1000, seed: int = 0,
                    alpha: float = 0.05, direction: str = "dominant", band_level: float = 0.95) -> JointTest:
    """Joint test that ``system``'s rate (a mean rescaled to [0, 1]) equals ``threshold`` in every universe."""
    _check_common(boot, alpha, band_level)
    if not 0 < threshold < 1:
        raise InputError(f"threshold: expected a rate strictly between 0 and 1, got {threshold!r}")
    s = m.system_index(system)
    rows, n_uc, k_uc = m.seen(s)
    rate = k_uc.sum(axis=1) / n_uc.sum(axis=1)
    se = case_mean_interval(n_uc, k_uc, 1.0 - alpha)[0]
    cases = (n_uc > 0).sum(axis=1)
    widest = np.sqrt(threshold * (1.0 - threshold) / np.maximum(cases, 1))
    se = np.where(np.isfinite(se) & (se > 0), se, widest)
    effect = rate - threshold
    rng = np.random.default_rng(seed)
    n_cases = n_uc.shape[1]
    weights = rng.multinomial(n_cases, np.full(n_cases, 1.0 / n_cases), size=int(boot)).astype(np.float64)

    def null_curves(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            drawn = (block @ k_uc.T) / (block @ n_uc.T)
        null_effect = np.where(np.isfinite(drawn), drawn - rate[None, :], 0.0)
        return null_effect, null_effect / se[None, :]

    sign, observed, p, null, band = _run(observed_effect=effect, observed_z=effect / se,
                                         null_summary=curves_summary(weights, null_curves, len(effect)), exact=False, alpha=alpha,
                                         direction=_direction(direction), band_level=band_level, band_offset=threshold)
    return JointTest(
        kind="rate", systems=(system,), threshold=float(threshold), direction=sign, observed=observed, p=p,
        effects=pd.DataFrame({"universe_id": m.universes["universe_id"].to_numpy()[rows], "effect": effect,
                              "z": effect / se}),
        band=band, null_stats=null, boot=int(boot), exact=False, alpha=alpha, band_level=band_level,
        resampling="centred case bootstrap (means of scores)", n_cases=n_cases, seed=seed, null_model=None,
    )
