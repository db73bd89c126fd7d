"""Results: the one object that carries a run's tables and computes its analyses, checked against the functions."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import multiverse as mv
from multiverse.analysis import (
    agreement,
    case_matrix,
    curve_summary,
    design_power,
    dropped_notes,
    joint_rate_test,
    ranking,
    spec_curve,
    variance,
)
from multiverse.core import json_ready

SYSTEMS = ["atlas", "beacon", "<b>cobalt</b>"]
JUDGES = ["j1", "j2"]
PROMPTS = ["plain", "strict", "terse"]



def compliance(document: dict) -> dict:
    """A function's document as Results gives it: every analysis says its rates are compliance (issue 48)."""
    return {**document, "rate_direction": "compliance"}

def verdicts(rng: np.random.Generator, *, cases: int = 30, perfect: str | None = None) -> pd.DataFrame:
    """Every universe (judge x prompt) x system x case; ``behavior`` varies inside a universe."""
    rows = []
    for u, (judge, prompt) in enumerate((j, p) for j in JUDGES for p in PROMPTS):
        for s, system in enumerate(SYSTEMS):
            for case in range(cases):
                p = 1.0 if system == perfect else 0.45 + 0.15 * s + 0.05 * (prompt == "strict")
                status = "rollout_failed" if (u, s, case) == (1, 0, 3) else "ok"
                rows.append({"universe_id": f"u{u}", "judge": judge, "prompt": prompt, "system": system,
                             "case_id": f"c{case}", "behavior": ["lie", "omit"][case % 2], "status": status,
                             "compliant": None if status != "ok" else bool(rng.random() < p)})
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame


@pytest.fixture
def results(rng) -> mv.Results:
    return mv.Results(verdicts=verdicts(rng), axes=["judge", "prompt", "behavior"], primary="u0")


def test_axes_factors_primary_and_universes_are_worked_out_once(results):
    assert results.axes == ["judge", "prompt"]  # behavior varies inside a universe: a design factor
    assert results.factors == ["behavior"]
    assert results.systems == SYSTEMS
    assert list(results.universes["universe_id"]) == ["u0", "u1", "u2", "u3", "u4", "u5"]
    assert results.universes["label"].iloc[1] == "judge=j1 · prompt=strict"


def test_numeric_ids_become_text_and_an_unknown_primary_is_none(rng):
    v = verdicts(rng, cases=4)
    v["universe_id"] = v["universe_id"].str[1:].astype(int)
    r = mv.Results(verdicts=v, axes=["judge", "prompt"], primary="u9")
    assert r.primary is None and pd.api.types.is_string_dtype(r.verdicts["universe_id"])
    assert set(r.verdicts["universe_id"]) == {"0", "1", "2", "3", "4", "5"}
    assert r.universes["universe_id"].iloc[0] == "0"  # no primary: the verdicts' order
    moved = dataclasses.replace(r, primary=5)
    assert moved.primary == "5" and moved.universes["universe_id"].iloc[0] == "5"


def test_missing_columns_are_refused_in_parameter_words(rng):
    with pytest.raises(mv.InputError, match="verdicts: compliant") as info:
        mv.Results(verdicts=verdicts(rng, cases=2).drop(columns="compliant"))
    assert "--" not in str(info.value)


def test_curve_is_the_functions_chained(results):
    got = results.curve(threshold=0.5, boot=99, seed=3)
    matrix = case_matrix(results.verdicts, axes=results.axes)
    frame = spec_curve(matrix, axes=results.axes, primary="u0")
    assert_frame_equal(got.frame, frame)
    tests = [joint_rate_test(matrix, system=s, threshold=0.5, boot=99, seed=3)
             for s in dict.fromkeys(frame["system"])]
    expected = curve_summary(frame, tests=tests)
    expected["notes"] = dropped_notes(results.verdicts) + expected.get("notes", [])
    assert got.to_dict() == compliance(json_ready(expected))
    assert got.source["tests"] == expected["tests"] and got.source["notes"] == expected["notes"]
    assert [t.systems[0] for t in got.tests] == list(dict.fromkeys(frame["system"]))
    assert got.document.n_universes == 6


def test_analyses_are_cached_per_choice(results):
    first = results.curve(threshold=0.5, boot=99)
    assert results.curve(threshold=0.5, boot=99) is first
    assert results.curve(threshold=0.6, boot=99) is not first
    assert results.variance() is results.variance()
    assert results.variance(axes=["judge"]) is not results.variance()
    # Whatever an analysis depends on may change; nothing stale is handed out after.
    ranked = results.ranking(boot=0)
    results.primary = "u3"
    again = results.ranking(boot=0)
    assert again is not ranked and again.document.primary == "u3" and ranked.document.primary == "u0"
    assert results.universes["universe_id"].iloc[0] == "u3"


def test_a_primary_null_skips_systems_with_no_spread_and_says_so(rng):
    r = mv.Results(verdicts=verdicts(rng, perfect="beacon"), axes=["judge", "prompt"], primary="u0")
    got = r.curve(threshold="primary", boot=99)
    assert sorted(t.systems[0] for t in got.tests) == ["<b>cobalt</b>", "atlas"]
    at_primary = got.frame[got.frame["is_primary"]].set_index("system")["rate"]
    for test in got.tests:
        assert test.threshold == pytest.approx(at_primary[test.systems[0]])
    assert any(n.startswith("beacon: no joint test") and "primary rate is 1" in n for n in got.notes)
    with pytest.raises(mv.InputError) as info:
        r.curve(threshold=1.5)
    assert info.value.param == "threshold"


def test_variance_and_ranking_narrow_what_is_reported_not_the_model(results):
    full = results.variance()
    assert full.source == compliance(variance(results.verdicts, axes=results.axes))
    narrow = results.variance(axes=["judge"])
    assert [r["axis"] for r in narrow.source["by_axis"]] == ["judge"]
    assert {r.get("axis") for r in narrow.source["terms"]} <= {"judge", None, ""}
    assert not any(line.startswith("prompt:") for line in narrow.source["summary"])
    # The same model: the judge's share does not change when prompt is hidden.
    assert narrow.source["by_axis"][0] == next(r for r in full.source["by_axis"] if r["axis"] == "judge")
    assert_frame_equal(narrow.frame, pd.DataFrame(narrow.source["terms"]))

    rank = results.ranking(axes=["prompt"], boot=0)
    plain = ranking(results.verdicts, axes=results.axes, primary="u0", bootstrap=0)
    assert [r["axis"] for r in rank.source["kendall_tau"]["by_axis"]] == ["prompt"]
    assert rank.source["p_top"] == plain["p_top"]
    assert dict(zip(rank.frame["system"], rank.frame["p_top"])) == plain["p_top"]


def test_ranking_and_variance_share_one_case_count_and_give_what_they_give_alone(results, monkeypatch):
    """The rates and case counts are made once for both analyses (at 100k universes each took seconds);
    the documents are those of the functions run on their own, which make their own."""
    from multiverse.analysis._kernel import _case_resampling as case_resampling

    made = []
    real = case_resampling.CaseCounts.__init__

    def counted(self, *args, **kwargs):
        made.append(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(case_resampling.CaseCounts, "__init__", counted)
    # Nor are the counted rows copied again: only the counts' own copy holds every universe's.
    from multiverse.analysis._kernel import _included as included

    copied, copy = [], included.included_verdicts

    def counting_copy(rows, **kwargs):
        copied.append(rows["universe_id"].nunique())
        return copy(rows, **kwargs)

    monkeypatch.setattr(included, "included_verdicts", counting_copy)
    rank, spread = results.ranking(boot=50), results.variance()
    assert len(made) == 1 and results.case_counts() is made[0]
    every = results.verdicts["universe_id"].nunique()
    assert copied.count(every) == 1 and set(copied) <= {every, 1}, copied
    assert rank.source == compliance(json_ready(ranking(results.verdicts, axes=results.axes, primary="u0", bootstrap=50)))
    assert spread.source == compliance(json_ready(variance(results.verdicts, axes=results.axes)))
    assert len(made) == 3  # the functions alone made theirs
    # Counts of other cells are not reused: the function makes the ones it needs.
    other = case_resampling.case_counts(results.verdicts.assign(compliant=results.verdicts["compliant"].fillna(False)),
                                        ["u1", "u0"], results.systems, reuse=made[0])
    assert other is not made[0] and other.fits(["u1", "u0"], results.systems)


def test_agreement_defaults_to_the_judge_axis_and_checks_the_axis(results):
    got = results.agreement()
    assert got.source == compliance(agreement(results.verdicts, axes=results.axes, axis="judge"))
    assert results.agreement("judge") is got
    assert_frame_equal(got.frame, pd.DataFrame(got.source["pairs"]))
    with pytest.raises(mv.InputError) as info:
        results.agreement("grader")
    assert info.value.param == "axis" and "grader" in str(info.value) and "--" not in str(info.value)
    no_judge = mv.Results(verdicts=results.verdicts.drop(columns="judge"), axes=["prompt"])
    with pytest.raises(mv.InputError, match="no judge axis") as info:
        no_judge.agreement()
    assert info.value.param == "axis"


def test_agreement_figure_shows_bias_beside_kappa_and_ac1(results):
    """README's agreement figure (and `agreement --figure`) has three panels: kappa, AC1 and bias."""
    figure = results.agreement().figure()
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert titles == ["Cohen's kappa", "Gwet's AC1", "bias: rate(row) - rate(column)"]
    bias = figure.axes[[ax.get_title() for ax in figure.axes].index(titles[2])]
    pairs = results.agreement().frame
    shown = {t.get_text() for t in bias.texts}
    assert {f"{v:+.3f}" for v in pairs["bias"]} <= shown and {f"{-v:+.3f}" for v in pairs["bias"]} <= shown
    assert [ax.get_title() for ax in results.agreement().figure(measures=("cohen_kappa",)).axes
            if ax.get_title()] == ["Cohen's kappa"]


def test_power_counts_the_cases_each_system_answered(results):
    got = results.power(baseline_rate=0.7)
    # Every universe x system has 30 cases, the rollout failure included (a planned case),
    # and each behavior cell 15.
    assert got.source == compliance(design_power(cases=30, cases_per_cell=15, baseline_rate=0.7))
    assert list(got.frame["n_per_group"]) == [30, 15]


def test_analysis_documents_are_json_safe_and_figures_draw(results):
    got = results.variance()
    got.source["notes"].append(float("nan"))
    assert got.to_dict()["notes"][-1] is None
    figure = results.ranking(boot=0).figure()
    assert figure.axes  # a drawn figure
    assert results.curve(threshold=0.5, boot=99).figure(axes=["judge"]).axes


def test_notebook_view_escapes_what_came_from_the_run(results):
    page = results._repr_html_()
    assert "&lt;b&gt;cobalt&lt;/b&gt;" in page
    assert "judge, prompt" in page and "behavior" in page and "u0" in page
    assert "<b>cobalt</b>" not in page
    html = results.curve(threshold=0.5, boot=99)._repr_html_()
    assert "<b>cobalt</b>" not in html and "&lt;b&gt;cobalt&lt;/b&gt;" in html
    assert "SIMULATED" not in page
    assert "SIMULATED" in dataclasses.replace(results, manifest={"simulated": True})._repr_html_()


def test_every_figure_of_a_simulated_run_says_so(results):
    """The API's figures carry the SIMULATED stamp exactly when the run was simulated (one door: figure())."""
    from multiverse.plots._stamp import is_stamped

    for simulated in (False, True):
        run = dataclasses.replace(results, manifest={"simulated": simulated})
        figures = [run.curve(threshold=0.5, boot=99).figure(), run.curve(diff=("atlas", "beacon"), boot=99).figure(),
                   run.agreement().figure(), run.ranking(boot=0).figure(), run.variance().figure()]
        assert [is_stamped(f) for f in figures] == [simulated] * len(figures)


def test_notebook_tables_say_when_they_show_only_part(results):
    """Every _repr_html_ that shows the head of a table says how much of it that is, and only then."""
    page = results._repr_html_()
    assert len(results.universes) <= 20 and "showing" not in page
    assert "showing" not in results.curve(threshold=0.5, boot=99)._repr_html_()  # 18 rows: all of them
    copies = [results.verdicts.assign(universe_id=results.verdicts["universe_id"].astype(str) + f"-{i}")
              for i in range(6)]
    many = mv.Results(pd.concat(copies, ignore_index=True), axes=results.axes)
    curve = many.curve()
    n = len(curve.frame)
    assert n == 36 * 3
    html = curve._repr_html_()
    assert f"showing 50 of {n} rows" in html and html.count("<tr") == 50 + 1
    assert "showing" not in dataclasses.replace(curve, frame=curve.frame.head(50))._repr_html_()
    assert "showing 20 of 36 universes" in many._repr_html_()


def test_load_run_and_the_importers_return_results_and_report_beside_them(tmp_path, rng):
    table = tmp_path / "labels.csv"
    v = verdicts(rng, cases=6)
    v[v["status"] == "ok"][["judge", "prompt", "system", "case_id", "compliant"]].to_csv(table, index=False)
    imported = mv.import_table(table, system="system", item="case_id", label="compliant", axes=["judge", "prompt"],
                               out_dir=tmp_path / "imp", primary={"judge": "j1", "prompt": "plain"})
    assert isinstance(imported, mv.Results) and imported.out_dir == tmp_path / "imp"
    loaded = mv.load_run(tmp_path / "imp")
    assert isinstance(loaded, mv.Results)
    assert loaded.axes == imported.axes == ["judge", "prompt"]
    assert loaded.primary == imported.primary is not None
    path = mv.report(loaded, progress=False, tests=False)
    assert path == tmp_path / "imp" / "report.html" and path.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(mv.InputError, match="is the input"):
        mv.report(loaded, tmp_path / "imp" / "verdicts.csv", progress=False)
    in_memory = mv.Results(verdicts=v, axes=["judge", "prompt"])
    assert in_memory.out_dir is None
    assert not math.isnan(in_memory.system_rates()["rate"].mean())
