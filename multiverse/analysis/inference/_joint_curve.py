"""The joint rate test of a whole curve, whatever its universes estimate: each kind under its own null.

A curve may hold universes that estimate a share (compliance labels, or
scores at a cut: ``at_least``) and universes that estimate a mean of scores
(``mean``, ``win_rate``), often over the same judgments (a scoring axis).
Each kind gets the null that fits it:

- shares: the rate null (:func:`~multiverse.analysis.inference.joint_rate_test`,
  a latent case-effect null with Bernoulli(t) labels), exactly as for
  imported pass/fail labels;
- means: the means' null (:func:`~multiverse.analysis.joint_mean_test`,
  the same latent case effect with Beta scores of mean t).

Sent whole to the centred case bootstrap, as before, a curve of means and
cuts rejected 0.08-0.13 under a true null at t = 0.05-0.1 with 60 cases (the
count 0.29 at t = 0.05), where the same cuts imported as labels gave
0.015-0.043.

A curve of one kind is that kind's test. A mixed curve is one test whose
p-value per statistic is Bonferroni's over the kinds: ``min(1, K * min_k p_k)``
for K kinds, valid whatever the dependence between them (cuts and means of
the same scores are strongly dependent, and neither null models the other's
scores, so no joint null of both is drawn). The observed statistics are the
whole curve's (its median effect, its count of universes significant in the
dominant direction by their own intervals, its mean z), and each kind's own
test is kept in ``parts``. The null band of the mixed curve is each kind's
band put together position by position (a picture of where the curve would
lie, not a test).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import special

from ..cases import CaseMatrix
from ..cases import as_matrix as _as_matrix
from ..cases import axes_list as _axes_list
from ._joint import STATISTICS, JointTest, _direction, joint_rate_test
from ._null_histograms import curve_statistics

__all__ = ["joint_curve_test"]


def joint_curve_test(verdicts: pd.DataFrame | CaseMatrix, *, axes: tuple[str, ...] | list[str] = (), system: str,
                     threshold: float, boot: int = 1000, seed: int = 0, alpha: float = 0.05,
                     direction: str = "dominant", band_level: float = 0.95) -> JointTest:
    """Joint test that ``system``'s rate equals ``threshold`` in every universe, each kind under its own null."""
    from ._mean_null import joint_mean_test

    m = _as_matrix(verdicts, _axes_list(axes), None)

    def test(kind: str, matrix: CaseMatrix) -> JointTest:
        run = joint_mean_test if kind == "means" else joint_rate_test
        return run(matrix, system=system, threshold=threshold, boot=boot, seed=seed, alpha=alpha,
                   direction=direction, band_level=band_level)

    means = np.zeros(len(m.universes), dtype=bool) if m.means is None else np.asarray(m.means, dtype=bool)
    seen = m.included[m.system_index(system)].sum(axis=1) > 0
    kinds = [(kind, rows) for kind, rows in (("shares", np.flatnonzero(~means & seen)), ("means", np.flatnonzero(means & seen)))
             if len(rows)]
    if len(kinds) <= 1:
        return test(kinds[0][0] if kinds else "shares", m)
    parts = tuple(test(kind, _universes(m, rows)) for kind, rows in kinds)
    return _combined(parts, alpha, band_level, _direction(direction))


def _universes(m: CaseMatrix, rows: np.ndarray) -> CaseMatrix:
    """The same matrix on the universes ``rows`` only (every system and case kept), with the whole run's ICC,
    which the curve's intervals use."""
    icc = m.share_icc()[:, rows]
    part = replace(m, universes=m.universes.iloc[rows].reset_index(drop=True), compliant=m.compliant[:, rows],
                   included=m.included[:, rows], means=None if m.means is None else np.asarray(m.means)[rows],
                   squares=None if m.squares is None else m.squares[:, rows])
    object.__setattr__(part, "_share_icc", icc)
    return part


def _combined(parts: tuple[JointTest, ...], alpha: float, band_level: float, direction: int) -> JointTest:
    """One test of the whole curve from its kinds' own tests: Bonferroni's p per statistic."""
    effects = pd.concat([part.effects for part in parts], ignore_index=True)
    effect, z = effects["effect"].to_numpy(), effects["z"].to_numpy()
    z_crit = special.ndtri(1.0 - alpha / 2.0)
    sign, oriented = curve_statistics(effect[None, :], z[None, :], z_crit, direction)
    observed = dict(zip(STATISTICS, (oriented[0] * [sign[0], 1.0, sign[0]]).tolist()))
    observed["n_significant"] = int(observed["n_significant"])
    p = {name: min(1.0, len(parts) * min(part.p[name] for part in parts)) for name in STATISTICS}
    # Each kind's band, its positions interleaved in order: a picture of the null, per percentile row.
    rows = [np.sort(np.concatenate([part.band[column].to_numpy() for part in parts]))
            for column in ("low", "median", "high")]
    band = pd.DataFrame({"position": np.arange(1, len(effect) + 1), "low": rows[0], "median": rows[1], "high": rows[2]})
    first = parts[0]
    words = "; ".join(f"{part.estimates}: {part.resampling}" for part in parts)
    return JointTest(
        kind="rate", systems=first.systems, threshold=first.threshold, direction=int(sign[0]),
        observed=observed, p=p, effects=effects, band=band, null_stats=np.empty((0, len(STATISTICS))),
        boot=max(part.boot for part in parts), exact=False, alpha=alpha, band_level=band_level,
        resampling=f"each kind of universe under its own null, Bonferroni over the {len(parts)} kinds ({words})",
        n_cases=max(part.n_cases for part in parts), seed=first.seed, parts=parts,
        estimates=" and ".join(part.estimates for part in parts))
