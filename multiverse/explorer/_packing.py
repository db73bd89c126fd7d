"""The explorer's lazy blocks: JSON, gzip-compressed, base64 text; long texts once each, in chunks.

The page keeps case-level rows, transcripts and rationales in such blocks and
unpacks one only when a reader first opens a universe (``DecompressionStream``
in the browser), so a large run opens as fast as a small one. Long texts
(turns and rationales) are stored once each however many rows refer to them
(:class:`Strings`), in chunks of about ``CHUNK_CHARS`` characters, so opening
a case inflates the chunks holding its texts, not every text of the run.
Python unpacks them the same way, for tests and for anyone reading a document.
"""

from __future__ import annotations

import base64
import gzip
import heapq
import json
import re
from typing import Any, cast

import numpy as np
import pandas as pd

__all__ = ["CHUNK_CHARS", "Strings", "document_texts", "pack", "pack_texts", "unpack", "unpack_strings", "unpack_texts"]

#: Characters of text per chunk: big enough for deflate to find the texts' repetitions, small enough
#: that opening one case inflates a fraction of a second's worth.
CHUNK_CHARS = 1 << 20


def pack(value: Any, level: int = 6) -> str:
    """``value`` as compact JSON, gzip-compressed and base64-encoded."""
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    # mtime=0: the same document packs to the same bytes, so two reports of one run are byte-identical.
    return base64.b64encode(gzip.compress(raw, compresslevel=level, mtime=0)).decode("ascii")


def unpack(block: str) -> Any:
    """The value ``pack`` packed."""
    return json.loads(gzip.decompress(base64.b64decode(block, validate=True)).decode("utf-8"))


class Strings:
    """Long texts, each stored once: ``add`` returns a text's number, ``packed`` the chunks and where each starts."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self.texts: list[str] = []

    def add(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self.texts)
            self.texts.append(text)
        return found

    def packed(self) -> tuple[list[list[Any]], list[int]]:
        """The texts in chunks of about ``CHUNK_CHARS`` characters (``pack_texts``), and each chunk's first number."""
        chunks: list[list[Any]] = []
        starts: list[int] = []
        start, size = 0, 0
        for i, text in enumerate(self.texts):
            size += len(text)
            if size >= CHUNK_CHARS or i == len(self.texts) - 1:
                chunks.append(pack_texts(self.texts[start:i + 1]))
                starts.append(start)
                start, size = i + 1, 0
        return chunks, starts


# Words with the white space after them (and white space that starts a text): joined, they are the text.
_TOKEN = re.compile(r"\S+\s*|\s+")


def pack_texts(texts: list[str]) -> list[Any]:
    """A chunk of texts, the smaller of two codings.

    ``["h", vocabulary, bits]``: a canonical Huffman code over the chunk's
    words (each with the white space after it; Moffat's word-based coding,
    which takes English prose to about two thirds of what deflate does, as it
    codes each word in a few bits where deflate spends a literal or a match on
    every one), ``vocabulary`` a packed ``{"tokens", "counts", "texts"}`` (the
    words in code order, null ending a text; how many codes have each length
    from 1 up; how many texts)
    and ``bits`` the base64 code stream, most significant bit first.
    ``["z", packed]``: the texts as one packed JSON list, which wins where long
    passages repeat (deflate finds them; a word code does not).
    """
    plain = ["z", pack(texts)]
    tokens: list[str] = []
    for text in texts:
        tokens.extend(_TOKEN.findall(text))
        tokens.append("")  # no word is empty: the end of a text
    codes, vocabulary = pd.factorize(np.array(tokens, dtype=object))
    lengths = _code_lengths(np.bincount(codes))
    order = np.lexsort((np.arange(len(lengths)), lengths))
    sorted_lengths = lengths[order]
    # Canonical codes: in order of (length, symbol), each the previous plus one, shifted to its length.
    steps = np.diff(sorted_lengths, prepend=sorted_lengths[0])
    code = np.zeros(len(order), dtype=np.uint64)
    for k in range(1, len(order)):
        code[k] = (int(code[k - 1]) + 1) << int(steps[k])
    by_symbol = np.empty(len(order), dtype=np.uint64)
    by_symbol[order] = code
    width = int(sorted_lengths[-1])
    bits, values = lengths[codes], by_symbol[codes]
    shifts = np.arange(width - 1, -1, -1, dtype=np.uint64)
    matrix = ((values[:, None] >> shifts[None, :]) & np.uint64(1)).astype(np.uint8)
    stream = np.packbits(matrix[np.arange(width)[None, :] >= (width - bits)[:, None]]).tobytes()
    counts = np.bincount(sorted_lengths, minlength=width + 1)[1:].tolist()
    words = [str(vocabulary[i]) or None for i in order]
    huffman = ["h", pack({"tokens": words, "counts": counts, "texts": len(texts)}), base64.b64encode(stream).decode("ascii")]
    return huffman if len(huffman[1]) + len(huffman[2]) < len(plain[1]) else plain


def _code_lengths(frequency: np.ndarray) -> np.ndarray:
    """Huffman code lengths for these symbol frequencies (at least 1 bit, also for a single symbol)."""
    n = len(frequency)
    if n == 1:
        return np.ones(1, dtype=np.int64)
    heap = [(int(f), i) for i, f in enumerate(frequency)]
    heapq.heapify(heap)
    parent = np.full(2 * n - 1, -1, dtype=np.int64)
    for node in range(n, 2 * n - 1):
        (f1, a), (f2, b) = heapq.heappop(heap), heapq.heappop(heap)
        parent[a] = parent[b] = node
        heapq.heappush(heap, (f1 + f2, node))
    depth = np.zeros(2 * n - 1, dtype=np.int64)
    for node in range(2 * n - 3, -1, -1):  # a parent is always numbered after its children
        depth[node] = depth[parent[node]] + 1
    return depth[:n]


def unpack_texts(chunk: list[Any]) -> list[str]:
    """The texts ``pack_texts`` packed."""
    if chunk[0] == "z":
        return list(unpack(chunk[1]))
    vocabulary = unpack(chunk[1])
    words, counts = vocabulary["tokens"], vocabulary["counts"]
    bits = np.unpackbits(np.frombuffer(base64.b64decode(chunk[2], validate=True), dtype=np.uint8)).tolist()
    texts: list[str] = []
    current: list[str] = []
    position = 0
    while len(texts) < vocabulary["texts"]:  # the stream's last byte is padded: stop at the last text
        code = first = index = 0
        for count in counts:  # the canonical decoder of deflate's puff.c
            code |= bits[position]
            position += 1
            if code - count < first:
                word = words[index + code - first]
                if word is None:
                    texts.append("".join(current))
                    current = []
                else:
                    current.append(word)
                break
            index, first, code = index + count, (first + count) << 1, code << 1
    return texts


def unpack_strings(document: dict[str, Any]) -> list[str]:
    """Every long text of an explorer document, by its number."""
    return [text for chunk in document["blocks"]["strings"] for text in unpack_texts(chunk)]


def document_texts(document: dict[str, Any]) -> dict[str, Any]:
    """A document's transcripts and criterion rows with their long texts in place of the texts' numbers."""
    texts = unpack(document["blocks"]["texts"])
    strings = unpack_strings(document)
    for record in texts["transcripts"]:
        for turn in (record or {}).get("turns", []):
            turn["content"] = strings[turn["content"]]
    texts["criteria"]["rationale"] = [strings[i] for i in texts["criteria"]["rationale"]]
    return cast("dict[str, Any]", texts)
