"""The import-status contract every importer keeps (issue 43): kinds of loss, their statuses, the manifest's counts."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from multiverse.core import STATUSES, unparsed_rows
from multiverse.importers import LOSS_KINDS, ImportLosses, loss_lines, loss_reason
from multiverse.importers._directory import write_import_dir
from multiverse.tables import Manifest


def test_each_kind_has_its_status_and_a_no_grade_is_an_unparsed_answer():
    assert loss_reason("no_grade", "Grade not found in model output:  x\n y") == (
        "judge_failed", "no grade: Grade not found in model output: x y")
    assert loss_reason("grader_error", "") == ("judge_failed", "grader error")
    assert loss_reason("system_error", "RuntimeError: 503")[0] == "rollout_failed"
    assert loss_reason("not_run", "cancelled")[0] == "not_run" and "not_run" in STATUSES
    frame = pd.DataFrame([dict(zip(("status", "reason"), loss_reason(kind, "x"))) for kind in LOSS_KINDS])
    # Only the no-grade row is a judge's answer that named nothing (scoring.unparsed decides it).
    assert unparsed_rows(frame).tolist() == [kind == "no_grade" for kind in LOSS_KINDS]
    with pytest.raises(KeyError):
        loss_reason("a label", "x")


@given(st.lists(st.sampled_from([*LOSS_KINDS, "ok", "excluded"]), min_size=1, max_size=30))
def test_the_manifest_counts_every_row_once_by_status_and_by_kind(kinds):
    rows = [("ok", "") if k == "ok" else ("excluded", "no answer (N)") if k == "excluded" else loss_reason(k, "why")
            for k in kinds]
    verdicts = pd.DataFrame(rows, columns=["status", "reason"])
    fields = ImportLosses().manifest_fields(verdicts)
    assert sum(fields["statuses"].values()) == len(kinds) and list(fields["statuses"])[:len(STATUSES)] == list(STATUSES)
    lost = {k: kinds.count(k) for k in LOSS_KINDS if kinds.count(k)}
    assert {k: v["rows"] for k, v in fields["losses"].items()} == lost
    assert all(v["status"] == LOSS_KINDS[k][0] for k, v in fields["losses"].items())
    manifest = Manifest.from_document(fields)
    lines = loss_lines(manifest)
    assert len(lines) == len(lost) and all(line.startswith("lost: ") and "\n" not in line for line in lines)


def test_an_import_folder_records_statuses_losses_and_drops(tmp_path):
    verdicts = pd.DataFrame({"universe_id": "u0", "system": "s", "case_id": ["a", "b", "c"], "replicate": 0,
                             "status": ["ok", *(loss_reason(k, "boom")[0] for k in ("grader_error", "not_run"))],
                             "reason": ["", "grader error: boom", "not run: cancelled"],
                             "compliant": pd.array([True, pd.NA, pd.NA], dtype="boolean")})
    rates = pd.DataFrame({"universe_id": ["u0"], "system": ["s"], "n": [1], "n_compliant": [1], "rate": [1.0],
                          "ci_low": [0.2], "ci_high": [1.0]})
    losses = ImportLosses()
    losses.drop("samples.scores.x.metadata", where="a.eval", count=3, why="not a measurement")
    results = write_import_dir(tmp_path / "out", verdicts=verdicts, criteria=None, rates=rates,
                               manifest={"source": "table", "axes": [], "factors": [], "universes": ["u0"]},
                               losses=losses)
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk["statuses"] == {"ok": 1, "excluded": 0, "not_run": 1, "rollout_failed": 0, "judge_failed": 1}
    assert set(on_disk["losses"]) == {"grader_error", "not_run"}
    assert on_disk["dropped"] == [{"what": "samples.scores.x.metadata", "where": "a.eval", "count": 3,
                                   "why": "not a measurement"}]
    lines = loss_lines(results.manifest)
    assert lines[-1] == "dropped: samples.scores.x.metadata (3) in a.eval: not a measurement"
    assert lines[0].startswith("lost: 1 of 3 rows: the scorer or grader raised") and "grader error: boom" in lines[0]
