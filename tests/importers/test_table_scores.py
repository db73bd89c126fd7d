"""``import table --score`` (issue 27): a pairwise leaderboard reproduced exactly, a 1-10 table's cuts as universes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli
from scipy import stats

from multiverse.errors import InputError
from multiverse.importers import import_table
from multiverse.results._load import load_run


def _leaderboard(path, seed=11, n_items=300):
    """A pairwise table as a multi-judge leaderboard publishes it: per item, the preference of each model over the
    reference in [0, 1] (a judge's weighted probability), exact ties 0.5; the reference compared with itself ties."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, shift in (("atlas", 0.12), ("beacon", 0.03), ("comet", -0.08), ("baseline", 0.0)):
        for i in range(n_items):
            if model == "baseline":
                preference = 0.5
            elif rng.random() < 0.25:
                preference = 0.5  # a tie
            else:
                preference = float(np.clip(rng.beta(2, 2) + shift, 0, 1))
            rows.append({"model": model, "question": f"q{i:03d}", "preference": preference})
    frame = pd.DataFrame(rows)
    frame.to_csv(path, index=False, float_format="%.17g")
    # What the leaderboard publishes: the mean preference, ties one half, and its standard error over items.
    published = {m: (g["preference"].mean(), stats.sem(g["preference"])) for m, g in frame.groupby("model")}
    return frame, published


def test_a_pairwise_leaderboard_is_reproduced_to_1e_9_with_its_standard_errors(tmp_path):
    table = tmp_path / "leaderboard.csv"
    _, published = _leaderboard(table)
    out = tmp_path / "imported"
    result = run_cli(["import", "table", table, "--system", "model", "--item", "question", "--score", "preference",
                      "--scale", "0:1", "--reference", "baseline", "--out", out])
    assert result.returncode == 0, result.stderr
    assert "reference system 'baseline' is compared with itself" in result.stderr
    rates = pd.read_csv(out / "rates.csv")
    assert set(rates["estimator"]) == {"win_rate"}
    for model, (win_rate, sem) in published.items():
        row = rates[(rates["system"] == model) & (rates["subgroup"] == "all")].iloc[0]
        assert abs(row["rate"] - win_rate) < 1e-9
        assert abs(row["mean"] - win_rate) < 1e-9  # a 0-1 scale: the native mean is the rate
        if model != "baseline":
            assert abs(row["se"] - sem) < 1e-9
    assert rates.loc[rates["system"] == "baseline", "rate"].iloc[0] == 0.5
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["scale"]["type"] == "pairwise" and manifest["reference"] == "baseline"


def test_the_reference_is_left_out_of_the_ranking_and_the_report_says_so(tmp_path):
    table = tmp_path / "leaderboard.csv"
    _leaderboard(table, n_items=60)
    out = tmp_path / "imported"
    results = import_table(table, system="model", item="question", score="preference", scale=(0, 1),
                           reference="baseline", out_dir=out)
    document = load_run(out).ranking(boot=0).source
    assert "baseline" not in document["systems"] and set(document["systems"]) == {"atlas", "beacon", "comet"}
    assert document["reference"] == "baseline"
    assert any("reference system baseline is left out of the ranking" in n for n in document["notes"])
    assert any("compared with itself" in w for w in results.warnings)


def test_a_system_that_only_ties_is_pointed_out_when_no_reference_is_named(tmp_path):
    table = tmp_path / "leaderboard.csv"
    _leaderboard(table, n_items=40)
    results = import_table(table, system="model", item="question", score="preference", scale=(0, 1),
                           out_dir=tmp_path / "imported")
    assert any("every score of 'baseline' is a tie" in w for w in results.warnings)


def _grades(path):
    # atlas: steady 6-8; beacon: many 9-10 and some low; comet: middling. The top flips with the cut.
    rng = np.random.default_rng(3)
    rows = []
    for judge in ("judge-a", "judge-b"):
        for i in range(80):
            for model, choices, weights in (("atlas", [6, 7, 8], [.2, .5, .3]), ("beacon", [3, 4, 9, 10], [.2, .2, .3, .3]),
                                            ("comet", [5, 6, 7], [.3, .4, .3])):
                rows.append({"judge": judge, "model": model, "item": f"i{i}", "grade": int(rng.choice(choices, p=weights))})
    frame = pd.DataFrame(rows)
    frame.to_csv(path, index=False)
    return frame


def test_each_cut_is_a_universe_over_the_same_judgments_with_shares_and_means_as_pandas_counts_them(tmp_path):
    table = tmp_path / "grades.csv"
    frame = _grades(table)
    out = tmp_path / "imported"
    result = run_cli(["import", "table", table, "--system", "model", "--item", "item", "--score", "grade",
                      "--scale", "1:10", "--axis", "judge", "--cut", "7", "--cut", "9", "--out", out])
    assert result.returncode == 0, result.stderr
    results = load_run(out)
    assert results.axes == ["judge", "scoring"] and results.scale.type == "ordinal"
    verdicts = results.verdicts
    # Three options over the same judgments: the judgment keys of every option are the same set.
    keys = verdicts.groupby("scoring", observed=True)["judgment_key"].apply(lambda k: frozenset(k.astype(str)))
    assert len(set(keys)) == 1 and len(keys) == 3
    rates = pd.read_csv(out / "rates.csv")
    for (judge, model), group in frame.groupby(["judge", "model"]):
        mine = rates[(rates["judge"] == judge) & (rates["system"] == model)].set_index("scoring")
        assert mine.loc["mean", "mean"] == pytest.approx(group["grade"].mean(), abs=1e-12)
        assert mine.loc["mean", "rate"] == pytest.approx((group["grade"].mean() - 1) / 9, abs=1e-12)
        for cut in (7, 9):
            assert mine.loc[f"at least {cut}", "rate"] == pytest.approx((group["grade"] >= cut).mean(), abs=1e-12)
            assert mine.loc[f"at least {cut}", "n_compliant"] == (group["grade"] >= cut).sum()
    ranking = run_cli(["ranking", out])
    assert "the top system changes between cut 7 and cut 9 (judge=judge-a): atlas -> beacon" in ranking.stdout


@pytest.mark.parametrize(("rows", "options", "message"), [
    ({"grade": ["3", "11"]}, {"scale": (1, 10)}, "expected a score from 1 to 10 (the scale), got 11 in data row 2"),
    ({"grade": ["3", "high"]}, {"scale": (1, 10)}, "grade: expected a number in data row 2, got 'high'"),
    ({"grade": ["3", "4"]}, {"scale": (1, 10), "cuts": [12]}, "cut: expected a score from 1 to 10, got 12"),
    ({"grade": ["3", "4"]}, {}, "a score column needs its `scale`"),
    ({"grade": ["3", "4"]}, {"scale": (1, 10), "reference": "nobody"}, "'nobody' is not a system of the table"),
])
def test_bad_scores_are_refused_in_one_line_and_nothing_is_written(tmp_path, rows, options, message):
    table = tmp_path / "t.csv"
    pd.DataFrame({"model": ["a", "b"], "item": ["i1", "i1"], **rows}).to_csv(table, index=False)
    out = tmp_path / "out"
    with pytest.raises(InputError) as caught:
        import_table(table, system="model", item="item", score="grade", out_dir=out, **options)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not (out / "manifest.json").exists()


def test_a_label_and_a_score_together_are_refused(tmp_path):
    table = tmp_path / "t.csv"
    pd.DataFrame({"model": ["a"], "item": ["i1"], "grade": [3], "ok": [1]}).to_csv(table, index=False)
    with pytest.raises(InputError, match="expected a `label` column or a `score` column"):
        import_table(table, system="model", item="item", label="ok", score="grade", scale=(1, 10),
                     out_dir=tmp_path / "out")


def test_every_analysis_reads_the_scored_estimate_of_each_universe(tmp_path):
    table = tmp_path / "grades.csv"
    frame = _grades(table)
    results = import_table(table, system="model", item="item", score="grade", scale=(1, 10), cuts=[7],
                           axes=["judge"], out_dir=tmp_path / "imported")
    results = load_run(tmp_path / "imported")
    curve = results.curve_frame()
    rates = results.rate_table()
    merged = curve.merge(rates[rates["subgroup"] == "all"], on=["universe_id", "system"], suffixes=("", "_table"))
    # The curve and the rates table agree on every estimate and interval: a mean's t interval, a share's Wilson.
    for column in ("rate", "ci_low", "ci_high"):
        assert np.allclose(merged[column], merged[f"{column}_table"], rtol=0, atol=1e-12)
    mean_rows = merged[merged["scoring"] == "mean"]
    one = mean_rows.iloc[0]
    group = frame[(frame["judge"] == one["judge"]) & (frame["model"] == one["system"])]
    y = (group["grade"].to_numpy() - 1) / 9
    half = stats.t.ppf(0.975, len(y) - 1) * stats.sem(y)
    assert one["ci_low"] == pytest.approx(y.mean() - half, abs=1e-12)
    # Variance and ranking see the same rates.
    system_rates = results.system_rates()
    assert np.allclose(system_rates.sort_values(["universe_id", "system"])["rate"],
                       rates[rates["subgroup"] == "all"].sort_values(["universe_id", "system"])["rate"], atol=1e-12)
    assert len(results.variance().frame) > 0
    figure = results.curve().figure()
    labels = [ax.get_ylabel() for ax in figure.axes] + [c.get_ylabel() for ax in figure.axes for c in ax.child_axes]
    assert "rate: rescaled mean, or share at a cut" in labels
    assert any("mean score (1–10)" in label for label in labels)


def test_a_multi_judge_import_reports_agreement_on_scores_and_at_each_cut_as_the_references_do(tmp_path):
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(11)
    truth = rng.integers(2, 10, size=(3, 40))
    rows = []
    for judge, noise in (("judge-a", 0), ("judge-b", 1)):
        for s, system in enumerate(("atlas", "beacon", "comet")):
            grades = np.clip(truth[s] + rng.integers(-1, 2, size=40) * noise, 1, 10)
            rows += [{"judge": judge, "model": system, "item": f"q{i:02d}", "grade": int(g)} for i, g in enumerate(grades)]
    table = tmp_path / "grades.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    results = import_table(table, system="model", item="item", score="grade", scale=(1, 10), cuts=[6, 7],
                           axes=["judge"], out_dir=tmp_path / "out")
    scores = results.agreement("judge").source["scores"]
    wide = pd.DataFrame(rows).pivot_table(index=["model", "item"], columns="judge", values="grade")
    a, b = wide["judge-a"].to_numpy(), wide["judge-b"].to_numpy()
    pair = scores["pairs"][0]
    assert pair["kappa_quadratic"] == pytest.approx(cohen_kappa_score(a, b, weights="quadratic", labels=range(1, 11)),
                                                    abs=1e-12)
    assert scores["krippendorff_alpha_interval"] == pytest.approx(
        krippendorff.alpha(reliability_data=np.vstack([a, b]), level_of_measurement="interval"), abs=1e-12)
    # kappa at each cut the universes use, on the labels score >= cut
    at = {c["cut"]: c for c in scores["cuts"]}
    assert sorted(at) == [6.0, 7.0]
    for cut, entry in at.items():
        assert entry["pairs"][0]["cohen_kappa"] == pytest.approx(cohen_kappa_score(a >= cut, b >= cut), abs=1e-12)
    # the shares at each cut and the mean, as pandas counts them
    rates = results.rates[results.rates["subgroup"] == "all"]
    for (judge, system), grades in pd.DataFrame(rows).groupby(["judge", "model"])["grade"]:
        mine = rates[(rates["judge"] == judge) & (rates["system"] == system)].set_index("scoring")["rate"]
        assert mine.to_dict() == pytest.approx({"mean": (grades.mean() - 1) / 9, "at least 6": (grades >= 6).mean(),
                                                "at least 7": (grades >= 7).mean()}, abs=1e-12)
