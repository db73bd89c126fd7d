"""The model client: the one place where multiverse calls a model.

Every case draft, rollout turn, simulated user turn, tool simulation and
judgment goes through :meth:`ModelClient.complete`, which calls litellm and
adds what an audit needs on top of it:

- a concurrency limit per provider (model prefix + ``api_base``) of ``jobs``;
- retries with exponential backoff and full jitter on rate limits (honouring
  Retry-After), server errors, dropped connections and timeouts, while bad
  requests and missing credentials fail at once;
- structured output: the JSON-schema ``response_format`` where the provider
  supports it, and always a parse + validation of the answer
  (:mod:`multiverse.answers`), with exactly one repair request; an answer that
  still does not parse raises ``ModelError(reason="unparseable")``, which the
  stages record as ``judge_failed`` rather than turning it into a label;
- usage, cost (``0.0`` for models litellm has no price for) and a budget cap;
- the boundary every outside string crosses: answer text, tool calls, the
  reported model and error messages leave ``complete`` made storable
  (:func:`multiverse.answers.storable_text`) and with every credential value
  redacted (:mod:`multiverse.credentials`), whatever a server echoes.

Errors (see :mod:`multiverse.errors`)::

    ModelError            retried: rate_limited | server_error | timeout | connection
     |                    at once: bad_request | auth | not_found | provider_error |
     |                             empty_response | missing_credentials | error
     |                    after one repair request: unparseable
     └── BudgetExceeded   reason: budget_exceeded

Importing this module does not import litellm (that takes seconds); litellm is
imported on the first call that needs it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

from multiverse import credentials, interrupt
from multiverse.answers import parse_json_answer, repair_messages, storable, storable_text, too_deep
from multiverse.errors import BudgetExceeded, ModelError
from multiverse.config import ModelConfig  # model, params, api_base, api_key_env

__all__ = ["ModelConfig", "Completion", "ModelClient", "parse_json_answer", "provider_of", "is_loopback"]

# Completion tokens assumed for the budget estimate when params set no max_tokens.
DEFAULT_COMPLETION_TOKENS = 1024
# Providers that speak the OpenAI chat API when pointed at an api_base
# (llama.cpp, vLLM, LM Studio): they accept a json_schema response_format.
OPENAI_COMPATIBLE = frozenset({"openai", "hosted_vllm", "llamafile", "lm_studio", "openai_like"})
# Providers that never need a key: the simulated audit world.
KEYLESS = frozenset({"sim"})
LOCAL_API_KEY = "sk-local"
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})
# Transport exceptions that mean the network failed, not the model (their
# *Timeout* siblings mean a timeout). Named, so that classifying a failure
# imports nothing.
_TRANSPORTS = frozenset({"httpx", "httpcore", "aiohttp"})
_NETWORK_ERRORS = frozenset(
    {
        "ConnectError",
        "ReadError",
        "WriteError",
        "CloseError",
        "NetworkError",
        "RemoteProtocolError",
        "ProxyError",
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ServerDisconnectedError",
    }
)


@dataclass
class Completion:
    """One model answer, with what the store keeps as its provenance."""

    text: str
    parsed: Any | None  # JSON-decoded when a response schema was requested
    tool_calls: list[dict]  # OpenAI-style [{id, name, arguments(dict)}]
    model_reported: str
    usage: dict  # prompt_tokens, completion_tokens
    cost: float
    seconds: float
    attempts: int


@dataclass
class _Failure:
    reason: str
    retryable: bool
    retry_after: float | None = None


@dataclass
class _Stats:
    calls: int = 0  # requests sent (attempts, including retries and repairs)
    retries: int = 0
    repairs: int = 0
    completions: int = 0  # complete() calls that returned
    failures: int = 0  # complete() calls that raised ModelError
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    by_reason: dict = field(default_factory=dict)  # failed attempts per reason


def provider_of(model: str) -> str:
    """The provider prefix of a litellm model string (``"openai/gemma"`` -> ``"openai"``)."""
    return model.split("/", 1)[0] if "/" in model else ""


def is_loopback(api_base: str | None) -> bool:
    """True when ``api_base`` points at this machine (a local server needs no key)."""
    if not api_base:
        return False
    host = urlparse(api_base).hostname or ""
    return host in _LOOPBACK or host.startswith("127.")


@lru_cache(maxsize=256)
def _bare_provider(model: str) -> str:
    """litellm's provider for a model string without a prefix ("gpt-4o" -> "openai")."""
    try:
        return str(_litellm().get_llm_provider(model)[1])
    except Exception:  # unknown to litellm: the call itself will say so
        return model


# -- litellm, imported once and lazily ---------------------------------------

_litellm_lock = threading.Lock()
_litellm_module: Any = None


def _litellm() -> Any:
    global _litellm_module
    if _litellm_module is None:
        with _litellm_lock:
            if _litellm_module is None:
                # litellm fetches a remote price map at import unless told not to.
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm

                litellm.suppress_debug_info = True
                litellm.set_verbose = False
                # A param a provider does not take (seed, response_format) is
                # dropped rather than failing the call: the spec stays portable.
                litellm.drop_params = True
                for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
                    logging.getLogger(name).setLevel(logging.ERROR)
                # The simulated world is a litellm custom provider: register it
                # so sim/ models take the same code path as any other model.
                from .sim import register

                register()
                _litellm_module = litellm
    return _litellm_module


# -- the answer's message and tool calls --------------------------------------


def _message(response: Any, config: ModelConfig) -> Any:
    choices = getattr(response, "choices", None)
    if not choices:
        raise ModelError(f"{config.model}: the answer has no choices", reason="empty_response")
    return choices[0].message


def _text(message: Any) -> str:
    """The answer's text; a provider's non-string content (parts, numbers) as JSON, never guessed at."""
    content = getattr(message, "content", None)
    if content is None or isinstance(content, str):
        return content or ""
    return json.dumps(content, default=str, ensure_ascii=False)


def _tool_calls(message: Any) -> list[dict]:
    """[{id, name, arguments}]: arguments as a dict when the model sent a JSON
    object, else exactly the text it sent (the rollout answers that with an error)."""
    calls = []
    for i, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        raw = getattr(function, "arguments", None)
        arguments: Any = raw if isinstance(raw, str) else json.dumps(raw, default=str)
        if isinstance(raw, dict) and not too_deep(raw):
            arguments = raw
        elif isinstance(raw, str):
            try:
                decoded = json.loads(raw) if raw.strip() else {}
            except (ValueError, RecursionError):
                decoded = None  # keep what the model said; never guess the arguments it meant
            if isinstance(decoded, dict) and not too_deep(decoded):
                arguments = decoded
        calls.append({"id": str(getattr(call, "id", None) or f"call_{i}"),
                      "name": str(getattr(function, "name", None) or ""), "arguments": arguments})
    return calls


def _plain(value: Any) -> Any:
    """JSON-ready copy of spec data (read-only mappings, tuples) for a request body."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# -- failures -----------------------------------------------------------------


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (Retry-After / retry-after-ms), if any."""
    response = getattr(exc, "response", None)
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
        getattr(response, "headers", None),
    ):
        if not headers:
            continue
        try:
            millis = headers.get("retry-after-ms")
            if millis is not None:
                return max(float(millis) / 1000, 0.0)
            value = headers.get("retry-after") or headers.get("Retry-After")
        except (AttributeError, ValueError, TypeError):
            continue
        if value is None:
            continue
        try:
            return max(float(value), 0.0)
        except ValueError:
            from email.utils import parsedate_to_datetime

            try:
                return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
            except (TypeError, ValueError):
                continue
    return None


def _is_model_failure(exc: BaseException) -> bool:
    """True for what litellm raises about a model call (it maps provider and
    network errors to openai-style exceptions); False for programming errors."""
    import openai

    return isinstance(exc, (openai.OpenAIError, OSError))


def _classify(exc: BaseException) -> _Failure:
    """Map a litellm / openai / httpx exception to a short reason and whether to retry."""
    litellm = _litellm()
    import openai

    if isinstance(exc, litellm.RateLimitError):
        return _Failure("rate_limited", True, _retry_after(exc))
    # Walk the cause chain for the transport's own error: litellm reports a
    # dropped connection as a 500 InternalServerError caused by httpx.ReadError.
    chain, seen = exc, set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        name, module = type(chain).__name__, type(chain).__module__.split(".")[0]
        if isinstance(chain, (litellm.Timeout, openai.APITimeoutError, TimeoutError)) or (
            module in _TRANSPORTS and "Timeout" in name
        ):
            return _Failure("timeout", True)
        if isinstance(chain, (ConnectionError, socket.gaierror)) or (module in _TRANSPORTS and name in _NETWORK_ERRORS):
            return _Failure("connection", True)
        chain = chain.__cause__ or chain.__context__
    if isinstance(exc, litellm.APIConnectionError):
        # litellm also wraps any exception a provider raised (a custom
        # provider's bug, say) as APIConnectionError; with no transport error
        # underneath, retrying would only repeat it.
        return _Failure("provider_error", False)
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return _Failure("auth", False)
    if isinstance(exc, litellm.NotFoundError):
        return _Failure("not_found", False)
    if isinstance(exc, (litellm.BadRequestError, litellm.UnprocessableEntityError)):
        return _Failure("bad_request", False)
    status = getattr(exc, "status_code", None)
    if status == 429:
        return _Failure("rate_limited", True, _retry_after(exc))
    if status == 408:
        return _Failure("timeout", True)
    if isinstance(status, int) and status >= 500:
        return _Failure("server_error", True, _retry_after(exc))
    if isinstance(status, int) and 400 <= status < 500:
        return _Failure("bad_request", False)
    return _Failure("error", False)


def _one_line(exc: BaseException, secrets: Iterable[str]) -> str:
    from multiverse.outcomes import short_reason

    # Redact before cutting: a key cut in half would no longer match. Cut at a word, and marked.
    # This call's own keys join every credential in use (shorter ones too: they are known keys, not guesses).
    values = sorted({*(s for s in secrets if s and len(s) >= 6), *credentials.secret_values()}, key=len, reverse=True)
    text = credentials.redact(" ".join(str(exc).split()), values)
    return short_reason(storable_text(text), 300)


# -- the client -----------------------------------------------------------------


class ModelClient:
    """Calls models through litellm for every stage of an audit. Thread-safe.

    Args:
        jobs: requests in flight at once per provider (model prefix + api_base).
        budget: USD cap for the run; ``None`` for no cap.
        timeout: seconds per request, passed to litellm.
        max_retries: retries after the first attempt for retryable failures.
        call_log: called (from the calling thread) with one dict per finished
            attempt: model, ok, reason, seconds, tokens, cost, attempt, repair.
        backoff_base, backoff_cap: full-jitter backoff, sleep ~ U(0, min(cap, base * 2**n)).
        retry_after_cap: the longest Retry-After we honour, in seconds.
        seed: seeds the jitter RNG (not the models).
    """

    def __init__(
        self,
        *,
        jobs: int = 8,
        budget: float | None = None,
        timeout: float = 120,
        max_retries: int = 5,
        call_log: Callable[[dict], None] | None = None,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        retry_after_cap: float = 120.0,
        seed: int | None = None,
    ):
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        self.jobs = jobs
        self.budget = budget
        self.timeout = timeout
        self.max_retries = max_retries
        self.call_log = call_log
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._semaphores: dict[tuple[str, str | None], threading.BoundedSemaphore] = {}
        self._schema_modes: dict[tuple[str, str | None], str | None] = {}
        self._stats = _Stats()
        self._spent = 0.0
        self._in_flight_estimate = 0.0

    # -- public ----------------------------------------------------------------

    @property
    def stats(self) -> dict:
        """Counters so far: calls, retries, repairs, completions, failures, tokens, cost ..."""
        with self._lock:
            s = self._stats
            return {
                "calls": s.calls,
                "retries": s.retries,
                "repairs": s.repairs,
                "completions": s.completions,
                "failures": s.failures,
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.completion_tokens,
                "tokens": s.prompt_tokens + s.completion_tokens,
                "cost": s.cost,
                "failures_by_reason": dict(s.by_reason),
            }

    @property
    def spent(self) -> float:
        """USD spent so far (the sum of the costs of answered requests)."""
        with self._lock:
            return self._spent

    def check_credentials(self, configs: Iterable[ModelConfig]) -> None:
        """Check, before any model is called, that every provider the configs
        name has its key; raise one ``ModelError(reason="missing_credentials")``
        naming each missing env var (never a value)."""
        seen: set[tuple[str, str | None, str | None]] = set()
        problems: list[str] = []
        for config in configs:
            key = (provider_of(config.model) or config.model, config.api_base, config.api_key_env)
            if key in seen:
                continue
            seen.add(key)
            missing = self._missing_credentials(config)
            if missing:
                problems.append(f"{config.model}: set {', '.join(missing)}")
        if problems:
            raise ModelError(f"missing credentials: {'; '.join(problems)}", reason="missing_credentials")

    def complete(
        self,
        config: ModelConfig,
        messages: list[dict],
        *,
        seed: int | None = None,
        schema: dict | None = None,
        schema_name: str = "answer",
        tools: list[dict] | None = None,
    ) -> Completion:
        """Send ``messages`` to ``config``'s model and return its answer.

        With ``schema``, the answer's text is decoded and validated into
        ``parsed``; one repair request is made if it does not parse, then
        ``ModelError(reason="unparseable")``. Raises ``ModelError`` when retries
        are exhausted or the failure cannot be retried, ``BudgetExceeded`` when
        the next request would pass the budget.
        """
        started = time.monotonic()
        try:
            request = self._request(config, messages, seed=seed, schema=schema, schema_name=schema_name, tools=tools)
            response, attempts, cost = self._call_with_retries(config, request, repair=False)
            message = _message(response, config)
            text = _text(message)
            tool_calls = _tool_calls(message)
            usage = self._usage(response)
            parsed = None
            if schema is not None and not tool_calls:
                try:
                    parsed = parse_json_answer(text, schema)
                except ValueError as problem:
                    with self._lock:
                        self._stats.repairs += 1
                    request["messages"] = repair_messages(request["messages"], text, str(problem), schema, schema_name)
                    response, more, more_cost = self._call_with_retries(config, request, repair=True)
                    attempts, cost = attempts + more, cost + more_cost
                    for name, count in self._usage(response).items():
                        usage[name] += count
                    text = _text(_message(response, config))
                    try:
                        parsed = parse_json_answer(text, schema)
                    except ValueError as again:
                        raise ModelError(
                            f"{config.model}: unparseable answer after a repair request: {again}",
                            reason="unparseable",
                        ) from None
        except ModelError as exc:
            with self._lock:
                self._stats.failures += 1
            # A message may quote the answer or the server: it leaves as any answer does.
            exc.args = (storable_text(credentials.redact(str(exc))),)
            raise
        with self._lock:
            self._stats.completions += 1
        secrets = credentials.secret_values()
        return Completion(
            # Redacted before cut: a key cut in half would no longer match.
            text=storable_text(credentials.redact(text, secrets)),
            parsed=storable(credentials.redact_all(parsed, secrets)),
            tool_calls=storable(credentials.redact_all(tool_calls, secrets)),
            model_reported=storable_text(credentials.redact(str(getattr(response, "model", None) or config.model), secrets)),
            usage=usage,
            cost=cost,
            seconds=time.monotonic() - started,
            attempts=attempts,
        )

    # -- credentials -------------------------------------------------------------

    def _missing_credentials(self, config: ModelConfig) -> list[str]:
        if config.api_key_env:
            value = os.environ.get(config.api_key_env)
            credentials.register(value)
            return [] if value else [config.api_key_env]
        if provider_of(config.model) in KEYLESS or is_loopback(config.api_base):
            return []
        result = _litellm().validate_environment(model=config.model, api_base=config.api_base)
        return list(result.get("missing_keys") or [])

    def _api_key(self, config: ModelConfig) -> str | None:
        if config.api_key_env:
            value = os.environ.get(config.api_key_env)
            if not value:
                raise ModelError(
                    f"{config.model}: missing credentials: set {config.api_key_env} in the environment",
                    reason="missing_credentials",
                )
            # Whatever the variable's name, its value is now a credential in use.
            credentials.register(value)
            return value
        if is_loopback(config.api_base) and provider_of(config.model) not in KEYLESS:
            # A local server needs no key; never send a real provider key from
            # the environment to whatever listens on loopback.
            return LOCAL_API_KEY
        return None

    # -- one request ---------------------------------------------------------------

    def _request(self, config, messages, *, seed, schema, schema_name, tools) -> dict:
        params = dict(config.params)
        request: dict[str, Any] = {**params, "model": config.model, "messages": list(messages)}
        request["timeout"] = params.get("timeout", self.timeout)
        # We retry ourselves (with Retry-After and jitter): litellm and the
        # openai SDK underneath must not retry too.
        request["num_retries"] = 0
        request["max_retries"] = 0
        if config.api_base:
            request["api_base"] = config.api_base
        api_key = self._api_key(config)
        if api_key is not None:
            request["api_key"] = api_key
        if seed is not None:
            request["seed"] = seed
        if tools:
            # Spec tools are read-only mappings, which litellm's request
            # builders do not take for dicts: send plain JSON.
            request["tools"] = _plain(tools)
        mode = self._schema_mode(config) if schema is not None else None
        if mode == "json_schema":
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": schema, "strict": True},
            }
        elif mode == "json_object":
            request["response_format"] = {"type": "json_object", "schema": schema}
        return request

    def _schema_mode(self, config: ModelConfig) -> str | None:
        """How to ask ``config`` for schema-shaped JSON: "json_schema" (OpenAI's
        response_format), "json_object" + schema (llama-cpp-python's), or None."""
        key = (config.model, config.api_base)
        if key not in self._schema_modes:
            if config.api_base and provider_of(config.model) in OPENAI_COMPATIBLE:
                mode: str | None = "json_schema"  # llama.cpp's llama-server, vLLM, LM Studio
            else:
                try:
                    supported = bool(_litellm().supports_response_schema(model=config.model))
                except Exception:  # litellm says "does not raise"; be sure
                    supported = False
                mode = "json_schema" if supported else None
            self._schema_modes[key] = mode
        return self._schema_modes[key]

    def _downgrade_schema(self, config: ModelConfig, request: dict, exc: BaseException) -> bool:
        """Switch an OpenAI-compatible server that rejects the json_schema
        response_format (llama-cpp-python takes only "text" | "json_object")
        to ``{"type": "json_object", "schema": ...}``. True if switched."""
        response_format = request.get("response_format") or {}
        if response_format.get("type") != "json_schema" or "response_format" not in str(exc):
            return False
        if not (config.api_base and provider_of(config.model) in OPENAI_COMPATIBLE):
            return False
        self._schema_modes[(config.model, config.api_base)] = "json_object"
        request["response_format"] = {"type": "json_object", "schema": response_format["json_schema"]["schema"]}
        return True

    def _semaphore(self, config: ModelConfig) -> threading.BoundedSemaphore:
        key = (provider_of(config.model) or _bare_provider(config.model), config.api_base)
        with self._lock:
            if key not in self._semaphores:
                self._semaphores[key] = threading.BoundedSemaphore(self.jobs)
            return self._semaphores[key]

    def _call_with_retries(self, config: ModelConfig, request: dict, *, repair: bool) -> tuple[Any, int, float]:
        """(response, attempts, cost) of one request, retried per the policy."""
        litellm = _litellm()
        secrets = [str(request.get("api_key") or "")]
        attempt = 0
        while True:
            attempt += 1
            interrupt.check()  # after Ctrl-C no request starts, not even a retry
            estimate = self._reserve(config, request)
            started = time.monotonic()
            try:
                with self._semaphore(config):
                    response = litellm.completion(**request)
            except Exception as exc:
                seconds = time.monotonic() - started
                self._release(estimate, 0.0)
                if not _is_model_failure(exc):
                    raise  # a bug in the request we built, not a failure of the model
                failure = _classify(exc)
                self._record(config, attempt, repair, ok=False, reason=failure.reason, seconds=seconds, usage={}, cost=0.0)
                if self._downgrade_schema(config, request, exc):
                    continue  # the same request in the form this server takes, at once
                if not failure.retryable or attempt > self.max_retries:
                    detail = _one_line(exc, secrets)
                    tries = f" after {attempt} attempts" if attempt > 1 else ""
                    raise ModelError(
                        f"{config.model}: {failure.reason}{tries}: {detail}",
                        reason=failure.reason,
                        retryable=failure.retryable,
                    ) from None
                with self._lock:
                    self._stats.retries += 1
                interrupt.sleep(self._backoff(attempt, failure.retry_after))
                continue
            seconds = time.monotonic() - started
            usage = self._usage(response)
            cost = self._cost(response)
            self._release(estimate, cost)
            self._record(config, attempt, repair, ok=True, reason="", seconds=seconds, usage=usage, cost=cost)
            return response, attempt, cost

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = self._rng.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))
        if retry_after is not None:
            # Never come back earlier than the provider asked, within reason.
            delay = min(max(delay, retry_after), self.retry_after_cap)
        return delay

    # -- usage, cost, budget ---------------------------------------------------------

    @staticmethod
    def _usage(response: Any) -> dict:
        usage = getattr(response, "usage", None)
        return {
            "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        }

    @staticmethod
    def _cost(response: Any) -> float:
        # litellm already priced the response (completion_cost) while building
        # it; pricing it again costs ~0.3 ms of CPU a call, which matters at 32+ jobs.
        hidden = getattr(response, "_hidden_params", None) or {}
        if "response_cost" in hidden:
            return float(hidden["response_cost"] or 0.0)  # None: litellm has no price
        try:
            return float(_litellm().completion_cost(completion_response=response) or 0.0)
        except Exception:  # no price for local and simulated models: they cost nothing
            return 0.0

    def _estimate(self, request: dict) -> float:
        """USD a request may cost: prompt ~ 4 characters a token, completion = max_tokens."""
        chars = len(json.dumps(request["messages"], default=str))
        chars += len(json.dumps(request.get("tools") or [], default=str))
        chars += len(json.dumps(request.get("response_format") or {}, default=str))
        completion = request.get("max_tokens") or request.get("max_completion_tokens") or DEFAULT_COMPLETION_TOKENS
        try:
            prompt_cost, completion_cost = _litellm().cost_per_token(
                model=request["model"], prompt_tokens=chars // 4 + 1, completion_tokens=int(completion)
            )
        except Exception:  # unpriced model
            return 0.0
        return float(prompt_cost) + float(completion_cost)

    def _reserve(self, config: ModelConfig, request: dict) -> float:
        if self.budget is None:
            return 0.0
        estimate = self._estimate(request)
        with self._lock:
            committed = self._spent + self._in_flight_estimate
            if committed + estimate > self.budget:
                raise BudgetExceeded(
                    f"{config.model}: budget {self.budget:.4f} USD: spent {self._spent:.4f} + in flight "
                    f"{self._in_flight_estimate:.4f} + next request ~{estimate:.4f} would exceed it"
                )
            self._in_flight_estimate += estimate
        return estimate

    def _release(self, estimate: float, cost: float) -> None:
        with self._lock:
            self._in_flight_estimate = max(self._in_flight_estimate - estimate, 0.0)
            self._spent += cost

    def _record(self, config, attempt, repair, *, ok, reason, seconds, usage, cost) -> None:
        with self._lock:
            s = self._stats
            s.calls += 1
            s.prompt_tokens += usage.get("prompt_tokens", 0)
            s.completion_tokens += usage.get("completion_tokens", 0)
            s.cost += cost
            if not ok:
                s.by_reason[reason] = s.by_reason.get(reason, 0) + 1
        if self.call_log is not None:
            self.call_log(
                {
                    "model": config.model,
                    "ok": ok,
                    "reason": reason,
                    "seconds": seconds,
                    "tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0),
                    "cost": cost,
                    "attempt": attempt,
                    "repair": repair,
                }
            )
