"""The model client: every model call goes through litellm here, paced, retried, priced and never paid twice.

- :class:`ModelClient` is the protocol the stages call and :class:`Completion`
  what a call returns; :class:`LiteLLMClient` is the one implementation.
- Pacing per provider (``estimate_wall_seconds`` for plans), a breaker that
  stops a run on an unusable model, a budget, and prices before a call
  (``estimate_cost``).
- :class:`RequestCache`: one request over the wire per distinct model request,
  shared across stages and runs through the store.
- :class:`BatchSender`: requests sent through a provider's batch API at batch
  prices (``batch_price_per_token``), kept under the keys direct calls use
  (``request_key``), and recorded in the store so a stopped run polls again.

Importing this room does not import litellm (that takes seconds):
``load_litellm`` does, on the first call that needs it.
"""

from ._answers import MAX_MODEL_CHARS
from ._batch import MAX_ID_CHARS, BatchCall, BatchReport, BatchSender
from ._breaker import Breaker
from ._client import Completion, CredentialCheck, ModelClient
from ._llm import LiteLLMClient
from ._pacing import estimate_wall_seconds
from ._pricing import BATCH_TURNAROUND, TOKENS, batch_price_per_token, estimate_batch_cost, estimate_cost
from ._providers import load_litellm
from ._requestcache import STAGE, RequestCache, request_key

__all__ = ["BATCH_TURNAROUND", "MAX_ID_CHARS", "MAX_MODEL_CHARS", "STAGE", "TOKENS", "BatchCall", "BatchReport", "BatchSender", "Breaker", "Completion",
           "CredentialCheck", "LiteLLMClient", "ModelClient", "RequestCache", "batch_price_per_token",
           "estimate_batch_cost", "estimate_cost", "estimate_wall_seconds", "load_litellm", "request_key"]
