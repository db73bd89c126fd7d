"""The spec loader: specs/demo.yaml, round trips, rubric files and the JSON Schema."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from cli_runner import run_cli

from multiverse.errors import SpecError
from multiverse.spec import (
    Spec,
    design_levels,
    load_spec,
    load_yaml,
    parse_spec,
    spec_schema,
    to_yaml_dict,
)
from multiverse.spec._grid import expand

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
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(path)
    raw["rubric"] = "../rubrics/r.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert len(load_spec(path).rubric.criteria) == 10


@pytest.mark.parametrize("where", ["missing", "folder"])
def test_an_unreadable_rubric_file_names_the_spec_field_that_named_it(tmp_path, where):
    raw = _raw_demo()
    raw["rubric"] = "rubrics/mine.yaml"
    if where == "folder":
        (tmp_path / "rubrics" / "mine.yaml").mkdir(parents=True)
    path = tmp_path / "audit.yaml"
    text = yaml.safe_dump(raw, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith("rubric:"))
    line_out = run_cli(["validate", path]).refused(str(path), f"rubric (line {line})", str(tmp_path / "rubrics" / "mine.yaml"))
    assert ("does not exist" if where == "missing" else "not a regular file") in line_out


@pytest.mark.parametrize("edit", ["drop_level", "add_level", "duplicate_id"])
def test_rubric_problems_are_reported_at_the_rubric_files_own_line(tmp_path, edit):
    rubric = _raw_rubric()
    criteria = rubric["criteria"]
    if edit == "drop_level":
        criteria[3]["evidence"].pop("lenient")
    elif edit == "add_level":
        criteria[2]["evidence"]["moderate"] = "somewhere between"
    else:
        criteria[4]["id"] = criteria[1]["id"]
    rubric_text = yaml.safe_dump(rubric, sort_keys=False)
    (tmp_path / "r.yaml").write_text(rubric_text, encoding="utf-8")
    raw = _raw_demo()
    raw["rubric"] = "r.yaml"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "s.yaml")
    assert info.value.file == str(tmp_path / "r.yaml")
    # The line of that criterion's own key in the rubric file, not the spec's `rubric:` line.
    _, lines = load_yaml(tmp_path / "r.yaml")
    field, line = info.value.path.removesuffix(")").split(" (line ")
    assert field.startswith("criteria") and lines[field] == int(line), info.value.path
    if edit == "drop_level":
        assert field == "criteria.3.evidence"
    # Inline, the same problem is at the spec's own line for that criterion.
    raw["rubric"] = rubric
    text = yaml.safe_dump(raw, sort_keys=False)
    (tmp_path / "inline.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as inline:
        load_spec(tmp_path / "inline.yaml")
    assert inline.value.file == str(tmp_path / "inline.yaml") and inline.value.path.startswith("rubric.criteria")


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


def test_schema_is_pydantic_s_schema_of_the_spec_models():
    from multiverse.spec import Spec as SpecModel

    schema = spec_schema()
    generated = SpecModel.model_json_schema()
    # One description: every field of the models is in the schema, with the models' own definitions.
    assert set(schema["properties"]) == set(SpecModel.model_fields)
    assert schema["$defs"].keys() == generated["$defs"].keys()
    for name, definition in generated["$defs"].items():
        assert schema["$defs"][name]["properties"].keys() == definition["properties"].keys(), name
    assert {k: v for k, v in schema["properties"].items() if k != "rubric"} == {
        k: v for k, v in generated["properties"].items() if k != "rubric"
    }
    # The field docs come from Field(description=...).
    assert "pre-registered" in schema["properties"]["primary"]["description"]
    rate = schema["$defs"]["RateLimit"]
    assert rate["additionalProperties"] is False
    assert rate["properties"]["rpm"]["anyOf"][0] == {"exclusiveMinimum": 0, "type": "integer"}


@pytest.mark.parametrize(
    "path, bad, good",
    [
        (("rollout", "max_turns"), 0, 1),
        (("rollout", "max_turns"), 101, 100),
        (("design", "cases_per_cell"), 10_001, 10_000),
        (("scoring", "ci", "level"), 1, 0.99),
        (("scoring", "ci", "n_boot"), 9, 10),
    ],
)
def test_schema_carries_the_ranges_the_checks_enforce(demo, validator, path, bad, good, tmp_path):
    for value, valid in ((bad, False), (good, True)):
        document = json.loads(json.dumps(demo.document))
        node = document
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        assert (list(validator.iter_errors(document)) == []) is valid, (path, value)
        # ... and the loader agrees with the schema.
        if valid:
            parse_spec(document, path=DEMO)
        else:
            with pytest.raises(SpecError, match=".".join(path)):
                parse_spec(document, path=DEMO)


def test_schema_checks_rate_limits(demo, validator):
    document = json.loads(json.dumps(demo.document))
    document["rate_limits"] = {"openai/": {"rpm": 500, "tpm": 200_000}, "anthropic/claude-haiku": {"max_concurrency": 4}}
    assert list(validator.iter_errors(document)) == []
    for bad in ({"rpm": 0}, {"rpd": 1}, {"rpm": "500"}, "fast"):
        document["rate_limits"] = {"openai/": bad}
        assert list(validator.iter_errors(document)), bad


# -- rate limits -----------------------------------------------------------------


@pytest.mark.parametrize(
    "edit, where, expected",
    [
        (lambda d: d["rollout"].__setitem__("setting", None), "rollout.setting",
         "expected one of 'single_turn', 'multi_turn', got null"),
        (lambda d: d["scoring"].__setitem__("rule", 3), "scoring.rule", "got 3"),
        (lambda d: d["scoring"]["ci"].__setitem__("level", True), "scoring.ci.level", "expected a number, got a boolean"),
        (lambda d: d["systems"][0].__setitem__("params", [1]), "systems.0.params", "expected a mapping, got a list"),
        (lambda d: d["systems"][0].__setitem__("params", {7: 1}), "systems.0.params.7", "expected string keys"),
        (lambda d: d.__setitem__("sample", 5), "sample", "expected a mapping, got the number 5"),
        (lambda d: d.__setitem__("world", ["x"]), "world", "expected a string, got a list"),
        (lambda d: d["design"].__setitem__("dimensions", [{"name": "behavior", "levels": "a"}]),
         "design.dimensions.0.levels", "expected a list of strings, got the string 'a'"),
    ],
)
def test_type_problems_are_worded_in_yaml_terms(edit, where, expected, tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    edit(raw)
    with pytest.raises(SpecError) as info:
        parse_spec(raw, path=tmp_path / "t.yaml")
    assert info.value.path == where
    assert expected in info.value.expected, info.value.expected


def test_rate_limits_are_typed_config_and_change_no_universe(demo):
    from multiverse.core._config import RateLimit

    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["rate_limits"] = {
        "openai/": {"rpm": 500, "tpm": 200_000},
        "openai/gpt-4o": {"max_concurrency": 2},
        "anthropic/claude-haiku": {"max_concurrency": 4},
    }
    spec = parse_spec(raw, path=DEMO)
    assert spec.rate_limits["openai/"] == RateLimit(rpm=500, tpm=200_000)
    assert spec.rate_limits["anthropic/claude-haiku"].max_concurrency == 4
    assert spec.rate_limits["anthropic/claude-haiku"].rpm is None
    # Pacing is not a measurement choice.
    assert spec.measurement() == demo.measurement()
    assert _ids(spec) == _ids(demo)
    assert list(spec.rate_limits) == ["openai/", "openai/gpt-4o", "anthropic/claude-haiku"]
    with pytest.raises(TypeError):
        spec.rate_limits["sim/"] = RateLimit(rpm=1)  # type: ignore[index]


@pytest.mark.parametrize(
    "limits, where, expected",
    [
        ({"openai/": {"tpm": -5}}, "rate_limits.openai/.tpm", "expected an integer > 0, got -5"),
        ({"openai/": {"rpm": True}}, "rate_limits.openai/.rpm", "expected an integer, got a boolean"),
        ({"openai/": {"rpm": 1.5}}, "rate_limits.openai/.rpm", "expected an integer, got the number 1.5"),
        ({"openai/": None}, "rate_limits.openai/", "expected a mapping, got null"),
        ({"openai/": {"rpm": None}}, "rate_limits.openai/", "expected at least one of rpm, tpm, max_concurrency"),
        ({"/gpt": {"rpm": 1}}, "rate_limits./gpt", "expected a model-string prefix"),
        ({"": {"rpm": 1}}, "rate_limits.", "expected a model-string prefix"),
    ],
)
def test_rate_limits_problems_are_one_line_each(limits, where, expected, tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["rate_limits"] = limits
    with pytest.raises(SpecError) as info:
        parse_spec(raw, path=tmp_path / "limits.yaml")
    assert info.value.problems == [f"{tmp_path / 'limits.yaml'}: {where}: {info.value.expected}"]
    assert expected in info.value.expected


def test_an_axis_cannot_patch_rate_limits(tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["rate_limits"] = {"openai/": {"rpm": 10}}
    raw["axes"]["pace"] = {"slow": {"rate_limits.openai/.rpm": 1}, "fast": {"rate_limits.openai/.rpm": 100}}
    with pytest.raises(SpecError) as info:
        parse_spec(raw, path=tmp_path / "pace.yaml")
    assert any("axes.pace.slow.rate_limits" in p and "not a measurement choice" in p for p in info.value.problems)


# -- the spec's place in the data flow ---------------------------------------------


def test_importing_the_spec_imports_nothing_downstream():
    code = (
        "import sys, multiverse.spec, multiverse.core._config\n"
        "bad = sorted(m for m in sys.modules if m == 'litellm' or m.startswith(('multiverse.sim', "
        "'multiverse.engine._pipeline', 'multiverse.stages', 'multiverse.model._llm', 'multiverse.work._units')))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_the_shared_config_does_not_import_the_spec():
    code = "import sys, multiverse.core._config\nprint('multiverse.spec' in sys.modules, 'multiverse.spec._models' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_world_checks_go_through_the_model_layer_registry(monkeypatch, tmp_path):
    from multiverse.core import _model_names as model_names

    seen = []

    def checker(world, base_dir):
        seen.append((world, base_dir))
        return None if world == "known" else f"no world {world!r} in the registry's provider"

    monkeypatch.setitem(model_names._world_checkers, model_names.WORLD_PROVIDER, checker)
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["world"] = "elsewhere"
    with pytest.raises(SpecError) as info:
        parse_spec(raw, path=tmp_path / "w.yaml")
    assert info.value.path == "world" and info.value.expected == "no world 'elsewhere' in the registry's provider"
    assert seen == [("elsewhere", tmp_path)]


def test_sections_give_the_model_layer_its_config(demo, monkeypatch):
    from multiverse.core._config import ModelConfig

    monkeypatch.setenv("MV_TEST_PORT", "8123")
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["judge"]["api_base"] = "http://127.0.0.1:${MV_TEST_PORT:-9}/v1"
    raw["judge"]["params"] = {"temperature": 0}
    spec = parse_spec(raw, path=DEMO)
    config = spec.judge.to_model_config()
    assert config == ModelConfig("sim/judge-a", {"temperature": 0}, "http://127.0.0.1:8123/v1", None)
    # The universe keeps the unexpanded text.
    assert spec.judge.api_base == "http://127.0.0.1:${MV_TEST_PORT:-9}/v1"


def test_a_spec_pickles_with_its_origin(demo):
    import pickle

    again = pickle.loads(pickle.dumps(demo))
    assert again == demo
    assert again.path == demo.path and again.document == demo.document
    with pytest.raises(AttributeError):
        del again.name


# -- any malformed value: a SpecError, one line per problem -----------------------

_ODD_VALUES = [None, 0, -1, 1.5, True, "x", "", [], {}, [1], {"a": 1}, {1: 2}, b"x", {"x"}, 10**30, float("nan")]


def _paths(node, prefix=()):
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def test_any_odd_value_anywhere_is_a_one_line_spec_error_or_a_spec(tmp_path):
    import copy
    import datetime
    import random

    base = _raw_demo()
    base["rubric"] = _raw_rubric()
    base["rate_limits"] = {"openai/": {"rpm": 5}}
    base["sample"] = {"n": 3, "method": "lhs"}
    paths = list(_paths(base))
    values = [*_ODD_VALUES, datetime.date(2020, 1, 1)]
    rng = random.Random(0)
    file = tmp_path / "odd.yaml"
    outcomes = collections.Counter()
    for _ in range(300):
        document = copy.deepcopy(base)
        path = rng.choice(paths)
        node = document
        for key in path[:-1]:
            node = node[key]
        if isinstance(node, dict) and rng.random() < 0.2:
            node[rng.choice([1, "zz", None])] = rng.choice(values)  # an odd key
        else:
            node[path[-1]] = rng.choice(values)
        try:
            parse_spec(document, path=file)
            outcomes["spec"] += 1
        except SpecError as error:
            outcomes["error"] += 1
            problems = getattr(error, "problems", None) or [str(error)]
            assert str(error) == problems[0]
            for line in problems:
                assert "\n" not in line and line.startswith(f"{file}: "), line
    assert outcomes["error"] > 200  # the mutations are mostly wrong, and each one was refused cleanly


def test_a_misspelt_key_is_reported_before_the_missing_one_it_explains(tmp_path):
    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw["systems"][0]["modle"] = raw["systems"][0].pop("model")
    raw["rollout"]["max_turns"] = "three"
    with pytest.raises(SpecError) as info:
        parse_spec(raw, path=tmp_path / "typo.yaml")
    assert [p.split(": ")[1] for p in info.value.problems] == ["systems.0.modle", "systems.0.model", "rollout.max_turns"]
    assert info.value.path == "systems.0.modle"


def test_too_many_options_are_refused_before_any_option_is_resolved(monkeypatch, tmp_path):
    import multiverse.spec._parse as parse
    from multiverse.core._bounds import MAX_OPTIONS

    raw = _raw_demo()
    raw["rubric"] = _raw_rubric()
    raw.pop("exclude", None)
    raw.pop("sample", None)
    real, resolved = parse.resolve_document, []
    monkeypatch.setattr(parse, "resolve_document", lambda *a, **k: resolved.append(1) or real(*a, **k))
    raw["axes"] = {"t": {f"o{j}": {"systems.atlas.params.temperature": j} for j in range(3)}}
    raw["primary"] = {"t": "o0"}
    parse_spec(raw, path=tmp_path / "few.yaml")
    assert len(resolved) == 1 + 3  # the base, then each option on its own: the counter sees them
    resolved.clear()
    raw["axes"] = {"t": {f"o{j}": {"systems.atlas.params.temperature": j} for j in range(MAX_OPTIONS + 1)}}
    with pytest.raises(SpecError, match="at most"):
        parse_spec(raw, path=tmp_path / "many.yaml")
    assert resolved == [1]  # only the base: resolving thousands of options one by one would take minutes
