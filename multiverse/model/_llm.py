"""The litellm model client: the one place where multiverse calls a model.

Every case draft, rollout turn, simulated user turn, tool simulation and
judgment goes through :meth:`LiteLLMClient.complete` (the
:class:`~multiverse.model._client.ModelClient` the engine uses by default), which
calls litellm and adds what an audit needs on top of it:

- pacing per provider lane (:mod:`multiverse.model._pacing`): declared ``rate_limits``
  are never exceeded; other providers are paced from their 429s and 503s;
- retries (tenacity) with exponential backoff and full jitter on server errors,
  dropped connections and timeouts (after a 429/503, the lane's pause instead),
  while bad requests and missing credentials fail at once
  (:mod:`multiverse.model._failures` classifies); a stop (``multiverse.core._interrupt``)
  ends a wait at once and no request starts after it;
- structured output: the JSON-schema ``response_format`` where the provider
  supports it, and always a parse + validation of the answer
  (:mod:`multiverse.model._answers`), with exactly one repair request; an answer that
  still does not parse raises ``ModelError(reason="unparseable")``, which the
  stages record as ``judge_failed`` rather than turning it into a label;
- usage, cost (``0.0`` for models litellm has no price for) and a budget cap
  (:mod:`multiverse.model._budget`);
- the boundary every outside string crosses: answer text, tool calls, the
  reported model and error messages leave ``complete`` made storable
  (:func:`multiverse.model._answers.storable_text`) and with every credential value
  redacted (:mod:`multiverse.core._credentials`), whatever a server echoes.

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

import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from multiverse.core import (
    ModelConfig,  # model, params, api_base, api_key_env
    credentials,
    interrupt,
)
from multiverse.errors import ModelError
from multiverse.model._answers import (
    answer_message,
    answer_text,
    answer_tool_calls,
    parse_json_answer,
    repair_messages,
    reported_model,
    storable,
    storable_text,
)
from multiverse.model._budget import Budget
from multiverse.model._chat_request import ChatRequests
from multiverse.model._client import Completion
from multiverse.model._connections import Connections
from multiverse.model._failures import Failure, classify, is_model_failure, one_line, retry_after
from multiverse.model._pacing import Pacer, request_tokens
from multiverse.model._providers import KEYLESS, LOCAL_API_KEY, is_loopback, load_litellm, provider_key, provider_of

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["Completion", "LiteLLMClient", "ModelConfig", "is_loopback", "parse_json_answer", "provider_of"]


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
    by_reason: dict[str, Any] = field(default_factory=dict)  # failed attempts per reason


class _Retry(Exception):
    """A failed attempt that a later one may cure, or that is sent again at once in the form the server takes."""

    def __init__(self, failure: Failure, exc: BaseException, *, reformatted: bool = False, paced: bool = False):
        super().__init__(failure.reason)
        # paced: a 429/503, whose lane waits out the pause before the next attempt
        self.failure, self.exc, self.reformatted, self.paced = failure, exc, reformatted, paced


class LiteLLMClient:
    """Calls models through litellm for every stage of an audit. Thread-safe.

    Args:
        jobs: requests in flight at once per provider lane (model prefix + api_base)
            with no ``max_concurrency`` declared.
        rate_limits: model-string prefix -> declared limits (``rpm``, ``tpm``,
            ``max_concurrency``), as the spec's ``rate_limits``; never exceeded.
            Other providers are paced from their answers (:mod:`multiverse.model._pacing`).
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
        rate_limits: Mapping[str, Any] | None = None,
        budget: float | None = None,
        timeout: float = 120,
        max_retries: int = 5,
        call_log: Callable[[dict[str, Any]], None] | None = None,
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
        self.rate_limits = dict(rate_limits or {})
        #: the run's lanes; an executor reads it to start units whose lane has room
        self.pacer = Pacer(self.rate_limits, default_concurrency=jobs, provider=lambda model: provider_key(model, None)[0])
        self._connections = Connections(jobs)
        self._requests = ChatRequests(timeout=timeout, connections=self._connections)
        self._stats = _Stats()
        self._budget = Budget(budget)

    # -- public ----------------------------------------------------------------

    @property
    def stats(self) -> dict[str, Any]:
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

    def close(self) -> None:
        """Close the HTTP connections this client holds open (a run does, when it ends).
        The client stays usable: a later call opens new ones."""
        self._connections.close()

    def __enter__(self) -> LiteLLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def spent(self) -> float:
        """USD spent so far (the sum of the costs of answered requests)."""
        return self._budget.spent

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
        messages: list[dict[str, Any]],
        *,
        seed: int | None = None,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        tools: list[dict[str, Any]] | None = None,
        task: Mapping[str, Any] | None = None,
    ) -> Completion:
        """Send ``messages`` to ``config``'s model and return its answer (``task``: to a ``sim/`` model only).

        With ``schema``, the answer's text is decoded and validated into
        ``parsed``; one repair request is made if it does not parse, then
        ``ModelError(reason="unparseable")``. Raises ``ModelError`` when retries
        are exhausted or the failure cannot be retried, ``BudgetExceeded`` when
        the next request would pass the budget.
        """
        started = time.monotonic()
        try:
            request = self._request(config, messages, seed=seed, schema=schema, schema_name=schema_name, tools=tools,
                                    task=task)
            response, attempts, cost = self._call_with_retries(config, request, repair=False)
            message = answer_message(response, config.model)
            text = answer_text(message)
            tool_calls = answer_tool_calls(message)
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
                    text = answer_text(answer_message(response, config.model))
                    try:
                        parsed = parse_json_answer(text, schema)
                    except ValueError as again:
                        unparseable = ModelError(f"{config.model}: unparseable answer after a repair request: {again}",
                                                 reason="unparseable")
                        unparseable.requests = attempts  # paid for: the answer, the repair and their retries
                        raise unparseable from None
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
            model_reported=reported_model(getattr(response, "model", None), config.model, secrets),
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
        result = load_litellm().validate_environment(model=config.model, api_base=config.api_base)
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

    def _request(self, config: ModelConfig, messages: list[dict[str, Any]], *, seed: int | None,
                 schema: dict[str, Any] | None, schema_name: str, tools: list[dict[str, Any]] | None,
                 task: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._requests.build(config, messages, api_key=self._api_key(config), seed=seed, schema=schema,
                                    schema_name=schema_name, tools=tools, task=task)

    # -- the retry policy ----------------------------------------------------------

    def _call_with_retries(self, config: ModelConfig, request: dict[str, Any], *, repair: bool) -> tuple[Any, int, float]:
        """(response, attempts, cost) of one request, retried per the policy."""
        secrets = [str(request.get("api_key") or "")]
        attempts = 0

        def attempt() -> tuple[Any, float]:
            nonlocal attempts
            attempts += 1
            return self._attempt(config, request, repair=repair, attempt=attempts, secrets=secrets)

        # Most requests succeed at once: tenacity's machinery (a Retrying, its state and futures per
        # request) was a few percent of a run's CPU at 64 jobs, so it is built only for a failed first
        # attempt, which it is handed as its own first attempt: the retries are exactly tenacity's.
        try:
            response, cost = attempt()
            return response, attempts, cost
        except _Retry as failed:
            first: list[_Retry] = [failed]

        def again() -> tuple[Any, float]:
            if first:
                raise first.pop()
            return attempt()

        from tenacity import Retrying, retry_if_exception_type  # imported by the first retry: most runs need none

        retrying = Retrying(
            retry=retry_if_exception_type(_Retry),
            # A request reformatted for this server goes again at once, never stopped on; it is still an attempt.
            stop=lambda state: not _last(state).reformatted and state.attempt_number > self.max_retries,
            wait=self._wait,
            sleep=interrupt.sleep,  # a stop ends the wait at once; interrupt.check() stops the next attempt
            before_sleep=self._count_retry,
            reraise=True,
        )
        try:
            response, cost = retrying(again)
        except _Retry as last:
            raise _gave_up(config, last.failure, last.exc, attempts, secrets) from None
        return response, attempts, cost

    def _attempt(self, config: ModelConfig, request: dict[str, Any], *, repair: bool, attempt: int,
                 secrets: list[str]) -> tuple[Any, float]:
        """One request: (response, cost), or ``_Retry`` / ``ModelError`` for a failed one."""
        interrupt.check()  # after Ctrl-C no request starts, not even a retry
        litellm = load_litellm()  # imported before the slot: seconds of import are no call in flight
        # The slot waits (interruptibly) for the lane: a pause after a 429, the declared rpm/tpm, a free place.
        with self.pacer.slot(config.model, config.api_base, request_tokens(request)) as slot:
            reserved = self._budget.reserve(config.model, request)
            started = time.monotonic()
            try:
                response = litellm.completion(**request)
            except Exception as exc:
                seconds = time.monotonic() - started
                self._budget.settle(reserved, 0.0)
                status, wait = getattr(exc, "status_code", None), retry_after(exc)
                status = status if isinstance(status, int) and not isinstance(status, bool) else None
                # paced: the lane paused or slowed down, so the retry waits there, not in a backoff
                paced = slot.report(status, retry_after=None if wait is None else min(wait, self.retry_after_cap))
                if not is_model_failure(exc):
                    raise  # a bug in the request we built, not a failure of the model
                failure = classify(exc)
                self._record(config, attempt, repair, ok=False, reason=failure.reason, seconds=seconds, usage={}, cost=0.0)
                if self._requests.downgrade_schema(config, request, exc):
                    raise _Retry(failure, exc, reformatted=True) from None
                if failure.retryable:
                    raise _Retry(failure, exc, paced=paced) from None
                raise _gave_up(config, failure, exc, attempt, secrets) from None
            usage = self._usage(response)
            slot.report(200, tokens_used=usage["prompt_tokens"] + usage["completion_tokens"] or None)
        seconds = time.monotonic() - started
        cost = self._cost(response)
        self._budget.settle(reserved, cost)
        self._record(config, attempt, repair, ok=True, reason="", seconds=seconds, usage=usage, cost=cost)
        return response, cost

    def _wait(self, state: RetryCallState) -> float:
        last = _last(state)
        if last.reformatted or last.paced:
            return 0.0  # sent again at once, or after the lane's pause and at its lowered rate
        return self._backoff(state.attempt_number, last.failure.retry_after)

    def _count_retry(self, state: RetryCallState) -> None:
        if not _last(state).reformatted:
            with self._lock:
                self._stats.retries += 1

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        # Full jitter from the client's own RNG, so ``seed`` makes the waits reproducible.
        delay = self._rng.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))
        if retry_after is not None:
            # Never come back earlier than the provider asked, within reason.
            delay = min(max(delay, retry_after), self.retry_after_cap)
        return delay

    # -- usage and cost --------------------------------------------------------------

    @staticmethod
    def _usage(response: Any) -> dict[str, Any]:
        usage = getattr(response, "usage", None)
        return {
            "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        }

    @staticmethod
    def _cost(response: Any) -> float:
        # What a finished call cost, not an estimate (those live in multiverse.model._pricing):
        # the answer carries its real token counts, and litellm prices them by every rule it
        # knows (cached prompts, long-context tiers), which no guess made before the call can.
        # litellm already priced the response (completion_cost) while building
        # it; pricing it again costs ~0.3 ms of CPU a call, which matters at 32+ jobs.
        hidden = getattr(response, "_hidden_params", None) or {}
        if "response_cost" in hidden:
            return float(hidden["response_cost"] or 0.0)  # None: litellm has no price
        try:
            return float(load_litellm().completion_cost(completion_response=response) or 0.0)
        except Exception:  # no price for local and simulated models: they cost nothing
            return 0.0

    def _record(self, config: ModelConfig, attempt: int, repair: bool, *, ok: bool, reason: str, seconds: float,
                usage: Any, cost: float) -> None:
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


def _last(state: RetryCallState) -> _Retry:
    exc = state.outcome.exception() if state.outcome is not None else None
    assert isinstance(exc, _Retry)  # tenacity asks only about attempts it retries
    return exc


def _gave_up(config: ModelConfig, failure: Failure, exc: BaseException, attempts: int, secrets: list[str]) -> ModelError:
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    error = ModelError(f"{config.model}: {failure.reason}{tries}: {one_line(exc, secrets)}", reason=failure.reason,
                       retryable=failure.retryable)
    error.requests = attempts
    return error
