"""Ranking stability: ranks with ties, concordance, bootstrap intervals, flips, figures."""

from __future__ import annotations

import io
import itertools
import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau
from synthetic import verdicts_from_rates

from multiverse.analysis import (
    bootstrap_ranks,
    included_verdicts,
    kendall_tau_b,
    kendall_w,
    order_universes,
    rank_distribution,
    ranking,
    system_rates,
    universe_ranks,
)
from multiverse.errors import InputError
from multiverse.tables._tables import universe_ids

# Three universes of one axis; ties in u2 (A = B) and u3 (B = C).
HAND = {("u1",): {"A": 0.9, "B": 0.8, "C": 0.7},
        ("u2",): {"A": 0.8, "B": 0.8, "C": 0.9},
        ("u3",): {"A": 0.7, "B": 0.9, "C": 0.9}}


@pytest.fixture
def hand():
    return verdicts_from_rates(HAND, ["variant"])


# --------------------------------------------------------------------------- tables


def test_included_verdicts_drops_rows_that_do_not_count_and_derives_universe_ids():
    verdicts = pd.DataFrame({
        "judge": ["a", "a", "b", "b"], "system": ["S"] * 4, "case_id": ["c1", "c2", "c1", "c2"],
        "status": ["ok", "judge_failed", "ok", "excluded"],
        "compliant": pd.array([True, pd.NA, False, pd.NA], dtype="boolean"),
    })
    included = included_verdicts(verdicts, axes=["judge"])
    assert included["universe_id"].tolist() == universe_ids(verdicts.iloc[[0, 2]], ["judge"]).tolist()
    assert included["universe_id"].nunique() == 2
    assert included["compliant"].tolist() == [True, False]


@pytest.mark.parametrize("named", [True, False])
def test_resampled_rows_of_some_universes_are_those_rows_of_all(named):
    """Asked for a few universes (the ranking's primary), the same rows as taking them from all
    the counted rows, whether the table names its universes or they are derived from the axes."""
    from multiverse.analysis._kernel import resampled_rows

    verdicts = verdicts_from_rates({(v, j): {"A": 0.7, "B": 0.4} for v in "xyz" for j in "pq"}, ["variant", "judge"])
    verdicts.loc[verdicts.index[::7], "status"] = "judge_failed"
    if not named:
        verdicts = verdicts.drop(columns="universe_id")
    everything = resampled_rows(verdicts, ["variant", "judge"])
    wanted = everything["universe_id"].drop_duplicates().iloc[[4, 1]].tolist()
    some = resampled_rows(verdicts, ["variant", "judge"], universes=wanted)
    expected = everything[everything["universe_id"].isin(wanted)].reset_index(drop=True)
    assert len(some) and set(some["universe_id"]) == set(wanted)
    pd.testing.assert_frame_equal(some, expected)


def test_case_counts_count_named_cases_as_nunique_does():
    """A missing case id is a code of the count matrix but not a case the few-cases note may count."""
    from multiverse.analysis._kernel import case_counts, resampled_rows

    verdicts = verdicts_from_rates({("x",): {"A": 0.5}}, ["variant"])
    for missing in (False, True):
        table = verdicts.assign(case_id=verdicts["case_id"].where(verdicts.index % 5 > 0)) if missing else verdicts
        included = resampled_rows(table, ["variant"])
        counts = case_counts(included, included["universe_id"].unique().tolist(), ["A"])
        assert counts.named_cases == included["case_id"].nunique() == counts.n_cases - missing


def test_included_verdicts_names_a_missing_column():
    with pytest.raises(InputError, match="'case_id'"):
        included_verdicts(pd.DataFrame({"system": ["S"], "compliant": [True]}), axes=[])


def test_system_rates_match_plain_pandas(hand):
    rates = system_rates(hand, axes=["variant"])
    expected = (hand.groupby(["universe_id", "variant", "system"], sort=False)["compliant"]
                .agg(n="size", n_compliant="sum").reset_index())
    expected["n_compliant"] = expected["n_compliant"].astype(int)
    expected["rate"] = expected["n_compliant"] / expected["n"]
    pd.testing.assert_frame_equal(rates, expected, check_dtype=False)


# --------------------------------------------------------------------------- ranks


def test_competition_ranks_with_ties(hand):
    ranks = universe_ranks(system_rates(hand, axes=["variant"]))
    got = ranks.set_index(["universe_id", "system"])["rank"].to_dict()
    assert got == {("u1", "A"): 1, ("u1", "B"): 2, ("u1", "C"): 3,
                   ("u2", "C"): 1, ("u2", "A"): 2, ("u2", "B"): 2,
                   ("u3", "B"): 1, ("u3", "C"): 1, ("u3", "A"): 3}
    assert ranks.set_index(["universe_id", "system"])["rank_avg"][("u2", "A")] == 2.5


def test_rank_distribution_split_and_count(hand):
    ranks = universe_ranks(system_rates(hand, axes=["variant"]))
    split = rank_distribution(ranks).pivot(index="system", columns="rank", values="share")
    np.testing.assert_allclose(split.loc["A"], [1 / 3, 0.5 / 3, 1.5 / 3])
    np.testing.assert_allclose(split.loc["B"], [0.5 / 3, 2 / 3, 0.5 / 3])
    np.testing.assert_allclose(split.loc["C"], [1.5 / 3, 0.5 / 3, 1 / 3])
    np.testing.assert_allclose(split.sum(axis=0), 1.0)  # every position is filled once per universe
    count = rank_distribution(ranks, ties="count").pivot(index="system", columns="rank", values="share")
    np.testing.assert_allclose(count.loc["C"], [2 / 3, 0, 1 / 3])
    np.testing.assert_allclose(count.loc["B"], [1 / 3, 2 / 3, 0])


def test_ranking_summary_hand_worked(hand):
    # Without a declared primary none is assumed (issue 12, item 7): no flips are reported.
    undeclared = ranking(hand, axes=["variant"], bootstrap=0)
    assert undeclared["primary"] is None and undeclared["flips"] == []
    assert any("no primary universe is declared" in note for note in undeclared["notes"])
    result = ranking(hand, axes=["variant"], primary="u1", bootstrap=0)
    assert result["systems"] == ["A", "B", "C"]
    assert result["primary"] == "u1"
    assert result["p_top"] == pytest.approx({"A": 1 / 3, "B": 1 / 6, "C": 1 / 2})
    assert sum(result["p_top"].values()) == pytest.approx(1.0)
    assert result["rank_distribution"]["A"] == pytest.approx([1 / 3, 1 / 6, 1 / 2])
    assert result["p_above"]["A"]["B"] == pytest.approx(0.5)  # above, tie, below
    assert result["p_above"]["A"]["C"] == pytest.approx(1 / 3)
    assert result["p_above"]["C"]["B"] == pytest.approx(0.5)
    for a, b in itertools.permutations("ABC", 2):
        assert result["p_above"][a][b] + result["p_above"][b][a] == pytest.approx(1.0)
    counted = ranking(hand, axes=["variant"], bootstrap=0, ties="count")
    assert counted["p_top"] == pytest.approx({"A": 1 / 3, "B": 1 / 3, "C": 2 / 3})


# --------------------------------------------------------------------------- concordance


def test_kendall_w_hand_worked_with_ties():
    # Ranks (1 = highest): u1 1 2 3 4; u2 1.5 1.5 3 4; u3 2 1 3.5 3.5.
    # Rank sums 4.5 4.5 9.5 11.5, mean 7.5 -> S = 9 + 9 + 4 + 16 = 38.
    # Ties: one pair in u2 and one in u3 -> sum (t^3 - t) = 6 + 6 = 12.
    # W = 12 * 38 / (3^2 * (4^3 - 4) - 3 * 12) = 456 / 504 = 19 / 21.
    rates = [[0.9, 0.8, 0.7, 0.6], [0.9, 0.9, 0.7, 0.6], [0.8, 0.9, 0.6, 0.6]]
    result = kendall_w(rates)
    assert result["w"] == pytest.approx(19 / 21)
    assert result["chi2"] == pytest.approx(3 * 3 * 19 / 21)
    assert result["df"] == 3
    assert 0 < result["p_value"] < 0.05
    assert kendall_w([[0.5, 0.4], [0.5, 0.4]])["w"] == pytest.approx(1.0)
    assert np.isnan(kendall_w([[0.5, 0.5], [0.3, 0.3]])["w"])


def test_kendall_tau_b_matches_scipy_with_ties():
    rng = np.random.default_rng(7)
    for _ in range(200):
        x, y = rng.integers(0, 4, 6) / 4, rng.integers(0, 4, 6) / 4
        expected = kendalltau(x, y, variant="b").statistic
        got = kendall_tau_b(x, y)
        if np.isnan(expected):
            assert np.isnan(got)
        else:
            assert got == pytest.approx(expected, abs=1e-12)


def _grid_rates(seed: int) -> tuple[dict, list[str]]:
    rng = np.random.default_rng(seed)
    axes = ["judge", "evidence", "setting"]
    options = [["j1", "j2", "j3"], ["strict", "lenient"], ["single", "multi"]]
    rates = {combo: {s: rng.integers(0, 5) / 4 for s in "ABCD"} for combo in itertools.product(*options)}
    return rates, axes


def test_kendall_tau_matrix_and_per_axis_summary_match_scipy():
    rates, axes = _grid_rates(11)
    result = ranking(verdicts_from_rates(rates, axes, cases=4), axes=axes, bootstrap=0)
    tau = result["kendall_tau"]
    combos = list(rates)
    vectors = {"/".join(c): [rates[c][s] for s in "ABCD"] for c in combos}
    matrix = np.array(tau["matrix"])
    for i, u in enumerate(tau["universes"]):
        for j, v in enumerate(tau["universes"]):
            expected = kendalltau(vectors[u], vectors[v], variant="b").statistic
            assert matrix[i, j] == pytest.approx(expected, abs=1e-12, nan_ok=True)
    every = [kendalltau(vectors[u], vectors[v], variant="b").statistic
             for u, v in itertools.combinations(vectors, 2)]
    assert tau["mean"] == pytest.approx(np.nanmean(every))
    for index, axis in enumerate(axes):
        same_elsewhere = [
            kendalltau(vectors["/".join(a)], vectors["/".join(b)], variant="b").statistic
            for a, b in itertools.combinations(combos, 2)
            if [x != y for x, y in zip(a, b)] == [k == index for k in range(len(axes))]
        ]
        summary = next(s for s in tau["by_axis"] if s["axis"] == axis)
        assert summary["n_pairs"] == np.sum(~np.isnan(same_elsewhere))
        assert summary["mean"] == pytest.approx(np.nanmean(same_elsewhere))
        assert summary["min"] == pytest.approx(np.nanmin(same_elsewhere))


def test_kendall_tau_matrix_is_left_out_for_many_universes():
    rates, axes = _grid_rates(2)
    result = ranking(verdicts_from_rates(rates, axes, cases=4), axes=axes, bootstrap=0, max_matrix=5)
    assert result["kendall_tau"]["matrix"] is None
    assert result["kendall_tau"]["by_axis"][0]["n_pairs"] > 0


# --------------------------------------------------------------------------- flips


def test_flips_report_the_smallest_set_of_changes():
    axes = ["judge", "evidence", "setting"]
    rates = {}
    for combo in itertools.product(["j1", "j2"], ["strict", "lenient"], ["single", "multi"]):
        judge, evidence, setting = combo
        if setting == "multi":
            rates[combo] = {"A": 0.6, "B": 0.5, "C": 0.9}  # setting alone flips the top to C
        elif judge == "j2" and evidence == "lenient":
            rates[combo] = {"A": 0.6, "B": 0.8, "C": 0.5}  # only both changes together give B
        else:
            rates[combo] = {"A": 0.8, "B": 0.6, "C": 0.5}
    result = ranking(verdicts_from_rates(rates, axes), axes=axes, primary="j1/strict/single", bootstrap=0)
    assert result["primary"] == "j1/strict/single"
    flips = {f["universe_id"]: f for f in result["flips"]}
    assert set(flips) == {"j1/strict/multi", "j1/lenient/multi", "j2/strict/multi",
                          "j2/lenient/multi", "j2/lenient/single"}
    assert flips["j2/lenient/multi"]["changes"] == {"setting": "multi"}
    assert flips["j2/lenient/multi"]["via_universe"] == "j1/strict/multi"
    assert flips["j2/lenient/multi"]["n_axes_differ"] == 3
    assert flips["j2/lenient/single"]["changes"] == {"judge": "j2", "evidence": "lenient"}
    assert flips["j2/lenient/single"]["top"] == ["B"]
    assert result["flips"][0]["changes"] == {"setting": "multi"}  # smallest change sets first
    assert result["flips"][-1]["universe_id"] == "j2/lenient/single"


def test_named_primary_must_exist(hand):
    assert ranking(hand, axes=["variant"], primary="u3", bootstrap=0)["primary"] == "u3"
    with pytest.raises(InputError, match="primary"):
        ranking(hand, axes=["variant"], primary="nowhere", bootstrap=0)


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_ranks_of_a_clear_winner_and_of_identical_systems():
    rows = []
    for case in range(20):
        labels = {"best": True, "worst": False, "twin_a": case % 2 == 0, "twin_b": case % 2 == 0}
        for system, compliant in labels.items():
            rows.append({"system": system, "case_id": f"c{case}", "compliant": compliant, "judge": "j"})
    verdicts = pd.DataFrame(rows)
    boot = bootstrap_ranks(verdicts, axes=["judge"], resamples=300, seed=1).set_index("system")
    assert boot.loc["best", ["rank", "rank_low", "rank_high", "p_top"]].tolist() == [1, 1, 1, 1.0]
    assert boot.loc["worst", ["rank", "rank_low", "rank_high", "p_top"]].tolist() == [4, 4, 4, 0.0]
    # The twins answer every resampled case alike (cases are resampled for all systems at once).
    assert boot.loc["twin_a", "rank"] == boot.loc["twin_b", "rank"] == 2
    assert boot.loc["twin_a", "rank_low"] == boot.loc["twin_a", "rank_high"] == 2


def test_bootstrap_is_seeded_and_brackets_the_observed_rank():
    rng = np.random.default_rng(5)
    verdicts = pd.DataFrame({
        "system": np.repeat(["A", "B", "C"], 60),
        "case_id": np.tile([f"c{i}" for i in range(60)], 3),
        "compliant": rng.random(180) < np.repeat([0.7, 0.65, 0.5], 60),
        "judge": "j",
    })
    first = bootstrap_ranks(verdicts, axes=["judge"], resamples=400, seed=3)
    second = bootstrap_ranks(verdicts, axes=["judge"], resamples=400, seed=3)
    pd.testing.assert_frame_equal(first, second)
    assert (first["rank_low"] <= first["rank"]).all() and (first["rank"] <= first["rank_high"]).all()
    assert first["p_top"].sum() == pytest.approx(1.0)
    result = ranking(verdicts, axes=["judge"], bootstrap=400, seed=3)
    assert [row["system"] for row in result["bootstrap"]] == ["A", "B", "C"]


# --------------------------------------------------------------------------- figures


def test_order_universes_puts_the_primary_first_then_by_distance():
    rates, axes = _grid_rates(4)
    order = order_universes(system_rates(verdicts_from_rates(rates, axes, cases=4), axes=axes), axes=axes)
    assert order["universe_id"].iloc[0] == "j1/strict/single"
    assert order["distance"].tolist() == sorted(order["distance"])
    assert order["distance"].tolist()[:1] == [0] and order["distance"].max() == 3


def test_rank_figures_with_many_universes():
    from multiverse.plots import plot_rank_bump, plot_rank_distribution

    rng = np.random.default_rng(0)
    axes = ["judge", "evidence", "user", "prompt"]
    options = [[f"j{i}" for i in range(5)], ["strict", "lenient"], [f"u{i}" for i in range(4)],
               [f"p{i}" for i in range(6)]]
    rates = {c: {f"system {s}": rng.integers(0, 9) / 8 for s in range(5)}
             for c in itertools.product(*options)}
    verdicts = verdicts_from_rates(rates, axes, cases=8)
    table = system_rates(verdicts, axes=axes)
    ranks = universe_ranks(table)
    order = order_universes(table, axes=axes)
    assert len(order) == 240
    ax = plot_rank_bump(ranks.merge(order, on="universe_id"), order=order["universe_id"],
                        group="distance", highlight=order["universe_id"].iloc[0])
    assert len(ax.get_legend().get_texts()) == 5
    assert ax.get_xlim() == (-0.5, 239.5)
    ax.figure.savefig(io.BytesIO(), format="png")
    ax = plot_rank_distribution(rank_distribution(ranks))
    assert [t.get_text() for t in ax.get_yticklabels()] != []
    ax.figure.savefig(io.BytesIO(), format="png")


def test_results_are_json_ready_with_numeric_options():
    import json

    rates = {(str(t),): {"A": 0.5 + t / 10, "B": 0.7 - t / 10} for t in range(3)}
    verdicts = verdicts_from_rates(rates, ["temperature"])
    verdicts["temperature"] = verdicts["temperature"].astype(int)
    verdicts["system"] = verdicts["system"].map({"A": 1, "B": 2})
    result = ranking(verdicts, axes=["temperature"], primary="0", bootstrap=20)
    text = json.dumps(result)
    # temperature 1 ties A and B (a different set of top systems), temperature 2 puts A on top.
    assert [f["changes"] for f in json.loads(text)["flips"]] == [{"temperature": 1}, {"temperature": 2}]
    from multiverse.analysis import agreement, variance

    json.dumps(agreement(verdicts.drop(columns="universe_id"), axes=["temperature"], axis="temperature"))
    json.dumps(variance(verdicts, axes=["temperature"]))


def test_ranking_figure_names_few_universes_by_their_options():
    from multiverse.plots import ranking_figure

    rates, axes = _grid_rates(3)
    figure = ranking_figure(system_rates(verdicts_from_rates(rates, axes, cases=4), axes=axes), axes=axes)
    bump = figure.axes[0]
    assert bump.get_xticklabels()[0].get_text() == "j1 / strict / single"
    figure.savefig(io.BytesIO(), format="png")


# --------------------------------------------------------------------------- unbalanced tables


def _unbalanced(seed: int = 0, judges: int = 4, systems: int = 24, cases: int = 12) -> pd.DataFrame:
    """Each judge rates its own subset of systems; only one system is rated by every judge."""
    rng = np.random.default_rng(seed)
    names = [f"s{i:02d}" for i in range(systems)]
    rows = []
    for j in range(judges):
        # s00 everywhere; the rest split so that judges overlap in a few systems only.
        subset = [names[0]] + [n for i, n in enumerate(names[1:], 1) if i % judges in (j, (j + 1) % judges)]
        for system in subset:
            p = rng.uniform(0.2, 0.9)
            for case in range(cases):
                rows.append({"judge": f"j{j}", "system": system, "case_id": f"c{case}",
                             "compliant": bool(rng.random() < p)})
    return pd.DataFrame(rows)


def test_unbalanced_p_top_and_rank_distribution_are_over_all_universes():
    verdicts = _unbalanced()
    result = ranking(verdicts, axes=["judge"], bootstrap=0)
    assert sum(result["p_top"].values()) == pytest.approx(1.0)
    rates = system_rates(verdicts, axes=["judge"])
    for system, shares in result["rank_distribution"].items():
        coverage = rates.loc[rates["system"] == system, "universe_id"].nunique() / 4
        assert result["coverage"][system] == pytest.approx(coverage)
        assert sum(shares) == pytest.approx(coverage)
    # Each universe's top counts 1/4, whoever it is among the systems that universe rates.
    expected = {}
    for _, rows in rates.groupby("universe_id"):
        best = rows[rows["rate"] == rows["rate"].max()]["system"]
        for s in best:
            expected[s] = expected.get(s, 0.0) + 0.25 / len(best)
    assert {s: p for s, p in result["p_top"].items() if p} == pytest.approx(expected)
    assert any("unbalanced" in n for n in result["notes"])


def test_unbalanced_tau_per_pair_over_shared_systems_matches_scipy():
    verdicts = _unbalanced(seed=3)
    result = ranking(verdicts, axes=["judge"], bootstrap=0)
    rates = system_rates(verdicts, axes=["judge"]).pivot(index="universe_id", columns="system", values="rate")
    tau = result["kendall_tau"]
    matrix, shared = np.array(tau["matrix"], dtype=float), np.array(tau["n_systems"])
    expected_all = []
    for i, u in enumerate(tau["universes"]):
        for j, v in enumerate(tau["universes"]):
            both = rates.loc[[u, v]].dropna(axis=1)
            assert shared[i, j] == both.shape[1]
            expected = kendalltau(both.loc[u], both.loc[v]).statistic if both.shape[1] > 1 else np.nan
            assert matrix[i, j] == pytest.approx(expected, abs=1e-12, nan_ok=True)
            if i < j:
                expected_all.append((expected, both.shape[1]))
    taus, counts = np.array(expected_all).T
    kept = ~np.isnan(taus) & (counts >= 3)
    two = ~np.isnan(taus) & (counts == 2)
    assert kept.any()
    # The mean is over pairs sharing at least three systems: a two-system pair's tau is +-1.
    assert np.abs(taus[two]).tolist() == [1.0] * int(two.sum())
    assert tau["mean"] == pytest.approx(taus[kept].mean())
    assert tau["n_pairs"] + tau["n_pairs_two_systems"] + tau["n_pairs_undefined"] == 6
    assert (tau["n_pairs"], tau["n_pairs_two_systems"]) == (int(kept.sum()), int(two.sum()))
    assert any("only two systems" in note for note in result["notes"]) == bool(two.any())


def test_unbalanced_mean_tau_by_rated_pattern_equals_the_pairwise_mean():
    # Many universes, several rated patterns: the grouped sum must equal the plain mean of the matrix.
    rng = np.random.default_rng(9)
    rows = []
    for u in range(30):
        rated = [s for s in "ABCDEF" if rng.random() < 0.7] or ["A"]
        for s in rated:
            k = rng.integers(0, 6)
            rows += [{"variant": f"u{u:02d}", "system": s, "case_id": f"c{c}", "compliant": c < k}
                     for c in range(5)]
    result = ranking(pd.DataFrame(rows), axes=["variant"], bootstrap=0)
    matrix = np.array(result["kendall_tau"]["matrix"], dtype=float)
    shared = np.array(result["kendall_tau"]["n_systems"])[np.triu_indices(30, 1)]
    upper = matrix[np.triu_indices(30, 1)]
    kept = ~np.isnan(upper) & (shared >= 3)
    assert (~np.isnan(upper) & (shared == 2)).any()
    assert result["kendall_tau"]["mean"] == pytest.approx(upper[kept].mean())
    assert result["kendall_tau"]["n_pairs"] == int(kept.sum())
    assert result["kendall_tau"]["n_pairs_two_systems"] == int((~np.isnan(upper) & (shared == 2)).sum())


def test_mean_tau_leaves_out_pairs_sharing_two_systems():
    # u1..u3 rate A, B, C (two of them in reverse order); u4 and u5 share only A and B with them.
    rates = {("u1",): {"A": 0.9, "B": 0.5, "C": 0.1}, ("u2",): {"A": 0.8, "B": 0.6, "C": 0.7},
             ("u3",): {"A": 0.1, "B": 0.5, "C": 0.3}, ("u4",): {"A": 0.9, "B": 0.2, "D": 0.4},
             ("u5",): {"A": 0.7, "B": 0.1, "E": 0.3}}
    result = ranking(verdicts_from_rates(rates, ["variant"]), axes=["variant"], bootstrap=0)
    tau = result["kendall_tau"]
    vectors = {u: pd.Series(r) for (u,), r in rates.items()}
    full = [kendalltau(vectors[a][list("ABC")], vectors[b][list("ABC")]).statistic
            for a, b in (("u1", "u2"), ("u1", "u3"), ("u2", "u3"))]
    # Every pair with u4 or u5 shares two systems (A, B): tau +-1 whatever the rates.
    assert tau["mean"] == pytest.approx(np.mean(full))
    assert (tau["n_pairs"], tau["n_pairs_two_systems"], tau["n_pairs_undefined"]) == (3, 7, 0)
    everything = np.array(tau["matrix"], dtype=float)[np.triu_indices(5, 1)]
    assert tau["mean"] != pytest.approx(np.mean(everything))  # the old mean, pulled towards +-1
    assert any("leaves out 7 universe pairs that share only two systems" in n for n in result["notes"])
    by_axis = tau["by_axis"][0]
    assert (by_axis["n_pairs"], by_axis["n_pairs_two_systems"]) == (3, 7)
    assert by_axis["mean"] == pytest.approx(np.mean(full))


def test_kendall_w_uses_the_largest_complete_block():
    # u1..u3 rate A, B, C; u4 rates A, B only; u5 rates C, D only.
    rates = {("u1",): {"A": 0.9, "B": 0.5, "C": 0.1}, ("u2",): {"A": 0.8, "B": 0.6, "C": 0.2},
             ("u3",): {"A": 0.7, "B": 0.1, "C": 0.5}, ("u4",): {"A": 0.3, "B": 0.6},
             ("u5",): {"C": 0.3, "D": 0.4}}
    result = ranking(verdicts_from_rates(rates, ["variant"]), axes=["variant"], bootstrap=0)
    w = result["kendall_w"]
    assert w["block_systems"] == ["A", "B", "C"] and w["universes"] == 3 and not w["complete"]
    block = [[rates[(u,)][s] for s in "ABC"] for u in ("u1", "u2", "u3")]
    assert w["w"] == pytest.approx(kendall_w(block)["w"])
    assert any("largest complete block: 3 of 5 universes x 3 of 4 systems" in n for n in result["notes"])
    disjoint = {("u1",): {"A": 0.9, "B": 0.5}, ("u2",): {"C": 0.8, "D": 0.6}}
    none = ranking(verdicts_from_rates(disjoint, ["variant"]), axes=["variant"], bootstrap=0)
    assert np.isnan(none["kendall_w"]["w"])
    assert any("no such block" in n for n in none["notes"])
    assert any("undefined for 1 of 1" in n for n in none["notes"])


# --------------------------------------------------------------------------- flips, exhaustively


@pytest.mark.parametrize("seed", range(4))
def test_every_flip_names_a_true_and_smallest_change(seed):
    rng = np.random.default_rng(seed)
    axes = ["a", "b", "c"]
    combos = list(itertools.product(["a0", "a1", "a2"], ["b0", "b1"], ["c0", "c1", "c2"]))
    rates = {c: {s: rng.integers(0, 4) / 3 for s in "XYZ"} for c in combos}
    result = ranking(verdicts_from_rates(rates, axes, cases=3), axes=axes, primary="/".join(combos[0]), bootstrap=0)

    def top(combo):
        best = max(rates[combo].values())
        return sorted(s for s, r in rates[combo].items() if r == best)

    primary = combos[0]
    flipped = [c for c in combos if top(c) != top(primary)]
    assert sorted(f["universe_id"] for f in result["flips"]) == sorted("/".join(c) for c in flipped)
    for flip in result["flips"]:
        combo = tuple(flip["universe_id"].split("/"))
        via = list(primary)
        for axis, option in flip["changes"].items():
            via[axes.index(axis)] = option
        assert "/".join(via) == flip["via_universe"]
        assert top(tuple(via)) == flip["top"] == top(combo)  # the claim "top X when ..." is true
        differ = [i for i in range(3) if combo[i] != primary[i]]
        for size in range(1, len(flip["changes"])):  # and nothing smaller makes it true
            for subset in itertools.combinations(differ, size):
                probe = list(primary)
                for i in subset:
                    probe[i] = combo[i]
                assert top(tuple(probe)) != flip["top"]


# --------------------------------------------------------------------------- uncertainty


def _first_universe(verdicts: pd.DataFrame) -> str:
    """The id the analyses give the first judge's universe of a bare table (declared primary in tests)."""
    return str(system_rates(included_verdicts(verdicts, axes=["judge"]), axes=["judge"])["universe_id"].iloc[0])


def _two_systems(rng, cases: int, p_a: float, p_b: float, universes: int = 3) -> pd.DataFrame:
    """Two systems answering the same cases in several universes; case difficulty is shared."""
    difficulty = rng.normal(0, 1, cases)
    rows = []
    for u in range(universes):
        for system, p in (("A", p_a), ("B", p_b)):
            logit = np.log(p / (1 - p)) + difficulty
            labels = rng.random(cases) < 1 / (1 + np.exp(-logit))
            rows += [{"judge": f"j{u}", "system": system, "case_id": f"c{c}", "compliant": bool(x)}
                     for c, x in enumerate(labels)]
    return pd.DataFrame(rows)


def test_identical_systems_are_not_separable_and_a_clear_winner_is():
    rng = np.random.default_rng(2)
    table = _two_systems(rng, 40, 0.6, 0.6)
    twins = ranking(table, axes=["judge"], primary=_first_universe(table), bootstrap=300, seed=1)
    pair = twins["uncertainty"]["adjacent"][0]
    assert not pair["separable"] and pair["low"] < 0.5 < pair["high"]
    low, high = twins["uncertainty"]["p_top"]["A"]
    assert low < 0.5 < high
    table = _two_systems(rng, 40, 0.95, 0.3)
    clear = ranking(table, axes=["judge"], primary=_first_universe(table), bootstrap=300, seed=1)
    pair = clear["uncertainty"]["adjacent"][0]
    assert (pair["a"], pair["b"], pair["separable"]) == ("A", "B", True) and pair["low"] > 0.5
    assert clear["uncertainty"]["p_top"]["A"][0] > 0.9
    assert clear["uncertainty"]["primary_rank"]["A"] == [1.0, 1.0]


def test_p_above_intervals_cover_one_half_under_the_null():
    rng = np.random.default_rng(4)
    tables = [_two_systems(rng, 30, 0.7, 0.7) for _ in range(30)]
    covered = [ranking(t, axes=["judge"], primary=_first_universe(t), bootstrap=150, seed=s)
               ["uncertainty"]["adjacent"][0]["separable"] is False for s, t in enumerate(tables)]
    assert np.mean(covered) >= 0.85


def test_pairwise_tests_are_exact_mcnemar_with_holm_from_statsmodels():
    from scipy.stats import binomtest
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(6)
    rows = [{"judge": "j", "system": s, "case_id": f"c{c}", "compliant": bool(rng.random() < p)}
            for c in range(30) for s, p in (("A", 0.9), ("B", 0.6), ("C", 0.5), ("D", 0.5))]
    verdicts = pd.DataFrame(rows)
    result = ranking(verdicts, axes=["judge"], bootstrap=0)
    pairs = result["pairwise"]["pairs"]
    assert len(pairs) == 6 and "6 pairs" in result["pairwise"]["family"]
    wide = verdicts.pivot(index="case_id", columns="system", values="compliant").astype(int)
    for q in pairs:
        d = (wide[q["a"]] - wide[q["b"]]).to_numpy()
        expected = binomtest(int((d > 0).sum()), int((d != 0).sum()), 0.5).pvalue if (d != 0).any() else 1.0
        assert q["p"] == pytest.approx(expected)
        assert q["difference"] == pytest.approx(d.mean())
    holm = multipletests([q["p"] for q in pairs], method="holm")[1]
    assert [q["p_holm"] for q in pairs] == pytest.approx(list(holm))


def test_pairwise_test_holds_its_level_with_replicates_under_the_null():
    from multiverse.analysis.ranking._uncertainty import _sign_flip_p

    rng = np.random.default_rng(8)
    rejections = []
    for _ in range(1000):
        difficulty = rng.normal(0, 1, 36)  # intra-case correlation through shared difficulty
        p_case = 1 / (1 + np.exp(-(1.0 + difficulty)))
        means = [(rng.random((3, 36)) < p_case).mean(0) for _ in "AB"]  # 3 replicates per case
        rejections.append(_sign_flip_p(means[0] - means[1], 500, rng) < 0.05)
    assert np.mean(rejections) <= 0.065


def test_cli_prints_every_flip_note_and_the_separability_in_words(tmp_path, capsys):
    from multiverse.cli import main

    rng = np.random.default_rng(0)
    axes = ["a", "b"]
    rates = {c: {s: rng.integers(0, 5) / 4 for s in "XYZ"}
             for c in itertools.product([f"a{i}" for i in range(6)], [f"b{i}" for i in range(4)])}
    rates[("a5", "b3")].pop("Z")  # unbalanced: a note must be printed
    verdicts = verdicts_from_rates(rates, axes, cases=4).drop(columns=["universe_id", "status"])
    path = tmp_path / "verdicts.csv"
    verdicts.to_csv(path, index=False)
    assert main(["ranking", str(path), "--boot", "50"]) == 0
    assert "no primary universe is declared: top flips are not reported" in capsys.readouterr().out
    imported = tmp_path / "imported"
    assert main(["import", "table", str(path), "--system", "system", "--item", "case_id", "--label", "compliant",
                 "--axis", "a", "--axis", "b", "--primary", "a=a0", "b=b0", "--out", str(imported)]) == 0
    capsys.readouterr()
    assert main(["ranking", str(imported), "--boot", "50"]) == 0
    text = capsys.readouterr().out
    assert main(["ranking", str(imported), "--boot", "50", "--json"]) == 0
    import json

    result = json.loads(capsys.readouterr().out)
    assert len(result["flips"]) > 10
    for flip in result["flips"]:
        assert f"{flip['universe_id']}: top {', '.join(flip['top'])} when " in text
    for note in result["notes"]:
        assert f"note: {note}" in text
    assert "separable" in text or "ranks above" in text
    assert "Holm" in text


def test_rank_distribution_figure_shows_where_unrated_universes_went():
    from multiverse.plots import plot_rank_distribution

    ranks = universe_ranks(system_rates(_unbalanced(seed=1), axes=["judge"]))
    ax = plot_rank_distribution(rank_distribution(ranks))
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[-1] == "not rated"
    values = ax.images[0].get_array()
    np.testing.assert_allclose(np.nansum(values, axis=1), 1.0)
    ax.figure.savefig(io.BytesIO(), format="png")


def test_cli_compares_only_systems_the_primary_rates(tmp_path, capsys):
    from multiverse.cli import main

    rates = {("u1",): {"A": 0.9, "B": 0.5}, ("u2",): {"C": 0.8, "D": 0.6}}
    verdicts = verdicts_from_rates(rates, ["variant"]).drop(columns=["universe_id", "status"])
    path = tmp_path / "v.csv"
    verdicts.to_csv(path, index=False)
    assert main(["import", "table", str(path), "--system", "system", "--item", "case_id", "--label", "compliant",
                 "--axis", "variant", "--primary", "variant=u1", "--out", str(tmp_path / "imported")]) == 0
    capsys.readouterr()
    assert main(["ranking", str(tmp_path / "imported"), "--boot", "30"]) == 0
    text = capsys.readouterr().out
    assert "A ranks above B" in text or "A and B are not separable" in text
    assert "B and C" not in text and "n/a [n/a" not in text
    assert "note: pairwise tests and neighbour comparisons cover the 2 systems rated in the primary" in text


def test_mean_tau_over_many_rated_patterns_is_estimated_from_sampled_pairs():
    from multiverse.analysis.ranking._concordance import tau_summary

    rng = np.random.default_rng(12)
    matrix = rng.integers(0, 5, (1500, 6)).astype(float)
    matrix[rng.random(matrix.shape) < 0.3] = np.nan  # dozens of rated patterns
    codes = np.arange(1500)[:, None]
    summary = tau_summary(matrix, codes, ["variant"], list(range(1500)), max_matrix=1500)
    assert summary["sampled_pairs"] == 1_000_000
    full = np.array(summary["matrix"], dtype=float)[np.triu_indices(1500, 1)]
    shared = np.array(summary["n_systems"])[np.triu_indices(1500, 1)]
    kept = ~np.isnan(full) & (shared >= 3)
    assert summary["mean"] == pytest.approx(full[kept].mean(), abs=0.01)
    assert summary["n_pairs"] == pytest.approx(kept.sum(), rel=0.01)
    assert summary["n_pairs_two_systems"] == pytest.approx((~np.isnan(full) & (shared == 2)).sum(), rel=0.02)


@pytest.mark.parametrize("seed", range(6))
def test_largest_complete_block_is_the_largest(seed):
    from multiverse.analysis.ranking._concordance import largest_complete_block

    rng = np.random.default_rng(seed)
    matrix = rng.random((9, 6))
    matrix[rng.random(matrix.shape) < 0.35] = np.nan
    rows, columns, exhaustive = largest_complete_block(matrix)
    rated = ~np.isnan(matrix)
    best = 0
    for size in range(2, 7):  # brute force over every set of systems
        for subset in itertools.combinations(range(6), size):
            n_rows = int(rated[:, list(subset)].all(1).sum())
            if n_rows >= 2:
                best = max(best, n_rows * size)
    assert exhaustive
    assert len(rows) * len(columns) == best
    if best:
        assert rated[np.ix_(rows, columns)].all()


def test_a_missing_primary_is_said_not_silently_assumed(hand):
    undeclared = ranking(hand, axes=["variant"], bootstrap=0)
    assert undeclared["primary"] is None and undeclared["primary_top"] == [] and undeclared["flips"] == []
    assert any("no primary universe is declared" in n for n in undeclared["notes"])
    named = ranking(hand, axes=["variant"], primary="u1", bootstrap=0)
    assert not any("no primary" in n for n in named["notes"])


@pytest.mark.parametrize("replicates, missing", [(1, 0.05), (2, 0.1), (1, 0.6)])
def test_resampled_label_sums_equal_the_matrix_product(replicates, missing):
    # Cells mostly hold the same number of labels per case: their resampled sums come from that
    # number and the sparse shortfall, equal to the dense product to the last bit (whole numbers);
    # with many cells short, the dense product itself is used.
    from multiverse.analysis._kernel import CaseCounts

    rng = np.random.default_rng(5)
    cells, cases = 40, 30
    rows, columns = (a.ravel().repeat(replicates) for a in np.meshgrid(np.arange(cells), np.arange(cases), indexing="ij"))
    keep = rng.random(len(rows)) > missing
    counts = CaseCounts(rows[keep].astype(np.int32), columns[keep].astype(np.int32),
                        rng.random(int(keep.sum())) < 0.6, cells, cases)
    assert (counts._missing is None) == (missing > 0.25)
    weights = counts.weights(rng, 7)
    compliant, labels = counts.sums(weights)
    np.testing.assert_array_equal(labels, counts.n @ weights)
    np.testing.assert_array_equal(compliant, counts.k @ weights)


@pytest.mark.parametrize("labels", ["booleans", "scores"])
def test_case_counts_are_the_sums_of_their_rows(labels):
    """The dense count matrices hold, per cell and case, the number of rows and the sum of their labels:
    checked against scipy's sparse sums (booleans, whole numbers: exact) and against float32 additions in
    row order (scores' contributions: the same bits), with repeated and empty cells."""
    from scipy.sparse import coo_matrix

    from multiverse.analysis._kernel import CaseCounts

    rng = np.random.default_rng(11)
    cells, cases, n = 300, 40, 20_000
    rows, columns = rng.integers(0, cells - 10, n), rng.integers(0, cases, n)  # the last cells stay empty
    values = rng.random(n) < 0.3 if labels == "booleans" else rng.random(n)
    counts = CaseCounts(rows, columns, values, cells, cases)
    expected_n = coo_matrix((np.ones(n), (rows, columns)), shape=(cells, cases)).toarray()
    np.testing.assert_array_equal(counts.n, expected_n.astype(np.float32))
    if labels == "booleans":
        expected_k = coo_matrix((values.astype(float), (rows, columns)), shape=(cells, cases)).toarray().astype(np.float32)
    else:
        expected_k = np.zeros((cells, cases), dtype=np.float32)
        np.add.at(expected_k, (rows, columns), values.astype(np.float32))
    np.testing.assert_array_equal(counts.k, expected_k)
    assert counts.n.dtype == counts.k.dtype == np.float32 and not counts.n[-10:].any()


def test_joint_bootstrap_is_the_same_whatever_number_of_resamples_is_drawn_at_once(monkeypatch):
    """The joint bootstrap draws its resamples in batches as wide as memory allows; the intervals are the
    same bit for bit at any width (one draw of weights per resample, in the same order)."""
    from multiverse.analysis._kernel import _case_resampling as case_resampling

    verdicts = _unbalanced(seed=3)
    wide = ranking(verdicts, axes=["judge"], primary=_first_universe(verdicts), bootstrap=40, seed=1)["uncertainty"]
    for cells in (1, 3 * 24 * 4):
        monkeypatch.setattr(case_resampling, "_BATCH_CELLS", cells)
        monkeypatch.setattr(case_resampling, "_MATRIX_SHARE", 10**9)  # no wider batch for a large matrix
        narrow = ranking(verdicts, axes=["judge"], primary=_first_universe(verdicts), bootstrap=40, seed=1)
        assert json.dumps(narrow["uncertainty"]) == json.dumps(wide)  # NaN (a pair never rated together) equal too



@pytest.mark.parametrize("ties", ["split", "count"])
def test_bootstrap_shares_counted_in_parts_are_the_whole_counts_bit_for_bit(ties):
    """The joint bootstrap counts a batch's universes in parts, one per core; the parts' counts add up to
    the whole's, so the shares are the same to the bit, with ties, unrated cells and parts of any size
    (a part of one universe, and one that rates nothing)."""
    from multiverse.analysis.ranking._uncertainty import (
        _above_counts,
        _above_shares,
        _above_shares_of,
        _top_counts,
        _top_shares,
        _top_shares_of,
    )

    rng = np.random.default_rng(23)
    n_s, size, n_u = 5, 7, 401
    rates = rng.integers(0, 5, (n_s, size, n_u)) / 4.0
    rates[rng.random(rates.shape) < 0.1] = np.nan
    rates[:, :, 200:210] = np.nan
    for edges in ([0, 1, n_u], [0, 200, 210, n_u], [0, 97, 98, 300, n_u]):
        parts = [slice(a, b) for a, b in itertools.pairwise(edges)]
        top = _top_shares_of([_top_counts(rates[:, :, p], ties) for p in parts], n_u, (n_s, size))
        assert np.array_equal(top, _top_shares(rates, ties))
        above = _above_shares_of(np.sum([_above_counts(rates[:, :, p]) for p in parts], axis=0))
        assert np.array_equal(above, _above_shares(rates), equal_nan=True)


def test_joint_bootstrap_is_the_same_whatever_number_of_parts_counts_it(monkeypatch):
    """In one part, or in as many as the process has cores (threads), the intervals are the same bit for bit."""
    from multiverse.analysis._kernel import _cores

    verdicts = _unbalanced(seed=5)
    monkeypatch.setattr(_cores, "PART_VALUES", 10**12)  # one part
    whole = ranking(verdicts, axes=["judge"], primary=_first_universe(verdicts), bootstrap=60, seed=2)["uncertainty"]
    monkeypatch.setattr(_cores, "PART_VALUES", 1)
    monkeypatch.setattr(_cores.os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    parts = _cores.Parts(24, 4)
    assert len(parts.slices) == 4 and parts.slices[0].start == 0 and parts.slices[-1].stop == 24
    split = ranking(verdicts, axes=["judge"], primary=_first_universe(verdicts), bootstrap=60, seed=2)["uncertainty"]
    assert json.dumps(split) == json.dumps(whole)

# --------------------------------------------------------------------------- flips, against the plain search


def _reference_flips(matrix, codes, axes, universes, systems, primary, option_names):
    """The flips search as it first read, one probe at a time (the specification ``_flips`` must reproduce)."""
    from multiverse.analysis.ranking._ranking import _top_keys

    top, tops = _top_keys(matrix)
    by_codes = {tuple(row): u for u, row in enumerate(codes.tolist())}  # equal codes: the last universe
    base = codes[primary]
    flips = []
    for u in np.flatnonzero(tops != tops[primary]).tolist():
        differ = [a for a in range(codes.shape[1]) if codes[u][a] != base[a]]
        found, via = differ, u
        for subset in itertools.chain.from_iterable(
                itertools.combinations(differ, size) for size in range(1, len(differ))):
            probe = base.copy()
            probe[list(subset)] = codes[u][list(subset)]
            candidate = by_codes.get(tuple(probe.tolist()))
            if candidate is not None and tops[candidate] == tops[u]:
                found, via = list(subset), candidate
                break
        flips.append({
            "universe_id": universes[u],
            "top": [systems[s] for s, t in enumerate(top[u].tolist()) if t],
            "changes": {axes[a]: option_names[a][codes[u][a]] for a in found},
            "n_axes_differ": len(differ),
            "via_universe": universes[via],
        })
    flips.sort(key=lambda f: (len(f["changes"]), f["n_axes_differ"], str(f["universe_id"])))
    return flips


def _random_flip_case(rng, n_axes: int, options: list[int], n_systems: int, keep: float = 0.7,
                      nan: float = 0.1) -> tuple:
    """A grid with combinations dropped, rows repeated (equal codes), ties and NaN rates (some universes
    rate nothing), codes spaced out at random, and a random primary: the arguments of ``_flips``. The rates
    are a few patterns (so top sets recur) with NaN at random."""
    grid = np.indices(options).reshape(n_axes, -1).T
    codes = grid[rng.random(len(grid)) < keep]
    if not len(codes):
        codes = grid[rng.integers(len(grid), size=1)]
    repeats = codes[rng.integers(len(codes), size=rng.integers(0, len(codes) // 3 + 2))]
    codes = rng.permutation(np.concatenate([codes, repeats]))
    spacing = int(rng.choice([1, 3]))  # codes need not be 0..n-1
    codes = codes * spacing
    patterns = rng.integers(0, 3, (int(rng.integers(2, 6)), n_systems)) / 2  # few values: many ties
    matrix = patterns[rng.integers(len(patterns), size=len(codes))]
    matrix[rng.random(matrix.shape) < nan] = np.nan
    matrix[rng.random(len(codes)) < 0.05] = np.nan
    axes = [f"axis{a}" for a in range(n_axes)]
    universes = [f"u{i}" for i in rng.permutation(len(codes))]
    systems = [f"s{s}" for s in range(n_systems)]
    names = [[f"{axis}-o{c}" for c in range(spacing * n)] for axis, n in zip(axes, options)]
    return matrix, codes, axes, universes, systems, int(rng.integers(len(codes))), names


def _assert_same_flips(got, expected):
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)  # the same order of changes, and JSON-ready types


@pytest.mark.parametrize("search", ["arrays", "loop"])
def test_flips_equal_the_plain_search_on_random_grids(search, monkeypatch):
    """``_flips`` (numpy search, and its one-probe-at-a-time fallback) gives the reference's list on random
    grids: the same universes, changes, via universes and order."""
    from importlib import import_module

    if search == "loop":
        monkeypatch.setattr(import_module("multiverse.analysis.ranking._ranking"), "_search_by_arrays", lambda *args: False)
    from multiverse.analysis.ranking._ranking import _flips

    rng = np.random.default_rng(2024)
    smaller = 0
    for _ in range(60):
        n_axes = int(rng.integers(1, 7))
        case = _random_flip_case(rng, n_axes, rng.integers(1, 5, n_axes).tolist(), int(rng.integers(2, 8)))
        expected = _reference_flips(*case)
        _assert_same_flips(_flips(*case), expected)
        smaller += sum(len(f["changes"]) < f["n_axes_differ"] for f in expected)
    assert smaller > 50  # the cases do exercise the search, not only "every difference"


@pytest.mark.parametrize("n_axes, options, n_systems, keep", [
    (1, [12], 5, 0.8),              # one axis: no smaller change exists
    (10, [2] * 10, 4, 0.3),         # many axes, sparse grid
    (3, [25, 30, 2], 3, 0.5),       # axes with many options
    (4, [3, 3, 3, 2], 70, 0.9),     # more than 62 systems: top sets as bytes (few NaN, or every set differs)
    (17, [2] * 17, 3, 0.004),       # more than 16 axes: the loop
])
def test_flips_equal_the_plain_search_on_wide_grids(n_axes, options, n_systems, keep):
    from multiverse.analysis.ranking._ranking import _flips

    rng = np.random.default_rng(n_axes * 100 + n_systems)
    case = _random_flip_case(rng, n_axes, options, n_systems, keep, nan=0.002 if n_systems > 62 else 0.1)
    _assert_same_flips(_flips(*case), _reference_flips(*case))


def test_flips_equal_the_plain_search_when_keys_would_overflow_int64():
    """600 distinct codes on each of 7 axes: the product passes int64, and the loop answers."""
    from multiverse.analysis.ranking._ranking import _flips

    rng = np.random.default_rng(7)
    codes = np.concatenate([np.stack([rng.permutation(600) for _ in range(7)], 1), np.zeros((200, 7), int)])
    codes[600:700] = codes[0]  # one change from the primary, then the same with a second: probes hit
    codes[np.arange(600, 700), rng.integers(7, size=100)] = rng.integers(600, size=100)
    codes[650:700] = codes[600:650]
    codes[np.arange(650, 700), rng.integers(7, size=50)] = rng.integers(600, size=50)
    codes[700:] = codes[rng.integers(700, size=100)]  # and repeated rows
    assert np.prod([len(np.unique(column)) for column in codes.T], dtype=object) > np.iinfo(np.int64).max
    matrix = rng.integers(0, 3, (800, 3)) / 2
    matrix[650:675] = matrix[600:625]
    names = [[f"o{c}" for c in range(600)] for _ in range(7)]
    case = (matrix, codes, [f"axis{a}" for a in range(7)], [f"u{i}" for i in range(800)], ["A", "B", "C"], 0, names)
    _assert_same_flips(_flips(*case), _reference_flips(*case))


@pytest.mark.parametrize("ties", ["split", "count"])
def test_bootstrap_shares_of_a_batch_are_the_plain_per_universe_shares(ties):
    """A batch's P(top) and P(a above b), counted over contiguous universes, against the plain
    computation universe by universe (``top_shares`` and pairwise comparisons), with ties (few distinct
    rates), unrated cells and universes that rate nothing."""
    from multiverse.analysis.ranking._uncertainty import _above_shares, _top_shares, top_shares

    rng = np.random.default_rng(17)
    n_s, size, n_u = 4, 6, 300
    rates = rng.integers(0, 4, (n_s, size, n_u)) / 3.0
    rates[rng.random(rates.shape) < 0.15] = np.nan
    rates[:, :, :5] = np.nan  # universes rating no system
    by_resample = rates.transpose(1, 2, 0)  # resample x universe x system
    expected_top = np.stack([top_shares(by_resample[r], ties).mean(0) for r in range(size)])
    np.testing.assert_allclose(_top_shares(rates, ties), expected_top, rtol=1e-12)
    above = _above_shares(rates)
    for r, a, b in itertools.product(range(size), range(n_s), range(n_s)):
        x, y = by_resample[r, :, a], by_resample[r, :, b]
        both = ~np.isnan(x) & ~np.isnan(y)
        expected = ((x[both] > y[both]).sum() + 0.5 * (x[both] == y[both]).sum()) / both.sum()
        assert above[r, a, b] == pytest.approx(expected, rel=1e-12)
