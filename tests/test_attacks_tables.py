"""Attacks through a run folder's tables: a small parquet file that declares more rows than memory holds.

Its size on disk is no guard: run-length encoding lets a file of about a
megabyte declare 600 million rows, which pandas would then build. The row
count in the footer is read first and refused past ``MAX_TABLE_ROWS``.
"""

from __future__ import annotations

import resource
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_runner import run_cli

from multiverse.errors import InputError
from multiverse.results._load import load_run
from multiverse.tables._tables import MAX_TABLE_ROWS, read_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """A one-megabyte verdicts table that declares 600 million rows."""
    path = tmp_path_factory.mktemp("bomb") / "verdicts.parquet"
    rows = MAX_TABLE_ROWS + 100_000_000
    pq.write_table(pa.table({"compliant": pa.nulls(rows, pa.bool_())}), path)
    assert path.stat().st_size < 4 * 2**20 and pq.ParquetFile(path).metadata.num_rows == rows
    return path


@pytest.mark.parametrize("categories", [False, True])
def test_a_table_declaring_too_many_rows_is_refused_before_it_is_decoded(bomb, categories):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match=r"verdicts\.parquet: cannot be read as a table \(it declares 600,000,000 rows"):
        read_table(bomb, categories=categories)
    # Nothing was built: decoding 600 million booleans would take more than 600 MB.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024


def test_a_run_folder_with_such_a_table_is_refused_in_one_line(sim_run, bomb, tmp_path):
    run = Path(shutil.copytree(sim_run.out, tmp_path / "run"))
    shutil.copyfile(bomb, run / "verdicts.parquet")
    with pytest.raises(InputError, match="declares"):
        load_run(run)
    for command in (["curve", run], ["report", run, "--out", tmp_path / "report.html"]):
        run_cli(command).refused("verdicts.parquet", "600,000,000 rows")
    assert not (tmp_path / "report.html").exists() and not (run / "report.html").exists()


def test_a_table_within_the_row_cap_still_reads(tmp_path):
    path = tmp_path / "rates.parquet"
    pq.write_table(pa.table({"system": ["atlas", "beacon"], "rate": [0.5, 0.25]}), path)
    assert read_table(path)["rate"].tolist() == [0.5, 0.25]
    assert read_table(path, categories=True)["system"].astype(str).tolist() == ["atlas", "beacon"]
