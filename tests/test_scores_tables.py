"""Scores in a run folder (issue 27): the ``score`` column, the manifest's scale, old folders and bad cells."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from multiverse.core import SCHEMA_VERSION
from multiverse.errors import InputError
from multiverse.results._load import load_run
from multiverse.tables import write_run_folder


def _verdicts(scores):
    n = len(scores)
    return pd.DataFrame({
        "universe_id": "u1", "system": ["a", "b"] * (n // 2), "case_id": [f"c{i // 2}" for i in range(n)],
        "replicate": 0, "transcript_key": [f"t{i}" for i in range(n)], "judgment_key": [f"j{i}" for i in range(n)],
        "status": "ok", "reason": "", "compliant": pd.array([pd.NA] * n, dtype="boolean"),
        "score": np.asarray(scores, dtype=float)})


def _write(out, verdicts, scale):
    manifest = {"source": "table", "axes": [], "factors": [], "universes": ["u1"], "scale": scale}
    rates = pd.DataFrame({"universe_id": ["u1"], "system": ["a"], "subgroup": ["all"], "n": [1]})
    return write_run_folder(out, verdicts=verdicts, criteria=None, rates=rates, manifest=manifest)


ORDINAL = {"type": "ordinal", "min": 1, "max": 10}


def test_a_scored_folder_records_its_scale_and_loads_its_scores(tmp_path):
    out = _write(tmp_path / "f", _verdicts([7, 3, 10, 1]), ORDINAL)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema_version"] == SCHEMA_VERSION == 2
    assert manifest["scale"]["type"] == "ordinal" and manifest["scale"]["max"] == 10
    results = load_run(out)
    assert results.manifest.scale.type == "ordinal"
    assert results.verdicts["score"].dtype == np.float64
    assert results.verdicts["score"].tolist() == [7.0, 3.0, 10.0, 1.0]


def test_a_binary_folder_gets_an_empty_score_column_and_a_binary_scale(tmp_path):
    verdicts = _verdicts([np.nan] * 4).drop(columns="score")
    verdicts["compliant"] = pd.array([True, False, True, True], dtype="boolean")
    out = _write(tmp_path / "f", verdicts, None)
    stored = pd.read_parquet(out / "verdicts.parquet")
    assert list(stored.columns)[list(stored.columns).index("compliant") + 1] == "score"
    assert stored["score"].isna().all()
    assert json.loads((out / "manifest.json").read_text())["scale"]["type"] == "binary"


def test_a_layout_1_folder_without_scores_still_loads(tmp_path):
    verdicts = _verdicts([np.nan] * 4)
    verdicts["compliant"] = pd.array([True, False, True, True], dtype="boolean")
    out = _write(tmp_path / "f", verdicts, None)
    # Make it what version 1 wrote: no score column, no scale.
    for ext in ("parquet", "csv"):
        (out / f"verdicts.{ext}").unlink()
    verdicts.drop(columns="score").to_parquet(out / "verdicts.parquet", index=False)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["schema_version"] = 1
    del manifest["scale"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    results = load_run(out)
    assert "score" not in results.verdicts.columns
    assert results.manifest.scale is None
    assert results.system_rates()["rate"].tolist() == [1.0, 0.5]


@pytest.mark.parametrize(("scores", "scale", "message"), [
    ([7, 11, 3, 1], ORDINAL, "expected a whole number from 1 to 10 (the ordinal scale), got 11"),
    ([7, 6.5, 3, 1], ORDINAL, "got 6.5"),
    ([0.2, -0.1, 0.5, 1], {"type": "continuous", "min": 0, "max": 1}, "got -0.1"),
    ([0.2, np.inf, 0.5, 1], {"type": "pairwise", "min": 0, "max": 1, "reference": "b"}, "got inf"),
    ([0.2, 0.3, 0.5, 1], None, "declares no scale"),
])
def test_a_score_off_the_declared_scale_is_refused_naming_file_and_field(tmp_path, scores, scale, message):
    out = _write(tmp_path / "f", _verdicts(scores), scale)
    with pytest.raises(InputError) as caught:
        load_run(out)
    text = str(caught.value)
    assert "\n" not in text and "verdicts.parquet: score:" in text and message in text


def test_a_text_score_and_a_scale_that_is_no_range_are_refused(tmp_path):
    out = _write(tmp_path / "f", _verdicts([1, 2, 3, 4]), ORDINAL)
    frame = pd.read_parquet(out / "verdicts.parquet")
    frame["score"] = ["1", "two", "3", "4"]
    frame.to_parquet(out / "verdicts.parquet", index=False)
    with pytest.raises(InputError, match=r"verdicts.parquet: score: expected a number, got 'two'"):
        load_run(out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["scale"] = {"type": "ordinal", "min": 5, "max": 5}
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"manifest.json: .*expected a number above scale.min"):
        load_run(out)
