"""A run's spending cap: what was spent, what calls in flight may cost, and refusing the call that would pass it.

A request's cost is known only once it is answered, so each request reserves
an estimate before it is sent (``multiverse.model._pricing.request_cost``) and
the reservation is exchanged for the real cost when it returns. A request whose estimate would take spent plus
reserved past the cap is refused with ``BudgetExceeded`` before it is sent.
Unpriced models (local, simulated) cost nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from multiverse.errors import BudgetExceeded
from multiverse.model._pricing import request_cost

__all__ = ["Budget"]


class Budget:
    """Spent and reserved USD against an optional cap. Thread-safe."""

    def __init__(self, cap: float | None):
        self.cap = cap
        self._lock = threading.Lock()
        self._spent = 0.0
        self._reserved = 0.0

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent

    def reserve(self, model: str, request: dict[str, Any]) -> float:
        """Reserve what ``request`` may cost; raise ``BudgetExceeded`` if that passes the cap."""
        if self.cap is None:
            return 0.0
        return self.reserve_usd(model, request_cost(request))

    def reserve_usd(self, model: str, cost: float) -> float:
        """Reserve ``cost`` USD (a batch's estimate, say); raise ``BudgetExceeded`` if that passes the cap."""
        if self.cap is None:
            return 0.0
        with self._lock:
            if self._spent + self._reserved + cost > self.cap:
                raise BudgetExceeded(
                    f"{model}: budget {self.cap:.4f} USD: spent {self._spent:.4f} + in flight "
                    f"{self._reserved:.4f} + next request ~{cost:.4f} would exceed it"
                )
            self._reserved += cost
        return cost

    def settle(self, reserved: float, cost: float) -> None:
        """Exchange a reservation for the request's real cost (0.0 when it failed)."""
        with self._lock:
            self._reserved = max(self._reserved - reserved, 0.0)
            self._spent += cost

