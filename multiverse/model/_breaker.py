"""Stop a run early when a model cannot answer at all.

A typo in a model name, a revoked key or a wrong endpoint makes every call
of that model fail the same way, at once and without retries (bad request,
auth, not found). Left alone, the run would fail every unit that needs the
model, one by one, and report the cause only in the tables. The breaker
wraps the run's model client: when a model's first calls in this run all
fail with the same such reason, it stops the run with that error, in one
line. A model that has answered once in this run is never stopped: its
failures are the request's, not the model's.
"""

from __future__ import annotations

import threading
from typing import Any

from multiverse.core import short_reason
from multiverse.errors import ModelError, ModelUnusable

__all__ = ["FATAL_REASONS", "TRIP_AFTER", "Breaker"]

#: failure reasons that no retry and no other request will cure
FATAL_REASONS = frozenset({"bad_request", "auth", "not_found"})
#: the number of such failures in a row, with no answer, that stops the run
TRIP_AFTER = 5


class Breaker:
    """A model client that raises ``ModelUnusable`` once a model has proven unusable.

    Everything but ``complete`` is the wrapped client's. After the trip,
    every call raises at once, so the units still queued end without calls.
    """

    def __init__(self, client: Any, *, trip_after: int = TRIP_AFTER):
        self.client = client
        self.trip_after = trip_after
        self._lock = threading.Lock()
        self._answered: set[str] = set()
        self._streak: dict[str, tuple[str, int]] = {}
        self.tripped: str | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def complete(self, config: Any, messages: Any, **kwargs: Any) -> Any:
        if self.tripped is not None:
            raise ModelUnusable(self.tripped)
        try:
            completion = self.client.complete(config, messages, **kwargs)
        except ModelError as exc:
            self._failed(config.model, exc)
            raise
        with self._lock:
            self._answered.add(config.model)
            self._streak.pop(config.model, None)
        return completion

    def _failed(self, model: str, exc: ModelError) -> None:
        with self._lock:
            if self.tripped is not None:
                raise ModelUnusable(self.tripped) from None
            if exc.reason not in FATAL_REASONS or model in self._answered:
                self._streak.pop(model, None)
                return
            reason, count = self._streak.get(model, (exc.reason, 0))
            count = count + 1 if reason == exc.reason else 1
            self._streak[model] = (exc.reason, count)
            if count < self.trip_after:
                return
            detail = short_reason(str(exc), 300)
            self.tripped = (f"{model}: its first {count} calls in this run all failed with {exc.reason}, which no retry "
                            f"cures, so the run stopped (finished work is stored): {detail}")
        raise ModelUnusable(self.tripped) from None
