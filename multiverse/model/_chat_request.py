"""Building one chat request for litellm: what the model client sends.

:class:`ChatRequests` turns a model config and messages into litellm's keyword
arguments: the spec's params, no retries below ours, the endpoint and key,
the run's shared connection pool for an OpenAI-compatible endpoint
(:mod:`multiverse.model._connections`), plain JSON tools, and the structured-output
form this server takes (OpenAI's JSON-schema ``response_format``, or
llama-cpp-python's ``json_object`` + schema after the server refused the
first). :class:`multiverse.model._llm.LiteLLMClient` owns one per client.

A request's ``task`` (the request in machine terms, which the stages make
beside every generator, simulated-user, tool-simulator and judge prompt) goes
to a simulated (``sim/``) model only, as the ``sim_task`` keyword that the sim
provider reads: a real model is sent exactly the declared prompt, nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from multiverse.core import ModelConfig, is_simulated, json_ready
from multiverse.model._connections import Connections
from multiverse.model._providers import OPENAI_COMPATIBLE, load_litellm, provider_of

__all__ = ["SIM_TASK", "ChatRequests", "simulated"]

#: The keyword the ``sim`` provider reads its task from (``multiverse.sim._provider``).
SIM_TASK = "sim_task"


def simulated(config: ModelConfig) -> bool:
    """True for a model of the simulated world, the only kind that is given a request's task."""
    return is_simulated(config.model)


class ChatRequests:
    """Builds litellm requests for one model client. Thread-safe.

    Args:
        timeout: seconds per request unless the config's params set ``timeout``.
        connections: the client's pools, one per OpenAI-compatible endpoint and key.
    """

    def __init__(self, *, timeout: float, connections: Connections):
        self.timeout = timeout
        self.connections = connections
        self._schema_modes: dict[tuple[str, str | None], str | None] = {}
        self._lock = threading.Lock()

    def build(self, config: ModelConfig, messages: list[dict[str, Any]], *, api_key: str | None, seed: int | None,
              schema: dict[str, Any] | None, schema_name: str, tools: list[dict[str, Any]] | None,
              task: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """litellm's keyword arguments for one request (``api_key`` already resolved)."""
        params = dict(config.params)
        request: dict[str, Any] = {**params, "model": config.model, "messages": list(messages)}
        if task is not None and simulated(config):
            request[SIM_TASK] = json_ready(task)
        request["timeout"] = params.get("timeout", self.timeout)
        # We retry ourselves (paced, with Retry-After and jitter): litellm and the
        # openai SDK underneath must not retry too.
        request["num_retries"] = 0
        request["max_retries"] = 0
        if config.api_base:
            request["api_base"] = config.api_base
        if api_key is not None:
            request["api_key"] = api_key
            if config.api_base and provider_of(config.model) == "openai":  # litellm's own client per call is slow
                request.setdefault("client", self.connections.client(config.api_base, api_key))
        if seed is not None:
            request["seed"] = seed
        if tools:
            # Spec tools are read-only mappings, which litellm's request
            # builders do not take for dicts: send plain JSON.
            request["tools"] = json_ready(tools)
        mode = self.schema_mode(config) if schema is not None else None
        if mode == "json_schema":
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            }
        elif mode == "json_object":
            request["response_format"] = {"type": "json_object", "schema": schema}
        return request

    def schema_mode(self, config: ModelConfig) -> str | None:
        """How to ask ``config`` for schema-shaped JSON: "json_schema" (OpenAI's
        response_format), "json_object" + schema (llama-cpp-python's), or None."""
        key = (config.model, config.api_base)
        if key not in self._schema_modes:
            if config.api_base and provider_of(config.model) in OPENAI_COMPATIBLE:
                mode: str | None = "json_schema"  # llama.cpp's llama-server, vLLM, LM Studio
            else:
                try:
                    supported = bool(load_litellm().supports_response_schema(model=config.model))
                except Exception:  # litellm says "does not raise"; be sure
                    supported = False
                mode = "json_schema" if supported else None
            with self._lock:
                self._schema_modes.setdefault(key, mode)
        return self._schema_modes[key]

    def downgrade_schema(self, config: ModelConfig, request: dict[str, Any], exc: BaseException) -> bool:
        """Switch an OpenAI-compatible server that rejects the json_schema
        response_format (llama-cpp-python takes only "text" | "json_object")
        to ``{"type": "json_object", "schema": ...}``. True if switched."""
        response_format = request.get("response_format") or {}
        if response_format.get("type") != "json_schema" or "response_format" not in str(exc):
            return False
        if not (config.api_base and provider_of(config.model) in OPENAI_COMPATIBLE):
            return False
        with self._lock:
            self._schema_modes[(config.model, config.api_base)] = "json_object"
        request["response_format"] = {"type": "json_object", "schema": response_format["json_schema"]["schema"]}
        return True
