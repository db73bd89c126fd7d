"""Variance decomposition of universe x system rates: exact shares, statsmodels parity, wording, figure."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pandas as pd
import pytest
from statsmodels.formula.api import ols
from statsmodels.stats.anova import anova_lm

from multiverse.analysis import variance, variance_by_axis, variance_decomposition

# Balanced 2 x 2 x 2 grid: axes A and B, systems s0 and s1, coded -1/+1.
# rate = 0.5 + 0.10 A + 0.05 B + 0.15 S + 0.02 A*S + 0.01 A*B.
# Each contrast is orthogonal, so a term's sum of squares is 8 * coefficient^2:
# A 0.08, B 0.02, system 0.18, A:system 0.0032, B:system 0, residual (A*B) 0.0008; total 0.284.
EFFECTS = {"A": 0.10, "B": 0.05, "S": 0.15, "AS": 0.02, "AB": 0.01}
EXPECTED_SS = {"A": 0.08, "B": 0.02, "system": 0.18, "A:system": 0.0032, "B:system": 0.0,
               "Residual": 0.0008}
TOTAL = 0.284


def balanced_rates() -> pd.DataFrame:
    rows = []
    for a, b, s in itertools.product((-1, 1), repeat=3):
        rate = (0.5 + EFFECTS["A"] * a + EFFECTS["B"] * b + EFFECTS["S"] * s
                + EFFECTS["AS"] * a * s + EFFECTS["AB"] * a * b)
        rows.append({"universe_id": f"{a}{b}", "A": f"a{a}", "B": f"b{b}", "system": f"s{s}", "rate": rate})
    return pd.DataFrame(rows)


def test_balanced_2x2x2_shares_are_exact():
    table = variance_decomposition(balanced_rates(), axes=["A", "B"])
    assert table["term"].tolist() == ["A", "B", "system", "A:system", "B:system", "Residual"]
    assert table["kind"].tolist() == ["axis", "axis", "system", "interaction", "interaction", "residual"]
    assert table["axis"].tolist() == ["A", "B", None, "A", "B", None]
    got = table.set_index("term")
    for term, ss in EXPECTED_SS.items():
        assert got.loc[term, "sum_sq"] == pytest.approx(ss, abs=1e-12)
        assert got.loc[term, "share"] == pytest.approx(ss / TOTAL, abs=1e-12)
    assert got["df"].tolist() == [1, 1, 1, 1, 1, 2]
    assert got["share"].sum() == pytest.approx(1.0)


def test_from_verdicts_on_a_balanced_grid():
    rows = []
    for rate_row in balanced_rates().itertuples():
        compliant = round(rate_row.rate * 100)
        for case in range(100):
            rows.append({"A": rate_row.A, "B": rate_row.B, "system": rate_row.system,
                         "case_id": f"c{case}", "compliant": case < compliant})
    result = variance(pd.DataFrame(rows), axes=["A", "B"])
    assert result["balanced"] is True
    shares = {t["term"]: t["share"] for t in result["terms"]}
    assert shares["A"] == pytest.approx(0.08 / TOTAL)
    assert shares["A:system"] == pytest.approx(0.0032 / TOTAL)
    by_axis = {row["axis"]: row for row in result["by_axis"]}
    assert by_axis["A"]["main"] == pytest.approx(0.08 / TOTAL)
    assert by_axis["A"]["total"] == pytest.approx(0.0832 / TOTAL)
    assert result["summary"][0].startswith("A: 29.3% of the variance in rates, mostly by shifting")


def test_matches_anova_lm_typ2_on_an_unbalanced_grid():
    rng = np.random.default_rng(4)
    rows = [{"judge": j, "evidence": e, "system": s, "rate": rng.random()}
            for j, e, s in itertools.product(["j1", "j2", "j3"], ["strict", "lenient"], ["x", "y", "z"])]
    rates = pd.DataFrame(rows).drop(index=[3, 10]).reset_index(drop=True)  # two missing cells
    table = variance_decomposition(rates, axes=["judge", "evidence"]).set_index("term")
    model = ols("rate ~ C(judge) + C(evidence) + C(system) + C(judge):C(system) + C(evidence):C(system)",
                data=rates).fit()
    reference = anova_lm(model, typ=2)
    names = {"judge": "C(judge)", "evidence": "C(evidence)", "system": "C(system)",
             "judge:system": "C(judge):C(system)", "evidence:system": "C(evidence):C(system)",
             "Residual": "Residual"}
    for ours, theirs in names.items():
        assert table.loc[ours, "sum_sq"] == pytest.approx(reference.loc[theirs, "sum_sq"], rel=1e-9)
        assert table.loc[ours, "df"] == reference.loc[theirs, "df"]
    total = ((rates["rate"] - rates["rate"].mean()) ** 2).sum()
    assert table["share"].to_numpy() == pytest.approx(table["sum_sq"].to_numpy() / total)


def test_summary_tells_reranking_from_shifting():
    rows = []
    for judge, evidence, system in itertools.product(["j1", "j2"], ["strict", "lenient"], ["x", "y"]):
        swap = 0.2 if (judge == "j2") == (system == "x") else 0.0  # judge re-ranks x and y
        shift = 0.1 if evidence == "lenient" else 0.0               # evidence moves both together
        rows.append({"judge": judge, "evidence": evidence, "system": system, "rate": 0.5 + swap + shift})
    table = variance_decomposition(pd.DataFrame(rows), axes=["judge", "evidence"])
    by_axis = variance_by_axis(table).set_index("axis")
    assert by_axis.loc["judge", "interaction"] == pytest.approx(0.8)
    assert by_axis.loc["evidence", "main"] == pytest.approx(0.2)
    from multiverse.analysis import variance_summary

    lines = variance_summary(table)
    assert "judge: 80.0%" in lines[0] and "re-ranking systems" in lines[0]
    assert "evidence: 20.0%" in lines[1] and "shifting every system's rate" in lines[1]


def test_single_option_axes_and_unbalanced_grids_are_noted():
    rows = []
    for judge, system in itertools.product(["j1", "j2"], ["x", "y"]):
        for case in range(4):
            rows.append({"judge": judge, "scoring": "all", "system": system, "case_id": case,
                         "compliant": (case + len(judge + system)) % 3 == 0})
    verdicts = pd.DataFrame(rows)
    verdicts = verdicts[~((verdicts["judge"] == "j2") & (verdicts["system"] == "y"))]
    result = variance(verdicts, axes=["judge", "scoring"])
    assert [t["term"] for t in result["terms"]] == ["judge", "system", "judge:system", "Residual"]
    assert result["balanced"] is False
    assert any("'scoring' has a single option" in note for note in result["notes"])
    assert any("unbalanced" in note for note in result["notes"])


def test_variance_figure_distinguishes_interactions():
    from multiverse.plots import plot_variance

    table = variance_decomposition(balanced_rates(), axes=["A", "B"])
    ax = plot_variance(table)
    hatches = {patch.get_hatch() for patch in ax.patches}
    assert "///" in hatches  # interaction bars are hatched
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1] == "system"  # largest share on top
    assert "A x system" in labels
    ax.figure.savefig(io.BytesIO(), format="png")


def test_single_axis_grid_is_saturated_and_still_decomposed():
    # rate = 0.5 + 0.1 J + 0.05 S + 0.02 J*S on 2 judges x 2 systems: SS = 4 * coefficient^2 each,
    # and no residual degrees of freedom are left for anova_lm's tests.
    rows = [{"judge": f"j{j}", "system": f"s{s}", "rate": 0.5 + 0.1 * j + 0.05 * s + 0.02 * j * s}
            for j, s in itertools.product((-1, 1), repeat=2)]
    table = variance_decomposition(pd.DataFrame(rows), axes=["judge"]).set_index("term")
    assert table["sum_sq"].to_dict() == pytest.approx(
        {"judge": 0.04, "system": 0.01, "judge:system": 0.0016, "Residual": 0.0}, abs=1e-12)
    assert table.loc["Residual", "df"] == 0
    assert table["share"].sum() == pytest.approx(1.0)


def test_refits_agree_with_anova_lm_where_both_apply():
    from multiverse.analysis.variance._terms import _Term, _type2_by_refits

    rng = np.random.default_rng(9)
    frame = pd.DataFrame([{"x0": j, "x1": e, "s": s, "y": rng.random()}
                          for j, e, s in itertools.product("abc", "uv", "xyz")]).drop(index=[2, 7])
    terms = [_Term("judge", "axis", "judge", "C(x0)"), _Term("evidence", "axis", "evidence", "C(x1)"),
             _Term("system", "system", None, "C(s)"),
             _Term("judge:system", "interaction", "judge", "C(x0):C(s)"),
             _Term("evidence:system", "interaction", "evidence", "C(x1):C(s)")]
    reference = anova_lm(ols("y ~ " + " + ".join(t.formula for t in terms), data=frame).fit(), typ=2)
    for term in terms:
        sum_sq, df = _type2_by_refits(frame, terms, term)
        assert sum_sq == pytest.approx(reference.loc[term.formula, "sum_sq"], rel=1e-8)
        assert df == reference.loc[term.formula, "df"]


def test_balanced_fast_path_equals_anova_lm_type2():
    """On a full factorial the cell-mean sums of squares are what anova_lm(typ=2) gives."""
    rng = np.random.default_rng(7)
    grid = pd.MultiIndex.from_product(
        [["j1", "j2", "j3"], ["strict", "lenient"], ["multi", "single"], ["A", "B", "C", "D"]],
        names=["judge", "evidence", "setting", "system"],
    ).to_frame(index=False)
    grid["rate"] = rng.uniform(0.2, 0.9, len(grid))
    ours = variance_decomposition(grid, axes=["judge", "evidence", "setting"]).set_index("term")
    model = ols("rate ~ C(judge) + C(evidence) + C(setting) + C(system) + C(judge):C(system)"
                " + C(evidence):C(system) + C(setting):C(system)", data=grid).fit()
    table = anova_lm(model, typ=2)
    names = {"judge": "C(judge)", "evidence": "C(evidence)", "setting": "C(setting)", "system": "C(system)",
             "judge:system": "C(judge):C(system)", "evidence:system": "C(evidence):C(system)",
             "setting:system": "C(setting):C(system)", "Residual": "Residual"}
    for term, formula in names.items():
        assert ours.loc[term, "sum_sq"] == pytest.approx(table.loc[formula, "sum_sq"], rel=1e-9, abs=1e-12)
        assert ours.loc[term, "df"] == table.loc[formula, "df"]
    assert ours["share"].sum() == pytest.approx(1.0)


def test_an_unbalanced_grid_still_goes_through_ols():
    rng = np.random.default_rng(8)
    grid = pd.MultiIndex.from_product([["j1", "j2"], ["s", "l"], ["A", "B", "C"]], names=["judge", "evidence", "system"]).to_frame(index=False)
    grid["rate"] = rng.uniform(0.2, 0.9, len(grid))
    grid = grid.iloc[1:]  # one universe x system rate missing
    ours = variance_decomposition(grid, axes=["judge", "evidence"]).set_index("term")
    model = ols("rate ~ C(judge) + C(evidence) + C(system) + C(judge):C(system) + C(evidence):C(system)", data=grid).fit()
    table = anova_lm(model, typ=2)
    assert ours.loc["judge", "sum_sq"] == pytest.approx(table.loc["C(judge)", "sum_sq"], rel=1e-9)
    assert ours.loc["evidence:system", "sum_sq"] == pytest.approx(table.loc["C(evidence):C(system)", "sum_sq"], rel=1e-9)


# --------------------------------------------------------------------------- aliasing


def _verdicts(cells: dict, cases: int = 20, seed: int = 0) -> pd.DataFrame:
    """Verdicts with labels drawn at the given cell probabilities: {(axis options..., system): p}."""
    rng = np.random.default_rng(seed)
    rows = []
    for (judge, evidence, system), p in cells.items():
        labels = rng.random(cases) < p
        rows += [{"judge": judge, "evidence": evidence, "system": system, "case_id": f"c{c}",
                  "compliant": bool(x)} for c, x in enumerate(labels)]
    return pd.DataFrame(rows)


def test_aliased_axes_are_named_and_their_joint_share_matches_a_merged_axis():
    # judge j1 always runs with evidence strict, j2 with lenient: the two axes determine each other.
    cells = {}
    for (judge, evidence), shift in ((("j1", "strict"), 0.0), (("j2", "lenient"), 0.3)):
        for system, base in (("A", 0.3), ("B", 0.5), ("C", 0.6)):
            for setting in ("x", "y"):
                cells[(judge, evidence + "|" + setting, system)] = base + shift + (0.05 if setting == "y" else 0)
    verdicts = _verdicts(cells, cases=30)
    parts = verdicts["evidence"].str.split("|", expand=True)
    verdicts["evidence"], verdicts["setting"] = parts[0], parts[1]
    result = variance(verdicts, axes=["judge", "evidence", "setting"], resamples=50)
    assert result["aliasing"]["aliased"] == [["judge", "evidence"]]
    assert any("'judge', 'evidence' are aliased" in n for n in result["notes"])
    assert not any(line.startswith(("judge:", "evidence:")) and "matters little" in line
                   for line in result["summary"])
    assert any("judge and evidence change together" in line for line in result["summary"])
    # The joint share equals the share of one axis holding both: type-II from statsmodels.
    from multiverse.analysis import system_rates

    rates = system_rates(verdicts, axes=["judge", "evidence", "setting"])
    model = ols("rate ~ C(judge) + C(setting) + C(system) + C(judge):C(system) + C(setting):C(system)",
                data=rates).fit()
    table = anova_lm(model, typ=2)
    total = ((rates["rate"] - rates["rate"].mean()) ** 2).sum()
    group = result["aliased_groups"][0]
    assert group["axes"] == ["judge", "evidence"]
    assert group["main"] == pytest.approx(table.loc["C(judge)", "sum_sq"] / total)
    assert group["interaction"] == pytest.approx(table.loc["C(judge):C(system)", "sum_sq"] / total)
    assert group["main"] > 0.1


def test_nested_axis_is_named():
    # evidence is fixed within each judge (j1: strict; j2 and j3: lenient), but does not determine the judge.
    cells = {(j, "strict" if j == "j1" else "lenient", s): 0.5 for j in ("j1", "j2", "j3") for s in "AB"}
    result = variance(_verdicts(cells), axes=["judge", "evidence"], resamples=0)
    assert {"axis": "evidence", "within": "judge"} in result["aliasing"]["nested"]
    assert any("'evidence' is constant within each option of judge" in n for n in result["notes"])
    assert result["noise"] is None


def test_projection_sums_equal_anova_lm_on_an_unbalanced_grid():
    from multiverse.analysis.variance._noise import projection_sums
    from multiverse.analysis.variance._terms import _design

    rng = np.random.default_rng(3)
    rows = [{"A": f"a{a}", "B": f"b{b}", "system": f"s{s}", "rate": rng.random()}
            for a, b, s in itertools.product(range(3), range(2), range(3)) if rng.random() > 0.2]
    rates = pd.DataFrame(rows)
    frame, _, _, terms = _design(rates, ["A", "B"])
    y = rates["rate"].to_numpy()
    sums = projection_sums(frame, terms)(np.column_stack([y - y.mean(), y]))
    table = anova_lm(ols("rate ~ C(A) + C(B) + C(system) + C(A):C(system) + C(B):C(system)", data=rates).fit(), typ=2)
    expected = [table.loc[f, "sum_sq"] for f in ("C(A)", "C(B)", "C(system)", "C(A):C(system)",
                                                  "C(B):C(system)", "Residual")]
    np.testing.assert_allclose(sums[:, 0], expected, atol=1e-10)
    np.testing.assert_allclose(sums[:-1, 1], expected[:-1], atol=1e-10)  # centring does not matter



@pytest.mark.parametrize("shuffle", [False, True])
def test_balanced_sums_equal_anova_lm_and_repeat_any_layout(shuffle):
    # On a full factorial the rates are laid out as options x systems and every mean is a reduction:
    # the sums of squares are anova_lm's whatever the row order; a combination given twice (and one
    # missing) is no full factorial, and the group indicators take over.
    from multiverse.analysis.variance._noise import _indicator_sums_function, balanced_sums_function
    from multiverse.analysis.variance._terms import _design

    rng = np.random.default_rng(4)
    rows = [{"A": f"a{a}", "B": f"b{b}", "system": f"s{s}", "rate": rng.random()}
            for a, b, s in itertools.product(range(3), range(4), range(3))]
    rates = pd.DataFrame(rows).sample(frac=1, random_state=1) if shuffle else pd.DataFrame(rows)
    frame, varying, names, terms = _design(rates, ["A", "B"])
    y = rates["rate"].to_numpy()
    sums = balanced_sums_function(frame, [names[a] for a in varying], terms)(np.column_stack([y, y[::-1]]))
    table = anova_lm(ols("rate ~ C(A) + C(B) + C(system) + C(A):C(system) + C(B):C(system)", data=rates).fit(), typ=2)
    expected = [table.loc[f, "sum_sq"] for f in ("C(A)", "C(B)", "C(system)", "C(A):C(system)",
                                                  "C(B):C(system)", "Residual")]
    np.testing.assert_allclose(sums[:, 0], expected, atol=1e-12)
    other = frame["x1"][frame["x1"] != frame["x1"].iloc[0]].iloc[0]
    frame.loc[frame.index[0], "x1"] = other  # one combination twice, another missing
    columns = [names[a] for a in varying]
    again = balanced_sums_function(frame, columns, terms)(y[:, None])
    np.testing.assert_array_equal(again, _indicator_sums_function(frame, columns, terms)(y[:, None]))
    assert not np.allclose(again[:, 0], sums[:, 0])

# --------------------------------------------------------------------------- sampling noise


def _noisy_world(rng, effect: float, cases: int = 36) -> pd.DataFrame:
    """3 x 2 axes, 3 systems, cases shared by every universe; the axis A shifts the logit by ``effect``."""
    difficulty = rng.normal(0, 1, cases)
    rows = []
    for a, b in itertools.product(range(3), range(2)):
        for s, base in enumerate((0.5, 1.0, 1.5)):
            p = 1 / (1 + np.exp(-(base + difficulty + effect * (a - 1))))
            rows += [{"A": f"a{a}", "B": f"b{b}", "system": f"s{s}", "case_id": c, "compliant": bool(x)}
                     for c, x in enumerate(rng.random(cases) < p)]
    return pd.DataFrame(rows)


def test_null_world_shares_sit_at_the_noise_floor_and_intervals_cover_zero():
    rng = np.random.default_rng(0)
    covered, shares, floors = [], [], []
    for rep in range(30):
        result = variance(_noisy_world(rng, 0.0), axes=["A", "B"], resamples=100, seed=rep)
        terms = {t["term"]: t for t in result["terms"]}
        for name in ("A", "B", "A:system", "B:system"):
            covered.append(terms[name]["low"] <= 0 <= terms[name]["high"])
        shares.append(terms["A"]["share"])
        floors.append(terms["A"]["noise"])
        assert 0 < result["noise"]["noise_floor"] < 1
    assert np.mean(covered) >= 0.9
    # No effect: the axis's share is its noise floor, on average.
    assert np.mean(shares) == pytest.approx(np.mean(floors), rel=0.35)


def test_a_real_axis_effect_is_beyond_noise():
    rng = np.random.default_rng(1)
    result = variance(_noisy_world(rng, 1.2), axes=["A", "B"], resamples=100)
    a = next(t for t in result["terms"] if t["term"] == "A")
    assert a["low"] > 0 and a["beyond_noise"] > 0.3
    b = next(t for t in result["terms"] if t["term"] == "B")
    assert b["low"] <= 0 <= b["high"]


def _strong_axis_few_cases(seed: int) -> pd.DataFrame:
    """Axis A moves every rate by 0.4 and only 12 cases back each rate: resamples often spread the rates more
    than the observed ones, so the raw interval of A's share reaches past 100%."""
    rng = np.random.default_rng(seed)
    rows = [{"A": a, "B": b, "system": s, "case_id": c, "compliant": bool(rng.random() < p + shift)}
            for a, p in (("a0", 0.3), ("a1", 0.7)) for b in ("b0", "b1") for s, shift in (("s0", 0), ("s1", 0.05))
            for c in range(12)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(3))
def test_shares_beyond_noise_and_their_intervals_stay_within_0_and_100_percent(seed):
    result = variance(_strong_axis_few_cases(seed), axes=["A", "B"], resamples=200, seed=seed)
    rows = result["terms"] + result["by_axis"]
    for row in rows:
        assert 0.0 <= row["low"] <= row["high"] <= 1.0, row
        assert 0.0 <= row["beyond_noise"] <= 1.0 and "clipped_above" not in row
    a = next(t for t in result["terms"] if t["term"] == "A")
    # A's share is most of the variance, on 12 cases: resampled rates spread wider than the observed ones
    assert a["high"] == 1.0 and a["clipped"] and a["low"] > 0
    note = next(n for n in result["notes"] if "reached past 100%" in n)
    assert "term A" in note and "term B" not in note
    assert "[" in result["summary"][0] and "100.0%]" in result["summary"][0]


def test_an_interval_inside_0_and_100_percent_is_not_clipped_or_noted():
    result = variance(_noisy_world(np.random.default_rng(1), 1.2), axes=["A", "B"], resamples=100)
    a = next(t for t in result["terms"] if t["term"] == "A")
    assert 0 < a["low"] < a["high"] < 1 and not a["clipped"]
    assert not any("term A" in n for n in result["notes"])
    # A with A x system is most of the variance: its interval is the one that reached 100% and says so
    axis_a = next(r for r in result["by_axis"] if r["axis"] == "A")
    assert axis_a["clipped"] == axis_a["high"] == 1.0
    assert any("axis A (main effect and interaction together) reached past 100%" in n for n in result["notes"])


def test_cli_prints_every_note_and_marks_few_residual_df(tmp_path, capsys):
    from multiverse.cli import main

    cells = {(j, "strict" if j == "j1" else "lenient", s): p
             for j in ("j1", "j2") for s, p in (("A", 0.4), ("B", 0.7))}
    verdicts = _verdicts(cells)
    verdicts = verdicts[~((verdicts["judge"] == "j2") & (verdicts["system"] == "B"))]  # unbalanced too
    path = tmp_path / "v.csv"
    verdicts.to_csv(path, index=False)
    assert main(["variance", str(path), "--json"]) == 0
    import json

    result = json.loads(capsys.readouterr().out)
    assert main(["variance", str(path)]) == 0
    text = capsys.readouterr().out
    assert len(result["notes"]) >= 3
    for note in result["notes"]:
        assert f"note: {note}" in text
    assert "need not add up to 1 (here they add up to" in text
    assert "Residual (0 df)!" in text
    assert "judge!" in text and "evidence!" in text


def test_variance_figure_marks_each_terms_noise_floor():
    from multiverse.plots import plot_variance

    result = variance(_noisy_world(np.random.default_rng(2), 0.8), axes=["A", "B"], resamples=50)
    terms = pd.DataFrame(result["terms"])
    ax = plot_variance(terms)
    ticks = ax.collections[0].get_offsets()
    order = terms.sort_values("share", kind="stable")
    np.testing.assert_allclose(ticks[:, 0], order["noise"].to_numpy())
    assert "expected share from sampling noise alone" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert not plot_variance(variance_decomposition(balanced_rates(), axes=["A", "B"])).collections


def test_too_few_cases_for_the_noise_floor_are_noted():
    cells = {(j, "e", s): 0.5 for j in ("j1", "j2") for s in "AB"}
    result = variance(_verdicts(cells, cases=4), axes=["judge", "evidence"], resamples=20)
    assert any("only 4 case(s)" in n for n in result["notes"])
    assert not any("case(s)" in n for n in variance(_verdicts(cells, cases=12), axes=["judge"], resamples=20)["notes"])


def test_summary_says_which_axes_are_beyond_noise():
    rng = np.random.default_rng(1)
    result = variance(_noisy_world(rng, 1.2), axes=["A", "B"], resamples=100)
    lines = {line.split(":")[0]: line for line in result["summary"]}
    assert "Beyond sampling noise" in lines["A"] and "not distinguishable from noise" not in lines["A"]
    assert "not distinguishable from noise" in lines["B"]


def test_noise_is_the_same_whatever_number_of_resamples_is_drawn_at_once(monkeypatch):
    """Resamples are drawn and summed in batches as wide as memory allows (each batch reads the whole
    count matrix once); the draws and so the noise and intervals do not depend on the width."""
    from multiverse.analysis._kernel import _case_resampling as case_resampling

    world = _noisy_world(np.random.default_rng(4), 0.5)
    wide = variance(world, axes=["A", "B"], resamples=60, seed=2)
    for cells in (1, 18 * 7):  # one resample at a time; seven of the 18 cells' worth at a time
        monkeypatch.setattr(case_resampling, "_BATCH_CELLS", cells)
        monkeypatch.setattr(case_resampling, "_MATRIX_SHARE", 10**9)  # no wider batch for a large matrix
        narrow = variance(world, axes=["A", "B"], resamples=60, seed=2)
        for got, expected in zip(narrow["terms"], wide["terms"], strict=True):
            assert got.keys() == expected.keys()
            for key, value in expected.items():
                assert got[key] == (pytest.approx(value, rel=1e-12, abs=1e-15) if isinstance(value, float) else value)
