"""How a record becomes a database row and back: one row per entry, compact JSON, compressed only when large.

A record is written as one row: its compact JSON as it is, or zlib-compressed
when the JSON is at least :data:`COMPRESS_MIN` bytes (a long transcript).
Compressing every few-hundred-byte judgment cost more CPU than its bytes
saved, and a side table of shared texts cost two more inserts per record; a
plain row is also readable with any SQLite tool. A reader tells the two
apart by the first byte: ``{`` begins every record's JSON, never a zlib
stream.

Rows written before this layout stay readable: a compressed body whose every
string of at least :data:`TEXT_MIN` characters was kept once in the
``text`` table under its digest, the record holding ``"\\x00" + digest`` in
its place. No stored string can begin with NUL
(``multiverse.store._text.storable`` replaces every NUL before a record is
written), so a reference is never mistaken for a text.

Reading is as careful as the file store's was: a body that does not
decompress within :data:`MAX_BYTES`, is not JSON, nests too deep, or names a
text that is not there is a problem, never a crash (the store quarantines
the row).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["COMPRESS_MIN", "TEXT_MIN", "Packed", "compress", "digests_in", "inflate", "pack", "packed_json", "parse",
           "refers", "unpack"]

#: a record's JSON this long or longer (bytes) is stored compressed
COMPRESS_MIN = 4096
#: in rows of the earlier layout, strings this long or longer were kept once, in the text table
TEXT_MIN = 256
_MARK = "\x00"
_REF_LEN = 1 + 32
#: the largest record (or text) read back, as for a file entry
MAX_BYTES = 64 * 2**20


def compress(raw: bytes) -> bytes:
    """``raw`` as a zlib stream with a 4 KB window: zlib's default (32 KB, 128 KB of hash) costs
    60 us of CPU a call in allocating it, for a record or a text of a few KB."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 12, 5)
    return packer.compress(raw) + packer.flush()


class Packed:
    """A record as its row: its body (JSON, compressed when large) and its size as JSON."""

    __slots__ = ("body", "size")

    def __init__(self, body: bytes, size: int):
        self.body, self.size = body, size


def pack(record: Mapping[str, Any]) -> Packed:
    """``record`` as its row (it must already be storable: no NUL in any string)."""
    return packed_json(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def packed_json(raw: bytes) -> Packed:
    """A record's compact UTF-8 JSON as its row."""
    return Packed(compress(raw) if len(raw) >= COMPRESS_MIN else raw, len(raw))


def inflate(blob: Any, limit: int = MAX_BYTES) -> bytes | None:
    """The decompressed bytes of ``blob``; None if it is not zlib data or exceeds ``limit`` (a bomb)."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        return None
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(bytes(blob), limit + 1)
    except zlib.error:
        return None
    if len(raw) > limit or inflater.unconsumed_tail or not inflater.eof:
        return None
    return raw


def parse(blob: Any) -> tuple[Any, str | None]:
    """(the JSON value in ``blob``, None) or (None, what is wrong): a plain body or a compressed one."""
    if isinstance(blob, memoryview):
        blob = bytes(blob)  # PostgreSQL's bytea
    if isinstance(blob, (bytes, bytearray)) and blob[:1] == b"{":
        raw = bytes(blob) if len(blob) <= MAX_BYTES else None
    else:
        raw = inflate(blob)
    if raw is None:
        return None, f"not a record (JSON, or compressed JSON) of at most {MAX_BYTES} bytes"
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, deep nesting
        return None, "not JSON"
    return value, None


def refers(blob: Any) -> bool:
    """Whether a body may refer to texts: a reference begins with NUL, which JSON writes as ``\\u0000``,
    so a plain body without one refers to none and is not walked looking for references (a ms a record).
    Compressed bodies are walked (rows of the earlier layout, and the few large ones now)."""
    if isinstance(blob, memoryview):
        blob = bytes(blob)
    return not (isinstance(blob, (bytes, bytearray)) and blob[:1] == b"{" and b"\\u0000" not in blob)


def digests_in(value: Any) -> set[str]:
    """The texts a parsed body refers to."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item.startswith(_MARK) and len(item) == _REF_LEN:
                found.add(item[1:])
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def unpack(value: Any, texts: Callable[[Iterable[str]], Mapping[str, Any]]) -> tuple[Any, str | None]:
    """(the record with its texts in place, None) or (None, what is wrong); ``texts(digests)`` fetches blobs."""
    wanted = digests_in(value)
    if not wanted:
        return value, None
    found: dict[str, str] = {}
    for digest, blob in texts(wanted).items():
        raw = inflate(blob)
        if raw is None:
            return None, f"its text {digest} is not compressed text"
        try:
            found[digest] = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, f"its text {digest} is not UTF-8"
    missing = wanted - found.keys()
    if missing:
        return None, f"its text {min(missing)} is missing"

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return found[item[1:]] if item.startswith(_MARK) and len(item) == _REF_LEN else item
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value), None
