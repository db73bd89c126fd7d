"""The CI example (examples/github-actions-gate.yml) runs as written on the simulated world.

The workflow's own ``multiverse`` steps are taken from the file and run in a
fresh folder holding a copy of ``specs/``, as the CI job would after checkout
and install; then the same ``check`` command with a claims file that fails
and one that names an unknown system.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cli_runner import REPO, run_cli
from junit_shape import junit_cases
from readme_blocks import block_environment

WORKFLOW = REPO / "examples" / "github-actions-gate.yml"


def _multiverse_steps() -> list[str]:
    document = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    steps = [s for job in document["jobs"].values() for s in job["steps"]]
    return [s["run"].strip() for s in steps if str(s.get("run", "")).strip().startswith("multiverse ")]


def _in_process(command: str, folder: Path):
    """The workflow's ``multiverse ...`` line as ``run_cli`` runs it: the same argv, exit code and output,
    without a second interpreter importing pandas and the analyses (seconds each on a loaded machine)."""
    return run_cli(shlex.split(command)[1:], cwd=folder)


def _sh(command: str, folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=folder, env=block_environment(),
                          capture_output=True, text=True, timeout=1800, check=False)


def test_the_workflow_runs_the_audit_then_checks_its_claims():
    run, check = _multiverse_steps()
    assert run.startswith("multiverse run ") and "--store" in run
    assert check.startswith("multiverse check ") and "--junit" in check


@pytest.mark.slow
def test_the_workflow_gates_on_the_simulated_world(tmp_path):
    shutil.copytree(REPO / "specs", tmp_path / "specs", ignore=shutil.ignore_patterns(".multiverse"))
    run, check = _multiverse_steps()
    done = _sh(run, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    # Every claim of the example's file holds: exit 0, every test case passed.
    done = _sh(check, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    junit = Path(re.search(r"--junit (\S+)", check).group(1))
    cases = junit_cases(tmp_path / junit)
    assert set(cases) == {"atlas-floor", "atlas-vs-beacon", "beacon-top-three"}
    assert all(c.find("failure") is None and c.find("skipped") is None for c in cases.values())

    claims = re.search(r"--claims (\S+)", check).group(1)
    document = yaml.safe_load((tmp_path / claims).read_text(encoding="utf-8"))
    # A claim the demo breaks: beacon's rate in the primary universe is far above 0.5.
    failing = {**document, "claims": [*document["claims"],
                                      {"id": "beacon-ceiling", "system": "beacon", "rate": {"at_most": 0.5},
                                       "in": "primary"}]}
    (tmp_path / "failing.yaml").write_text(yaml.safe_dump(failing), encoding="utf-8")
    # The workflow's own lines ran as its shell runs them, above; the same check with other claims
    # files needs no shell of its own.
    done = _in_process(check.replace(claims, "failing.yaml"), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    cases = junit_cases(tmp_path / junit)
    assert cases["beacon-ceiling"].find("failure").get("type") == "failed"
    assert all(cases[c].find("failure") is None for c in ("atlas-floor", "atlas-vs-beacon", "beacon-top-three"))

    (junit_file := tmp_path / junit).unlink()
    unknown = {**document, "claims": [*document["claims"],
                                      {"id": "ghost", "system": "zephyr", "rate": {"at_least": 0.5}, "in": "all"}]}
    (tmp_path / "unknown.yaml").write_text(yaml.safe_dump(unknown), encoding="utf-8")
    done = _in_process(check.replace(claims, "unknown.yaml"), tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: unknown.yaml: claim ghost: system: expected one of the systems atlas, beacon, cobalt, delta, "
        "got 'zephyr'"]
    assert not junit_file.exists()
