"""The model-client seam: what the stages and the executor call, and what they get back.

Every stage asks a :class:`ModelClient` for a :class:`Completion`; nothing
else about the client matters to them. ``multiverse.model._llm.LiteLLMClient`` is
the client for every real and simulated model (``sim/`` models are a litellm
provider, so they take the same path); ``multiverse.model._breaker.Breaker`` wraps
any client, and so does ``multiverse.model._requestcache.RequestCache``, which a run
puts outermost so that no request is sent twice; tests and benchmarks pass
their own to count or intercept calls.

A client may also offer ``check_credentials(configs)``, which the engine
calls before the first model call of a run so that a missing key never
strands a half-paid run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from multiverse.core import ModelConfig

__all__ = ["Completion", "CredentialCheck", "ModelClient"]


@dataclass
class Completion:
    """One model answer, with what the store keeps as its provenance."""

    text: str
    parsed: Any | None  # JSON-decoded when a response schema was requested
    tool_calls: list[dict[str, Any]]  # OpenAI-style [{id, name, arguments(dict)}]
    model_reported: str
    usage: dict[str, Any]  # prompt_tokens, completion_tokens
    cost: float
    seconds: float
    attempts: int


@runtime_checkable
class ModelClient(Protocol):
    """Anything that answers a chat request for a model config.

    ``complete`` raises ``multiverse.errors.ModelError`` when the call failed
    for good (after its retries); a stage records that as a failure, never as
    a label. ``task`` is the request in machine terms (``multiverse.work.Prompt``),
    for a simulated model only: a client never sends it to a real provider.
    """

    def complete(
        self,
        config: ModelConfig,
        messages: list[dict[str, Any]],
        *,
        seed: int | None = None,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        tools: list[dict[str, Any]] | None = None,
        task: Mapping[str, Any] | None = None,
    ) -> Completion: ...


@runtime_checkable
class CredentialCheck(Protocol):
    """A client that can say, before any call, which credentials are missing."""

    def check_credentials(self, configs: Iterable[ModelConfig]) -> None: ...
