"""The claims' statistics: per-universe one-sided tests, the partial conjunction rule, and their error rates.

The error-rate simulations draw worlds of dependent universes (a case
effect and a transcript effect shared across universes, as real ones share
cases and transcripts) whose true rates sit exactly on a claim's boundary,
in the configuration least favourable to the rule: for "k of n universes",
k - 1 universes far inside the claim and the rest on the bound.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from multiverse.analysis import (
    case_matrix,
    difference_claim_tests,
    difference_curve,
    holm,
    partial_conjunction,
    rank_claim_tests,
    rate_claim_tests,
    universes_needed,
)
from multiverse.errors import InputError

ALPHA = 0.05


def _world(rates: np.ndarray, systems: list[str], *, n_cases: int = 40, replicates: int = 1, seed: int = 0,
           case_share: float = 0.4, transcript_share: float = 0.3) -> pd.DataFrame:
    """Verdicts whose true rate of system s in universe u is ``rates[u, s]``; universes share cases and transcripts."""
    rng = np.random.default_rng(seed)
    n_u, n_s = rates.shape
    case = rng.normal(size=(1, 1, n_cases, 1))
    transcript = rng.normal(size=(1, n_s, n_cases, replicates))
    noise = rng.normal(size=(n_u, n_s, n_cases, replicates))
    latent = (np.sqrt(case_share) * case + np.sqrt(transcript_share) * transcript
              + np.sqrt(1 - case_share - transcript_share) * noise)
    compliant = latent < stats.norm.ppf(rates)[:, :, None, None]
    u, s, c, _ = np.indices(compliant.shape).reshape(4, -1)
    return pd.DataFrame({
        "universe_id": np.array([f"u{k:02d}" for k in range(n_u)])[u],
        "system": np.array(systems)[s],
        "case_id": np.array([f"c{k:03d}" for k in range(n_cases)])[c],
        "status": "ok",
        "compliant": compliant.reshape(-1),
    })


def _combined(table: pd.DataFrame, k: int) -> tuple[float, float]:
    """The claim's p_hold and p_fail over its universes, as the gate combines them."""
    n = len(table)
    return partial_conjunction(table["p_hold"], k), partial_conjunction(table["p_fail"], n - k + 1)


# -- the pieces --------------------------------------------------------------------------------------------


def test_partial_conjunction_is_the_bonferroni_combination():
    p = [0.04, 0.001, 0.2, 0.01]
    assert partial_conjunction(p, 1) == pytest.approx(4 * 0.001)  # Bonferroni
    assert partial_conjunction(p, 4) == pytest.approx(0.2)  # intersection-union: the largest
    assert partial_conjunction(p, 3) == pytest.approx(2 * 0.04)
    assert partial_conjunction([0.9, 0.8], 1) == 1.0  # capped
    with pytest.raises(InputError):
        partial_conjunction(p, 5)


def test_needed_rounds_a_share_up_but_not_float_noise():
    assert universes_needed(0.9, 24) == 22
    assert universes_needed(0.5, 24) == 12
    assert universes_needed(0.7, 10) == 7  # 0.7 * 10 is 7.000000000000001 in floats
    assert universes_needed(0.01, 3) == 1
    assert universes_needed(1.0, 5) == 5


def test_holm_matches_the_step_down_by_hand():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.2]) == [0.2]


def test_a_rate_without_replicates_is_the_exact_binomial_test():
    table = _world(np.array([[0.7], [0.9]]), ["A"], n_cases=30, seed=3)
    m = case_matrix(table, axes=[])
    got = rate_claim_tests(m, system="A", bound=0.75, side="at_least").set_index("universe_id")
    for universe, row in got.iterrows():
        x = int(table[(table["universe_id"] == universe)]["compliant"].sum())
        # One label per case: the design effect is 1 and n_eff is the number of cases.
        assert row["n_eff"] == pytest.approx(30)
        assert row["p_hold"] == pytest.approx(stats.binom.sf(x - 1, 30, 0.75))
        assert row["p_fail"] == pytest.approx(stats.binom.cdf(x, 30, 0.75))
    at_most = rate_claim_tests(m, system="A", bound=0.75, side="at_most").set_index("universe_id")
    assert np.allclose(at_most["p_hold"], got["p_fail"]) and np.allclose(at_most["p_fail"], got["p_hold"])


def test_replicates_of_a_case_are_not_counted_as_independent_evidence():
    # The same world with 1 and with 4 replicates per case: the effective sample grows far less than 4 times.
    one = rate_claim_tests(case_matrix(_world(np.full((1, 1), 0.8), ["A"], replicates=1, seed=5), axes=[]),
                     system="A", bound=0.5, side="at_least")
    four = rate_claim_tests(case_matrix(_world(np.full((1, 1), 0.8), ["A"], replicates=4, seed=5, transcript_share=0.0,
                                         case_share=0.8), axes=[]), system="A", bound=0.5, side="at_least")
    assert four["n_eff"].iloc[0] < 2 * one["n_eff"].iloc[0]


def test_a_difference_is_the_curves_paired_difference_shifted_by_the_margin():
    table = _world(np.array([[0.7, 0.6], [0.8, 0.8], [0.5, 0.7]]), ["A", "B"], seed=11)
    m = case_matrix(table, axes=[])
    curve = difference_curve(m, axes=[], a="A", b="B").set_index("universe_id").sort_index()
    got = difference_claim_tests(m, a="A", b="B", margin=0.05).set_index("universe_id").sort_index()
    assert np.allclose(got["estimate"], curve["difference"])
    se = (curve["ci_high"] - curve["ci_low"]) / (2 * stats.norm.ppf(0.975))
    assert np.allclose(got["se"], se)
    # The score z: the variance at the bound, sum (d_c + margin w_c)^2, is the curve's sum (d_c - D w_c)^2
    # plus (D + margin)^2 sum w_c^2, so the z is below the observed-variance one, never above.
    observed_z = (curve["difference"] + 0.05) / se
    assert np.all(np.abs(got["z"]) <= np.abs(observed_z) + 1e-12) and np.all(np.sign(got["z"]) == np.sign(observed_z))
    assert np.allclose(got["p_hold"], stats.t.sf(got["z"], got["n_cases"] - 1))
    assert np.allclose(got["p_hold"] + got["p_fail"], 1.0)


def test_a_run_against_itself_has_no_difference_and_no_evidence():
    table = _world(np.array([[0.7, 0.6]]), ["A", "B"], seed=2)
    same = pd.concat([table[table["system"] == "A"], table[table["system"] == "A"].assign(system="B")])
    got = difference_claim_tests(case_matrix(same, axes=[]), a="A", b="B")
    assert got["estimate"].iloc[0] == 0 and got["z"].iloc[0] == 0
    assert got["p_hold"].iloc[0] == pytest.approx(0.5) and got["p_fail"].iloc[0] == pytest.approx(0.5)


def test_systems_that_agree_on_every_case_cannot_show_a_margin():
    # Both perfect on 40 cases: under "the candidate is 2 points worse" that is a likely sight, not evidence.
    table = _world(np.array([[0.999, 0.999]]), ["cand", "base"], seed=4)
    table["compliant"] = True
    got = difference_claim_tests(case_matrix(table, axes=[]), a="cand", b="base", margin=0.02)
    assert got["p_hold"].iloc[0] == 1.0 and got["p_fail"].iloc[0] == 1.0


def test_rank_estimates_and_tests_a_clear_leader():
    table = _world(np.array([[0.95, 0.4, 0.3], [0.1, 0.95, 0.5]]), ["A", "B", "C"], n_cases=60, seed=7)
    got = rank_claim_tests(case_matrix(table, axes=[]), system="A", rank=1).set_index("universe_id")
    assert got.loc["u00", "estimate"] == 1 and got.loc["u01", "estimate"] == 3
    assert got.loc["u00", "p_hold"] < 1e-4 and got.loc["u01", "p_fail"] < 1e-4
    with pytest.raises(InputError, match="rank"):
        rank_claim_tests(case_matrix(table, axes=[]), system="A", rank=3)


# -- error rates under a boundary null ---------------------------------------------------------------------

REPLICATIONS = 1000
# Past this many false "held" in REPLICATIONS draws a rate of 0.05 is rejected at the 0.01 level; a true
# rate of 0.08 stays under it in about 7% of runs of the test.
LIMIT = int(stats.binom.ppf(0.99, REPLICATIONS, ALPHA))


def _rate_world(seed: int) -> tuple[pd.DataFrame, float]:
    # at_least 0.7 in every universe: one universe on the bound, five far above (the intersection-union
    # test's least favourable null); case and transcript effects shared by all six.
    rates = np.array([[0.7], [0.97], [0.97], [0.97], [0.97], [0.97]])
    table = _world(rates, ["A"], n_cases=40, replicates=2, seed=seed)
    return _combined(rate_claim_tests(case_matrix(table, axes=[]), system="A", bound=0.7, side="at_least"), 6)


def _rate_share_world(seed: int) -> tuple[float, float]:
    # at_most 0.3 in a share 0.5 of 8 universes: k = 4, so 3 far below and 5 on the bound.
    rates = np.array([[0.03]] * 3 + [[0.3]] * 5)
    table = _world(rates, ["A"], n_cases=40, seed=seed)
    return _combined(rate_claim_tests(case_matrix(table, axes=[]), system="A", bound=0.3, side="at_most"), 4)


def _order_world(seed: int) -> tuple[float, float]:
    # A better than B in every universe: in one the two are equal, in four A is far better.
    rates = np.array([[0.6, 0.6]] + [[0.95, 0.3]] * 4)
    table = _world(rates, ["A", "B"], n_cases=40, seed=seed)
    return _combined(difference_claim_tests(case_matrix(table, axes=[]), a="A", b="B"), 5)


def _no_regression_world(seed: int) -> tuple[float, float]:
    # The candidate exactly the margin below the baseline, in the primary (one) universe.
    table = _world(np.array([[0.55, 0.6]]), ["cand", "base"], n_cases=40, replicates=2, seed=seed)
    return _combined(difference_claim_tests(case_matrix(table, axes=[]), a="cand", b="base", margin=0.05), 1)


def _rank_world(seed: int) -> tuple[float, float]:
    # A first in a share 0.75 of 4 universes (k = 3): two where A leads clearly, two where A ties B.
    rates = np.array([[0.9, 0.4, 0.3]] * 2 + [[0.7, 0.7, 0.3]] * 2)
    table = _world(rates, ["A", "B", "C"], n_cases=40, seed=seed)
    return _combined(rank_claim_tests(case_matrix(table, axes=[]), system="A", rank=1), 3)


@pytest.mark.slow
@pytest.mark.parametrize("world", [_rate_world, _rate_share_world, _order_world, _no_regression_world, _rank_world],
                         ids=["rate-all", "rate-share", "order-all", "no-regression-primary", "rank-share"])
def test_false_held_rate_under_a_boundary_null_is_at_most_alpha(world):
    outcomes = np.array([world(seed) for seed in range(REPLICATIONS)])
    held = int((outcomes[:, 0] <= ALPHA).sum())
    failed = int((outcomes[:, 1] <= ALPHA).sum())
    assert held <= LIMIT, f"{held} false 'held' in {REPLICATIONS} (limit {LIMIT})"
    # On the boundary the claim holds (the bound is inclusive), so "failed" is an error too.
    assert failed <= LIMIT, f"{failed} false 'failed' in {REPLICATIONS}"


@pytest.mark.slow
def test_a_claim_well_inside_its_bound_is_held_with_power():
    held = [_combined(rate_claim_tests(case_matrix(_world(np.full((6, 1), 0.95), ["A"], n_cases=60, seed=s), axes=[]),
                                 system="A", bound=0.7, side="at_least"), 6)[0] <= ALPHA for s in range(100)]
    assert np.mean(held) > 0.8


def test_universes_in_the_worlds_share_their_cases():
    # The simulations are only a test of dependence handling if the universes really are dependent.
    table = _world(np.full((2, 1), 0.5), ["A"], n_cases=400, seed=1)
    a, b = (table[table["universe_id"] == u]["compliant"].to_numpy() for u in ("u00", "u01"))
    assert np.corrcoef(a, b)[0, 1] > 0.3


@pytest.mark.parametrize("k", [1, 2, 3])
def test_partial_conjunction_holds_its_level_for_every_k_under_independence(k):
    rng = np.random.default_rng(k)
    # k - 1 false nulls (p near 0) and the rest true (uniform): the least favourable case for "at least k".
    p = np.column_stack([np.full((20000, k - 1), 1e-9), rng.random((20000, 4 - (k - 1)))])
    rejected = np.mean([partial_conjunction(row, k) <= ALPHA for row in p])
    assert rejected <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / 20000)

