"""The tests' CLI runner: in this process it behaves as the command does in its own, and leaves no trace."""

from __future__ import annotations

import os
import warnings

import pytest
from cli_runner import REPO, run_cli, spawn_cli

DEMO = REPO / "specs" / "demo.yaml"


@pytest.mark.parametrize("argv", [
    ["validate", DEMO],
    ["expand", DEMO, "--format", "csv"],
    ["validate", "nope.yaml"],
    ["run", DEMO, "--jobs", "0"],
    ["--bogus"],
    ["--version"],
], ids=["validate", "expand", "missing-file", "bad-flag-value", "unknown-flag", "version"])
def test_in_process_and_own_process_runs_agree(argv, tmp_path):
    here = run_cli(argv, cwd=tmp_path)
    there = spawn_cli(argv, cwd=tmp_path, timeout=120)
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr)
    assert list(tmp_path.iterdir()) == []


def test_a_run_leaves_cwd_environment_and_warning_format_as_they_were(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTIVERSE_STORE", str(tmp_path / "shared"))
    cwd, environment, formatwarning = os.getcwd(), dict(os.environ), warnings.formatwarning
    done = run_cli(["validate", DEMO], cwd=tmp_path, env={"MV_RUNNER_PROBE": "1", "HOME": None})
    done.ok()
    assert os.getcwd() == cwd and dict(os.environ) == environment and warnings.formatwarning is formatwarning


def test_results_unpack_and_check_like_the_cli_contract(tmp_path):
    code, out, err = run_cli(["expand", DEMO, "--format", "xml"], cwd=tmp_path)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--format" in run_cli(["expand", DEMO, "--format", "xml"], cwd=tmp_path).refused("--format")
    with pytest.raises(AssertionError):
        run_cli(["expand", DEMO, "--format", "xml"], cwd=tmp_path).ok()
