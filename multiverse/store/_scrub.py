"""What every write stores: a record scrubbed of credentials, its text made storable, as its row.

:func:`scrub` and :func:`storable_scrubbed` walk a record and build a clean
copy. Nearly every record a run writes has nothing to clean, so
:func:`clean_row` first serialises the record as it is (one C-level
``json.dumps``) and looks at that text for anything the walk would change;
only a record where it finds something is walked. Each test is exact in the
direction that matters: whatever the walk would change shows in the text
(JSON escapes every character on its own, ``str.lower`` lowers each on its
own), so a false alarm only costs the walk:

- a NUL is written ``\\u0000``; a lone surrogate fails the UTF-8 encoding;
- no string is longer than the whole text;
- a credential-named key is ``"api_key"`` (any case) in the lowered text;
- a credential value, or the cut-off end of one, contains its first
  ``MIN_SECRET_LENGTH`` characters, which then appear JSON-escaped in the text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

from multiverse.core import credentials
from multiverse.store._packing import Packed, pack, packed_json
from multiverse.store._text import MAX_ANSWER_CHARS, storable_text

__all__ = ["CREDENTIAL_KEYS", "clean_row", "scrub", "storable_scrubbed"]

# Dict keys that carry credentials in litellm/OpenAI/Anthropic call kwargs and
# HTTP headers; compared case-insensitively. `api_key_env` (a variable *name*)
# is deliberately not here.
CREDENTIAL_KEYS = frozenset(
    {"api_key", "apikey", "api-key", "x-api-key", "authorization", "proxy-authorization"}
)
_QUOTED_KEYS = tuple(f'"{k}"' for k in sorted(CREDENTIAL_KEYS))


def scrub(record: Any, secret_values: Iterable[str] | None = None) -> Any:
    """A copy of ``record`` with credentials removed.

    The value of every credential in use is replaced by ``[redacted]`` wherever
    it appears (:func:`multiverse.core._credentials.redact_all`; ``secret_values``
    overrides which values), and dict keys named like credentials
    (``api_key``, ``Authorization``, ...) are dropped with their values.
    """

    def drop_keys(obj: Any) -> Any:
        if isinstance(obj, Mapping):
            return {k: drop_keys(v) for k, v in obj.items()
                    if not (isinstance(k, str) and k.lower() in CREDENTIAL_KEYS)}
        if isinstance(obj, (list, tuple)):
            return [drop_keys(v) for v in obj]
        return obj

    return credentials.redact_all(drop_keys(record), secret_values)


# Values a record's walk returns as they are, told by their exact type.
_LEAVES = frozenset({int, float, bool, type(None)})


def storable_scrubbed(record: Mapping[str, Any]) -> dict[str, Any]:
    """``scrub(storable(record))`` in one walk of the record.

    Strings are made storable (``multiverse.store._text``) and then redacted,
    keys too; credential-named keys are dropped, as :func:`scrub` does.
    """
    values = credentials.secret_values()

    def clean(obj: Any) -> Any:
        kind = type(obj)
        if kind is str or isinstance(obj, str):
            text = storable_text(obj)
            return credentials.redact(text, values) if values else text
        if kind in _LEAVES:  # a number, a bool or null: nothing to clean (and no ABC check to pay)
            return obj
        if kind is dict or isinstance(obj, Mapping):
            out = {}
            for key, value in obj.items():
                key = clean(key)
                if not (isinstance(key, str) and key.lower() in CREDENTIAL_KEYS):
                    out[key] = clean(value)
            return out
        if kind is list or isinstance(obj, (list, tuple)):
            return [clean(v) for v in obj]
        return obj

    return cast("dict[str, Any]", clean(record))


def clean_row(record: Mapping[str, Any], stored_at: str | None = None) -> Packed:
    """The row of ``storable_scrubbed(record)`` (with ``stored_at`` added if the record has none):
    byte for byte what ``pack`` of the walked copy gives, without the walk when nothing needs it.
    ``TypeError`` for a record that is not JSON."""
    values = credentials.secret_values()
    if type(record) is dict:
        whole = record if stored_at is None or "stored_at" in record else {**record, "stored_at": stored_at}
        try:
            text = json.dumps(whole, ensure_ascii=False, separators=(",", ":"))
            raw = text.encode("utf-8")
        except (TypeError, ValueError, RecursionError):  # not JSON, a lone surrogate, a cycle: the walk says
            raw = None
        if raw is not None and _nothing_to_clean(text, values):
            return packed_json(raw)
    clean = storable_scrubbed(record)
    if stored_at is not None:
        clean.setdefault("stored_at", stored_at)
    return pack(clean)


def _nothing_to_clean(text: str, values: tuple[str, ...]) -> bool:
    if len(text) > MAX_ANSWER_CHARS or "\\u0000" in text:
        return False
    lowered = text.lower()
    if any(key in lowered for key in _QUOTED_KEYS):
        return False
    return not any(head in text for head in _escaped_heads(values))


_heads: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


def _escaped_heads(values: tuple[str, ...]) -> tuple[str, ...]:
    """Each value's first ``MIN_SECRET_LENGTH`` characters as JSON writes them inside a string."""
    global _heads
    seen, heads = _heads
    if seen is not values:
        heads = tuple(json.dumps(v[:credentials.MIN_SECRET_LENGTH], ensure_ascii=False)[1:-1] for v in values)
        _heads = (values, heads)
    return heads
