"""Every analysis number is a function of the table's rows as a set, not of their order or layout (issue 42).

A table rewritten by a spreadsheet, pandas or a database comes back with
its rows in another order and, from pandas, with its index as a column.
Hypothesis shuffles the rows of each input (and swaps the order in which
the options first appear) and every number must stay the same:

- agreement oriented each pair (a, b) by the order its rows first named the
  options, so reversed rows flipped the sign of every bias and mean
  difference;
- the case bootstrap (the variance decomposition's noise floor, the rates'
  bootstrap intervals) gave a case its weights by the order of first
  appearance, so the same seed drew other numbers from shuffled rows;
- a human-label CSV saved with its index read the row numbers as an
  ``Unnamed: 0`` column, and a label table imported from such a CSV too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import latent_verdicts

from multiverse.analysis import agreement, compute_rates, read_labels, variance

AXES = {"judge": ["j1", "j2", "j3"], "evidence": ["strict", "lenient"]}
SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _verdicts(seed: int = 3) -> pd.DataFrame:
    frame = latent_verdicts(axes=AXES, rates={"A": 0.3, "B": 0.6}, option_shift=0.1, n_cases=24, replicates=2,
                            fail=0.05, seed=seed)
    frame["transcript_key"] = frame["system"] + "/" + frame["case_id"] + "/" + frame["replicate"].astype(str)
    return frame


def _shuffled(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    return frame.iloc[np.random.default_rng(seed).permutation(len(frame))]


def _reversed_options(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the last-named judge first: every pair's options first appear in the other order."""
    return pd.concat([frame[frame["judge"] == "j3"], frame[frame["judge"] != "j3"]])


def _rounded(value):
    """Floats to 12 digits (sums in another order differ in the last bits), NaN as text, containers alike."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, float):
        return "nan" if value != value else round(value, 12)
    return value


def _numbers(result: dict) -> dict:
    """The agreement's pairs keyed by their options, and alpha: what a reader compares."""
    return _rounded({"alpha": result["krippendorff_alpha"], "n_units": result["n_units"],
                     "pairs": {f"{p['a']}-{p['b']}": {k: v for k, v in p.items() if k not in ("a", "b")}
                               for p in result["pairs"]}})


@SETTINGS
@given(seed=st.integers(0, 2**16))
def test_agreement_is_the_same_whatever_the_row_order(seed):
    verdicts = _verdicts()
    expected = _numbers(agreement(verdicts, axes=list(AXES), axis="judge"))
    for table in (_shuffled(verdicts, seed), _reversed_options(_shuffled(verdicts, seed))):
        got = agreement(table, axes=list(AXES), axis="judge")
        assert got["options"] == ["j1", "j2", "j3"]
        assert _numbers(got) == expected


def test_reversed_rows_do_not_flip_the_sign_of_bias():
    """The class's example: j1 labels compliant more often than j2; reversed rows said j2 - j1."""
    verdicts = _verdicts()
    forward = agreement(verdicts, axes=list(AXES), axis="judge")
    backward = agreement(verdicts.iloc[::-1], axes=list(AXES), axis="judge")
    assert [(p["a"], p["b"], p["bias"]) for p in forward["pairs"]] == \
        [(p["a"], p["b"], p["bias"]) for p in backward["pairs"]]
    assert any(p["bias"] != 0 for p in forward["pairs"])


@SETTINGS
@given(seed=st.integers(0, 2**16))
def test_variance_and_its_noise_floor_are_the_same_whatever_the_row_order(seed):
    verdicts = _verdicts()
    expected = variance(verdicts, axes=list(AXES), resamples=40, seed=1)
    got = variance(_shuffled(verdicts, seed), axes=list(AXES), resamples=40, seed=1)
    assert _rounded(got["noise"]) == _rounded(expected["noise"])
    assert _rounded(got["terms"]) == _rounded(expected["terms"])


@SETTINGS
@given(seed=st.integers(0, 2**16))
def test_bootstrap_intervals_of_the_rates_are_the_same_whatever_the_row_order(seed):
    verdicts = _verdicts()
    keys = ["universe_id", "system", "subgroup"]

    def rates(table):
        out = compute_rates(table, axes=list(AXES), factors=[], ci="bootstrap", n_boot=200, seed=2)
        return out.sort_values(keys).reset_index(drop=True)

    pd.testing.assert_frame_equal(rates(_shuffled(verdicts, seed)), rates(verdicts))


def test_a_label_sheet_saved_with_its_index_reads_as_the_sheet(tmp_path):
    sheet = pd.DataFrame({"system": ["A", "B", "A"], "case_id": ["c1", "c1", "c2"], "compliant": ["1", "0", "1"]})
    sheet.to_csv(tmp_path / "plain.csv", index=False)
    sheet.set_axis([7, 3, 5]).to_csv(tmp_path / "indexed.csv")
    plain, indexed = read_labels(tmp_path / "plain.csv"), read_labels(tmp_path / "indexed.csv")
    assert list(indexed.columns) == ["system", "case_id", "compliant"]
    pd.testing.assert_frame_equal(indexed, plain)


@pytest.mark.parametrize("layout", ["indexed", "shuffled_indexed"])
def test_a_label_table_imported_from_a_csv_saved_with_its_index_gives_the_same_rates(tmp_path, layout):
    from multiverse.importers import import_table

    verdicts = _verdicts()
    table = verdicts[["system", "case_id", "replicate", "judge", "evidence", "compliant"]].dropna()
    table = table.assign(compliant=table["compliant"].astype(int))
    table.to_csv(tmp_path / "plain.csv", index=False)
    written = _shuffled(table, 5) if layout == "shuffled_indexed" else table
    written.to_csv(tmp_path / "other.csv")  # the index pandas writes: an empty header, the row numbers

    def imported(name):
        results = import_table(tmp_path / f"{name}.csv", system="system", item="case_id", label="compliant",
                               axes=["judge", "evidence"], replicate="replicate", out_dir=tmp_path / f"out-{name}")
        return results.rates.sort_values(["universe_id", "system", "subgroup"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(imported("other"), imported("plain"))
