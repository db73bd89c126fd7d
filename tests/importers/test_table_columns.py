"""``import table`` with replicates, transcripts, rationales and factors (issue 28).

Every expected number is worked out in the comments from the hand-made tables.
"""

from __future__ import annotations

import json
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
    document = results.agreement("judge").source
    assert document["paired_on"] != "transcript" and "replicate" in document["paired_on"]
    assert document["pairs"][0]["n"] == 12
    result = run_cli(["agreement", tmp_path / "out", "--axis", "judge"])
    assert "paired on transcript" not in result.stdout and "paired on system, case and replicate" in result.stdout
    assert not (tmp_path / "out" / "transcripts.jsonl").exists()


def test_a_transcript_column_pairs_judges_only_on_the_same_answer(tmp_path):
    same = import_table(epochs_table(tmp_path / "same.csv"), system="model", item="q", label="ok", axes=["judge"],
                        replicate="epoch", transcript="answer", out_dir=tmp_path / "same")
    document = same.agreement("judge").source
    assert document["paired_on"] == "transcript" and document["pairs"][0]["n"] == 12
    # 11 of 12 paired answers agree (q0 epoch 1).
    assert document["pairs"][0]["percent"] == pytest.approx(11 / 12)
    # Each judge saw its own regenerated answer: nothing is paired on transcript, and the note says so.
    other = import_table(epochs_table(tmp_path / "regen.csv", regenerate=True), system="model", item="q", label="ok",
                         axes=["judge"], replicate="epoch", transcript="answer", out_dir=tmp_path / "regen")
    document = other.agreement("judge").source
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


def _records(frame: pd.DataFrame) -> list[dict]:
    """The rows as JSON would hold them: numbers stay numbers, a missing cell is no key at all."""
    return [{k: v for k, v in row.items() if not (isinstance(v, float) and np.isnan(v))}
            for row in frame.to_dict("records")]


@pytest.mark.parametrize("writer", ["pandas", "by hand, keys shuffled and a blank line"])
def test_a_jsonl_table_imports_as_the_csv_of_the_same_rows(tmp_path, writer):
    # The same rows through two doors: the CSV, and JSON Lines whose values keep their JSON types (an epoch 1,
    # a label 0) in rows written in another order, whose keys may come in any order.
    frame = pd.read_csv(epochs_table(tmp_path / "t.csv"))
    saved = frame.sample(frac=1.0, random_state=5)
    if writer == "pandas":
        saved.to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    else:
        rng = np.random.default_rng(1)
        lines = [json.dumps({k: row[k] for k in rng.permutation(list(row))}, default=int) for row in _records(saved)]
        lines.insert(3, "   ")
        (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    options = {"system": "model", "item": "q", "label": "ok", "axes": ["judge"], "replicate": "epoch",
               "transcript": "answer", "rationale": "why", "factors": ["topic"]}
    from_csv = import_table(tmp_path / "t.csv", out_dir=tmp_path / "csv", **options)
    from_jsonl = import_table(tmp_path / "t.jsonl", out_dir=tmp_path / "jsonl", **options)
    pd.testing.assert_frame_equal(_rates(from_jsonl), _rates(from_csv))
    key = ["system", "case_id", "replicate", "universe_id"]
    verdicts = [r.verdicts[[*key, "topic", "transcript_key", "compliant"]].astype(str).sort_values(key)
                .reset_index(drop=True) for r in (from_csv, from_jsonl)]
    pd.testing.assert_frame_equal(verdicts[1], verdicts[0])
    assert sorted(from_jsonl.criteria["rationale"]) == sorted(from_csv.criteria["rationale"])


def test_jsonl_values_keep_their_json_types(tmp_path):
    # "007" is text and stays "007"; 7 is a number and reads "7" (never 7.0 though another row lacks the key);
    # true/false are a binary label; a missing key is a missing label, excluded and counted, never non-compliant.
    lines = ['{"m": "a", "q": "007", "ok": true}', '{"m": "a", "q": 7, "ok": false}', '{"m": "a", "q": 8}',
             '{"m": "b", "q": 7, "ok": true, "extra": {"nested": [1, 2]}}']
    (tmp_path / "t.jsonl").write_text("\n".join(lines))
    result = import_table(tmp_path / "t.jsonl", system="m", item="q", label="ok", out_dir=tmp_path / "out")
    v = result.verdicts.set_index(["system", "case_id"])
    assert set(v.index) == {("a", "007"), ("a", "7"), ("a", "8"), ("b", "7")}
    assert v.loc[("a", "007"), "compliant"] and not v.loc[("a", "7"), "compliant"]
    assert v.loc[("a", "8"), "status"] == "excluded" and v.loc[("a", "8"), "reason"] == "missing label"
    assert result.manifest.input["missing_labels"] == 1


@pytest.mark.parametrize("text, match", [
    ('{"m": "a", "q": 1, "ok": 1}\n{"m": "a", "q": 2, "ok": 1, "ok": 0}\n', r"line 2: key 'ok' is named twice"),
    ('{"m": "a", "q": 1, "ok": 1}\n[1, 2, 3]\n', r"line 2: \[1, 2, 3\]; expected a JSON object"),
    ('{"m": "a", "q": 1, "ok": 1}\n\n{"m": "a", "q": 2,\n', r"line 3: cannot read as JSON"),
    ('{"m": "a", "q": 1, "ok": 1}\n{"m": "\xff"}\n', r"line 2: not UTF-8 text"),
])
def test_a_bad_jsonl_line_is_refused_in_one_line_naming_it(tmp_path, text, match):
    path = tmp_path / "t.jsonl"
    path.write_bytes(text.encode("latin-1") if "\xff" in text else text.encode())
    with pytest.raises(InputError, match=r"t\.jsonl: " + match) as err:
        import_table(path, system="m", item="q", label="ok", out_dir=tmp_path / "out")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_jsonl_table_past_the_row_or_byte_bound_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"m": "a", "q": i, "ok": 1}) + "\n" for i in range(50)))
    with pytest.raises(InputError, match="max_rows") as err:
        import_table(path, system="m", item="q", label="ok", out_dir=tmp_path / "out", max_rows=49)
    assert err.value.param == "max_rows"
    with pytest.raises(InputError, match="max_bytes"):
        import_table(path, system="m", item="q", label="ok", out_dir=tmp_path / "out", max_bytes=100)
    assert not (tmp_path / "out").exists()
    assert len(import_table(path, system="m", item="q", label="ok", out_dir=tmp_path / "ok", max_rows=50).verdicts) == 50


def test_import_table_reads_jsonl_on_the_command_line(tmp_path):
    frame = pd.read_csv(epochs_table(tmp_path / "t.csv"))
    frame.to_json(tmp_path / "t.jsonl", orient="records", lines=True)
    done = run_cli(["import", "table", tmp_path / "t.jsonl", "--system", "model", "--item", "q", "--label", "ok",
                    "--axis", "judge", "--replicate", "epoch", "--out", tmp_path / "out"])
    assert done.returncode == 0, done.stderr
    assert "imported 24 verdicts: 2 universes" in done.stdout


def test_columns_no_flag_names_are_listed_as_dropped(tmp_path):
    path = epochs_table(tmp_path / "t.csv")
    done = run_cli(["import", "table", path, "--system", "model", "--item", "q", "--label", "ok", "--axis", "judge",
                    "--replicate", "epoch", "--out", tmp_path / "out"])
    assert done.returncode == 0, done.stderr
    assert "dropped: columns answer, why, topic (3) in" in done.stderr
    every = import_table(path, system="model", item="q", label="ok", axes=["judge"], replicate="epoch",
                         transcript="answer", rationale="why", factors=["topic"], out_dir=tmp_path / "all")
    assert every.manifest.dropped == []  # silence: nothing left out
