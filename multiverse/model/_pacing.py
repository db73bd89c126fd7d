"""Pacing model calls per provider: declared rate limits are never exceeded,
unknown ones are found from the provider's answers.

A *lane* holds the calls that share a provider's limits. A model string whose
prefix is declared in ``rate_limits`` (the longest matching prefix wins) runs
in that prefix's lane, under its ``rpm``, ``tpm`` and ``max_concurrency``. Any
other model runs in a lane of its provider (litellm's ``provider/`` prefix)
and ``api_base`` host, whose limits are learned (AIMD, as TCP does):

- a 429 or 503 pauses the lane until its Retry-After (at most :data:`MAX_PAUSE`);
- when a good share (:data:`LIMITED`) of the last second's answers are 429/503,
  the provider is holding us back: the lane's concurrency is cut to
  :data:`DECREASE` of what was in flight, once per round (answers to requests
  sent before a cut do not cut again), and, when they are 429s, its request
  rate to :data:`DECREASE` of what got through that second while the lane was
  not paused, at most once a second. Isolated 429/503s (a flaky server) are answered by the pause alone:
  cut on each of them, the cuts would compound far below what the server takes;
- clean answers raise them again by a constant step (concurrency: one per
  round trip; rate: :data:`STEP` of the rate at the last cut, per second), but
  only while that limit is what holds calls back. A lane with no limit known
  starts at ``jobs`` calls in flight, no rate limit: no slow start, which would
  cost a provider with seconds of latency several round trips of a run (a
  strict provider answers the first burst 429, and is cut from there).

Declared limits are ceilings: a declared lane adapts below them the same way
when the provider disagrees, and never above them.

Guarantees at the client, for a declared lane: at most ``max_concurrency``
calls in flight; call starts at least ``60 / rpm`` seconds apart (providers
enforce a per-minute limit over shorter windows too), so no window of any
length holds more than its share of ``rpm``; and the estimated tokens of the
calls started in any 60 seconds, corrected by the tokens each answer reports,
at most ``tpm`` (a single call estimated above ``tpm`` starts alone, when the
minute is clear, since it could never start otherwise).

Why not aiolimiter: our executor runs each call in a thread, and aiolimiter is
an asyncio leaky bucket that lets ``max_rate`` calls through at once and then
``max_rate`` per period (up to twice ``rpm`` in one minute); waiting on it from
a thread costs a hop onto an event loop per call, and it has no concurrency
cap and no way to retune a rate on a 429. A reservation (GCRA) under one
``threading.Condition`` per lane is a few lines, blocks the calling thread
directly, and sleeps through :func:`multiverse.core._interrupt.sleep`, which wakes
the moment a stop is asked for.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self, cast
from urllib.parse import urlsplit

from multiverse.core import interrupt
from multiverse.errors import InputError
from multiverse.model._pricing import DEFAULT_COMPLETION_TOKENS

__all__ = ["DECREASE", "LIMITED", "MAX_PAUSE", "STEP", "Clock", "Limit", "Pacer", "Slot",
           "WallEstimate", "estimate_wall_seconds", "lane_of", "request_tokens"]

PERIOD = 60.0  # rpm and tpm are per minute
#: multiplicative decrease on a 429/503
DECREASE = 0.7
#: additive increase of the rate per second, as a share of the rate at the last cut
STEP = 0.1
_MIN_RATE = 1 / PERIOD  # a learned rate never drops below one call a minute
_WINDOW = 1.0  # seconds over which the clean answers' rate is measured
#: the share of a second's answers that are 429/503 (of at least _EVIDENCE answers) that shows a provider limiting us
LIMITED = 0.2
_EVIDENCE = 5
_POLL = 0.1  # how often a thread waiting for a free slot looks at the stop flag
#: the longest Retry-After honoured, in seconds
MAX_PAUSE = 600.0
_CONGESTION = frozenset({429, 503})


class Clock:
    """The time a pacer reads and waits on: the machine's. A test passes its own (same three
    methods) to run the pacer on a clock it advances, so what it asserts of the pacing holds
    whatever the machine's speed."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        interrupt.sleep(seconds)  # looked up at each call: wakes on a stop

    def condition(self) -> threading.Condition:
        return threading.Condition()


@dataclass(frozen=True)
class Limit:
    """A provider's declared limits; ``None`` where not declared."""

    rpm: float | None = None
    tpm: float | None = None
    max_concurrency: int | None = None

    @classmethod
    def of(cls, value: Any, prefix: str) -> Limit:
        """A :class:`Limit` from anything with ``rpm``/``tpm``/``max_concurrency``
        attributes or keys (the spec's ``RateLimit``, a dict)."""
        fields: dict[str, Any] = {}
        for name in ("rpm", "tpm", "max_concurrency"):
            raw = value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
            if raw is None:
                fields[name] = None
                continue
            if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not raw > 0 or math.isinf(raw):
                raise InputError(f"limits[{prefix!r}].{name}: expected a positive number, got {raw!r}", param="limits")
            if name == "max_concurrency" and raw != int(raw):
                raise InputError(f"limits[{prefix!r}].max_concurrency: expected a whole number, got {raw!r}",
                                 param="limits")
            fields[name] = int(raw) if name == "max_concurrency" else float(raw)
        return cls(**fields)


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else model


def lane_of(model: str, api_base: str | None, prefixes: Iterable[str], provider: Callable[[str], str] = _provider) -> str:
    """The lane a call runs in: the longest declared prefix of ``model``, else
    ``provider(model)`` at ``api_base``'s host (``"openai@127.0.0.1:8080"``)."""
    declared = max((p for p in prefixes if model.startswith(p)), key=len, default=None)
    if declared is not None:
        return declared
    host = urlsplit(api_base).netloc.rsplit("@", 1)[-1] if api_base else ""  # never a user:password@
    name = provider(model) or model
    return f"{name}@{host}" if host else name


def request_tokens(request: Mapping[str, Any]) -> int:
    """Tokens a chat request (litellm's keyword arguments) may use, for its slot: about
    four characters a prompt token, plus the completion's cap (or the budget's default, :data:`multiverse.model._pricing.DEFAULT_COMPLETION_TOKENS`).
    Answers report the real count (:meth:`Slot.report`), which corrects the lane's minute."""
    chars = sum(len(str(m.get("content") or "")) for m in request.get("messages") or ())
    if request.get("tools"):
        chars += len(str(request["tools"]))
    cap = request.get("max_completion_tokens") or request.get("max_tokens")
    completion = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else DEFAULT_COMPLETION_TOKENS
    return math.ceil(chars / 4) + completion


class Slot:
    """One call's place in its lane. Use as a context manager; call :meth:`report`
    with the answer's HTTP status before leaving the block."""

    __slots__ = ("_entry", "_held", "_lane", "_reported", "_tokens", "full", "lane", "started", "waited")

    def __init__(self, lane: _Lane, tokens: int):
        self._lane, self._tokens = lane, max(0, int(tokens))
        self._entry: list[Any] | None = None
        self._reported = self._held = False
        self.lane = lane.name
        self.started = self.waited = 0.0
        self.full = False

    def __enter__(self) -> Self:
        self._lane.acquire(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._lane.release(self)

    def report(self, status: int | None, *, retry_after: float | None = None, tokens_used: int | None = None) -> bool:
        """How the call went: ``status`` the HTTP status (``None``: no answer, as when
        the connection failed), ``retry_after`` in seconds, ``tokens_used`` the
        prompt + completion tokens the answer reported.

        Returns True when the answer paused or slowed the lane (a 429/503 with a
        Retry-After, or one of many): then retry through a new slot without a
        backoff sleep of your own, the slot waits out the pause and the lowered
        rate. An isolated 429/503 without Retry-After returns False: back off as
        for any other failure."""
        if self._reported:
            return False
        self._reported = True
        return self._lane.report(self, status, retry_after, tokens_used)


class _Lane:
    def __init__(self, name: str, limit: Limit, jobs: int, clock: Clock):
        self.name, self.limit, self.clock = name, limit, clock
        self.cond = clock.condition()
        self.cap = limit.max_concurrency or jobs
        self.window = float(self.cap)
        self.ceiling = limit.rpm / PERIOD if limit.rpm else math.inf  # requests per second
        self.rate = self.ceiling
        self.step = STEP * self.ceiling if limit.rpm else 0.0
        self.token_rate = limit.tpm / PERIOD if limit.tpm else None
        self.in_flight = 0
        self.next_start = self.next_token = 0.0  # reservations of the threads waiting: a hint, voided by a cut
        self.paid_until = 0.0  # GCRA over the calls started: no start before their tokens are paid for
        self.last_start = -math.inf
        self.tokens: deque[list[Any]] = deque()  # [start, tokens] of the last PERIOD seconds
        self.token_sum = 0
        self.paused_until = self.paused_from = 0.0
        self.epoch = 0  # bumped by each pause and cut: reservations made before are made again
        self.cut_at = self.rate_cut_at = -math.inf
        self.measured_over = _WINDOW  # seconds the rate in force was measured over
        self.held_at = -math.inf  # the last time the rate made a call wait
        self.first_start = math.inf  # the lane's first call: its rate is measured from there
        self.clean: deque[float] = deque()  # times of clean answers in the last _WINDOW
        self.congested: deque[float] = deque()  # times of 429/503 answers in the last _WINDOW
        self.too_many: deque[float] = deque()  # times of 429 answers in the last _WINDOW
        self.congestion = 0

    # -- waiting for a start ---------------------------------------------------------

    def acquire(self, slot: Slot) -> None:
        interrupt.check(f"before waiting for a {self.name} slot")
        asked = self.clock.monotonic()
        with self.cond:
            while self.in_flight >= max(1, int(self.window)):
                self.cond.wait(_POLL)
                interrupt.check(f"while waiting for a {self.name} slot")
            self.in_flight += 1
            slot.full = self.in_flight >= int(self.window)
        try:
            self._start(slot)
        except BaseException:
            self._free()
            raise
        slot._held = True
        slot.waited = slot.started - asked

    def _start(self, slot: Slot) -> None:
        tokens = slot._tokens
        reserved = None  # the epoch of the time this thread reserved, while it holds one
        while True:
            with self.cond:
                now = self.clock.monotonic()
                # Spacing, the pause and the minute's tokens bind every start. Other threads'
                # reservations bind only a thread without one of its own: one that woke a little
                # before its predecessor's late start allows waits the difference, and keeps its
                # place instead of queueing behind all the others (a lost start each time).
                queued = reserved != self.epoch  # a pause or a cut voids every reservation
                at = max(now, self.paused_until, self.last_start + 1 / self.rate, self.next_start if queued else 0.0)
                if self.token_rate is not None:
                    at = max(at, self.paid_until, self._token_room(now, tokens), self.next_token if queued else 0.0)
                if at <= now:
                    self._begin(slot, now, tokens)
                    return
                if self.rate < math.inf and max(self.last_start + 1 / self.rate, self.next_start) > now:
                    self.held_at = now  # the rate holds calls back: clean answers may raise it
                if queued:  # reserve the time, so the threads waiting here go one after another, not all at once
                    reserved = self.epoch
                    self.next_start = at + 1 / self.rate
                    if self.token_rate is not None:
                        self.next_token = at + tokens / self.token_rate
            self.clock.sleep(at - now)

    def _token_room(self, now: float, tokens: int) -> float:
        """When the last PERIOD's tokens leave room for ``tokens`` more (``now`` if they do)."""
        while self.tokens and self.tokens[0][0] <= now - PERIOD:
            self.token_sum -= self.tokens.popleft()[1]
        limit = self.limit.tpm or math.inf
        excess = self.token_sum + tokens - limit
        if excess <= 0 or not self.tokens:
            return now
        for start, used in self.tokens:
            excess -= used
            if excess <= 0:
                return cast("float", start + PERIOD)
        return cast("float", self.tokens[-1][0] + PERIOD)

    def _begin(self, slot: Slot, now: float, tokens: int) -> None:
        self.last_start = slot.started = now
        self.next_start = max(self.next_start, now + 1 / self.rate) if self.rate < math.inf else now
        if self.token_rate is not None:
            slot._entry = [now, tokens]
            self.tokens.append(slot._entry)
            self.token_sum += tokens
            self.paid_until = max(self.paid_until, now) + tokens / self.token_rate
        self.first_start = min(self.first_start, now)

    # -- answers -----------------------------------------------------------------------

    def release(self, slot: Slot) -> None:
        if slot._held:
            slot._held = False
            self._free()

    def _free(self) -> None:
        with self.cond:
            self.in_flight -= 1
            self.cond.notify()

    def report(self, slot: Slot, status: int | None, retry_after: float | None, tokens_used: int | None) -> bool:
        with self.cond:
            now = self.clock.monotonic()
            if tokens_used is not None and slot._entry is not None and self.token_rate is not None:
                extra = max(0, int(tokens_used)) - slot._entry[1]
                slot._entry[1] += extra
                if self.tokens and slot._entry[0] >= self.tokens[0][0]:  # not yet out of the minute
                    self.token_sum += extra
                self.paid_until += extra / self.token_rate
            held = False
            if status in _CONGESTION:
                held = self._congested(slot, now, status, retry_after)
            elif status is not None and 200 <= status < 300:
                self._clean(slot, now)
            self.cond.notify_all()
            return held

    def _clean(self, slot: Slot, now: float) -> None:
        self.clean.append(now)
        while self.clean[0] <= now - _WINDOW:
            self.clean.popleft()
        if slot.full:
            self.window = min(self.cap, self.window + 1 / self.window)
        if self.step and now - self.held_at < _WINDOW:
            self.rate = min(self.ceiling, self.rate + self.step / self.rate)

    def _congested(self, slot: Slot, now: float, status: int, retry_after: float | None) -> bool:
        """True if the lane now holds the next call back (a pause, or a cut this round)."""
        self.congested.append(now)
        if status == 429:
            self.too_many.append(now)
        for times in (self.clean, self.congested, self.too_many):
            while times and times[0] <= now - _WINDOW:
                times.popleft()
        paused = False
        if retry_after is not None and retry_after > 0:
            paused = True
            if now >= self.paused_until:
                self.paused_from = now
            self.paused_until = max(self.paused_until, now + min(float(retry_after), MAX_PAUSE))
            self.epoch += 1
            self.next_start = self.next_token = 0.0
        if slot.started < self.cut_at:
            return True  # sent before the last cut: the cut already answered this round
        # A provider holding us back answers a good share of a window's requests 429/503.
        # Isolated ones (a flaky server) are answered by the pause alone: cut once a round
        # trip on each of them, concurrency and rate would compound down to a call at a
        # time, a call a minute, far below what the server takes.
        answers = len(self.clean) + len(self.congested)
        limited = answers >= _EVIDENCE and len(self.congested) >= LIMITED * answers
        if not limited:
            return paused
        self.cut_at = now
        self.congestion += 1
        self.epoch += 1
        self.next_start = self.next_token = 0.0
        self.window = max(1.0, min(self.window, self.in_flight) * DECREASE)
        # The rate is cut to what got through over a window (the lane's age, in its first
        # second), so at most once per such window, and only
        # for 429s ("too many requests"); a 503 says the server is overloaded, which fewer
        # calls at once answers. A handful of clean answers is no measure of a rate.
        if (len(self.too_many) < LIMITED * answers or len(self.clean) < _EVIDENCE
                or now - self.rate_cut_at < self.measured_over):
            return True
        seconds = max(min(_WINDOW, now - self.first_start), _WINDOW / 4)
        # Time the lane sat paused sent nothing: counted in, it would cut the rate to a
        # fraction of what the provider takes (a 1 s Retry-After in a 1 s window halves it).
        idle = max(0.0, min(self.paused_until, now) - max(self.paused_from, now - seconds))
        through = min(self.rate, len(self.clean) / max(seconds - idle, _WINDOW / 4))
        self.rate_cut_at, self.measured_over = now, seconds
        self.rate = max(_MIN_RATE, through * DECREASE)
        self.step = max(self.step if self.limit.rpm else 0.0, STEP * through, 2 * _MIN_RATE)
        return True

    def wait_seconds(self, tokens: int) -> float:
        """Seconds before a call could start here: 0 now, ``inf`` while every slot is taken."""
        with self.cond:
            if self.in_flight >= max(1, int(self.window)):
                return math.inf
            now = self.clock.monotonic()
            at = max(now, self.paused_until, self.last_start + 1 / self.rate, self.next_start)
            if self.token_rate is not None:
                at = max(at, self.paid_until, self.next_token, self._token_room(now, max(0, int(tokens))))
            return at - now

    def snapshot(self) -> dict[str, Any]:
        with self.cond:
            return {
                "rpm": None if math.isinf(self.rate) else self.rate * PERIOD,
                "concurrency": int(self.window),
                "in_flight": self.in_flight,
                "paused_seconds": max(0.0, self.paused_until - self.clock.monotonic()),
                "congestion_events": self.congestion,
            }


class Pacer:
    """Paces model calls per provider lane. Thread-safe; one per run.

    Args:
        limits: model-string prefix -> declared limits (``rpm``, ``tpm``,
            ``max_concurrency``; any of them may be missing).
        default_concurrency: calls in flight per lane where ``max_concurrency``
            is not declared (the run's ``jobs``).
        provider: a model string's provider, for the lanes of undeclared models
            (default: the text before the first ``/``).
        clock: the time read and waited on (default: the machine's, :class:`Clock`).

    Usage::

        pacer = Pacer({"openai/": {"rpm": 500, "tpm": 200_000}}, default_concurrency=16)
        with pacer.slot("openai/gpt-4o-mini", None, est_tokens=1200) as slot:
            ...  # the call
            slot.report(200, tokens_used=1100)   # or 429 with retry_after=...
    """

    def __init__(self, limits: Mapping[str, Any] | None = None, default_concurrency: int = 8,
                 provider: Callable[[str], str] = _provider, clock: Clock | None = None):
        if isinstance(default_concurrency, bool) or not isinstance(default_concurrency, int) or default_concurrency < 1:
            raise InputError(f"default_concurrency: expected a whole number >= 1, got {default_concurrency!r}",
                             param="default_concurrency")
        self.limits = {str(prefix): Limit.of(value, str(prefix)) for prefix, value in (limits or {}).items()}
        self.jobs = default_concurrency
        self._provider = provider
        self._clock = clock or Clock()
        self._lanes: dict[str, _Lane] = {}
        self._names: dict[tuple[str, str | None], str] = {}
        self._lock = threading.Lock()

    def lane(self, model: str, api_base: str | None = None) -> str:
        """The name of the lane ``model`` at ``api_base`` runs in."""
        key = (model, api_base)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = lane_of(model, api_base, self.limits, self._provider)
        return name

    def slot(self, model: str, api_base: str | None = None, est_tokens: int = 0) -> Slot:
        """A context manager that waits for the call's turn in its lane (raising
        ``RunInterrupted`` if a stop is asked for meanwhile)."""
        name = self.lane(model, api_base)
        lane = self._lanes.get(name)
        if lane is None:
            with self._lock:
                lane = self._lanes.get(name)
                if lane is None:
                    lane = self._lanes[name] = _Lane(name, self.limits.get(name, Limit()), self.jobs,
                                                           self._clock)
        return Slot(lane, est_tokens)

    def wait_seconds(self, model: str, api_base: str | None = None, est_tokens: int = 0) -> float:
        """Seconds before a call to ``model`` could start (0: now; ``inf``: every slot of its
        lane is taken), without waiting: lets an executor whose threads serve several
        providers start another provider's unit instead of parking a thread in a full lane."""
        lane = self._lanes.get(self.lane(model, api_base))
        return 0.0 if lane is None else lane.wait_seconds(est_tokens)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Per lane: the rate (rpm) and concurrency in force, calls in flight,
        seconds of pause left and how many 429/503 rounds it has seen."""
        with self._lock:
            lanes = list(self._lanes.values())
        return {lane.name: lane.snapshot() for lane in lanes}


@dataclass(frozen=True)
class WallEstimate:
    """A lower bound on a run's wall time, and per lane what sets it."""

    seconds: float
    lanes: dict[str, tuple[float, str]]  # lane -> (seconds, "rpm" | "tpm" | "concurrency")


def estimate_wall_seconds(calls_by_model: Mapping[Any, int], tokens_by_model: Mapping[Any, int],
                          limits: Mapping[str, Any] | None, jobs: int, *, seconds_per_call: float = 5.0,
                          provider: Callable[[str], str] = _provider) -> WallEstimate:
    """How long the calls take at least (calls and tokens keyed by model string, or by
    ``(model, api_base)`` to split lanes by host as a run does): each lane needs ``calls / rpm`` minutes,
    ``tokens / tpm`` minutes and ``calls * seconds_per_call / concurrency``; lanes
    run side by side, sharing the ``jobs`` threads."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs: expected a whole number >= 1, got {jobs!r}", param="jobs")
    if not seconds_per_call >= 0:
        raise InputError(f"seconds_per_call: expected a number >= 0, got {seconds_per_call!r}", param="seconds_per_call")
    declared = {str(p): Limit.of(v, str(p)) for p, v in (limits or {}).items()}
    calls: dict[str, float] = {}
    tokens: dict[str, float] = {}
    for key, n in calls_by_model.items():
        model, api_base = key if isinstance(key, tuple) else (key, None)  # (model, api_base): lanes as a run has them
        name = lane_of(model, api_base, declared, provider)
        calls[name] = calls.get(name, 0) + n
        tokens[name] = tokens.get(name, 0) + tokens_by_model.get(key, 0)
    lanes = {}
    for name, count in calls.items():
        limit = declared.get(name, Limit())
        bounds = {"concurrency": count * seconds_per_call / min(jobs, limit.max_concurrency or jobs)}
        if limit.rpm:
            bounds["rpm"] = count / limit.rpm * PERIOD
        if limit.tpm:
            bounds["tpm"] = tokens[name] / limit.tpm * PERIOD
        binding = max(bounds, key=bounds.__getitem__)
        lanes[name] = (bounds[binding], binding)
    total = sum(calls.values()) * seconds_per_call / jobs  # all lanes share the run's threads
    return WallEstimate(max([total, *(s for s, _ in lanes.values())]), lanes)
