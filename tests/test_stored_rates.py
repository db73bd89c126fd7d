"""Every door that shows rates shows the verdicts' rates: a stored rates table is output only (issue 42).

A run or import folder's ``rates.parquet``/``rates.csv`` is what the writer counted from ``verdicts``. A folder
edited with pandas afterwards (filtered, a label flipped, rows re-ordered and re-indexed, the rates table deleted
or missing a column) must show the recounted rates at every door (the API's rates table, the report's primary
table, the explorer, calibrate's figure, check, diff), and say once, in words, that the stored table is stale.
The converse: for every kind of folder the toolkit writes, the recount equals the stored table exactly, so nothing
changes for a folder nobody edited.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import modified_wilson, sim_run_document

import multiverse as mv
from multiverse.explorer import document_from_run
from multiverse.gate import diff

_KEYS = ["universe_id", "system", "subgroup"]
_VALUES = ["n", "n_compliant", "rate", "ci_low", "ci_high"]


def _tables(folder: Path, name: str) -> list[Path]:
    return [p for p in (folder / f"{name}.parquet", folder / f"{name}.csv") if p.exists()]


def _rewrite(folder: Path, name: str, frame: pd.DataFrame) -> None:
    # As a user would: every copy of the table rewritten by pandas (its index too, when it is not a range).
    for path in _tables(folder, name):
        frame.to_parquet(path) if path.suffix == ".parquet" else frame.to_csv(path, index=False)
    shutil.rmtree(folder / ".index", ignore_errors=True)


def _filtered(folder: Path) -> None:
    v = pd.read_parquet(folder / "verdicts.parquet")
    _rewrite(folder, "verdicts", v[~v["case_id"].isin(sorted(v["case_id"].unique())[:2])])


def _flipped(folder: Path) -> None:
    v = pd.read_parquet(folder / "verdicts.parquet")
    at = int(np.flatnonzero(((v["status"] == "ok") & v["compliant"].notna()).to_numpy())[0])
    v.loc[v.index[at], "compliant"] = not bool(v["compliant"].iloc[at])
    _rewrite(folder, "verdicts", v)


def _reordered(folder: Path) -> None:
    v = pd.read_parquet(folder / "verdicts.parquet")
    _rewrite(folder, "verdicts", v.sample(frac=1.0, random_state=3).reset_index(drop=True).iloc[::-1])


def _rates_deleted(folder: Path) -> None:
    for path in _tables(folder, "rates"):
        path.unlink()


def _rates_without_ci_low(folder: Path) -> None:
    _rewrite(folder, "rates", pd.read_parquet(folder / "rates.parquet").drop(columns="ci_low"))


# edit -> whether the stored table (if any is left) then disagrees with the verdicts.
EDITS = {"filtered": (_filtered, True), "flipped": (_flipped, True), "reordered": (_reordered, False),
         "rates deleted": (_rates_deleted, False), "rates without ci_low": (_rates_without_ci_low, True)}


def _reference(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The overall rates recounted by hand: ok rows, compliant ones, the modified Wilson interval."""
    ok = verdicts[verdicts["status"] == "ok"]
    counted = ok.groupby(["universe_id", "system"], observed=True)["compliant"].agg(
        n="size", n_compliant=lambda c: int(c.astype(bool).sum())).reset_index()
    low, high = modified_wilson(counted["n_compliant"], counted["n"])
    return counted.assign(rate=counted["n_compliant"] / counted["n"], ci_low=low, ci_high=high,
                          universe_id=counted["universe_id"].astype(str), system=counted["system"].astype(str))


def _assert_is_reference(shown: pd.DataFrame, folder: Path) -> None:
    reference = _reference(pd.read_parquet(folder / "verdicts.parquet")).set_index(["universe_id", "system"])
    shown = shown.assign(universe_id=shown["universe_id"].astype(str), system=shown["system"].astype(str))
    shown = shown.set_index(["universe_id", "system"]).loc[reference.index]
    for column in _VALUES:
        assert np.allclose(shown[column].astype(float), reference[column].astype(float), rtol=0, atol=1e-12), column


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """A run of the session's design with 14 cases, so calibrate has its 10 labels per system after a filter."""
    root = tmp_path_factory.mktemp("rates_run")
    document = sim_run_document()
    document["design"]["cases_per_cell"] = 7
    (root / "spec.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    run_cli(["run", root / "spec.yaml", "--out", root / "run", "--store", root / "store", "--quiet"], cwd=root).ok()
    return root / "run"


@pytest.fixture(params=list(EDITS))
def edited(request, written, tmp_path) -> tuple[Path, bool]:
    folder = tmp_path / "edited"
    shutil.copytree(written, folder, ignore=shutil.ignore_patterns(".index", "report.html"))
    edit, stale = EDITS[request.param]
    edit(folder)
    return folder, stale


def test_the_api_rates_table_is_the_verdicts_and_a_stale_one_is_named(edited):
    folder, stale = edited
    results = mv.load_run(folder)
    rates = results.rate_table()
    _assert_is_reference(rates[rates["subgroup"] == "all"], folder)
    note = results.rates_note()
    if stale:
        assert note is not None and re.match(r"rates\.(parquet|csv) does not match verdicts\.parquet \(", note), note
        assert note.endswith("the rates shown are recomputed from verdicts.parquet")
    else:
        assert note is None


def test_the_report_and_the_explorer_show_the_verdicts_rates(edited):
    folder, stale = edited
    done = run_cli(["report", folder, "--out", folder / "r.html", "--no-tests", "--quiet"])
    done.ok()
    assert ("does not match verdicts.parquet" in done.stderr) is stale
    page = (folder / "r.html").read_text(encoding="utf-8")
    assert ("Stale rates table: rates." in page) is stale
    results = mv.load_run(folder)
    primary = _reference(pd.read_parquet(folder / "verdicts.parquet"))
    primary = primary[primary["universe_id"] == results.primary]
    # The primary table's rows: system, n, counted, rate, interval (the page's numbers, as it prints them).
    section = page[page.index('id="primary"'):]
    section = section[:section.index("</section>")]
    for row in primary.itertuples():
        assert re.search(rf"<td>{re.escape(row.system)}</td><td[^>]*>{row.n}</td><td[^>]*>{row.n_compliant}</td>",
                         section), (row.system, row.n)
    document = document_from_run(folder)
    columns = document["rates"]
    universes, systems = document["universes"], document["systems"]
    shown = pd.DataFrame({
        "universe_id": [universes["id"][i] for i in columns["universe"]],
        "system": [systems[i] for i in columns["system"]],
        "n": columns["n"], "n_compliant": columns["k"], "rate": columns["rate"], "ci_low": columns["low"],
        "ci_high": columns["high"]})
    reference = _reference(pd.read_parquet(folder / "verdicts.parquet")).set_index(["universe_id", "system"])
    shown = shown.set_index(["universe_id", "system"]).loc[reference.index]
    assert (shown["n"].to_numpy() == reference["n"].to_numpy()).all()
    assert (shown["n_compliant"].to_numpy() == reference["n_compliant"].to_numpy()).all()
    # The page rounds its numbers for size: to its own precision.
    assert np.allclose(shown["ci_low"].astype(float), reference["ci_low"], atol=1e-3)


def test_calibrate_draws_the_verdicts_rates_and_check_and_diff_decide_on_them(edited, tmp_path):
    folder, stale = edited
    results = mv.load_run(folder)
    verdicts = results.verdicts
    keys = verdicts[["system", "case_id"]].drop_duplicates().reset_index(drop=True)
    keys["compliant"] = np.random.default_rng(0).random(len(keys)) < 0.6
    keys.to_csv(tmp_path / "labels.csv", index=False)
    done = run_cli(["calibrate", folder, "--human", tmp_path / "labels.csv", "--figure", tmp_path / "c.png"])
    done.ok()  # a rates table without ci_low was a KeyError traceback here
    assert ("does not match verdicts.parquet" in done.stderr) is stale
    assert (tmp_path / "c.png").stat().st_size > 0

    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump({"claims": [{"id": "floor", "system": "atlas", "rate": {"at_least": 0.01},
                                                  "in": "all"}]}))
    result = mv.check(folder, claims)
    reference = _reference(pd.read_parquet(folder / "verdicts.parquet"))
    atlas = reference[reference["system"] == "atlas"]["rate"]
    outcome = result.outcomes[0]
    assert outcome.estimate_low == pytest.approx(atlas.min(), abs=1e-12)
    assert outcome.estimate_high == pytest.approx(atlas.max(), abs=1e-12)
    assert any("does not match" in n for n in result.notes) is stale
    printed = json.loads(run_cli(["check", folder, "--claims", claims, "--json"]).ok())
    assert any("does not match" in n for n in printed["notes"]) is stale

    compared = diff(folder, folder)
    assert any("does not match" in n for n in compared.notes) is stale
