"""The explorer's lazy blocks: JSON, gzip-compressed, base64 text.

The page keeps case-level rows, transcripts and rationales in such blocks and
unpacks one only when a reader first opens a universe (``DecompressionStream``
in the browser), so a large run opens as fast as a small one. Python unpacks
them the same way, for tests and for anyone reading a document.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

__all__ = ["pack", "unpack"]


def pack(value: Any) -> str:
    """``value`` as compact JSON, gzip-compressed and base64-encoded."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    # mtime=0: the same document packs to the same bytes, so two reports of one run are byte-identical.
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def unpack(block: str) -> Any:
    """The value ``pack`` packed."""
    return json.loads(gzip.decompress(base64.b64decode(block, validate=True)).decode("utf-8"))
