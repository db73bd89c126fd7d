"""Cost estimates for ``plan``, read from litellm's bundled price list.

``plan`` must start fast, and importing litellm takes seconds, so this reads
the JSON price list that ships inside the litellm package directly instead of
importing it. Simulated (``sim/``) and unknown models (local servers) are free.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

__all__ = ["estimate_cost", "price_per_token"]


@functools.lru_cache(maxsize=1)
def _prices() -> dict:
    found = importlib.util.find_spec("litellm")
    if found is None or not found.submodule_search_locations:
        return {}
    path = Path(next(iter(found.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def price_per_token(model: str) -> tuple[float, float]:
    """(input, output) USD per token for a litellm model string; (0, 0) when unknown."""
    if model.startswith("sim/"):
        return 0.0, 0.0
    prices = _prices()
    provider, _, name = model.partition("/")
    for candidate in (model, name, f"{provider}/{name}"):
        entry = prices.get(candidate)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry.get("input_cost_per_token") or 0), float(entry.get("output_cost_per_token") or 0)
    return 0.0, 0.0


def estimate_cost(model: str, calls: int, prompt_tokens: int, completion_tokens: int) -> float:
    """Rough USD cost of ``calls`` calls of the given size."""
    inp, out = price_per_token(model)
    return calls * (inp * prompt_tokens + out * completion_tokens)
