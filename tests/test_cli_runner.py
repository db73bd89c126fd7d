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


def test_the_projects_own_deprecations_are_errors_inside_a_command_as_under_pytest(tmp_path, monkeypatch):
    """run_cli prints a command's warnings as its own process would, except the project's deprecations:
    pyproject.toml's filterwarnings make them errors under pytest, and run_cli reads the same lines."""
    from multiverse import cli

    def deprecated(args) -> int:  # this module's name matches "test_", as multiverse's own modules match theirs
        warnings.warn("an API the project should no longer call", DeprecationWarning, stacklevel=1)
        return 0

    def elsewhere(args) -> int:  # a library's deprecation (module "somelib") stays a printed warning
        warnings.warn_explicit("a library's own deprecation", DeprecationWarning, "somelib.py", 1, module="somelib")
        warnings.warn_explicit("a library's own future change", FutureWarning, "somelib.py", 2, module="somelib")
        return 0

    monkeypatch.setitem(cli.COMMANDS, "validate", deprecated)
    with pytest.raises(DeprecationWarning, match="no longer call"):
        run_cli(["validate", DEMO], cwd=tmp_path)
    monkeypatch.setitem(cli.COMMANDS, "validate", elsewhere)
    done = run_cli(["validate", DEMO], cwd=tmp_path)
    assert done.returncode == 0
    assert "a library's own deprecation" in done.stderr and "a library's own future change" in done.stderr
