"""The local backend: a stage's units computed by daemon threads in this process.

Each unit is claimed in the store before it is computed and stored the moment
it exists. The threads serve every provider of a stage: when the client paces
calls per provider lane (its ``pacer``, :mod:`multiverse.model._pacing`), a
free thread takes a unit whose lanes can start a call now, so the threads do
not all park in one provider's full or slow lane while another provider's
units wait.

Threads are daemons: a unit still in flight when the process exits is
abandoned, never waited for. After a stop no unit starts; the ones in flight
get the stage's grace to be stored.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

from multiverse.core import STAGE_OF_RECORD, RunInterrupted, interrupt
from multiverse.engine._backend import CLAIMED, ELSEWHERE, NOT_STARTED, POLL, Outcome, StageRun, wait_for_claimed
from multiverse.model import ModelClient
from multiverse.store import Store

__all__ = ["LocalThreads"]

#: tokens a unit's next call is assumed to use when asking its lane for room
_EST_TOKENS = 1000
#: what a worker thread puts on the results queue as it ends, and what a stop request puts there
_EXITED, _WOKEN = object(), object()


class LocalThreads:
    """``jobs`` daemon threads of this process compute each unit with ``client``.

    ``attempt(stage, unit, upstream, client, budget_hit) -> (record, failure)``
    computes one unit (default :func:`multiverse.engine._compute.attempt`).
    """

    def __init__(self, client: ModelClient, *, jobs: int, attempt: Callable[..., Any] | None = None):
        from multiverse.engine import _compute as compute

        self.client, self.jobs = client, max(1, jobs)
        self.attempt = compute.attempt if attempt is None else attempt
        #: set once a call passes the budget: the units after it are not started
        self.budget_hit = threading.Event()
        self.pacer = getattr(client, "pacer", None)  # any client may pace its calls by lanes
        #: the last stage's threads
        self.threads: list[threading.Thread] = []

    @classmethod
    def refuse(cls, *, client: ModelClient | None, budget: float | None, rate_limits: Any) -> None:
        """Every run option works in this process."""

    @classmethod
    def for_run(cls, *, store: Store, client: ModelClient, jobs: int, budget: float | None,
                rate_limits: Mapping[str, Any] | None, scheduler: Any) -> LocalThreads:
        return cls(client, jobs=jobs)

    def __enter__(self) -> LocalThreads:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def outcomes(self, stage: StageRun) -> Generator[Outcome, None, None]:
        return wait_for_claimed(stage, lambda units: self._pool(stage, units))

    def end_stage(self) -> None:
        # Threads still in a call stop at their next one, even once the stop flag is cleared.
        interrupt.cancel(self.threads)

    def _one(self, stage: StageRun, unit: Any) -> tuple[Any, str | None]:
        taken = stage.claims.take(stage.stage, unit.key)
        if not taken:
            return unit, (NOT_STARTED if taken is None else CLAIMED)
        try:
            if stage.store.has(stage.stage, unit.key):  # stored between our look-up and our claim
                return unit, ELSEWHERE
            record, failure = self.attempt(stage.stage, unit, stage.upstream(unit), self.client, self.budget_hit)
            if record is not None:
                stage.store.put(stage.stage, unit.key, record)
            return unit, failure
        except RunInterrupted:
            return unit, NOT_STARTED  # stopped between two calls of the unit: nothing half-done is stored
        finally:
            stage.claims.release(stage.stage, unit.key)

    def _pool(self, stage: StageRun, units: list[Any]) -> Iterator[tuple[Any, str | None]]:
        """(unit, failure) per unit as each finishes, from ``jobs`` daemon threads.

        The main thread blocks on the results queue until a unit ends, a thread exits or a stop is
        asked for (:func:`~multiverse.core._interrupt.waking`), so its CPU is per unit, not per tenth
        of a second of the stage. It still wakes every :data:`~multiverse.core._interrupt.WAKE`
        seconds, the only way a signal another thread took reaches Python's handler."""
        todo = _LaneQueue(units, self.pacer)
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()

        def work() -> None:
            try:
                while not interrupt.requested():
                    try:
                        group, unit = todo.take()
                    except queue.Empty:
                        return
                    if unit is None:  # no lane has room yet: look again soon, ready to stop
                        time.sleep(min(group, POLL))
                        continue
                    try:
                        done.put(self._one(stage, unit))
                    except BaseException as exc:  # a bug: hand it to the main thread
                        done.put((unit, exc))
                        return
                    finally:
                        todo.finished(group)
            finally:
                interrupt.forget(threading.current_thread())
                done.put(_EXITED)

        threads = [threading.Thread(target=work, name=f"mv-{stage.stage}-{i}", daemon=True)
                   for i in range(min(self.jobs, len(units)))]
        self.threads = threads
        for thread in threads:
            thread.start()
        received, alive = 0, len(threads)
        with interrupt.waking(lambda: done.put(_WOKEN)):
            while received < len(units) and alive and not interrupt.requested():
                try:
                    item = done.get(timeout=interrupt.WAKE)
                except queue.Empty:
                    continue
                if item is _EXITED or item is _WOKEN:
                    alive -= item is _EXITED
                    continue
                unit, failure = item
                received += 1
                if isinstance(failure, BaseException):
                    self._settle(threads, stage.grace)
                    raise failure
                if failure is not NOT_STARTED:
                    yield unit, failure
        if not interrupt.requested():
            return
        # Stopped: no unit starts any more; give the ones in flight a grace to be stored.
        deadline = time.monotonic() + stage.grace
        while alive and time.monotonic() < deadline:
            try:
                item = done.get(timeout=min(interrupt.WAKE, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                continue  # the loop's own test ends the grace
            if item is _EXITED or item is _WOKEN:
                alive -= item is _EXITED
                continue
            unit, failure = item
            if not isinstance(failure, BaseException) and failure not in (NOT_STARTED, CLAIMED):
                yield unit, failure
        stage.claims.release_all()
        raise RunInterrupted(f"{STAGE_OF_RECORD[stage.stage]} stopped, {alive} unit(s) still in flight abandoned")

    @staticmethod
    def _settle(threads: list[threading.Thread], grace: float) -> None:
        """A worker's error (a lost store, a bug) ends the stage: the other threads stop at their
        next call, and the calls in flight get the grace to end. A daemon thread abandoned
        mid-call may hold an import lock (litellm imports lazily) when the process exits, and
        a finalizer that imports then waits for it forever: the one-line error never exits."""
        interrupt.cancel(threads)
        deadline = time.monotonic() + grace
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


class _LaneQueue:
    """A stage's units grouped by the lanes of the models they call, handed to the
    threads so that each takes a unit whose lanes can start a call now.

    With one group left, or no pacer, it is a plain FIFO: a thread waiting in
    the only lane with work holds back nothing else. With several, a thread
    takes a ready group's unit (the group with the fewest threads busy, so the
    groups share the threads at the start, before the lanes have state), else
    the one that is ready within ``POLL``, else it is told how long to wait.
    """

    def __init__(self, units: list[Any], pacer: Any):
        self._pacer = pacer
        self._lock = threading.Lock()
        self._groups: dict[tuple[Any, ...], deque[Any]] = {}
        for unit in units:
            self._groups.setdefault(self._lanes(unit), deque()).append(unit)
        self._busy: dict[tuple[Any, ...], int] = defaultdict(int)

    def _lanes(self, unit: Any) -> tuple[Any, ...]:
        if self._pacer is None:
            return ()
        return tuple(sorted({self._pacer.lane(c.model, c.api_base): (c.model, c.api_base)
                             for c in getattr(unit, "models", ())}.items()))

    def _wait(self, group: tuple[Any, ...]) -> float:
        return max((self._pacer.wait_seconds(model, base, _EST_TOKENS) for _, (model, base) in group), default=0.0)

    def take(self) -> tuple[Any, Any]:
        """``(group, unit)``, or ``(seconds, None)`` when no unit can start within ``POLL``;
        raises ``queue.Empty`` when every unit has been taken."""
        with self._lock:
            live = [g for g, q in self._groups.items() if q]
            if not live:
                raise queue.Empty
            group = live[0]
            if len(live) > 1:
                waits = {g: self._wait(g) for g in live}
                ready = [g for g in live if waits[g] <= 0]
                if ready:
                    group = min(ready, key=self._busy.__getitem__)
                else:
                    group = min(live, key=waits.__getitem__)
                    if waits[group] > POLL:
                        return waits[group], None
            self._busy[group] += 1
            return group, self._groups[group].popleft()

    def finished(self, group: tuple[Any, ...]) -> None:
        with self._lock:
            self._busy[group] -= 1
