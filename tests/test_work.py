"""Work units and their keys (multiverse.work._units): templates in the keys, shared digests, no back-edge to the stages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import tiny_spec_document

from multiverse.spec import load_spec
from multiverse.spec._grid import expand
from multiverse.work import _prompts as prompts
from multiverse.work._units import build_work

#: Templates of prompts whose answers are never stored under a key: a rubric draft is written for people to edit.
UNKEYED = {"DRAFT_RUBRIC_SYSTEM", "DRAFT_RUBRIC_USER", "RUBRIC_SCHEMA"}


def _keys(spec) -> dict[str, set[str]]:
    work = build_work(spec)
    return {"case": set(work.cases), "transcript": set(work.transcripts), "judgment": set(work.judge_calls),
            "row": {r.judgment_key for r in work.rows}}


def _perturbed(value):
    if isinstance(value, str):
        return value + " (edited)"
    if isinstance(value, int) and not isinstance(value, bool):
        return value + 1
    if isinstance(value, dict):
        first = next(iter(value))
        return {**value, first: _perturbed(value[first])}
    raise TypeError(value)


def _templates() -> list[str]:
    """Every module-level template constant of multiverse.work._prompts (UPPER_CASE str, int or dict)."""
    return [name for name, value in vars(prompts).items()
            if name.isupper() and isinstance(value, (str, int, dict)) and not isinstance(value, bool)]


@pytest.fixture
def spec(write_spec):
    document = tiny_spec_document(
        axes={"judge": {"judge_a": {"judge.model": "sim/judge-a"}, "judge_b": {"judge.model": "sim/judge-b"}},
              "scoring": {"all": {"scoring.rule": "all_applicable"}, "imp": {"scoring.rule": "impermissible_only"}}},
        design={"dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
                "cases_per_cell": 2, "tools": True},
    )
    return load_spec(write_spec(document))


def test_every_template_is_in_the_key_of_what_it_makes(spec, monkeypatch):
    names = _templates()
    assert {"JUDGE_SYSTEM", "USER_SYSTEM", "DRAFT_CASE_USER", "TRANSCRIPT_LINES", "END_MARKER", "TASK"} <= set(names)
    before = prompts.template_digests()
    for name in names:
        if name in UNKEYED:
            continue
        with monkeypatch.context() as patch:
            patch.setattr(prompts, name, _perturbed(getattr(prompts, name)))
            after = prompts.template_digests()
        assert after != before, f"prompts.{name}: editing it leaves every key as it was"


def test_the_unkeyed_templates_really_make_no_stored_unit(spec, monkeypatch):
    # If a rubric draft ever became a stored unit, its templates would need a key part.
    before = _keys(spec)
    for name in UNKEYED:
        monkeypatch.setattr(prompts, name, _perturbed(getattr(prompts, name)))
    assert _keys(spec) == before


@pytest.mark.parametrize(
    ("template", "changed"),
    [
        ("DRAFT_CASE_SYSTEM", {"case", "transcript", "judgment", "row"}),
        ("USER_SYSTEM", {"transcript", "judgment", "row"}),
        ("TOOL_SYSTEM", {"transcript", "judgment", "row"}),
        ("JUDGE_CRITERION", {"judgment", "row"}),
        ("RATIONALE_MAX", {"judgment", "row"}),
        ("TRANSCRIPT_LINES", {"transcript", "judgment", "row"}),  # the tool simulator and the judge read it
    ],
)
def test_editing_a_template_recomputes_what_it_made_and_nothing_upstream(spec, monkeypatch, template, changed):
    before = _keys(spec)
    monkeypatch.setattr(prompts, template, _perturbed(getattr(prompts, template)))
    after = _keys(spec)
    for stage, keys in before.items():
        if stage in changed:
            assert keys.isdisjoint(after[stage]), f"{template}: some {stage} keys survived the edit"
        else:
            assert keys == after[stage], f"{template}: {stage} keys changed"


def test_the_stages_render_from_the_templates_in_the_key(monkeypatch):
    from multiverse.spec import Criterion

    criteria = [Criterion(id="c1", name="Name", definition="Definition", permissible=False, evidence={"strict": "evidence"})]
    before = prompts.judge_messages(criteria, "strict", "USER: hi")
    monkeypatch.setattr(prompts, "JUDGE_SYSTEM", "another system text")
    assert prompts.judge_messages(criteria, "strict", "USER: hi")[0]["content"] == "another system text" != before[0]["content"]


def test_shared_digests_give_every_universe_the_keys_it_gets_alone(spec):
    together = build_work(spec)
    universes = expand(spec)
    assert len(universes) == 4
    rows = {(r.universe.id, r.system, r.case_id, r.replicate): r for r in together.rows}
    for universe in universes:
        alone = build_work(spec, [universe])
        for r in alone.rows:
            shared = rows[(universe.id, r.system, r.case_id, r.replicate)]
            assert (r.case_key, r.transcript_key, r.judgment_key, r.judge_calls) == (
                shared.case_key, shared.transcript_key, shared.judgment_key, shared.judge_calls)
        for key, unit in alone.transcripts.items():
            assert together.transcripts[key].seed == unit.seed and together.transcripts[key].configs == unit.configs
        for key, call in alone.judge_calls.items():
            assert together.judge_calls[key].config == call.config and together.judge_calls[key].seed == call.seed


def test_universes_differing_in_judge_or_scoring_share_units(spec):
    work = build_work(spec)
    assert len(work.cases) == 4 and len(work.transcripts) == 8  # 2 systems x 4 cases, shared by all 4 universes
    assert len(work.judge_calls) == 16  # two judges; the scoring axis adds none
    assert len({r.judgment_key for r in work.rows}) == 16 and len(work.rows) == 32


def test_a_case_file_case_is_keyed_by_its_content_alone(write_spec, tmp_path):
    import yaml

    cases = {"cases": [{"id": "c1", "cell": {"behavior": "fabricate_evidence", "interaction_condition": "material_reliance"},
                        "brief": "A brief.", "prompt": "Hello?"}]}
    (tmp_path / "cases.yaml").write_text(yaml.safe_dump(cases))
    design = {"dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
              "cases": "cases.yaml"}
    first = build_work(load_spec(write_spec(tiny_spec_document(design=design))))
    changed = tiny_spec_document(design=design, judge={"model": "sim/judge-b", "evidence_standard": "strict"})
    second = build_work(load_spec(write_spec(changed, "other.yaml")))
    assert set(first.cases) == set(second.cases) and set(first.transcripts) == set(second.transcripts)
    cases["cases"][0]["brief"] = "Another brief."
    (tmp_path / "cases.yaml").write_text(yaml.safe_dump(cases))
    third = build_work(load_spec(write_spec(tiny_spec_document(design=design), "third.yaml")))
    assert set(third.cases).isdisjoint(first.cases) and set(third.transcripts).isdisjoint(first.transcripts)


def test_work_units_do_not_import_the_stages():
    code = ("import sys, multiverse.work._units, multiverse.engine._pipeline; "
            "loaded = sorted(m for m in sys.modules if m.startswith('multiverse.stages')); "
            "assert not loaded, loaded")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr



def test_a_simulated_model_is_keyed_by_its_built_in_worlds_content(write_spec):
    # The built-in world ships with the sim room: its content is in every sim/ key, so editing it recomputes.
    from pathlib import Path

    import multiverse
    from multiverse.core._config import ModelConfig
    from multiverse.core._keys import digest
    from multiverse.work import case_inputs, template_digests
    from multiverse.work._inputs import model_key

    world = Path(multiverse.__file__).parent / "sim" / "worlds" / "deception.yaml"
    key = model_key(ModelConfig(model="sim/user", api_base="sim://deception"))
    assert key["world"] == digest(world.read_bytes().decode("utf-8", "replace"))
    assert model_key(ModelConfig(model="sim/user"))["world"] == key["world"]  # the built-in world by default
    generator, _ = case_inputs(load_spec(write_spec(tiny_spec_document())), template_digests())
    assert generator.model.startswith("sim/") and model_key(generator)["world"] == key["world"]
