"""``import inspect`` against genuine logs made here by the installed Inspect AI (issue 43).

Every test checks the import against the figures Inspect itself reports (``log.results``):
each metric of each scorer under each reducer, over logs of 2, 3 and 4 epochs. The logs
are made once for the module (``inspect_tasks.make_logs``) against the fake server.
"""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pytest

pytest.importorskip("inspect_ai")

from cli_runner import run_cli
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_tasks import make_logs

from multiverse.errors import InputError
from multiverse.importers import import_inspect, loss_lines

RATING = (1.0, 5.0)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return make_logs(tmp_path_factory.mktemp("inspect"))


def _option(name: str, scorer: str) -> str:
    return name if name == scorer else f"{scorer}:{name}"


def _every_figure_equal(results, log, scales=None) -> int:
    """Assert each metric of ``log.results`` equals the import's figure of its universe; the number checked."""
    rates = results.rates[results.rates["subgroup"] == "all"].set_index("universe_id")
    options = results.manifest.universe_options
    imported = set(results.manifest.model_dump()["input"]["logs"][0]["scorers"])
    checked = 0
    for score in log.results.scores:
        scorer = _option(score.name, score.scorer)
        if scorer not in imported:
            continue
        reducer = score.reducer or "mean"
        found = [u for u, o in options.items() if o.get("scorer", scorer) == scorer
                 and o.get("reducer", reducer) == reducer]
        assert len(found) == 1, (scorer, reducer, options)
        row = rates.loc[found[0]]
        low, high = (scales or {}).get(scorer, (0.0, 1.0))
        for metric, value in score.metrics.items():
            if metric in ("accuracy", "mean"):
                mine = row["mean"] if "mean" in rates.columns and not math.isnan(row["mean"]) else row["rate"]
            else:
                assert metric == "stderr"
                mine = row["se"] * (high - low)  # the standard error of the rate, on the scorer's own range
            assert mine == pytest.approx(value.value, abs=1e-12), (scorer, reducer, metric)
            checked += 1
    return checked


def test_every_reducer_of_every_scorer_equals_inspects_own_metrics(logs, tmp_path):
    for i, path in enumerate(logs["reduced"]):
        log = read_eval_log(str(path))
        results = import_inspect([path], tmp_path / f"out{i}", scale={"rating": RATING})
        assert results.axes == ["scorer", "reducer"]
        assert set(results.verdicts["reducer"]) == set(log.eval.config.epochs_reducer)
        # Every scorer, and each key of the dict scorer, is an option; match() and the rating call no model.
        assert set(results.verdicts["scorer"]) == {"match", "model_graded_qa", "rating", "two:a", "two:b"}
        scorers = results.manifest.model_dump()["input"]["logs"][0]["scorers"]
        assert {s: v["judge"] for s, v in scorers.items()} == {
            "match": None, "model_graded_qa": "openai-api/local/grader-a", "rating": None, "two:a": None,
            "two:b": None}
        assert "judge" not in results.axes and "judge" not in results.verdicts.columns
        assert _every_figure_equal(results, log, {"rating": RATING}) == sum(len(s.metrics) for s in log.results.scores)
        assert not [w for w in results.warnings if "Inspect's own figure" in w]
        # Inspect's epochs count: one reduced row per sample, each sample's lost epochs rows of their status.
        ok = results.verdicts[results.verdicts["status"] == "ok"]
        assert (ok["replicate"] == 0).all() and not ok.duplicated(["universe_id", "case_id"]).any()


def test_a_rating_outside_0_to_1_needs_its_scale_and_is_read_in_its_own_units(logs, tmp_path):
    path = logs["reduced"][0]
    with pytest.raises(InputError, match=r"scores\.rating.*expected C, I, P, N, true/false or a number from 0 to 1 "
                                         r"\(--scale gives the scorer's range\)"):
        import_inspect([path], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    results = import_inspect([path], tmp_path / "out", scorer="rating", scale={"rating": RATING})
    entries = [u for u in results.manifest.universes if u.scale is not None]
    assert {(u.scale.min, u.scale.max) for u in entries} == {RATING} and len(entries) == len(results.manifest.universes)
    assert _every_figure_equal(results, read_eval_log(str(path)), {"rating": RATING}) > 0
    with pytest.raises(InputError, match=r"scale: 5 to 1; expected a min below the max"):
        import_inspect([path], tmp_path / "bad", scale=(5, 1))


def test_a_custom_reducer_is_refused_in_one_line(logs, tmp_path):
    path = tmp_path / "custom.eval"
    log = read_eval_log(str(logs["reduced"][0]))
    log.eval.config.epochs_reducer = ["mean", "my_reducer"]
    write_eval_log(log, str(path))
    result = run_cli(["import", "inspect", path, "--scale", "rating=1:5", "--out", tmp_path / "out"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "eval.config.epochs_reducer: 'my_reducer': not a reducer this import applies as Inspect does" in result.stderr
    assert not (tmp_path / "out").exists()


def test_every_loss_lands_in_its_status_counted_and_said_never_a_label(logs, tmp_path):
    path = logs["errors"]
    log = read_eval_log(str(path))
    result = run_cli(["import", "inspect", path, "--out", tmp_path / "out"])
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    import pandas as pd

    v = pd.read_parquet(tmp_path / "out" / "verdicts.parquet")
    failed = v[v["status"] != "ok"]
    assert failed["compliant"].isna().all() and failed["score"].isna().all()
    # The scorer that raised (q1, epoch 2) is a judge failure for every scorer of that epoch, not the system's.
    broke = failed[(failed["case_id"] == "q1") & (failed["replicate"] == 2)]
    assert set(broke["status"]) == {"judge_failed"} and broke["reason"].str.startswith("grader error: RuntimeError").all()
    # The system's reply that could not be read (q4) is the system's failure, in both epochs.
    system = failed[failed["case_id"] == "q4"]
    assert set(system["status"]) == {"rollout_failed"} and len(system) == 4
    # A grader reply without a grade is Inspect's unscored: a judge failure, the unparsed kind.
    unscored = [(s.id, s.epoch) for s in log.samples if s.scores and isinstance(s.scores["model_graded_qa"].value, float)
                and math.isnan(s.scores["model_graded_qa"].value)]
    assert unscored
    no_grade = failed[failed["reason"].str.startswith("no grade: grader_failed")]
    assert sorted(zip(no_grade["case_id"], no_grade["replicate"])) == sorted(unscored)
    assert manifest["statuses"] == {s: int((v["status"] == s).sum()) for s in
                                    ("ok", "excluded", "not_run", "rollout_failed", "judge_failed")}
    assert {k: x["rows"] for k, x in manifest["losses"].items()} == {
        "no_grade": len(unscored), "grader_error": 2, "system_error": 4}
    # Each lost thing once: the two epochs of q4 are two rollouts, though each scorer holds a row of them.
    lost = _lost_from_source(log)
    assert {k: x["lost"] for k, x in manifest["losses"].items()} == {k: len(u) for k, u in lost.items()}
    lines = [line for line in result.stderr.splitlines() if line.startswith("lost: ")]
    judgments = v[["case_id", "replicate", "scorer"]].drop_duplicates().shape[0]
    rollouts = v[["case_id", "replicate"]].drop_duplicates().shape[0]
    assert [line.split(": ", 2)[1] for line in lines] == [
        f"{len(unscored)} of {judgments} judgments", f"2 of {judgments} judgments",
        f"2 of {rollouts} rollouts (4 of {len(v)} verdict rows across the universes)"]
    # Samples scored in fewer epochs are named, and reduced over what they have, as Inspect reduces them.
    assert re.search(r"fragile: 2 samples scored in fewer epochs than the others: q1 \(1 of 2\), q4 \(0 of 2\)",
                     result.stderr)
    results = import_inspect([path], tmp_path / "again")
    assert _every_figure_equal(results, log) == sum(len(s.metrics) for s in log.results.scores)


def _lost_from_source(log) -> dict[str, set]:
    """What the log itself lost, counted from its samples: (id, epoch, scorer) judgments, (id, epoch) rollouts."""
    scorers = {name for s in log.samples for name in (s.scores or {})}
    broke = {(s.id, s.epoch) for s in log.samples if s.error and "the scorer broke" in s.error.message}
    lost = {"no_grade": {(s.id, s.epoch, name) for s in log.samples for name, score in (s.scores or {}).items()
                         if isinstance(score.value, float) and math.isnan(score.value)},
            "grader_error": {(*unit, name) for unit in broke for name in scorers},
            "system_error": {(s.id, s.epoch) for s in log.samples if s.error and (s.id, s.epoch) not in broke}}
    return {kind: units for kind, units in lost.items() if units}


@pytest.mark.parametrize("reducers", [["mean", "mode", "max"], ["mode", "at_least_2"]])
def test_a_loss_counts_once_however_many_reducers_read_it(logs, tmp_path, reducers):
    # Three reducers make three universes of every scorer over the same epochs: one lost epoch is one loss.
    log = read_eval_log(str(logs["errors"]))
    log.eval.config.epochs_reducer = reducers
    path = tmp_path / "reduced.eval"
    write_eval_log(log, str(path))
    results = import_inspect([path], tmp_path / "out")
    assert "reducer" in results.axes and "scorer" in results.axes
    once = import_inspect([logs["errors"]], tmp_path / "once")
    want = {kind: len(units) for kind, units in _lost_from_source(log).items()}
    assert {k: x.lost for k, x in results.manifest.losses.items()} == want
    assert {k: x.lost for k, x in once.manifest.losses.items()} == want
    v = results.verdicts
    for kind, loss in results.manifest.losses.items():
        assert loss.rows == want[kind] * len(reducers) * (2 if kind == "system_error" else 1)
        assert loss.message.startswith(f"{want[kind]} of {loss.of} {loss.unit} ({loss.rows} of {len(v)} verdict rows")


def test_the_cancelled_samples_of_a_failed_eval_are_not_run_with_a_warning(logs, tmp_path):
    path = logs["cancelled"]
    log = read_eval_log(str(path))
    assert log.status == "error" and log.results is None
    results = import_inspect([path], tmp_path / "out")
    v = results.verdicts
    logged = {(s.id, s.epoch) for s in log.samples}
    assert len(v) == log.eval.dataset.samples * log.eval.config.epochs
    not_run = v[v["status"] == "not_run"]
    cancelled = {(s.id, s.epoch) for s in log.samples if s.error and "CancelledError" in s.error.message}
    assert cancelled and cancelled <= set(zip(not_run["case_id"], not_run["replicate"]))
    never = set(zip(v["case_id"], v["replicate"])) - logged
    assert never == set(zip(not_run["case_id"], not_run["replicate"])) - cancelled
    assert any("the eval ended error" in w for w in results.warnings)
    lost = [line for line in loss_lines(results.manifest) if line.startswith("lost: ")]
    rollouts = len(v[["case_id", "replicate"]].drop_duplicates())
    assert "never run" in lost[-1] and lost[-1].startswith(f"lost: {len(not_run)} of {rollouts} rollout")
    errored = {(s.id, s.epoch) for s in log.samples if s.error and "CancelledError" not in s.error.message}
    assert set(zip(*[v.loc[v["status"] == "rollout_failed", c] for c in ("case_id", "replicate")])) == errored
    # What was scored is Inspect's values, epoch by epoch.
    scored = {(s.id, s.epoch): s.scores["fragile"].value == "C" for s in log.samples if s.scores}
    ok = v[v["status"] == "ok"]
    assert dict(zip(zip(ok["case_id"], ok["replicate"]), ok["compliant"])) == scored


def test_a_regraded_log_imports_with_its_graders_from_the_scoring_events(logs, tmp_path):
    original, appended, overwritten = (read_eval_log(str(logs[k])) for k in ("original", "appended", "overwritten"))
    # The header still names the first grader; the scoring events name who graded.
    for log in (appended, overwritten):
        assert log.eval.model_roles["grader"].model == "openai-api/local/grader-a"
    results = import_inspect([logs["appended"]], tmp_path / "appended")
    assert results.axes == ["judge"]
    assert sorted(results.verdicts["judge"].unique()) == ["openai-api/local/grader-a", "openai-api/local/grader-b"]
    rates = results.rates[results.rates["subgroup"] == "all"].set_index("judge")["mean"]
    figures = {s.name: s.metrics["accuracy"].value for s in appended.results.scores}
    assert rates["openai-api/local/grader-a"] == pytest.approx(figures["model_graded_qa"], abs=1e-12)
    assert rates["openai-api/local/grader-b"] == pytest.approx(figures["model_graded_qa1"], abs=1e-12)
    assert results.agreement("judge").document.paired_on == "transcript"
    # Overwritten: two logs of one scorer, the original and its re-grade, are two judges beside each other.
    results = import_inspect([logs["original"], logs["overwritten"]], tmp_path / "two")
    rates = results.rates[results.rates["subgroup"] == "all"].set_index("judge")["mean"]
    assert rates.to_dict() == pytest.approx({
        "openai-api/local/grader-a": original.results.scores[0].metrics["accuracy"].value,
        "openai-api/local/grader-b": overwritten.results.scores[0].metrics["accuracy"].value}, abs=1e-12)


def test_a_rule_based_scorer_has_no_judge_even_where_the_header_names_a_grader(logs, tmp_path):
    results = import_inspect([logs["reduced"][0]], tmp_path / "out", scorer="match")
    assert results.axes == ["reducer"] and "judge" not in results.verdicts.columns
    entry = results.manifest.model_dump()["input"]["logs"][0]["scorers"]["match"]
    assert entry == {"judge": None, "judge_from": "the scoring events of match"}
    # What the log holds and the import leaves out is listed: the other scorers, the metadata not kept.
    log = read_eval_log(str(logs["reduced"][0]))
    dropped = {d.what: d.count for d in results.manifest.dropped}
    assert dropped == {**{f"samples.scores.{name}": len(log.samples) for name in ("model_graded_qa", "rating", "two")},
                       "samples.metadata.topic": len(log.samples)}
    # Without its scoring events, a scorer whose scores carry no grading is no judge either.
    path = tmp_path / "no-events.eval"
    log = read_eval_log(str(logs["reduced"][0]))
    for sample in log.samples:
        sample.events = []
    write_eval_log(log, str(path))
    scorers = import_inspect([path], tmp_path / "bare", scale={"rating": RATING}).manifest.model_dump()["input"][
        "logs"][0]["scorers"]
    assert scorers["match"]["judge"] is None
    # The model its grading messages name (the reply's own short name).
    assert scorers["model_graded_qa"] == {"judge": "grader-a", "judge_from": "samples.scores.model_graded_qa.metadata.grading"}


def test_an_eval_set_folder_is_read_as_its_tasks_logs(logs, tmp_path):
    folder = logs["set"]
    results = import_inspect([folder], tmp_path / "out", factors=["topic"])
    tasks = json.loads((folder / "eval-set.json").read_text())["tasks"]
    assert {c.split("/")[0] for c in results.verdicts["case_id"]} == {t["name"] for t in tasks}
    assert not results.manifest.dropped and not results.warnings
    # A retried task leaves an earlier attempt: the last is imported, the earlier one said to be dropped.
    copy = tmp_path / "set"
    shutil.copytree(folder, copy)
    last = sorted(copy.glob(f"*_{tasks[0]['task_id']}.eval"))[-1]
    shutil.copy(last, copy / ("0000-" + last.name))
    results = import_inspect([copy], tmp_path / "again", factors=["topic"])
    assert [d.what for d in results.manifest.dropped] == [f"an earlier attempt of task {tasks[0]['task_id']}"]
    result = run_cli(["import", "inspect", copy, "--factor", "topic", "--out", tmp_path / "cli"])
    assert result.returncode == 0 and "dropped: an earlier attempt of task" in result.stderr, result.stderr
    for path in sorted(folder.glob("*.eval")):
        log = read_eval_log(str(path))
        mine = results.verdicts[results.verdicts["case_id"].str.startswith(log.eval.task + "/")]
        assert mine["compliant"].mean() == pytest.approx(log.results.scores[0].metrics["accuracy"].value)


def test_the_report_shows_the_losses(logs, tmp_path):
    from multiverse.reporting import write_report

    import_inspect([logs["errors"]], tmp_path / "out")
    page = write_report(tmp_path / "out", tests=False, progress=False).read_text()
    assert "Rows the import could not take as labels" in page and "grader error: RuntimeError" in page
    assert "2 of 10 rollouts" in page  # q4's two epochs, once each, though both scorers hold a row of them
    assert np.all([kind in page for kind in ("no_grade", "grader_error", "system_error")])
