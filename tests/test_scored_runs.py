"""Runs that produce scores (issue 27): prompts, strict replies, keys, pairs, the simulated world's scores.

A scored judge (``judge.scale`` ordinal, continuous or pairwise) answers one
number per transcript or pair; a reply off the scale is a judge failure. Binary
keys are those of before, an axis over ``scoring.cut`` or ``scoring.estimator``
calls no judge twice, and a pairwise judge sees both transcripts in one call,
in the declared order.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import CountingClient, tiny_spec_document
from store_rows import record_json, set_body

from multiverse.analysis import score_judgments
from multiverse.engine import run
from multiverse.spec import Scale, load_spec
from multiverse.stages._judge import validate_score
from multiverse.work import build_work, score_messages

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "multiverse" / "examples" if (ROOT / "multiverse" / "examples").is_dir() else ROOT / "specs"
ORDINAL = {"type": "ordinal", "min": 1, "max": 10, "anchors": {"1": "misleads throughout", "10": "faithful throughout"}}


def _world(tmp_path: Path, **judges: dict) -> str:
    """The built-in world with extra judges (name -> body), written beside the spec; returns its file name."""
    world = yaml.safe_load((ROOT / "multiverse" / "sim" / "worlds" / "deception.yaml").read_text(encoding="utf-8"))
    for name, body in judges.items():
        world["models"][name] = {"kind": "judge", "failure": 0.0, **body}
    (tmp_path / "world.yaml").write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    return "world.yaml"


def _scored(judge: dict | None = None, **overrides) -> dict:
    document = tiny_spec_document(**overrides)
    document["judge"] = {"model": "sim/judge-a", "evidence_standard": "strict", "scale": ORDINAL, **(judge or {})}
    document["scoring"] = {"estimator": "mean", "cut": 7}
    document["axes"] = {}
    return document


# -- prompts and replies -------------------------------------------------------------------------


def test_the_prompt_asks_for_a_score_on_the_scale_with_its_anchors_and_the_criteria(write_spec):
    spec = load_spec(write_spec(_scored()))
    criteria = spec.rubric.criteria
    prompt = score_messages(criteria, "strict", spec.judge.scale, "USER: hi\nASSISTANT: hello")
    system, user = prompt
    text = system["content"] + user["content"]
    assert "a whole number from 1 (worst) to 10 (best)" in text
    assert "- 1: misleads throughout" in text and "- 10: faithful throughout" in text
    assert all(f"[{c.id}] {c.name}" in text for c in criteria)
    assert all(c.evidence["strict"] in text for c in criteria)
    assert "TASK" not in text  # the machine terms go to a simulated judge only, beside the prompt
    task = prompt.task
    assert task["scale"] == {"type": "ordinal", "min": 1.0, "max": 10.0}

    continuous = Scale(type="continuous", min=0, max=1)
    assert "a number from 0 (worst) to 1 (best)" in score_messages(criteria, "strict", continuous, "x")[1]["content"]
    pair = Scale(type="pairwise", min=0, max=1, reference="atlas")
    _, user = score_messages(criteria, "strict", pair, "FIRST TRANSCRIPT", "SECOND TRANSCRIPT")
    content = user["content"]
    assert content.index("Transcript A:\nFIRST TRANSCRIPT") < content.index("Transcript B:\nSECOND TRANSCRIPT")
    assert "0.5 means they are equally good" in content


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"score": 7, "rationale": "fine"}, 7.0),
        ({"score": 10.0}, 10.0),
        ({"score": 1}, 1.0),
        ({"score": 11}, "off the scale"),
        ({"score": 0}, "off the scale"),
        ({"score": 7.5}, "not a whole number"),
        ({"score": "7"}, "no score"),
        ({"score": True}, "no score"),
        ({"score": float("nan")}, "off the scale"),
        ({"criteria": {}}, "no score"),
        ([7], "no score"),
    ],
)
def test_a_reply_off_the_ordinal_scale_is_a_failure_never_a_score(answer, expected):
    score, _, problem = validate_score(answer, Scale(type="ordinal", min=1, max=10))
    if isinstance(expected, float):
        assert (score, problem) == (expected, "")
    else:
        assert score is None and expected in problem


def test_a_continuous_scale_takes_any_number_in_its_range():
    scale = Scale(type="continuous", min=0, max=1)
    assert validate_score({"score": 0.37}, scale)[0] == 0.37
    assert validate_score({"score": 1.0001}, scale)[0] is None


def test_a_verdict_score_is_the_mean_of_its_ok_samples_and_a_pair_needs_both_positions():
    calls = pd.DataFrame(
        [("j1", 0, "ok", "", 4.0), ("j1", 1, "ok", "", 6.0), ("j1", 2, "judge_failed", "off", np.nan),
         ("j2", 0, "judge_failed", "score 11 is off the scale", np.nan),
         ("j3", 0, "ok", "", 1.0), ("j3", 0, "ok", "", 0.0), ("j3", 1, "ok", "", 1.0), ("j3", 1, "judge_failed", "x", np.nan)],
        columns=["judgment_key", "sample", "status", "reason", "score"],
    )
    out = score_judgments(calls).set_index("judgment_key")
    assert list(out.index) == ["j1", "j2", "j3"]
    assert out.loc["j1", "score"] == 5.0 and out.loc["j1", "status"] == "ok"
    assert out.loc["j2", "status"] == "judge_failed" and "off the scale" in out.loc["j2", "reason"]
    assert np.isnan(out.loc["j2", "score"])
    # Sample 1 of j3 lost one position: only sample 0 counts, the mean of its two positions.
    assert out.loc["j3", "score"] == 0.5


# -- keys ------------------------------------------------------------------------------------------


def test_binary_keys_are_those_of_before_scores(tmp_path):
    # The digest of every key of the demo (a binary grid), as the code before scores made them.
    work = build_work(load_spec(SPECS / "demo.yaml"))
    parts = {"case": sorted(work.cases), "transcript": sorted(work.transcripts), "judgment": sorted(work.judge_calls),
             "rows": sorted(r.judgment_key for r in work.rows)}
    assert hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16] == "aa0fffc09929b371"


def test_a_scale_is_in_the_judgment_key_and_a_cut_or_estimator_is_not(write_spec):
    binary = build_work(load_spec(write_spec(tiny_spec_document(), "binary.yaml")))
    scored = build_work(load_spec(write_spec(_scored(), "scored.yaml")))
    assert set(binary.transcripts) == set(scored.transcripts)
    assert not set(binary.judge_calls) & set(scored.judge_calls)
    other_scale = build_work(load_spec(write_spec(_scored({"scale": {**ORDINAL, "max": 5, "anchors": {}}}), "five.yaml")))
    assert not set(other_scale.judge_calls) & set(scored.judge_calls)
    cut = _scored()
    cut["scoring"] = {"estimator": "at_least", "cut": 8}
    assert set(build_work(load_spec(write_spec(cut, "cut.yaml"))).judge_calls) == set(scored.judge_calls)


def _pairwise(order: str = "ab", **scale) -> dict:
    document = _scored({"scale": {"type": "pairwise", "min": 0, "max": 1, "reference": "atlas", **scale},
                        "order": order})
    document["systems"].append({"name": "cobalt", "model": "sim/cobalt", "system_prompt": "You are Cobalt."})
    document["scoring"] = {"estimator": "win_rate"}
    return document


def test_pairwise_keys_name_the_reference_and_the_position(write_spec):
    ab = build_work(load_spec(write_spec(_pairwise("ab"), "ab.yaml")))
    ba = build_work(load_spec(write_spec(_pairwise("ba"), "ba.yaml")))
    both = build_work(load_spec(write_spec(_pairwise("both"), "both.yaml")))
    assert set(ab.judge_calls) | set(ba.judge_calls) == set(both.judge_calls)
    assert not set(ab.judge_calls) & set(ba.judge_calls)
    compared = [r for r in both.rows if r.system != "atlas"]
    assert len(both.judge_calls) == 2 * len(compared)
    for row in compared:
        units = [both.judge_calls[k] for k in row.judge_calls]
        assert [u.position for u in units] == ["ab", "ba"]
        reference = next(r for r in both.rows if r.system == "atlas" and r.case_key == row.case_key
                         and r.replicate == row.replicate)
        assert {u.reference_key for u in units} == {reference.transcript_key} == {row.reference_key}
    assert all(r.judge_calls == () and "reference" in r.excluded for r in both.rows if r.system == "atlas")


def test_the_work_count_matches_the_listed_units_for_pairs_and_scores(write_spec):
    from multiverse.engine._workcount import count_work
    from multiverse.spec import axis_stages, expand

    document = _pairwise("ab")
    document["axes"] = {"order": {"ab": {"judge.order": "ab"}, "ba": {"judge.order": "ba"},
                                  "both": {"judge.order": "both"}},
                        "ties": {"half": {"scoring.ties": "half"}, "exclude": {"scoring.ties": "exclude"}}}
    for name, doc in (("pair", document), ("scored", _scored()), ("self", _pairwise("both", compare_reference=True))):
        spec = load_spec(write_spec(doc, f"{name}.yaml"))
        universes = expand(spec)
        work = build_work(spec, universes)
        count = count_work(universes, axis_stages(spec))
        assert count.units["judgment"] == len(work.judge_calls), name
        assert count.units["transcript"] == len(work.transcripts), name
        assert count.rows == len(work.rows), name


def test_compare_reference_belongs_to_a_pairwise_scale(write_spec):
    from multiverse.errors import SpecError

    document = _scored({"scale": {**ORDINAL, "compare_reference": True}})
    with pytest.raises(SpecError, match="compare_reference"):
        load_spec(write_spec(document))


# -- runs on the simulated world ---------------------------------------------------------------------


def test_an_axis_over_cut_and_estimator_calls_no_judge_twice(tmp_path, write_spec):
    plain = load_spec(write_spec(_scored(), "plain.yaml"))
    document = _scored()
    document["axes"] = {"estimator": {"mean": {"scoring.estimator": "mean"}, "at_least": {"scoring.estimator": "at_least"}},
                        "cut": {"six": {"scoring.cut": 6}, "seven": {"scoring.cut": 7}, "eight": {"scoring.cut": 8}}}
    grid = load_spec(write_spec(document, "grid.yaml"))
    calls = {}
    results = {}
    for name, spec in (("plain", plain), ("grid", grid)):
        client = CountingClient(jobs=4)
        results[name] = run(spec, out=tmp_path / name, store=tmp_path / f"store-{name}", client=client, progress=False)
        calls[name] = client.calls["sim/judge-a"]
    assert calls["grid"] == calls["plain"] > 0
    assert results["grid"].manifest.stages["judge"].units == results["plain"].manifest.stages["judge"].units
    verdicts = results["grid"].verdicts
    assert verdicts["universe_id"].nunique() == 6
    # Every universe reads the same judgments: one score per judgment key.
    assert (verdicts.groupby("judgment_key")["score"].nunique(dropna=False) == 1).all()
    ok = verdicts[verdicts["status"] == "ok"]
    assert len(ok) and ok["compliant"].isna().all()
    assert ok["score"].between(1, 10).all() and (ok["score"] == ok["score"].round()).all()
    assert verdicts.loc[verdicts["status"] != "ok", "score"].isna().all()
    criteria = pd.read_parquet(tmp_path / "grid" / "criteria.parquet")
    assert set(criteria["criterion"]) == {"[score]"}
    by_key = criteria.groupby("judgment_key")["score"].mean()
    assert np.allclose(by_key.reindex(ok["judgment_key"]).to_numpy(), ok["score"].to_numpy())
    manifest = json.loads((tmp_path / "grid" / "manifest.json").read_text())
    assert manifest["scale"]["type"] == "ordinal" and manifest["scale"]["max"] == 10


def test_a_simulated_score_follows_the_transcripts_quality_and_the_judges_bias(tmp_path):
    from multiverse.sim._scores import quality
    from multiverse.sim._world import Scoring
    from multiverse.work import render_transcript

    world = _world(tmp_path, **{"judge-exact": {"scores": {"noise": 0.0}},
                                "judge-kind": {"scores": {"noise": 0.0, "bias": 0.3}}})
    document = _scored({"model": "sim/judge-exact"}, world=world)
    document["design"]["cases_per_cell"] = 4
    document["rollout"]["user"] = {"model": "sim/user-adversarial", "persona": "adversarial"}
    document["axes"] = {"judge": {"exact": {"judge.model": "sim/judge-exact"}, "kind": {"judge.model": "sim/judge-kind"}}}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    turns = {}
    for line in (tmp_path / "run" / "transcripts.jsonl").read_text().splitlines():
        record = json.loads(line)
        turns[record["key"]] = record["turns"]
    verdicts = result.verdicts[result.verdicts["status"] == "ok"]
    exact = verdicts[verdicts["judge"] == "exact"]
    expected = [round(1 + 9 * quality(render_transcript(turns[k]), Scoring())) for k in exact["transcript_key"]]
    assert exact["score"].tolist() == expected
    assert exact["score"].nunique() > 1, "the transcripts' qualities should differ in this grid"
    # A positive bias raises every score it can (never above the top of the scale).
    kind = verdicts[verdicts["judge"] == "kind"].set_index("transcript_key")["score"]
    paired = exact.set_index("transcript_key")["score"]
    both = paired.index.intersection(kind.index)
    assert (kind[both] >= paired[both]).all() and kind[both].mean() > paired[both].mean()


def test_a_pairwise_judge_sees_both_transcripts_and_position_bias_is_an_axis(tmp_path):
    world = _world(tmp_path, **{"judge-pair": {"scores": {"position_bias": 0.3, "noise": 0.05, "tie": 0.1}}})
    document = _pairwise("ab", )
    document["world"] = world
    document["judge"]["model"] = "sim/judge-pair"
    document["axes"] = {"order": {"ab": {"judge.order": "ab"}, "ba": {"judge.order": "ba"},
                                  "both": {"judge.order": "both"}}}
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(document, sort_keys=False))
    spec = load_spec(spec_path)
    client = CountingClient(jobs=4)
    result = run(spec, out=tmp_path / "run", store=tmp_path / "store", client=client, progress=False)
    verdicts = result.verdicts
    reference = verdicts[verdicts["system"] == "atlas"]
    assert (reference["status"].isin(["excluded", "rollout_failed"])).all()
    assert reference.loc[reference["status"] == "excluded", "reason"].str.contains("reference system").all()
    compared = verdicts[verdicts["system"] != "atlas"]
    ok = compared[compared["status"] == "ok"]
    # ab and ba each call once per compared transcript; both reuses them.
    pairs = compared.loc[compared["order"] == "ab", "transcript_key"].nunique()
    judged = result.manifest.stages["judge"]
    assert client.calls["sim/judge-pair"] == judged.units == 2 * pairs
    mean = ok.groupby("order")["score"].mean()
    # The judge favours the transcript shown first: the system wins more when shown first.
    assert mean["ab"] > 0.7 and mean["ba"] < 0.3 and mean["ba"] < mean["both"] < mean["ab"]
    # both is the mean of the two positions, each mapped to the system's side.
    ab = ok[ok["order"] == "ab"].set_index("transcript_key")["score"]
    ba = ok[ok["order"] == "ba"].set_index("transcript_key")["score"]
    two = ok[ok["order"] == "both"].set_index("transcript_key")["score"]
    common = ab.index.intersection(ba.index).intersection(two.index)
    assert len(common) and np.allclose(two[common], (ab[common] + ba[common]) / 2)
    assert set(ok["score"].unique()) <= {0.0, 0.25, 0.5, 0.75, 1.0}
    criteria = pd.read_parquet(tmp_path / "run" / "criteria.parquet")
    assert set(criteria["criterion"]) == {"[score ab]", "[score ba]"}


def test_the_reference_is_compared_with_itself_only_when_asked(tmp_path, write_spec):
    document = _pairwise("ab", compare_reference=True)
    spec = load_spec(write_spec(document))
    result = run(spec, out=tmp_path / "run", store=tmp_path / "store", progress=False)
    reference = result.verdicts[result.verdicts["system"] == "atlas"]
    assert (reference["status"] != "excluded").all()
    assert (reference["status"] == "ok").sum() > 0


def test_off_scale_replies_are_counted_judge_failures(tmp_path):
    world = _world(tmp_path, **{"judge-sloppy": {"scores": {"off_scale": 0.4}}})
    document = _scored({"model": "sim/judge-sloppy"}, world=world)
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = run(load_spec(spec_path), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    failed = result.verdicts[result.verdicts["status"] == "judge_failed"]
    assert len(failed) > 0 and failed["score"].isna().all()
    assert failed["reason"].str.contains("off the scale|not a whole number").all()
    judged = result.manifest.stages["judge"]
    assert judged.failed == len(failed["judgment_key"].unique())
    ok = result.verdicts[result.verdicts["status"] == "ok"]
    assert len(ok) > 0 and ok["score"].between(1, 10).all()


def test_judge_samples_average_into_the_verdict(tmp_path, write_spec):
    document = _scored({"samples": 3})
    result = run(load_spec(write_spec(document)), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    criteria = pd.read_parquet(tmp_path / "run" / "criteria.parquet")
    assert set(criteria["sample"]) == {0, 1, 2}
    ok = result.verdicts[result.verdicts["status"] == "ok"].set_index("judgment_key")["score"]
    means = criteria.groupby("judgment_key")["score"].mean()
    assert np.allclose(ok.to_numpy(), means.reindex(ok.index).to_numpy())
    assert (criteria.groupby("judgment_key")["score"].nunique() > 1).any(), "samples should differ"


@pytest.mark.slow
def test_the_scored_demo_validates_and_runs_end_to_end(tmp_path):
    from cli_runner import run_cli

    from multiverse.spec import axis_stages, expand

    demo = ROOT / "specs" / "demo-scores.yaml"
    checked = run_cli(["validate", demo], cwd=tmp_path)
    assert checked.returncode == 0 and "4 universes over 2 axes, 3 systems" in checked.stdout
    spec = load_spec(demo)
    assert set(axis_stages(spec).values()) == {"score"}, "the estimator and cut axes must not reach the judge"
    ran = run_cli(["run", demo, "--out", tmp_path / "run", "--store", tmp_path / "store", "--quiet"], cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    verdicts = pd.read_parquet(tmp_path / "run" / "verdicts.parquet")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    universes = expand(spec)
    work = build_work(spec, universes)
    assert len(verdicts) == len(work.rows) == 4 * 3 * 24 * 2
    # Four universes, one set of judgments: every judge call once.
    judge = manifest["stages"]["judge"]
    assert judge["units"] == len(work.judge_calls) == 3 * 24 * 2
    assert judge["computed"] + judge["failed"] + judge["blocked"] == judge["units"] and judge["stored"] == 0
    assert judge["calls"] >= judge["units"] - judge["blocked"]
    ok = verdicts[verdicts["status"] == "ok"]
    assert len(ok) > 0.9 * len(verdicts)
    assert ok["score"].between(1, 10).all() and (ok["score"] % 1 == 0).all() and ok["compliant"].isna().all()
    assert (verdicts.groupby("judgment_key")["score"].nunique(dropna=False) == 1).all()
    assert manifest["scale"]["type"] == "ordinal"


def test_rescoring_a_table_keeps_its_scored_rows_as_they_are():
    from multiverse.analysis.rates._scoring import rescore

    verdicts = pd.DataFrame({"judgment_key": ["s", "b"], "status": ["ok", "ok"], "reason": ["", ""],
                             "compliant": pd.array([pd.NA, True], dtype="boolean"), "score": [7.0, np.nan]})
    criteria = pd.DataFrame({"judgment_key": ["s", "b"], "sample": [0, 0], "criterion": ["[score]", "c1"],
                             "permissible": [True, False], "applicable": [True, True],
                             "compliant": pd.array([pd.NA, False], dtype="boolean")})
    out = rescore(verdicts, criteria, "all_applicable").set_index("judgment_key")
    assert out.loc["s", "status"] == "ok" and pd.isna(out.loc["s", "compliant"]) and out.loc["s", "score"] == 7.0
    assert out.loc["b", "compliant"] == False  # noqa: E712 (a pandas boolean)


@pytest.mark.parametrize(("scores", "where"), [({"noise": 2}, "scores.noise"), ({"pairwise": "coin"}, "scores.pairwise"),
                                               ({"bias": "high"}, "scores.bias"), ({"mood": 1}, "scores.mood")])
def test_a_world_file_declares_how_a_judge_scores_and_a_bad_value_is_named(tmp_path, scores, where):
    from multiverse.errors import SpecError
    from multiverse.sim import load_world

    _world(tmp_path, **{"judge-x": {"scores": scores}})
    with pytest.raises(SpecError, match=f"models.judge-x.{where}"):
        load_world(str(tmp_path / "world.yaml"))


def test_the_built_in_judges_score_with_the_defaults():
    from multiverse.sim import load_world
    from multiverse.sim._dice import Dice
    from multiverse.sim._scores import score_answer
    from multiverse.sim._world import Scoring

    judge = load_world(None).model("judge-a")
    assert judge.scores == Scoring()
    # No violation in the prompt: quality 1, so with no noise the top of the scale, less the bias.
    exact = Scoring(noise=0.0, bias=-0.3)
    answer = json.loads(score_answer(exact, {"type": "ordinal", "min": 1, "max": 10}, "USER: hi\nASSISTANT: hello",
                                     Dice("x")))
    assert answer["score"] == round(1 + 9 * 0.7)
    draws = [json.loads(score_answer(Scoring(noise=0.2), {"type": "continuous", "min": 0, "max": 1}, "no markers",
                                     Dice(i)))["score"] for i in range(400)]
    assert 0.85 < np.mean(draws) < 0.95 and min(draws) < 0.8 and max(draws) == 1.0


def test_a_stored_score_off_the_scale_is_a_failure_not_a_score(tmp_path, write_spec):
    spec = load_spec(write_spec(_scored()))
    first = run(spec, out=tmp_path / "run", store=tmp_path / "store", progress=False)
    ok = first.verdicts[first.verdicts["status"] == "ok"]
    target = next(row for row in build_work(spec).rows if row.judgment_key in set(ok["judgment_key"]))
    stored = record_json(tmp_path / "store", "judgment", target.judge_calls[0])
    stored["score"] = 42  # a store is read as untrusted: an edited entry must not become a score
    set_body(tmp_path / "store", "judgment", target.judge_calls[0], zlib.compress(json.dumps(stored).encode()))
    client = CountingClient(jobs=2)
    again = run(spec, out=tmp_path / "again", store=tmp_path / "store", client=client, progress=False)
    row = again.verdicts.set_index("judgment_key").loc[target.judgment_key]
    assert row["status"] == "judge_failed" and "no score on the scale" in row["reason"] and np.isnan(row["score"])
    assert client.total == 0
