"""A spec asks each pairwise judge for both orders (issue 44 items 1-2): per-judge consistency and position bias
from a run, and ``scoring.orders`` (combine both games: the mean, or the verdict they agree on) as an axis that
calls no judge again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import CountingClient, tiny_spec_document

from multiverse.analysis import three_way
from multiverse.engine import run
from multiverse.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
PAIR = {"type": "pairwise", "min": 0, "max": 1, "reference": "atlas"}


def _spec(tmp_path: Path, judge: dict, axes: dict, scoring: dict | None = None, pairwise: str = "outcome") -> Path:
    """Three systems compared with atlas by pairwise judges of a world with a leaning and a fair judge, answering
    win/tie/loss (``outcome``) or a preference on the range."""
    world = yaml.safe_load((ROOT / "multiverse" / "sim" / "worlds" / "deception.yaml").read_text(encoding="utf-8"))
    for name, lean in (("judge-lean", 0.3), ("judge-fair", 0.0)):
        world["models"][name] = {"kind": "judge", "failure": 0.0,
                                 "scores": {"position_bias": lean, "noise": 0.05, "tie": 0.1,
                                                                  "pairwise": pairwise}}
    (tmp_path / "world.yaml").write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    document = tiny_spec_document(world="world.yaml")
    document["systems"].append({"name": "delta", "model": "sim/delta", "system_prompt": "You are Delta."})
    document["design"]["cases_per_cell"] = 4
    document["rollout"]["replicates"] = 2
    document["judge"] = {"model": "sim/judge-lean", "evidence_standard": "strict", "scale": PAIR, **judge}
    document["scoring"] = {"estimator": "win_rate", **(scoring or {})}
    document["axes"] = axes
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def test_a_spec_asking_both_orders_gives_each_judges_consistency_and_position_bias(tmp_path):
    path = _spec(tmp_path, {}, {"judge": {"lean": {"judge.model": "sim/judge-lean"},
                                          "fair": {"judge.model": "sim/judge-fair"}},
                                # Options named as the team likes: the spec says which order each sets.
                                "order": {"first": {"judge.order": "ab"}, "second": {"judge.order": "ba"}}})
    run(load_spec(path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    document = run_cli(["agreement", tmp_path / "run", "--axis", "order", "--json"]).ok()
    orders = {o["group"]["judge"]: o for o in json.loads(document)["orders"]}
    verdicts = pd.read_parquet(tmp_path / "run" / "verdicts.parquet")
    ok = verdicts[(verdicts["status"] == "ok") & (verdicts["system"] != "atlas")]
    for judge, got in orders.items():
        part = ok[ok["judge"] == judge]
        wide = part.pivot(index=["system", "case_id", "replicate"], columns="order", values="score").dropna()
        ab, ba = np.sign(wide["first"] - 0.5), np.sign(wide["second"] - 0.5)
        # The first transcript won: the system's win in ab, the reference's (the system's loss) in ba.
        first = (ab == 1).sum() + (ba == -1).sum()
        assert got["n"] == len(wide) > 20
        assert got["consistency"] == pytest.approx((ab == ba).mean(), abs=1e-12)
        assert got["position_bias"] == pytest.approx(first / ((ab != 0).sum() + (ba != 0).sum()), abs=1e-12)
    assert orders["lean"]["position_bias"] > 0.75 > orders["fair"]["position_bias"]
    assert orders["lean"]["consistency"] < orders["fair"]["consistency"]


def test_combining_both_orders_is_a_scoring_option_that_calls_no_judge_again(tmp_path):
    path = _spec(tmp_path, {"order": "both"}, {"orders": {"mean": {"scoring.orders": "mean"},
                                                          "agree": {"scoring.orders": "agree"}}},
                 pairwise="preference")
    client = CountingClient(jobs=2)
    result = run(load_spec(path), out=tmp_path / "run", store=tmp_path / "store", client=client, progress=False)
    verdicts = result.verdicts
    compared = verdicts[(verdicts["system"] != "atlas") & (verdicts["status"] == "ok")]
    # One call per order and transcript, shared by both universes.
    pairs = verdicts.loc[verdicts["system"] != "atlas", "transcript_key"].nunique()
    assert client.calls["sim/judge-lean"] == 2 * pairs
    criteria = pd.read_parquet(tmp_path / "run" / "criteria.parquet")
    calls = criteria.pivot(index="judgment_key", columns="criterion", values="score")
    ab, ba = calls["[score ab]"], calls["[score ba]"]
    agree = three_way(ab, PAIR) == three_way(ba, PAIR)
    expected = {"mean": (ab + ba) / 2, "agree": pd.Series(np.where(agree, (ab + ba) / 2, 0.5), index=calls.index)}
    for option, want in expected.items():
        got = compared[compared["orders"] == option].set_index("judgment_key")["score"]
        assert len(got) > 20
        assert np.allclose(got.to_numpy(), want.reindex(got.index).to_numpy())
    # The leaning judge disagrees with itself often: agree turns those into ties, where the mean keeps a preference.
    assert (~agree).sum() > 5
    assert (compared.loc[compared["orders"] == "agree", "score"] == 0.5).sum() > \
        (compared.loc[compared["orders"] == "mean", "score"] == 0.5).sum()
    # The universes share their judgments: only the score stage differs.
    keys = compared.groupby("orders")["judgment_key"].apply(set)
    assert keys["mean"] == keys["agree"]


def test_orders_agree_without_both_orders_is_refused_at_validate(tmp_path):
    path = _spec(tmp_path, {"order": "ab"}, {}, {"orders": "agree"})
    run_cli(["validate", path]).refused("scoring.orders", "judge.order: both", "'ab'")
