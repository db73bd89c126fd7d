"""label and calibrate on a scored run (issue 42), the report's labelled count (issue 48), through the CLI and the API.

The world: two systems, a 1-5 judge scale, two simulated users (two rollout
configurations: each user has its own transcripts) and two judges (one
scoring a point high, one fair), so four universes share each user's
transcripts. People score every transcript on the judge's scale.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from anchor_world import scored_folder as _world
from cli_runner import refused, run_cli
from ppi_py import ppi_mean_pointestimate

import multiverse as mv

N = 12


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    root = tmp_path_factory.mktemp("scored")
    run, truth = _world(root)
    run_cli(["label", run, "--n", str(N), "--seed", "4", "--out", root / "SHEET.csv"]).ok()
    sheet = pd.read_csv(root / "SHEET.csv", dtype=str, keep_default_na=False)
    sheet["score"] = [f"{truth[k]:g}" for k in sheet["transcript_key"]]
    sheet.to_csv(root / "filled.csv", index=False)
    return run, truth, root


def test_the_sheet_of_a_scored_run_asks_for_a_score_on_the_judges_scale(scored):
    _, _, root = scored
    sheet = pd.read_csv(root / "SHEET.csv", dtype=str, keep_default_na=False)
    assert "score" in sheet.columns and "compliant" not in sheet.columns and (sheet["score"] == "").all()
    assert len(sheet) == 2 * 2 * N  # per system, in each of the two users' rollout configurations
    page = (root / "SHEET.html").read_text(encoding="utf-8")
    assert "Score this transcript on the judge\\u0027s scale" in page or "Score this transcript on the judge's scale" in page


def test_calibrate_anchors_the_mean_score_and_counts_every_labelled_transcript_once(scored):
    run, truth, root = scored
    document = json.loads(run_cli(["calibrate", run, "--human", root / "filled.csv", "--json"]).ok())
    # The API says the same as the CLI.
    api = mv.load_run(run).calibrate(root / "filled.csv").source
    assert json.loads(json.dumps(api)) == document
    assert document["labelled"] == {"transcripts": 4 * N, "rollout_configurations": 2,
                                    "systems": {"atlas": 2 * N, "beacon": 2 * N}, "per_cell": N}
    verdicts = pd.read_parquet(run / "verdicts.parquet")
    labelled = set(pd.read_csv(root / "filled.csv")["transcript_key"])
    assert len(document["rates"]) == 8
    for rate in document["rates"]:
        cell = verdicts[(verdicts["universe_id"] == rate["universe_id"]) & (verdicts["system"] == rate["system"])]
        mask = cell["transcript_key"].isin(labelled).to_numpy()
        y = cell["transcript_key"][mask].map(truth).to_numpy(float)
        f = cell["score"].to_numpy(float)
        assert rate["n_human"] == N and rate["estimator"] == "mean"
        assert rate["mean"] == pytest.approx(float(ppi_mean_pointestimate(y, f[mask], f[~mask])[0]), abs=1e-9)
        assert rate["judge_mean"] == pytest.approx(f.mean()) and rate["human_mean"] == pytest.approx(y.mean())
        assert rate["mean_ci_low"] < rate["mean"] < rate["mean_ci_high"]
    generous = [j for j in document["judges"] if j["judge"] == "generous"]
    assert all(j["mean_difference"] > 0.4 and j["sensitivity"] is None for j in generous)

    text = run_cli(["calibrate", run, "--human", root / "filled.csv"]).ok()
    assert f"{4 * N} labelled transcripts of the run ({N} per system in each of 2 rollout configurations)" in text
    assert "mean scores anchored to people, in the scale's units" in text


def test_the_report_counts_each_labelled_transcript_once(scored, tmp_path):
    run, _, root = scored
    out = tmp_path / "report.html"
    run_cli(["report", run, "--human", root / "filled.csv", "--out", out, "--no-tests", "--quiet"]).ok()
    section = out.read_text(encoding="utf-8").split('<section id="anchored">')[1].split("</section>")[0]
    assert (f"People labelled a uniform random sample of {4 * N} transcripts ({N} per system in each of 2 rollout "
            "configurations)") in section
    assert "People scored the transcripts on the judge's scale, 1 to 5" in section and "(mean − 1) / 4" in section
    # Each judge's row counts the labels of its own universe: one user's transcripts, both systems.
    head = section.split("Each judge against the people")[1].split("</thead>")[0]
    assert "judge − people (mean score)" in head
    body = section.split("Each judge against the people")[1].split("<tbody>")[1].split("</tbody>")[0]
    assert body.count(f"<td class=\"num\">{2 * N}</td>") == 4


def test_the_report_counts_labels_of_a_binary_run_with_two_rollout_configurations(tmp_path):
    run, truth = _world(tmp_path, scored=False)
    run_cli(["label", run, "--n", str(N), "--out", tmp_path / "SHEET.csv"]).ok()
    sheet = pd.read_csv(tmp_path / "SHEET.csv", dtype=str, keep_default_na=False)
    sheet["compliant"] = ["1" if truth[k] >= 4 else "0" for k in sheet["transcript_key"]]
    sheet.iloc[:-3].to_csv(tmp_path / "filled.csv", index=False)  # three rows removed: the counts are of the labels
    removed = sheet.iloc[-3:]
    out = tmp_path / "report.html"
    run_cli(["report", run, "--human", tmp_path / "filled.csv", "--out", out, "--no-tests", "--quiet"]).ok()
    section = out.read_text(encoding="utf-8").split('<section id="anchored">')[1].split("</section>")[0]
    per_system = {s: 2 * N - int((removed["system"] == s).sum()) for s in ("atlas", "beacon")}
    assert f"People labelled a uniform random sample of {4 * N - 3} transcripts (atlas {per_system['atlas']}, " \
           f"beacon {per_system['beacon']}, over 2 rollout configurations)" in section


def test_what_a_scored_run_cannot_take_is_refused_in_one_line(scored, tmp_path):
    run, _, root = scored
    filled = pd.read_csv(root / "filled.csv", dtype=str, keep_default_na=False)
    for value, fragment in (("6", "got '6'"), ("3.5", "got '3.5'"), ("high", "got 'high'")):
        bad = filled.copy()
        bad.loc[5, "score"] = value
        bad.to_csv(tmp_path / "bad.csv", index=False)
        refused(run_cli(["calibrate", run, "--human", tmp_path / "bad.csv"]), "bad.csv", "row 7", "score",
                "a whole number from 1 to 5", fragment)
    as_labels = filled.drop(columns="score").assign(compliant="1")
    as_labels.to_csv(tmp_path / "labels.csv", index=False)
    refused(run_cli(["calibrate", run, "--human", tmp_path / "labels.csv"]), "labels.csv", "score: column missing",
            "it has compliant labels")
    pairwise, _ = _world(tmp_path / "pairwise", scale={"type": "pairwise", "min": 0, "max": 1, "reference": "beacon"})
    refused(run_cli(["label", pairwise, "--n", "10", "--out", tmp_path / "p.csv"]), "pairwise")
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "p.html").exists()


def test_a_table_without_transcript_keys_cannot_be_labelled_blind_and_says_so(tmp_path):
    """Its rows are named by system and case only: a blind export, without systems, could not be matched back."""
    grades = pd.DataFrame({"judge": np.repeat(["j1", "j2"], 40), "system": np.tile(np.repeat(["atlas", "beacon"], 20), 2),
                           "case_id": np.tile([f"q{i}" for i in range(20)], 4), "compliant": np.tile([0, 1], 40)})
    grades.to_csv(tmp_path / "grades.csv", index=False)
    run_cli(["import", "table", tmp_path / "grades.csv", "--system", "system", "--item", "case_id", "--label",
             "compliant", "--axis", "judge", "--out", tmp_path / "imported"]).ok()
    refused(run_cli(["label", tmp_path / "imported", "--n", "10", "--out", tmp_path / "s.csv", "--blind-systems"]),
            "--blind-systems: ", "no transcript_key", "expected a run folder, or a table with a transcript_key column")
    assert not (tmp_path / "s.csv").exists() and not (tmp_path / "s.html").exists()
    run_cli(["label", tmp_path / "imported", "--n", "10", "--out", tmp_path / "s.csv"]).ok()  # named: fine
