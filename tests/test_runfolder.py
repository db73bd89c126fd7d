"""Writing a run folder (multiverse.tables.write_run_folder), the writer runs and imports share."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from multiverse.analysis import compute_rates
from multiverse.core import SCHEMA_VERSION
from multiverse.errors import InputError
from multiverse.results._load import load_run
from multiverse.tables import write_run_folder


def _tables():
    verdicts = pd.DataFrame({
        "universe_id": ["u1"] * 4, "judge": ["a"] * 4, "system": ["s1", "s1", "s2", "s2"],
        "case_id": ["c1", "c2", "c1", "c2"], "replicate": [0] * 4, "transcript_key": ["t1", "t2", "t3", "t4"],
        "judgment_key": ["j1", "j2", "j3", "j4"], "status": ["ok", "ok", "ok", "excluded"], "reason": ["", "", "", "x"],
        "compliant": pd.array([True, False, True, None], dtype="boolean"),
    })
    criteria = pd.DataFrame({"judgment_key": ["j1"], "sample": [0], "criterion": ["c"], "permissible": [False],
                             "applicable": [True], "compliant": pd.array([True], dtype="boolean"), "rationale": ["r"]})
    rates = compute_rates(verdicts, axes=["judge"], factors=[])
    manifest = {"spec": "t", "axes": ["judge"], "factors": [], "universes": ["u1"], "primary": "u1"}
    return verdicts, criteria, rates, manifest


def test_a_full_folder_reads_back_with_its_transcripts_spec_and_schema_version(tmp_path):
    verdicts, criteria, rates, manifest = _tables()
    transcripts = {"t2": {"system": "s1", "status": "ok", "turns": [{"role": "user", "content": "hi"}], "provenance": {}},
                   "t1": {"system": "s1", "status": "rollout_failed", "reason": "why", "turns": []}}
    out = write_run_folder(tmp_path / "run", verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest,
                           spec_document={"name": "t", "axes": {}}, transcripts=transcripts)
    stored = json.loads((out / "manifest.json").read_text())
    assert stored["schema_version"] == SCHEMA_VERSION and stored["primary"] == "u1"
    lines = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    assert [line["key"] for line in lines] == ["t1", "t2"]  # sorted, one object a line
    assert set(lines[0]) == {"key", "system", "status", "reason", "stop_reason", "turns"}  # no provenance leaks out
    assert yaml.safe_load((out / "spec.yaml").read_text()) == {"name": "t", "axes": {}}
    tables = load_run(out)
    assert len(tables.verdicts) == 4 and len(tables.criteria) == 1 and list(tables.axes) == ["judge"]


def test_rewriting_as_an_import_removes_what_would_describe_the_old_run(tmp_path):
    verdicts, criteria, rates, manifest = _tables()
    write_run_folder(tmp_path, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest,
                     spec_document={"name": "t"}, transcripts={})
    write_run_folder(tmp_path, verdicts=verdicts, criteria=None, rates=rates, manifest={**manifest, "source": "table"})
    left = {p.name for p in tmp_path.iterdir()}
    assert left == {"verdicts.parquet", "verdicts.csv", "rates.parquet", "rates.csv", "manifest.json"}
    assert json.loads((tmp_path / "manifest.json").read_text())["source"] == "table"


def test_a_failed_write_leaves_no_manifest_so_the_folder_reads_as_incomplete(tmp_path, monkeypatch):
    verdicts, criteria, rates, manifest = _tables()
    write_run_folder(tmp_path, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest)
    import multiverse.tables._writer as runfolder

    def broken(frame, out, name):
        raise OSError("disk full")

    monkeypatch.setattr(runfolder, "write_table", broken)
    with pytest.raises(OSError):
        write_run_folder(tmp_path, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest)
    assert not (tmp_path / "manifest.json").exists()


def test_a_file_in_the_way_is_one_input_error(tmp_path):
    verdicts, criteria, rates, manifest = _tables()
    (tmp_path / "run").write_text("not a folder")
    with pytest.raises(InputError, match="expected a folder"):
        write_run_folder(tmp_path / "run", verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest)
