"""Agreement on scores: each coefficient against a kept library, on many random tables and the edge cases."""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pandas as pd
import pingouin
import pytest
import statsmodels.api as sm
from sklearn.metrics import cohen_kappa_score

from multiverse.analysis import exact_agreement, icc, krippendorff_alpha, mean_difference, weighted_kappa
from multiverse.analysis.agreement._scores import scale_points

POINTS = scale_points(1, 10)


def _table(rng: np.random.Generator, *, n: int, k: int, missing: float, low: int = 1, high: int = 10,
           spread: int = 2, constant: bool = False) -> np.ndarray:
    """n units x k judges of whole scores on low..high: a true score per unit, judge noise and bias, gaps."""
    truth = rng.integers(low, high + 1, n)
    bias = rng.integers(-1, 2, k)
    scores = np.clip(truth[:, None] + bias[None, :] + rng.integers(-spread, spread + 1, (n, k)), low, high)
    scores = scores.astype(float)
    if constant:
        scores[:, 0] = low + (high - low) // 2  # a judge that never varies
    scores[rng.random((n, k)) < missing] = np.nan
    return scores


def _sklearn_kappa(a: np.ndarray, b: np.ndarray, weights: str, labels) -> float:
    both = ~(np.isnan(a) | np.isnan(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return cohen_kappa_score(a[both].astype(int), b[both].astype(int), labels=list(labels), weights=weights)


def _pingouin_icc(scores: np.ndarray) -> dict[str, float]:
    complete = scores[~np.isnan(scores).any(1)]
    long = pd.DataFrame([(u, j, complete[u, j]) for u in range(len(complete)) for j in range(scores.shape[1])],
                        columns=["unit", "judge", "score"])
    table = pingouin.intraclass_corr(long, targets="unit", raters="judge", ratings="score").set_index("Type")
    return {"icc2_1": float(table.loc["ICC(A,1)", "ICC"]), "icc3_1": float(table.loc["ICC(C,1)", "ICC"])}


CASES = [dict(n=n, k=k, missing=missing, low=low, high=high, spread=spread, constant=constant)
         for n, k, missing, low, high, spread, constant in [
             (12, 2, 0.0, 1, 10, 2, False), (30, 2, 0.2, 1, 10, 1, False), (40, 3, 0.1, 1, 10, 2, False),
             (25, 5, 0.3, 1, 10, 3, False), (60, 4, 0.0, 3, 7, 1, False),  # scores only on 3..7 of 1..10
             (20, 2, 0.0, 1, 10, 0, False),  # judges differ only by a bias
             (35, 3, 0.1, 1, 10, 2, True), (15, 2, 0.25, 1, 10, 4, False),
         ]]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", range(6))
def test_weighted_kappa_is_sklearns_over_every_point_of_the_scale(case, seed):
    scores = _table(np.random.default_rng(seed), **case)
    for i in range(scores.shape[1]):
        for j in range(i + 1, scores.shape[1]):
            for weights in ("linear", "quadratic"):
                ours = weighted_kappa(scores[:, i], scores[:, j], points=POINTS, weights=weights)
                reference = _sklearn_kappa(scores[:, i], scores[:, j], weights, range(1, 11))
                assert ours == pytest.approx(reference, abs=1e-12, nan_ok=True)


def test_unused_scale_points_between_used_ones_count_and_at_the_ends_change_nothing():
    # Nobody scores 5: on the declared scale 4 and 6 stay two steps apart. sklearn's default categories
    # (the scores seen) would put them one step apart; with labels=1..10 it agrees with us.
    rng = np.random.default_rng(11)
    scores = _table(rng, n=60, k=2, missing=0.0, spread=1)
    scores[scores == 5] = 6
    a, b = scores[:, 0], scores[:, 1]
    for weights in ("linear", "quadratic"):
        declared = weighted_kappa(a, b, points=POINTS, weights=weights)
        assert declared == pytest.approx(_sklearn_kappa(a, b, weights, range(1, 11)), abs=1e-12)
        seen = sorted(set(a.astype(int)) | set(b.astype(int)))
        assert abs(declared - _sklearn_kappa(a, b, weights, seen)) > 1e-3
    # Scores only on 3..7: the unused ends 1, 2, 8, 9, 10 scale every weight alike, which kappa cancels.
    narrow = _table(rng, n=60, k=2, missing=0.0, low=3, high=7, spread=1)
    for weights in ("linear", "quadratic"):
        on_ten = weighted_kappa(narrow[:, 0], narrow[:, 1], points=POINTS, weights=weights)
        assert on_ten == pytest.approx(weighted_kappa(narrow[:, 0], narrow[:, 1], points=scale_points(3, 7),
                                                      weights=weights), abs=1e-12)
        assert on_ten == pytest.approx(_sklearn_kappa(narrow[:, 0], narrow[:, 1], weights, range(1, 11)), abs=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", range(6))
def test_alpha_is_the_krippendorff_packages_at_ordinal_and_interval_level(case, seed):
    scores = _table(np.random.default_rng(100 + seed), **case)
    for level in ("ordinal", "interval"):
        ours = krippendorff_alpha(scores, level, points=POINTS)
        reference = krippendorff.alpha(reliability_data=scores.T, level_of_measurement=level,
                                       value_domain=POINTS if level == "ordinal" else None)
        assert ours == pytest.approx(reference, abs=1e-10)


def test_interval_alpha_of_continuous_scores_is_the_packages():
    rng = np.random.default_rng(5)
    truth = rng.random(50)
    scores = np.clip(truth[:, None] + rng.normal(0, 0.1, (50, 3)), 0, 1)
    scores[rng.random((50, 3)) < 0.2] = np.nan
    reference = krippendorff.alpha(reliability_data=scores.T, level_of_measurement="interval")
    assert krippendorff_alpha(scores, "interval") == pytest.approx(reference, abs=1e-10)


@pytest.mark.parametrize("case", [c for c in CASES if not c["constant"]])
@pytest.mark.parametrize("seed", range(4))
def test_icc_is_pingouins_absolute_agreement_and_consistency(case, seed):
    scores = _table(np.random.default_rng(200 + seed), **case)
    reference = _pingouin_icc(scores)
    ours = icc(scores)
    assert ours["n"] == int((~np.isnan(scores).any(1)).sum())
    assert ours["icc2_1"] == pytest.approx(reference["icc2_1"], abs=1e-10)
    assert ours["icc3_1"] == pytest.approx(reference["icc3_1"], abs=1e-10)


def test_a_judge_that_never_varies():
    scores = _table(np.random.default_rng(3), n=40, k=2, missing=0.0, constant=True)
    a, b = scores[:, 0], scores[:, 1]
    for weights in ("linear", "quadratic"):
        # One judge's marginal is one point: expected disagreement is still positive, kappa is 0 or below.
        ours = weighted_kappa(a, b, points=POINTS, weights=weights)
        assert ours == pytest.approx(_sklearn_kappa(a, b, weights, range(1, 11)), abs=1e-12)
        assert ours <= 1e-12
    reference = _pingouin_icc(scores)
    assert icc(scores)["icc3_1"] == pytest.approx(reference["icc3_1"], abs=1e-10)
    assert icc(scores)["icc2_1"] == pytest.approx(reference["icc2_1"], abs=1e-10)


def test_complete_agreement_and_no_spread():
    scores = _table(np.random.default_rng(4), n=30, k=1, missing=0.0)
    same = np.column_stack([scores[:, 0], scores[:, 0], scores[:, 0]])
    assert weighted_kappa(same[:, 0], same[:, 1], points=POINTS) == 1.0
    assert krippendorff_alpha(same, "ordinal", points=POINTS) == pytest.approx(1.0)
    assert krippendorff_alpha(same, "interval") == pytest.approx(1.0)
    assert icc(same)["icc2_1"] == pytest.approx(1.0) and icc(same)["icc3_1"] == pytest.approx(1.0)
    assert exact_agreement(same[:, 0], same[:, 1]) == 1.0
    # Every score the same: no spread to agree beyond chance on (sklearn says NaN too).
    flat = np.full((20, 2), 5.0)
    assert np.isnan(weighted_kappa(flat[:, 0], flat[:, 1], points=POINTS))
    assert np.isnan(_sklearn_kappa(flat[:, 0], flat[:, 1], "quadratic", range(1, 11)))
    assert np.isnan(krippendorff_alpha(flat, "interval")) and np.isnan(krippendorff_alpha(flat, "ordinal", points=POINTS))
    assert np.isnan(icc(flat)["icc2_1"]) and np.isnan(icc(flat)["icc3_1"])
    assert exact_agreement(flat[:, 0], flat[:, 1]) == 1.0


def test_exact_and_within_one_agreement_count_paired_units_only():
    a = np.array([1, 2, 3, 4, 5, np.nan, 7])
    b = np.array([1, 3, 5, 4, np.nan, 6, 6])
    assert exact_agreement(a, b) == pytest.approx(2 / 5)
    assert exact_agreement(a, b, within=1.0) == pytest.approx(4 / 5)
    assert np.isnan(exact_agreement([np.nan], [1.0]))


def test_a_score_off_the_scale_is_an_error_not_a_category():
    with pytest.raises(ValueError, match="11 is not a point"):
        weighted_kappa([1, 11], [1, 2], points=POINTS)


@pytest.mark.parametrize("seed", range(12))
def test_mean_difference_interval_is_an_intercept_regression_clustered_by_case(seed):
    rng = np.random.default_rng(300 + seed)
    scores = _table(rng, n=int(rng.integers(10, 60)), k=2, missing=0.15)
    cases = rng.integers(0, max(2, len(scores) // 3), len(scores))
    ours = mean_difference(scores[:, 0], scores[:, 1], cases)
    both = ~np.isnan(scores).any(1)
    difference = (scores[:, 0] - scores[:, 1])[both]
    fit = sm.OLS(difference, np.ones(len(difference))).fit(
        cov_type="cluster", cov_kwds={"groups": cases[both]}, use_t=True)
    assert ours["n"] == both.sum() and ours["n_cases"] == len(set(cases[both]))
    assert ours["mean"] == pytest.approx(difference.mean(), abs=1e-12)
    assert ours["se"] == pytest.approx(float(fit.bse[0]), rel=1e-10)
    assert [ours["ci_low"], ours["ci_high"]] == pytest.approx(list(fit.conf_int()[0]), rel=1e-10)


def test_mean_difference_with_one_case_has_no_interval():
    ours = mean_difference([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], ["c", "c", "c"])
    assert ours["mean"] == pytest.approx(1.0) and ours["n_cases"] == 1 and np.isnan(ours["ci_low"])


def test_mean_difference_interval_covers_under_a_clustered_null():
    # Two judges with no difference on average, but a case effect shared by a case's transcripts: the
    # case-clustered interval keeps its 95% coverage where an interval that treats transcripts as
    # independent falls short.
    rng = np.random.default_rng(8)
    covered, naive = 0, 0
    trials = 400
    for _ in range(trials):
        cases = np.repeat(np.arange(25), 6)
        difference = rng.normal(0, 1, 25)[cases] + rng.normal(0, 0.5, len(cases))
        result = mean_difference(difference, np.zeros(len(cases)), cases)
        covered += result["ci_low"] <= 0 <= result["ci_high"]
        half = 1.96 * difference.std(ddof=1) / np.sqrt(len(difference))
        naive += abs(difference.mean()) <= half
    assert 0.92 <= covered / trials <= 0.98
    assert naive / trials < 0.8


def test_icc_recovers_a_known_truth_and_tells_bias_from_noise():
    # Scores = true score (variance 4) + judge bias (+1 for the second judge) + noise (variance 1):
    # consistency ICC(3,1) = 4 / 5 whatever the bias; absolute agreement ICC(2,1) falls below it.
    rng = np.random.default_rng(9)
    truth = rng.normal(0, 2, 4000)
    scores = truth[:, None] + np.array([0.0, 1.0]) + rng.normal(0, 1, (4000, 2))
    result = icc(scores)
    assert result["icc3_1"] == pytest.approx(0.8, abs=0.02)
    # The two means 0 and 1 have variance 0.5 (k - 1 in the denominator, as the ANOVA has it).
    assert result["icc2_1"] == pytest.approx(4 / (4 + 0.5 + 1), abs=0.02)
