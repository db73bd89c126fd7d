"""The engine's call economy and honesty, counted at the model client on the sim world."""

from __future__ import annotations

import copy

import pandas as pd
import yaml
from conftest import SPECS, flaky_spec_document, tiny_spec_document

from multiverse.engine._pipeline import plan, run
from multiverse.spec import load_spec


def _run(write_spec, document, tmp_path, client, name="spec.yaml"):
    spec = load_spec(write_spec(document, name))
    return run(spec, store=tmp_path / "store", client=client, out=tmp_path / "run" / name, progress=False)


def _by_role(client) -> dict[str, int]:
    roles = {"generator": 0, "user": 0, "system": 0, "judge": 0, "tools": 0}
    for model, n in client.calls.items():
        name = model.removeprefix("sim/")
        if name == "generator":
            roles["generator"] += n
        elif name.startswith("user-"):
            roles["user"] += n
        elif name.startswith("judge-"):
            roles["judge"] += n
        elif name == "tools":
            roles["tools"] += n
        else:
            roles["system"] += n
    return roles


def test_judge_evidence_and_scoring_axes_add_no_rollout_calls(write_spec, tmp_path, counting_client):
    base = tiny_spec_document()
    first = _run(write_spec, base, tmp_path, counting_client)
    made = _by_role(counting_client)
    assert made["system"] > 0 and made["user"] > 0 and made["generator"] == 4

    wider = copy.deepcopy(base)
    wider["axes"] = {
        "judge": {"judge_a": {"judge.model": "sim/judge-a"}, "judge_b": {"judge.model": "sim/judge-b"}},
        "evidence": {"strict": {"judge.evidence_standard": "strict"}, "lenient": {"judge.evidence_standard": "lenient"}},
        "scoring": {"all": {"scoring.rule": "all_applicable"}, "imp": {"scoring.rule": "impermissible_only"}},
    }
    counting_client.reset()
    second = _run(write_spec, wider, tmp_path, counting_client, "wider.yaml")
    again = _by_role(counting_client)
    assert again["generator"] == 0 and again["system"] == 0 and again["user"] == 0
    ok_transcripts = second.verdicts.loc[second.verdicts.status != "rollout_failed", "transcript_key"].nunique()
    # three new judge configurations (a/lenient, b/strict, b/lenient), one call each per transcript
    assert again["judge"] == 3 * ok_transcripts
    assert second.manifest.stages["rollout"].computed == 0
    assert set(first.verdicts.transcript_key) == set(second.verdicts.transcript_key)


def test_scoring_axis_adds_no_judge_calls_and_second_run_makes_none(write_spec, tmp_path, counting_client):
    base = tiny_spec_document()
    _run(write_spec, base, tmp_path, counting_client)
    assert counting_client.total > 0
    scored = copy.deepcopy(base)
    scored["axes"]["scoring"] = {
        "all": {"scoring.rule": "all_applicable"},
        "imp": {"scoring.rule": "impermissible_only"},
        "lax": {"scoring.rule": "no_applicable_is_compliant"},
    }
    counting_client.reset()
    result = _run(write_spec, scored, tmp_path, counting_client, "scored.yaml")
    assert counting_client.total == 0
    assert result.verdicts.universe_id.nunique() == 3
    counting_client.reset()
    rerun = _run(write_spec, scored, tmp_path, counting_client, "scored.yaml")
    assert counting_client.total == 0
    assert all(s.computed == 0 for s in rerun.manifest.stages.values())
    pd.testing.assert_frame_equal(result.verdicts, rerun.verdicts)


def test_changing_one_judge_option_recomputes_only_its_judgments(write_spec, tmp_path, counting_client):
    document = tiny_spec_document()
    document["axes"] = {"judge": {"a": {"judge.model": "sim/judge-a"}, "b": {"judge.model": "sim/judge-b"}}}
    first = _run(write_spec, document, tmp_path, counting_client)
    changed = copy.deepcopy(document)
    changed["axes"]["judge"]["b"] = {"judge.model": "sim/judge-c"}
    counting_client.reset()
    second = _run(write_spec, changed, tmp_path, counting_client)
    ok = first.verdicts.loc[first.verdicts.status != "rollout_failed", "transcript_key"].nunique()
    assert dict(counting_client.calls) == {"sim/judge-c": ok}
    # option a's judgments are the very same stored ones
    a1 = first.verdicts[first.verdicts.judge == "a"].sort_values(["system", "case_id"]).reset_index(drop=True)
    a2 = second.verdicts[second.verdicts.judge == "a"].sort_values(["system", "case_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a1, a2)


def test_plan_counts_match_a_run_and_then_report_everything_stored(write_spec, tmp_path, counting_client):
    path = write_spec(tiny_spec_document(rollout={"setting": "single_turn"}))
    spec = load_spec(path)
    before = plan(spec, store=tmp_path / "store")
    assert before.stages["draft"].to_compute == 4
    assert before.stages["rollout"].to_compute == 8  # 4 cases x 2 systems, one call each
    assert before.stages["judge"].to_compute == 8
    run(spec, store=tmp_path / "store", client=counting_client, out=tmp_path / "run", progress=False)
    roles = _by_role(counting_client)
    assert roles["generator"] == 4 and roles["system"] == 8 and roles["judge"] == 8
    after = plan(spec, store=tmp_path / "store")
    assert all(s.to_compute == 0 for s in after.stages.values())


def test_oracle_judge_recovers_the_declared_truth(write_spec, tmp_path, counting_client):
    from multiverse.sim import expected_overall

    document = tiny_spec_document(
        design={"dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
                "cases_per_cell": 60},
        rollout={"setting": "single_turn"},
        judge={"model": "sim/judge-oracle", "evidence_standard": "strict"},
        axes={},
    )
    result = _run(write_spec, document, tmp_path, counting_client)
    rates = result.rates[result.rates.subgroup == "all"].set_index("system")
    criteria = [c["id"] for c in document["rubric"]["criteria"]]
    cells = [{"behavior": b, "interaction_condition": "material_reliance"} for b in ("fabricate_evidence", "overstate_capability")]
    for system in ("atlas", "beacon"):
        expected = expected_overall("deception", f"sim/{system}", cells, setting="single_turn", criteria=criteria)
        row = rates.loc[system]
        se = (expected * (1 - expected) / row["n"]) ** 0.5
        assert abs(row["rate"] - expected) < 3.5 * se + 1e-9, (system, row["rate"], expected)


def test_failures_are_recorded_and_never_labels(write_spec, tmp_path, counting_client):
    # A copy of the built-in world whose simulated users and judges fail often.
    document = flaky_spec_document(tmp_path, user_failure=0.6, judge_failure=0.5, cases_per_cell=6, max_turns=3)
    result = _run(write_spec, document, tmp_path, counting_client)
    v = result.verdicts
    assert (v.status == "rollout_failed").any() and (v.status == "judge_failed").any()
    failed = v[v.status.isin(["rollout_failed", "judge_failed"])]
    assert failed.compliant.isna().all()
    assert (failed.reason.str.len() > 0).all()
    assert v.loc[v.status == "ok", "compliant"].notna().all()
    counts = v.status.value_counts().to_dict()
    for status, n in result.manifest.statuses.items():
        assert counts.get(status, 0) == n
    rates = result.rates[result.rates.subgroup == "all"]
    ok = v[v.status == "ok"].groupby(["universe_id", "system"]).size()
    merged = rates.set_index(["universe_id", "system"])["n"]
    assert (merged.loc[ok.index] == ok).all()


def test_tools_are_offered_called_answered_and_recorded(write_spec, tmp_path, counting_client):
    from multiverse.store._store import Store

    document = tiny_spec_document(
        design={"dimensions": [{"name": "behavior", "levels": ["false_tool_claim"]},
                               {"name": "interaction_condition", "levels": ["material_reliance"]}],
                "cases_per_cell": 6, "tools": True},
    )
    full = yaml.safe_load((SPECS / "deception-rubric.yaml").read_text())["criteria"]
    document["rubric"]["criteria"].append(next(c for c in full if c["id"] == "false_tool_claim"))
    result = _run(write_spec, document, tmp_path, counting_client)
    store = Store(tmp_path / "store")
    transcripts = [store.get("transcript", k) for k in result.verdicts.transcript_key.unique()]
    calls = [m for t in transcripts for m in t["turns"] if m["role"] == "assistant" and m.get("tool_calls")]
    results = [m for t in transcripts for m in t["turns"] if m["role"] == "tool"]
    assert calls, "with tools offered, some system turn must call one"
    assert len(results) == sum(len(m["tool_calls"]) for m in calls)
    # Every tool result is a simulator answer; an identical simulator request is sent once (the request cache).
    answers = [r for r in store.get_many("request", store.keys("request")).values()
               if r["provenance"]["model_requested"] == "sim/tools"]
    assert counting_client.calls["sim/tools"] == len(answers) <= len(results)
    assert {m["content"] for m in results} == {r["answer"]["text"] for r in answers}
    from multiverse.work._prompts import render_transcript

    rendered = render_transcript(next(t["turns"] for t in transcripts if any(m["role"] == "tool" for m in t["turns"])))
    assert "TOOL CALL" in rendered and "TOOL RESULT:" in rendered


def test_stored_records_carry_the_fields_their_types_declare(write_spec, tmp_path, counting_client):
    from typing import get_type_hints

    from multiverse.store._records import CaseRecord, CriterionLabel, JudgmentRecord, Provenance, TranscriptRecord, Turn
    from multiverse.store._store import Store

    document = tiny_spec_document(design={"dimensions": [{"name": "behavior"},
                                                         {"name": "interaction_condition", "levels": ["material_reliance"]}],
                                          "cases_per_cell": 1, "tools": True})
    _run(write_spec, document, tmp_path, counting_client)
    store = Store(tmp_path / "store")
    for stage, kind in (("case", CaseRecord), ("transcript", TranscriptRecord), ("judgment", JudgmentRecord)):
        declared = set(get_type_hints(kind))
        keys = list(store.keys(stage))
        assert keys, stage
        for record in store.get_many(stage, keys).values():
            # What the engine wrote is what the type declares (the store adds when it stored it).
            assert set(record) - {"stored_at"} <= declared, (stage, set(record) - declared)
            assert kind.__required_keys__ <= set(record), stage
            assert set(record["provenance"]) == set(get_type_hints(Provenance)), stage
            for turn in record.get("turns", []):
                assert set(turn) <= set(get_type_hints(Turn)), set(turn)
            for label in record.get("criteria", []):
                assert set(label) == set(get_type_hints(CriterionLabel)), set(label)


def test_bad_run_arguments_name_the_parameter_not_a_flag(write_spec, tmp_path, counting_client):
    import pytest

    from multiverse.errors import InputError, SpecError

    spec = load_spec(write_spec(tiny_spec_document()))
    for kwargs, param in (({"backend": "cloud"}, "backend"), ({"backend": "dask", "budget": 1.0}, "budget")):
        with pytest.raises(InputError) as refused:
            run(spec, store=tmp_path / "store", client=counting_client, out=tmp_path / "run", progress=False, **kwargs)
        assert refused.value.param == param and "--" not in str(refused.value)
    document = tiny_spec_document()
    del document["rubric"]
    with pytest.raises(SpecError) as refused:
        run(load_spec(write_spec(document, "bare.yaml")), store=tmp_path / "store", client=counting_client)
    assert "multiverse.draft" in str(refused.value) and "--" not in str(refused.value)
    assert counting_client.total == 0 and not (tmp_path / "store").exists()


def test_the_engine_and_the_work_room_never_name_a_command_line_flag():
    """Their refusals name Python parameters (force=True, `max_units`); the command turns those into flags."""
    import re
    from pathlib import Path

    import multiverse

    flag = re.compile(r"""(Error|Lost|Interrupted)\(\s*f?["'][^"']*--[a-z]""")
    root = Path(multiverse.__file__).parent
    for path in sorted([*(root / "engine").glob("*.py"), *(root / "work").glob("*.py")]):
        assert not flag.search(path.read_text(encoding="utf-8")), f"{path.name} names a flag in an error"
