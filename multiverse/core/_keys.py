"""Content keys: the sha256 of canonical JSON.

A key must depend only on what changes a stage's output, never on key order,
YAML formatting or float spelling, so that a re-run finds what it stored.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["canonical_json", "digest", "json_ready"]


def json_ready(value: Any, *, finite: bool = True, whole: bool = False,
               other: Callable[[Any], Any] | None = None) -> Any:
    """``value`` as plain JSON data, the one converter every room uses.

    Mappings become dicts with text keys, lists and tuples lists, dataclasses and pydantic models their
    fields, numpy scalars Python numbers. ``finite``: NaN, infinities and pandas' NA become null (an
    undefined statistic; ``json.dumps(..., allow_nan=False)`` then holds). ``whole``: a float with no
    fraction becomes an int (for content keys: 1 and 1.0 are the same measurement choice). ``other``:
    what anything else becomes (default: itself).
    """
    return _ready(value, finite, whole, other)


#: types json_ready hands back as they are (exact types: a subclass takes the long way, to the same result)
_AS_IS = frozenset({str, int, bool, type(None)})


def _ready(value: Any, finite: bool, whole: bool, other: Callable[[Any], Any] | None) -> Any:
    # Scalars first: they are most of what a key holds, and the dataclass test is slow.
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if finite and not math.isfinite(value):
            return None
        return int(value) if whole and value.is_integer() else value
    kind = type(value)
    # Plain dicts and lists (a request's messages, a record) without the dataclass test, and their text
    # and whole-number values without a call each: every request key walks them.
    if kind is dict:
        return {str(k): v if type(v) in _AS_IS else _ready(v, finite, whole, other) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _AS_IS else _ready(v, finite, whole, other) for v in value]
    return _ready_other(value, finite, whole, other)


def _ready_other(value: Any, finite: bool, whole: bool, other: Callable[[Any], Any] | None) -> Any:
    # The long way, for what is neither a scalar nor a plain dict or list.
    kind = type(value)
    again = functools.partial(_ready, finite=finite, whole=whole, other=other)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: again(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): again(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [again(v) for v in value]
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == ():
        return again(value.item())
    if finite and kind.__name__ == "NAType":
        return None
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return again(dump())
    return other(value) if other is not None else value


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` (dataclasses, mappings, sequences, scalars) deterministically."""
    return json.dumps(json_ready(obj, finite=False, whole=True), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any, n: int = 16) -> str:
    """First ``n`` hex digits of the sha256 of ``canonical_json(obj)``."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:n]

