"""``import table`` with replicates, transcripts, rationales and factors (issue 28).

Every expected number is worked out in the comments from the hand-made tables.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli

from multiverse.errors import InputError
from multiverse.explorer import document_from_run, document_texts
from multiverse.importers import import_table


def epochs_table(path, *, regenerate: bool = False):
    """Two judges x 6 items x 2 epochs of one system; the judges disagree on one answer of q0."""
    rows = []
    for judge in ("j1", "j2"):
        for i in range(6):
            for epoch in (1, 2):
                # Epochs agree within an item (items 0-2 pass, 3-5 fail): a strong item effect.
                label = int(i < 3)
                if judge == "j2" and i == 0 and epoch == 1:
                    label = 0
                answer = f"answer {i}.{epoch}" + (f" by {judge}" if regenerate else "")
                rows.append({"model": "m", "q": f"q{i}", "epoch": epoch, "judge": judge, "ok": label,
                             "answer": answer, "why": f"{judge} on q{i}#{epoch}", "topic": "a" if i % 2 else "b"})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_duplicate_rows_need_a_replicate_column(tmp_path):
    table = epochs_table(tmp_path / "t.csv")
    result = run_cli(["import", "table", table, "--system", "model", "--item", "q", "--label", "ok", "--axis",
                      "judge", "--out", tmp_path / "out"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--replicate" in result.stderr and "q=q0" in result.stderr
    assert not (tmp_path / "out").exists()


def test_replicates_count_each_epoch_and_cluster_the_interval_by_item(tmp_path):
    table = epochs_table(tmp_path / "t.csv")
    results = import_table(table, system="model", item="q", label="ok", axes=["judge"], replicate="epoch",
                           out_dir=tmp_path / "out")
    v = results.verdicts
    assert sorted(v["replicate"].unique()) == [1, 2] and len(v) == 24
    rates = results.rates[results.rates["subgroup"] == "all"].set_index("judge")
    # j1: 6 of 12 epochs pass; j2: 5 of 12.
    assert rates.loc["j1", ["n", "n_compliant"]].tolist() == [12, 6]
    assert rates.loc["j2", "rate"] == pytest.approx(5 / 12)
    # The same labels with epochs folded into the item id: 12 independent items, a narrower interval.
    folded = pd.read_csv(table).assign(q=lambda f: f["q"] + "#" + f["epoch"].astype(str)).drop(columns="epoch")
    folded.to_csv(tmp_path / "folded.csv", index=False)
    flat = import_table(tmp_path / "folded.csv", system="model", item="q", label="ok", axes=["judge"],
                        out_dir=tmp_path / "flat").rates
    flat = flat[flat["subgroup"] == "all"].set_index("judge")
    width = rates["ci_high"] - rates["ci_low"]
    assert (width > (flat["ci_high"] - flat["ci_low"]) + 0.05).all()
    assert np.allclose(rates["rate"], flat["rate"])


def test_without_a_transcript_column_judges_pair_on_system_item_and_replicate(tmp_path):
    table = epochs_table(tmp_path / "t.csv")
    results = import_table(table, system="model", item="q", label="ok", axes=["judge"], replicate="epoch",
                           out_dir=tmp_path / "out")
    assert results.verdicts["transcript_key"].isna().all()
    document = results.agreement("judge").document
    assert document["paired_on"] != "transcript" and "replicate" in document["paired_on"]
    assert document["pairs"][0]["n"] == 12
    result = run_cli(["agreement", tmp_path / "out", "--axis", "judge"])
    assert "paired on transcript" not in result.stdout and "paired on system, case and replicate" in result.stdout
    assert not (tmp_path / "out" / "transcripts.jsonl").exists()


def test_a_transcript_column_pairs_judges_only_on_the_same_answer(tmp_path):
    same = import_table(epochs_table(tmp_path / "same.csv"), system="model", item="q", label="ok", axes=["judge"],
                        replicate="epoch", transcript="answer", out_dir=tmp_path / "same")
    document = same.agreement("judge").document
    assert document["paired_on"] == "transcript" and document["pairs"][0]["n"] == 12
    # 11 of 12 paired answers agree (q0 epoch 1).
    assert document["pairs"][0]["percent"] == pytest.approx(11 / 12)
    # Each judge saw its own regenerated answer: nothing is paired on transcript, and the note says so.
    other = import_table(epochs_table(tmp_path / "regen.csv", regenerate=True), system="model", item="q", label="ok",
                         axes=["judge"], replicate="epoch", transcript="answer", out_dir=tmp_path / "regen")
    document = other.agreement("judge").document
    assert document["paired_on"] != "transcript"
    assert any("changes the transcripts" in note for note in document["notes"])
    # The answers are in the folder and the explorer shows them.
    explorer = document_texts(document_from_run(tmp_path / "same"))
    shown = {turn["content"] for record in explorer["transcripts"] for turn in record["turns"]}
    assert "answer 0.1" in shown and len(shown) == 12


def test_rationales_become_criteria_rows_the_explorer_shows(tmp_path):
    table = epochs_table(tmp_path / "t.csv")
    results = import_table(table, system="model", item="q", label="ok", axes=["judge"], replicate="epoch",
                           rationale="why", out_dir=tmp_path / "out")
    criteria = results.criteria
    assert len(criteria) == 24 and set(criteria["criterion"]) == {"ok"}
    joined = criteria.merge(results.verdicts, on="judgment_key", suffixes=("", "_verdict"))
    assert (joined["compliant"] == joined["compliant_verdict"]).all()
    row = joined[(joined["judge"] == "j2") & (joined["case_id"] == "q0") & (joined["replicate"] == 1)]
    assert row["rationale"].tolist() == ["j2 on q0#1"] and not row["compliant"].iloc[0]
    explorer = document_texts(document_from_run(tmp_path / "out"))
    assert "j2 on q0#1" in explorer["criteria"]["rationale"]


def test_a_factor_gives_subgroup_rates_not_universes(tmp_path):
    table = epochs_table(tmp_path / "t.csv")
    results = import_table(table, system="model", item="q", label="ok", axes=["judge"], replicate="epoch",
                           factors=["topic"], out_dir=tmp_path / "out")
    assert results.verdicts["universe_id"].nunique() == 2
    rates = results.rates.set_index(["judge", "subgroup"])
    # j1, topic b: items 0, 2, 4 -> 2 of 3 items pass, 4 of 6 epochs.
    assert rates.loc[("j1", "topic=b"), "rate"] == pytest.approx(4 / 6)


@pytest.mark.parametrize(("flag", "column", "match"), [
    ("--replicate", "answer", r"answer: 'answer 0\.1' in data row 1; expected a whole number"),
    ("--replicate", "nothere", r"nothere: column not found \(the --replicate column"),
    ("--transcript", "judge", r"judge: column used twice"),
])
def test_bad_optional_columns_are_refused_in_one_line(tmp_path, flag, column, match):
    table = epochs_table(tmp_path / "t.csv")
    extra = [] if flag == "--replicate" else ["--replicate", "epoch"]
    result = run_cli(["import", "table", table, "--system", "model", "--item", "q", "--label", "ok", "--axis", "judge",
                      flag, column, *extra, "--out", tmp_path / "out"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert re.search(match, result.stderr), result.stderr
    assert not (tmp_path / "out").exists()


def test_an_empty_transcript_is_refused(tmp_path):
    frame = pd.read_csv(epochs_table(tmp_path / "t.csv"))
    frame.loc[5, "answer"] = ""
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(InputError, match=r"t\.csv: answer: empty value in data row 6; expected the transcript"):
        import_table(tmp_path / "t.csv", system="model", item="q", label="ok", axes=["judge"], replicate="epoch",
                     transcript="answer", out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _rates(results) -> pd.DataFrame:
    table = results.rate_table()
    return table.sort_values(list(table.columns[:3])).reset_index(drop=True)


@pytest.mark.parametrize("index", ["shuffled", "strings", "named model", "named q and epoch", "named other"])
def test_a_parquet_saved_with_any_index_imports_as_the_csv_of_the_same_rows(tmp_path, index):
    # The same table through two doors: a CSV saved without an index, and a parquet that pandas saved with one.
    # pandas restores the stored index on reading; its named levels must come back as the columns they were, and
    # rows count by position, or the import would miss a column or pair labels with other rows' items.
    frame = pd.read_csv(epochs_table(tmp_path / "t.csv"))
    saved = frame.sample(frac=1.0, random_state=3)  # rows in another order: by position, not by index
    if index == "shuffled":
        saved.index = np.random.default_rng(0).permutation(len(saved)) + 100
    elif index == "strings":
        saved.index = [f"row{i}" for i in range(len(saved))]
    elif index == "named model":
        saved = saved.set_index("model")
    elif index == "named q and epoch":
        saved = saved.set_index(["q", "epoch"])
    else:
        saved.index = pd.Index(range(len(saved)), name="row")
    saved.to_parquet(tmp_path / "t.parquet")  # pandas keeps the index in the file
    options = {"system": "model", "item": "q", "label": "ok", "axes": ["judge"], "replicate": "epoch"}
    from_csv = import_table(tmp_path / "t.csv", out_dir=tmp_path / "csv", **options)
    from_parquet = import_table(tmp_path / "t.parquet", out_dir=tmp_path / "parquet", **options)
    pd.testing.assert_frame_equal(_rates(from_parquet), _rates(from_csv))
    key = ["system", "case_id", "replicate", "universe_id"]
    verdicts = [r.verdicts[[*key, "compliant"]].astype(str).sort_values(key).reset_index(drop=True)
                for r in (from_csv, from_parquet)]
    pd.testing.assert_frame_equal(verdicts[1], verdicts[0])


def test_a_parquet_whose_index_is_named_like_a_column_is_refused_in_one_line(tmp_path):
    frame = pd.read_csv(epochs_table(tmp_path / "t.csv"))
    saved = frame.copy()
    saved.index = pd.Index(range(len(saved)), name="q")  # an index named like the item column
    saved.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(InputError, match=r"t\.parquet: .*'q' is also the name of the index"):
        import_table(tmp_path / "t.parquet", system="model", item="q", label="ok", axes=["judge"],
                     replicate="epoch", out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
