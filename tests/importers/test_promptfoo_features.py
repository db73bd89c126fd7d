"""``multiverse import promptfoo`` past the plain case, on what promptfoo 0.121.20 itself wrote (issue 43).

``promptfoo_results/features/`` holds one eval per grader (``promptfoo_runs.py``): five tests run
``--repeat 3``, with assertion weights and test thresholds, a provider error on one test, and grader-b
replying prose to one test's rubric; each written both as ``.json`` and ``.jsonl``.
``promptfoo_results/cli_grader/`` holds the plain eval graded by ``--grader`` on the command line.
Every expected figure is promptfoo's own: its stats, its per-prompt metrics and each result's fields.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli
from promptfoo_runs import FEATURE_TESTS, GRADERS, PROMPTFOO_VERSION, REPEAT, recorded_cli_grader, recorded_features

from multiverse.errors import InputError
from multiverse.importers import import_promptfoo

JUDGES = [f"openai:chat:{grader}" for grader in GRADERS]


def _document(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _results(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return _document(path)["results"]["results"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The .json and the .jsonl recordings, each imported once."""
    return {suffix: import_promptfoo(recorded_features(suffix), tmp_path_factory.mktemp(suffix.strip(".")) / "out",
                                     factors=["topic"]) for suffix in (".json", ".jsonl")}


def test_the_recordings_are_the_pinned_promptfoos_with_every_feature():
    for path in recorded_features():
        document = _document(path)
        assert document["metadata"]["promptfooVersion"] == PROMPTFOO_VERSION
        assert document["runtimeOptions"]["repeat"] == REPEAT
        rows = document["results"]["results"]
        assert len(rows) == REPEAT * len(FEATURE_TESTS) == len(_results(path.with_suffix(".jsonl")))
        assert document["results"]["stats"]["errors"] == REPEAT  # the provider error, on each repeat
        assert any(r["testCase"].get("threshold") for r in rows)
        assert any(c["assertion"].get("weight") not in (None, 1) for r in rows
                   for c in (r.get("gradingResult") or {}).get("componentResults", []))
    said = [r["error"] for r in _results(recorded_features()[1]) if r.get("error")]
    assert any("Could not extract JSON" in s for s in said)


def test_every_figure_promptfoo_reports_is_the_imports(imported):
    results = imported[".json"]
    v = results.verdicts
    passes = v[v["scoring"] == "pass"]
    scores = v[v["scoring"] == "score"]
    assert results.axes == ["judge", "scoring"]
    for judge, path in zip(JUDGES, recorded_features()):
        document = _document(path)
        stats, rows = document["results"]["stats"], document["results"]["results"]
        mine = passes[passes["judge"] == judge]
        no_grade = int(mine["reason"].str.startswith("no grade: ").sum())
        # promptfoo's successes are the passes; its failures the fails plus the grader replies it could not
        # read (the import's judge failures); its errors the provider's (the import's system failures).
        assert int((mine["compliant"] == True).sum()) == stats["successes"]  # noqa: E712
        assert int((mine["compliant"] == False).sum()) + no_grade == stats["failures"]  # noqa: E712
        assert int((mine["status"] == "rollout_failed").sum()) == stats["errors"]
        assert (mine["status"] == "judge_failed").sum() == no_grade == (REPEAT if judge.endswith("b") else 0)
        # Per prompt x provider: promptfoo's metrics (its score is the sum of results' weighted scores).
        [metrics] = [p["metrics"] for p in document["results"]["prompts"]]
        assert metrics["testPassCount"] == stats["successes"] and metrics["testErrorCount"] == stats["errors"]
        mine_scores = scores[scores["judge"] == judge]
        lost = sum(r["score"] for r in rows if r.get("failureReason") == 2
                   or "Could not extract JSON" in str(r.get("error")))
        assert math.isclose(mine_scores["score"].sum() + lost, metrics["score"], abs_tol=1e-9)
        assert lost == 0  # promptfoo scores what it could not grade as 0: the import leaves it out instead
        # Each result's weighted score, read as promptfoo wrote it, by test and repeat.
        by_case = {(r["testCase"]["description"], r["testIdx"]): r for r in rows}
        for description, group in mine_scores.groupby("case_id"):
            recorded = sorted((idx, r) for (d, idx), r in by_case.items() if d == description)
            assert sorted(group["replicate"]) == list(range(REPEAT))
            for replicate, (_, r) in enumerate(recorded):
                got = group.loc[group["replicate"] == replicate, "score"].iloc[0]
                ungraded = r.get("failureReason") == 2 or "Could not extract JSON" in str(r.get("error"))
                assert math.isnan(got) if ungraded else math.isclose(got, r["score"], abs_tol=1e-12)
        # The criteria: each assertion's pass, as promptfoo counted them.
        keys = set(mine["judgment_key"])
        criteria = results.criteria[results.criteria["judgment_key"].isin(keys)]
        assert int(criteria["compliant"].sum()) == metrics["assertPassCount"]
        assert int((~criteria["compliant"].astype(bool)).sum()) == metrics["assertFailCount"]
    # The rates: the pass option is the share of passes among graded results, the score option their mean.
    table = results.rates[results.rates["subgroup"] == "all"].set_index(["judge", "scoring"])
    for judge in JUDGES:
        graded = passes[(passes["judge"] == judge) & (passes["status"] == "ok")]
        assert math.isclose(table.loc[(judge, "pass"), "rate"], graded["compliant"].mean())
        ok = scores[(scores["judge"] == judge) & (scores["status"] == "ok")]
        assert math.isclose(table.loc[(judge, "score"), "rate"], ok["score"].mean())


def test_weights_and_thresholds_are_promptfoos(imported):
    results = imported[".json"]
    declared = {question: {(f"{kind}: {value}"): (1.0 if weight is None else float(weight))
                           for kind, value, weight in assertions} for question, _, _, assertions in FEATURE_TESTS}
    v = results.verdicts.set_index("judgment_key")
    for key, rows in results.criteria.groupby("judgment_key"):
        question = v.loc[[key], "case_id"].iloc[0]
        assert dict(zip(rows["criterion"], rows["weight"])) == declared[question]
    # A thresholded test passes on its weighted score, even with a failed assertion (promptfoo's rule).
    thresholds = {question: threshold for question, _, threshold, _ in FEATURE_TESTS if threshold is not None}
    for path in recorded_features():
        for r in _results(path):
            threshold = thresholds.get(r["testCase"]["description"])
            if threshold is not None and r.get("failureReason") != 2:
                assert r["success"] == (r["score"] >= threshold)
    passed_with_a_fail = [r for r in _results(recorded_features()[1]) if r["success"]
                          and not all(c["pass"] for c in r["gradingResult"]["componentResults"])]
    assert passed_with_a_fail  # the recording shows the threshold at work


def test_the_jsonl_output_imports_as_the_json(imported):
    key = ["judge", "scoring", "system", "case_id", "replicate"]
    frames = [imported[s].verdicts.drop(columns=["universe_id"]).astype(str).sort_values(key).reset_index(drop=True)
              for s in (".json", ".jsonl")]
    pd.testing.assert_frame_equal(frames[0], frames[1])
    criteria = [imported[s].criteria.astype(str).sort_values(["judgment_key", "criterion"]).reset_index(drop=True)
                for s in (".json", ".jsonl")]
    pd.testing.assert_frame_equal(criteria[0], criteria[1])
    pd.testing.assert_frame_equal(imported[".json"].rates, imported[".jsonl"].rates)


def test_an_unreadable_grader_reply_is_a_judge_failure_never_a_label(imported):
    v = imported[".json"].verdicts
    lost = v[v["reason"].str.startswith("no grade: ")]
    assert len(lost) == 2 * REPEAT and set(lost["judge"]) == {JUDGES[1]}  # both scoring options of grader-b's
    assert (lost["status"] == "judge_failed").all() and lost["compliant"].isna().all() and lost["score"].isna().all()
    assert lost["reason"].str.contains("Could not extract JSON from llm-rubric response").all()
    # grader-a read the same test's answers: labels there.
    same = v[(v["case_id"] == lost["case_id"].iloc[0]) & (v["judge"] == JUDGES[0])]
    assert (same["status"] == "ok").all()


def _lost_from_source(paths: list[Path]) -> dict[str, int]:
    """What promptfoo itself recorded as lost, one per result: provider errors and grader replies it could not read."""
    lost = {"system_error": 0, "no_grade": 0}
    for path in paths:
        for result in _results(path):
            lost["system_error"] += result.get("failureReason") == 2  # promptfoo's ResultFailureReason.ERROR
            lost["no_grade"] += "Could not extract JSON" in json.dumps(result.get("gradingResult"))
    return {kind: n for kind, n in lost.items() if n}


@pytest.mark.parametrize("files", [1, 2])
def test_a_loss_counts_once_whatever_the_scoring_options(tmp_path, files):
    # pass and the weighted score are two universes over each grader's reply: a lost reply is one loss.
    paths = recorded_features()[:files]
    results = import_promptfoo(paths, tmp_path / "out")
    assert "scoring" in results.axes
    want = _lost_from_source(paths)
    assert {k: x.lost for k, x in results.manifest.losses.items()} == want
    total = sum(len(_results(p)) for p in paths)  # one judgment and one rollout per result of each file
    v = results.verdicts
    for kind, loss in results.manifest.losses.items():
        assert (loss.of, loss.rows) == (total, 2 * want[kind])
        assert loss.message.startswith(f"{want[kind]} of {total} {loss.unit} ({2 * want[kind]} of {len(v)} verdict")


def test_a_provider_error_is_a_system_failure_under_the_files_one_judge(tmp_path):
    # One file: one judge, no phantom "assertions only" judge for the results that never reached grading.
    one = import_promptfoo(recorded_features()[:1], tmp_path / "one")
    assert "judge" not in one.axes and one.manifest.input["files"][0]["errors"] == REPEAT
    failed = one.verdicts[one.verdicts["status"] == "rollout_failed"]
    assert set(failed["case_id"]) == {"Name an animal."} and len(failed) == 2 * REPEAT
    assert failed["reason"].str.startswith("system error: API error: 400").all() and failed["compliant"].isna().all()
    # Two files: imported (never refused), each judge's failed rows its own.
    both = import_promptfoo(recorded_features(), tmp_path / "both")
    failed = both.verdicts[both.verdicts["status"] == "rollout_failed"]
    assert set(both.verdicts["judge"]) == set(JUDGES) == set(failed["judge"])
    assert both.manifest.losses["system_error"].rows == len(failed) == 2 * 2 * REPEAT


def test_import_says_each_loss_and_drop_on_stderr(tmp_path):
    done = run_cli(["import", "promptfoo", *recorded_features(".jsonl"), "--out", tmp_path / "out"])
    assert done.returncode == 0, done.stderr
    lost = [line for line in done.stderr.splitlines() if line.startswith("lost: ")]
    assert len(lost) == 2 and any("gave no grade" in line for line in lost) and any("provider failed" in line
                                                                                     for line in lost)
    # grader-b's three unreadable replies are three judgments, not one per scoring option.
    assert any(line.startswith(f"lost: {REPEAT} of {2 * len(FEATURE_TESTS) * REPEAT} judgments (")
               and "gave no grade" in line for line in lost), lost
    assert any(line.startswith("dropped: response.tokenUsage") for line in done.stderr.splitlines())


def test_a_grader_set_on_the_command_line_is_named(tmp_path):
    results = import_promptfoo(recorded_cli_grader(), tmp_path / "out")
    assert set(results.verdicts["judge"]) == set(GRADERS)  # promptfoo writes only its modelName
    for grader, path in zip(GRADERS, recorded_cli_grader()):
        document = _document(path)
        assert document["config"]["defaultTest"]["options"]["provider"]["modelName"] == grader
        assert "id" not in document["config"]["defaultTest"]["options"]["provider"]
        stats = document["results"]["stats"]
        mine = results.verdicts[results.verdicts["judge"] == grader]
        assert math.isclose(mine["compliant"].mean(), stats["successes"] / (stats["successes"] + stats["failures"]))


def test_repeats_are_numbered_by_testidx_whatever_the_files_order(tmp_path):
    # promptfoo writes results in the order they finished (concurrency), not by test: the replicate is the
    # repeat's place in testIdx order, so a file with its results shuffled imports the same.
    document = _document(recorded_features()[0])
    rows = document["results"]["results"]
    document["results"]["results"] = [rows[i] for i in np.random.default_rng(3).permutation(len(rows))]
    shuffled = tmp_path / "grader-a.json"
    shuffled.write_text(json.dumps(document))
    key = ["scoring", "case_id", "replicate"]
    frames = [import_promptfoo([path], tmp_path / name).verdicts.drop(columns=["universe_id"]).astype(str)
              .sort_values(key).reset_index(drop=True) for name, path in (("a", recorded_features()[0]),
                                                                          ("b", shuffled))]
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_a_bad_jsonl_line_is_refused_naming_it(tmp_path):
    lines = recorded_features(".jsonl")[0].read_text(encoding="utf-8").splitlines()
    path = tmp_path / "grader-a.jsonl"
    path.write_text("\n".join([lines[0], lines[1][:200], *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=r"grader-a\.jsonl: line 2: cannot read as JSON") as err:
        import_promptfoo([path], tmp_path / "out")
    assert "\n" not in str(err.value)
    path.write_text("\n".join([lines[0], "[1, 2]", *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=r"results\.results\[1\]: \[1, 2\]; expected an object"):
        import_promptfoo([path], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_primary_naming_the_judge_reads_promptfoos_pass(tmp_path):
    results = import_promptfoo(recorded_features(), tmp_path / "out", primary={"judge": JUDGES[0]})
    options = results.manifest.universe_options
    assert options[results.manifest.primary] == {"judge": JUDGES[0], "scoring": "pass"}
