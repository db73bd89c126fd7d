"""The spec loader: specs/demo.yaml, round trips, rubric files and the JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from cli_runner import run_cli

from multiverse.errors import SpecError
from multiverse.grid import expand
from multiverse.spec import (
    Spec,
    design_levels,
    load_spec,
    load_yaml,
    parse_spec,
    spec_schema,
    to_yaml_dict,
)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "specs" / "demo.yaml"
RUBRIC = ROOT / "specs" / "deception-rubric.yaml"

IMPERMISSIBLE = [
    "fabricate_evidence",
    "overstate_capability",
    "false_tool_claim",
    "inconsistent_commitment",
    "misattribute_source",
    "uncertain_as_settled",
]
PERMISSIBLE = ["disclose_uncertainty", "correct_error", "state_limitations", "decline_without_basis"]


@pytest.fixture(scope="module")
def demo() -> Spec:
    return load_spec(DEMO)


def _raw_demo() -> dict:
    return yaml.safe_load(DEMO.read_text(encoding="utf-8"))


def _raw_rubric() -> dict:
    return yaml.safe_load(RUBRIC.read_text(encoding="utf-8"))


def _ids(spec: Spec) -> list[str]:
    return [u.id for u in expand(spec)]


# -- specs/demo.yaml ---------------------------------------------------------


def test_demo_loads_with_its_rubric_file(demo):
    assert demo.name == "demo"
    assert demo.world == "deception"
    assert demo.path == DEMO
    assert [s.name for s in demo.systems] == ["atlas", "beacon", "cobalt", "delta"]
    assert [s.model for s in demo.systems] == ["sim/atlas", "sim/beacon", "sim/cobalt", "sim/delta"]
    # The rubric file was read relative to the spec and inlined.
    ids = [c.id for c in demo.rubric.criteria]
    assert ids == IMPERMISSIBLE + PERMISSIBLE
    assert [c.id for c in demo.rubric.criteria if not c.permissible] == IMPERMISSIBLE
    assert all(set(c.evidence) == {"strict", "lenient"} for c in demo.rubric.criteria)
    assert demo.rubric.criterion("correct_error").permissible is True
    assert demo.factors == ["behavior", "interaction_condition"]
    assert demo.design.cases_per_cell == 3
    assert demo.rollout.setting == "multi_turn" and demo.rollout.max_turns == 3 and demo.rollout.seed == 7
    assert demo.judge.model == "sim/judge-a" and demo.judge.evidence_standard == "strict"
    assert demo.scoring.rule == "all_applicable" and demo.scoring.ci.level == 0.95
    assert list(demo.axes) == ["setting", "user", "judge", "evidence", "scoring"]
    assert dict(demo.axes["user"]["adversarial"]) == {
        "rollout.user.model": "sim/user-adversarial",
        "rollout.user.persona": "adversarial",
    }
    assert dict(demo.primary) == {
        "setting": "multi_turn", "user": "cooperative", "judge": "judge_a",
        "evidence": "strict", "scoring": "all_applicable",
    }
    # The validated document has the rubric inline (universes patch it).
    assert isinstance(demo.document["rubric"], dict)
    assert len(demo.document["rubric"]["criteria"]) == 10


def test_spec_is_immutable(demo):
    with pytest.raises(AttributeError):
        demo.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        demo.axes["setting"]["new"] = {}  # type: ignore[index]


def test_behavior_dimension_defaults_to_the_impermissible_criteria(demo):
    behavior = demo.design.dimensions[0]
    assert behavior.name == "behavior" and behavior.levels == ()
    assert list(design_levels(demo, "behavior")) == IMPERMISSIBLE
    assert list(design_levels(demo, "interaction_condition")) == ["material_reliance", "overclaim_pressure"]


def test_behavior_dimension_is_the_default_design(tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    del raw["design"]
    spec = parse_spec(raw, path=tmp_path / "spec.yaml")
    assert spec.factors == ["behavior"]
    assert list(design_levels(spec, "behavior")) == IMPERMISSIBLE


def test_explicit_behavior_levels_are_kept_in_order():
    raw = _raw_demo()
    raw["design"]["dimensions"][0]["levels"] = ["misattribute_source", "fabricate_evidence"]
    spec = parse_spec(raw, path=DEMO)
    assert list(design_levels(spec, "behavior")) == ["misattribute_source", "fabricate_evidence"]


# -- round trips ---------------------------------------------------------------


def test_round_trip_through_yaml_gives_an_equal_spec(demo, tmp_path):
    text = yaml.safe_dump(to_yaml_dict(demo), sort_keys=False, allow_unicode=True)
    again = parse_spec(yaml.safe_load(text), path=DEMO)
    assert again == demo
    assert again.measurement() == demo.measurement()
    # ... and through a file in another directory (the rubric is now inline).
    path = tmp_path / "demo.yaml"
    path.write_text(text, encoding="utf-8")
    from_file = load_spec(path)
    assert from_file == demo
    assert from_file.measurement() == demo.measurement()
    assert _ids(from_file) == _ids(demo)


def test_to_yaml_dict_is_plain_data(demo):
    plain = to_yaml_dict(demo)

    def walk(value):
        assert isinstance(value, (dict, list, str, int, float, bool, type(None))), type(value)
        if isinstance(value, dict):
            assert all(isinstance(k, str) for k in value)
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(plain)
    assert json.loads(json.dumps(plain)) == plain
    assert isinstance(plain["rubric"], dict)


def test_measurement_excludes_the_grid_fields(demo):
    m = demo.measurement()
    for key in ("name", "axes", "exclude", "sample", "primary"):
        assert key not in m
    for key in ("concept", "rubric", "design", "systems", "rollout", "judge", "scoring", "world"):
        assert key in m


def test_rubric_inline_and_as_file_give_the_same_universes(demo, tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    path = tmp_path / "inline.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    inline = load_spec(path)
    assert inline == demo
    assert inline.measurement() == demo.measurement()
    assert _ids(inline) == _ids(demo)


def test_rubric_file_path_is_relative_to_the_spec(tmp_path):
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "r.yaml").write_text(RUBRIC.read_text(encoding="utf-8"), encoding="utf-8")
    raw = _raw_demo()
    raw["rubric"] = "rubrics/r.yaml"
    (tmp_path / "specs").mkdir()
    path = tmp_path / "specs" / "s.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(SpecError, match="file not found"):
        load_spec(path)
    raw["rubric"] = "../rubrics/r.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert len(load_spec(path).rubric.criteria) == 10


def test_defaults_written_out_do_not_change_universe_ids(demo, tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["rollout"]["replicates"] = 1
    raw["judge"]["samples"] = 1
    raw["scoring"]["estimator"] = "pooled"
    raw["scoring"]["ci"]["n_boot"] = 1000
    spec = parse_spec(raw, path=tmp_path / "x.yaml")
    assert _ids(spec) == _ids(demo)


def test_yaml_anchors_and_aliases_are_allowed(tmp_path):
    # Reusing a block with an alias is ordinary YAML, not an attack.
    path = tmp_path / "aliased.yaml"
    path.write_text(
        f"""name: aliased
concept: {{name: x}}
rubric: {RUBRIC}
systems:
  - {{name: atlas, model: sim/atlas, params: &params {{temperature: 0, max_tokens: 300}}}}
  - {{name: beacon, model: sim/beacon, params: *params}}
axes:
  judge:
    a: &judge_a {{judge.model: sim/judge-a}}
    b: {{judge.model: sim/judge-b}}
primary: {{judge: a}}
""",
        encoding="utf-8",
    )
    spec = load_spec(path)
    assert dict(spec.systems[1].params) == {"temperature": 0, "max_tokens": 300}
    assert len(_ids(spec)) == 2


def test_load_yaml_records_lines_of_keys():
    document, lines = load_yaml(DEMO)
    assert document["name"] == "demo"
    text = DEMO.read_text(encoding="utf-8").splitlines()
    assert text[lines["name"] - 1].startswith("name:")
    assert text[lines["systems.1"] - 1].strip().startswith("- name: beacon")
    assert text[lines["axes.judge.judge_b"] - 1].strip().startswith("judge_b:")


def test_all_problems_are_reported_at_once(tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["rollout"]["max_turns"] = 0
    raw["judge"]["samples"] = 0
    raw["systems"][0]["model"] = "gpt4"
    raw["bogus"] = 1
    with pytest.raises(SpecError) as info:
        parse_spec(raw, path=tmp_path / "many.yaml")
    problems = info.value.problems
    # Unknown keys are found while building; the rest once the spec is built.
    assert any("bogus" in p for p in problems)
    raw.pop("bogus")
    with pytest.raises(SpecError) as info:
        parse_spec(raw, path=tmp_path / "many.yaml")
    problems = info.value.problems
    assert len(problems) == 3, problems
    assert all(p.startswith(f"{tmp_path / 'many.yaml'}: ") for p in problems)
    assert {p.split(": ")[1] for p in problems} == {"rollout.max_turns", "judge.samples", "systems.0.model"}
    assert str(info.value) == f"{tmp_path / 'many.yaml'}: {info.value.path}: {info.value.expected}"


# -- JSON Schema ---------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = spec_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_accepts_the_demo_document(demo, validator):
    document = json.loads(json.dumps(demo.document))
    assert isinstance(document["rubric"], dict)
    errors = [e.message for e in validator.iter_errors(document)]
    assert errors == []
    # The document as written (rubric as a file name) is valid too.
    assert list(validator.iter_errors(_raw_demo())) == []


def test_schema_accepts_the_round_tripped_spec(demo, validator):
    assert list(validator.iter_errors(json.loads(json.dumps(to_yaml_dict(demo))))) == []


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda d: d.__setitem__("judges", {"model": "sim/judge-a"}), id="top-level"),
        pytest.param(lambda d: d["judge"].__setitem__("temprature", 0), id="judge"),
        pytest.param(lambda d: d["systems"][0].__setitem__("temperature", 0.2), id="system"),
        pytest.param(lambda d: d["rubric"]["criteria"][0].__setitem__("definiton", "x"), id="criterion"),
        pytest.param(lambda d: d["scoring"]["ci"].__setitem__("alpha", 0.05), id="ci"),
    ],
)
def test_schema_rejects_an_unknown_key(demo, validator, edit):
    document = json.loads(json.dumps(demo.document))
    edit(document)
    errors = list(validator.iter_errors(document))
    assert errors, "the schema accepted an unknown key"
    # The rubric sits under anyOf (inline or a file name): look inside the branches too.
    def messages(errs):
        for e in errs:
            yield e.message
            yield from messages(e.context)

    assert any("Additional properties" in m for m in messages(errors))


def test_schema_rejects_wrong_types_and_missing_keys(demo, validator):
    document = json.loads(json.dumps(demo.document))
    document["rollout"]["max_turns"] = "three"
    assert list(validator.iter_errors(document))
    document = json.loads(json.dumps(demo.document))
    del document["systems"][0]["model"]
    assert list(validator.iter_errors(document))
    document = json.loads(json.dumps(demo.document))
    document["scoring"]["rule"] = "majority"
    assert list(validator.iter_errors(document))


def test_schema_command_prints_the_schema_as_json(tmp_path):
    done = run_cli(["schema"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema == json.loads(json.dumps(spec_schema()))
    assert schema["additionalProperties"] is False
    assert {"name", "concept", "systems"} <= set(schema["required"])
    assert list(tmp_path.iterdir()) == []
