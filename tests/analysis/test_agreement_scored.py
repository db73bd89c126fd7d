"""Agreement on scores inside the agreement analysis: pairing, the scale, cuts, the document, the command and figure."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli
from sklearn.metrics import cohen_kappa_score

from multiverse.analysis import agreement
from multiverse.errors import InputError
from multiverse.results import AgreementDocument, Results

SCALE = {"type": "ordinal", "min": 1, "max": 10}


def scored_verdicts(n_cases: int = 30, replicates: int = 2, judges=("judge_a", "judge_b", "judge_c"), *,
                    seed: int = 0, shift=(0, 1, 0), labels: bool = False) -> pd.DataFrame:
    """Judges score the same transcripts 1..10: a true score per transcript, each judge's shift and noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for case in range(n_cases):
        case_effect = rng.integers(-2, 3)
        for replicate in range(replicates):
            truth = int(np.clip(5 + case_effect + rng.integers(-3, 4), 1, 10))
            for judge, move in zip(judges, shift):
                score = float(np.clip(truth + move + rng.integers(-1, 2), 1, 10))
                rows.append({"judge": judge, "system": "atlas", "case_id": f"c{case}", "replicate": replicate,
                             "transcript_key": f"t{case}-{replicate}", "judgment_key": f"{judge}/{case}/{replicate}",
                             "status": "ok", "compliant": (score >= 7) if labels else pd.NA, "score": score})
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame


def _wide(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.pivot_table(index="transcript_key", columns="judge", values="score")


def test_scores_section_matches_the_references_on_the_paired_transcripts():
    frame = scored_verdicts()
    frame.loc[frame.sample(frac=0.1, random_state=1).index, "status"] = "failed"  # failures do not count
    counted = frame[frame["status"] == "ok"]
    wide = _wide(counted)
    document = agreement(frame, axes=["judge"], axis="judge", scale=SCALE, cuts=[7])
    scores = document["scores"]
    assert scores["options"] == ["judge_a", "judge_b", "judge_c"] and scores["paired_on"] == "transcript"
    assert scores["n_units"] == int((wide.notna().sum(axis=1) >= 2).sum())
    points = np.arange(1, 11)
    for pair in scores["pairs"]:
        both = wide[[pair["a"], pair["b"]]].dropna()
        a, b = both[pair["a"]].astype(int), both[pair["b"]].astype(int)
        assert pair["n"] == len(both)
        for weights in ("linear", "quadratic"):
            reference = cohen_kappa_score(a, b, labels=points, weights=weights)
            assert pair[f"kappa_{weights}"] == pytest.approx(reference, abs=1e-12)
        assert pair["exact"] == pytest.approx((a == b).mean())
        assert pair["within_one"] == pytest.approx(((a - b).abs() <= 1).mean())
        assert pair["mean_difference"]["mean"] == pytest.approx((a - b).mean())
    judge_b = next(p for p in scores["pairs"] if (p["a"], p["b"]) == ("judge_a", "judge_b"))
    low, high = judge_b["mean_difference"]["ci_low"], judge_b["mean_difference"]["ci_high"]
    assert low < -0.5 < high < 0  # judge_b scores one point higher, by construction
    matrix = wide[scores["options"]].to_numpy().T
    assert scores["krippendorff_alpha_ordinal"] == pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal", value_domain=points), abs=1e-10)
    assert scores["krippendorff_alpha_interval"] == pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval"), abs=1e-10)
    assert scores["icc"]["n"] == int(wide.notna().all(axis=1).sum())
    # At the cut: Cohen's kappa on the labels score >= 7, as on compliance labels.
    (cut,) = scores["cuts"]
    assert cut["cut"] == 7.0
    for pair in cut["pairs"]:
        both = wide[[pair["a"], pair["b"]]].dropna() >= 7
        assert pair["cohen_kappa"] == pytest.approx(cohen_kappa_score(both[pair["a"]], both[pair["b"]]), abs=1e-12)
        assert pair["n"] == len(both)


def test_a_cut_loses_agreement_the_raw_scores_have():
    # Scores that agree closely on 1..10 but straddle the cut: kappa at the cut is well below weighted kappa.
    document = agreement(scored_verdicts(n_cases=60, seed=4, shift=(0, 0, 0)), axes=["judge"], axis="judge",
                         scale=SCALE, cuts=[7])
    scores = document["scores"]
    for raw, at_cut in zip(scores["pairs"], scores["cuts"][0]["pairs"]):
        assert (raw["a"], raw["b"]) == (at_cut["a"], at_cut["b"])
        assert raw["kappa_quadratic"] > at_cut["cohen_kappa"] + 0.1


def test_labels_part_is_unchanged_by_a_score_column_without_scores():
    frame = scored_verdicts(judges=("j1", "j2"), shift=(0, 2), labels=True).drop(columns="score")
    before = agreement(frame, axes=["judge"], axis="judge")
    after = agreement(frame.assign(score=np.nan), axes=["judge"], axis="judge", scale=SCALE, cuts=[7])
    assert "scores" not in before and json.dumps(before, default=str) == json.dumps(after, default=str)


def test_labels_and_scores_side_by_side():
    frame = scored_verdicts(labels=True)
    document = agreement(frame, axes=["judge"], axis="judge", scale=SCALE, cuts=[7])
    # The labels are score >= 7, so the labels' kappa is the scores' kappa at 7.
    assert [p["cohen_kappa"] for p in document["pairs"]] == pytest.approx(
        [p["cohen_kappa"] for p in document["scores"]["cuts"][0]["pairs"]])
    assert document["n_units"] == document["scores"]["n_units"]


def test_pairs_only_on_the_same_transcript_and_each_judgment_once():
    frame = scored_verdicts(judges=("judge_a", "judge_b"), shift=(0, 0))
    base = agreement(frame, axes=["judge"], axis="judge", scale=SCALE)["scores"]
    shuffled = agreement(frame.sample(frac=1.0, random_state=3), axes=["judge"], axis="judge", scale=SCALE)["scores"]
    assert shuffled["pairs"][0]["kappa_quadratic"] == pytest.approx(base["pairs"][0]["kappa_quadratic"])
    # judge_b's transcripts renamed: nothing pairs (and the axis is read as changing the transcripts).
    apart = frame.assign(transcript_key=np.where(frame["judge"] == "judge_b", "other-" + frame["transcript_key"],
                                                 frame["transcript_key"]))
    moved = agreement(apart, axes=["judge"], axis="judge", scale=SCALE)["scores"]
    assert moved["paired_on"] == "system, case and replicate"
    # An axis over the cut scores the same judgments twice: they count once.
    twice = pd.concat([frame.assign(cut="six"), frame.assign(cut="seven")], ignore_index=True)
    repeated = agreement(twice, axes=["judge", "cut"], axis="judge", scale=SCALE)["scores"]
    assert repeated["n_units"] == base["n_units"]
    assert repeated["pairs"][0]["kappa_quadratic"] == pytest.approx(base["pairs"][0]["kappa_quadratic"])
    assert repeated["pairs"][0]["mean_difference"]["n"] == base["pairs"][0]["mean_difference"]["n"]


def test_the_scale_is_declared_checked_or_inferred():
    frame = scored_verdicts(judges=("judge_a", "judge_b"), shift=(0, 0))
    inferred = agreement(frame, axes=["judge"], axis="judge")["scores"]
    assert inferred["scale"]["declared"] is False and inferred["scale"]["type"] == "ordinal"
    assert any("no scale declared" in n for n in inferred["notes"])
    declared = agreement(frame, axes=["judge"], axis="judge", scale=SCALE)["scores"]
    # Points unused at the ends change nothing: inferred and declared agree.
    assert inferred["pairs"][0]["kappa_linear"] == pytest.approx(declared["pairs"][0]["kappa_linear"])
    with pytest.raises(InputError, match=r"column 'score': 11 is not a point of the ordinal scale 1\.\.10"):
        agreement(frame.assign(score=frame["score"].replace(10.0, 11.0)), axes=["judge"], axis="judge", scale=SCALE)
    # min and max left out take the spec's defaults (0 and 1): 0..10 here, an unused end point.
    default_low = agreement(frame, axes=["judge"], axis="judge", scale={"type": "ordinal", "max": 10})["scores"]
    assert default_low["scale"]["min"] == 0.0
    assert default_low["pairs"][0]["kappa_linear"] == pytest.approx(declared["pairs"][0]["kappa_linear"])
    with pytest.raises(InputError, match="scale: min and max"):
        agreement(frame, axes=["judge"], axis="judge", scale={"type": "ordinal", "min": "low", "max": 10})
    continuous = frame.assign(score=frame["score"] / 10.0)
    result = agreement(continuous, axes=["judge"], axis="judge",
                       scale={"type": "continuous", "min": 0, "max": 1})["scores"]
    pair = result["pairs"][0]
    assert np.isnan(pair["kappa_quadratic"]) and np.isnan(pair["exact"]) and np.isnan(result["krippendorff_alpha_ordinal"])
    assert result["krippendorff_alpha_interval"] == pytest.approx(
        declared["krippendorff_alpha_interval"], abs=1e-12)  # interval alpha ignores the unit of measurement


def test_small_samples_and_constant_judges_are_noted():
    frame = scored_verdicts(n_cases=5, replicates=1, judges=("judge_a", "judge_b"), shift=(0, 0))
    frame.loc[:, "score"] = 5.0
    scores = agreement(frame, axes=["judge"], axis="judge", scale=SCALE)["scores"]
    assert scores["pairs"][0]["small_sample"] is True
    assert any("weighted kappa undefined" in n for n in scores["notes"])
    assert any("fewer than 30" in n for n in scores["notes"])


def test_results_document_figure_and_command(tmp_path):
    from multiverse.core import universe_id
    from multiverse.tables import write_run_folder

    frame = scored_verdicts()
    # As an import with one cut writes it: each judge's universe reads the share of scores at or above 7.
    universes = [{"id": universe_id({"judge": j}), "options": {"judge": j}, "scoring": {"estimator": "at_least", "cut": 7}}
                 for j in dict.fromkeys(frame["judge"])]
    frame.insert(0, "universe_id", frame["judge"].map({u["options"]["judge"]: u["id"] for u in universes}))
    manifest = {"axes": ["judge"], "scale": SCALE, "universes": universes}
    results = Results(frame, axes=["judge"], manifest=manifest)
    analysis = results.agreement("judge")
    typed = analysis.document
    assert isinstance(typed, AgreementDocument) and typed.scores is not None
    assert typed.scores.scale.declared and typed.scores.cuts[0].cut == 7.0
    assert typed.scores.pairs[0].kappa_quadratic == pytest.approx(analysis.source["scores"]["pairs"][0]["kappa_quadratic"])
    figure = analysis.figure()
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert titles[0].startswith("quadratic-weighted kappa") and "score \u2265 7" in titles[1] and "mean score" in titles[2]

    rates = results.rate_table() if frame["compliant"].notna().any() else pd.DataFrame(
        columns=["universe_id", "system", "rate"])
    folder = write_run_folder(tmp_path / "scored", verdicts=frame, criteria=None, rates=rates, manifest=manifest)
    text = run_cli(["agreement", folder, "--axis", "judge", "--figure", tmp_path / "a.png"], cwd=tmp_path).ok()
    assert "agreement on scores (ordinal 1..10, declared)" in text and "kappa quad" in text
    assert "on the labels score >= 7" in text and "ICC(2,1) absolute agreement" in text
    assert "agreement across judge" not in text  # scores only: no empty table of labels
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = json.loads(run_cli(["agreement", folder, "--axis", "judge", "--json"], cwd=tmp_path).ok())
    assert document["scores"]["pairs"][0]["kappa_quadratic"] == pytest.approx(typed.scores.pairs[0].kappa_quadratic)


def test_a_bare_table_of_scores_pairs_across_scores(tmp_path):
    # Read without a manifest, the score column may be taken for an axis: it is never a context of the units.
    from multiverse import load_run

    frame = scored_verdicts()
    frame.to_csv(tmp_path / "scores.csv", index=False)
    loaded = load_run(tmp_path / "scores.csv").agreement("judge").source["scores"]
    direct = agreement(frame, axes=["judge"], axis="judge")["scores"]
    assert loaded["n_units"] == direct["n_units"] == 60
    assert loaded["pairs"][0]["kappa_quadratic"] == pytest.approx(direct["pairs"][0]["kappa_quadratic"])
    assert loaded["pairs"][0]["kappa_quadratic"] < 1
