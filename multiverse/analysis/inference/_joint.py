"""Joint inference for a specification curve (Simonsohn, Simmons & Nelson 2020).

The question: taken together, are the universes of a multiverse inconsistent
with the null? Universes share cases, transcripts and often judgments, so they
are strongly dependent and cannot be tested as if independent. Following the
paper, every null replicate is one draw of the whole multiverse, with the
dependence between universes kept, and every universe is re-estimated on it.
All of it runs on the universe x case count arrays of a
:class:`~multiverse.analysis.CaseMatrix`.

Two nulls:

``joint_rate_test`` -- one system's rate equals ``threshold`` in every universe.
    A parametric null with mean t at the label level
    (:mod:`multiverse.analysis.inference`): a Gaussian copula whose intra-case
    correlations, between universes and between replicates, are estimated
    from the data. A centred case bootstrap (the paper's choice) is not used:
    its spread follows the observed rate(1 - rate), not t(1 - t), and it has no
    spread at all in a universe without violations, so with rare violations
    and a few dozen cases it rejected two to three times too often.
    Per-universe z is the score z of a proportion at Kish's effective sample
    size, ``z = (rate - threshold) / sqrt(threshold * (1 - threshold) * deff / n)``
    with the design effect of the curve's own Wilson intervals
    (:func:`~multiverse.analysis._kernel.design_effect`: the universe's
    intra-case ICC over its replicates, pooled over the universes where it is
    not estimable; 1 with one label per case), so a universe is significant
    exactly when its design-effect Wilson interval excludes the threshold
    (where the exact bound near the edges still holds it, z is held at the
    critical value), and the count reads as per-universe tests at ``alpha``.
    The ICC is the curve's own (``CaseMatrix.share_icc``: pooled over every
    system x share universe of the run, not the tested system's alone).
    Means of scores get their own null (:mod:`multiverse.analysis.inference`),
    and a curve of both kinds is tested by :mod:`multiverse.analysis.inference`. Without the design effect, 14% of
    universes were "significant at 0.05" under a true null with 3 replicates
    per case at ICC 0.3. Null curves get the same z from their own rates, at
    the observed design effects.

``joint_difference_test`` -- systems ``a`` and ``b`` have the same rate.
    Case sign flip: per case, swap the two systems' labels, i.e. flip the sign
    of the case's contribution to ``rate(a) - rate(b)``, with the same flips in
    every universe. With ``2**cases <= boot`` every flip pattern is enumerated
    and the p-value is exact. Per-universe z is the paired (case-clustered)
    normal approximation of :func:`~multiverse.analysis.curve.difference_curve`,
    recomputed on every flipped data set.

The three statistics, computed identically on the observed curve and on each
null curve: the median effect across universes, the number of universes
significant (two-sided per-universe level ``alpha``) in the dominant
direction, and the mean of the per-universe z (the "Stouffer" mean z).
Dominant direction: the sign of the curve's median effect (the sign of the
mean z when the median is 0, else +). The paper orients by the observed
dominant sign, which alone is not two-sided. Orienting every null curve by
its own dominant sign (as before) is two-sided but treats the two tails as
mirror images, and a rate null near 0 is skewed: its short lower tail was
out-weighed by the long upper one, and a curve of zeros against t = 0.10
could not reject. So the two-sided p-value is twice the one-sided one in the
observed dominant direction (capped at 1), a valid test whichever direction
the data pick (each one-sided test is at level alpha / 2).
``direction="greater"`` or ``"less"`` fixes a pre-registered direction
instead (one-sided, not doubled).

p-value per statistic: ``(1 + #{null >= observed}) / (B + 1)``; with exact
enumeration ``#{null >= observed} / 2**cases`` (the identity flip is one of
them); doubled for ``direction="dominant"``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd
from scipy import special

from multiverse.errors import InputError

from .._kernel import design_effect, wilson
from ..cases import CaseMatrix
from ..cases import as_matrix as _as_matrix
from ..cases import axes_list as _axes_list
from ..cases import paired_cases as _paired
from ..cases import paired_z as _paired_z
from ..cases import plain_number as _num
from ._null_histograms import (
    TIE,
    NestedCounts,
    NullSummary,
    curve_statistics,
    curves_summary,
    grouped_summary,
    nested_groups,
    universe_groups,
)
from ._rate_null import LatentNull, fit_latent_null

__all__ = ["STATISTICS", "JointTest", "joint_difference_test", "joint_rate_test"]

#: Names of the three joint statistics, in the order of ``JointTest.null_stats`` columns.
STATISTICS = ("median_effect", "n_significant", "stouffer_z")


# With no variation anywhere the null has nothing estimated (correlation 1: each case's labels
# are all alike, Bernoulli(t)) and is cheap to draw, so this many draws at least, within
# _FLAT_LABELS labels: the p-value of a curve of zeros against t = 0.10 with 36 cases is
# 2 * 0.9**36 = 0.045, which (1 + hits) / (B + 1) at B = 199 reads as 0.055.
_FLAT_DRAWS = 20_000
_FLAT_LABELS = 200_000_000


# One label per cell: the null is drawn as histograms of counts per group of universes that saw
# the same cases (analysis/null_histograms.py) when the groups x cases is at most this many times
# the universes; each group costs about what drawing the labels of `cases` universes costs.
_GROUPED = 1.0
# Above this many cells (universes x cases) a system's universes that saw different cases get the
# nested null (null_histograms.py: conservative, and its cost does not grow with the universes);
# below it every label is drawn, which takes well under a second.
_NESTED_CELLS = 1_000_000
# The same for cells with several labels, whose label-by-label draw (a normal and a binomial a cell)
# costs about 40 times as much: 50,000 cells are about 4 s at B = 1,000.
_NESTED_REPLICATED_CELLS = 50_000


def _effective_n(n_uc: np.ndarray, icc: np.ndarray, level: float) -> np.ndarray:
    """Per universe (rows), Kish's n / deff with the ICC the curve's Wilson intervals use (``CaseMatrix.share_icc``)."""
    return cast("np.ndarray", n_uc.sum(axis=1) / design_effect(n_uc, icc, level))


def _score_z(effect: np.ndarray, n: np.ndarray, threshold: float, level: float = 0.95) -> np.ndarray:
    """The score z of each rate at its effective size, held within the critical value where the curve's
    interval still holds the threshold: the exact bound near the edges (``intervals.wilson``) can be wider
    than the score test, and a universe counts as significant exactly when its interval excludes t."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = effect / np.sqrt(threshold * (1.0 - threshold) / n)
    z = np.where(np.isfinite(z), z, 0.0)
    crit = special.ndtri(0.5 + level / 2.0)
    n = np.broadcast_to(n, z.shape)
    count = (effect + threshold) * n
    # Only a significant z whose rate sits one to three labels off an edge can meet the wider bound.
    edge = np.where(n <= 50, 2.0, np.where(n <= 100, 3.0, 0.0)) + 1e-9
    near = (np.abs(z) > crit) & (((count > 0) & (count <= edge)) | ((n - count > 0) & (n - count <= edge)))
    if near.any():
        low, high = wilson((effect + threshold)[near], n[near], level)
        held = (low <= threshold) & (threshold <= high)
        z[near] = np.where(held, np.clip(z[near], -crit, crit), z[near])
    return z


# --------------------------------------------------------------------------
# The joint test
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class JointTest:
    """Result of a joint test over the universes of one specification curve.

    ``observed`` and ``p`` map each of ``STATISTICS`` to the observed value
    and its p-value: the median effect and mean z keep their sign, the count
    is of universes significant in the dominant ``direction`` (+1 or -1).
    ``effects`` has one row per universe: ``universe_id``, ``effect``
    (rate - threshold, or rate(a) - rate(b)) and ``z``. ``band`` has one row
    per curve position (``position`` 1 = lowest) with the ``low``, ``median`` and
    ``high`` percentiles of the sorted null curves on the curve's own scale
    (rates for a rate test, differences for a difference test).
    ``null_stats`` is the (replicates x 3) array of null statistics, every
    null curve oriented by ``direction`` (the observed dominant one unless a
    direction was fixed).
    """

    kind: str
    systems: tuple[str, ...]
    threshold: float | None
    direction: int
    observed: Mapping[str, float]
    p: Mapping[str, float]
    effects: pd.DataFrame
    band: pd.DataFrame
    null_stats: np.ndarray
    boot: int
    exact: bool
    alpha: float
    band_level: float
    resampling: str
    n_cases: int
    seed: Any = field(default=None, repr=False)
    null_model: LatentNull | None = field(default=None, repr=False)
    #: A curve of several kinds of universe (shares and means): each kind's own test, whose p-values
    #: this one combines (:mod:`multiverse.analysis.inference`); empty for a test of one kind.
    parts: tuple[JointTest, ...] = ()
    #: What the tested universes estimate: "shares" (labels, or scores at a cut), "means" (of scores), or both.
    estimates: str = "shares"
    #: The dependence a null of means of scores reproduces (``mean_null.MeanNull.describe``), if any.
    null_fit: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def n_universes(self) -> int:
        return len(self.effects)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (no arrays); NaN becomes None."""
        effect = self.effects["effect"].to_numpy()
        out: dict[str, Any] = {
            "kind": self.kind,
            "null": (
                f"rate({self.systems[0]}) = {self.threshold:g} in every universe"
                if self.kind == "rate"
                else f"rate({self.systems[0]}) = rate({self.systems[1]}) in every universe"
            ),
            "systems": list(self.systems),
            "threshold": self.threshold,
            "estimates": self.estimates,
            "resampling": self.resampling,
            "boot": self.boot,
            "exact": self.exact,
            "seed": self.seed if isinstance(self.seed, (int, type(None))) else "generator",
            "alpha": self.alpha,
            "band_level": self.band_level,
            "n_universes": self.n_universes,
            "n_cases": self.n_cases,
            "direction": "greater" if self.direction > 0 else "less",
            "effect": {
                "min": _num(effect.min()),
                "median": _num(np.median(effect)),
                "max": _num(effect.max()),
            },
            "statistics": {
                name: {"observed": _num(self.observed[name]), "p": _num(self.p[name])}
                for name in STATISTICS
            },
        }
        # Which null ran, named in every document (and the dependence it reproduces, so a reader can judge it).
        out["null_model"] = {"name": self.resampling}
        if self.null_fit is not None:
            out["null_model"].update(self.null_fit)
        if self.null_model is not None:
            out["null_model"] |= {
                "intra_case_correlation": {
                    "between_universes": _num(self.null_model.rho_between),
                    "within_universe": _num(self.null_model.rho_within),
                },
                "latent_correlation": {
                    "between_universes": _num(self.null_model.lam_between),
                    "within_universe": _num(self.null_model.lam_within),
                },
            }
        out["statistics"]["n_significant"]["share"] = _num(
            self.observed["n_significant"] / max(self.n_universes, 1)
        )
        if self.parts:
            out["parts"] = [part.to_dict() for part in self.parts]
        return out


def _direction(direction: str) -> int:
    try:
        return {"dominant": 0, "greater": 1, "less": -1}[direction]
    except KeyError:
        raise InputError(
            f"direction: expected dominant, greater or less, got {direction!r}"
        ) from None


def _run(
    *,
    observed_effect: np.ndarray,
    observed_z: np.ndarray,
    null_summary: NullSummary,
    exact: bool,
    alpha: float,
    direction: int,
    band_level: float,
    band_offset: float,
) -> tuple[int, dict[str, Any], dict[str, Any], np.ndarray, pd.DataFrame]:
    """Shared engine: the observed statistics, the null's, p-values and the null band."""
    z_crit = special.ndtri(1.0 - alpha / 2.0)  # the normal quantile (norm.ppf is ndtri)
    sign, obs = curve_statistics(observed_effect[None, :], observed_z[None, :], z_crit, direction)
    # Two-sided: the one-sided test in the observed dominant direction, its p doubled.
    doubled = not direction
    if doubled:
        direction = int(sign[0])
    tail = 100.0 * (1.0 - band_level) / 2.0
    null, (low, mid, high) = null_summary(direction, z_crit, (tail, 50.0, 100.0 - tail))
    n_rep = len(null)
    # Report the median and mean z with their natural sign; the count is
    # always "in the dominant direction". p-values compare oriented values.
    observed = dict(zip(STATISTICS, (obs[0] * [sign[0], 1.0, sign[0]]).tolist()))
    observed["n_significant"] = int(observed["n_significant"])
    tol = np.array([TIE, 0.0, TIE])
    hits = (null >= obs[0] - tol).sum(axis=0)  # obs is oriented, like null
    p_values = hits / n_rep if exact else (1.0 + hits) / (n_rep + 1.0)
    if doubled:
        p_values = np.minimum(1.0, 2.0 * p_values)
    p = dict(zip(STATISTICS, p_values.tolist()))
    band = pd.DataFrame(
        {
            "position": np.arange(1, len(observed_effect) + 1),
            "low": low + band_offset,
            "median": mid + band_offset,
            "high": high + band_offset,
        }
    )
    return int(sign[0]), observed, p, null, band


def _check_common(boot: int, alpha: float, band_level: float) -> None:
    if int(boot) != boot or boot < 1:
        raise InputError(f"boot: expected a positive integer, got {boot!r}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha: expected a number in (0, 1), got {alpha!r}")
    if not 0 < band_level < 1:
        raise InputError(f"band_level: expected a number in (0, 1), got {band_level!r}")


def joint_rate_test(
    verdicts: pd.DataFrame | CaseMatrix,
    *,
    axes: Sequence[str] = (),
    system: str,
    threshold: float,
    boot: int = 1000,
    seed: int | np.random.Generator | None = 0,
    alpha: float = 0.05,
    direction: str = "dominant",
    band_level: float = 0.95,
) -> JointTest:
    """Joint test that ``system``'s rate equals ``threshold`` in every universe.

    ``boot`` draws from the latent case-effect null (see the module
    docstring); more (up to 20,000) when no label varies, where the null is
    fixed and cheap and the p-value's resolution would otherwise cost power. ``verdicts`` is a verdicts table (then ``axes`` names its axis
    columns) or a prebuilt :class:`CaseMatrix`. Deterministic for an int seed.
    """
    _check_common(boot, alpha, band_level)
    if not 0 < threshold < 1:
        raise InputError(f"threshold: expected a rate strictly between 0 and 1, got {threshold!r}")
    m = _as_matrix(verdicts, _axes_list(axes), None)
    s = m.system_index(system)
    # Only cases that some universe saw enter the null world (a case no one saw adds nothing to a rate).
    rows, n_uc, k_uc = m.seen(s)
    rate = k_uc.sum(axis=1) / n_uc.sum(axis=1)
    effect = rate - threshold
    n = _effective_n(n_uc, m.share_icc()[s, rows], 1.0 - alpha)
    z = _score_z(effect, n, threshold, 1.0 - alpha)
    n_cases = n_uc.shape[1]
    model = fit_latent_null(n_uc, k_uc)
    rng = np.random.default_rng(seed)
    groups, counts, nested = None, None, False
    if model.one_label:
        groups = universe_groups(n_uc, n, most=len(n) * _GROUPED / max(n_cases, 1))
        if groups is None:
            nested = n_uc.size > _NESTED_CELLS
            groups = nested_groups(n_uc, n) if nested else None
    elif n_uc.size > _NESTED_REPLICATED_CELLS:
        nested, counts = True, NestedCounts(model, n_uc)
    draws = int(boot)
    if model.pooled_rate is None:
        draws = max(draws, _FLAT_DRAWS if groups is not None else min(_FLAT_DRAWS, _FLAT_LABELS // max(n_uc.size, 1)))

    labels = n_uc.sum(axis=1)

    def null_curves(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if counts is not None:
            null_effect = counts.draw(threshold, len(block), rng) / labels - threshold
        else:
            null_effect = model.draw_rates(threshold, len(block), rng) - threshold
        return null_effect, _score_z(null_effect, n[None, :], threshold, 1.0 - alpha)

    if groups is not None:
        summary = grouped_summary(model, threshold, groups, draws, rng,
                                  lambda e, size, t: _score_z(e, size, t, 1.0 - alpha))
    else:
        summary = curves_summary(np.empty((draws, 0)), null_curves, len(effect))
    sign, observed, p, null, band = _run(
        observed_effect=effect,
        observed_z=z,
        null_summary=summary,
        exact=False,
        alpha=alpha,
        direction=_direction(direction),
        band_level=band_level,
        band_offset=threshold,
    )
    return JointTest(
        kind="rate",
        systems=(system,),
        threshold=float(threshold),
        direction=sign,
        observed=observed,
        p=p,
        effects=pd.DataFrame(
            {"universe_id": m.universes["universe_id"].to_numpy()[rows], "effect": effect, "z": z}
        ),
        band=band,
        null_stats=null,
        boot=draws,
        exact=False,
        alpha=alpha,
        band_level=band_level,
        resampling="latent case-effect null (Gaussian copula, mean t" + (", cases nested)" if nested else ")"),
        n_cases=n_cases,
        seed=seed,
        null_model=model,
    )


def joint_difference_test(
    verdicts: pd.DataFrame | CaseMatrix,
    *,
    axes: Sequence[str] = (),
    a: str,
    b: str,
    boot: int = 1000,
    seed: int | np.random.Generator | None = 0,
    alpha: float = 0.05,
    direction: str = "dominant",
    band_level: float = 0.95,
    exact: bool | None = None,
) -> JointTest:
    """Joint test that systems ``a`` and ``b`` have equal rates in every universe.

    Case sign flips shared by all universes (see the module docstring).
    ``exact=None`` enumerates all ``2**cases`` flips when that is at most
    ``boot``; ``True`` forces enumeration (at most 2**20 patterns), ``False``
    forces ``boot`` random flips. Effects are ``rate(a) - rate(b)``.
    """
    _check_common(boot, alpha, band_level)
    m = _as_matrix(verdicts, _axes_list(axes), None)
    pair = _paired(m, a, b)
    if len(pair.rows) == 0:
        raise InputError(
            f"verdicts: case_id: expected cases with ok verdicts for both {a!r} and {b!r}"
        )
    cases = np.flatnonzero(pair.weight.sum(axis=0) > 0)
    d = pair.contribution[:, cases]
    w = pair.weight[:, cases]
    diff = d.sum(axis=1)
    q_dd, q_ww = (d * d).sum(axis=1), (w * w).sum(axis=1)
    z, _ = _paired_z(diff, (d * w).sum(axis=1), q_dd, q_ww, pair.n_cases)
    n_cases = len(cases)
    if exact is None:
        exact = n_cases <= 20 and 2**n_cases <= boot
    if exact:
        if n_cases > 20:
            raise InputError(f"exact: expected at most 20 cases to enumerate, got {n_cases}")
        flips = np.array(list(itertools.product((1.0, -1.0), repeat=n_cases)))
    else:
        rng = np.random.default_rng(seed)
        flips = rng.choice(np.array([1.0, -1.0]), size=(int(boot), n_cases))
    d_t, dw_t = np.ascontiguousarray(d.T), np.ascontiguousarray((d * w).T)

    def null_curves(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        null_diff = block @ d_t
        null_z, _ = _paired_z(null_diff, block @ dw_t, q_dd, q_ww, pair.n_cases)
        return null_diff, null_z

    sign, observed, p, null, band = _run(
        observed_effect=diff,
        observed_z=z,
        null_summary=curves_summary(flips, null_curves, len(diff)),
        exact=bool(exact),
        alpha=alpha,
        direction=_direction(direction),
        band_level=band_level,
        band_offset=0.0,
    )
    return JointTest(
        kind="difference",
        systems=(a, b),
        threshold=None,
        direction=sign,
        observed=observed,
        p=p,
        effects=pd.DataFrame(
            {
                "universe_id": m.universes["universe_id"].to_numpy()[pair.rows],
                "effect": diff,
                "z": z,
            }
        ),
        band=band,
        null_stats=null,
        boot=len(flips),
        exact=bool(exact),
        alpha=alpha,
        band_level=band_level,
        resampling="case sign flip" + (" (all patterns)" if exact else ""),
        estimates=("shares" if m.means is None or not np.asarray(m.means)[pair.rows].any() else
                   "means" if np.asarray(m.means)[pair.rows].all() else "shares and means"),
        n_cases=n_cases,
        seed=seed,
    )
