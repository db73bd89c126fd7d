"""Every analysis gives the same result on a run as ``load_run`` reads it (categorical text columns,
int32 codes inside) as on the plain text tables, and agrees with a straightforward reference.

Random small grids with what makes the fast paths differ from the obvious ones: an exclude rule
(a missing block of universes), replicates, missing labels and failed rows, a system that some
universes lack, and text columns that stay text (mostly distinct) beside ones that become
categoricals.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from multiverse.analysis import (
    agreement,
    case_matrix,
    compute_rates,
    difference_curve,
    joint_difference_test,
    joint_rate_test,
    ranking,
    spec_curve,
    variance,
)
from multiverse.results._load import load_run
from multiverse.tables._tables import read_table, write_table

AXES = ["setting", "judge", "scoring"]


def _grid(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    replicates = int(rng.integers(1, 3))
    cases = [f"case.{c:02d}" for c in range(int(rng.integers(6, 10)))]
    rows = []
    for setting, judge, scoring in itertools.product(["s0", "s1"], ["j0", "j1", "j2"], ["strict", "lenient"]):
        if setting == "s1" and judge == "j2":
            continue  # an exclude rule
        universe = f"u-{setting}-{judge}-{scoring}"
        systems = ["alpha", "beta", "gamma"] if judge != "j1" or setting == "s0" else ["alpha", "beta"]
        for system, case, replicate in itertools.product(systems, cases, range(replicates)):
            transcript = f"t-{setting}-{system}-{case}-{replicate}"
            judgment = f"{transcript}-{judge}"
            p = {"alpha": 0.3, "beta": 0.6, "gamma": 0.8}[system] + (0.1 if judge == "j0" else 0.0)
            label = bool(rng.random() < p) or (scoring == "lenient" and rng.random() < 0.2)
            status = rng.choice(["ok", "ok", "ok", "ok", "ok", "ok", "excluded", "judge_failed"])
            rows.append({"universe_id": universe, "setting": setting, "judge": judge, "scoring": scoring,
                         "system": system, "case_id": case, "behavior": case[-1:],
                         "replicate": replicate, "transcript_key": transcript, "judgment_key": judgment,
                         "status": status, "reason": "" if status == "ok" else f"because {status}",
                         "compliant": label if status == "ok" else None})
    verdicts = pd.DataFrame(rows)
    verdicts["compliant"] = verdicts["compliant"].astype("boolean")
    missing = rng.random(len(verdicts)) < 0.03  # ok rows without a label do not count either
    verdicts.loc[missing, "compliant"] = pd.NA
    judged = verdicts[verdicts["status"].isin(["ok", "excluded"])].drop_duplicates("judgment_key")
    criteria = pd.DataFrame([
        {"judgment_key": key, "sample": 0, "criterion": name, "permissible": name == "keeps_limits",
         "applicable": bool(rng.random() < 0.8), "compliant": bool(rng.random() < 0.7),
         "rationale": f"why {key} {name}"}
        for key in judged["judgment_key"] for name in ("keeps_limits", "cites_sources")])  # not sorted
    criteria["compliant"] = criteria["compliant"].astype("boolean").where(criteria["applicable"])
    return verdicts, criteria


def _analyses(verdicts: pd.DataFrame, criteria: pd.DataFrame) -> dict:
    m = case_matrix(verdicts, axes=AXES)
    primary = m.universes["universe_id"].iloc[0]
    return {
        "rates": compute_rates(verdicts, axes=AXES, factors=["behavior"]),
        "rates_cell_balanced": compute_rates(verdicts, axes=AXES, factors=["behavior"], estimator="cell_balanced"),
        "rates_bootstrap": compute_rates(verdicts, axes=AXES, factors=["behavior"], ci="bootstrap", n_boot=50),
        "matrix": (m.universes, m.systems, list(m.cases), m.compliant, m.included),
        "curve": spec_curve(m, axes=AXES, primary=primary),
        "difference": difference_curve(m, axes=AXES, a="beta", b="alpha"),
        "rate_test": joint_rate_test(m, system="alpha", threshold=0.5, boot=100),
        "difference_test": joint_difference_test(m, a="beta", b="alpha", boot=100),
        "agreement": agreement(verdicts, axes=AXES, axis="judge", criteria=criteria),
        "ranking": ranking(verdicts, axes=AXES, primary=primary, bootstrap=100),
        "variance": variance(verdicts, axes=AXES, resamples=50),
    }


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    text = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)
            or pd.api.types.is_string_dtype(frame[c].dtype)]
    return frame.reset_index(drop=True).astype({c: object for c in text})


def _assert_same(a, b, where: str = "") -> None:
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        _assert_same(vars(a), vars(b), where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, pd.DataFrame):
        assert_frame_equal(_plain(a), _plain(b), check_dtype=False, rtol=1e-9, obj=where)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-9, equal_nan=True, err_msg=where)
    elif isinstance(a, float) and isinstance(b, float) and np.isnan(a):
        assert np.isnan(b), where
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), where
    else:
        assert a == b, where


@pytest.fixture(scope="module", params=[0, 1, 2])
def loaded(request, tmp_path_factory):
    """(load_run's results, the plain text tables) of one random grid written as a run writes it."""
    verdicts, criteria = _grid(request.param)
    folder = tmp_path_factory.mktemp(f"grid{request.param}")
    write_table(verdicts, folder, "verdicts")
    write_table(criteria, folder, "criteria")
    (folder / "manifest.json").write_text(json.dumps({"axes": AXES, "factors": ["behavior"]}))
    results = load_run(folder)
    plain = (read_table(folder / "verdicts.parquet"), read_table(folder / "criteria.parquet"))
    return results, plain


def test_load_run_gives_categoricals_and_keeps_mostly_distinct_text(loaded):
    results, (verdicts, criteria) = loaded
    v = results.verdicts
    for column in ("universe_id", "setting", "system", "case_id", "status", "reason"):
        assert isinstance(v[column].dtype, pd.CategoricalDtype), column
        assert list(v[column].cat.categories) == sorted(verdicts[column].dropna().unique())
    assert pd.api.types.is_string_dtype(results.criteria["rationale"].dtype)  # every row differs
    assert_frame_equal(_plain(v), _plain(verdicts))
    assert_frame_equal(_plain(results.criteria), _plain(criteria))


def test_every_analysis_is_the_same_on_loaded_and_plain_tables(loaded):
    results, (verdicts, criteria) = loaded
    _assert_same(_analyses(results.verdicts, results.criteria), _analyses(verdicts, criteria))


def test_the_csv_copy_gives_the_same_analyses(loaded, tmp_path):
    results, _ = loaded
    for name in ("verdicts", "criteria"):
        (results.source / f"{name}.parquet").rename(tmp_path / f"{name}.parquet")
    try:
        from_csv = load_run(results.source)
    finally:
        for name in ("verdicts", "criteria"):
            (tmp_path / f"{name}.parquet").rename(results.source / f"{name}.parquet")
    _assert_same(_analyses(from_csv.verdicts, from_csv.criteria), _analyses(results.verdicts, results.criteria))


def test_rates_and_counts_match_a_groupby_reference(loaded):
    results, (verdicts, _) = loaded
    # compute_rates counts every ok row (an ok row without a label as not compliant, as on main);
    # the case matrix, like included_verdicts, counts ok rows with a label.
    ok = verdicts[verdicts["status"] == "ok"].assign(compliant=lambda f: f["compliant"].fillna(False))
    reference = ok.groupby(["universe_id", "system"])["compliant"].agg(n="size", k="sum")
    rates = compute_rates(results.verdicts, axes=AXES, factors=["behavior"])
    overall = rates[rates["subgroup"] == "all"].astype({"universe_id": str, "system": str})
    overall = overall.set_index(["universe_id", "system"]).loc[reference.index]
    assert (overall["n"].to_numpy() == reference["n"].to_numpy()).all()
    assert (overall["n_compliant"].to_numpy() == reference["k"].to_numpy()).all()
    assert overall["rate"].to_numpy() == pytest.approx((reference["k"] / reference["n"]).to_numpy(), rel=1e-12)
    # Universes that lack a system have no row for it.
    assert len(rates[rates["subgroup"] == "all"]) == len(reference)

    m = case_matrix(results.verdicts, axes=AXES)
    counted = verdicts[(verdicts["status"] == "ok") & verdicts["compliant"].notna()]
    cells = counted.groupby(["system", "universe_id", "case_id"])["compliant"].agg(n="size", k="sum")
    u = {uid: i for i, uid in enumerate(m.universes["universe_id"].astype(str))}
    for (system, universe, case), row in cells.iterrows():
        at = (m.systems.index(system), u[universe], m.cases.get_loc(case))
        assert (m.included[at], m.compliant[at]) == (row["n"], row["k"])
    assert m.included.sum() == len(counted)


@pytest.mark.parametrize("seed", [0, 1])
def test_many_row_groups_read_with_categories_as_the_csv_copy_and_the_plain_text(tmp_path, seed):
    """A table of many row groups (each with its own dictionary) decides categorical or text by the
    same exact rule (at most a quarter of the values distinct) as its CSV copy and a plain read, on
    both sides of the boundary, with missing values, empty and non-ASCII text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    rows = 400
    words = np.array(["", "a", "Z", "é", "ab", "zz", "a b", "Ärger", "東京", "b"] + [f"w{i}" for i in range(90)])

    def of(distinct: int) -> pd.Series:
        values = words[rng.integers(0, distinct, rows)]  # most appear, not necessarily all
        values[:distinct] = words[:distinct]
        return pd.Series(rng.permutation(values), dtype=object)

    frame = pd.DataFrame({
        "repeating": of(30),  # row groups of 25 rows: their dictionaries sum to more than 100 values
        "at_the_limit": of(100),  # exactly rows // 4 distinct: categorical
        "one_over": pd.Series([f"v{i % 101}" for i in rng.permutation(rows)], dtype=object),  # 101: text
        "distinct": pd.Series([f"key-{i:05d}" for i in rng.permutation(rows)], dtype=object),
        "number": rng.integers(0, 3, rows),
    })
    frame.loc[rng.random(rows) < 0.05, "repeating"] = None
    path = tmp_path / "table.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=25)
    assert pq.ParquetFile(path).num_row_groups == rows // 25
    frame.to_csv(tmp_path / "table.csv", index=False)

    loaded = read_table(path, categories=True)
    for column in ("repeating", "at_the_limit"):
        assert isinstance(loaded[column].dtype, pd.CategoricalDtype), column
        assert list(loaded[column].cat.categories) == sorted(frame[column].dropna().unique()), column
    for column in ("one_over", "distinct"):
        assert pd.api.types.is_string_dtype(loaded[column].dtype) and not isinstance(loaded[column].dtype, pd.CategoricalDtype)
    assert_frame_equal(_plain(loaded), _plain(read_table(path)))
    from_csv = read_table(tmp_path / "table.csv", categories=True)
    assert [str(t) for t in from_csv.dtypes] == [str(t) for t in loaded.dtypes]
    # The CSV cannot tell an empty cell from a missing one; compare what both can say.
    assert_frame_equal(_plain(loaded).fillna(""), _plain(from_csv).fillna(""))


@pytest.mark.parametrize("block", [1, 7, 64])
def test_rates_a_block_of_rows_at_a_time_equal_rates_at_once(monkeypatch, block):
    """Counts and design effects summed over blocks of rows (and of targets) are the numbers of the
    whole table, for every estimator and interval, with replicates (design effects above 1)."""
    from multiverse.analysis._kernel import _codes

    verdicts, _ = _grid(3)
    verdicts = pd.concat([verdicts, verdicts.assign(replicate=verdicts["replicate"] + 2)], ignore_index=True)
    verdicts = verdicts.sample(frac=1.0, random_state=0).reset_index(drop=True)  # targets' rows interleaved
    settings = [{}, {"estimator": "cell_balanced"}, {"ci": "bootstrap", "n_boot": 50}]
    whole = [compute_rates(verdicts, axes=AXES, factors=["behavior"], **s) for s in settings]
    assert whole[0]["ci_low"].notna().sum() > len(whole[0]) // 2
    monkeypatch.setattr(_codes, "BLOCK_ROWS", block)
    for s, expected in zip(settings, whole):
        assert_frame_equal(compute_rates(verdicts, axes=AXES, factors=["behavior"], **s), expected, check_exact=True)


@pytest.mark.parametrize("block", [None, 7])
@pytest.mark.parametrize("unused", [False, True])
def test_case_matrix_from_column_codes_equals_the_filtered_table(loaded, monkeypatch, block, unused):
    """The case matrix built from the columns' codes (ok rows masked, counts per system) is the one
    built by filtering the table to its ok rows and factorizing them (the path ``systems=`` takes),
    in one block or many, with every case counted or one case with no counted row (its code unused)."""
    from multiverse.analysis._kernel import _codes

    if block is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", block)
    results, (verdicts, _) = loaded
    for table in (results.verdicts, verdicts):
        table = table.copy()
        table.loc[table.index[::11], "status"] = "judge_failed"  # rows that do not count
        if unused:
            table.loc[(table["case_id"] == table["case_id"].iloc[0]).to_numpy(), "status"] = "judge_failed"
        fast = case_matrix(table, axes=AXES)
        systems = sorted(table["system"].astype(str).unique())
        filtered = case_matrix(table, axes=AXES, systems=systems)
        assert (len(fast.cases) < table["case_id"].nunique()) == unused
        assert fast.systems == filtered.systems
        assert list(fast.cases) == list(filtered.cases) and fast.cases.dtype == filtered.cases.dtype
        assert_frame_equal(_plain(fast.universes), _plain(filtered.universes))
        np.testing.assert_array_equal(fast.included, filtered.included)
        np.testing.assert_array_equal(fast.compliant, filtered.compliant)
        assert fast.included.sum() == ((table["status"] == "ok") & table["compliant"].notna()).sum()


@pytest.mark.parametrize("block", [None, 7])
def test_dropped_notes_on_codes_say_what_the_grouping_says(loaded, monkeypatch, block):
    """Nothing dropped: no note; a universe x system, then a whole universe, with no ok verdict: the
    same notes from the loaded (categorical) and the plain table, the rows read in one block or many."""
    from multiverse.analysis import dropped_notes
    from multiverse.analysis._kernel import _codes

    if block is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", block)

    results, (verdicts, _) = loaded
    assert dropped_notes(results.verdicts) == dropped_notes(verdicts) == []
    universe = verdicts["universe_id"].iloc[0]
    for failed in (lambda t: (t["universe_id"] == universe) & (t["system"] == "beta"),
                   lambda t: t["universe_id"] == universe):
        notes = []
        for table in (results.verdicts.copy(), verdicts.copy()):
            table.loc[failed(table).to_numpy(), "status"] = "judge_failed"
            notes.append(dropped_notes(table))
        assert notes[0] == notes[1] and len(notes[0]) == 1 and universe in notes[0][0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_codes_of_a_categorical_are_factorize_codes(seed):
    """rates' codes of a categorical (its own codes relabelled) are pd.factorize's codes of the values:
    order of first appearance, a missing value one more value, unused categories ignored."""
    from multiverse.analysis._kernel import codes as _codes

    rng = np.random.default_rng(seed)
    values = pd.Series(rng.choice(["d", "b", None, "a", "c"], size=500, p=[0.3, 0.3, 0.1, 0.2, 0.1]), dtype=object)
    categorical = values.astype(pd.CategoricalDtype(["a", "b", "c", "d", "unused"]))
    expected, uniques = pd.factorize(values, sort=False, use_na_sentinel=False)
    codes, k = _codes(categorical)
    assert k == len(uniques) and codes.dtype == np.int32
    np.testing.assert_array_equal(codes, expected)


@pytest.mark.parametrize("cells", [1, 20, 1000])
def test_curve_intervals_a_block_of_targets_at_a_time_equal_intervals_at_once(monkeypatch, cells):
    """The curve's intervals (design-effect Wilson, and the bootstrap widening) taken over blocks of
    target rows are those of the whole matrices, with replicates (design effects above 1)."""
    from multiverse.analysis._kernel import _intervals as intervals

    verdicts, _ = _grid(4)
    verdicts = pd.concat([verdicts, verdicts.assign(replicate=verdicts["replicate"] + 2)], ignore_index=True)
    m = case_matrix(verdicts, axes=AXES)
    settings = [{}, {"ci": "bootstrap", "n_boot": 50}, {"level": 0.8}]
    whole = [spec_curve(m, axes=AXES, **s) for s in settings]
    assert whole[0]["ci_low"].notna().all() and (whole[1]["ci_high"] - whole[1]["ci_low"]).gt(0).any()
    monkeypatch.setattr(intervals, "_ROWS_CELLS", cells)
    monkeypatch.setattr(intervals, "_ROW_BLOCK", max(cells // 3, 1))  # row sums in smaller blocks still
    for s, expected in zip(settings, whole):
        assert_frame_equal(spec_curve(m, axes=AXES, **s), expected, check_exact=True)


def test_a_second_load_reads_the_folders_index_and_a_rewritten_table_is_read_again(loaded, tmp_path):
    """The first load keeps what it read as the folder's columnar index (a file per column); the next load reads
    the index and gives the same tables, dtypes and categories included; a table written again (or a stale,
    broken or incomplete index) is read from the table, never paired with the old index; a folder that cannot
    be written goes without one."""
    import shutil

    from multiverse.tables._index import INDEX_FOLDER

    results, _ = loaded
    folder = tmp_path / "run"
    shutil.copytree(results.source, folder, ignore=shutil.ignore_patterns(INDEX_FOLDER))
    first = load_run(folder)
    index = folder / INDEX_FOLDER / "verdicts"
    probe = tmp_path / "probe"
    probe.mkdir()
    assert index.stat().st_mode & 0o777 == probe.stat().st_mode & 0o777  # the umask's, as a team shares a folder
    files = sorted(index.iterdir())
    assert len(files) == len(first.verdicts.columns) and (folder / INDEX_FOLDER / "criteria" / "0.arrow").is_file()
    again = load_run(folder)
    assert_frame_equal(again.verdicts, first.verdicts)
    assert_frame_equal(again.criteria, first.criteria)
    assert again.verdicts.dtypes.equals(first.verdicts.dtypes)
    written = (index / "0.arrow").stat().st_mtime_ns
    load_run(folder)
    assert (index / "0.arrow").stat().st_mtime_ns == written  # read, not written again
    # read where it lies: a frame of the mapped files, which pandas copies before it writes, and which
    # holds no file open (one per column would soon meet the open-files limit)
    descriptors = Path("/proc/self/fd")
    held = len(list(descriptors.iterdir())) if descriptors.is_dir() else None
    mapped = load_run(folder).verdicts
    kept = [load_run(folder) for _ in range(3)]
    assert held is None or len(list(descriptors.iterdir())) == held
    del kept
    codes = mapped["system"].array.codes
    assert not codes.flags.writeable
    mapped.loc[mapped.index[0], "system"] = mapped["system"].iloc[1]
    assert_frame_equal(load_run(folder).verdicts, first.verdicts)

    # the table written again, one label flipped: the index is stale, and the new table is what is read
    changed = read_table(folder / "verdicts.parquet")
    row = int(np.flatnonzero(changed["compliant"].notna().to_numpy())[0])
    changed.loc[row, "compliant"] = not bool(changed.loc[row, "compliant"])
    write_table(changed, folder, "verdicts")
    fresh = load_run(folder)
    assert bool(fresh.verdicts["compliant"].iloc[row]) != bool(first.verdicts["compliant"].iloc[row])
    assert_frame_equal(_plain(fresh.verdicts), _plain(changed))

    # broken, or a column missing, or one file standing in for another: ignored, the table read and the index
    # written again
    for spoil in (lambda: (index / "0.arrow").write_bytes(b"not an arrow file"),
                  lambda: (index / f"{len(files) - 1}.arrow").unlink(),
                  lambda: (index / "1.arrow").write_bytes((index / "2.arrow").read_bytes())):
        spoil()
        assert_frame_equal(load_run(folder).verdicts, fresh.verdicts)
        assert (index / "0.arrow").read_bytes()[:6] == b"ARROW1" and len(list(index.iterdir())) == len(files)

    shutil.rmtree(folder / INDEX_FOLDER)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (folder / INDEX_FOLDER).symlink_to(outside, target_is_directory=True)
    assert_frame_equal(load_run(folder).verdicts, fresh.verdicts)
    assert not list(outside.iterdir())  # never written through a link out of the folder


def test_a_folder_writer_indexes_a_long_table_as_load_run_would_and_drops_an_earlier_index(loaded, tmp_path, monkeypatch):
    """A run's or an import's folder writer keeps the index of a table of at least INDEXED_ROWS rows (the number
    lowered here), the same as the first load_run would write, so even that load reads the index; a shorter table
    gets none, and a folder written again loses the index of its earlier tables."""
    from multiverse.tables import _writer
    from multiverse.tables._index import INDEX_FOLDER

    _, (verdicts, criteria) = loaded
    rates = pd.DataFrame({"universe_id": ["u"], "system": ["s"], "rate": [0.5]})
    monkeypatch.setattr(_writer, "INDEXED_ROWS", len(criteria))
    folder = _writer.write_run_folder(tmp_path / "run", verdicts=verdicts, criteria=criteria, rates=rates,
                                      manifest={"axes": AXES, "factors": ["behavior"]})
    index = folder / INDEX_FOLDER / "verdicts"
    assert (index / "0.arrow").is_file() and (folder / INDEX_FOLDER / "criteria" / "0.arrow").is_file()
    written = (index / "0.arrow").stat().st_mtime_ns
    again = load_run(folder)
    assert (index / "0.arrow").stat().st_mtime_ns == written  # the first load read it
    by_load = tmp_path / "by_load"
    by_load.mkdir()
    for name in ("verdicts.parquet", "criteria.parquet", "manifest.json"):
        (by_load / name).write_bytes((folder / name).read_bytes())
    assert_frame_equal(again.verdicts, load_run(by_load).verdicts)

    monkeypatch.setattr(_writer, "INDEXED_ROWS", len(verdicts) + len(criteria) + 1)
    _writer.write_run_folder(folder, verdicts=verdicts.iloc[:10], criteria=None, rates=rates,
                             manifest={"axes": AXES, "factors": ["behavior"]})
    assert not index.exists() and not (folder / INDEX_FOLDER / "criteria").exists()
    assert len(load_run(folder).verdicts) == 10


def test_case_matrix_from_codes_refuses_two_options_in_a_universe_and_a_missing_id(loaded):
    """On the loaded (categorical) table and the plain one alike: a counted row whose axis option differs from
    its universe's, or a counted row without a universe id, system or case id, is refused in one line; the same rows left
    uncounted (status not ok) are not looked at."""
    from multiverse.errors import InputError

    results, (verdicts, _) = loaded
    for table in (results.verdicts, verdicts):
        row = int(np.flatnonzero(((table["status"] == "ok") & table["compliant"].notna()).to_numpy())[3])
        axis = AXES[0]
        other = next(o for o in table[axis].unique() if o != table[axis].iloc[row])
        bent = _with_value(table, row, axis, other)
        with pytest.raises(InputError, match=f"verdicts: {axis}: expected one option per universe_id"):
            case_matrix(bent, axes=AXES)
        bent.loc[bent.index[row], "status"] = "judge_failed"
        case_matrix(bent, axes=AXES)  # an uncounted row may say anything
        for column in ("universe_id", "system", "case_id"):
            with pytest.raises(InputError, match=f"verdicts: {column}: expected no missing values"):
                case_matrix(_with_value(table, row, column, None), axes=AXES)


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_case_matrix_names_the_axis_whose_option_differs_wherever_the_row_is(loaded, axis, where):
    """The axes are checked together, a block of rows at a time: any one axis bent (to another option or
    to a missing one) at a universe's first counted row, in its middle or at the table's last counted row
    is refused, naming that axis."""
    from multiverse.errors import InputError

    results, (verdicts, _) = loaded
    for table in (results.verdicts, verdicts):
        counted = np.flatnonzero(((table["status"] == "ok") & table["compliant"].notna()).to_numpy())
        row = int({"first": counted[0], "middle": counted[len(counted) // 2], "last": counted[-1]}[where])
        other = next(o for o in table[axis].unique() if o != table[axis].iloc[row])
        for value in (other, None):
            with pytest.raises(InputError, match=f"verdicts: {axis}: expected one option per universe_id"):
                case_matrix(_with_value(table, row, axis, value), axes=AXES)


def _with_value(table: pd.DataFrame, row: int, column: str, value) -> pd.DataFrame:
    """A copy of the table with one cell set, the column keeping its dtype (a categorical stays one)."""
    changed = table.copy()
    changed[column] = changed[column].astype(object)
    changed.loc[changed.index[row], column] = value
    if isinstance(table[column].dtype, pd.CategoricalDtype):
        changed[column] = changed[column].astype(table[column].dtype)
    return changed
