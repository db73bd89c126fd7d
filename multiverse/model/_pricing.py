"""What a model call may cost before it is made: the one home of every estimate.

Two askers, two sources of prices, one rule (unpriced models, local servers
and simulated ``sim/`` ones, are free):

- ``plan`` prices the calls a grid needs with rough tokens per stage
  (:data:`TOKENS`) from litellm's bundled price list, read here as JSON:
  ``plan`` must start fast and never import litellm, which takes seconds
  (:func:`price_per_token`, :func:`estimate_cost`);
- the budget (``multiverse.model._budget``) prices one request as it is about
  to be sent (:func:`request_cost`): prompt ~ 4 characters a token,
  completion = ``max_tokens`` (or :data:`DEFAULT_COMPLETION_TOKENS`). It asks
  litellm itself, already loaded by the client that sends the request, so a
  price registered with litellm at run time counts too.

The cost of a finished call is not estimated: litellm prices the answer's
real token counts (``multiverse.model._llm``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from multiverse.core import is_simulated

__all__ = ["BATCH_TURNAROUND", "DEFAULT_COMPLETION_TOKENS", "TOKENS", "batch_price_per_token", "estimate_batch_cost",
           "estimate_cost", "price_per_token", "request_cost"]

#: rough (prompt, completion) tokens per call of each plan stage, for the cost estimate
TOKENS = {"draft": (700, 500), "rollout": (900, 250), "judge": (2500, 600)}
#: completion tokens assumed for a request whose params set no ``max_tokens``
DEFAULT_COMPLETION_TOKENS = 1024


@functools.lru_cache(maxsize=1)
def _prices() -> dict[str, Any]:
    found = importlib.util.find_spec("litellm")
    if found is None or not found.submodule_search_locations:
        return {}
    path = Path(next(iter(found.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        return cast("dict[str, Any]", json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def price_per_token(model: str) -> tuple[float, float]:
    """(input, output) USD per token for a litellm model string; (0, 0) when unknown."""
    if is_simulated(model):
        return 0.0, 0.0
    prices = _prices()
    provider, _, name = model.partition("/")
    for candidate in (model, name, f"{provider}/{name}"):
        entry = prices.get(candidate)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry.get("input_cost_per_token") or 0), float(entry.get("output_cost_per_token") or 0)
    return 0.0, 0.0


#: the longest a batch may take, per completion window a spec may name (the provider's promise, not a forecast)
BATCH_TURNAROUND = {"24h": 24 * 3600.0}


def batch_price_per_token(model: str) -> tuple[float, float, str]:
    """(input, output) USD per token of a batched request, and where the price is from: litellm's batch price
    (``input_cost_per_token_batches``) where its price list has one, else half the direct price, as litellm's own
    ``batch_cost_calculator`` assumes."""
    inp, out = price_per_token(model)
    if is_simulated(model):
        return 0.0, 0.0, "batch price"
    prices = _prices()
    provider, _, name = model.partition("/")
    for candidate in (model, name, f"{provider}/{name}"):
        entry = prices.get(candidate)
        if isinstance(entry, dict) and "input_cost_per_token_batches" in entry:
            return (float(entry.get("input_cost_per_token_batches") or 0),
                    float(entry.get("output_cost_per_token_batches") or out / 2), "batch price")
    return inp / 2, out / 2, "half the direct price"


def estimate_batch_cost(model: str, calls: int, prompt_tokens: int, completion_tokens: int) -> float:
    """Rough USD cost of ``calls`` batched calls of the given size."""
    inp, out, _ = batch_price_per_token(model)
    return calls * (inp * prompt_tokens + out * completion_tokens)


def estimate_cost(model: str, calls: int, prompt_tokens: int, completion_tokens: int) -> float:
    """Rough USD cost of ``calls`` calls of the given size."""
    inp, out = price_per_token(model)
    return calls * (inp * prompt_tokens + out * completion_tokens)


def request_cost(request: Mapping[str, Any]) -> float:
    """USD a chat request (litellm's keyword arguments) may cost: prompt ~ 4 characters a token,
    completion = max_tokens. Imports litellm: only a client about to send the request asks."""
    from multiverse.model._providers import load_litellm

    chars = len(json.dumps(request["messages"], default=str))
    chars += len(json.dumps(request.get("tools") or [], default=str))
    chars += len(json.dumps(request.get("response_format") or {}, default=str))
    completion = request.get("max_tokens") or request.get("max_completion_tokens") or DEFAULT_COMPLETION_TOKENS
    try:
        prompt_cost, completion_cost = load_litellm().cost_per_token(
            model=request["model"], prompt_tokens=chars // 4 + 1, completion_tokens=int(completion)
        )
    except Exception:  # unpriced model
        return 0.0
    return float(prompt_cost) + float(completion_cost)
