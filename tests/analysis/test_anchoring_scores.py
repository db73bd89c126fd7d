"""Anchoring a scored run (issue 42): PPI++ for a judge's mean score on a bounded scale, and what is refused.

Known truth: a human score drawn from a distribution on a 1-5 or 1-10
scale (mid-scale, high, a ceiling with rare low scores, and a rare floor
under a ceiling), the judge a biased and/or noisy function of it. The
anchored interval must cover the true human mean; ppi-python's normal
interval on the same data is the reference for the point estimate, and is
shown to under-cover where labels pile up at one end of the scale (the case
the score interval exists for). The fuller table is
tests/bench/bench_anchoring_scores.py (README › Human anchoring › Scores).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from multiverse.analysis import calibrate
from multiverse.analysis.anchoring._ppi import ppi_bounded_mean
from multiverse.errors import InputError
from multiverse.tables import ScaleRecord

#: Human score distributions over the points of a k-point scale (1..k), as probabilities.
SHAPES = ("mid", "high", "ceiling", "rare-low")
JUDGES = ("good", "biased", "noisy")


def shape(name: str, k: int) -> np.ndarray:
    x = np.arange(1, k + 1)
    p = {"mid": np.exp(-0.5 * ((x - (k + 1) / 2) / (k / 4)) ** 2),
         "high": np.exp(4.5 * x / k),
         "ceiling": np.r_[np.full(k - 1, 0.02 / (k - 1)), 0.98],
         "rare-low": np.r_[0.05, np.zeros(k - 2), 0.95]}[name]
    return p / p.sum()


def judge_scores(rng, y: np.ndarray, k: int, judge: str) -> np.ndarray:
    """The judge's score: ``good`` close to the human's, ``biased`` a point or two high, ``noisy`` compressed and noisy."""
    unit = k / 5
    raw = {"good": y + rng.normal(0, 0.5 * unit, y.shape),
           "biased": y + unit + rng.normal(0, 0.7 * unit, y.shape),
           "noisy": 0.5 * y + 0.25 * k + rng.normal(0, 1.5 * unit, y.shape)}[judge]
    return np.clip(np.rint(raw), 1, k)


def score_world(rng, reps: int, k: int, shape_name: str, judge: str, labels: int, transcripts: int = 300):
    """``reps`` cells of ``transcripts``: human scores y, judge scores f (1..k), the first ``labels`` labelled; the truth."""
    p = shape(shape_name, k)
    y = rng.choice(np.arange(1, k + 1), size=(reps, transcripts), p=p).astype(float)
    return y, judge_scores(rng, y, k, judge), float((np.arange(1, k + 1) * p).sum())


def sums(y: np.ndarray, f: np.ndarray, labels: int) -> tuple:
    """``ppi_bounded_mean``'s per-cell sums, of the values rescaled to [0, 1] by the caller."""
    yl, fl, fu = y[:, :labels], f[:, :labels], f[:, labels:]
    n = np.full(len(y), float(labels))
    return (n, yl.sum(1), (yl**2).sum(1), fl.sum(1), (fl**2).sum(1), (yl * fl).sum(1), np.full(len(y), float(fu.shape[1])),
            fu.sum(1), (fu**2).sum(1))


def coverage(seed: int, reps: int, k: int, shape_name: str, judge: str, labels: int, *,
             normal: bool = True) -> dict[str, float]:
    """Coverage of the true human mean by the anchored, humans-only and ppi-python normal intervals; median widths."""
    y, f, truth = score_world(np.random.default_rng(seed), reps, k, shape_name, judge, labels)
    scale = (y - 1) / (k - 1), (f - 1) / (k - 1)
    target = (truth - 1) / (k - 1)
    moments = sums(*scale, labels)
    _, low, high, _ = ppi_bounded_mean(*moments, 0.05)
    _, h_low, h_high, _ = ppi_bounded_mean(*moments, 0.05, judge=False)
    n_low, n_high = (np.array([ppi_mean_ci(y[i, :labels], f[i, :labels], f[i, labels:], alpha=0.05)
                               for i in range(reps)]).reshape(reps, 2).T if normal else np.full((2, reps), np.nan))
    n_target = truth
    return {"anchored": float(np.mean((low <= target) & (target <= high))),
            "humans": float(np.mean((h_low <= target) & (target <= h_high))),
            "normal": float(np.mean((n_low <= n_target) & (n_target <= n_high))),
            "width": float(np.median(high - low) * (k - 1)), "human_width": float(np.median(h_high - h_low) * (k - 1)),
            "normal_width": float(np.median(n_high - n_low)), "points": int(np.sum(high - low <= 0))}


# -- the estimate is ppi-python's -----------------------------------------------------------------------


@pytest.mark.parametrize("k", [5, 10])
def test_the_anchored_mean_is_ppi_pythons_point_estimate_in_the_scales_units(k):
    rng = np.random.default_rng(k)
    y, f, _ = score_world(rng, 30, k, "high", "biased", 20)
    rate, *_ = ppi_bounded_mean(*sums((y - 1) / (k - 1), (f - 1) / (k - 1), 20), 0.05)
    for i in range(30):
        reference = float(ppi_mean_pointestimate(y[i, :20], f[i, :20], f[i, 20:])[0])
        assert 1 + rate[i] * (k - 1) == pytest.approx(reference, abs=1e-9)


def test_the_humans_only_interval_of_labels_all_alike_is_no_point_and_holds_the_mean():
    # 20 labels all at the top of a 1-5 scale: the sample variance is 0, the normal interval a point at 5.
    n = np.array([20.0])
    y = np.ones(20)
    moments = (n, np.array([y.sum()]), np.array([(y**2).sum()]), np.array([y.sum()]), np.array([(y**2).sum()]),
               np.array([(y * y).sum()]), np.array([280.0]), np.array([280.0]), np.array([280.0]))
    for judge in (True, False):
        rate, low, high, _ = ppi_bounded_mean(*moments, 0.05, judge=judge)
        assert rate[0] == 1.0 and high[0] == 1.0 and 0.7 < low[0] < 0.97


# -- coverage under known truth -------------------------------------------------------------------------


@pytest.mark.parametrize("k", [5, 10])
@pytest.mark.parametrize("labels", [20, 100])
def test_anchored_mean_intervals_cover_the_human_mean_on_likert_scales(k, labels):
    worst = {}
    for s, shape_name in enumerate(SHAPES):
        for j, judge in enumerate(JUDGES):
            result = coverage(1000 * k + 10 * s + j + labels, 500, k, shape_name, judge, labels, normal=False)
            worst[(shape_name, judge)] = result["anchored"]
            assert result["points"] == 0
            assert result["humans"] >= 0.93, (shape_name, judge, result)
    assert min(worst.values()) >= 0.93, worst


def test_ppi_pythons_normal_interval_under_covers_where_labels_pile_up_at_the_top():
    # Why the score interval: 20 labels from a ceiling distribution are often all alike, and the normal interval a point.
    result = coverage(7, 500, 5, "ceiling", "good", 20)
    assert result["normal"] < 0.5 and result["anchored"] >= 0.95


# -- through calibrate: a scored run ---------------------------------------------------------------------


ORDINAL = ScaleRecord(type="ordinal", min=1, max=5)


def scored_run(rng, cases: int = 150, systems=("a", "b")):
    """A scored run of two universes (judge j1 biased high, j2 noisy) and the human scores of every transcript."""
    rows, truth = [], {}
    for system in systems:
        for c in range(cases):
            key = f"{system}-{c}"
            truth[key] = float(rng.choice(np.arange(1, 6), p=shape("high", 5)))
    for universe, judge in (("u1", "biased"), ("u2", "noisy"), ("u3", "good")):
        keys = list(truth)
        f = judge_scores(rng, np.array([truth[k] for k in keys]), 5, judge)
        for key, score in zip(keys, f):
            system, case = key.split("-")
            rows.append({"universe_id": universe, "judge": judge, "system": system, "case_id": f"c{case}",
                         "replicate": 0, "transcript_key": key, "status": "ok", "score": score})
    verdicts = pd.DataFrame(rows).assign(compliant=pd.array([pd.NA] * len(rows), dtype="boolean"))
    scoring = pd.DataFrame({"universe_id": ["u1", "u2", "u3"], "estimator": ["mean", "mean", "at_least"],
                            "cut": [None, None, 4], "ties": None})
    return verdicts, scoring, truth


def human_sheet(rng, truth: dict, labels: int) -> pd.DataFrame:
    keys = pd.Series(list(truth))
    picked = keys.groupby(keys.str.split("-").str[0]).sample(labels, random_state=int(rng.integers(1 << 30)))
    return pd.DataFrame({"system": picked.str.split("-").str[0], "case_id": "c" + picked.str.split("-").str[1],
                         "transcript_key": picked, "score": [truth[k] for k in picked]})


def test_calibrate_anchors_each_universe_as_its_estimator_reads_the_scores():
    rng = np.random.default_rng(3)
    verdicts, scoring, truth = scored_run(rng)
    human = human_sheet(rng, truth, 30)
    calibration = calibrate(verdicts, human, ["judge"], source="labels.csv", scale=ORDINAL, scoring=scoring)
    rates = calibration.rates.set_index(["universe_id", "system"])
    labelled = set(human["transcript_key"])
    for (universe, system), row in rates.iterrows():
        cell = verdicts[(verdicts["universe_id"] == universe) & (verdicts["system"] == system)]
        is_labelled = cell["transcript_key"].isin(labelled).to_numpy()
        y = np.array([truth[k] for k in cell["transcript_key"][is_labelled]])
        f, u = cell["score"].to_numpy()[is_labelled], cell["score"].to_numpy()[~is_labelled]
        assert row["n_human"] == 30 and row["n"] == 150
        if universe == "u3":  # at_least 4: the share people score 4 or 5, a 0/1 PPI++
            assert row["estimator"] == "at_least" and np.isnan(row["mean"])
            expected = float(ppi_mean_pointestimate((y >= 4).astype(float), (f >= 4).astype(float),
                                                    (u >= 4).astype(float))[0])
            assert row["rate"] == pytest.approx(min(max(expected, 0.0), 1.0), abs=1e-9)
            assert row["human_rate"] == pytest.approx(np.mean(y >= 4))
        else:
            assert row["estimator"] == "mean"
            expected = float(ppi_mean_pointestimate(y, f, u)[0])
            assert row["mean"] == pytest.approx(expected, abs=1e-9)
            assert row["rate"] == pytest.approx((expected - 1) / 4, abs=1e-9)
            assert row["judge_mean"] == pytest.approx(cell["score"].mean())
            assert row["human_mean"] == pytest.approx(y.mean())
            assert row["mean_ci_low"] < row["mean"] < row["mean_ci_high"]
            assert row["mean_ci_low"] == pytest.approx(1 + 4 * row["ci_low"])
    judges = calibration.judges.set_index("universe_id")
    assert judges.at["u1", "mean_difference"] > 0.2  # the biased judge scores high (a point, less the scale's ceiling)
    assert pd.isna(judges.at["u1", "sensitivity"]) and not pd.isna(judges.at["u3", "sensitivity"])
    assert pd.isna(judges.at["u3", "mean_difference"])
    assert 0 < judges.at["u2", "correlation"] < judges.at["u1", "correlation"]
    assert len(calibration.labelled) == 60


@pytest.mark.parametrize(("cell", "expected"), [
    ("6", "(the judge's ordinal scale), got '6'"),
    ("0", "got '0'"),
    ("2.5", "got '2.5'"),
    ("four", "got 'four'"),
    ("inf", "got 'inf'"),
    ("nan", "got 'nan'"),
    ("-1", "got '-1'"),
])
def test_a_human_score_off_the_scale_is_refused_in_one_line(cell, expected):
    rng = np.random.default_rng(4)
    verdicts, scoring, truth = scored_run(rng)
    human = human_sheet(rng, truth, 12).astype({"score": object}).reset_index(drop=True)
    human.loc[2, "score"] = cell
    with pytest.raises(InputError, match=re.escape(expected)) as error:
        calibrate(verdicts, human, ["judge"], source="labels.csv", scale=ORDINAL, scoring=scoring)
    assert str(error.value).startswith("labels.csv: row 4: score: expected a whole number from 1 to 5")
    assert "\n" not in str(error.value)


def test_what_cannot_be_anchored_is_refused_in_one_line():
    rng = np.random.default_rng(5)
    verdicts, scoring, truth = scored_run(rng)
    human = human_sheet(rng, truth, 12)
    as_labels = human.drop(columns="score").assign(compliant=(human["score"] >= 4).astype(int))
    with pytest.raises(InputError, match=r"labels.csv: score: column missing; expected .* a whole number from 1 to 5 .*"
                                         "it has compliant labels"):
        calibrate(verdicts, as_labels, ["judge"], source="labels.csv", scale=ORDINAL, scoring=scoring)
    pairwise = ScaleRecord(type="pairwise", min=0, max=1, reference="a")
    with pytest.raises(InputError, match=r"labels.csv: scale: the run's judge gives pairwise scores"):
        calibrate(verdicts, human, ["judge"], source="labels.csv", scale=pairwise, scoring=scoring)
    wins = scoring.assign(estimator=["mean", "win_rate", "at_least"])
    with pytest.raises(InputError, match=r"scoring.estimator: universe u2 reads a win rate"):
        calibrate(verdicts, human, ["judge"], source="labels.csv", scale=ORDINAL, scoring=wins)
    binary = verdicts.assign(compliant=pd.array(verdicts["score"] >= 4, dtype="boolean")).drop(columns="score")
    with pytest.raises(InputError, match=r"labels.csv: compliant: column missing; .* \(it has scores"):
        calibrate(binary, human, ["judge"], source="labels.csv")
    continuous = ScaleRecord(type="continuous", min=1, max=5)
    rates = calibrate(verdicts, human.assign(score=human["score"] - 0.25 * (human["score"] > 1)), ["judge"],
                      source="labels.csv", scale=continuous, scoring=scoring).rates
    assert rates["n_human"].eq(12).all()  # a continuous scale takes any number on it


# -- where features meet ---------------------------------------------------------------------------------


def test_a_cut_on_scores_anchors_as_the_same_cut_imported_as_compliant_labels():
    """Scores read at_least 4, and the same judgments and human scores turned into 0/1 labels, give the same rates."""
    rng = np.random.default_rng(8)
    verdicts, scoring, truth = scored_run(rng)
    human = human_sheet(rng, truth, 25)
    scored = calibrate(verdicts, human, ["judge"], scale=ORDINAL, scoring=scoring).rates
    binary = verdicts.assign(compliant=pd.array(verdicts["score"] >= 4, dtype="boolean")).drop(columns="score")
    labels = human.drop(columns="score").assign(compliant=(human["score"] >= 4).astype(int))
    plain = calibrate(binary, labels, ["judge"]).rates
    columns = ["n", "n_human", "judge_rate", "rate", "ci_low", "ci_high", "human_rate", "human_ci_low", "human_ci_high"]
    cut = scored[scored["universe_id"] == "u3"].reset_index(drop=True)
    same = plain[plain["universe_id"] == "u3"].reset_index(drop=True)
    pd.testing.assert_frame_equal(cut[columns], same[columns], check_exact=False, rtol=0, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(labels=st.integers(2, 40), unlabelled=st.integers(0, 80), k=st.sampled_from([5, 10]), seed=st.integers(0, 2**31))
def test_the_interval_holds_its_estimate_is_never_a_point_and_mirrors_with_the_scale(labels, unlabelled, k, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(1, k + 1, size=(1, labels + unlabelled)).astype(float)
    f = np.clip(y + rng.integers(-2, 3, size=y.shape), 1, k)
    if rng.random() < 0.3:  # labels all alike, the case a normal interval makes a point
        y[:, :labels] = rng.integers(1, k + 1)
    ry, rf = (y - 1) / (k - 1), (f - 1) / (k - 1)
    rate, low, high, lam = ppi_bounded_mean(*sums(ry, rf, labels), 0.05)
    centre = np.clip(rate, 0, 1)
    assert 0 <= low[0] <= centre[0] + 1e-12 and centre[0] - 1e-12 <= high[0] <= 1 and high[0] > low[0]
    assert 0 <= lam[0] <= 1
    # Scoring from the other end (1 - value) mirrors the estimate and the interval.
    m_rate, m_low, m_high, _ = ppi_bounded_mean(*sums(1 - ry, 1 - rf, labels), 0.05)
    assert m_rate[0] == pytest.approx(1 - rate[0], abs=1e-9)
    assert (m_low[0], m_high[0]) == pytest.approx((1 - high[0], 1 - low[0]), abs=1e-9)


def test_replicates_of_a_case_widen_the_anchored_mean_by_the_case_clustering():
    """Three replicates per case that share the human score: the interval is clustered by case, so it is wider than
    the same rows taken as independent cases, and the estimate does not move."""
    rng = np.random.default_rng(9)
    cases, replicates = 60, 3
    y_case = rng.choice(np.arange(1, 6), size=cases, p=shape("high", 5)).astype(float)
    y = np.repeat(y_case, replicates)
    f = judge_scores(rng, y, 5, "noisy")
    keys = [f"t{i}" for i in range(len(y))]
    verdicts = pd.DataFrame({"universe_id": "u1", "judge": "j", "system": "a",
                             "case_id": [f"c{i // replicates}" for i in range(len(y))],
                             "replicate": np.tile(np.arange(replicates), cases), "transcript_key": keys,
                             "status": "ok", "score": f, "compliant": pd.array([pd.NA] * len(y), dtype="boolean")})
    scoring = pd.DataFrame({"universe_id": ["u1"], "estimator": ["mean"], "cut": [None], "ties": [None]})
    picked = rng.choice(len(y), size=45, replace=False)
    human = verdicts.iloc[picked][["system", "case_id", "replicate", "transcript_key"]].assign(score=y[picked])
    clustered = calibrate(verdicts, human, ["judge"], scale=ORDINAL, scoring=scoring).rates.iloc[0]
    apart = verdicts.assign(case_id=[f"c{i}" for i in range(len(y))])
    alone = calibrate(apart, human.assign(case_id=apart["case_id"].to_numpy()[picked]), ["judge"], scale=ORDINAL,
                      scoring=scoring).rates.iloc[0]
    assert clustered["mean"] == pytest.approx(alone["mean"], abs=1e-12)
    assert clustered["mean_ci_high"] - clustered["mean_ci_low"] > 1.1 * (alone["mean_ci_high"] - alone["mean_ci_low"])
