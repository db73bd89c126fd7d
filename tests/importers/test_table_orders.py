"""Pairwise verdicts asked in both orders (issue 44 items 1-3): the order column, three-way verdicts, each judge's
consistency, position bias and kappa between orders, the combined games, held to pandas, sklearn and krippendorff."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pandas as pd
import pytest
from cli_runner import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from multiverse.analysis import order_consistency, verdict_agreement
from multiverse.errors import InputError
from multiverse.importers import import_table

ARGS = ["--system", "model", "--item", "item", "--verdict", "verdict", "--reference", "ref", "--order", "order",
        "--axis", "judge"]
_SIDE = {("ab", "A"): "win", ("ab", "B"): "loss", ("ba", "A"): "loss", ("ba", "B"): "win"}


def _games(seed: int = 3, n_items: int = 80) -> pd.DataFrame:
    """Two judges asking every pair both ways: ``lean`` favours the first transcript strongly, ``fair`` barely."""
    rng = np.random.default_rng(seed)
    rows = []
    for judge, bias, noise in (("lean", 0.35, 0.25), ("fair", 0.03, 0.08)):
        for model, quality in (("atlas", 0.3), ("beacon", -0.1), ("ref", 0.0)):
            for item in range(n_items):
                difference = quality + rng.normal(0, 0.3)
                for order in ("ab", "ba"):
                    first = (difference if order == "ab" else -difference) + bias + rng.normal(0, noise)
                    verdict = "A" if first > 0.15 else "B" if first < -0.15 else "tie"
                    rows.append({"judge": judge, "model": model, "item": f"i{item:03d}", "order": order,
                                 "verdict": "tie" if model == "ref" else verdict})
    return pd.DataFrame(rows)


def _system_side(frame: pd.DataFrame) -> pd.Series:
    return pd.Series([_SIDE.get((o, v), "tie") for o, v in zip(frame["order"], frame["verdict"])], index=frame.index)


def _reference(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Each judge's numbers by pandas and sklearn, from the table as written (A is always the first shown)."""
    games = frame[frame["model"] != "ref"].assign(side=_system_side)
    out = {}
    for judge, part in games.groupby("judge"):
        wide = part.pivot(index=["model", "item"], columns="order", values="side")
        decisive = part[part["verdict"] != "tie"]
        raw = part.pivot(index=["model", "item"], columns="order", values="verdict")
        out[judge] = {"consistency": (wide["ab"] == wide["ba"]).mean(),
                      "favours_first": ((raw["ab"] == "A") & (raw["ba"] == "A")).mean(),
                      "favours_second": ((raw["ab"] == "B") & (raw["ba"] == "B")).mean(),
                      "ties": (part["verdict"] == "tie").mean(),
                      "position_bias": (decisive["verdict"] == "A").mean(),
                      "cohen_kappa": cohen_kappa_score(wide["ab"], wide["ba"]),
                      "n": len(wide)}
    return out


def test_each_judges_consistency_position_bias_and_kappa_between_orders_equal_pandas(tmp_path):
    frame = _games()
    frame.to_csv(tmp_path / "games.csv", index=False)
    run_cli(["import", "table", tmp_path / "games.csv", *ARGS, "--out", tmp_path / "run"]).ok()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert (manifest["input"]["order"], manifest["input"]["verdict"]) == ("order", "verdict")
    result = run_cli(["agreement", tmp_path / "run", "--axis", "order", "--json"])
    orders = {o["group"]["judge"]: o for o in json.loads(result.ok())["orders"]}
    expected = _reference(frame)
    assert set(orders) == {"lean", "fair"}
    for judge, want in expected.items():
        got = orders[judge]
        assert got["n"] == want["n"] == 160
        for measure in ("consistency", "position_bias", "cohen_kappa", "favours_first", "favours_second", "ties"):
            assert got[measure] == pytest.approx(want[measure], abs=1e-12), (judge, measure)
    # Per judge, never pooled: the pooled consistency sits between the two and describes neither.
    games = frame[frame["model"] != "ref"].assign(side=_system_side)
    pooled = games.pivot(index=["judge", "model", "item"], columns="order", values="side")
    pooled_consistency = (pooled["ab"] == pooled["ba"]).mean()
    assert orders["lean"]["consistency"] < pooled_consistency - 0.1 < orders["fair"]["consistency"] - 0.2
    assert orders["lean"]["position_bias"] > 0.7 > orders["fair"]["position_bias"]
    text = run_cli(["agreement", tmp_path / "run", "--axis", "order"]).ok()
    assert "judge=lean" in text and "judge=fair" in text and "position bias" in text
    # The same through --by judge (issue 44's "one agreement --by judge"): each group's orders are that judge's,
    # in the JSON and in the one table the text prints.
    grouped = json.loads(run_cli(["agreement", tmp_path / "run", "--axis", "order", "--by", "judge", "--json"]).ok())
    assert [g["group"] for g in grouped["groups"]] == sorted(orders, key=list(frame["judge"]).index)
    for group in grouped["groups"]:
        assert group["document"]["orders"] == [orders[group["group"]]]
    by_text = run_cli(["agreement", tmp_path / "run", "--axis", "order", "--by", "judge"]).ok().splitlines()
    for judge, want in expected.items():
        row = next(line for line in by_text if line.startswith(f"judge={judge} ") and "  160  " in line).split()
        assert [float(x) for x in row[2:4]] == [round(want["consistency"], 3), round(want["position_bias"], 3)]


def test_an_axis_that_repeats_the_judgments_makes_no_groups_of_its_own(tmp_path):
    frame = _games(seed=9, n_items=30)
    frame.to_csv(tmp_path / "games.csv", index=False)
    # A cut adds a scoring axis over the same judgments: still one row per judge, the same numbers.
    run_cli(["import", "table", tmp_path / "games.csv", *ARGS, "--cut", "1", "--out", tmp_path / "run"]).ok()
    document = json.loads(run_cli(["agreement", tmp_path / "run", "--axis", "order", "--json"]).ok())
    orders = {o["group"]["judge"]: o for o in document["orders"]}
    assert len(document["orders"]) == 2 and all(set(o["group"]) == {"judge"} for o in document["orders"])
    for judge, want in _reference(frame).items():
        assert orders[judge]["n"] == want["n"]
        assert orders[judge]["consistency"] == pytest.approx(want["consistency"], abs=1e-12)


def test_three_way_kappa_and_alpha_between_judges_equal_sklearn_and_krippendorff(tmp_path):
    frame = _games(seed=5)
    frame.to_csv(tmp_path / "games.csv", index=False)
    run_cli(["import", "table", tmp_path / "games.csv", *ARGS, "--out", tmp_path / "run"]).ok()
    document = json.loads(run_cli(["agreement", tmp_path / "run", "--axis", "judge", "--json"]).ok())
    games = frame[frame["model"] != "ref"].assign(side=_system_side)
    wide = games.pivot(index=["order", "model", "item"], columns="judge", values="side")
    (pair,) = document["verdicts"]["pairs"]
    assert (pair["a"], pair["b"], pair["n"]) == ("fair", "lean", len(wide))
    assert pair["cohen_kappa"] == pytest.approx(cohen_kappa_score(wide["fair"], wide["lean"]), abs=1e-12)
    assert pair["percent"] == pytest.approx((wide["fair"] == wide["lean"]).mean(), abs=1e-12)
    codes = wide.replace({"loss": 0, "tie": 1, "win": 2}).to_numpy(dtype=float).T
    alpha = krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal")
    assert document["verdicts"]["krippendorff_alpha"] == pytest.approx(alpha, abs=1e-12)
    assert "orders" not in document  # the judges are compared, not the orders


def test_win_rates_count_ties_as_half_and_the_combined_games_follow_their_rules(tmp_path):
    frame = _games(seed=7)
    frame.to_csv(tmp_path / "games.csv", index=False)
    run_cli(["import", "table", tmp_path / "games.csv", *ARGS, "--combine", "agree", "--combine", "mean",
             "--out", tmp_path / "run"]).ok()
    rates = pd.read_csv(tmp_path / "run" / "rates.csv")
    rates = rates[rates["subgroup"] == "all"].set_index(["judge", "order", "system"])["rate"]
    score = frame.assign(score=_system_side(frame).map({"win": 1.0, "tie": 0.5, "loss": 0.0}))
    wide = score.pivot(index=["judge", "model", "item"], columns="order", values="score")
    agree = np.where(np.sign(wide["ab"] - 0.5) == np.sign(wide["ba"] - 0.5), (wide["ab"] + wide["ba"]) / 2, 0.5)
    expected = {"ab": wide["ab"], "ba": wide["ba"], "mean": (wide["ab"] + wide["ba"]) / 2,
                "agree": pd.Series(agree, index=wide.index)}
    for option, values in expected.items():
        for (judge, model), want in values.groupby(level=["judge", "model"]).mean().items():
            assert rates[(judge, option, model)] == pytest.approx(want, abs=1e-12), (judge, option, model)


def test_correct_in_both_orders_is_a_scoring_option_of_each_judges_accuracy(tmp_path):
    # A judge benchmark: each judge is the system, an item its pair, ``correct`` whether it picked the better one.
    rng = np.random.default_rng(2)
    rows = [{"judge": judge, "item": f"p{i}", "order": order, "correct": bool(rng.random() < skill)}
            for judge, skill in (("alpha", 0.9), ("beta", 0.6)) for i in range(50) for order in ("ab", "ba")]
    frame = pd.DataFrame(rows)
    frame.to_csv(tmp_path / "bench.csv", index=False)
    run_cli(["import", "table", tmp_path / "bench.csv", "--system", "judge", "--item", "item", "--label", "correct",
             "--order", "order", "--combine", "both", "--out", tmp_path / "run"]).ok()
    rates = pd.read_csv(tmp_path / "run" / "rates.csv")
    rates = rates[rates["subgroup"] == "all"].set_index(["order", "system"])["rate"]
    both = frame.groupby(["judge", "item"])["correct"].all().groupby("judge").mean()
    single = frame.groupby(["order", "judge"])["correct"].mean()
    for judge, accuracy in both.items():
        assert rates[("both", judge)] == pytest.approx(accuracy, abs=1e-12)
        for order in ("ab", "ba"):
            assert rates[(order, judge)] == pytest.approx(single[(order, judge)], abs=1e-12)


@pytest.mark.parametrize(("change", "extra", "fragments"), [
    (lambda f: f.assign(order=f["order"].where(f.index != 5, "ac")), [], ("games.csv", "order", "'ac'", "row 6")),
    (lambda f: f.drop(index=[7]), [], ("games.csv", "order", "one order only", "both orders")),
    (lambda f: f.assign(verdict=f["verdict"].where(f.index != 2, "C")), [], ("games.csv", "verdict", "'C'")),
    (lambda f: f, ["--combine", "both"], ("games.csv", "combine", "'both'", "agree, mean")),
    (lambda f: f, ["--combine", "agree", "--combine", "agree"], ("games.csv", "combine", "twice")),
])
def test_bad_orders_and_verdicts_are_refused_in_one_line_and_nothing_is_written(tmp_path, change, extra, fragments):
    change(_games(n_items=5)).to_csv(tmp_path / "games.csv", index=False)
    run_cli(["import", "table", tmp_path / "games.csv", *ARGS, *extra, "--out", tmp_path / "run"]).refused(*fragments)
    assert not (tmp_path / "run").exists()


def test_combining_without_an_order_column_and_verdicts_without_a_reference_are_refused(tmp_path):
    _games(n_items=3).to_csv(tmp_path / "games.csv", index=False)
    with pytest.raises(InputError, match="combine: combining both games needs the `order` column"):
        import_table(tmp_path / "games.csv", system="model", item="item", verdict="verdict", reference="ref",
                     axes=["judge", "order"], combine=["agree"], out_dir=tmp_path / "a")
    with pytest.raises(InputError, match="verdict: three-way verdicts are preferences over a `reference`"):
        import_table(tmp_path / "games.csv", system="model", item="item", verdict="verdict", order="order",
                     axes=["judge"], out_dir=tmp_path / "b")


_VERDICT = st.sampled_from(["A", "tie", "B"])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")  # kappa 0 on one shared label
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_VERDICT, _VERDICT), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_any_table_with_both_orders_gives_pandas_numbers_whatever_its_row_order(tmp_path_factory, games, random):
    """Hypothesis: one judge, any verdicts in both orders, rows shuffled: the pandas reference, and the mirror
    table (A and B swapped with ab and ba) gives the same system-side numbers with the position bias mirrored."""
    rows = [{"judge": "j", "model": "atlas", "item": f"i{i}", "order": o, "verdict": v}
            for i, pair in enumerate(games) for o, v in zip(("ab", "ba"), pair)]
    rows += [{"judge": "j", "model": "ref", "item": "i0", "order": o, "verdict": "tie"} for o in ("ab", "ba")]
    random.shuffle(rows)
    frame = pd.DataFrame(rows)
    folder = tmp_path_factory.mktemp("games")
    frame.to_csv(folder / "games.csv", index=False)
    results = import_table(folder / "games.csv", system="model", item="item", verdict="verdict", reference="ref",
                           order="order", axes=["judge"], out_dir=folder / "run")
    scale = {"type": "pairwise", "min": 0.0, "max": 1.0, "reference": "ref"}
    (got,) = order_consistency(results.verdicts, axes=results.axes, axis="order", scale=scale)
    side = frame[frame["model"] != "ref"].assign(side=_system_side)
    wide = side.pivot(index="item", columns="order", values="side")
    decisive = side[side["verdict"] != "tie"]
    assert got["n"] == len(games)
    assert got["consistency"] == pytest.approx((wide["ab"] == wide["ba"]).mean(), abs=1e-12)
    if len(decisive):
        assert got["position_bias"] == pytest.approx((decisive["verdict"] == "A").mean(), abs=1e-12)
    else:
        assert np.isnan(got["position_bias"])
    if len(set(wide["ab"]) | set(wide["ba"])) > 1:
        assert got["cohen_kappa"] == pytest.approx(cohen_kappa_score(wide["ab"], wide["ba"]), abs=1e-9)
    mirror = frame.assign(order=frame["order"].map({"ab": "ba", "ba": "ab"}),
                          verdict=frame["verdict"].map({"A": "B", "B": "A", "tie": "tie"}))
    mirror.to_csv(folder / "mirror.csv", index=False)
    twin = import_table(folder / "mirror.csv", system="model", item="item", verdict="verdict", reference="ref",
                        order="order", axes=["judge"], out_dir=folder / "mirror")
    (other,) = order_consistency(twin.verdicts, axes=twin.axes, axis="order", scale=scale)
    assert other["consistency"] == got["consistency"] and other["decisive"] == got["decisive"]
    assert other["first_wins"] == got["decisive"] - got["first_wins"]
    (pair,) = verdict_agreement(results.verdicts, axes=results.axes, axis="order", scale=scale)["pairs"]
    assert pair["percent"] == pytest.approx(got["consistency"], abs=1e-12)


@pytest.mark.parametrize("p_first", [0.5, 0.7, 0.9])
def test_a_judge_that_only_sees_positions_shows_its_known_bias_and_inconsistency(p_first):
    """Known truth: a judge blind to quality picks the first answer with probability p (no ties). Its position
    bias is p, its consistency across orders 2p(1 - p) (it must pick the system once and the reference once),
    and kappa between orders 0 only at p = 1/2 (otherwise negative: the orders disagree by construction)."""
    rng = np.random.default_rng(int(p_first * 100))
    n = 4000
    first_ab, first_ba = rng.random(n) < p_first, rng.random(n) < p_first
    # On the system's side: first shown wins in ab is a win; in ba the first shown is the reference.
    scores = np.concatenate([np.where(first_ab, 1.0, 0.0), np.where(first_ba, 0.0, 1.0)])
    verdicts = pd.DataFrame({"universe_id": np.repeat(["u_ab", "u_ba"], n), "order": np.repeat(["ab", "ba"], n),
                             "system": "atlas", "case_id": np.tile(np.arange(n), 2), "replicate": 0,
                             "status": "ok", "score": scores})
    (got,) = order_consistency(verdicts, axes=["order"], axis="order",
                               scale={"type": "pairwise", "min": 0, "max": 1, "reference": "ref"})
    se = np.sqrt(p_first * (1 - p_first) / (2 * n))
    assert abs(got["position_bias"] - p_first) < 4 * se + 1e-12
    consistency = 2 * p_first * (1 - p_first)
    assert abs(got["consistency"] - consistency) < 4 * np.sqrt(consistency * (1 - consistency) / n)
    assert got["ties"] == 0 and got["favours_second"] == pytest.approx((1 - p_first) ** 2, abs=0.03)


def test_the_docs_page_quotes_each_judges_row_as_the_committed_table_gives_it(tmp_path):
    """The table is what its script writes, and README's per-judge rows are what agreement prints on it."""
    import importlib.util

    from cli_runner import REPO

    spec = importlib.util.spec_from_file_location("pairwise_orders", REPO / "analyses" / "pairwise_orders.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = REPO / "analyses" / "data" / "pairwise_orders.csv"
    pd.testing.assert_frame_equal(pd.read_csv(committed), script.pairwise_orders())
    run_cli(["import", "table", committed, "--system", "model", "--item", "question", "--verdict", "verdict",
             "--reference", "baseline", "--order", "order", "--axis", "judge", "--combine", "agree",
             "--out", tmp_path / "run"]).ok()
    printed = run_cli(["agreement", tmp_path / "run", "--axis", "order"]).ok().splitlines()
    page = (REPO / "docs" / "guides" / "pairwise-judges.md").read_text(encoding="utf-8")
    section = page[page.index("# Comparing judges on pairwise verdicts"):]
    quoted = [line.removeprefix("# ") for line in section.splitlines() if line.startswith("# judge=")]
    assert len(quoted) == 3 and all(line in printed for line in quoted), (quoted, printed)
