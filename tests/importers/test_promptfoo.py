"""``multiverse import promptfoo``: genuine promptfoo results, recorded and run here (issue 28).

``promptfoo_results/`` keeps two result files promptfoo 0.121.20 wrote for the evals of
``promptfoo_runs.py`` (two prompts x one provider, five tests with an ``llm-rubric`` and a
``contains`` assertion, graded by grader-a, then grader-b, named in ``defaultTest``).
Expected numbers come from the files' own stats.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from cli_runner import run_cli

from multiverse.errors import InputError
from multiverse.explorer import document_from_run, document_texts
from multiverse.importers import import_promptfoo

RECORDED = Path(__file__).parent / "promptfoo_results"
FILES = [RECORDED / "grader-a.json", RECORDED / "grader-b.json"]


def stats_rate(path: Path) -> float:
    stats = json.loads(path.read_text())["results"]["stats"]
    return stats["successes"] / (stats["successes"] + stats["failures"])


def pooled(results) -> pd.Series:
    """Each judge's rate over every system: the pooled share of passing results."""
    v = results.verdicts[results.verdicts["status"] == "ok"]
    return v.groupby("judge")["compliant"].mean()


def check_import(files: list[Path], results) -> None:
    rates = pooled(results)
    for path in files:
        document = json.loads(path.read_text())
        grader = document["config"]["defaultTest"]["options"]["provider"]["id"]
        assert abs(rates[grader] - stats_rate(path)) < 1e-9
    # The rates table's per-system rates add up to the same pooled share.
    table = results.rates[results.rates["subgroup"] == "all"]
    weighted = (table["rate"] * table["n"]).groupby(table["judge"]).sum() / table.groupby("judge")["n"].sum()
    assert (weighted - rates).abs().max() < 1e-9


def test_recorded_results_import_with_promptfoos_pass_rate(tmp_path):
    results = import_promptfoo(FILES, tmp_path / "out", factors=["topic"])
    check_import(FILES, results)
    v = results.verdicts
    # Two prompts x one provider are two systems; five tests each.
    assert v["system"].nunique() == 2 and v["case_id"].nunique() == 5 and results.axes == ["judge"]
    assert {"topic=arithmetic", "topic=words"} <= set(results.rates["subgroup"])
    # Each assertion is a criterion: its pass the label, its reason the rationale, its score kept.
    document = json.loads(FILES[0].read_text())
    first = document["results"]["results"][0]
    criteria = results.criteria
    assert len(criteria) == 2 * len(v)
    assert set(criteria["criterion"]) == {"llm-rubric: The answer is correct and brief", "contains: answer"}
    reasons = {c["reason"] for c in first["gradingResult"]["componentResults"]}
    assert reasons <= set(criteria["rationale"])
    assert criteria["score"].notna().all()
    # Same outputs under both graders: paired on the answer, and the explorer shows it.
    assert results.agreement("judge").document.paired_on == "transcript"
    texts = document_texts(document_from_run(tmp_path / "out"))
    shown = {t["content"] for record in texts["transcripts"] for t in record["turns"]}
    assert first["response"]["output"] in shown


def _edited(tmp_path: Path, edit, source: Path = FILES[0]) -> Path:
    document = json.loads(source.read_text())
    edit(document)
    path = tmp_path / source.name
    path.write_text(json.dumps(document))
    return path


def _name_graders(rows: list[dict], first: int, *, assertion: str | None = None, test: str | None = None) -> None:
    for row in rows[first:]:
        if assertion:
            row["gradingResult"]["componentResults"][0]["assertion"]["provider"] = assertion
            row["testCase"]["assert"][0]["provider"] = assertion
        if test:
            row["testCase"]["options"] = {"provider": {"id": test}}


@pytest.mark.parametrize(("assertion", "test", "judge"), [
    ("openai:chat:own-grader", "openai:chat:test-grader", "openai:chat:own-grader"),
    (None, "openai:chat:test-grader", "openai:chat:test-grader"),
    (None, None, "openai:chat:grader-a"),
])
def test_the_grader_is_the_assertions_then_the_tests_then_defaulttest(tmp_path, assertion, test, judge):
    path = _edited(tmp_path, lambda d: _name_graders(d["results"]["results"], 0, assertion=assertion, test=test))
    results = import_promptfoo([path, FILES[1]], tmp_path / "out")
    assert set(results.verdicts["judge"]) == {judge, "openai:chat:grader-b"}


def test_a_file_whose_tests_name_several_graders_is_one_judge_naming_them_all(tmp_path):
    # The grader is read per file: a file is one judge's universe, so tests graded apart make one joint judge,
    # never a judge per test (which would pair a file's rows against each other).
    path = _edited(tmp_path, lambda d: _name_graders(d["results"]["results"], 6, assertion="openai:chat:own-grader"))
    results = import_promptfoo([path, FILES[1]], tmp_path / "out")
    assert set(results.verdicts["judge"]) == {"openai:chat:grader-a + openai:chat:own-grader", "openai:chat:grader-b"}


def test_errors_are_counted_never_labels(tmp_path):
    def fail_two(document):
        rows = document["results"]["results"]
        for row in rows[:2]:
            row.update(success=False, failureReason=2, error="API error: 500 server_error")
            row["response"] = {"error": "500 server_error"}
        stats = document["results"]["stats"]
        passed = sum(bool(r["success"]) for r in rows[2:])
        stats.update(successes=passed, failures=len(rows) - 2 - passed, errors=2)

    path = _edited(tmp_path, fail_two)
    results = import_promptfoo([path], tmp_path / "out")
    v = results.verdicts
    assert (v["status"] == "rollout_failed").sum() == 2 and v.loc[v["status"] != "ok", "compliant"].isna().all()
    assert abs(v.loc[v["status"] == "ok", "compliant"].mean() - stats_rate(path)) < 1e-9
    assert v.loc[v["status"] != "ok", "reason"].str.startswith("system error: API error: 500").all()
    assert results.manifest.losses["system_error"].rows == 2 and not results.warnings


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d.update(results=[]), r"results: \[\]; expected an object \(promptfoo's results\)"),
    (lambda d: d["results"]["results"][3].update(success="yes"), r"results\.results\[3\]\.success: 'yes'; expected true"),
    (lambda d: d["results"]["results"][0]["gradingResult"]["componentResults"][1].update(score="high"),
     r"componentResults\[1\]\.score: 'high'; expected a number"),
    (lambda d: d["results"]["stats"].update(successes=-1), r"results\.stats\.successes: -1; expected a whole number"),
    (lambda d: d["results"]["results"][0]["vars"].pop("topic"), r"results\.results\[0\]\.vars\.topic: None"),
    (lambda d: d["results"].update(results=[]), r"results\.results: expected at least one result"),
])
def test_hostile_result_files_are_refused_in_one_line(tmp_path, edit, match):
    path = _edited(tmp_path, edit)
    result = run_cli(["import", "promptfoo", path, "--factor", "topic", "--out", tmp_path / "out"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert re.search(match, result.stderr), result.stderr
    assert not (tmp_path / "out").exists()


def test_truncated_and_foreign_files_are_refused(tmp_path):
    cut = tmp_path / "cut.json"
    cut.write_text(FILES[0].read_text()[:5000])
    with pytest.raises(InputError, match=r"cut\.json: cannot read as JSON"):
        import_promptfoo([cut], tmp_path / "out")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"deep\.json: cannot read as JSON"):
        import_promptfoo([deep], tmp_path / "out")
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(600 * 2**20)  # sparse: no disk used
    result = run_cli(["import", "promptfoo", huge, "--out", tmp_path / "out"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "huge.json" in result.stderr, result.stderr
    assert "under 256 MB (--max-bytes raises it)" in result.stderr, result.stderr
    with pytest.raises(InputError, match=r"results\.csv: expected a promptfoo result file"):
        import_promptfoo([tmp_path / "results.csv"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_same_grader_twice_is_refused(tmp_path):
    twin = _edited(tmp_path, lambda d: None)
    with pytest.raises(InputError, match=r"appears twice for one grader \(openai:chat:grader-a\)"):
        import_promptfoo([FILES[0], twin], tmp_path / "out")

