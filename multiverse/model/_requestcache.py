"""The request cache: every model call keyed by its full input, and sent at most once.

Work units (``multiverse.work._units``) share what whole units share, but two
different units can still ask a model the very same thing: the simulated
user's opening turn of a case does not depend on the system under audit, so
every system of a grid would send it again. :class:`RequestCache` wraps any
:class:`~multiverse.model._client.ModelClient` and keys each call by
:func:`request_key`, a digest of everything the provider is sent that can
change its answer:

- the model, and where it is served: ``api_base`` without ``user:password@``
  and without its query; a ``sim/`` model by its world's content, wherever
  the file lives;
- the model's params (but not the transport's: ``timeout``, retries), minus
  any credential-named field;
- the messages, the seed, the tools, and the answer schema with its name.

The seed is what keeps intentional repeats apart: replicates of a rollout and
the samples of a judge are sent with different seeds (``multiverse.work._units``
derives them from the replicate and the sample), so they never share a key,
even with a provider that ignores seeds.

An answer is kept in the store as a ``request`` entry (``<root>/request/``)
the moment it arrives, so a later unit, a later run, or a concurrent run on
the same store is served that answer instead of sending the request again:

- **served from the store** — a stored answer comes back as a
  :class:`~multiverse.model._client.Completion` with ``attempts=0``, no usage and
  cost 0: it is a store hit, not a paid call; the stage reads it exactly as
  it read the live answer (a judge's answer is validated again, so a stored
  answer is never a label by itself);
- **failures are never kept** — a call that raised is not stored, and the
  next unit that needs it sends it again;
- **single flight** — identical calls in flight at once in this process are
  sent once; the others wait for that answer (or that failure);
- **concurrent runs** — a run claims a request in the store before sending
  it (``multiverse.store._claims``); another run that finds the claim waits for the
  entry. Entries are write-once: should two runs send the same request
  anyway (a stale claim taken over), every unit is served the one stored.

No credential is written or hashed: the store scrubs every entry, and the
model's side of the key (endpoint, params) is scrubbed the same way before it
is hashed.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from multiverse.core import OK, digest, interrupt, is_simulated
from multiverse.errors import ModelError
from multiverse.model._chat_request import simulated
from multiverse.model._client import Completion, ModelClient
from multiverse.store import Held, RequestRecord, Store, scrub

if TYPE_CHECKING:
    from multiverse.core import ModelConfig

__all__ = ["STAGE", "RequestCache", "answer_record", "endpoint", "request_key"]

#: the store stage the answers are kept in
STAGE = "request"
#: params that shape the transport, never the answer
_TRANSPORT_PARAMS = frozenset({"timeout", "num_retries", "max_retries", "stream_timeout"})
_POLL = 0.05


def endpoint(config: ModelConfig) -> str | None:
    """Where ``config``'s model answers from, without credentials: a ``sim/`` world by its content."""
    if is_simulated(config.model):
        from multiverse.errors import SpecError
        from multiverse.sim import load_world

        try:
            return "sim-world:" + load_world(config.api_base).digest
        except SpecError:
            return config.api_base  # the call itself will fail as a bad request: never stored
    if not config.api_base:
        return None
    try:
        parts = urlsplit(config.api_base)
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    except ValueError:  # not a URL: the call itself will say so
        return config.api_base
    # user:password@ and a query (?key=...) may carry a credential; neither changes an answer.
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def request_key(config: ModelConfig, messages: list[dict[str, Any]], *, seed: int | None = None, schema: dict[str, Any] | None = None,
                schema_name: str = "answer", tools: list[dict[str, Any]] | None = None, task: Mapping[str, Any] | None = None) -> str:
    """The key of one model call: a digest of everything sent that can change the answer (see module doc).

    ``task`` reaches a simulated model only (``multiverse.model._chat_request``), so only there is it in the key."""
    params = {k: v for k, v in dict(config.params).items() if k not in _TRANSPORT_PARAMS}
    # The model's side scrubbed like a stored record: no credential-named field (a header, say) or
    # credential value is hashed. The conversation is hashed as sent: the client has already redacted
    # every answer in it, and scrubbing it again would cost more than the rest of the call's overhead.
    where = scrub({"model": config.model, "endpoint": endpoint(config), "params": params})
    sent = {"task": dict(task)} if task is not None and simulated(config) else {}
    return digest({**where, "messages": messages, "seed": seed, "tools": tools or None,
                   "answer_schema": {"name": schema_name, "schema": schema} if schema is not None else None, **sent}, 32)


class _Flight:
    """One call in flight in this process, which identical calls wait for."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.completion: Completion | None = None
        self.error: BaseException | None = None


class RequestCache:
    """A model client that sends each distinct request once and serves repeats from ``store``. Thread-safe.

    Everything but ``complete`` is the wrapped client's (``stats``,
    ``check_credentials``...). ``sent``, ``stored_answers`` and ``shared`` count
    this instance's calls: sent to the wrapped client, served from the store,
    served from an identical call in flight.
    """

    def __init__(self, client: ModelClient, store: Store):
        self.client = client
        self.store = store
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._held = Held(store)  # the request claims this instance holds
        self._prepaid: dict[str, Completion] = {}
        self.sent = 0
        self.stored_answers = 0
        self.shared = 0

    def __getattr__(self, name: str) -> Any:
        if name == "client":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.client, name)

    def __enter__(self) -> RequestCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_all()

    def release_all(self) -> None:
        """Release every claim still held (a run leaving on a signal: its threads may never get to it)."""
        self._held.release_all()

    def prepaid(self, completions: Mapping[str, Completion]) -> None:
        """Answers this run paid for outside ``complete`` (a provider batch), by request key: the first unit served
        each one counts its usage and cost, as if it had sent the request, so the run's books carry what it paid."""
        with self._lock:
            self._prepaid.update(completions)

    @property
    def reused(self) -> int:
        """Calls answered without a request: from the store or from an identical call in flight."""
        return self.stored_answers + self.shared

    def complete(self, config: ModelConfig, messages: list[dict[str, Any]], *, seed: int | None = None,
                 schema: dict[str, Any] | None = None, schema_name: str = "answer", tools: list[dict[str, Any]] | None = None,
                 task: Mapping[str, Any] | None = None) -> Completion:
        kwargs: dict[str, Any] = {"seed": seed, "schema": schema, "schema_name": schema_name, "tools": tools}
        if task is not None:  # only then: a client that knows no task still takes every other call
            kwargs["task"] = task
        key = request_key(config, messages, **kwargs)
        with self._lock:
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            return self._follow(flight)
        try:
            flight.completion = self._lead(key, config, messages, kwargs)
            return flight.completion
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()

    # -- one call ----------------------------------------------------------------

    def _follow(self, flight: _Flight) -> Completion:
        """An identical call is in flight in this process: its answer, or its failure, is this one's."""
        while not flight.done.wait(_POLL):
            interrupt.check()
        if flight.error is not None:
            raise _not_sent(flight.error)
        assert flight.completion is not None
        with self._lock:
            self.shared += 1
        return _served(flight.completion)

    def _lead(self, key: str, config: ModelConfig, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> Completion:
        stored = self._stored(key)
        if stored is not None:
            return stored
        while not self._claim(key):
            # Another run is sending this very request: wait for its answer rather than pay twice.
            while self.store.claimed(STAGE, key) and not self.store.has(STAGE, key):
                interrupt.sleep(_POLL)
            stored = self._stored(key)
            if stored is not None:
                return stored
        try:
            stored = self._stored(key)  # stored between our look-up and our claim
            if stored is not None:
                return stored
            with self._lock:
                self.sent += 1
            completion = self.client.complete(config, messages, **kwargs)
            # Not fsynced: an answer lost in a power cut is only asked again.
            if not self.store.put(STAGE, key, answer_record(config, completion), durable=False):
                # Another run stored this request first: every unit is served the one stored answer
                # (this call was still sent and paid for).
                kept = self.store.get(STAGE, key)
                if kept is not None:
                    completion = _answer(kept, paid=completion)
            return completion
        finally:
            self._held.release(STAGE, key)

    def _claim(self, key: str) -> bool:
        taken = self._held.take(STAGE, key)
        if taken is None:
            interrupt.check()  # after a stop no request is claimed, let alone sent
        return bool(taken)

    def _stored(self, key: str) -> Completion | None:
        record = self.store.get(STAGE, key)
        if record is None or record.get("status") != OK:
            return None
        with self._lock:
            self.stored_answers += 1
            paid = self._prepaid.pop(key, None)
        return _answer(record, paid=paid)


def answer_record(config: ModelConfig, completion: Completion) -> RequestRecord:
    return {
        "status": OK,
        "reason": "",
        "answer": {"text": completion.text, "parsed": completion.parsed, "tool_calls": list(completion.tool_calls),
                   "model_reported": completion.model_reported},
        # What the one request that made this answer cost; a served answer costs nothing.
        "provenance": {"model_requested": config.model, "model_reported": [completion.model_reported],
                       "usage": dict(completion.usage), "cost": completion.cost, "calls": completion.attempts,
                       "seconds": round(completion.seconds, 3)},
    }


def _answer(record: Mapping[str, Any], *, paid: Completion | None = None) -> Completion:
    """The stored answer as a completion; ``paid`` (a call made anyway) keeps its own usage and cost."""
    answer = record["answer"]
    return Completion(
        text=answer["text"], parsed=copy.deepcopy(answer.get("parsed")),
        tool_calls=copy.deepcopy(answer.get("tool_calls") or []), model_reported=answer["model_reported"],
        usage=dict(paid.usage) if paid else {"prompt_tokens": 0, "completion_tokens": 0},
        cost=paid.cost if paid else 0.0, seconds=paid.seconds if paid else 0.0, attempts=paid.attempts if paid else 0,
    )


def _served(completion: Completion) -> Completion:
    """Another call's answer, served to this one: nothing was sent for it."""
    return Completion(text=completion.text, parsed=copy.deepcopy(completion.parsed),
                      tool_calls=copy.deepcopy(completion.tool_calls), model_reported=completion.model_reported,
                      usage={"prompt_tokens": 0, "completion_tokens": 0}, cost=0.0, seconds=0.0, attempts=0)


def _not_sent(error: BaseException) -> BaseException:
    """The failure of an identical call in flight, for this call (which sent nothing)."""
    try:
        mine = copy.copy(error)
    except Exception:  # an exception whose constructor copy cannot call: share the instance
        return error
    if isinstance(mine, ModelError):
        # A copy may share the original's attributes (tblib, which Dask imports, registers a
        # reducer that does): this call's count must not overwrite the call that was sent.
        mine.__dict__ = dict(error.__dict__)
        mine.requests = 0
    return mine

