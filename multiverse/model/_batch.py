"""Sending requests through a provider's batch API (half price, answered within a window), through litellm.

:class:`BatchSender` takes requests exactly as the stages make them (a model
config, messages, seed, schema, tools) and sends them as OpenAI batches:
``litellm.create_file`` uploads one JSONL line per request (its ``custom_id``
is the request's store key, :func:`~multiverse.model._requestcache.request_key`),
``litellm.create_batch`` starts the batch, ``litellm.retrieve_batch`` polls
it every ``poll`` seconds (a stop ends the wait at once), and
``litellm.file_content`` reads its output and error files when it ends.

- **Recorded before polled.** The moment the provider accepts a batch, its id,
  provider, endpoint, model and request keys are kept in the store
  (``multiverse.store.batch_submitted``). A run that stops, or is killed, while
  the batch is in flight leaves that record, and the next run that needs any
  of those requests polls the batch instead of submitting them again.
- **Keyed like direct calls.** Each answer is kept as a ``request`` entry under
  its request key, in the record a direct call makes, so a direct run after a
  batch run is served every answer, and a batch run after a direct run submits
  only what is missing.
- **Read like direct answers.** A line's answer goes through the checks a
  direct answer does: the same message reader, the JSON schema (an answer that
  does not parse is not kept: it is sent directly, where the client makes its
  one repair request), the same redaction of every credential.
- **Failed lines are never labels.** A line the provider answered with an
  error, or left unanswered (an expired or failed batch), is counted in the
  report's ``failed`` with its reason and not kept: the run sends it directly.
  So is a request its files answer more than once (no answer is chosen), and
  every request of a file past its bound (``MAX_LINE_BYTES`` a request it
  carries, read as a stream and never held whole): neither is a label. A line
  that is not a batch line, or names a request never sent, answers nothing.
  A batch that cannot be polled is left in flight (``unsettled``): its requests
  are neither kept nor sent again. So is one whose status has not ended
  ``GRACE_SECONDS`` after its window: the poll gives up and says so.
- **Priced as batches.** A kept answer costs litellm's batch price for its real
  token counts (``batch_cost_calculator``: the price list's batch price, else
  half the direct price); the budget reserves half the direct estimate before
  a batch is submitted.

Only OpenAI's batch protocol is spoken (``openai/`` models, OpenAI itself or an
OpenAI-compatible ``api_base``); the spec refuses other providers in
``batch.roles``.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from multiverse.core import ModelConfig, credentials, interrupt, short_reason, terminal_safe
from multiverse.errors import ModelError
from multiverse.model._answers import (
    answer_message,
    answer_text,
    answer_tool_calls,
    parse_json_answer,
    reported_model,
    storable,
    storable_text,
)
from multiverse.model._client import Completion
from multiverse.model._failures import one_line
from multiverse.model._llm import LiteLLMClient
from multiverse.model._pricing import request_cost
from multiverse.model._providers import load_litellm
from multiverse.model._requestcache import STAGE, answer_record, endpoint
from multiverse.store import BatchRecord, Store, batch_ended, batch_submitted, batches_in_flight

__all__ = ["MAX_ID_CHARS", "BatchCall", "BatchReport", "BatchSender", "provider_id"]

#: the provider's largest batch (OpenAI: 50,000 requests and 200 MB a file; a little under, to be sure)
MAX_LINES, MAX_BYTES = 50_000, 190 * 1024 * 1024
#: a batch's states after which it changes no more, and those it passes through on its way there
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
#: the completion windows a spec may ask for, in seconds; a batch still running this long after its window is
#: given up on (left in flight, never paid again): the provider ends an overdue batch as expired well before
WINDOW_SECONDS, GRACE_SECONDS = {"24h": 24 * 3600.0}, 12 * 3600.0
#: one line of a batch's output or error file: an answer of a million tokens is about 4 MB. A file may hold
#: this much per request it carries and no more (it is read as a stream, so memory never holds more)
MAX_LINE_BYTES = 8 * 2**20
#: the token counts a line may report (a request's context is far smaller; a negative count is no count)
MAX_TOKENS = 10**9
#: looks in a row that fail before a batch is left in flight for a later run
POLL_FAILURES = 10
#: the longest batch or file id a provider may give (OpenAI's are about 30 characters)
MAX_ID_CHARS = 200
_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{MAX_ID_CHARS - 1}}}")
#: the keyword arguments of a litellm request that are transport, never the provider's request body
_NOT_BODY = frozenset({"timeout", "num_retries", "max_retries", "api_base", "api_key", "client", "sim_task"})


@dataclass(frozen=True)
class BatchCall:
    """One request to batch, as a stage made it: ``key`` is its request key."""

    key: str
    config: ModelConfig
    messages: list[dict[str, Any]]
    kwargs: Mapping[str, Any]  # seed, schema, schema_name, tools


@dataclass
class BatchReport:
    """What sending came to: batches submitted and resumed, answers kept, requests failed or left in flight."""

    submitted: int = 0  # batches this call submitted
    resumed: int = 0  # batches in flight that an earlier run submitted, polled here
    lines: int = 0  # requests this call submitted
    answered: int = 0  # answers kept
    cost: float = 0.0
    paid: dict[str, Completion] = field(default_factory=dict)  # request key -> the answer kept, with its usage and cost
    failed: dict[str, str] = field(default_factory=dict)  # request key -> why the batch did not answer it
    unsettled: dict[str, str] = field(default_factory=dict)  # request key -> its batch, still in flight

    def add(self, other: BatchReport) -> None:
        for name in ("submitted", "resumed", "lines", "answered", "cost"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.paid.update(other.paid)
        self.failed.update(other.failed)
        self.unsettled.update(other.unsettled)


@dataclass
class _InFlight:
    record: BatchRecord
    calls: dict[str, BatchCall]
    transport: dict[str, Any]
    reserved: float = 0.0
    failures: int = 0


class BatchSender:
    """Sends requests through batches and keeps their answers in ``store`` (see module doc).

    Args:
        client: the run's litellm client: its request builder, credentials, budget and counters.
        window: the completion window asked for.
        poll: seconds between two looks at the batches in flight.
    """

    def __init__(self, client: LiteLLMClient, store: Store, *, window: str = "24h", poll: float = 60.0,
                 max_lines: int = MAX_LINES, give_up_after: float | None = None):
        self.client, self.store, self.window, self.poll, self.max_lines = client, store, window, poll, max_lines
        #: seconds after its submission that a batch still running is left in flight
        self.give_up_after = WINDOW_SECONDS.get(window, 24 * 3600.0) + GRACE_SECONDS if give_up_after is None \
            else give_up_after

    def send(self, calls: Mapping[str, BatchCall]) -> BatchReport:
        """Submit (or resume) batches for ``calls`` and wait until every one has ended or cannot be polled."""
        report = BatchReport()
        flights: list[_InFlight] = []
        for group in _groups(calls):
            first = next(iter(group.values())).config
            transport = self._transport(first)
            left = dict(group)
            for record in batches_in_flight(self.store, left):
                # Submitted by an earlier run that stopped: polled, never paid for again.
                mine = {k: left.pop(k) for k in record["keys"] if k in left}
                if mine:
                    flights.append(_InFlight(record, mine, transport))
                    report.resumed += 1
            for chunk, lines, estimate in self._chunks(left):
                try:
                    flights.append(self._submit(first, chunk, lines, estimate, transport))
                except ModelError as exc:
                    # Not submitted (nor paid): these go directly; the batches already submitted are kept and polled.
                    report.failed.update(dict.fromkeys(chunk, str(exc)))
                    continue
                report.submitted += 1
                report.lines += len(chunk)
        while flights:
            for flight in list(flights):
                if self._look(flight, report):
                    flights.remove(flight)
            if flights:
                interrupt.sleep(self.poll)  # a stop ends the wait at once; the batches stay recorded
        return report

    # -- submitting ----------------------------------------------------------------

    def _transport(self, config: ModelConfig) -> dict[str, Any]:
        # The client's timeout holds for every batch request: a silent provider fails the look, never hangs it.
        kw: dict[str, Any] = {"custom_llm_provider": "openai", "max_retries": 0, "timeout": self.client.timeout}
        if config.api_base:
            kw["api_base"] = config.api_base
        key = self.client._api_key(config)  # the client's rule: a loopback server never gets a real key
        if key is not None:
            kw["api_key"] = key
        return kw

    def _body(self, call: BatchCall) -> dict[str, Any]:
        kw = call.kwargs
        request = self.client._requests.build(call.config, call.messages, api_key=None, seed=kw.get("seed"),
                                              schema=kw.get("schema"), schema_name=kw.get("schema_name", "answer"),
                                              tools=kw.get("tools"), task=kw.get("task"))
        body = {k: v for k, v in request.items() if k not in _NOT_BODY}
        body["model"] = call.config.model.partition("/")[2]  # the provider's own name, as litellm sends it
        return body

    def _chunks(self, calls: dict[str, BatchCall]) -> Iterator[tuple[dict[str, BatchCall], list[str], float]]:
        """The calls as batch files within the provider's limits: (calls, JSONL lines, half the direct estimate)."""
        chunk: dict[str, BatchCall] = {}
        lines: list[str] = []
        size, estimate = 0, 0.0
        for key, call in calls.items():
            body = self._body(call)
            line = json.dumps({"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body},
                              ensure_ascii=False, default=str)
            if chunk and (len(chunk) >= self.max_lines or size + len(line.encode("utf-8")) + 1 > MAX_BYTES):
                yield chunk, lines, estimate
                chunk, lines, size, estimate = {}, [], 0, 0.0
            chunk[key] = call
            lines.append(line)
            size += len(line.encode("utf-8")) + 1
            estimate += request_cost({**body, "model": call.config.model}) / 2
        if chunk:
            yield chunk, lines, estimate

    def _submit(self, config: ModelConfig, calls: dict[str, BatchCall], lines: list[str], estimate: float,
                transport: dict[str, Any]) -> _InFlight:
        litellm = load_litellm()
        reserved = self.client._budget.reserve_usd(config.model, estimate)
        interrupt.check()  # after a stop nothing is submitted
        data = ("\n".join(lines) + "\n").encode("utf-8")
        secrets = [str(transport.get("api_key") or "")]
        try:
            uploaded = litellm.create_file(file=("batch.jsonl", data), purpose="batch", **transport)
            batch = litellm.create_batch(completion_window=self.window, endpoint="/v1/chat/completions",
                                         input_file_id=provider_id(uploaded.id, "file"), **transport)
            record = batch_submitted(self.store, batch_id=provider_id(batch.id, "batch"), provider="openai",
                                     endpoint=endpoint(config), model=config.model, keys=calls, window=self.window)
        except Exception as exc:
            self.client._budget.settle(reserved, 0.0)
            raise ModelError(f"{config.model}: batch not submitted: {one_line(exc, secrets)}", reason="batch_failed") from None
        return _InFlight(record, dict(calls), transport, reserved)

    # -- polling and reading -----------------------------------------------------------

    def _look(self, flight: _InFlight, report: BatchReport) -> bool:
        """One look at a batch; True once it has ended and been read (or cannot be polled any more)."""
        litellm = load_litellm()
        batch_id = _text(flight.record["batch_id"])[:60]  # as shown: a record an older version kept may hold anything
        try:
            batch = litellm.retrieve_batch(batch_id=provider_id(flight.record["batch_id"], "batch"), **flight.transport)
            status = str(getattr(batch, "status", "") or "")
            if status in RUNNING:
                flight.failures = 0
                waited = time.time() - float(flight.record.get("submitted_at") or 0.0)
                if waited < self.give_up_after:
                    return False
                reason = (f"batch {batch_id} still {status} {waited / 3600:,.1f} h after it was submitted (expected "
                          f"an end within its {self.window} window and {GRACE_SECONDS / 3600:.0f} h more); "
                          "no longer polled")
                return self._leave(flight, report, reason)
            if status not in ENDED:
                raise ValueError(f"unknown batch status {_text(status[:60])!r}")
            answered, failed, cost = self._read(batch, flight)
        except Exception as exc:  # the provider, or its files, could not be read: looked at again, a few times
            flight.failures += 1
            if flight.failures < POLL_FAILURES:
                return False
            secrets = [str(flight.transport.get("api_key") or "")]
            return self._leave(flight, report, f"batch {batch_id} still in flight, could not be polled: "
                                               f"{one_line(exc, secrets)}")
        for key in flight.calls.keys() - answered.keys() - failed.keys():
            failed[key] = f"batch {status}: no answer{_why(batch)}"
        for key, completion in answered.items():
            self.store.put(STAGE, key, answer_record(flight.calls[key].config, completion), durable=False)
        batch_ended(self.store, flight.record["batch_id"], state=status, answered=len(answered), failed=failed)
        self.client._budget.settle(flight.reserved, cost)
        report.answered += len(answered)
        report.paid.update(answered)
        report.cost += cost
        report.failed.update(failed)
        return True

    def _leave(self, flight: _InFlight, report: BatchReport, reason: str) -> bool:
        """Stop polling ``flight``: its requests are neither kept nor sent again (a later run polls it again)."""
        report.unsettled.update(dict.fromkeys(flight.calls, reason))
        self.client._budget.settle(flight.reserved, 0.0)
        return True

    def _read(self, batch: Any, flight: _InFlight) -> tuple[dict[str, Completion], dict[str, str], float]:
        answered: dict[str, Completion] = {}
        failed: dict[str, str] = {}
        cost = 0.0
        seconds = max(time.time() - float(flight.record.get("submitted_at") or time.time()), 0.0)
        lines: dict[str, dict[str, Any]] = {}
        times: Counter[str] = Counter()
        for kind in ("error", "output"):
            cut, read = self._file(getattr(batch, f"{kind}_file_id", None), flight)
            if cut:  # past what its requests can fill: a broken file, nothing of it is an answer
                failed.update(dict.fromkeys(flight.calls, cut))
                return {}, failed, 0.0
            for key, (count, line) in read.items():
                times[key] += count
                lines[key] = {**line, "_kind": kind}
        for key, line in lines.items():
            if times[key] > 1:  # two answers to one request: neither is chosen, the request goes directly
                failed[key] = f"batch answered this request {times[key]} times; none kept"
                continue
            response = line.get("response")
            if line["_kind"] == "error" or not isinstance(response, dict):
                error = _object(line.get("error"))
                text = f"batch error: {_text(error.get('code'))} {_text(error.get('message'))}".strip()
                failed[key] = short_reason(storable_text(text), 500)
                continue
            if response.get("status_code") != 200 or not isinstance(response.get("body"), dict):
                error = _object(_object(response.get("body")).get("error"))
                message = _text(error.get("message") or line.get("error") or "")
                failed[key] = short_reason(storable_text(f"batch line {_text(response.get('status_code'))}: {message}"),
                                           500)
                continue
            try:
                completion = self._completion(flight.calls[key], response["body"], seconds)
            except (ModelError, ValueError, TypeError) as problem:
                failed[key] = short_reason(storable_text(f"batch answer unusable: {problem}"), 500)
                continue
            answered[key] = completion
            cost += completion.cost
        return answered, failed, cost

    def _file(self, file_id: Any, flight: _InFlight) -> tuple[str, dict[str, tuple[int, dict[str, Any]]]]:
        """A batch file's lines that answer a request of ``flight``, as key -> (the lines naming it, the first);
        or why the file was cut. A request named a million times holds one line in memory, not a million.

        The file is read as a stream, within ``MAX_LINE_BYTES`` per request it may answer: a line
        longer than that is skipped unread (its request is unanswered), and a file longer than that is
        cut, and none of it kept. A line that is not a JSON object naming a request sent answers nothing.
        """
        if not file_id:
            return "", {}
        try:
            file_id = provider_id(file_id, "file")
        except ValueError as problem:  # never asked for: its requests fail and go directly, they are not polled again
            return f"batch {problem}; nothing of it kept", {}
        limit = MAX_LINE_BYTES * len(flight.calls)
        content = load_litellm().file_content(file_id=file_id, stream=True, chunk_size=2**20,
                                              **flight.transport)
        found: dict[str, tuple[int, dict[str, Any]]] = {}
        total, buffer, skipping = 0, b"", False
        stream = content.stream_iterator
        try:
            for chunk in stream:
                total += len(chunk)
                if total > limit:
                    return (f"batch file {file_id} is past {limit / 2**20:,.0f} MB "
                            f"({MAX_LINE_BYTES // 2**20} MB a request); not read further, nothing of it kept"), {}
                buffer += chunk
                *whole, buffer = buffer.split(b"\n")
                for raw in whole:
                    if not skipping:
                        _count(found, _answer(raw, flight))
                    skipping = False
                if len(buffer) > MAX_LINE_BYTES:  # a line too long to be an answer: skipped to its end
                    buffer, skipping = b"", True
            if not skipping:
                _count(found, _answer(buffer, flight))
        finally:
            close = getattr(stream, "close", None)
            if callable(close):
                close()
        return "", found

    def _completion(self, call: BatchCall, body: dict[str, Any], seconds: float) -> Completion:
        litellm = load_litellm()
        response = litellm.ModelResponse(**body)
        config = call.config
        message = answer_message(response, config.model)
        text = answer_text(message)
        tool_calls = answer_tool_calls(message)
        schema = call.kwargs.get("schema")
        parsed = parse_json_answer(text, schema) if schema is not None and not tool_calls else None
        reported = _object(body.get("usage"))
        usage = {name: _tokens(reported.get(name)) for name in ("prompt_tokens", "completion_tokens")}
        try:
            from litellm.cost_calculator import batch_cost_calculator  # litellm is loaded: this costs nothing

            prompt_cost, completion_cost = batch_cost_calculator(
                usage=litellm.Usage(**usage, total_tokens=sum(usage.values())), model=config.model)
            cost = float(prompt_cost) + float(completion_cost)
        except Exception:  # an unpriced model costs nothing, as a direct call of it does
            cost = 0.0
        self.client._record(config, 1, False, ok=True, reason="", seconds=seconds, usage=usage, cost=cost)
        secrets = credentials.secret_values()
        return Completion(
            text=storable_text(credentials.redact(text, secrets)),
            parsed=storable(credentials.redact_all(parsed, secrets)),
            tool_calls=storable(credentials.redact_all(tool_calls, secrets)),
            model_reported=reported_model(body.get("model"), config.model, secrets),
            usage=usage, cost=cost, seconds=seconds, attempts=1,
        )


def provider_id(value: Any, what: str) -> str:
    """A batch's or file's id as the provider gave it, if it is one: ``MAX_ID_CHARS`` letters, digits and ``._:-``.

    The id is stored (the batch's record), shown in reasons and put in the next request's path: a
    megabyte, a control character or a ``/`` is none of those, so it is refused (ValueError), shown escaped.
    """
    if isinstance(value, str) and _ID.fullmatch(value):
        return value
    shown = _text(value)[:60] if isinstance(value, str) else type(value).__name__
    raise ValueError(f"the provider's {what} id {shown!r} ({len(value) if isinstance(value, str) else 0:,} characters) "
                     f"is not an id; expected up to {MAX_ID_CHARS} letters, digits and ._:-")


def _count(found: dict[str, tuple[int, dict[str, Any]]], answers: list[tuple[str, dict[str, Any]]]) -> None:
    for key, line in answers:
        count, first = found.get(key, (0, line))
        found[key] = (count + 1, first)


def _answer(raw: bytes, flight: _InFlight) -> list[tuple[str, dict[str, Any]]]:
    """The line ``raw`` as (its request's key, the line) if it is a JSON object naming a request sent, else nothing."""
    if not raw.strip():
        return []
    try:
        line = json.loads(raw)
    except (ValueError, RecursionError):
        return []  # a line that is not JSON answers nothing: its request counts as unanswered
    key = line.get("custom_id") if isinstance(line, dict) else None
    return [(key, line)] if isinstance(key, str) and key in flight.calls else []


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a provider's field may be anything its file holds."""
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    """A field of a provider's line, as text of a bounded length (it may be anything the file holds)."""
    if isinstance(value, (str, int, float)) or value is None:
        # shown as escapes: a control character is no part of a reason, and makes XML written from it invalid
        return short_reason(terminal_safe(("" if value is None else str(value))[:2000]), 300)
    return f"a JSON {'object' if isinstance(value, dict) else type(value).__name__}"  # never walked: it may nest deep


def _tokens(value: Any) -> int:
    """A token count a line reports: a whole number from 0 to ``MAX_TOKENS`` (absent: 0), else not an answer."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise ValueError(f"usage: expected a token count from 0 to {MAX_TOKENS:,}, got {_text(value)[:40]}")
    return value


def _why(batch: Any) -> str:
    """The provider's own reason a batch failed as a whole (a file it refused, say), or nothing."""
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    messages = [str(getattr(e, "message", None) or (e.get("message") if isinstance(e, dict) else "") or "") for e in errors]
    text = "; ".join(m for m in messages if m)
    return f" ({_text(text)})" if text else ""


def _groups(calls: Mapping[str, BatchCall]) -> list[dict[str, BatchCall]]:
    """The calls one batch may carry together: one model at one endpoint with one key."""
    groups: dict[tuple[Any, ...], dict[str, BatchCall]] = {}
    for key, call in calls.items():
        c = call.config
        groups.setdefault((c.model, c.api_base, c.api_key_env), {})[key] = call
    return list(groups.values())
