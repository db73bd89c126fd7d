"""``multiverse import promptfoo`` on what promptfoo itself wrote, for each place an eval names its grader.

The result files under ``promptfoo_results/`` are the pinned promptfoo's own output for the evals of
``promptfoo_runs.py`` (two prompts x one provider, five tests with an ``llm-rubric`` and a ``contains``
assertion, graded by grader-a and by grader-b), recorded by running that module as a script: CI does
not build promptfoo (its npm install compiles SQLite from source). With promptfoo installed
(``$PROMPTFOO`` or ``.ci/node``), the last test runs the evals again and checks that the recording is
what promptfoo writes now.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from promptfoo_runs import GRADERS, PLACES, PROMPTFOO_VERSION, TESTS, promptfoo_binary, recorded, run_promptfoo

from multiverse.explorer import document_from_run, document_texts
from multiverse.importers import import_promptfoo


def _grader_named(document: dict, where: str) -> set[str]:
    """The grader ids the eval's config names at ``where`` (and the places it must leave empty)."""
    config = document["config"]
    default = config.get("defaultTest", {}).get("options", {}).get("provider", {}).get("id")
    tests = {t.get("options", {}).get("provider", {}).get("id") for t in config["tests"]}
    asserted = {t["assert"][0].get("provider", {}).get("id") for t in config["tests"]}
    named = {"defaultTest": {default}, "test": tests, "assertion": asserted}
    assert all(named[other] <= {None} for other in PLACES if other != where), (where, named)
    return named[where]


def _stats_rate(document: dict) -> float:
    stats = document["results"]["stats"]
    return stats["successes"] / (stats["successes"] + stats["failures"])


def _verdicts(results) -> pd.DataFrame:
    columns = ["judge", "system", "case_id", "status", "compliant"]
    return results.verdicts[columns].astype(str).sort_values(columns).reset_index(drop=True)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Each placement's import folder, written once."""
    return {where: tmp_path_factory.mktemp(where) / "out" for where in PLACES}


@pytest.fixture(scope="module")
def imported(folders) -> dict:
    """Each placement's recorded files, imported once."""
    return {where: import_promptfoo(recorded(where), folders[where], factors=["topic"]) for where in PLACES}


@pytest.mark.parametrize("where", PLACES)
def test_the_recording_is_the_pinned_promptfoos_output_with_the_grader_in_place(where):
    for grader, path in zip(GRADERS, recorded(where)):
        document = json.loads(path.read_text(encoding="utf-8"))
        assert document["metadata"]["promptfooVersion"] == PROMPTFOO_VERSION, path
        assert _grader_named(document, where) == {f"openai:chat:{grader}"}, path
        rows = document["results"]["results"]
        assert len(rows) == 2 * len(TESTS), path
        # The graders' own answers are kept: promptfoo's reason for each rubric verdict names its grader.
        reasons = [r["gradingResult"]["componentResults"][0]["reason"] for r in rows]
        assert all(reason.startswith(f"{grader}: the output") for reason in reasons), reasons


@pytest.mark.parametrize("where", PLACES)
def test_each_graders_rate_is_promptfoos_pass_rate(imported, where):
    results = imported[where]
    v = results.verdicts
    assert v["system"].nunique() == 2 and v["case_id"].nunique() == len(TESTS) and results.axes == ["judge"]
    assert not results.warnings and (v["status"] == "ok").all()
    pooled = v.groupby("judge")["compliant"].mean()
    for grader, path in zip(GRADERS, recorded(where)):
        assert abs(pooled[f"openai:chat:{grader}"] - _stats_rate(json.loads(path.read_text()))) < 1e-9
    # The rates table's per-system rates add up to the same pooled share, and the topic is a factor.
    table = results.rates[results.rates["subgroup"] == "all"]
    weighted = (table["rate"] * table["n"]).groupby(table["judge"]).sum() / table.groupby("judge")["n"].sum()
    assert (weighted - pooled).abs().max() < 1e-9
    assert {f"topic={topic}" for _, topic in TESTS} <= set(results.rates["subgroup"])


@pytest.mark.parametrize("where", PLACES)
def test_criteria_rationales_and_transcripts_come_from_the_results(imported, folders, where):
    results = imported[where]
    criteria = results.criteria
    assert len(criteria) == 2 * len(results.verdicts)
    assert set(criteria["criterion"]) == {"llm-rubric: The answer is correct and brief", "contains: answer"}
    assert criteria["score"].notna().all()
    outputs, reasons = set(), set()
    for path in recorded(where):
        for row in json.loads(path.read_text())["results"]["results"]:
            outputs.add(row["response"]["output"])
            reasons |= {c["reason"] for c in row["gradingResult"]["componentResults"]}
    assert reasons == set(criteria["rationale"])
    # Same outputs under both graders: paired on the answer, and the explorer shows every answer.
    assert results.agreement("judge").document.paired_on == "transcript"
    texts = document_texts(document_from_run(folders[where]))
    shown = {t["content"] for record in texts["transcripts"] for t in record["turns"]}
    assert outputs <= shown


def test_the_grader_read_from_any_place_gives_the_same_verdicts(imported):
    """One eval, its grader named in defaultTest, the test or the assertion: the same verdicts."""
    first, *others = (_verdicts(imported[where]) for where in PLACES)
    for other in others:
        pd.testing.assert_frame_equal(first, other)


@pytest.mark.slow
def test_promptfoo_writes_now_what_was_recorded(tmp_path):
    """With promptfoo installed, its evals run again against the fake server import as the recording does."""
    if promptfoo_binary() is None:
        pytest.skip(f"promptfoo {PROMPTFOO_VERSION} is not installed (CI reads its recorded output; "
                    "tests/importers/promptfoo_runs.py says how to install it and record again)")
    live = import_promptfoo(run_promptfoo(tmp_path / "evals"), tmp_path / "out", factors=["topic"])
    kept = import_promptfoo(recorded("defaultTest"), tmp_path / "kept", factors=["topic"])
    pd.testing.assert_frame_equal(_verdicts(live), _verdicts(kept))
