"""``multiverse import lm-eval`` on what lm-evaluation-harness 0.4.13 itself wrote (issue 43).

``lm_eval_results/`` is one run of ``lm_eval_runs.py``'s two tasks (a sum task with ``repeats: 3`` and
two filters, a words task with ``exact_match`` and ``bleu``), recorded by that module run as a script;
the last test runs lm-eval live against the fake server where it is installed (`.ci/run` installs it in
a step of its own, since three of its dependencies are pure-Python source distributions). Every
expected figure is lm-eval's own: each task's metric and its ``_stderr`` in the results file, and each
sample's metric value in the samples files.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli
from lm_eval_runs import LM_EVAL_VERSION, MODEL, REPEATS, TASKS, lm_eval_installed, recorded, run_lm_eval

from multiverse.errors import InputError
from multiverse.explorer import document_from_run, document_texts
from multiverse.importers import import_lm_eval


def _results_file(folder: Path) -> dict:
    [path] = sorted(folder.rglob("results_*.json"))
    return json.loads(path.read_text(encoding="utf-8"))


def _samples(folder: Path, task: str) -> list[dict]:
    [path] = sorted(folder.rglob(f"samples_{task}_*.jsonl"))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_figures(folder: Path, results) -> None:
    """Each task's metric and standard error, as lm-eval reported them, are the import's per-task rate and se."""
    document = _results_file(folder)
    assert document["lm_eval_version"] == LM_EVAL_VERSION and document["model_name"] == MODEL
    rates = results.rates
    checked = 0
    for task in TASKS:
        for name, value in document["results"][task].items():
            metric, _, filter_name = name.partition(",")
            if not filter_name or metric.endswith("_stderr") or metric == "bleu":
                continue
            row = rates[(rates["subgroup"] == f"task={task}") & (rates["system"] == MODEL)]
            if "filter" in results.axes:
                row = row[row["filter"] == filter_name]
            assert len(row) == 1, (task, name)
            assert math.isclose(row["rate"].iloc[0], value, abs_tol=1e-12), (task, name)
            stderr = document["results"][task][f"{metric}_stderr,{filter_name}"]
            assert math.isclose(row["se"].iloc[0], stderr, abs_tol=1e-12), (task, name)
            checked += 1
    assert checked == 3  # two filters of the sums, one of the words
    # Sample by sample: each score is the sample's own metric value.
    v = results.verdicts
    for task in TASKS:
        for sample in _samples(folder, task):
            mine = v[(v["case_id"] == f"{task}:{sample['doc_id']}") & (v["filter"] == sample["filter"])]
            assert mine["score"].tolist() == [float(sample["exact_match"])]
    assert not results.warnings


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    return import_lm_eval(recorded(), tmp_path_factory.mktemp("lm") / "out", factors=["topic"])


def test_the_import_is_lm_evals_per_task_metric_and_standard_error(imported):
    check_figures(recorded(), imported)
    assert imported.axes == ["filter"] and imported.manifest.input["files"][0]["lm_eval_version"] == LM_EVAL_VERSION
    assert {"task=mv_arith", "task=mv_words", "topic=sum", "topic=animal"} <= set(imported.rates["subgroup"])
    assert (imported.verdicts["status"] == "ok").all() and (imported.verdicts["replicate"] == 0).all()


def test_what_the_samples_cannot_reproduce_is_listed_as_dropped(imported):
    dropped = {d.what: d for d in imported.manifest.dropped}
    # bleu is a corpus-level figure of (reference, answer) pairs: no per-sample value has lm-eval's mean.
    assert dropped["mv_words: bleu,none"].count == len(_samples(recorded(), "mv_words"))
    assert "not a number" in dropped["mv_words: bleu,none"].why
    assert sum(d.what == "doc fields not named as factors" for d in dropped.values()) == 1  # keyed by what
    assert imported.manifest.statuses["ok"] == len(imported.verdicts)


def test_every_repeat_is_in_the_transcripts(imported, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(imported.out_dir, out)
    texts = document_texts(document_from_run(out))
    shown = {t["content"] for record in texts["transcripts"] for t in record["turns"]}
    for sample in _samples(recorded(), "mv_arith"):
        [answers] = sample["resps"]
        assert len(answers) == REPEATS and set(answers) <= shown


def test_import_lm_eval_on_the_command_line(tmp_path):
    done = run_cli(["import", "lm-eval", recorded(), "--factor", "topic", "--out", tmp_path / "out"])
    assert done.returncode == 0, done.stderr
    assert "imported 22 verdicts: 3 universes x 1 systems (axes: filter)" in done.stdout  # 8 sums x 2 filters, 6 words
    assert any(line.startswith("dropped: mv_words: bleu,none (6)") for line in done.stderr.splitlines())


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(recorded(), folder)
    return folder


def test_bad_lm_eval_output_is_refused_in_one_line(tmp_path):
    folder = _copy(tmp_path)
    [samples] = sorted(folder.glob("samples_mv_words_*.jsonl"))
    lines = samples.read_text().splitlines()
    samples.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    with pytest.raises(InputError, match=r"samples_mv_words_.*: line 2: cannot read as JSON") as err:
        import_lm_eval(folder, tmp_path / "out")
    assert "\n" not in str(err.value)
    bad = json.loads(lines[0])
    bad["doc_id"] = None
    samples.write_text("\n".join([json.dumps(bad), *lines[1:]]) + "\n")
    with pytest.raises(InputError, match=r"line 1: doc_id: None; expected the document's id"):
        import_lm_eval(folder, tmp_path / "out")
    samples.unlink()
    with pytest.raises(InputError, match=r"samples_mv_words_.*: file not found; expected the samples of task mv_words"):
        import_lm_eval(folder, tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: no results_<time>\.json in the folder"):
        import_lm_eval(tmp_path / "empty", tmp_path / "out")
    # A factor is a field of every document: the words have no question.
    with pytest.raises(InputError, match=r"samples_mv_words_.*: line 1: doc\.question: None; expected a level"):
        import_lm_eval(recorded(), tmp_path / "out", factors=["question"])
    assert not (tmp_path / "out").exists()


def test_two_runs_of_one_model_on_one_task_are_refused(tmp_path):
    folder = _copy(tmp_path)
    twin = folder / "again"
    shutil.copytree(recorded(), twin)
    with pytest.raises(InputError, match=r"appears twice; expected each model's run of a task once"):
        import_lm_eval(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_lm_eval_run_live_imports_with_its_own_figures(tmp_path):
    """lm-eval run now against the fake server: its own output imports with its own figures."""
    if not lm_eval_installed():
        pytest.skip(f"lm-eval {LM_EVAL_VERSION} is not installed (pip install 'lm-eval[api]=={LM_EVAL_VERSION}')")
    out = run_lm_eval(tmp_path / "run")
    results = import_lm_eval(out, tmp_path / "import", factors=["topic"])
    check_figures(out, results)


def test_lm_eval_output_past_the_bounds_is_refused(tmp_path):
    # 8 sums x 2 filters + 6 words: 22 sample lines in all; the files' bytes count against max_bytes.
    with pytest.raises(InputError, match="max_rows") as err:
        import_lm_eval(recorded(), tmp_path / "out", max_rows=21)
    assert err.value.param == "max_rows"
    with pytest.raises(InputError) as err:
        import_lm_eval(recorded(), tmp_path / "out", max_bytes=10_000)
    assert err.value.param == "max_bytes"
    assert not (tmp_path / "out").exists()
    assert len(import_lm_eval(recorded(), tmp_path / "ok", max_rows=22).verdicts) == 22


def test_no_loss_is_reported_where_lm_eval_recorded_none(imported):
    # lm-eval aborts on a failed request, so every logged sample holds the model's responses; two filters
    # read each one (two universes), and nothing lost is counted in either.
    folder = recorded()
    unanswered = sum(not sample.get("resps") for task in TASKS for sample in _samples(folder, task))
    assert unanswered == 0 and imported.manifest.losses == {}
    assert imported.manifest.statuses["ok"] == len(imported.verdicts)
