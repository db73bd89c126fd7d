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

Beyond one character's two spellings, two names read as one when their
*skeletons* agree (Unicode Technical Standard #39, :func:`skeleton`):
Cyrillic ``а`` for Latin ``a``, a zero-width space, a fullwidth ``ｇ``, a
ligature ``ﬁ``. Imports refuse such pairs (:func:`confusable`), or merge them
when asked (:func:`merged_spellings`). The confusables data is Unicode's own,
as shipped by the ``confusable-homoglyphs`` package.

And one rule says which characters no output may carry raw
(:func:`unshowable`): controls (U+0001, ESC, U+0085), invisible format
characters (bidirectional overrides, zero-width space, byte order mark), the
line and paragraph separators, lone surrogates and noncharacters (U+FFFE).
Imports refuse them in names (:func:`unshowable_problem`); every writer --
terminal, XML, HTML -- shows them as visible escapes (:func:`escaped`), so a
name read from an untrusted folder can never break a file or hide text.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable
from importlib import resources
from typing import Any

__all__ = ["both_spellings", "confusable", "escaped", "json_escaped", "look_alike", "merged_spellings", "nfc", "nfc_document",
           "skeleton", "unshowable", "unshowable_pattern", "unshowable_problem"]

# Shaping characters that scripts (Persian, Indic) and emoji sequences need: shown, never escaped.
_JOINERS = {"\u200c", "\u200d"}
_SHORT = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}
# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties): invisible, so UTS #39 drops them from skeletons.
_IGNORABLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
              (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
              (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
              (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))


def unshowable(ch: str) -> bool:
    """Whether ``ch`` may not be written raw: it controls, hides or cannot be encoded (see the module docstring)."""
    if ch in _JOINERS:
        return False
    code = ord(ch)
    if (code & 0xFFFE) == 0xFFFE or 0xFDD0 <= code <= 0xFDEF:
        return True  # noncharacters: not allowed in XML (U+FFFE/F), parse errors in HTML
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs")


@functools.cache
def unshowable_pattern() -> re.Pattern[str]:
    """A regular expression matching one :func:`unshowable` character (built once, from every code point)."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x110000):
        if unshowable(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


def _escape(ch: str) -> str:
    if not unshowable(ch):
        return ch
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escaped(text: Any, *, newlines: bool = False, whitespace: bool = False) -> str:
    """``text`` (str()-ed) with every :func:`unshowable` character written as a visible escape (``\\x1b``).

    ``newlines=True`` keeps a newline as a line break (a block of several lines);
    otherwise it too is shown as ``\\n``, so one datum is always one line.
    ``whitespace=True`` keeps tab, newline and carriage return as they are (HTML,
    where they are layout, not commands).
    """
    text = str(text)
    if whitespace:
        return "".join(ch if ch in _SHORT else _escape(ch) for ch in text) if not _plain(text) else text
    if newlines:
        return "\n".join(map(escaped, text.split("\n")))
    return text if _plain(text) else "".join(map(_escape, text))


def _plain(text: str) -> bool:
    # str.isprintable() is False for every unshowable character but the noncharacters (U+FFFE),
    # which are checked on their own: plain text takes this fast path.
    return text.isprintable() and not any((ord(c) & 0xFFFE) == 0xFFFE or 0xFDD0 <= ord(c) <= 0xFDEF for c in text)


def json_escaped(data: str) -> str:
    """JSON text with every :func:`unshowable` character as its ``\\u`` escape.

    The same data for whoever parses it, and text that encodes as UTF-8 (a
    lone surrogate cannot) and sits in an HTML page without a parse error (a
    C1 control, U+FFFE). For JSON embedded in a page (explorer, labelling sheet).
    """
    if data.isascii() and data.isprintable():
        return data
    return unshowable_pattern().sub(_json_escape, data)


def _json_escape(found: re.Match[str]) -> str:
    code = ord(found.group(0))
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def unshowable_problem(name: str) -> str | None:
    """What makes ``name`` unfit to show (its first unshowable character, escaped and named), or None."""
    for ch in name:
        if unshowable(ch):
            kind = unicodedata.category(ch)
            what = {"Cc": "a control character", "Cs": "a lone surrogate, not text"}.get(
                kind, unicodedata.name(ch, "a noncharacter").lower())
            return (f"{_shown(name)} holds {_escape(ch)} ({what}); expected a name without control, invisible or "
                    "non-text characters")
    return None


def _shown(name: str) -> str:
    text = escaped(name)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _ignorable(ch: str) -> bool:
    code = ord(ch)
    return any(low <= code <= high for low, high in _IGNORABLE)


@functools.cache
def _ascii_prototypes() -> dict[int, str]:
    """:func:`skeleton`'s prototypes of the ASCII characters, as a ``str.translate`` table."""
    return {code: "".join(_prototypes().get(ch, ch) for ch in chr(code) if not _ignorable(ch)) for code in range(128)}


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character's prototype, from Unicode's confusables.txt as the package ships it.

    The package lists each pair both ways (source to prototype and back). In
    Unicode's table a prototype is never a source, so a character with one
    entry maps to it when that entry is a prototype (a string, or a character
    several map to); two characters that name only each other map to the
    smaller, so both have one skeleton whichever was the source.
    """
    data = json.loads(resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8"))

    def clean(text: str) -> str:  # the package wraps right-to-left characters in left-to-right marks
        return text.replace("\u200e", "")

    graph = {clean(key): [clean(entry["c"]) for entry in entries] for key, entries in data.items()}
    prototypes = {}
    for key, targets in graph.items():
        if len(key) != 1 or len(targets) != 1 or not targets[0]:
            continue
        target = targets[0]
        if len(target) > 1 or len(graph.get(target, ())) > 1:
            prototypes[key] = target
        else:
            prototypes[key] = min(key, target)
    return prototypes


def skeleton(name: str) -> str:
    """The UTS #39 skeleton of ``name`` (after NFKC): two names with one skeleton look alike on screen.

    NFKC first folds compatibility variants (``ﬁ``, fullwidth, superscripts),
    then, as UTS #39 says: NFD, drop default-ignorable characters, map each
    character to its prototype, NFD again. Case is kept: ``GPT`` and ``gpt``
    read differently.
    """
    if name.isascii():  # most names: NFKC and the first NFD leave ASCII alone, so one table lookup a character
        return unicodedata.normalize("NFD", name.translate(_ascii_prototypes()))
    prototypes = _prototypes()
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name))
    mapped = "".join(prototypes.get(ch, ch) for ch in text if not _ignorable(ch))
    return unicodedata.normalize("NFD", mapped)


def confusable(names: Iterable[Any]) -> tuple[str, str] | None:
    """The first two different names in ``names`` with one :func:`skeleton`, else None (non-text is skipped)."""
    first: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str):
            continue
        seen = first.setdefault(skeleton(name), name)
        if seen != name:
            return seen, name
    return None


def merged_spellings(names: Iterable[Any]) -> dict[str, str]:
    """Every text in ``names`` mapped to the first of its look-alikes (one skeleton, one name), in order."""
    first: dict[str, str] = {}
    merged: dict[str, str] = {}
    for name in names:
        if isinstance(name, str) and name not in merged:
            merged[name] = first.setdefault(skeleton(name), name)
    return merged

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


def _walk(node: Any, path: str, found: list[Any]) -> Any:
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
