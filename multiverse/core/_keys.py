"""Content keys: the sha256 of canonical JSON.

A key must depend only on what changes a stage's output, never on key order,
YAML formatting or float spelling, so that a re-run finds what it stored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["canonical_json", "digest"]


def _plain(obj: Any) -> Any:
    # Scalars first: they are most of what a key holds, and the dataclass test is slow.
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, float) and obj.is_integer():
        # 1 and 1.0 are the same measurement choice.
        return int(obj)
    return obj


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` (dataclasses, mappings, sequences, scalars) deterministically."""
    return json.dumps(_plain(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any, n: int = 16) -> str:
    """First ``n`` hex digits of the sha256 of ``canonical_json(obj)``."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:n]

