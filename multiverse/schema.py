"""Typed YAML -> frozen dataclasses, with errors that name the YAML path.

The spec is described once, as dataclasses with type hints. This module walks
a parsed YAML document against those hints, collecting every problem as one
line (``file: yaml.path (line N): expected ...``), and derives the JSON Schema
that editors use from the same hints. One description, two uses, no drift.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``Any``,
``Literal[...]``, ``X | None``, ``tuple[X, ...]``, ``Mapping[str, X]`` and
dataclasses. A dataclass field may carry ``metadata={"doc": ...}`` for the
schema, and ``metadata={"named": True}`` on a tuple of dataclasses with a
``name``/``id`` to make its elements addressable by name in dotted paths.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

__all__ = ["Problems", "FrozenMap", "build", "json_schema", "resolve_path", "UNSET"]


class FrozenMap(Mapping):
    """A read-only mapping that pickles (``MappingProxyType`` does not), so a
    spec can travel to worker processes."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping | None = None):
        self._data = dict(data or {})

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self):
        return (FrozenMap, (self._data,))


class _Unset:
    """Marks "not given", which is different from an explicit ``null``."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


class Problems:
    """Collects validation problems as ``(yaml_path, expected)`` pairs."""

    def __init__(self, lines: Mapping[str, int] | None = None):
        self.items: list[tuple[str, str]] = []
        self.lines = dict(lines or {})

    def add(self, path: str, expected: str) -> None:
        self.items.append((path, expected))

    def __bool__(self) -> bool:
        return bool(self.items)

    def where(self, path: str) -> str:
        line = self.lines.get(path)
        if line is None:
            # Fall back to the nearest ancestor that we know a line for.
            parts = path.split(".")
            while parts and line is None:
                parts.pop()
                line = self.lines.get(".".join(parts))
        shown = path or "(top level)"
        return f"{shown} (line {line})" if line else shown


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_optional(hint: Any) -> tuple[bool, Any]:
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return True, args[0]
    return False, hint


def _describe(hint: Any) -> str:
    optional, inner = _is_optional(hint)
    if optional:
        return f"{_describe(inner)} or null"
    origin = get_origin(hint)
    if hint is str:
        return "a string"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin is tuple:
        return f"a list of {_describe(get_args(hint)[0]).removeprefix('a ').removeprefix('an ')}s"
    if origin in (Mapping, dict, typing.Mapping):
        return "a mapping"
    if dataclasses.is_dataclass(hint):
        return "a mapping"
    return "a value"


def build(hint: Any, raw: Any, path: str, problems: Problems) -> Any:
    """Turn parsed YAML ``raw`` into an instance of ``hint``, recording problems.

    Returns ``UNSET`` where the value could not be built, so one bad field does
    not hide the problems in its siblings.
    """
    optional, inner = _is_optional(hint)
    if raw is None:
        if optional or hint is Any:
            return None
        problems.add(path, f"expected {_describe(hint)}, got null")
        return UNSET
    hint = inner
    origin = get_origin(hint)
    if hint is Any:
        return raw
    if hint is bool:
        if isinstance(raw, bool):
            return raw
    elif hint is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
    elif hint is float:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
    elif hint is str:
        if isinstance(raw, str):
            return raw
    elif origin is Literal:
        if raw in get_args(hint):
            return raw
        problems.add(path, f"expected {_describe(hint)}, got {raw!r}")
        return UNSET
    elif origin is tuple:
        if isinstance(raw, list):
            element = get_args(hint)[0]
            built = tuple(build(element, v, f"{path}.{i}", problems) for i, v in enumerate(raw))
            return built if UNSET not in built else UNSET
    elif origin in (Mapping, dict, typing.Mapping):
        if isinstance(raw, dict):
            value_hint = get_args(hint)[1] if get_args(hint) else Any
            out = {}
            for key, value in raw.items():
                if not isinstance(key, str):
                    problems.add(f"{path}.{key}", "expected string keys")
                    continue
                out[key] = build(value_hint, value, f"{path}.{key}", problems)
            return FrozenMap(out)
    elif dataclasses.is_dataclass(hint):
        if isinstance(raw, dict):
            return _build_dataclass(hint, raw, path, problems)
    else:  # pragma: no cover - a programming error in the spec classes
        raise TypeError(f"unsupported type hint {hint!r} at {path}")
    problems.add(path, f"expected {_describe(hint)}, got {_yaml_type(raw)}")
    return UNSET


def _yaml_type(raw: Any) -> str:
    if isinstance(raw, bool):
        return "a boolean"
    if isinstance(raw, (int, float)):
        return f"the number {raw!r}"
    if isinstance(raw, str):
        return f"the string {raw!r}" if len(raw) < 40 else "a string"
    if isinstance(raw, list):
        return "a list"
    if isinstance(raw, dict):
        return "a mapping"
    return type(raw).__name__


def _build_dataclass(cls: type, raw: dict, path: str, problems: Problems) -> Any:
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    prefix = f"{path}." if path else ""
    for key in raw:
        if key not in fields:
            known = ", ".join(sorted(fields))
            problems.add(f"{prefix}{key}", f"unknown key; expected one of: {known}")
    values = {}
    failed = False
    for name, field in fields.items():
        if name in raw:
            value = build(hints[name], raw[name], f"{prefix}{name}", problems)
            if value is UNSET:
                failed = True
            else:
                values[name] = value
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            problems.add(f"{prefix}{name}", f"missing required key ({_describe(hints[name])})")
            failed = True
    if failed:
        return UNSET
    return cls(**values)


def resolve_path(hint: Any, raw: Any, parts: list[str]) -> str | None:
    """Check that a dotted path addresses a field of the spec.

    ``raw`` is the base document, used to resolve named list elements
    (``systems.atlas.params``). Returns ``None`` if the path is valid, else
    what was expected at the first part that does not fit.
    """
    optional, hint = _is_optional(hint)
    if not parts:
        return None
    head, rest = parts[0], parts[1:]
    origin = get_origin(hint)
    if hint is Any or origin in (Mapping, dict, typing.Mapping):
        value_hint = get_args(hint)[1] if get_args(hint) else Any
        sub = raw.get(head) if isinstance(raw, dict) else None
        return resolve_path(value_hint, sub, rest) if rest else None
    if dataclasses.is_dataclass(hint):
        fields = {f.name: f for f in dataclasses.fields(hint) if f.init}
        if head not in fields:
            return f"'{head}' is not a field; expected one of: {', '.join(sorted(fields))}"
        sub = raw.get(head) if isinstance(raw, dict) else None
        return resolve_path(_hints(hint)[head], sub, rest)
    if origin is tuple:
        element = get_args(hint)[0]
        items = raw if isinstance(raw, list) else []
        index = _element_index(items, head)
        if index is None:
            names = [str(_element_name(e)) for e in items if _element_name(e) is not None]
            shown = ", ".join(names) if names else f"an index below {len(items)}"
            return f"'{head}' is not an element; expected one of: {shown}"
        return resolve_path(element, items[index], rest)
    return f"'{head}' goes below {_describe(hint)}, which has no fields"


def _element_name(element: Any) -> Any:
    # Criteria are known by id (and also have a display name); systems and dimensions by name.
    if isinstance(element, dict):
        return element.get("id", element.get("name"))
    return None


def _element_index(items: list, head: str) -> int | None:
    for i, element in enumerate(items):
        if isinstance(element, dict) and head in (element.get("id"), element.get("name")):
            return i
    if head.isdigit() and int(head) < len(items):
        return int(head)
    return None


def json_schema(hint: Any) -> dict:
    """JSON Schema (draft 2020-12) for the YAML form of ``hint``."""
    optional, inner = _is_optional(hint)
    if optional:
        return {"anyOf": [json_schema(inner), {"type": "null"}]}
    origin = get_origin(inner)
    if inner is Any:
        return {}
    if inner is str:
        return {"type": "string"}
    if inner is bool:
        return {"type": "boolean"}
    if inner is int:
        return {"type": "integer"}
    if inner is float:
        return {"type": "number"}
    if origin is Literal:
        return {"enum": list(get_args(inner))}
    if origin is tuple:
        return {"type": "array", "items": json_schema(get_args(inner)[0])}
    if origin in (Mapping, dict, typing.Mapping):
        args = get_args(inner)
        return {"type": "object", "additionalProperties": json_schema(args[1]) if args else {}}
    if dataclasses.is_dataclass(inner):
        hints = _hints(inner)
        props, required = {}, []
        for f in dataclasses.fields(inner):
            if not f.init:
                continue
            prop = json_schema(hints[f.name])
            if f.metadata.get("doc"):
                prop["description"] = f.metadata["doc"]
            if f.default is not dataclasses.MISSING and f.default is not None and not isinstance(f.default, tuple):
                prop["default"] = f.default
            props[f.name] = prop
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if inner.__doc__:
            out["description"] = inner.__doc__.strip().splitlines()[0]
        if required:
            out["required"] = required
        return out
    raise TypeError(f"unsupported type hint {inner!r}")  # pragma: no cover
