"""The litellm custom provider ``sim``: ``litellm.completion(model="sim/<name>", ...)``.

Imported only by :func:`multiverse.sim.register`, because importing litellm
takes seconds. litellm hands the handler the model name without its
``sim/`` prefix, the ``api_base`` (the world: ``sim://<builtin>`` or
``sim:///abs/path.yaml``) and ``optional_params`` holding ``seed`` and
``tools``, and ``sim_task``: the request's task in machine terms, which the
model client gives a ``sim/`` model only (``multiverse.model``); other
parameters (temperature, max_tokens, response_format) are accepted and
ignored: the world's answers depend on the task, not on decoding settings.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.llms.custom_llm import CustomLLMError
from litellm.types.utils import ChatCompletionMessageToolCall, Function, ModelResponse, Usage

from multiverse.core import SIM_PREFIX

from ..errors import SpecError
from ._loader import load_world
from ._respond import respond

__all__ = ["PROVIDER", "SimProvider", "register"]

PROVIDER = "sim"
_lock = threading.Lock()
_priced: set[str] = set()


def _price_world(api_base: str | None) -> None:
    """Declare every model of the world free in litellm's cost map, so that
    ``litellm.completion_cost`` answers 0.0 instead of raising for sim models."""
    world = load_world(api_base)
    if world.digest in _priced:
        return
    with _lock:
        if world.digest in _priced:
            return
        free = {
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
            "cache_creation_input_token_cost": 0.0,
            "cache_read_input_token_cost": 0.0,
            "litellm_provider": PROVIDER,
            "mode": "chat",
        }
        entries = {}
        for name in world.models:
            entries[f"{SIM_PREFIX}{name}"] = dict(free)
            entries[world.reported(name)] = dict(free)
        litellm.register_model(entries)
        _priced.add(world.digest)


class SimProvider(CustomLLM):
    """Answers chat completions from the simulated world named by ``api_base``."""

    # litellm calls this with keywords only and this provider reads few of them;
    # the base class spells out every one it might pass.
    def completion(  # type: ignore[override]
        self,
        model: str,
        messages: list[Any],
        api_base: str | None = None,
        model_response: ModelResponse | None = None,
        optional_params: dict[str, Any] | None = None,
        **_: Any,
    ) -> ModelResponse:
        params = optional_params or {}
        try:
            _price_world(api_base)
            reply = respond(model, messages, seed=params.get("seed"), tools=params.get("tools"), world=api_base,
                            task=params.get("sim_task"))
        except SpecError as exc:
            # A misconfigured world or model is a bad request: never retried.
            raise CustomLLMError(status_code=400, message=str(exc)) from None
        response = model_response if model_response is not None else ModelResponse()
        message = response.choices[0].message
        message.content = reply.text
        if reply.tool_calls:
            message.tool_calls = [
                ChatCompletionMessageToolCall(
                    id=call["id"], type="function", function=Function(name=call["name"], arguments=json.dumps(call["arguments"]))
                )
                for call in reply.tool_calls
            ]
        response.choices[0].finish_reason = reply.finish_reason  # type: ignore[assignment]  # a str from the world
        response.model = reply.model_reported
        prompt, completion = reply.usage["prompt_tokens"], reply.usage["completion_tokens"]
        response.usage = Usage(  # type: ignore[attr-defined]  # litellm adds usage at run time
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)
        response._hidden_params["response_cost"] = 0.0
        return response

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        # Pure CPU work of well under a millisecond: no reason to hop threads.
        return self.completion(*args, **kwargs)


def register() -> None:
    """Register the ``sim`` provider with litellm (idempotent, thread-safe)."""
    with _lock:
        current = [item for item in litellm.custom_provider_map if item.get("provider") == PROVIDER]
        if current and all(isinstance(item.get("custom_handler"), SimProvider) for item in current):
            return
        others = [item for item in litellm.custom_provider_map if item.get("provider") != PROVIDER]
        litellm.custom_provider_map = [*others, {"provider": PROVIDER, "custom_handler": SimProvider()}]
        # litellm runs this at every call too; doing it now lets get_llm_provider
        # resolve "sim/..." before the first completion.
        litellm.utils.custom_llm_setup()
