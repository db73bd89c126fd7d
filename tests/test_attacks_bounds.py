"""Attacks on the size of what is read (issue 45): every file a user hands a command, as an endless
device, a pipe nobody writes, and a file far past its cap (sparse: no disk spent).

Readers: the claims file (``check --claims``), the human labels (``calibrate --human``, ``curve --human``),
the tables and logs of every importer (CSV, parquet, JSONL, Inspect, promptfoo), and the spec. Whatever
the reader, the promise: one line naming the file, exit 2, nothing written, and no hang (reaching the
asserts is the test: a reader that opened the pipe or read the device would block or fill memory).
The spec and a CSV table as a pipe or /dev/zero are tests/test_attacks_inputs.py's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli

GIB = 1 << 30


def _hostile(path: Path, kind: str) -> Path:
    if kind == "endless":
        path.symlink_to("/dev/zero")
    elif kind == "pipe":
        os.mkfifo(path)  # nobody ever writes: a reader that opens it blocks for good
    else:
        with open(path, "wb") as sparse:
            sparse.truncate(3 * GIB)  # 3 GiB that cost nothing on disk, and would to read
    return path


def _one_line(done, *fragments: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


KINDS = ["endless", "pipe", "huge"]


@pytest.fixture
def run_copy(sim_run, tmp_path) -> Path:
    return Path(shutil.copytree(sim_run.out, tmp_path / "run"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_claims_file_past_any_size_is_one_line(run_copy, tmp_path, kind):
    claims = _hostile(tmp_path / "claims.yaml", kind)
    done = run_cli(["check", run_copy, "--claims", claims, "--junit", tmp_path / "junit.xml"], cwd=tmp_path)
    _one_line(done, "claims.yaml")
    assert not (tmp_path / "junit.xml").exists()


@pytest.mark.parametrize("command", ["calibrate", "curve"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_labels_file_past_any_size_is_one_line(run_copy, tmp_path, kind, command):
    human = _hostile(tmp_path / "labels.csv", kind)
    done = run_cli([command, run_copy, "--human", human], cwd=tmp_path)
    _one_line(done, "labels.csv")


@pytest.mark.parametrize(("importer", "name"), [
    (["table", "--system", "s", "--item", "i", "--label", "l"], "labels.csv"),
    (["table", "--system", "s", "--item", "i", "--label", "l"], "labels.parquet"),
    (["table", "--system", "s", "--item", "i", "--label", "l"], "labels.jsonl"),
    (["promptfoo"], "results.json"),
    (["inspect"], "log.json"),
    (["inspect"], "log.eval"),
])
@pytest.mark.parametrize("kind", KINDS)
def test_an_import_input_past_any_size_is_one_line(tmp_path, importer, name, kind):
    source = _hostile(tmp_path / name, kind)
    kind_, *flags = importer
    done = run_cli(["import", kind_, source, *flags, "--out", tmp_path / "out"], cwd=tmp_path)
    _one_line(done, name)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["validate"], ["plan"]])
@pytest.mark.parametrize("kind", ["huge"])
def test_a_spec_past_any_size_is_one_line(tmp_path, kind, command):
    spec = _hostile(tmp_path / "spec.yaml", kind)
    done = run_cli([*command, spec], cwd=tmp_path)
    _one_line(done, "spec.yaml")
