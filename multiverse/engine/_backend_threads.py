"""The local backend: a stage's units computed by daemon threads in this process.

Each unit is claimed in the store before it is computed and stored the moment
it exists. The threads serve every provider of a stage: when the client paces
calls per provider lane (its ``pacer``, :mod:`multiverse.model._pacing`), a
free thread takes a unit whose lanes can start a call now, so the threads do
not all park in one provider's full or slow lane while another provider's
units wait.

A run's stages go through one pool of threads as a flow (:meth:`LocalThreads.flow`):
a rollout starts when its case is stored, a judge call when its transcripts
are, so no unit waits for the slowest unit of the stage before it.

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
#: the stages of a run in the order their units go first when several are ready
_ORDER = {"case": 0, "transcript": 1, "judgment": 2}
#: seconds between two looks at the units another run holds the claim of (as ``wait_for_claimed``)
CLAIM_POLL = 0.2
#: a flow's follow-up: the units that the ended ones (stage, unit, failure) made ready
Follow = Callable[[list[tuple[StageRun, Any, "str | None"]]], list[tuple[StageRun, Any]]]


class LocalThreads:
    """``jobs`` daemon threads of this process compute each unit with ``client``.

    ``attempt(stage, unit, upstream, client, budget_hit) -> (record, failure)``
    computes one unit (default :func:`multiverse.engine._compute.attempt`).
    """

    #: computes a run's stages as one flow (:meth:`flow`), not one stage after another
    flows = True

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
        """(unit, failure) per unit of one stage as each finishes (:meth:`_serve`)."""
        for _stage, unit, failure in self._serve([(stage, unit) for unit in units]):
            yield unit, failure

    def flow(self, first: list[tuple[StageRun, Any]], follow: Follow) -> Generator[tuple[StageRun, Any, str | None], None, None]:
        """A run's stages as one flow: (stage, unit, failure) per unit as each ends.

        ``first`` are the units that can start now; ``follow(ended)`` is handed every batch of
        ended units (stage, unit, failure) and returns the units they made ready (a rollout once
        its case is stored, a judge call once its transcripts are). So a judge call starts when
        its rollout ends, not when the last rollout of the stage does: no stage waits for the
        slowest unit of the one before, and the threads live for the whole run. A unit another
        run holds the claim of is looked at again every :data:`CLAIM_POLL` seconds until it is
        stored there (an outcome ``ELSEWHERE``) or given up (computed here)."""
        return self._serve(first, follow)

    def _serve(self, first: list[tuple[StageRun, Any]], follow: Follow | None = None
               ) -> Generator[tuple[StageRun, Any, str | None], None, None]:
        """(stage, unit, failure) per unit as each finishes, from ``jobs`` daemon threads.

        The main thread blocks on the results queue until a unit ends, a thread exits or a stop is
        asked for (:func:`~multiverse.core._interrupt.waking`): it never wakes to look at an empty
        queue but every :data:`~multiverse.core._interrupt.WAKE` seconds, the only way a signal another
        thread took reaches Python's handler, so its CPU is per unit. Without ``follow``
        every unit is known at the start (one stage; a claimed unit is reported as ``CLAIMED``)."""
        todo = _LaneQueue(first, self.pacer)
        if follow is None:
            todo.close()  # nothing is added: a thread leaves once the queue is empty
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        count = self.jobs if follow is not None else min(self.jobs, len(first))
        threads = [threading.Thread(target=self._work, args=(todo, done), daemon=True,
                                    name=f"mv-{'run' if follow else first[0][0].stage}-{i}") for i in range(count)]
        self.threads = threads
        for thread in threads:
            thread.start()
        books = _Books(pending=len(first), alive=len(threads), flowing=follow is not None)
        try:
            with interrupt.waking(lambda: done.put(_WOKEN)):
                while books.busy() and not interrupt.requested():
                    ended = books.received(done, threads, todo) + books.claims_looked_at(todo)
                    yield from ended
                    if follow is not None and ended:
                        books.add(todo, follow(ended))
        finally:
            todo.close()  # the threads waiting for more leave
        if interrupt.requested():
            yield from self._stopped(first, follow is not None, todo, done, books)

    def _work(self, todo: _LaneQueue, done: queue.SimpleQueue[Any]) -> None:
        """A worker thread: takes a unit that can start, computes it, says how it ended; until none is left."""
        try:
            while not interrupt.requested():
                try:
                    group, item = todo.take()
                except queue.Empty:
                    return
                if item is None:  # no lane has room yet: look again soon, ready to stop
                    time.sleep(min(group, POLL))
                    continue
                stage, unit = item
                try:
                    done.put((stage, *self._one(stage, unit)))
                except BaseException as exc:  # a bug: hand it to the main thread
                    done.put((stage, unit, exc))
                    return
                finally:
                    todo.finished(group)
        finally:
            interrupt.forget(threading.current_thread())
            done.put(_EXITED)

    @staticmethod
    def _stopped(first: list[tuple[StageRun, Any]], flowing: bool, todo: _LaneQueue, done: queue.SimpleQueue[Any],
                 books: _Books) -> Generator[tuple[StageRun, Any, str | None], None, None]:
        """Stopped: no unit starts any more; the ones in flight get a grace to be stored, then the
        claims are released and :class:`RunInterrupted` names what was abandoned."""
        running = todo.running()
        grace = first[0][0].grace if first else 0.0
        deadline = time.monotonic() + grace
        while books.alive and time.monotonic() < deadline:
            try:
                item = done.get(timeout=min(interrupt.WAKE, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                continue  # the loop's own test ends the grace
            if item is _EXITED or item is _WOKEN:
                books.alive -= item is _EXITED
                continue
            stage, unit, failure = item
            if not isinstance(failure, BaseException) and failure not in (NOT_STARTED, CLAIMED):
                yield stage, unit, failure
        names = STAGE_OF_RECORD.get(first[0][0].stage, "the run") if first else "the run"
        if first:
            first[0][0].claims.release_all()  # one Held for the run's stages
        if flowing and running:
            names = " and ".join(STAGE_OF_RECORD[name] for name, order in _ORDER.items() if order in running)
        raise RunInterrupted(f"{names} stopped, {books.alive} unit(s) still in flight abandoned")

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


class _Books:
    """What the main thread of a pool knows: units not yet reported, threads alive, units another run holds."""

    def __init__(self, *, pending: int, alive: int, flowing: bool):
        self.pending, self.alive, self.flowing = pending, alive, flowing
        self.waiting: list[tuple[StageRun, Any]] = []  # (a flow) units another run holds the claim of
        self.looked = time.monotonic()  # when they were last looked at

    def busy(self) -> bool:
        return bool(self.pending or self.waiting) and self.alive > 0

    def add(self, todo: _LaneQueue, items: list[tuple[StageRun, Any]]) -> None:
        todo.add(items)
        self.pending += len(items)

    def received(self, done: queue.SimpleQueue[Any], threads: list[threading.Thread],
                 todo: _LaneQueue) -> list[tuple[StageRun, Any, str | None]]:
        """The units that have ended (waits for the first): their follow-up is worked out once for them all."""
        try:
            batch = [done.get(timeout=CLAIM_POLL if self.waiting else interrupt.WAKE)]
        except queue.Empty:
            batch = []
        while not done.empty():
            batch.append(done.get())
        ended = []
        for item in batch:
            if item is _EXITED or item is _WOKEN:
                self.alive -= item is _EXITED
                continue
            stage, unit, failure = item
            self.pending -= 1
            if isinstance(failure, BaseException):
                todo.close()  # the idle threads leave at once; the busy ones get the grace
                LocalThreads._settle(threads, stage.grace)
                raise failure
            if failure is CLAIMED and self.flowing:
                self.waiting.append((stage, unit))
            elif failure is not NOT_STARTED:
                ended.append((stage, unit, failure))
        return ended

    def claims_looked_at(self, todo: _LaneQueue) -> list[tuple[StageRun, Any, str | None]]:
        """Units another run held the claim of, every :data:`CLAIM_POLL` seconds: those stored there
        have ended (``ELSEWHERE``); those it gave up are queued to be computed here."""
        if not self.waiting or time.monotonic() < self.looked + CLAIM_POLL:
            return []
        self.looked = time.monotonic()
        again, self.waiting, stored = _claims_looked_at(self.waiting)
        self.add(todo, again)
        return stored


def _claims_looked_at(waiting: list[tuple[StageRun, Any]]
                      ) -> tuple[list[tuple[StageRun, Any]], list[tuple[StageRun, Any]], list[tuple[StageRun, Any, str | None]]]:
    """Units another run held the claim of, looked at again: (to compute here, still held, stored there)."""
    again: list[tuple[StageRun, Any]] = []
    still: list[tuple[StageRun, Any]] = []
    stored: list[tuple[StageRun, Any, str | None]] = []
    for stage, unit in waiting:
        if stage.store.has(stage.stage, unit.key):
            stored.append((stage, unit, ELSEWHERE))
        elif stage.store.claimed(stage.stage, unit.key):
            still.append((stage, unit))
        else:
            again.append((stage, unit))  # it gave up or died: compute it ourselves
    return again, still, stored


class _LaneQueue:
    """The units ready to start, grouped by stage and by the lanes of the models they call, handed
    to the threads so that each takes a unit whose lanes can start a call now.

    An earlier stage's unit goes first (a draft before a rollout before a judge call): it has the
    most calls after it, so the run ends on short judge calls, not on a long rollout started
    last. With one group, or no pacer, that is all: a thread waiting in the only lane with work
    holds back nothing else. With several, a thread takes a ready group's unit (the earliest
    stage, then the group with the fewest threads busy, so the groups share the threads at the
    start, before the lanes have state), else the one that is ready within ``POLL``, else it is
    told how long to wait. Units may be added (:meth:`add`) until :meth:`close`; till then a
    thread that finds nothing ready waits for more.
    """

    def __init__(self, items: list[tuple[StageRun, Any]], pacer: Any):
        self._pacer = pacer
        self._lock = threading.Condition(threading.Lock())
        self._groups: dict[tuple[int, tuple[Any, ...]], deque[Any]] = {}
        self._busy: dict[tuple[int, tuple[Any, ...]], int] = defaultdict(int)
        self._closed = False
        self._add(items)

    def _lanes(self, unit: Any) -> tuple[Any, ...]:
        if self._pacer is None:
            return ()
        return tuple(sorted({self._pacer.lane(c.model, c.api_base): (c.model, c.api_base)
                             for c in getattr(unit, "models", ())}.items()))

    def _wait(self, group: tuple[int, tuple[Any, ...]]) -> float:
        return max((self._pacer.wait_seconds(model, base, _EST_TOKENS) for _, (model, base) in group[1]), default=0.0)

    def _add(self, items: list[tuple[StageRun, Any]]) -> None:
        for stage, unit in items:
            self._groups.setdefault((_ORDER.get(stage.stage, 0), self._lanes(unit)), deque()).append((stage, unit))

    def add(self, items: list[tuple[StageRun, Any]]) -> None:
        if items:
            with self._lock:
                self._add(items)
                self._lock.notify(len(items))

    def close(self) -> None:
        """No unit will be added: a thread that finds the queue empty leaves."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()

    def take(self) -> tuple[Any, Any]:
        """``(group, (stage, unit))``, or ``(seconds, None)`` when no unit can start within ``POLL``;
        waits while none is queued; raises ``queue.Empty`` once closed and every unit has been taken."""
        with self._lock:
            live = [g for g, q in self._groups.items() if q]
            while not live:
                if self._closed:
                    raise queue.Empty
                # Until a unit is added or the queue closed (the run's main thread closes it on a stop too):
                # an idle thread that woke to look (64 of them, ten times a second) cost a run its CPU.
                self._lock.wait()
                live = [g for g, q in self._groups.items() if q]
            group = min(live)
            if len(live) > 1 and len({g[1] for g in live}) > 1:
                waits = {lanes: self._wait((0, lanes)) for lanes in {g[1] for g in live}}
                ready = [g for g in live if waits[g[1]] <= 0]
                if ready:
                    group = min(ready, key=lambda g: (g[0], self._busy[g]))
                else:
                    group = min(live, key=lambda g: (waits[g[1]], g[0]))
                    if waits[group[1]] > POLL:
                        return waits[group[1]], None
            self._busy[group] += 1
            return group, self._groups[group].popleft()

    def finished(self, group: tuple[int, tuple[Any, ...]]) -> None:
        with self._lock:
            self._busy[group] -= 1

    def running(self) -> set[int]:
        """The stages (by order) of the units taken and not finished."""
        with self._lock:
            return {g[0] for g, n in self._busy.items() if n > 0}
