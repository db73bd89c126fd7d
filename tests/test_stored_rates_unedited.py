"""The converse of ``test_stored_rates``: for every kind of folder the toolkit writes (runs with labels, intervals
and estimators per universe, scored runs, every importer), the rates recounted from the verdicts equal the stored
table exactly, so a folder nobody edited shows the numbers it always showed and no note (issue 42)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import REPO, tiny_spec_document

from multiverse.importers import import_lm_eval, import_promptfoo, import_table
from multiverse.results import load_run

_KEYS = ["universe_id", "system", "subgroup"]
_VALUES = ["n", "n_compliant", "rate", "ci_low", "ci_high"]
IMPORTERS = REPO / "tests" / "importers"
ORDINAL = {"type": "ordinal", "min": 1, "max": 10}


def _run(tmp_path: Path, document: dict) -> Path:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    run_cli(["run", tmp_path / "spec.yaml", "--out", tmp_path / "run", "--store", tmp_path / "store", "--quiet"],
            cwd=tmp_path).ok()
    return tmp_path / "run"


def run_labels_per_universe_settings(tmp_path: Path) -> Path:
    # An interval, a level and an estimator per universe, a bootstrap with its seed: each as the writer set it.
    return _run(tmp_path, tiny_spec_document(
        design={"dimensions": [{"name": "behavior"}, {"name": "interaction_condition",
                                                      "levels": ["material_reliance"]}], "cases_per_cell": 8},
        judge={"model": "sim/judge-a", "evidence_standard": "lenient"},
        rollout={"setting": "multi_turn", "max_turns": 2, "seed": 11,
                 "user": {"model": "sim/user-cooperative", "persona": "cooperative"}},
        scoring={"ci": {"method": "bootstrap", "n_boot": 200, "level": 0.9}},
        axes={"estimator": {"pooled": {"scoring.estimator": "pooled"},
                            "balanced": {"scoring.estimator": "cell_balanced", "scoring.ci.method": "wilson"}}}))


def run_scored_with_cuts(tmp_path: Path) -> Path:
    document = tiny_spec_document()
    document["judge"] = {"model": "sim/judge-a", "evidence_standard": "strict", "scale": ORDINAL}
    document["scoring"] = {"estimator": "mean", "cut": 7}
    document["axes"] = {"estimator": {"mean": {"scoring.estimator": "mean"},
                                      "share": {"scoring.estimator": "at_least", "scoring.cut": 6}}}
    return _run(tmp_path, document)


def _table(tmp_path: Path) -> Path:
    rng = np.random.default_rng(4)
    rows = [{"model": m, "item": f"q{i:02d}", "judge": j, "ok": bool(rng.random() < p),
             "grade": int(rng.integers(1, 11))}
            for m, p in (("atlas", 0.7), ("beacon", 0.4)) for i in range(25) for j in ("a", "b")]
    path = tmp_path / "table.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def table_labels_bootstrap(tmp_path: Path) -> Path:
    import_table(_table(tmp_path), system="model", item="item", label="ok", axes=["judge"], ci="bootstrap",
                 out_dir=tmp_path / "out")
    return tmp_path / "out"


def table_scores_with_cuts(tmp_path: Path) -> Path:
    import_table(_table(tmp_path), system="model", item="item", score="grade", scale=(1, 10), cuts=[6, 7],
                 axes=["judge"], out_dir=tmp_path / "out")
    return tmp_path / "out"


def table_pairwise(tmp_path: Path) -> Path:
    run_cli(["import", "table", REPO / "analyses" / "data" / "pairwise_orders.csv", "--system", "model", "--item",
             "question", "--verdict", "verdict", "--reference", "baseline", "--order", "order", "--axis", "judge",
             "--combine", "agree", "--combine", "mean", "--out", tmp_path / "out"]).ok()
    return tmp_path / "out"


def inspect_logs(tmp_path: Path) -> Path:
    pytest.importorskip("inspect_ai")
    from multiverse.importers import import_inspect

    logs = IMPORTERS / "inspect_logs"
    import_inspect([logs / "grader-a.eval", logs / "grader-b.eval"], tmp_path / "out", factors=["topic"])
    return tmp_path / "out"


def promptfoo_results(tmp_path: Path) -> Path:
    files = IMPORTERS / "promptfoo_results"
    import_promptfoo([files / "grader-a.json", files / "grader-b.json"], tmp_path / "out", factors=["topic"])
    return tmp_path / "out"


def lm_eval_results(tmp_path: Path) -> Path:
    import_lm_eval(IMPORTERS / "lm_eval_results", tmp_path / "out", factors=["topic"])
    return tmp_path / "out"


FOLDERS = [run_labels_per_universe_settings, run_scored_with_cuts, table_labels_bootstrap, table_scores_with_cuts,
           table_pairwise, inspect_logs, promptfoo_results, lm_eval_results]


def _keyed(table: pd.DataFrame) -> pd.DataFrame:
    table = table.assign(**{k: table[k].astype(str) for k in _KEYS})
    return table.set_index(_KEYS)[_VALUES].astype(float).sort_index()


def test_the_session_run_recounts_to_its_stored_rates(sim_run):
    results = load_run(sim_run.out)
    assert results.rates_note() is None
    assert results.rates_note(full=False) is None
    pd.testing.assert_frame_equal(_keyed(results.rate_table()), _keyed(results.rates), check_exact=True)


@pytest.mark.parametrize("write", FOLDERS, ids=[f.__name__ for f in FOLDERS])
def test_every_folder_the_toolkit_writes_recounts_to_its_stored_rates_exactly(write, tmp_path):
    results = load_run(write(tmp_path))
    assert results.rates is not None and len(results.rates)
    assert results.rates_note() is None
    assert results.rates_note(full=False) is None  # check's and diff's count of the overall rows
    # Exactly: the same function on the same rows with the same settings (rows, n, counts, rates, intervals).
    pd.testing.assert_frame_equal(_keyed(results.rate_table()), _keyed(results.rates), check_exact=True)
