"""Names people read: one spelling each, and no two that look alike.

``café`` can be written as four code points (NFC, é composed) or as five (NFD,
``e`` and a combining accent). Both show the same on every screen, yet they
are different strings, so a spec or a table holding both would put two
systems no reader can tell apart in every table, figure and report. Names
are therefore normalised to NFC where they are read (the spec, rubric and
cases files; the importers' systems, items, axes and options), and two
different spellings of one name in the same place are refused, in one line
that shows both (:func:`both_spellings`: ``'caf\\xe9' and 'cafe\\u0301'``).

Where a name becomes part of a file name, names that differ only by case
collide too on a case-insensitive file system (macOS, Windows):
``look_alike(..., fold_case=True)`` finds those.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

__all__ = ["both_spellings", "look_alike", "nfc", "nfc_document"]

# In a list of mappings, the field that names each item (systems, criteria, cases, dimensions).
_NAMING_FIELDS = ("name", "id")


def nfc(value: Any) -> Any:
    """``value`` in Unicode normal form C if it is text; anything else unchanged."""
    return unicodedata.normalize("NFC", value) if isinstance(value, str) else value


def look_alike(names: Iterable[Any], *, fold_case: bool = False) -> tuple[str, str] | None:
    """The first two different spellings in ``names`` that are one name after NFC (and case folding); else None.

    The same spelling twice is not a look-alike (a plain duplicate is for the caller's own check).
    """
    first: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str):
            continue
        key = nfc(name).casefold() if fold_case else nfc(name)
        seen = first.setdefault(key, name)
        if seen != name:
            return seen, name
    return None


def both_spellings(pair: tuple[str, str]) -> str:
    """Two look-alike names written so that they differ visibly on any terminal (as Python escapes)."""
    return f"{pair[0]!a} and {pair[1]!a}"


def nfc_document(document: Any, path: str = "") -> tuple[Any, tuple[str, tuple[str, str]] | None]:
    """A YAML/JSON document with every key and text in NFC, and the first look-alike found, if any.

    The look-alike is ``(where, (spelling, spelling))``: two keys of one
    mapping, two texts of one list, or the names (``name``/``id``) of two
    items of one list, that differ only by their normal form. Everything is
    normalised, not the names alone, because a name is also written where it
    is referred to (a primary, an exclusion, a level, a patched value).
    """
    found: list[tuple[str, tuple[str, str]]] = []
    normalised = _walk(document, path, found)
    return normalised, (found[0] if found else None)


def _walk(node: Any, path: str, found: list) -> Any:
    prefix = f"{path}." if path else ""
    if isinstance(node, dict):
        pair = look_alike(k for k in node if isinstance(k, str))
        if pair and not found:
            found.append((path, pair))
        return {nfc(k): _walk(v, f"{prefix}{k}", found) for k, v in node.items()}
    if isinstance(node, list):
        pair = look_alike(node)
        for field in _NAMING_FIELDS:
            pair = pair or look_alike(item.get(field) for item in node if isinstance(item, dict))
        if pair and not found:
            found.append((path, pair))
        return [_walk(v, f"{prefix}{i}", found) for i, v in enumerate(node)]
    return nfc(node)
