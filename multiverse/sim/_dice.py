"""Deterministic randomness: every draw the world makes comes from a sha256.

A :class:`Dice` is seeded by the sha256 of the canonical JSON of what a
response depends on (model, messages, seed, world digest), so the same call
always gets the same answer and any change to its inputs gets a fresh,
independent one.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from multiverse.core import canonical_json, json_ready

__all__ = ["Dice", "plain_messages"]

T = TypeVar("T")


class Dice:
    """A seeded stream of draws (wraps :class:`random.Random`, whose int seeding is stable)."""

    __slots__ = ("_hash", "_rng")

    def __init__(self, *parts: Any):
        h = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).digest()
        self._hash = h
        self._rng = random.Random(int.from_bytes(h[:16], "big"))

    def key(self, n: int = 24) -> str:
        """The first ``n`` hex digits of the seeding hash (a handle to re-create related draws)."""
        return self._hash.hex()[:n]

    def chance(self, p: float) -> bool:
        """True with probability ``p`` (always one draw, so streams stay aligned)."""
        return self._rng.random() < p

    def uniform(self) -> float:
        return self._rng.random()

    def normal(self) -> float:
        """A standard normal draw."""
        return self._rng.gauss(0.0, 1.0)

    def pick(self, options: Sequence[T]) -> T:
        return options[self._rng.randrange(len(options))]

    def sample(self, options: Sequence[T], k: int) -> list[T]:
        return self._rng.sample(list(options), min(k, len(options)))

    def integer(self, low: int, high: int) -> int:
        """Uniform on ``low..high`` inclusive."""
        return self._rng.randint(low, high)

    def weighted(self, weights: Mapping[str, float]) -> str:
        total = sum(weights.values())
        x = self._rng.random() * total
        for key, w in weights.items():
            x -= w
            if x < 0:
                return key
        return next(reversed(list(weights)))


def plain_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Messages as plain JSON-able dicts (litellm may hand over pydantic objects)."""
    plain = []
    for message in messages:
        if not isinstance(message, Mapping):
            dump = getattr(message, "model_dump", None)
            message = dump() if callable(dump) else dict(getattr(message, "__dict__", {}))
        entry = {"role": str(message.get("role", "")), "content": json_ready(message.get("content"), other=str)}
        for key in ("tool_calls", "tool_call_id", "name"):
            if message.get(key) is not None:
                entry[key] = json_ready(message[key], other=str)
        plain.append(entry)
    return plain


