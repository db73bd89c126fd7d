"""Rates read as violation in the outputs the first round left in compliance (issue 48): the ranking and cuts
figures, the ranking text, diff (figure, text, report section), the labelling page and imports.

For any run the violation view is 1 - the compliance view (a difference: its negation) in every output that
shows a rate, the ranks do not move (1 = the best system, worded "highest compliance rate" or "lowest
violation rate"), and every --json document stays in compliance terms and says so.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import rankdata

import multiverse as mv
from multiverse.core import orient, rank_one

rates_st = st.lists(st.floats(0, 1, allow_nan=False).map(lambda x: round(x, 3)), min_size=2, max_size=5)


@given(st.lists(rates_st, min_size=1, max_size=4).filter(lambda rows: len({len(r) for r in rows}) == 1))
@settings(max_examples=40, deadline=None)
def test_rankings_reverse_consistently(universes):
    """In every universe, ranking systems by violation rate from the lowest gives the ranks by compliance rate
    from the highest: rank 1 is the same system either way, and the figure's words say which end it is."""
    from multiverse.analysis import universe_ranks

    systems = [f"s{i}" for i in range(len(universes[0]))]
    rates = pd.DataFrame([{"universe_id": f"u{u}", "system": s, "rate": r, "n": 10}
                          for u, row in enumerate(universes) for s, r in zip(systems, row)])
    ranks = universe_ranks(rates)
    for u, row in enumerate(universes):
        by_violation = rankdata(orient(np.asarray(row), "violation"), method="average")
        by_compliance = rankdata(-np.asarray(row), method="average")
        np.testing.assert_allclose(by_violation, by_compliance)
        mine = ranks[ranks["universe_id"] == f"u{u}"].set_index("system")["rank"].reindex(systems).to_numpy(float)
        # The analysis's ranks (1 = the best) put the systems in that order, ties tied.
        np.testing.assert_allclose(rankdata(mine, method="average"), by_violation)
    assert rank_one("compliance") == "highest compliance rate" and rank_one("violation") == "lowest violation rate"


def test_the_ranking_figure_keeps_ranks_and_words_them_as_read(sim_run):
    def drawn(results):
        figure = results.ranking(boot=0).figure()
        bump = figure.subfigs[0].axes[0]
        heat = figure.subfigs[1].axes[0]
        lines = sorted(tuple(np.round(line.get_ydata(), 6)) for line in bump.lines if len(line.get_ydata()) > 1)
        return bump.get_ylabel(), heat.get_xlabel(), lines

    c_label, c_heat, c_lines = drawn(mv.load_run(sim_run.out))
    v_label, v_heat, v_lines = drawn(mv.load_run(sim_run.out).read_as("violation"))
    assert (c_label, c_heat) == ("rank (1 = highest compliance rate)",) * 2
    assert (v_label, v_heat) == ("rank (1 = lowest violation rate)",) * 2
    assert c_lines and c_lines == v_lines  # the same places: only the words follow the reading


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(0, 1, allow_nan=False)), min_size=1,
                max_size=9, unique_by=lambda t: t[0]), st.booleans())
@settings(max_examples=25, deadline=None)
def test_the_cuts_figure_reads_as_violation(systems, scored_mean):
    from multiverse.plots import cut_figure

    steps = ["mean", "cut 7"] if scored_mean else ["cut 5", "cut 7"]
    rows = [{"group": "all", "scoring": step, "system": s, "rate": max(0.0, r - 0.1 * i), "rank": 1 + k}
            for k, (s, r) in enumerate(systems) for i, step in enumerate(steps)]
    shown = {}
    for read in ("compliance", "violation"):
        figure = cut_figure(rows, scale=(1.0, 10.0), rates_read=read)
        rate_ax, rank_ax = figure.axes[0], figure.axes[1]
        shown[read] = ([np.asarray(line.get_ydata(), float) for line in rate_ax.lines],
                       [np.asarray(line.get_ydata(), float) for line in rank_ax.lines], rate_ax.get_ylabel(),
                       rank_ax.get_ylabel(), [ax for ax in rate_ax.child_axes], rate_ax.get_xlabel())
    (c_rates, c_ranks, c_label, c_rank_label, c_native, c_x) = shown["compliance"]
    (v_rates, v_ranks, v_label, v_rank_label, v_native, v_x) = shown["violation"]
    assert "at or above each cut" in c_x and "below each cut" in v_x  # a cut's violation rate is the share below
    assert len(c_rates) == len(v_rates) == len(systems)
    for c, v in zip(c_rates, v_rates):
        np.testing.assert_allclose(v, 1 - c)
    for c, v in zip(c_ranks, v_ranks):
        np.testing.assert_array_equal(c, v)
    assert (c_label, v_label) == ("compliance rate (0–1)", "violation rate (0–1)")
    assert (c_rank_label, v_rank_label) == ("rank (1 = highest compliance rate)", "rank (1 = lowest violation rate)")
    assert len(c_native) == len(v_native) == (1 if scored_mean else 0)
    if scored_mean:  # the native axis still gives the mean score: 0 violations is the top of the scale
        forward = v_native[0]._functions[0]
        assert forward(0.0) == pytest.approx(10.0) and forward(1.0) == pytest.approx(1.0)
        assert c_native[0]._functions[0](0.0) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def two_runs(sim_run, tmp_path_factory):
    """The session's run as baseline, and a candidate with a third of one system's verdicts flipped."""
    root = tmp_path_factory.mktemp("diff")
    base, cand = root / "base", root / "cand"
    shutil.copytree(sim_run.out, base)
    shutil.copytree(sim_run.out, cand)
    verdicts = pd.read_parquet(cand / "verdicts.parquet")
    system = sorted(verdicts["system"].unique())[0]
    hit = (verdicts["system"] == system) & verdicts["compliant"].notna()
    flip = verdicts.index[hit][::3]
    verdicts.loc[flip, "compliant"] = ~verdicts.loc[flip, "compliant"].astype(bool)
    verdicts.to_parquet(cand / "verdicts.parquet")
    verdicts.to_csv(cand / "verdicts.csv", index=False)
    return base, cand


def test_diff_reads_as_violation_in_its_figure_text_and_summary(two_runs):
    base, cand = two_runs
    compliance = mv.diff(base, cand, boot=50)
    violation = mv.diff(base, cand, boot=50, rate="violation")
    assert (compliance.rate_direction, violation.rate_direction) == ("compliance", "violation")
    pd.testing.assert_frame_equal(compliance.frame, violation.frame)  # the measurement is one
    read = violation.read_frame()
    merged = compliance.frame.merge(read, on=["universe_id", "system"], suffixes=("", "_v"))
    np.testing.assert_allclose(merged["difference_v"], -merged["difference"])
    np.testing.assert_allclose(merged["ci_low_v"], -merged["ci_high"])
    np.testing.assert_allclose(merged["rate_candidate_v"], 1 - merged["rate_candidate"])
    c_sum, v_sum = compliance.summary(), violation.summary(as_read=True)
    np.testing.assert_allclose(v_sum["min"], -c_sum["max"])
    np.testing.assert_allclose(v_sum["median"], -c_sum["median"])
    assert v_sum["below_0"].tolist() == c_sum["above_0"].tolist()
    assert v_sum["worse"].tolist() == c_sum["worse"].tolist()  # worse stays worse
    c_fig, v_fig = compliance.figure(), violation.figure()
    assert "compliance rate" in c_fig.axes[0].get_ylabel() and "violation rate" in v_fig.axes[0].get_ylabel()
    for c_ax, v_ax in zip(c_fig.axes, v_fig.axes):
        if c_ax.lines:
            c_y = np.sort(np.asarray(c_ax.lines[0].get_ydata(), float))
            v_y = np.sort(np.asarray(v_ax.lines[0].get_ydata(), float))
            if len(c_y) > 1:
                np.testing.assert_allclose(v_y, np.sort(-c_y), atol=1e-12)
    # --json stays compliance either way, and says so
    assert json.dumps(compliance.to_dict()) == json.dumps(violation.to_dict())
    assert violation.to_dict()["rate_direction"] == "compliance"
    text = run_cli(["diff", base, cand, "--boot", "50", "--rate", "violation"]).ok()
    assert "violation rate(candidate) - violation rate(baseline)" in text


def test_the_ranking_text_reads_as_violation_and_json_stays_compliance(sim_run):
    compliance = run_cli(["ranking", sim_run.out, "--boot", "0"]).ok()
    violation = run_cli(["ranking", sim_run.out, "--boot", "0", "--rate", "violation"]).ok()
    assert "P(rank 1 = highest compliance rate)" in compliance and "P(rank 1 = lowest violation rate)" in violation
    pair = re.compile(r"^  (\S+) - (\S+): (-?[\d.]+) on", re.M)
    c = {(m[1], m[2]): float(m[3]) for m in pair.finditer(compliance)}
    v = {(m[1], m[2]): float(m[3]) for m in pair.finditer(violation)}
    assert c and c.keys() == v.keys()
    for key, d in c.items():
        assert v[key] == pytest.approx(-d, abs=1.5e-3)
    documents = [json.loads(run_cli(["ranking", sim_run.out, "--boot", "0", "--json", *extra]).ok())
                 for extra in ([], ["--rate", "violation"])]
    assert documents[0] == documents[1] and documents[0]["rate_direction"] == "compliance"


def test_the_labelling_page_asks_as_the_rates_read(sim_run, tmp_path):
    pages = {}
    for read in ("compliance", "violation"):
        _, html_path, _ = mv.label(sim_run.out, 2, tmp_path / f"{read}.csv", rate=read)
        pages[read] = html_path.read_text()
        data = json.loads(re.search(r'<script id="sheet-data" type="application/json">(.*?)</script>',
                                    pages[read], re.S)[1])
        assert data["label"]["column"] == "compliant"  # the sheet means compliance either way
        pages[read + " choices"] = dict((label, value) for value, label in data["label"]["choices"])
    assert "complied with the rubric" in pages["compliance"] and "violated the rubric" in pages["violation"]
    assert pages["violation choices"] == {"violates": "0", "does not violate": "1"}
    assert pages["compliance choices"] == {"compliant": "1", "not compliant": "0"}


def test_an_import_carries_its_rate_direction(tmp_path):
    table = tmp_path / "labels.csv"
    rows = [{"model": s, "item": f"i{k}", "grader": g, "ok": int((k + len(s) + len(g)) % 3 != 0)}
            for s in ("alpha", "beta") for g in ("g1", "g2") for k in range(12)]
    pd.DataFrame(rows).to_csv(table, index=False)
    common = ["import", "table", table, "--system", "model", "--item", "item", "--label", "ok", "--axis", "grader"]
    run_cli([*common, "--out", tmp_path / "plain"]).ok()
    run_cli([*common, "--out", tmp_path / "harm", "--rate", "violation"]).ok()
    assert json.loads((tmp_path / "harm" / "manifest.json").read_text())["rate"] == "violation"
    assert json.loads((tmp_path / "plain" / "manifest.json").read_text())["rate"] == "compliance"
    plain, harm = mv.load_run(tmp_path / "plain"), mv.load_run(tmp_path / "harm")
    assert (plain.rate_direction, harm.rate_direction) == ("compliance", "violation")
    assert harm.read_as("compliance").rate_direction == "compliance"
    pd.testing.assert_frame_equal(plain.rate_table(), harm.rate_table())  # the tables stay compliance
    harm.read_as(None)
    c_ax = [ax for ax in plain.curve().figure().axes if ax.get_ylabel()]
    v_ax = [ax for ax in harm.curve().figure().axes if ax.get_ylabel()]
    assert {ax.get_ylabel() for ax in v_ax} == {"violation rate"}
    for c, v in zip(c_ax, v_ax):
        np.testing.assert_allclose(np.sort(v.lines[0].get_ydata()), np.sort(1 - np.asarray(c.lines[0].get_ydata())))
    bad = run_cli([*common, "--out", tmp_path / "bad", "--rate", "harm"])
    assert bad.returncode == 2 and "--rate" in bad.stderr and not (tmp_path / "bad").exists()
    with pytest.raises(mv.InputError, match="rate: expected compliance or violation"):
        mv.import_table(table, system="model", item="item", label="ok", axes=["grader"], out_dir=tmp_path / "bad2",
                        rate="harm")
    assert not (tmp_path / "bad2").exists()
