"""A run folder rewritten by another writer reads the same, or is refused (issue 42: tables by position).

pandas stores a frame's index with it: in parquet as extra columns or
metadata, in CSV as leading columns. Each table of the session's run is
rewritten here by pandas with every kind of index (a RangeIndex not from 0,
integers shuffled, text, a MultiIndex, a named level), with its rows or its
columns reordered, by pyarrow directly and by Polars when it is installed;
every analysis of the rewritten folder must equal the original's (rows
compared as sets where the order of first appearance may change), and a
table whose index is ambiguous is refused in one line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from pandas.testing import assert_frame_equal

from multiverse import load_run
from multiverse.errors import InputError
from multiverse.tables import read_table

TABLES = ("verdicts", "criteria", "rates")
KEYS = {"verdicts": ["judgment_key", "system", "universe_id"], "criteria": ["judgment_key", "sample", "criterion"],
        "rates": ["universe_id", "system", "subgroup"]}


def _shuffled(n: int) -> np.ndarray:
    return np.random.default_rng(7).permutation(n)


# Each rewrite: (name, frame -> frame written by pandas with its index). The rows stay in their order.
INDEXES = {
    "range_from_5": lambda f: f.set_axis(pd.RangeIndex(5, 5 + len(f))),
    "range_step_2": lambda f: f.set_axis(pd.RangeIndex(0, 2 * len(f), 2)),
    "shuffled_integers": lambda f: f.set_axis(_shuffled(len(f)) + 3),
    "repeated_integers": lambda f: f.set_axis(np.zeros(len(f), dtype=int)),
    "text": lambda f: f.set_axis([f"row{i}" for i in _shuffled(len(f))]),
    "multi": lambda f: f.set_axis(pd.MultiIndex.from_arrays([_shuffled(len(f)), np.arange(len(f)) % 3])),
    "named_copy_of_a_column": lambda f: f.set_axis(pd.Index(f[f.columns[0]].to_numpy(), name="row_name")),
    "named_level_of_data": lambda f: f.set_index(f.columns[0]),
    "named_levels_of_data": lambda f: f.set_index(list(f.columns[:2])),
}
# A named level that is data comes back as a column; one that only numbers rows is an extra column.
EXTRA_COLUMN = {"named_copy_of_a_column"}


def _copy(run: Path, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    shutil.copytree(run, out, ignore=shutil.ignore_patterns(".index"))
    return out


def _original(run: Path, table: str) -> pd.DataFrame:
    return pd.read_parquet(run / f"{table}.parquet")


def _rewrite_parquet(folder: Path, make) -> None:
    for table in TABLES:
        make(_original(folder, table)).to_parquet(folder / f"{table}.parquet")
        (folder / f"{table}.csv").unlink()  # the parquet copy is the one read: no stale twin beside it


def _rewrite_csv(folder: Path, make) -> None:
    for table in TABLES:
        frame = _original(folder, table)
        (folder / f"{table}.parquet").unlink()
        make(frame).to_csv(folder / f"{table}.csv")


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    frame = frame.copy()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(object)
    keys = [k for k in keys if k in frame.columns]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)[sorted(frame.columns)]


def _analyses(folder: Path) -> dict:
    """What the analyses say about a folder, in a form that does not depend on the order rows were stored in."""
    results = load_run(folder)
    curve = results.curve(boot=200, seed=3)
    return {
        "verdicts": _sorted(results.verdicts.drop(columns=[c for c in ("contribution",) if c in results.verdicts]),
                            KEYS["verdicts"]),
        "rates": _sorted(results.rate_table(), KEYS["rates"]),
        "system_rates": _sorted(results.system_rates(), ["universe_id", "system"]),
        "curve": _sorted(curve.frame, ["universe_id", "system"]),
        "tests": json.dumps([{k: v for k, v in t.items() if k != "universes"} for t in curve.source["tests"]],
                            sort_keys=True, default=str),
        # The criteria table's door: agreement reads the labels per criterion.
        "agreement": json.dumps(results.agreement("judge").source["pairs"], sort_keys=True, default=str),
        # The pairs as unordered pairs: agreement orients a pair by the order rows first name its options.
        "agreement_values": json.dumps(sorted((sorted([p["a"], p["b"]]), p["n"], round(p["cohen_kappa"], 12),
                                               round(abs(p["bias"]), 12), round(p["percent"], 12))
                                              for p in results.agreement("judge").source["pairs"])),
        "variance": json.dumps(results.variance().source["terms"], sort_keys=True, default=str),
        # The variance decomposition itself; its noise floor resamples cases in the order rows first name them.
        "variance_shares": json.dumps([{k: t[k] for k in ("term", "share", "sum_sq", "df")}
                                       for t in results.variance().source["terms"]], sort_keys=True, default=str),
    }


def _same(found: dict, expected: dict, extra: set[str] = frozenset(), *, reordered: bool = False) -> None:
    for name in ("verdicts", "rates", "system_rates", "curve"):
        have = found[name].drop(columns=[c for c in extra if c in found[name].columns])
        assert_frame_equal(have, expected[name], check_dtype=False, check_categorical=False, obj=name)
    assert found["tests"] == expected["tests"]
    assert found["agreement_values"] == expected["agreement_values"]
    assert found["variance_shares"] == expected["variance_shares"]
    if not reordered:
        assert found["agreement"] == expected["agreement"]
        assert found["variance"] == expected["variance"]


@pytest.fixture(scope="module")
def expected(sim_run) -> dict:
    return _analyses(sim_run.out)


@pytest.mark.parametrize("index", sorted(INDEXES))
@pytest.mark.parametrize("writer", ["parquet", "csv"])
def test_a_folder_rewritten_by_pandas_with_any_index_gives_the_same_analyses(sim_run, tmp_path, expected, index, writer):
    folder = _copy(sim_run.out, tmp_path, "rewritten")
    (_rewrite_parquet if writer == "parquet" else _rewrite_csv)(folder, INDEXES[index])
    extra = {"row_name"} if index in EXTRA_COLUMN else set()
    _same(_analyses(folder), expected, extra)


def test_a_folder_with_its_rows_and_columns_reordered_gives_the_same_analyses(sim_run, tmp_path, expected):
    folder = _copy(sim_run.out, tmp_path, "reordered")
    for table in TABLES:
        frame = _original(folder, table)
        frame = frame.iloc[::-1][list(reversed(frame.columns))]  # the stored index comes along, reversed too
        frame.to_parquet(folder / f"{table}.parquet")
        (folder / f"{table}.csv").unlink()
    _same(_analyses(folder), expected, reordered=True)


def test_a_folder_written_by_pyarrow_directly_gives_the_same_analyses(sim_run, tmp_path, expected):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = _copy(sim_run.out, tmp_path, "arrow")
    for table in TABLES:
        frame = _original(folder, table)
        # from_pandas keeps a non-default index as pandas does; without pandas metadata nothing is an index.
        shuffled = frame.set_axis(_shuffled(len(frame)))
        pq.write_table(pa.Table.from_pandas(shuffled, preserve_index=True), folder / f"{table}.parquet")
        (folder / f"{table}.csv").unlink()
    _same(_analyses(folder), expected)
    for table in TABLES:
        plain = pa.Table.from_pandas(_original(sim_run.out, table), preserve_index=False).replace_schema_metadata(None)
        pq.write_table(plain, folder / f"{table}.parquet")
    _same(_analyses(folder), expected)


def test_a_folder_written_by_polars_gives_the_same_analyses(sim_run, tmp_path, expected):
    pl = pytest.importorskip("polars")
    folder = _copy(sim_run.out, tmp_path, "polars")
    for table in TABLES:
        pl.from_pandas(_original(folder, table)).write_parquet(folder / f"{table}.parquet")
        (folder / f"{table}.csv").unlink()
    _same(_analyses(folder), expected)


def test_an_index_named_like_a_column_is_refused_in_one_line(sim_run, tmp_path):
    folder = _copy(sim_run.out, tmp_path, "clash")
    frame = _original(folder, "verdicts")
    # The index says "system" too, with other values: which of the two is the system?
    frame.set_axis(pd.Index(frame["system"].to_numpy()[::-1], name="system")).to_parquet(folder / "verdicts.parquet")
    with pytest.raises(InputError) as refused:
        load_run(folder)
    message = str(refused.value)
    assert "\n" not in message and "verdicts.parquet" in message and "'system'" in message and "index" in message
    code, _, err = run_cli(["curve", folder])
    assert code == 2 and "'system'" in err and "Traceback" not in err


def test_a_csv_header_naming_a_column_twice_is_refused(sim_run, tmp_path):
    folder = _copy(sim_run.out, tmp_path, "twice")
    frame = _original(folder, "verdicts")
    (folder / "verdicts.parquet").unlink()
    frame.set_axis(pd.Index(frame["compliant"].to_numpy()[::-1], name="compliant")).to_csv(folder / "verdicts.csv")
    with pytest.raises(InputError, match="'compliant' is named twice"):
        load_run(folder)


def test_diff_of_a_folder_against_its_rewrite_with_a_shuffled_index_finds_no_change(sim_run, tmp_path):
    folder = _copy(sim_run.out, tmp_path, "diffed")
    _rewrite_parquet(folder, INDEXES["shuffled_integers"])
    code, out, err = run_cli(["diff", sim_run.out, folder, "--json"])
    assert code == 0, err
    systems = json.loads(out)["systems"]
    assert len(systems) == 2
    assert all((s["min"], s["max"], s["below_0"], s["above_0"], s["worse"]) == (0.0, 0.0, 0, 0, False) for s in systems)


def test_a_claim_the_data_refute_is_not_held_after_a_rewrite_with_a_shuffled_index(sim_run, tmp_path):
    # The defect's own door: `check` read labels shifted onto other rows and passed a false claim.
    folder = _copy(sim_run.out, tmp_path, "claims")
    rates = load_run(sim_run.out).system_rates()
    lowest = float(rates["rate"].min())
    claims = tmp_path / "claims.yaml"
    bound = min(1.0, lowest + 0.05)
    claims.write_text(yaml.safe_dump({"claims": [{"id": "floor", "system": str(rates["system"].iloc[0]),
                                                  "rate": {"at_least": bound}, "in": "all"}]}))
    before = run_cli(["check", sim_run.out, claims])
    INDEXES["shuffled_integers"](_original(folder, "verdicts")).to_parquet(folder / "verdicts.parquet")
    (folder / "verdicts.csv").unlink()
    after = run_cli(["check", folder, claims])
    assert (after.returncode, after.stdout) == (before.returncode, before.stdout.replace(str(sim_run.out), str(folder)))


def test_read_table_keeps_every_column_by_position(tmp_path):
    frame = pd.DataFrame({"system": ["a", "b", "c", "d"], "n": [1, 2, 3, 4],
                          "compliant": pd.array([True, None, False, True], dtype="boolean")})
    for name, make in INDEXES.items():
        path = tmp_path / f"{name}.parquet"
        made = make(frame)
        made.to_parquet(path)
        for categories in (False, True):
            read = read_table(path, categories=categories)
            got = {c: list(read[c].astype(object).where(read[c].notna(), None)) for c in frame.columns}
            assert got == {c: list(frame[c].astype(object).where(frame[c].notna(), None)) for c in frame.columns}, name
            assert isinstance(read.index, pd.RangeIndex) and read.index.start == 0, name
