"""``multiverse import inspect``: genuine Inspect AI logs, recorded and run here (issue 28).

The recorded logs under ``inspect_logs/`` were written by Inspect AI 0.3.285 running the task of
``inspect_runs.py`` against the fake server: two graders (the ``grader`` role bound to
grader-a, then grader-b), two epochs, a ``topic`` in each sample's metadata; ``partial.eval``
lets the grader give partial credit; ``inspect-0.3.130.eval`` is the same task written by Inspect AI
0.3.130. Expected numbers come from Inspect's own log API.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("inspect_ai")

from cli_runner import run_cli
from inspect_ai.log import read_eval_log, write_eval_log

from multiverse.errors import InputError
from multiverse.explorer import document_from_run, document_texts
from multiverse.importers import import_inspect

LOGS = Path(__file__).parent / "inspect_logs"
BINARY = [LOGS / "grader-a.eval", LOGS / "grader-b.eval"]


def accuracy(path: Path) -> float:
    log = read_eval_log(str(path))
    return float(log.results.scores[0].metrics["accuracy"].value)


def per_judge_rates(results) -> pd.Series:
    rates = results.rates[results.rates["subgroup"] == "all"]
    return rates.set_index("judge")["rate"]


def test_recorded_logs_import_with_inspect_accuracy_replicates_rationales_and_transcripts(tmp_path):
    results = import_inspect(BINARY, tmp_path / "out", factors=["topic"])
    rates = per_judge_rates(results)
    for path in BINARY:
        judge = read_eval_log(str(path)).eval.model_roles["grader"].model
        assert abs(rates[judge] - accuracy(path)) < 1e-9
    v = results.verdicts
    assert sorted(v["replicate"].unique()) == [1, 2] and len(v) == 20
    assert set(v["system"]) == {"openai-api/local/system-x"} and results.axes == ["judge"]
    # Two epochs of five samples: n counts (sample, epoch) rows, and the interval clusters by sample.
    assert set(results.rates.loc[results.rates["subgroup"] == "all", "n"]) == {10}
    # The same solver output in both logs: the judges are paired on the transcript.
    assert v.groupby(["case_id", "replicate"])["transcript_key"].nunique().max() == 1
    assert results.agreement("judge").document.paired_on == "transcript"
    assert not results.warnings
    # Explanations are the rationales, row for row.
    log = read_eval_log(str(BINARY[0]))
    judge = log.eval.model_roles["grader"].model
    joined = results.criteria.merge(v[v["judge"] == judge], on="judgment_key")
    for sample in log.samples:
        row = joined[(joined["case_id"] == sample.id) & (joined["replicate"] == sample.epoch)]
        assert row["rationale"].tolist() == [sample.scores["model_graded_qa"].explanation]
        assert bool(row["compliant_y"].iloc[0]) == (sample.scores["model_graded_qa"].value == "C")
    # The sample's messages are the transcript the explorer shows.
    texts = document_texts(document_from_run(tmp_path / "out"))
    turns = [(t["role"], t["content"]) for record in texts["transcripts"] for t in record["turns"]]
    assert ("user", "What is 3 plus 3?") in turns
    assert any(role == "assistant" and "What is 3 plus 3?" in text for role, text in turns)
    assert sample.scores["model_graded_qa"].explanation in texts["criteria"]["rationale"]
    # topic is a design factor: rates per level, not a universe.
    assert results.factors == ["topic"] and v["universe_id"].nunique() == 2
    assert {"topic=arithmetic", "topic=words"} <= set(results.rates["subgroup"])


def test_partial_credit_is_a_score_whose_per_sample_mean_is_inspect_accuracy(tmp_path):
    path = LOGS / "partial.eval"
    results = import_inspect([path], tmp_path / "out")
    v = results.verdicts
    assert 0.5 in set(v["score"]) and v.loc[v["score"] == 0.5, "compliant"].isna().all()
    # Inspect reduces epochs by their mean per sample, then takes the mean over samples.
    per_sample = v.groupby("case_id")["score"].mean()
    assert abs(per_sample.mean() - accuracy(path)) < 1e-9
    rate = results.rates[results.rates["subgroup"] == "all"]["rate"]
    assert abs(float(rate.iloc[0]) - accuracy(path)) < 1e-9
    assert results.manifest.model_dump()["scale"]["type"] == "continuous"


def _edited(path: Path, out: Path, edit) -> Path:
    log = read_eval_log(str(path))
    edit(log)
    write_eval_log(log, str(out))
    return out


def test_unbalanced_epochs_are_named_and_reduced_per_sample_as_inspect_does(tmp_path):
    def drop_one_epoch(log):
        log.samples = [s for s in log.samples if not (s.id == "q1" and s.epoch == 2)]

    path = _edited(BINARY[0], tmp_path / "unbalanced.eval", drop_one_epoch)
    results = import_inspect([path], tmp_path / "out")
    assert any("1 sample scored in fewer epochs than the others: q1 (1 of 2)" in w for w in results.warnings)
    log = read_eval_log(str(path))
    values = pd.DataFrame({"case": [s.id for s in log.samples],
                           "correct": [s.scores["model_graded_qa"].value == "C" for s in log.samples]})
    rate = float(results.rates.loc[results.rates["subgroup"] == "all", "rate"].iloc[0])
    # Inspect's per-sample mean weighs q1's one epoch as much as the others' two: so does the import.
    assert rate == pytest.approx(values.groupby("case")["correct"].mean().mean()) and len(values) == 9
    assert results.verdicts["replicate"].tolist() == [0] * 5 and results.verdicts["case_id"].is_unique


def test_different_solver_output_is_said_and_not_paired_on_the_transcript(tmp_path):
    def regenerate(log):
        for sample in log.samples[:3]:
            sample.output.completion = "a different answer"

    edited = _edited(BINARY[1], tmp_path / "grader-b-rerun.eval", regenerate)
    results = import_inspect([BINARY[0], edited], tmp_path / "out")
    assert [w for w in results.warnings if w.startswith("3 of 10 (system, sample, epoch) units have different "
                                                        "solver output")] == [
        "3 of 10 (system, sample, epoch) units have different solver output in the judges' logs (the judges did not "
        "grade the same conversation there): agreement pairs the judges on the 7 with the same output"]
    document = results.agreement("judge").source
    assert document["paired_on"] == "transcript" and document["pairs"][0]["n"] == 7
    # No output shared at all: agreement pairs by sample and epoch, and says so.
    edited = _edited(BINARY[1], tmp_path / "grader-b-all.eval",
                     lambda log: [setattr(s.output, "completion", f"other {s.id}") for s in log.samples])
    document = import_inspect([BINARY[0], edited], tmp_path / "all").agreement("judge").source
    assert document["paired_on"] != "transcript" and document["pairs"][0]["n"] == 10
    assert any("changes the transcripts" in note for note in document["notes"])


def test_the_cli_imports_and_says_what(tmp_path):
    result = run_cli(["import", "inspect", *BINARY, "--factor", "topic", "--out", tmp_path / "out"])
    assert result.returncode == 0, result.stderr
    assert "imported 20 verdicts: 2 universes x 1 systems (axes: judge)" in result.stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [entry["metrics"]["accuracy"] for entry in manifest["input"]["metrics"]] == [accuracy(p) for p in BINARY]
    assert {entry["inspect_version"] for entry in manifest["input"]["logs"]} == {"0.3.285"}
    assert "lost:" not in result.stderr and "dropped:" not in result.stderr  # silence: nothing lost


def _json_log(tmp_path: Path, edit) -> Path:
    """A recorded log rewritten as .json by Inspect, then edited as text (as a hostile file would be)."""
    path = tmp_path / "log.json"
    write_eval_log(read_eval_log(str(BINARY[0])), str(path), format="json")
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(("make", "match"), [
    (lambda d: d["samples"][0]["scores"]["model_graded_qa"].update(value="maybe"),
     r"log\.json: samples\[0\]\.scores\.model_graded_qa\.value: 'maybe'; expected C, I, P, N"),
    (lambda d: d["samples"][0]["scores"]["model_graded_qa"].update(value=7),
     r"value: 7; expected C, I, P, N, true/false or a number from 0 to 1"),
    (lambda d: d["samples"][0].update(epoch="one"), r"log\.json: cannot read as an Inspect log: ValidationError"),
    (lambda d: d["samples"][0]["metadata"].pop("topic"), r"samples\[0\]\.metadata\.topic: None; expected a level"),
    (lambda d: d.update(samples=[]), r"samples: expected at least one sample"),
])
def test_hostile_logs_are_refused_in_one_line_and_nothing_is_written(tmp_path, make, match):
    path = _json_log(tmp_path, make)
    result = run_cli(["import", "inspect", path, "--factor", "topic", "--out", tmp_path / "out"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert re.search(match, result.stderr), result.stderr
    assert not (tmp_path / "out").exists()


def test_truncated_huge_and_foreign_files_are_refused(tmp_path, monkeypatch):
    truncated = tmp_path / "cut.eval"
    data = BINARY[0].read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    huge = tmp_path / "huge.eval"
    with huge.open("wb") as f:
        f.truncate(600 * 2**20)  # sparse: no disk used
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    for path, match in ((truncated, r"cut\.eval: cannot read as an Inspect log"),
                        (huge, r"huge\.eval: the import's input comes to more than 256 MB \(uncompressed\); expected at most "
                               r"that \(--max-bytes raises it\)"),
                        (other, r"notes\.txt: expected an Inspect log \(\.eval or \.json\)")):
        result = run_cli(["import", "inspect", path, "--out", tmp_path / "out"])
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert re.search(match, result.stderr), result.stderr
        assert not (tmp_path / "out").exists()


def test_an_unknown_scorer_or_role_names_what_the_log_has(tmp_path):
    with pytest.raises(InputError, match=r"eval\.scorers: no scorer 'match'; the log has: model_graded_qa"):
        import_inspect(BINARY, tmp_path / "out", scorer="match")
    with pytest.raises(InputError, match=r"eval\.model_roles: no role 'target' for the system; the log has: grader"):
        import_inspect(BINARY, tmp_path / "out", system_role="target")
    with pytest.raises(InputError, match=r"also in .*grader-a\.eval; expected one log per task, system and judge"):
        shutil.copy(BINARY[0], tmp_path / "copy.eval")
        import_inspect([BINARY[0], tmp_path / "copy.eval"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_genuine_logs_run_here_import_with_inspect_accuracy(tmp_path):
    """Inspect runs the task now, against the fake server on loopback: .json logs, two graders, two epochs."""
    from inspect_runs import run_inspect

    same = run_inspect(tmp_path / "same", log_format="json")
    results = import_inspect(same, tmp_path / "out-same", factors=["topic"])
    rates = per_judge_rates(results)
    for path in same:
        assert abs(rates[read_eval_log(str(path)).eval.model_roles["grader"].model] - accuracy(path)) < 1e-9
    assert results.agreement("judge").document.paired_on == "transcript" and not results.warnings
    assert np.array_equal(sorted(results.verdicts["replicate"].unique()), [1, 2])
    rerun = run_inspect(tmp_path / "rerun", regenerate=True)
    results = import_inspect(rerun, tmp_path / "out-rerun")
    assert any(w.startswith("10 of 10 (system, sample, epoch) units have different solver output") and
               "pairs the judges by sample and epoch" in w for w in results.warnings)
    assert results.agreement("judge").document.paired_on != "transcript"


def test_every_scorer_and_every_key_is_an_option_and_scorer_keeps_some(tmp_path):
    from inspect_ai.scorer import Score

    def second_scorer(log):
        log.eval.scorers = [*log.eval.scorers, type(log.eval.scorers[0])(name="exact")]
        for sample in log.samples:
            sample.scores["exact"] = Score(value={"strict": sample.epoch == 1, "loose": True}, explanation="by hand")

    path = _edited(BINARY[0], tmp_path / "two.eval", second_scorer)
    results = import_inspect([path], tmp_path / "all")
    assert results.axes == ["scorer"]
    assert sorted(results.verdicts["scorer"].unique()) == ["exact:loose", "exact:strict", "model_graded_qa"]
    results = import_inspect([path], tmp_path / "out", scorer="exact:strict")
    v = results.verdicts
    # strict is true in epoch 1 only: half the rows.
    assert v.groupby("replicate")["compliant"].all().to_dict() == {1: True, 2: False}
    assert set(results.criteria["criterion"]) == {"exact:strict"}
    graded = import_inspect([path], tmp_path / "graded", scorer="model_graded_qa")
    assert abs(float(graded.rates["rate"].iloc[0]) - accuracy(BINARY[0])) < 1e-9


def test_a_log_of_an_older_inspect_imports_alike(tmp_path):
    """Inspect AI 0.3.130 wrote this log (the same task, grader-a); today's reader reads it through the same API."""
    path = LOGS / "inspect-0.3.130.eval"
    results = import_inspect([path], tmp_path / "out", factors=["topic"])
    assert read_eval_log(str(path)).eval.packages["inspect_ai"] == "0.3.130"
    rate = float(results.rates.loc[results.rates["subgroup"] == "all", "rate"].iloc[0])
    assert abs(rate - accuracy(path)) < 1e-9
    assert sorted(results.verdicts["replicate"].unique()) == [1, 2] and len(results.verdicts) == 10
    # Its header binds the grader role to grader-a, but Inspect 0.3.130's model_graded_qa called the solver's
    # model: the scoring events say so (the request's model), and the judge is the model that was called.
    scorers = results.manifest.model_dump()["input"]["logs"][0]["scorers"]
    assert read_eval_log(str(path)).eval.model_roles["grader"].model == "openai-api/local/grader-a"
    assert scorers["model_graded_qa"] == {"judge": "openai-api/local/system-x",
                                          "judge_from": "the scoring events of model_graded_qa"}
    assert results.criteria["rationale"].str.contains("GRADE").all()
