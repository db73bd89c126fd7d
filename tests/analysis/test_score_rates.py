"""Rates of scores (issue 27): mean, share at a cut, win rate; checked against statsmodels and scipy, and by coverage."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from multiverse.analysis import compute_rates
from multiverse.tables import ScaleRecord

ORDINAL = ScaleRecord(type="ordinal", min=1, max=10)
PAIRWISE = ScaleRecord(type="pairwise", min=0, max=1, reference="ref")


def _table(rng, n_cases=40, replicates=3, systems=("a", "b"), scale=ORDINAL):
    rows = []
    for system_no, system in enumerate(systems):
        for c in range(n_cases):
            case_level = rng.normal(0, 1.5)
            for r in range(replicates):
                score = np.clip(np.round(6 + system_no + case_level + rng.normal(0, 1)), scale.min, scale.max)
                rows.append({"system": system, "case_id": f"c{c}", "replicate": r, "status": "ok",
                             "compliant": pd.NA, "score": float(score)})
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame


def test_the_mean_and_its_clustered_interval_match_a_cluster_robust_regression():
    verdicts = _table(np.random.default_rng(1))
    rates = compute_rates(verdicts, axes=[], factors=[], estimator="mean", scale=ORDINAL)
    for system in ("a", "b"):
        rows = verdicts[verdicts["system"] == system]
        row = rates[(rates["system"] == system) & (rates["subgroup"] == "all")].iloc[0]
        y = (rows["score"].to_numpy() - 1) / 9
        fit = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": pd.factorize(rows["case_id"])[0]})
        assert row["rate"] == pytest.approx(fit.params[0], abs=1e-12)
        assert row["mean"] == pytest.approx(rows["score"].mean(), abs=1e-12)
        assert row["se"] == pytest.approx(fit.bse[0], rel=1e-9)
        t = stats.t.ppf(0.975, rows["case_id"].nunique() - 1)
        assert row["ci_low"] == pytest.approx(fit.params[0] - t * fit.bse[0], rel=1e-9)
        assert row["ci_high"] == pytest.approx(fit.params[0] + t * fit.bse[0], rel=1e-9)
        assert row["n"] == len(rows) and row["estimator"] == "mean"


def test_with_one_row_per_case_the_standard_error_is_scipys_sem():
    verdicts = _table(np.random.default_rng(2), replicates=1)
    rates = compute_rates(verdicts, axes=[], factors=[], estimator="mean", scale=ORDINAL)
    for system in ("a", "b"):
        y = (verdicts.loc[verdicts["system"] == system, "score"].to_numpy() - 1) / 9
        row = rates[rates["system"] == system].iloc[0]
        assert row["se"] == pytest.approx(stats.sem(y), rel=1e-12)


def test_a_share_at_a_cut_keeps_the_binary_wilson_interval():
    verdicts = _table(np.random.default_rng(3))
    shares = compute_rates(verdicts, axes=[], factors=[], estimator="at_least", cut=7, scale=ORDINAL)
    labels = verdicts.assign(compliant=(verdicts["score"] >= 7).astype("boolean"))
    binary = compute_rates(labels, axes=[], factors=[])
    for column in ("n", "n_compliant", "rate", "ci_low", "ci_high"):
        assert np.allclose(shares[column].to_numpy(float), binary[column].to_numpy(float), rtol=0, atol=0)
    assert shares["mean"].isna().all() and (shares["se"] > 0).all()


def test_ties_count_one_half_or_are_left_out():
    prefs = np.array([1.0, 0.5, 0.0, 0.5, 0.8, 0.5])
    verdicts = pd.DataFrame({"system": "a", "case_id": [f"c{i}" for i in range(6)], "status": "ok",
                             "compliant": pd.array([pd.NA] * 6, dtype="boolean"), "score": prefs})
    half = compute_rates(verdicts, axes=[], factors=[], estimator="win_rate", scale=PAIRWISE)
    out = compute_rates(verdicts, axes=[], factors=[], estimator="win_rate", ties="exclude", scale=PAIRWISE)
    assert half["rate"].iloc[0] == pytest.approx(prefs.mean()) and half["n"].iloc[0] == 6
    assert out["rate"].iloc[0] == pytest.approx(prefs[prefs != 0.5].mean()) and out["n"].iloc[0] == 3


def test_estimators_and_cuts_can_differ_per_universe_and_binary_rows_are_untouched():
    rng = np.random.default_rng(4)
    one = _table(rng).assign(universe_id="mean")
    two = one.assign(universe_id="cut7")
    scoring = pd.DataFrame({"universe_id": ["mean", "cut7"], "estimator": ["mean", "at_least"], "cut": [None, 7.0]})
    rates = compute_rates(pd.concat([one, two], ignore_index=True), axes=[], factors=[], scoring=scoring,
                          scale=ORDINAL)
    assert list(rates["universe_id"].unique()) == ["mean", "cut7"]
    cut = rates[rates["universe_id"] == "cut7"]
    assert cut["rate"].tolist() == [float((one[one["system"] == s]["score"] >= 7).mean()) for s in ("a", "b")]
    # A table without scores: the columns and every number as before.
    binary = one.assign(compliant=(one["score"] >= 7).astype("boolean")).drop(columns="score")
    assert "mean" not in compute_rates(binary, axes=[], factors=[]).columns


def test_the_mean_interval_covers_the_true_mean_at_its_level():
    # Known truth: case effects (ICC about 0.4) on a 1-10 scale; the rescaled true mean is computed by
    # simulating a very large population from the same model.
    rng = np.random.default_rng(5)
    truth_draw = np.clip(np.round(6 + rng.normal(0, 1.5, 400_000) + rng.normal(0, 1, 400_000)), 1, 10)
    truth = (truth_draw.mean() - 1) / 9
    covered = 0
    trials = 400
    for _ in range(trials):
        verdicts = _table(rng, n_cases=30, replicates=3, systems=("a",))
        row = compute_rates(verdicts, axes=[], factors=[], estimator="mean", scale=ORDINAL).iloc[0]
        covered += row["ci_low"] <= truth <= row["ci_high"]
    # 0.95 nominal; 400 trials give a standard error of about 0.011.
    assert 0.92 <= covered / trials <= 0.98


def _mean_matrix(rng, n_cases=30, universes=3):
    from dataclasses import replace

    from multiverse.analysis import CONTRIBUTION, case_matrix

    parts = []
    case_level = rng.normal(0, 1.2, n_cases)
    for u in range(universes):
        grades = np.clip(np.round(6 + case_level + rng.normal(0, 1, n_cases)), 1, 10)
        parts.append(pd.DataFrame({"universe_id": f"u{u}", "system": "a", "case_id": [f"c{i}" for i in range(n_cases)],
                                   "compliant": pd.array([pd.NA] * n_cases, dtype="boolean"),
                                   CONTRIBUTION: (grades - 1) / 9}))
    matrix = case_matrix(pd.concat(parts, ignore_index=True), axes=[])
    return replace(matrix, means=np.ones(universes, dtype=bool))


def test_the_joint_test_of_means_holds_its_level_under_a_true_null_and_rejects_a_false_one():
    from multiverse.analysis import joint_mean_test

    rng = np.random.default_rng(8)
    population = np.clip(np.round(6 + rng.normal(0, 1.2, 400_000) + rng.normal(0, 1, 400_000)), 1, 10)
    truth = (population.mean() - 1) / 9
    rejected = 0
    trials = 200
    for trial in range(trials):
        test = joint_mean_test(_mean_matrix(rng), system="a", threshold=truth, boot=200, seed=trial)
        rejected += test.p["median_effect"] < 0.05
    # Nominal 0.05; 200 trials give a standard error of about 0.015.
    assert rejected / trials <= 0.10
    far = joint_mean_test(_mean_matrix(rng), system="a", threshold=truth - 0.15, boot=200, seed=0)
    assert far.p["median_effect"] < 0.05 and far.observed["median_effect"] > 0
