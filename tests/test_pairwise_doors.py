"""Pairwise verdicts through every door agree with a recomputation from the raw table (issue 42's class).

- ``import table --verdict/--order/--combine agree|mean`` and ``--label/--order/--combine both``: each
  universe's win rate (or share) in ``rates.csv`` equals the one recomputed here with pandas from the raw
  rows, for the table of the docs and for any table hypothesis draws;
- ``ranking --method bt`` on a folder of games (ties included), whole and ``--by`` a factor, equals a
  Bradley-Terry maximum-likelihood fit written here from scratch (Newton's method on the log-likelihood with
  a tie as half a win), not statsmodels' (``tests/analysis/test_bradley_terry.py`` holds the API to that).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runner import REPO, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grouped import pairwise_run

from multiverse.analysis import CONTRIBUTION, OPPONENT

RAW = REPO / "analyses" / "data" / "pairwise_orders.csv"
#: The system's preference over the reference given the order it was shown in and the three-way verdict.
PREFERENCE = {("ab", "A"): 1.0, ("ab", "tie"): 0.5, ("ab", "B"): 0.0,
              ("ba", "A"): 0.0, ("ba", "tie"): 0.5, ("ba", "B"): 1.0}


def recomputed(raw: pd.DataFrame, column: str = "verdict") -> pd.DataFrame:
    """Per judge, system and order option (ab, ba, agree, mean): the mean preference over the reference."""
    raw = raw.assign(pref=[PREFERENCE[(o, v)] for o, v in zip(raw["order"], raw[column])])
    wide = raw.pivot_table(index=["judge", "model", "question"], columns="order", values="pref").reset_index()
    wide["agree"] = np.where(wide["ab"] == wide["ba"], wide["ab"], 0.5)
    wide["mean"] = (wide["ab"] + wide["ba"]) / 2
    long = wide.melt(id_vars=["judge", "model", "question"], value_vars=["ab", "ba", "agree", "mean"],
                     var_name="order", value_name="pref")
    return long.groupby(["judge", "order", "model"])["pref"].mean().rename("expected").reset_index()


def imported_rates(folder: Path) -> pd.DataFrame:
    rates = pd.read_csv(folder / "rates.csv")
    rates = rates[rates["subgroup"] == "all"] if "subgroup" in rates.columns else rates
    return rates.rename(columns={"system": "model"})[["judge", "order", "model", "rate"]]


def import_verdicts(raw_path: Path, out: Path, reference: str, *extra: str) -> None:
    code, _, err = run_cli(["import", "table", raw_path, "--system", "model", "--item", "question", "--verdict",
                            "verdict", "--reference", reference, "--order", "order", "--axis", "judge",
                            "--combine", "agree", "--combine", "mean", "--out", out, *extra])
    assert code == 0, err


def assert_rates_are_recomputed(raw: pd.DataFrame, folder: Path) -> None:
    got = imported_rates(folder)
    # The reference's own rows too: shown against itself, what its judge said is read as any row is (a rate of
    # one half by construction only when every verdict is a tie, as the import then warns).
    expected = recomputed(raw)
    both = expected.merge(got, on=["judge", "order", "model"], how="outer", indicator=True)
    assert (both["_merge"] == "both").all(), both[both["_merge"] != "both"]
    assert np.allclose(both["rate"], both["expected"], atol=1e-12, rtol=0), both


def test_the_docs_pairwise_table_imported_with_each_combination_is_its_recomputation(tmp_path):
    raw = pd.read_csv(RAW)
    import_verdicts(RAW, tmp_path / "pw", "baseline")
    assert_rates_are_recomputed(raw, tmp_path / "pw")


def test_both_orders_of_labels_is_the_share_compliant_in_both_recomputed(tmp_path):
    raw = pd.read_csv(RAW)
    # A judge "correct" when it prefers the system: a label per game, the judge the system of the accuracy.
    raw["correct"] = [PREFERENCE[(o, v)] == 1.0 for o, v in zip(raw["order"], raw["verdict"])]
    raw[["judge", "model", "question", "order", "correct"]].to_csv(tmp_path / "labels.csv", index=False)
    code, _, err = run_cli(["import", "table", tmp_path / "labels.csv", "--system", "model", "--item", "question",
                            "--label", "correct", "--order", "order", "--axis", "judge", "--combine", "both",
                            "--out", tmp_path / "labels"])
    assert code == 0, err
    wide = raw.pivot_table(index=["judge", "model", "question"], columns="order", values="correct").reset_index()
    wide["both"] = (wide["ab"] == 1) & (wide["ba"] == 1)
    long = wide.melt(id_vars=["judge", "model", "question"], value_vars=["ab", "ba", "both"], var_name="order",
                     value_name="pref")
    expected = long.groupby(["judge", "order", "model"])["pref"].mean().rename("expected").reset_index()
    both = expected.merge(imported_rates(tmp_path / "labels"), on=["judge", "order", "model"], how="outer")
    assert both["rate"].notna().all() and both["expected"].notna().all(), both
    assert np.allclose(both["rate"], both["expected"].astype(float), atol=1e-12, rtol=0)


@st.composite
def raw_tables(draw) -> pd.DataFrame:
    systems = ["ref", *draw(st.lists(st.sampled_from(["atlas", "beacon", "comet"]), min_size=1, max_size=3,
                                     unique=True))]
    judges = draw(st.lists(st.sampled_from(["jx", "jy", "jz"]), min_size=1, max_size=2, unique=True))
    questions = draw(st.integers(3, 12))
    seed = draw(st.integers(0, 2**31))
    tie = draw(st.sampled_from([0.0, 0.2, 0.6]))
    rng = np.random.default_rng(seed)
    rows = []
    for judge in judges:
        for system in systems:
            for q in range(questions):
                for order in ("ab", "ba"):
                    verdict = "tie" if rng.random() < tie else str(rng.choice(["A", "B"]))
                    rows.append({"judge": judge, "model": system, "question": f"q{q:02d}", "order": order,
                                 "verdict": verdict})
    frame = pd.DataFrame(rows)
    # Any row order: a table is read by its columns, never by where a row sits.
    return frame.sample(frac=1.0, random_state=seed % 1000).reset_index(drop=True)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(raw=raw_tables())
def test_any_pairwise_table_imported_with_agree_and_mean_is_its_recomputation(tmp_path_factory, raw):
    tmp_path = tmp_path_factory.mktemp("pairwise")
    raw.to_csv(tmp_path / "raw.csv", index=False)
    import_verdicts(tmp_path / "raw.csv", tmp_path / "out", "ref")
    assert_rates_are_recomputed(raw, tmp_path / "out")


def bradley_terry_mle(games: pd.DataFrame, anchor: str) -> dict[str, float]:
    """Scores maximising sum y log s(a - b) + (1 - y) log s(b - a) over the games (a tie y = 1/2), anchor at 0."""
    systems = sorted(set(games["system"]) | set(games[OPPONENT]))
    free = [s for s in systems if s != anchor]
    x = np.zeros((len(games), len(free)))
    for column, sign in (("system", 1.0), (OPPONENT, -1.0)):
        for i, name in enumerate(games[column]):
            if name != anchor:
                x[i, free.index(name)] += sign
    y = games[CONTRIBUTION].to_numpy(float)
    theta = np.zeros(len(free))
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ theta)))
        step = np.linalg.solve((x * (p * (1 - p))[:, None]).T @ x, x.T @ (y - p))
        theta += step
        if np.abs(step).max() < 1e-13:
            break
    return {anchor: 0.0, **dict(zip(free, theta))}


def scores_of(document: dict) -> dict[tuple[str, str], float]:
    return {(row["universe_id"], row["system"]): row["score"] for row in document["scores"]}


def test_ranking_bt_on_a_folder_of_games_with_ties_is_the_maximum_likelihood_fit(tmp_path):
    folder, rows = pairwise_run(tmp_path)
    assert (rows[CONTRIBUTION] == 0.5).any()  # ties, each half a win
    code, out, err = run_cli(["ranking", folder, "--method", "bt", "--boot", "0", "--json"])
    assert code == 0, err
    got = scores_of(json.loads(out))
    for universe, games in rows.groupby("universe_id"):
        for system, score in bradley_terry_mle(games, "beacon").items():
            assert got[(universe, system)] == pytest.approx(score, abs=1e-8), (universe, system)
    # --by a factor: each subset's scores are the fit of that subset's games alone.
    code, out, err = run_cli(["ranking", folder, "--method", "bt", "--boot", "0", "--by", "subset", "--json"])
    assert code == 0, err
    for group in json.loads(out)["groups"]:
        got = scores_of(group["document"])
        for universe, games in rows[rows["subset"] == group["group"]].groupby("universe_id"):
            for system, score in bradley_terry_mle(games, "beacon").items():
                assert got[(universe, system)] == pytest.approx(score, abs=1e-8), (group["group"], universe, system)


def test_scores_beside_labels_that_no_estimator_reads_are_refused_not_read_as_labels(tmp_path):
    """A folder of games on a pairwise scale whose rows hold a preference and a label, and no estimator: the labels
    were counted in place of the scores, a tie (labelled compliant) as a win, and the Bradley-Terry scores and the
    rates were those of another data set (atlas 0.947 against its fit's 0.791), without a word."""
    folder, _ = pairwise_run(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    for universe in manifest["universes"]:
        del universe["scoring"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for command in (["ranking", folder, "--method", "bt", "--boot", "0"], ["curve", folder, "--boot", "10"]):
        code, out, err = run_cli(command)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (command, err)
        assert "manifest.json: estimator:" in err and "both a score and a label" in err
