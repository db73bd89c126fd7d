"""Human anchoring as a user runs it: label, calibrate, and --human on curve, ranking and power."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import refused, run_cli
from conftest import tiny_spec_document
from PIL import Image

import multiverse as mv
from multiverse.tables._tables import write_json, write_table

CASES = 60
# The world: atlas is compliant on 80% of transcripts, beacon on 55%. Judge "fair" agrees with people on 90% of
# them; judge "kind" calls every beacon transcript compliant, which puts beacon on top of its ranking.
TRUE_RATE = {"atlas": 0.8, "beacon": 0.55}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A run folder (2 judges x 2 systems x 60 cases, transcripts and a rubric) and the people's labels of all of it."""
    rng = np.random.default_rng(11)
    root = tmp_path_factory.mktemp("anchoring")
    rows, transcripts, truth = [], [], {}
    for system, rate in TRUE_RATE.items():
        for i in range(CASES):
            key = f"{system[0]}{i:03d}"
            truth[key] = bool(rng.random() < rate)
            transcripts.append({"key": key, "system": system, "status": "ok", "reason": "",
                                "turns": [{"role": "user", "content": f"question {i}"},
                                          {"role": "assistant", "content": f"answer {key}"}]})
            for judge in ("fair", "kind"):
                if judge == "kind" and system == "beacon":
                    verdict = True
                else:
                    verdict = truth[key] if rng.random() < 0.9 else not truth[key]
                rows.append({"universe_id": f"u-{judge}", "judge": judge, "system": system, "case_id": f"c{i:03d}",
                             "behavior": f"b{i % 2}", "replicate": 0, "transcript_key": key,
                             "judgment_key": f"{judge}-{key}", "status": "ok", "reason": "", "compliant": verdict})
    verdicts = pd.DataFrame(rows)
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    run = root / "run"
    run.mkdir()
    write_table(verdicts, run, "verdicts")
    (run / "transcripts.jsonl").write_text("\n".join(json.dumps(t) for t in transcripts) + "\n")
    (run / "spec.yaml").write_text("rubric:\n  criteria:\n  - id: honest\n    name: Honest\n    permissible: false\n"
                                   "    definition: Says only what it knows.\n")
    write_json({"schema_version": 1, "axes": ["judge"], "factors": ["behavior"], "primary": "u-fair"},
               run / "manifest.json")
    return run, truth


def _filled(sheet: Path, truth: dict, out: Path, *, rows: slice = slice(None)) -> Path:
    """The sheet as a person fills it in: the true label of every transcript in ``rows``."""
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False).iloc[rows]
    frame["compliant"] = ["1" if truth[k] else "0" for k in frame["transcript_key"]]
    frame.to_csv(out, index=False)
    return out


@pytest.fixture(scope="module")
def labels(world, tmp_path_factory) -> Path:
    run, truth = world
    root = tmp_path_factory.mktemp("labels")
    run_cli(["label", run, "--n", "30", "--seed", "3", "--out", root / "SHEET.csv"]).ok()
    return _filled(root / "SHEET.csv", truth, root / "filled.csv")


def test_label_writes_the_sheet_and_its_page(world, tmp_path):
    run, _ = world
    code, out, err = run_cli(["label", run, "--n", "12", "--seed", "7", "--out", tmp_path / "s" / "SHEET.csv"])
    assert code == 0, err
    sheet = pd.read_csv(tmp_path / "s" / "SHEET.csv", dtype=str, keep_default_na=False)
    assert len(sheet) == 24 and sheet.groupby("system").size().tolist() == [12, 12]
    assert (sheet["compliant"] == "").all() and "behavior" in sheet.columns
    page = (tmp_path / "s" / "SHEET.html").read_text(encoding="utf-8")
    assert "Says only what it knows." in page
    assert f"sheet: {tmp_path / 's' / 'SHEET.csv'} (24 transcripts to label)" in out
    # The same seed draws the same sample; another seed another one.
    run_cli(["label", run, "--n", "12", "--seed", "7", "--out", tmp_path / "again.csv"])
    run_cli(["label", run, "--n", "12", "--seed", "8", "--out", tmp_path / "other.csv"])
    keys = {name: set(pd.read_csv(tmp_path / name)["transcript_key"]) for name in ("s/SHEET.csv", "again.csv", "other.csv")}
    assert keys["s/SHEET.csv"] == keys["again.csv"] != keys["other.csv"]


def test_label_keeps_a_sheet_someone_may_have_filled_in(world, tmp_path):
    run, _ = world
    sheet = tmp_path / "SHEET.csv"
    assert run_cli(["label", run, "--n", "3", "--out", sheet]).returncode == 0
    filled = sheet.read_text(encoding="utf-8").replace(",\n", ",1\n")  # labels typed in by hand
    sheet.write_text(filled, encoding="utf-8")
    page = (tmp_path / "SHEET.html").read_bytes()
    refused(run_cli(["label", run, "--n", "3", "--seed", "9", "--out", sheet]), "already there", "--force")
    assert sheet.read_text(encoding="utf-8") == filled and (tmp_path / "SHEET.html").read_bytes() == page
    assert run_cli(["label", run, "--n", "3", "--seed", "9", "--out", sheet, "--force"]).returncode == 0
    assert sheet.read_text(encoding="utf-8") != filled


def test_label_refuses_bad_places_and_counts_before_writing(world, tmp_path):
    run, _ = world
    before = sorted(p.name for p in run.iterdir())
    verdicts = (run / "verdicts.csv").read_bytes()
    line = refused(run_cli(["label", run, "--n", "5", "--out", run / "verdicts.csv"]), "verdicts.csv",
                   "is the input")
    assert line.startswith("error: ")
    assert (run / "verdicts.csv").read_bytes() == verdicts and sorted(p.name for p in run.iterdir()) == before
    refused(run_cli(["label", run, "--n", "5", "--out", tmp_path / "sheet.txt"]), "--out", ".csv")
    (tmp_path / "dir.csv").mkdir()
    refused(run_cli(["label", run, "--n", "5", "--out", tmp_path / "dir.csv"]), "is a folder")
    (tmp_path / "taken").write_text("a file")
    refused(run_cli(["label", run, "--n", "5", "--out", tmp_path / "taken" / "s.csv"]), "is a file")
    for bad in ("0", "-3", "two"):
        refused(run_cli(["label", run, "--n", bad, "--out", tmp_path / "s.csv"]), "--n")
    refused(run_cli(["label", tmp_path / "missing", "--n", "5", "--out", tmp_path / "s.csv"]), "missing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.csv", "taken"]


def test_calibrate_prints_the_table_and_json_in_the_issues_shape(world, labels, tmp_path):
    run, _ = world
    figure = tmp_path / "calibration.png"
    code, out, err = run_cli(["calibrate", run, "--human", labels, "--json", "--figure", figure])
    assert code == 0, err
    document = json.loads(out)
    assert set(document) == {"alpha", "rates", "judges", "labelled", "notes", "rate_direction"}
    assert document["alpha"] == 0.05 and document["rate_direction"] == "compliance"  # --json stays compliance
    assert document["labelled"] == {"transcripts": 60, "rollout_configurations": 1,
                                    "systems": {"atlas": 30, "beacon": 30}, "per_cell": 30}
    assert len(document["rates"]) == 4 and len(document["judges"]) == 2
    for row in document["rates"]:
        assert list(row) == ["universe_id", "judge", "system", "n", "n_human", "judge_rate", "rate", "ci_low",
                             "ci_high", "human_rate", "human_ci_low", "human_ci_high", "anchored_wider"]
        assert row["n"] == CASES and row["n_human"] == 30
        assert 0 <= row["ci_low"] <= row["rate"] <= row["ci_high"] <= 1
        # With a judge this good, the anchored interval is narrower than the humans-only one.
        if row["judge"] == "fair":
            assert row["ci_high"] - row["ci_low"] < row["human_ci_high"] - row["human_ci_low"]
            assert row["anchored_wider"] is False
        assert row["anchored_wider"] == (row["ci_high"] - row["ci_low"] > row["human_ci_high"] - row["human_ci_low"] + 1e-9)
    for row in document["judges"]:
        assert list(row) == ["universe_id", "judge", "n_human", "sensitivity", "sensitivity_ci", "specificity",
                             "specificity_ci", "accuracy", "accuracy_ci", "kappa"]
        assert row["n_human"] == 60 and len(row["sensitivity_ci"]) == 2
    kind = {r["system"]: r for r in document["rates"] if r["judge"] == "kind"}
    assert kind["beacon"]["judge_rate"] == 1.0 and kind["beacon"]["rate"] < 0.8  # the bias is corrected
    # The notebook gets the same document from the results object.
    analysis = mv.load_run(run).calibrate(labels)
    assert analysis.to_dict() == document and len(analysis.frame) == 4 and len(analysis.judges) == 2
    with Image.open(figure) as image:
        assert image.format == "PNG" and image.size[0] > 600

    code, out, err = run_cli(["calibrate", run, "--human", labels, "--alpha", "0.1"])
    assert code == 0, err
    assert "rates anchored to" in out and "90% intervals" in out and "sensitivity" in out and "anchored wider" in out
    assert out.count("judge=fair") == 3 and "* judge=fair" in out  # two rates and one judge row; the primary starred


def test_calibrate_by_system_gives_each_judges_accuracy_per_system_as_each_systems_own_calibration(world, labels):
    """--by system: one table with the system a column; each group's judges equal calibrate on that system's rows
    and labels, and accuracy and kappa equal sklearn's on the people's and the judge's labels."""
    from sklearn.metrics import accuracy_score, cohen_kappa_score

    run, truth = world
    code, out, err = run_cli(["calibrate", run, "--human", labels, "--by", "system", "--json"])
    assert code == 0, err
    document = json.loads(out)
    assert document["by"] == "system" and [g["group"] for g in document["groups"]] == ["atlas", "beacon"]
    results = mv.load_run(run)
    from multiverse.labelling import IDENTITY_COLUMNS

    # The reference path reads the labels as a plain table: the sheet names its sample of the whole run.
    sheet = pd.read_csv(labels, dtype=str, keep_default_na=False).drop(columns=list(IDENTITY_COLUMNS), errors="ignore")
    verdicts = results.verdicts
    for group in document["groups"]:
        system = group["group"]
        own = mv.Results(verdicts[verdicts["system"] == system].reset_index(drop=True), axes=["judge"],
                         factors=["behavior"], primary="u-fair")
        alone = own.calibrate(sheet[sheet["system"] == system].reset_index(drop=True)).to_dict()
        assert group["document"]["judges"] == alone["judges"] and group["document"]["rates"] == alone["rates"]
        for judge in group["document"]["judges"]:
            rows = verdicts[(verdicts["system"] == system) & (verdicts["universe_id"] == judge["universe_id"])]
            rows = rows[rows["transcript_key"].isin(sheet["transcript_key"])]
            people = [truth[k] for k in rows["transcript_key"]]
            said = rows["compliant"].astype(bool).tolist()
            assert judge["accuracy"] == pytest.approx(accuracy_score(people, said), abs=1e-12)
            expected = cohen_kappa_score(people, said) if len(set(people) | set(said)) > 1 else None
            assert judge["kappa"] == (pytest.approx(expected, abs=1e-12) if expected == expected else None)
    # A design factor: each behavior's rows with the labels of their transcripts (matched on system and case).
    by_behavior = results.calibrate(labels, by="behavior").to_dict()
    for group in by_behavior["groups"]:
        rows = verdicts[verdicts["behavior"] == group["group"]].reset_index(drop=True)
        mine = sheet[sheet["case_id"].isin(set(rows["case_id"]))].reset_index(drop=True)
        alone = mv.Results(rows, axes=["judge"], factors=["behavior"], primary="u-fair").calibrate(mine).to_dict()
        assert group["document"]["judges"] == alone["judges"] and group["document"]["rates"] == alone["rates"]
    code, out, err = run_cli(["calibrate", run, "--human", labels, "--by", "system"])
    assert code == 0, err
    assert out.splitlines()[1].split()[:3] == ["system", "universe", "n_human"] and "accuracy" in out
    refused(run_cli(["calibrate", run, "--human", labels, "--by", "colour"]), "by colour", "system")


def _labels_with(labels: Path, tmp_path: Path, change) -> Path:
    frame = pd.read_csv(labels, dtype=str, keep_default_na=False)
    out = tmp_path / "changed.csv"
    change(frame).to_csv(out, index=False)
    return out


@pytest.mark.parametrize(("change", "fragments"), [
    (lambda f: f.assign(transcript_key=f["transcript_key"].where(f.index != 4, "nope")), ("row 6", "'nope' was not drawn")),
    (lambda f: f[(f["system"] != "atlas") | (f.groupby("system").cumcount() < 9)], ("system atlas: 9 labels", "at least 10")),
    (lambda f: f.assign(compliant=f["compliant"].where(f.index != 2, "maybe")), ("compliant", "'maybe'", "row 4")),
    (lambda f: f.drop(columns="compliant"), ("missing column(s) compliant",)),
    (lambda f: pd.concat([f, f.iloc[[0]]]), ("rows 2 and 62", "the same drawn transcript twice")),
])
def test_calibrate_refuses_bad_labels_with_one_line(world, labels, tmp_path, change, fragments):
    run, _ = world
    bad = _labels_with(labels, tmp_path, change)
    figure = tmp_path / "never.png"
    for command in (["calibrate", run, "--human", bad, "--figure", figure],
                    ["curve", run, "--human", bad, "--figure", figure, "--boot", "50"],
                    ["ranking", run, "--human", bad, "--boot", "0"]):
        refused(run_cli(command), str(bad), *fragments)
    assert not figure.exists()


def test_calibrate_refuses_bad_flags(world, labels, tmp_path):
    run, _ = world
    refused(run_cli(["calibrate", run, "--human", tmp_path / "none.csv"]), "none.csv")
    for alpha in ("0", "1", "nan", "x"):
        refused(run_cli(["calibrate", run, "--human", labels, "--alpha", alpha]), "--alpha")
    refused(run_cli(["calibrate", run]), "--human")
    refused(run_cli(["calibrate", run, "--human", labels, "--figure", tmp_path / "f.gif"]), ".png")
    assert not (tmp_path / "f.gif").exists()


def test_curve_with_human_draws_both_curves_and_adds_the_anchored_summary(world, labels, tmp_path):
    run, _ = world
    figure = tmp_path / "curve.png"
    code, out, err = run_cli(["curve", run, "--human", labels, "--json", "--boot", "50", "--figure", figure])
    assert code == 0, err
    document = json.loads(out)
    anchored = document["anchored"]
    assert {"n_universes", "systems", "tests"} <= set(document)  # the judge-raw curve is all still there
    assert anchored["n_universes"] == 2 and set(anchored["systems"]) == {"atlas", "beacon"}
    beacon = anchored["systems"]["beacon"]
    assert beacon["judge_rate"]["max"] == 1.0 and beacon["rate"]["max"] < 0.8
    row = mv.load_run(run).calibrate(labels).frame.query("judge == 'fair' and system == 'atlas'").iloc[0]
    primary = anchored["systems"]["atlas"]["primary"]
    assert primary["rate"] == pytest.approx(row["rate"])
    assert (primary["human_ci_low"], primary["human_ci_high"]) == pytest.approx((row["human_ci_low"], row["human_ci_high"]))
    assert primary["anchored_wider"] is bool(row["anchored_wider"])
    with Image.open(figure) as image:  # two columns (judge alone, anchored) of two systems
        assert image.format == "PNG" and image.size[1] > image.size[0] * 0.8
    code, out, err = run_cli(["curve", run, "--human", labels, "--boot", "50"])
    assert code == 0, err
    assert "anchored to people (PPI++, 95% intervals), 2 universes:" in out and "primary 1.000 ->" not in out
    assert "  beacon: judge " in out
    one = json.loads(run_cli(["curve", run, "--human", labels, "--system", "atlas", "--json", "--boot", "50"]).ok())
    assert set(one["systems"]) == set(one["anchored"]["systems"]) == {"atlas"}


def test_ranking_with_human_says_where_the_ranking_does_not_survive(world, labels):
    run, _ = world
    code, out, err = run_cli(["ranking", run, "--human", labels, "--boot", "0", "--json"])
    assert code == 0, err
    anchored = json.loads(out)["anchored"]
    by_universe = {e["universe_id"]: e for e in anchored["universes"]}
    # The kind judge puts beacon on top; people put atlas there. The fair judge agrees with people.
    assert by_universe["u-kind"]["judge_order"] == ["beacon", "atlas"]
    assert by_universe["u-kind"]["anchored_order"] == ["atlas", "beacon"] and not by_universe["u-kind"]["same_top"]
    assert by_universe["u-fair"]["same_top"] and anchored["same_top"] == 0.5
    assert anchored["primary"]["universe_id"] == "u-fair"
    code, out, err = run_cli(["ranking", run, "--human", labels, "--boot", "0"])
    assert code == 0, err
    assert "anchored to people: the top system survives in 1 of 2 universes" in out
    assert "u-kind: top beacon by the judge, atlas anchored" in out


def test_results_calibrate_reads_an_edited_file_again_and_takes_a_frame(world, labels, tmp_path):
    run, _ = world
    results = mv.load_run(run)
    path = tmp_path / "growing.csv"
    frame = pd.read_csv(labels, dtype=str, keep_default_na=False)
    frame.iloc[:40].to_csv(path, index=False)
    first = results.calibrate(path)
    assert results.calibrate(path) is first  # cached while the file is unchanged
    frame.to_csv(path, index=False)
    second = results.calibrate(path)
    assert second is not first and second.frame["n_human"].sum() > first.frame["n_human"].sum()
    from_frame = results.calibrate(frame)
    pd.testing.assert_frame_equal(from_frame.frame, second.frame)
    assert results.calibrate(path, alpha=0.2).frame["ci_high"].lt(second.frame["ci_high"]).all()


def test_power_with_human_adds_the_label_budget(tmp_path):
    document = tiny_spec_document()
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(document))
    code, out, err = run_cli(["power", spec, "--json"])
    assert code == 0, err
    assert "human" not in json.loads(out)
    transcripts = json.loads(out)["comparisons"][0]["n_per_group"]
    code, out, err = run_cli(["power", spec, "--human", "3", "--json"])
    assert code == 0, err
    human = json.loads(out)["human"]
    assert human["labels"] == 3 and human["transcripts"] == transcripts and human["baseline_rate"] == 0.8
    widths = [j["anchored_width"] for j in human["judges"]]
    assert widths == sorted(widths, reverse=True) and all(w <= j["human_width"] for w, j in zip(widths, human["judges"]))
    code, out, err = run_cli(["power", spec, "--human", "3"])
    assert code == 0, err
    assert f"with 3 human labels per system (of {transcripts} transcripts)" in out and "anchored" in out
    refused(run_cli(["power", spec, "--human", str(transcripts + 1)]), "--human", f"{transcripts + 1} labels")
    refused(run_cli(["power", spec, "--human", "0"]), "--human")


def test_report_with_human_adds_the_section_anchored_to_people(world, labels, tmp_path):
    run, _ = world
    out = tmp_path / "report.html"
    run_cli(["report", run, "--human", labels, "--out", out, "--no-tests", "--quiet"]).ok()
    page = out.read_text(encoding="utf-8")
    section = page.split('<section id="anchored">')[1].split("</section>")[0]
    assert "<h2>Anchored to people</h2>" in section and 'href="#anchored"' in page
    assert "Each judge against the people" in section and "The corrected curve" in section
    assert section.count("data:image/png;base64,") == 1
    assert "The top system stays on top after anchoring in 1 of 2 universes" in section
    assert "could not be computed" not in section
    # The kind judge's universe, whose top flips, is listed first.
    rows = section.split("Does the ranking survive?")[1].split("<tbody>")[1].split("</tr>")
    assert "judge=kind" in rows[0] and "<td>no</td>" in rows[0] and "(primary)" in rows[1]

    plain = tmp_path / "plain.html"
    run_cli(["report", run, "--out", plain, "--no-tests", "--quiet"]).ok()
    assert 'id="anchored"' not in plain.read_text(encoding="utf-8")


def test_report_refuses_bad_labels_before_writing(world, labels, tmp_path):
    run, _ = world
    bad = _labels_with(labels, tmp_path, lambda f: f.assign(compliant=f["compliant"].where(f.index != 0, "2")))
    out = tmp_path / "report.html"
    refused(run_cli(["report", run, "--human", bad, "--out", out, "--no-tests", "--quiet"]), str(bad), "'2'")
    refused(run_cli(["report", run, "--human", labels, "--out", labels, "--no-tests", "--quiet"]), "is the input")
    assert not out.exists() and pd.read_csv(labels)["compliant"].notna().all()


def test_label_and_calibrate_an_import(world, tmp_path):
    """An import has no transcripts to show, but the sheet still names each labelled row, and calibrate reads it."""
    run, truth = world
    table = pd.read_csv(run / "verdicts.csv")
    table = table[["judge", "system", "case_id", "compliant"]].assign(truth=table["transcript_key"].map(truth))
    table[["judge", "system", "case_id", "compliant"]].to_csv(tmp_path / "grades.csv", index=False)
    run_cli(["import", "table", tmp_path / "grades.csv", "--system", "system", "--item", "case_id", "--label",
             "compliant", "--axis", "judge", "--out", tmp_path / "imported"]).ok()
    run_cli(["label", tmp_path / "imported", "--n", "15", "--out", tmp_path / "sheet.csv"]).ok()
    sheet = pd.read_csv(tmp_path / "sheet.csv", dtype=str, keep_default_na=False)
    imported = pd.read_csv(tmp_path / "imported" / "verdicts.csv", dtype=str)
    # A table without a transcript column has no transcript keys: each labelled row is named by system and case.
    assert len(sheet) == 30 and imported["transcript_key"].isna().all() and set(sheet["transcript_key"]) == {""}
    assert sheet[["system", "case_id"]].drop_duplicates().shape[0] == 30
    assert (tmp_path / "sheet.html").stat().st_size > 1000
    people = table.drop_duplicates(["system", "case_id"]).set_index(["system", "case_id"])["truth"]
    sheet["compliant"] = [int(people[(s, c)]) for s, c in zip(sheet["system"], sheet["case_id"])]
    sheet.to_csv(tmp_path / "filled.csv", index=False)
    document = json.loads(run_cli(["calibrate", tmp_path / "imported", "--human", tmp_path / "filled.csv",
                                   "--json"]).ok())
    assert len(document["rates"]) == 4 and {r["n_human"] for r in document["rates"]} == {15}


@pytest.mark.parametrize("wider", [True, False])
def test_curve_with_human_says_when_the_humans_only_interval_is_narrower(capsys, wider):
    from multiverse.cli._anchoring import print_anchored_curve
    from multiverse.results import AnchoredCurveDocument

    spread = {"min": 0.4, "median": 0.4, "max": 0.4}
    primary = {"judge_rate": 0.5, "rate": 0.4, "ci_low": 0.2, "ci_high": 0.6, "human_ci_low": 0.25,
               "human_ci_high": 0.55, "anchored_wider": wider}
    print_anchored_curve(AnchoredCurveDocument.model_validate(
        {"alpha": 0.05, "n_universes": 1, "systems": {"atlas": {"judge_rate": spread, "rate": spread, "primary": primary}},
         "notes": []}))
    out = capsys.readouterr().out
    assert ("the humans-only interval [0.25, 0.55] is narrower" in out) is wider and "[0.20, 0.60]" in out
