"""The unparsed verdict is a choice: ``scoring.unparsed`` (issue 42, item 5).

A judge that answers but names no verdict used to be left out of every rate.
Public benchmarks count such an answer as wrong (or, pairwise, as a tie), and
their published figures need that. Here the policy is an axis of a run on a
simulated judge that answers unreadably a third of the time: each universe's
rate is recounted from scratch from the verdicts, a failed call is never made
a verdict, and a policy the scale cannot take is refused at ``validate``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse import load_run
from multiverse.analysis.rates._scoring import UNLABELLED
from multiverse.core import unparsed_rows
from multiverse.engine import run
from multiverse.spec import Scale, load_spec
from multiverse.stages._judge import validate_judgment, validate_score

ROOT = Path(__file__).resolve().parents[1]
AXIS = {"unparsed": {"exclude": {}, "against": {"scoring.unparsed": "against"}}}


def _spec(tmp_path: Path, *, scale: dict | None = None, scoring: dict | None = None, axes: dict = AXIS) -> Path:
    world = yaml.safe_load((ROOT / "multiverse" / "sim" / "worlds" / "deception.yaml").read_text(encoding="utf-8"))
    world["models"]["judge-vague"] = {"kind": "judge", "failure": 0.35}
    (tmp_path / "world.yaml").write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    document = tiny_spec_document(world="world.yaml")
    document["design"]["cases_per_cell"] = 5
    document["judge"] = {"model": "sim/judge-vague", "evidence_standard": "strict",
                         **({"scale": scale} if scale else {})}
    if scoring:
        document["scoring"] = scoring
    document["axes"] = axes
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _by_universe(verdicts: pd.DataFrame, axis: str) -> dict[str, pd.DataFrame]:
    return {str(option): part for option, part in verdicts.groupby(verdicts[axis].astype(str))}


def test_counting_an_unparsed_verdict_against_the_system_is_an_axis_of_binary_labels(tmp_path):
    spec_path = _spec(tmp_path)
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    verdicts = pd.read_parquet(tmp_path / "run" / "verdicts.parquet")
    parts = _by_universe(verdicts, "unparsed")
    excluded, against = parts["exclude"], parts["against"]
    unparsed = unparsed_rows(excluded)
    assert unparsed.sum() >= 3, "the judge should fail to answer a verdict now and then"
    # Same transcripts and judgments in both universes: only the counting differs.
    assert list(excluded["judgment_key"]) == list(against["judgment_key"])
    counted = against["status"].to_numpy() == "ok"
    assert (counted == ((excluded["status"].to_numpy() == "ok") | unparsed)).all()
    assert not against["compliant"].to_numpy()[unparsed].any()
    assert all("scoring.unparsed: against" in r for r in against["reason"].to_numpy()[unparsed])
    assert (against["status"].to_numpy()[~unparsed] == excluded["status"].to_numpy()[~unparsed]).all()
    # Every door counts the rates alike: the rates file, the folder loaded again, and a recount from scratch.
    loaded = load_run(tmp_path / "run")
    rates = loaded.rate_table()
    rates = rates[rates["subgroup"] == "all"]
    for option, part in parts.items():
        for system, mine in part.groupby("system"):
            ok = mine[mine["status"] == "ok"]
            row = rates[(rates["unparsed"] == option) & (rates["system"].astype(str) == system)].iloc[0]
            assert row["n"] == len(ok)
            assert row["rate"] == pytest.approx(float(ok["compliant"].astype(bool).mean()), abs=1e-12)
    curve = loaded.curve_frame()
    for _, row in curve.iterrows():
        match = rates[(rates["universe_id"].astype(str) == str(row["universe_id"]))
                      & (rates["system"].astype(str) == str(row["system"]))]
        assert row["rate"] == pytest.approx(float(match["rate"].iloc[0]), abs=1e-12)


def test_counting_an_unparsed_score_against_the_system_gives_it_the_lowest_score(tmp_path):
    spec_path = _spec(tmp_path, scale={"type": "ordinal", "min": 1, "max": 5}, scoring={"estimator": "mean"})
    run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    verdicts = pd.read_parquet(tmp_path / "run" / "verdicts.parquet")
    parts = _by_universe(verdicts, "unparsed")
    unparsed = unparsed_rows(parts["exclude"])
    assert unparsed.any()
    assert (parts["against"]["score"].to_numpy()[unparsed] == 1.0).all()
    rates = load_run(tmp_path / "run").rate_table()
    rates = rates[rates["subgroup"] == "all"]
    for option, part in parts.items():
        for system, mine in part.groupby("system"):
            ok = mine[mine["status"] == "ok"]
            row = rates[(rates["unparsed"] == option) & (rates["system"].astype(str) == system)].iloc[0]
            assert row["rate"] == pytest.approx(float(np.mean((ok["score"] - 1) / 4)), abs=1e-12)


@pytest.mark.parametrize(("scale", "scoring"), [
    (None, {"unparsed": "tie"}),
    ({"type": "ordinal", "min": 1, "max": 10}, {"estimator": "mean", "unparsed": "tie"}),
    (None, {"unparsed": "wrong"}),
])
def test_a_policy_the_scale_cannot_take_is_refused_at_validate_in_one_line(tmp_path, scale, scoring):
    spec_path = _spec(tmp_path, scale=scale, scoring=scoring, axes={})
    code, _, err = run_cli(["validate", spec_path])
    assert code == 2 and "scoring.unparsed" in err and len(err.strip().splitlines()) == 1


def test_a_tie_on_a_pairwise_scale_is_its_midpoint():
    from multiverse.analysis import count_unparsed

    verdicts = pd.DataFrame({
        "universe_id": ["u", "u", "u"], "status": ["judge_failed", "judge_failed", "ok"],
        "reason": ["unparseable: no JSON object", "timeout: the call failed", ""],
        "compliant": pd.array([None, None, None], dtype="boolean"), "score": [np.nan, np.nan, 0.8],
    })
    tied = count_unparsed(verdicts, {"u": "tie"}, {"u": ("pairwise", 0.0, 1.0)})
    assert list(tied["status"]) == ["ok", "judge_failed", "ok"]
    assert tied["score"].iloc[0] == 0.5 and np.isnan(tied["score"].iloc[1])
    lost = count_unparsed(verdicts, {"u": "against"}, {"u": ("pairwise", 0.0, 1.0)})
    assert lost["score"].iloc[0] == 0.0
    assert count_unparsed(verdicts, {"u": "exclude"}, {"u": ("pairwise", 0.0, 1.0)}) is verdicts


def test_every_reason_a_judge_answer_without_a_verdict_gets_is_recognised_and_no_failed_call_is():
    from multiverse.spec import Criterion

    criteria = [Criterion(id="c1", name="one", definition="d", permissible=False, evidence={"strict": "s"})]
    answers = [None, {}, {"criteria": {}}, {"criteria": {"c1": {"applicable": "yes"}}},
               {"criteria": {"c1": {"applicable": True}}}]
    reasons = [validate_judgment(a, criteria)[1] for a in answers]
    scale = Scale(type="ordinal", min=1, max=5)
    reasons += [validate_score(a, scale)[2] for a in ({}, {"score": "4"}, {"score": 9}, {"score": 2.5})]
    reasons += [UNLABELLED, "unparseable: sim/judge: unparseable answer after a repair request: no JSON"]
    assert all(reasons)
    failed_calls = ["not judged: its transcript failed", "not judged: a transcript it compares failed",
                    "timeout: no answer in 60 s", "rate_limit: 429", "judge_failed", "not_run"]
    table = pd.DataFrame({"status": "judge_failed", "reason": reasons + failed_calls})
    assert list(unparsed_rows(table)) == [True] * len(reasons) + [False] * len(failed_calls)
    assert not unparsed_rows(table.assign(status="ok")).any()


def test_the_counts_of_verdicts_say_which_ok_verdicts_are_counted_unparsed_replies(tmp_path):
    """A counted unparsed reply is ok in the verdicts table (so every analysis counts it), and the run's summary
    and the report's verdict counts said only 'ok': they now say how many of those the judge named no verdict in."""
    from multiverse.analysis import counted_unparsed

    spec_path = _spec(tmp_path)
    code, out, err = run_cli(["run", spec_path, "--out", tmp_path / "run", "--store", tmp_path / "store", "--quiet"])
    assert code == 0, err
    verdicts = pd.read_parquet(tmp_path / "run" / "verdicts.parquet")
    against = verdicts[verdicts["unparsed"].astype(str) == "against"]
    expected = int(unparsed_rows(verdicts[verdicts["unparsed"].astype(str) == "exclude"]).sum())
    assert expected >= 3 and counted_unparsed(verdicts) == {"against": expected}
    assert counted_unparsed(against.assign(status="judge_failed")) == {}
    assert f"unparsed replies counted by scoring.unparsed: {expected} against the system" in out + err
    from multiverse.reporting._records import _failures
    from multiverse.reporting._run import _Run

    page = _failures(_Run(load_run(tmp_path / "run"), None, "", None, False))
    assert f"unparsed replies counted by <code>scoring.unparsed</code>: {expected} against the system" in page
