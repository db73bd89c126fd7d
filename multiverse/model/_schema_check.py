"""A quick yes for a structured answer that matches its schema, for the schemas a run asks for.

jsonschema walks a schema keyword by keyword through its generic dispatch:
about a tenth of a millisecond for a judgment of three criteria, on every
judge call. The schemas a run sends (``multiverse.work``'s judgment, score,
case and rubric schemas) use a handful of keywords, so :func:`compile_check`
turns such a schema into plain nested checks once. It answers only "valid"
or "not shown valid": ``parse_json_answer`` still asks jsonschema whenever the
quick check does not say valid, so an invalid answer gets jsonschema's own
message and a schema with any other keyword (``$schema``, ``integer``,
``enum``, ``pattern``, ...) is checked by jsonschema alone. The quick check's
yes agrees with jsonschema's on every schema it compiles (a property test
draws schemas and answers, ``tests/test_schema_check.py``).

Each keyword holds only for the kind of value it is about, as in JSON Schema:
``properties``, ``required`` and ``additionalProperties`` for objects, ``items``
for arrays, ``maxLength`` and ``minLength`` (code points) for strings; a bool
is never a number.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["compile_check"]

Check = Callable[[Any], bool]

#: annotations, which validate nothing
_IGNORED = frozenset({"title", "description"})
_KNOWN = frozenset({"type", "properties", "required", "additionalProperties", "items", "maxLength", "minLength"}) | _IGNORED


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Number)


_TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "number": _is_number,
}


class _Unknown(Exception):
    """The schema uses more than this module knows."""


def compile_check(schema: Any) -> Check | None:
    """A function telling whether a value matches ``schema``, or None when the schema uses more than it knows."""
    try:
        return _compile(schema)
    except _Unknown:
        return None


def _compile(schema: Any) -> Check:
    if not isinstance(schema, Mapping) or not set(schema) <= _KNOWN:
        raise _Unknown
    checks: list[Check] = []
    if "type" in schema:
        named = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not named or not all(isinstance(t, str) and t in _TYPES for t in named):
            raise _Unknown
        kinds = [_TYPES[t] for t in named]
        checks.append(kinds[0] if len(kinds) == 1 else lambda v: any(kind(v) for kind in kinds))
    if {"properties", "required", "additionalProperties"} & set(schema):
        checks.append(_object_check(schema))
    if "items" in schema:
        item = _compile(schema["items"])
        checks.append(lambda v: not isinstance(v, list) or all(item(x) for x in v))
    if "maxLength" in schema:
        most = _length(schema["maxLength"])
        checks.append(lambda v: not isinstance(v, str) or len(v) <= most)
    if "minLength" in schema:
        least = _length(schema["minLength"])
        checks.append(lambda v: not isinstance(v, str) or len(v) >= least)
    return _all_of(checks)


def _length(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise _Unknown
    return limit


def _all_of(checks: list[Check]) -> Check:
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    first, rest = checks[0], _all_of(checks[1:])
    return lambda v: first(v) and rest(v)


def _object_check(schema: Mapping[str, Any]) -> Check:
    """The check of the object keywords (``properties``, ``required``, ``additionalProperties``)."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list) or not isinstance(extra, bool):
        raise _Unknown
    if not all(isinstance(key, str) for key in required):
        raise _Unknown
    inner = {key: _compile(sub) for key, sub in properties.items()}
    known = frozenset(inner)
    needed = tuple(required)

    def check(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        if not extra and not known.issuperset(v):
            return False
        return all(key in v for key in needed) and all(inner[key](v[key]) for key in inner if key in v)

    return check
