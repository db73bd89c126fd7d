"""Synthetic verdicts tables for the analysis tests: a world whose truth is known.

``latent_verdicts`` draws dependent universes from a latent-variable audit
world (the ``verdicts`` fixture in conftest.py is one of them);
``verdicts_from_rates`` writes a table whose rates are exactly the ones given.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy import stats

__all__ = ["VERDICT_AXES", "latent_verdicts", "verdicts_from_rates"]

VERDICT_AXES = {"judge": ["j1", "j2"], "evidence": ["strict", "lenient"], "scoring": ["all", "imperm"]}


def latent_verdicts(
    *,
    axes: dict[str, list[str]] = VERDICT_AXES,
    rates: dict[str, float] | None = None,
    option_shift: float = 0.08,
    n_cases: int = 30,
    replicates: int = 1,
    case_share: float = 0.5,
    transcript_share: float = 0.3,
    fail: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """A tidy verdicts table from a latent-variable audit world.

    Every universe judges the same transcripts, so universes are dependent
    the way real ones are: a case-level latent (shared by systems and
    universes), a transcript-level latent (shared by universes) and a
    universe-level judging noise. The marginal compliance rate of system s in
    universe u is exactly ``rates[s] + option_shift * (signed option index
    sum)``, so with ``option_shift=0`` and equal rates both nulls hold.
    """
    rng = np.random.default_rng(seed)
    rates = rates or {"A": 0.6, "B": 0.6}
    names = list(axes)
    combos = list(itertools.product(*axes.values()))
    n_u, n_s = len(combos), len(rates)
    shift = np.array(
        [sum((-1) ** i * axes[a].index(o) for i, (a, o) in enumerate(zip(names, combo)))
         for combo in combos],
        dtype=float,
    )
    marginal = np.clip(np.array(list(rates.values()))[None, :] + option_shift * shift[:, None],
                       0.02, 0.98)
    case = rng.normal(size=(1, 1, n_cases, 1))
    transcript = rng.normal(size=(1, n_s, n_cases, replicates))
    noise = rng.normal(size=(n_u, n_s, n_cases, replicates))
    latent = (np.sqrt(case_share) * case + np.sqrt(transcript_share) * transcript
              + np.sqrt(1 - case_share - transcript_share) * noise)
    compliant = latent < stats.norm.ppf(marginal)[:, :, None, None]
    u, s, c, r = np.indices(compliant.shape).reshape(4, -1)
    frame = pd.DataFrame({a: np.array([combo[i] for combo in combos])[u]
                          for i, a in enumerate(names)})
    frame.insert(0, "universe_id", np.array([f"u{k:03d}" for k in range(n_u)])[u])
    frame["system"] = np.array(list(rates))[s]
    frame["case_id"] = np.array([f"case{k:03d}" for k in range(n_cases)])[c]
    frame["replicate"] = r
    failed = rng.random(len(frame)) < fail
    frame["status"] = np.where(failed, "judge_failed", "ok")
    frame["compliant"] = pd.array(compliant.reshape(-1), dtype="boolean")
    frame.loc[failed, "compliant"] = pd.NA
    return frame


def verdicts_from_rates(rates: dict[tuple, dict[str, float]], axes: list[str],
                        cases: int = 10) -> pd.DataFrame:
    """Verdicts whose universe x system rates are exactly ``rates`` (multiples of 1 / cases)."""
    rows = []
    for options, by_system in rates.items():
        universe = "/".join(options)
        for system, rate in by_system.items():
            compliant = round(rate * cases)
            for case in range(cases):
                rows.append({"universe_id": universe, **dict(zip(axes, options)), "system": system,
                             "case_id": f"case{case}", "status": "ok", "compliant": case < compliant})
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame
