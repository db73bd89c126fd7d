"""The ranking's and the variance's rates and case counts read off the curve's case matrix are the ones
counted from the rows: the same frame, the same count matrices in the same cell and case order."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import multiverse as mv
from multiverse.analysis import case_matrix, counts_of_matrix, counts_of_rates, rates_of_matrix, system_rates
from multiverse.core import json_ready as json_safe

AXES = ["judge", "prompt"]


def _table(seed: int, *, shuffle: bool) -> pd.DataFrame:
    """Categorical columns as ``load_run`` gives them (with categories no row uses), failed and unlabelled
    rows (some a universe's first), a system missing from some universes, a case first seen late, and rows
    in run order or shuffled."""
    rng = np.random.default_rng(seed)
    rows = []
    for u, (judge, prompt) in enumerate((j, p) for j in ("j0", "j1", "j2") for p in ("p0", "p1")):
        for system in ("zeta", "alpha", "mid"):
            if system == "mid" and u % 4 == 3:
                continue
            for case in [f"c{c:02d}" for c in rng.permutation(12)] + (["late"] if u >= 4 else []):
                for replicate in range(1 + (seed % 2)):
                    rows.append({"universe_id": f"u{u}", "judge": judge, "prompt": prompt, "system": system,
                                 "case_id": case, "replicate": replicate})
    table = pd.DataFrame(rows)
    n = len(table)
    table["status"] = np.where(rng.random(n) < 0.1, "judge_failed", "ok")
    table.loc[0, "status"] = "rollout_failed"  # the first universe's first row does not count
    compliant = pd.array(rng.random(n) < 0.6, dtype="boolean")
    compliant[rng.random(n) < 0.05] = pd.NA
    table["compliant"] = compliant
    if shuffle:
        table = table.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    for column in ("universe_id", *AXES, "system", "case_id", "status"):
        values = sorted(set(table[column])) + [f"unused-{column}"]
        table[column] = pd.Categorical(table[column], categories=values)
    return table


@pytest.mark.parametrize("seed, shuffle, piece", [(0, False, None), (1, False, 7), (2, True, None), (3, True, 5)])
def test_rates_and_case_counts_of_the_matrix_are_those_of_the_rows(seed, shuffle, piece, monkeypatch):
    """In run order and shuffled, read whole or a few rows at a time (pieces that split runs of a
    universe or cell: the case matrix too is then made a piece at a time, and is the same)."""
    from multiverse.analysis._kernel import _codes

    table = _table(seed, shuffle=shuffle)
    whole = case_matrix(table, axes=AXES)
    if piece is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", piece)
    matrix = case_matrix(table, axes=AXES)
    assert_frame_equal(matrix.universes, whole.universes)
    np.testing.assert_array_equal(matrix.included, whole.included)
    np.testing.assert_array_equal(matrix.compliant, whole.compliant)
    expected = system_rates(table, axes=AXES)
    got = rates_of_matrix(matrix, table)
    assert got is not None
    assert_frame_equal(got, expected)
    rows = counts_of_rates(table, AXES, expected)
    counts = counts_of_matrix(matrix, table, expected)
    assert counts is not None
    assert (counts.universes, counts.systems) == (rows.universes, rows.systems)
    assert (counts.n_cases, counts.named_cases) == (rows.n_cases, rows.named_cases)
    np.testing.assert_array_equal(counts.n, rows.n)
    np.testing.assert_array_equal(counts.k, rows.k)
    weights = rows.weights(np.random.default_rng(seed), 9)
    for mine, theirs in zip(counts.sums(weights), rows.sums(weights)):
        np.testing.assert_array_equal(mine, theirs)


def test_tables_the_matrix_cannot_stand_for_are_counted_from_the_rows():
    table = _table(0, shuffle=False)
    matrix = case_matrix(table, axes=AXES)
    rates = system_rates(table, axes=AXES)
    text = table.assign(system=table["system"].astype(str))
    assert rates_of_matrix(case_matrix(text, axes=AXES), text) is None
    assert counts_of_matrix(matrix, table.assign(case_id=table["case_id"].astype(str)), rates) is None
    scored = table.assign(contribution=table["compliant"].astype(float))
    assert rates_of_matrix(matrix, scored) is None and counts_of_matrix(matrix, scored, rates) is None


@pytest.mark.parametrize("shuffle", [False, True])
def test_ranking_and_variance_are_the_same_with_the_curve_run_first(shuffle, monkeypatch):
    """Results reads the rates and counts off the curve's matrix once the curve has made it; the
    documents are those of a Results that counted the rows."""
    # Results imports the counting functions from the facade when it calls them: the tripwires go there.
    import multiverse.analysis as analysis

    table = _table(5, shuffle=shuffle)
    alone = mv.Results(verdicts=table, axes=AXES, primary="u1")
    documents = [json.dumps(json_safe(alone.ranking(boot=60).source)), json.dumps(json_safe(alone.variance().source))]
    after_curve = mv.Results(verdicts=table, axes=AXES, primary="u1")
    after_curve.curve(boot=20)

    def counted_rows(*args, **kwargs):
        raise AssertionError("counted from the rows")
    monkeypatch.setattr(analysis, "system_rates", counted_rows)
    monkeypatch.setattr(analysis, "counts_of_rates", counted_rows)
    assert documents == [json.dumps(json_safe(after_curve.ranking(boot=60).source)),
                         json.dumps(json_safe(after_curve.variance().source))]
    assert_frame_equal(after_curve.system_rates(), alone.system_rates())


@pytest.mark.parametrize("piece", [None, 1, 4])
def test_first_rows_read_only_where_codes_change_are_those_of_every_row(piece, monkeypatch):
    """The first row of each code (among kept rows), found from the rows where a code changes or follows a
    row not kept, against np.unique over every kept row: runs of codes, a missing code (-1), a run whose
    first rows are not kept, and pieces that split runs."""
    from multiverse.analysis._kernel import _codes

    if piece is not None:
        monkeypatch.setattr(_codes, "PIECE_ROWS", piece)
    rng = np.random.default_rng(piece or 0)
    codes = np.repeat(rng.integers(-1, 6, 40), rng.integers(1, 5, 40)).astype(np.int16)
    for keep in (None, rng.random(len(codes)) < 0.6):
        kept = np.arange(len(codes)) if keep is None else np.flatnonzero(keep)
        at = np.unique(codes[kept], return_index=True)[1]
        np.testing.assert_array_equal(_codes.first_rows(codes, keep), kept[at])
        in_row_order = _codes.first_appearances(codes, keep)
        np.testing.assert_array_equal(in_row_order, np.sort(kept[at]))
        assert list(codes[in_row_order]) == list(pd.unique(codes[kept]))
