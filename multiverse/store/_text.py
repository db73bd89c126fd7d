"""Text the store can hold: valid UTF-8, bounded in length and in depth.

Everything a model sends is untrusted. Before a record is written its
strings are made storable (no lone surrogates or NUL, at most
``MAX_ANSWER_CHARS``), and JSON nested past ``MAX_DEPTH`` is refused, so no
reader of a record (validation, redaction, the store) can be made to
exhaust memory or the stack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_ANSWER_CHARS", "MAX_DEPTH", "storable", "storable_text", "too_deep"]

#: The longest answer kept whole (about 250k tokens: more than any model's output
#: limit). A hostile or broken server's 10 MB answer would otherwise be stored,
#: re-sent with every later turn and pasted into every judge prompt.
MAX_ANSWER_CHARS = 1_000_000
#: Deeper JSON from a model is refused: every reader of it (validation,
#: redaction, the store) walks it recursively, and ~900 levels exhaust the stack.
MAX_DEPTH = 64
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str, limit: int = MAX_ANSWER_CHARS) -> str:
    """``text`` that encodes as UTF-8 and is at most ``limit`` characters long.

    Lone surrogates (which UTF-8 cannot encode) and NUL (which many readers
    take for the end of a string) become U+FFFD, the replacement character. A
    longer text keeps its beginning and ends with a marker that says how much
    was kept of how much; the result is within ``limit``, so cutting again
    changes nothing.
    """
    if not isinstance(text, str):
        return text
    if len(text) > limit:
        marker = f"\n[multiverse: answer cut: kept {limit:,} of {len(text):,} characters]"
        kept = max(limit - len(marker), 0)
        text = text[:kept] + f"\n[multiverse: answer cut: kept {kept:,} of {len(text):,} characters]"[: limit - kept]
    return _UNSTORABLE.sub("\ufffd", text)


def storable(obj: Any, limit: int = MAX_ANSWER_CHARS) -> Any:
    """``storable_text`` applied to every string of a JSON-like value (dict keys too)."""
    if isinstance(obj, str):
        return storable_text(obj, limit)
    if isinstance(obj, Mapping):
        return {storable(k, limit): storable(v, limit) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [storable(v, limit) for v in obj]
    return obj


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether dicts and lists nest more than ``limit`` levels (checked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (Mapping, list, tuple)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, Mapping) else item))
    return False
