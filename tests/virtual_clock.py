"""A clock the test advances, for pacing tests whose verdict must not depend on the machine's speed.

:class:`VirtualClock` is a :class:`multiverse.model._pacing.Clock`: its time moves only when every
thread taking part (``participants``) is asleep on it or waiting on one of its conditions; it then
jumps to the earliest wake-up. A loaded machine runs the same threads slower in real time, but
they see the same times, so a test can assert exact spacing and exact durations.

:class:`FakeProvider` plays a provider on that clock: ``latency`` seconds an answer, and above
``per_second`` requests in the last ``window`` seconds a 429 (after ``round_trip``) with the seconds
until the window has room (as ``retry-after-ms`` says). It logs each arrival and counts the peak in flight.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

__all__ = ["LATE", "Arrival", "FakeProvider", "VirtualClock", "run_on"]

LATE = 1e-12


class VirtualClock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._woken = threading.Condition(self._lock)
        self._now = 0.0
        self._running = 0  # participants neither asleep nor waiting on a condition
        self._sleepers: list[tuple[float, int]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            if seconds <= 0:
                return
            # A picosecond late, as a real sleep always is a little: a sleeper that computed its
            # seconds as ``target - now`` wakes at or after ``target``, whatever the rounding of the sum.
            at = self._now + seconds + LATE
            heapq.heappush(self._sleepers, (at, next(self._order)))
            self._running -= 1
            self._advance()
            while self._now < at:
                self._woken.wait()

    def condition(self) -> threading.Condition:
        return _Condition(self)

    @contextmanager
    def participants(self, count: int) -> Iterator[None]:
        """``count`` more threads take part (counted before they start, so time cannot move while
        some are still starting); each calls :meth:`leave` when done."""
        with self._lock:
            self._running += count
        yield

    @contextmanager
    def alone(self) -> Iterator[None]:
        """The calling thread takes part for the block (a test that paces from one thread)."""
        with self.participants(1):
            try:
                yield
            finally:
                self.leave()

    def leave(self) -> None:
        with self._lock:
            self._running -= 1
            self._advance()

    def _advance(self) -> None:
        # Caller holds the lock. Time moves only when nobody can act at the present time.
        if self._running > 0 or not self._sleepers:
            return
        self._now = max(self._now, self._sleepers[0][0])
        while self._sleepers and self._sleepers[0][0] <= self._now:
            heapq.heappop(self._sleepers)
            self._running += 1
        self._woken.notify_all()


class _Condition(threading.Condition):
    """A condition whose waiters count as idle for the clock until notified (its timeouts are
    ignored: on a virtual clock a poll in real time would be a wait the test does not control)."""

    def __init__(self, clock: VirtualClock):
        super().__init__()
        self._clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        with self._clock._lock:
            self._clock._running -= 1
            self._clock._advance()
        return super().wait()

    def notify(self, n: int = 1) -> None:
        woken = min(n, len(self._waiters))  # type: ignore[attr-defined]
        if woken:
            with self._clock._lock:
                self._clock._running += woken
        super().notify(n)

    def notify_all(self) -> None:
        self.notify(len(self._waiters))  # type: ignore[attr-defined]


def run_on(clock: VirtualClock, jobs: Sequence[Callable[[], Any]], threads: int = 64) -> dict[int, float]:
    """Runs the jobs from ``threads`` threads on the clock; returns each job's end time by index."""
    done: dict[int, float] = {}
    queue = deque(enumerate(jobs))
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    i, job = queue.popleft()
                job()
                done[i] = clock.monotonic()
        except BaseException as exc:  # handed to the test below
            errors.append(exc)
        finally:
            clock.leave()

    count = min(threads, len(jobs))
    with clock.participants(count):
        pool = [threading.Thread(target=worker, daemon=True) for _ in range(count)]
        for thread in pool:
            thread.start()
    for thread in pool:
        thread.join(600)  # only a deadlock comes near this: the jobs take no real time to speak of
        assert not thread.is_alive(), "the virtual clock's threads deadlocked"
    if errors:
        raise errors[0]
    return done


class Arrival(NamedTuple):
    at: float
    status: int
    model: str


class FakeProvider:
    def __init__(self, clock: VirtualClock, *, per_second: float | None = None, window: float = 1.0,
                 latency: float = 0.05, round_trip: float = 0.005, usage_tokens: int | None = None):
        self.clock, self.per_second, self.window, self.latency = clock, per_second, window, latency
        self.round_trip = round_trip
        self.usage_tokens = usage_tokens
        self.log: list[Arrival] = []
        self.in_flight = self.max_in_flight = 0
        self._accepted: deque[float] = deque()
        self._lock = threading.Lock()

    def answer(self, model: str, tokens: int = 0) -> tuple[int, float | None, int]:
        """(status, seconds to wait before retrying, tokens used) for one request."""
        with self._lock:
            now = self.clock.monotonic()
            while self._accepted and self._accepted[0] <= now - self.window:
                self._accepted.popleft()
            limited = self.per_second is not None and len(self._accepted) >= self.per_second
            self.log.append(Arrival(now, 429 if limited else 200, model))
            if limited:
                wait = self._accepted[0] + self.window - now
            else:
                self._accepted.append(now)
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if limited:
            # Decided on arrival, as providers do, but the answer takes its way back: requests sent
            # meanwhile are not held back by it.
            self.clock.sleep(self.round_trip)
            return 429, max(0.001, wait - self.round_trip), 0
        self.clock.sleep(self.latency)
        with self._lock:
            self.in_flight -= 1
        return 200, None, self.usage_tokens if self.usage_tokens is not None else tokens

    def statuses(self) -> list[int]:
        return [a.status for a in self.log]
