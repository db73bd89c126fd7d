"""Bradley-Terry scores from pairwise verdicts, held to statsmodels' logistic regression and to known truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import multiverse as mv
from multiverse.analysis import CONTRIBUTION, OPPONENT, bradley_terry, fit_bradley_terry
from multiverse.errors import InputError


def games(seed: int, truth: list[float], cases: int, *, tie: float = 0.15, meet: float = 0.7,
          universe: str = "u1", judge: str = "j1") -> pd.DataFrame:
    """Verdict rows, one game each: the row's system against its opponent, a win 1, a loss 0, a tie one half."""
    rng = np.random.default_rng(seed)
    rows = []
    for case in range(cases):
        for i in range(len(truth)):
            for j in range(i + 1, len(truth)):
                if rng.random() < meet:
                    y = 0.5 if rng.random() < tie else float(rng.random() < 1 / (1 + np.exp(truth[j] - truth[i])))
                    rows.append({"universe_id": universe, "judge": judge, "case_id": f"c{case:03d}",
                                 "system": f"s{i}", OPPONENT: f"s{j}", "compliant": y >= 0.5, CONTRIBUTION: y})
    return pd.DataFrame(rows)


def statsmodels_scores(rows: pd.DataFrame, systems: list[str], anchor: str | None, prior: float = 0.0) -> np.ndarray:
    """The independent fit: a binomial GLM on a +1/-1 design (the anchor's column dropped), each game two rows
    (a win weighted by its share, a loss by the rest) in freq_weights; the prior as tied games per pair met."""
    base = anchor if anchor is not None else systems[0]
    free = [s for s in systems if s != base]
    design, outcome, weight = [], [], []

    def game(a: str, b: str, share: float) -> None:
        x = np.zeros(len(free))
        if a != base:
            x[free.index(a)] += 1
        if b != base:
            x[free.index(b)] -= 1
        for won, w in ((1.0, share), (0.0, 1 - share)):
            if w > 0:
                design.append(x)
                outcome.append(won)
                weight.append(w)

    for a, b, y in zip(rows["system"], rows[OPPONENT], rows[CONTRIBUTION]):
        game(a, b, y)
    if prior:
        for pair in {frozenset(p) for p in zip(rows["system"], rows[OPPONENT])}:
            a, b = sorted(pair)  # ``prior`` tied games: half a win each way
            design.extend([_row(a, b, base, free)] * 2)
            outcome.extend([1.0, 0.0])
            weight.extend([prior / 2, prior / 2])
    fit = sm.GLM(np.array(outcome), np.array(design), family=sm.families.Binomial(),
                 freq_weights=np.array(weight)).fit(tol=1e-13, maxiter=200)
    scores = dict(zip(free, fit.params))
    scores[base] = 0.0
    out = np.array([scores[s] for s in systems])
    return out - out.mean() if anchor is None else out


def _row(a: str, b: str, base: str, free: list[str]) -> np.ndarray:
    x = np.zeros(len(free))
    if a != base:
        x[free.index(a)] += 1
    if b != base:
        x[free.index(b)] -= 1
    return x


def by_system(document: dict, universe: str = "u1") -> dict[str, dict]:
    return {r["system"]: r for r in document["scores"] if r["universe_id"] == universe}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), k=st.integers(2, 5), anchored=st.booleans(),
       tie=st.sampled_from([0.0, 0.2, 0.6]))
def test_scores_equal_statsmodels_logistic_regression_to_1e6(seed, k, anchored, tie):
    truth = list(np.random.default_rng(seed).normal(0, 0.8, k))
    rows = games(seed, truth, 40, tie=tie)
    systems = sorted(set(rows["system"]) | set(rows[OPPONENT]))
    anchor = systems[-1] if anchored else None
    try:
        document = bradley_terry(rows, axes=["judge"], anchor=anchor, bootstrap=0)
    except InputError as error:  # a draw where one system never loses: no finite fit, and the message says so
        assert "no finite maximum-likelihood fit" in str(error) and "\n" not in str(error)
        return
    expected = statsmodels_scores(rows, systems, anchor)
    got = by_system(document)
    assert np.allclose([got[s]["score"] for s in systems], expected, atol=1e-6, rtol=0)
    if anchor is not None:
        assert got[anchor]["score"] == 0.0
    else:
        assert abs(sum(got[s]["score"] for s in systems)) < 1e-9
    assert document["method"] == "bradley_terry" and document["anchor"] == anchor


def test_a_prior_of_tied_games_equals_statsmodels_with_those_games_and_is_said():
    rows = games(3, [0.0, 0.5, 1.0], 15, tie=0.0)
    # s2 wins every game it plays: no finite maximum without a prior.
    rows = rows[~((rows["system"] == "s2") | (rows[OPPONENT] == "s2"))]
    won = pd.DataFrame([{"universe_id": "u1", "judge": "j1", "case_id": f"c{i:03d}", "system": "s2", OPPONENT: o,
                         "compliant": True, CONTRIBUTION: 1.0} for i in range(15) for o in ("s0", "s1")])
    rows = pd.concat([rows, won], ignore_index=True)
    with pytest.raises(InputError) as refused:
        bradley_terry(rows, axes=["judge"], anchor="s0", bootstrap=0)
    message = str(refused.value)
    assert "universe u1: s2 never lose any part of a game to the other systems" in message
    assert "prior" in message and "\n" not in message
    document = bradley_terry(rows, axes=["judge"], anchor="s0", prior=0.5, bootstrap=0)
    expected = statsmodels_scores(rows, ["s0", "s1", "s2"], "s0", prior=0.5)
    got = by_system(document)
    assert np.allclose([got[s]["score"] for s in ("s0", "s1", "s2")], expected, atol=1e-6, rtol=0)
    assert np.isfinite(got["s2"]["score"]) and got["s2"]["rank"] == 1
    assert any("prior of 0.5 tied games" in note for note in document["notes"])


def test_systems_never_compared_are_refused_in_one_line():
    rows = pd.concat([games(1, [0, 1], 10), games(2, [0, 1], 10).replace({"s0": "t0", "s1": "t1"})])
    with pytest.raises(InputError, match="never compared, directly or through others"):
        bradley_terry(rows, axes=["judge"], bootstrap=0, prior=1.0)


def test_against_one_reference_the_score_is_the_log_odds_of_the_win_rate():
    """A pairwise scale's rows are games against the reference: the score is logit(mean preference), exactly."""
    rng = np.random.default_rng(5)
    rows = pd.DataFrame([{"system": s, "case_id": f"q{i}", "score": round(float(p), 4)}
                         for s, mean in (("atlas", 0.6), ("beacon", 0.45)) for i, p in
                         enumerate(np.clip(rng.normal(mean, 0.2, 50), 0, 1))])
    rows["compliant"] = rows["score"] >= 0.5
    rows[CONTRIBUTION] = rows["score"]
    document = bradley_terry(rows, axes=[], reference="ref", bootstrap=0)
    got = by_system(document, document["scores"][0]["universe_id"])
    assert got["ref"]["score"] == 0.0 and document["anchor"] == "ref"
    for system in ("atlas", "beacon"):
        mean = rows.loc[rows["system"] == system, "score"].mean()
        assert got[system]["score"] == pytest.approx(np.log(mean / (1 - mean)), abs=1e-9)


def test_known_truth_is_recovered_and_the_bootstrap_is_seeded_and_row_order_free():
    truth = [0.0, 0.7, -0.5, 1.4]
    rows = games(7, truth, 400, tie=0.0, meet=1.0)
    document = bradley_terry(rows, axes=["judge"], anchor="s0", bootstrap=200, seed=4)
    got = by_system(document)
    for i, value in enumerate(truth):
        record = got[f"s{i}"]
        assert abs(record["score"] - value) < 0.2  # 400 games a pair: the standard error is about 0.07
        assert record["low"] <= record["score"] <= record["high"]
        if i:
            assert record["low"] < value < record["high"]
    assert [got[f"s{i}"]["rank"] for i in range(4)] == [3, 2, 4, 1]
    assert got["s3"]["p_top"] > 0.9 and got["s3"]["rank_low"] == 1
    shuffled = rows.sample(frac=1.0, random_state=1).reset_index(drop=True)
    again = bradley_terry(shuffled, axes=["judge"], anchor="s0", bootstrap=200, seed=4)
    for s in got:
        for key in ("score", "low", "high", "rank_low", "rank_high", "p_top"):
            assert by_system(again)[s][key] == pytest.approx(got[s][key], abs=1e-9)
    other = bradley_terry(rows, axes=["judge"], anchor="s0", bootstrap=200, seed=5)
    assert by_system(other)["s1"]["low"] != got["s1"]["low"]


def test_rank_stability_across_universes_is_measured_on_the_scores():
    """Two judges order the systems differently: P(top) and Kendall's tau are those of the scores' ranks."""
    a = games(11, [0.0, 1.5, -1.0], 150, universe="ua", judge="ja")
    b = games(12, [0.0, -1.5, 1.0], 150, universe="ub", judge="jb")
    document = bradley_terry(pd.concat([a, b], ignore_index=True), axes=["judge"], bootstrap=0, primary="ua")
    top = {u: max((r for r in document["scores"] if r["universe_id"] == u), key=lambda r: r["score"])["system"]
           for u in ("ua", "ub")}
    assert top == {"ua": "s1", "ub": "s2"}
    stability = document["stability"]
    assert stability["p_top"] == {"s0": 0.0, "s1": 0.5, "s2": 0.5}
    assert stability["kendall_tau"]["matrix"][0][1] == pytest.approx(-1.0)  # s1 > s0 > s2 against s2 > s0 > s1
    assert [f["universe_id"] for f in stability["flips"]] == ["ub"]


def test_fit_of_a_batch_equals_the_fit_of_each():
    rng = np.random.default_rng(2)
    wins = rng.uniform(0.5, 5, size=(6, 4, 4))
    wins[:, np.arange(4), np.arange(4)] = 0
    batch = fit_bradley_terry(wins, anchor=1)
    for r in range(6):
        assert np.allclose(batch[r], fit_bradley_terry(wins[r], anchor=1), atol=1e-10)


def test_results_ranking_bt_reads_the_reference_and_refuses_what_has_no_games():
    rows = pd.DataFrame({"system": ["a", "a", "b", "b"], "case_id": ["1", "2", "1", "2"],
                         "compliant": [True, False, True, True], "judge": "j"})
    results = mv.Results(rows, axes=["judge"])
    with pytest.raises(InputError, match="Bradley-Terry scores need pairwise verdicts"):
        results.ranking(method="bt")
    with pytest.raises(InputError, match="method elo: expected rate or bt"):
        results.ranking(method="elo")


def test_the_batch_check_of_a_finite_fit_agrees_with_the_one_that_names_the_systems():
    from multiverse.analysis.ranking._bradley_terry import _finite, _unfit

    rng = np.random.default_rng(9)
    wins = rng.uniform(0, 1, size=(400, 5, 5)) * (rng.random((400, 5, 5)) < 0.35)
    wins[:, np.arange(5), np.arange(5)] = 0
    for prior in (0.0, 0.5):
        batch = _finite(wins, prior)
        assert batch.tolist() == [_unfit(m, prior) is None for m in wins]
        assert 0 < batch.sum() < len(batch)  # both kinds drawn
