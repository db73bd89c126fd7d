"""mv.power: the design power of a spec, before anything runs, is the typed analysis Results.power gives a run."""

from __future__ import annotations

import json

import pandas as pd
from cli_runner import REPO, run_cli

import multiverse as mv
from multiverse.results import Analysis, PowerDocument


def test_a_specs_power_is_the_typed_analysis_a_runs_power_is(sim_run):
    spec = mv.load_spec(REPO / "specs" / "demo.yaml")
    planned = mv.power(spec)
    assert isinstance(planned, Analysis) and isinstance(planned.document, PowerDocument)
    assert planned.document.comparisons[0].n_per_group == 36  # the demo's transcripts per system and universe
    assert len(planned.frame) == len(planned.document.comparisons)
    assert list(planned.frame["n_per_group"]) == [c.n_per_group for c in planned.document.comparisons]
    ran = mv.load_run(sim_run.out).power()
    assert type(ran) is type(planned) and ran.schema is planned.schema
    assert set(planned.to_dict()) == set(ran.to_dict())  # the same document, at other cases


def test_planned_human_labels_ride_along_and_the_command_prints_the_document(tmp_path):
    spec = mv.load_spec(REPO / "specs" / "demo.yaml")
    planned = mv.power(spec, human=30)
    assert planned.source["human"]["labels"] == 30
    done = run_cli(["power", REPO / "specs" / "demo.yaml", "--json", "--human", "30"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(planned.to_dict()))
    shown = run_cli(["power", REPO / "specs" / "demo.yaml"], cwd=tmp_path)
    assert shown.returncode == 0 and "36 cases per system per universe" in shown.stdout
    assert isinstance(planned.frame, pd.DataFrame)
