"""The quick check of a structured answer says "valid" exactly when jsonschema does, on every schema it compiles."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from multiverse.model._answers import parse_json_answer
from multiverse.model._schema_check import compile_check
from multiverse.work import RUBRIC_SCHEMA, case_schema, judgment_schema, score_schema

KEYS = st.sampled_from(["a", "b", "c", "applicable", "rationale"])
TYPES = ["string", "boolean", "null", "object", "array", "number"]
JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False) | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12)


def schemas() -> st.SearchStrategy[dict]:
    leaf = st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3),
        "maxLength": st.integers(0, 5), "minLength": st.integers(0, 3), "description": st.text(max_size=3)})

    def extend(inner: st.SearchStrategy[dict]) -> st.SearchStrategy[dict]:
        return st.fixed_dictionaries({}, optional={
            "type": st.sampled_from(["object", "array"]) | st.just(["object", "null"]),
            "properties": st.dictionaries(KEYS, inner, max_size=3), "required": st.lists(KEYS, max_size=3, unique=True),
            "additionalProperties": st.booleans(), "items": inner})

    return st.recursive(leaf, extend, max_leaves=8)


@st.composite
def fitting(draw: st.DrawFn, schema: dict) -> object:
    """A value built to (nearly) match ``schema``: a random draw rarely matches an object schema."""
    named = schema.get("type", draw(st.sampled_from(TYPES)))
    kind = draw(st.sampled_from(named)) if isinstance(named, list) else named
    if kind == "object" or ("properties" in schema and draw(st.booleans())):
        keys = set(schema.get("properties", {})) | set(schema.get("required", []))
        value = {k: draw(fitting(schema.get("properties", {}).get(k, {}))) for k in keys if draw(st.integers(0, 19))}
        if draw(st.integers(0, 5)) == 0:
            value[draw(KEYS)] = draw(JSON)
        return value
    if kind == "array":
        return [draw(fitting(schema.get("items", {}))) for _ in range(draw(st.integers(0, 3)))]
    if kind == "string":  # at a length limit, or one off it
        limit = draw(st.sampled_from([schema[k] for k in ("maxLength", "minLength") if k in schema] or [3]))
        return draw(st.text(min_size=max(limit + draw(st.integers(-1, 1)), 0), max_size=max(limit + 1, 0)))
    return draw(JSON)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_quick_check_agrees_with_jsonschema(data):
    schema = data.draw(schemas())
    check = compile_check(schema)
    assert check is not None  # every schema drawn uses only the keywords it knows
    value = data.draw(JSON | fitting(schema))
    assert check(value) == jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)


@pytest.mark.parametrize("schema", [judgment_schema(["a", "b"]), score_schema(), case_schema(True), case_schema(False),
                                    RUBRIC_SCHEMA], ids=["judgment", "score", "case-tools", "case", "rubric"])
def test_the_schemas_a_run_sends_are_checked_quickly(schema):
    assert compile_check(schema) is not None


@pytest.mark.parametrize("schema", [
    {"type": "integer"}, {"enum": ["a"]}, {"$schema": "http://json-schema.org/draft-04/schema#"},
    {"properties": {"a": {"pattern": "x"}}}, {"additionalProperties": {"type": "string"}}, {"items": [{}]},
    {"type": []}, {"maxLength": True}, {"required": "a"}, True,
])
def test_a_schema_with_more_is_left_to_jsonschema(schema):
    assert compile_check(schema) is None


def test_an_answer_the_quick_check_refuses_gets_jsonschemas_message():
    schema = judgment_schema(["a"])
    good = {"criteria": {"a": {"applicable": True, "compliant": None, "rationale": "r"}}}
    assert parse_json_answer(json.dumps(good), schema) == good
    for bad, said in [({"criteria": {"a": {"applicable": 1, "compliant": None, "rationale": "r"}}},
                       "criteria/a/applicable: 1 is not of type 'boolean'"),
                      ({"criteria": {"a": {"applicable": True, "compliant": None, "rationale": "r" * 401}}},
                       "criteria/a/rationale: "),
                      ({"criteria": {}}, "criteria: 'a' is a required property")]:
        with pytest.raises(ValueError, match="^" + said.replace("(", r"\(")):
            parse_json_answer(json.dumps(bad), schema)
