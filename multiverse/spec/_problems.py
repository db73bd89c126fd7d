"""Validation problems as one line each: ``yaml.path (line N): expected ...``.

Pydantic finds what is wrong; this module words it the way a spec's author
reads it, in terms of the YAML they wrote (``expected an integer, got the
string 'three'``), and resolves the dotted paths that axes patch against the
same models.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from multiverse.errors import SpecError

__all__ = ["Problems", "add_validation_errors", "describe", "resolve_path"]


class Problems:
    """Collects validation problems as ``(yaml_path, expected)`` pairs."""

    def __init__(self, lines: Mapping[str, int] | None = None):
        self.items: list[tuple[str, str]] = []
        self.lines = dict(lines or {})

    def add(self, path: str, expected: str) -> None:
        self.items.append((path, expected))

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, file: Any) -> None:
        """Raise one SpecError carrying every problem, ``file: path (line N): expected``, one line each."""
        if not self.items:
            return
        messages = [f"{file}: {self.where(p)}: {e}" for p, e in self.items]
        first_path, first = self.items[0]
        error = SpecError(file, self.where(first_path), first)
        error.problems = messages  # type: ignore[attr-defined]  # SpecError's optional list of every problem
        raise error

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


def _bare(hint: Any) -> Any:
    """``hint`` without ``Annotated`` metadata."""
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    return hint


def _optional(hint: Any) -> tuple[bool, Any]:
    hint = _bare(hint)
    if get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(get_args(hint)) == 2:
            return True, _bare(args[0])
    return False, hint


def _is_model(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, BaseModel)


def _is_mapping(hint: Any) -> bool:
    return get_origin(hint) in (Mapping, dict, typing.Mapping) or hint in (dict, Mapping)


def describe(hint: Any) -> str:
    """What a value of type ``hint`` looks like in YAML (``a list of mappings``)."""
    optional, inner = _optional(hint)
    if optional:
        return f"{describe(inner)} or null"
    if inner is str:
        return "a string"
    if inner is bool:
        return "true or false"
    if inner is int:
        return "an integer"
    if inner is float:
        return "a number"
    if get_origin(inner) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(inner))
    if get_origin(inner) in (tuple, list):
        return f"a list of {describe(get_args(inner)[0]).removeprefix('a ').removeprefix('an ')}s"
    if _is_mapping(inner) or _is_model(inner):
        return "a mapping"
    return "a value"


def _yaml_type(raw: Any) -> str:
    if raw is None:
        return "null"
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


def _field_hint(model: type[BaseModel], name: str) -> Any:
    info = model.model_fields[name]
    return Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation


def _child(hint: Any, part: str | int) -> Any:
    """The type one step below ``hint`` along a validation error's location."""
    _, inner = _optional(hint)
    if _is_model(inner):
        return _field_hint(inner, str(part)) if str(part) in inner.model_fields else Any
    if get_origin(inner) is tuple:
        return get_args(inner)[0]
    if _is_mapping(inner):
        args = get_args(inner)
        return args[1] if args else Any
    return Any


def add_validation_errors(root: type[BaseModel], error: ValidationError, problems: Problems) -> None:
    """Add one problem per pydantic error of validating a ``root`` document."""
    for e in _unknown_keys_first(error.errors(include_url=False)):
        loc = list(e["loc"])
        if loc[-1:] == ["[key]"]:
            problems.add(".".join(map(str, loc[:-1])), "expected string keys")
            continue
        parent, hint = None, root
        for part in loc:
            parent, hint = hint, _child(hint, part)
        path = ".".join(map(str, loc))
        problems.add(path, _expected(e, hint, parent))


def _unknown_keys_first(errors: list[Any]) -> list[Any]:
    """Each section's unknown keys before its other problems (pydantic lists them last).

    A misspelt key usually explains the "missing" problem next to it, so it comes first.
    """
    out: list[Any] = []
    for e in errors:
        if e["type"] == "extra_forbidden":
            section = e["loc"][:-1]
            first = next((i for i, o in enumerate(out) if o["loc"][: len(section)] == section), len(out))
            out.insert(first, e)
        else:
            out.append(e)
    return out


def _expected(e: Any, hint: Any, parent: Any) -> str:
    kind, raw = e["type"], e.get("input")
    if kind == "extra_forbidden":
        _, owner = _optional(parent)
        # A field read under another name (``in`` for ``quantifier``) is known by the name written.
        names = sorted(info.alias or name for name, info in owner.model_fields.items()) if _is_model(owner) else []
        close = difflib.get_close_matches(str(e["loc"][-1]), names, n=1, cutoff=0.6)
        return f"unknown key; expected one of: {', '.join(names)}" + (f" (did you mean {close[0]}?)" if close else "")
    if kind == "missing":
        return f"missing required key ({describe(hint)})"
    if kind in ("greater_than", "greater_than_equal"):
        bound = e["ctx"].get("gt", e["ctx"].get("ge"))
        sign = ">" if kind == "greater_than" else ">="
        return f"expected {describe(_optional(hint)[1])} {sign} {bound}, got {raw!r}"
    if kind in ("less_than", "less_than_equal"):
        bound = e["ctx"].get("lt", e["ctx"].get("le"))
        sign = "<" if kind == "less_than" else "<="
        return f"expected {describe(_optional(hint)[1])} {sign} {bound}, got {raw!r}"
    if kind in ("too_short", "too_long"):
        least = kind == "too_short"
        bound = e["ctx"].get("min_length" if least else "max_length")
        return f"expected {'at least' if least else 'at most'} {bound} items, got {e['ctx'].get('actual_length')}"
    if kind == "finite_number":
        return f"expected a finite number, got {raw!r}"
    if kind == "literal_error":
        return f"expected {describe(_optional(hint)[1])}, got {'null' if raw is None else repr(raw)}"
    if kind == "value_error":
        return str(e["ctx"]["error"])
    # A null where null is allowed is never an error, so "or null" would only mislead.
    return f"expected {describe(_optional(hint)[1])}, got {_yaml_type(raw)}"


def resolve_path(hint: Any, raw: Any, parts: list[str]) -> str | None:
    """Check that a dotted path addresses a field of the spec.

    ``raw`` is the base document, used to resolve named list elements
    (``systems.atlas.params``). Returns ``None`` if the path is valid, else
    what was expected at the first part that does not fit.
    """
    if not parts:
        return None
    _, hint = _optional(hint)
    head, rest = parts[0], parts[1:]
    if hint is Any or _is_mapping(hint):
        sub = raw.get(head) if isinstance(raw, dict) else None
        return resolve_path(_child(hint, head), sub, rest) if rest else None
    if _is_model(hint):
        if head not in hint.model_fields:
            return f"'{head}' is not a field; expected one of: {', '.join(sorted(hint.model_fields))}"
        sub = raw.get(head) if isinstance(raw, dict) else None
        return resolve_path(_field_hint(hint, head), sub, rest)
    if get_origin(hint) is tuple:
        items = raw if isinstance(raw, list) else []
        index = _element_index(items, head)
        if index is None:
            names = [str(_element_name(e)) for e in items if _element_name(e) is not None]
            shown = ", ".join(names) if names else f"an index below {len(items)}"
            return f"'{head}' is not an element; expected one of: {shown}"
        return resolve_path(get_args(hint)[0], items[index], rest)
    return f"'{head}' goes below {describe(hint)}, which has no fields"


def _element_name(element: Any) -> Any:
    # Criteria are known by id (and also have a display name); systems and dimensions by name.
    if isinstance(element, dict):
        return element.get("id", element.get("name"))
    return None


def _element_index(items: list[Any], head: str) -> int | None:
    for i, element in enumerate(items):
        if isinstance(element, dict) and head in (element.get("id"), element.get("name")):
            return i
    if head.isdigit() and int(head) < len(items):
        return int(head)
    return None
