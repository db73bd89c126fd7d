"""Running one stage's work units: in threads here, in worker processes, or on a Dask cluster.

Each result is stored the moment it exists, so a run that stops for any
reason keeps every unit it finished. Locally, each unit is claimed in the
store before it is computed: when another run on the same store holds the
claim, this run waits for that entry instead of paying for the same call
twice.

The threads serve every provider of a stage. When the client paces calls per
provider lane (its ``pacer``, :mod:`multiverse.model._pacing`), a free thread takes
a unit whose lanes can start a call now, so the threads do not all park in
one provider's full or slow lane while another provider's units wait.

Stopping (``multiverse.core._interrupt``): after the first SIGINT/SIGTERM no unit
starts; units in flight get a grace period to finish and be stored; then the
claims still held are released and :class:`~multiverse.core._interrupt.RunInterrupted`
is raised. On a second signal (``KeyboardInterrupt``) the claims are released
at once. Worker threads are daemons: a unit still in flight when the process
exits is abandoned, never waited for.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from multiverse.core import _interrupt as interrupt
from multiverse.core._interrupt import RunInterrupted
from multiverse.core._vocabulary import STAGE_OF_RECORD
from multiverse.engine._processes import NOT_STARTED, usable_cores
from multiverse.model._client import ModelClient
from multiverse.store._claims import Held
from multiverse.store._store import Store

__all__ = ["ELSEWHERE", "DaskSession", "Executor"]


_CLAIMED = "claimed by another run"
ELSEWHERE = "computed by another run"
_NOT_STARTED = NOT_STARTED
_POLL = 0.1
#: tokens a unit's next call is assumed to use when asking its lane for room
_EST_TOKENS = 1000


class Executor:
    """Runs one stage's units and stores each result the moment it exists.

    ``attempt(stage, unit, upstream, client, budget_hit) -> (record, failure)``
    computes one unit (default :func:`multiverse.engine._compute.attempt`); ``remote``
    is the function a Dask worker runs for one unit (``(stage, unit, upstream,
    store_root, jobs) -> (key, failure)``, default :func:`multiverse.engine._compute.dask_unit`).
    ``local`` uses daemon threads in this process; ``processes`` hands each unit,
    claimed here, to a :class:`~multiverse.engine._processes.WorkerPool` (``workers``),
    whose processes compute and store it; ``dask`` sends each unit to
    a Dask cluster whose workers share the store directory and store what they
    compute themselves, so a worker that dies loses only its call in flight.
    """

    def __init__(self, store: Store, client: ModelClient, *, jobs: int, progress: bool | None, attempt: Callable | None = None,
                 remote: Callable | None = None, backend: str = "local", dask_client=None, grace: float | None = None,
                 workers: Any = None):
        from multiverse.engine import _compute as compute

        self.store, self.client, self.jobs, self.progress = store, client, max(1, jobs), progress
        self.attempt = compute.attempt if attempt is None else attempt
        self.remote = compute.dask_unit if remote is None else remote
        if backend == "processes" and workers is None:
            raise ValueError("backend='processes' needs its WorkerPool (workers=)")
        self.backend, self.dask_client, self.workers = backend, dask_client, workers
        self.grace = interrupt.GRACE if grace is None else grace
        self.failures: dict[str, dict[str, str]] = defaultdict(dict)
        self.computed: dict[str, set[str]] = defaultdict(set)
        self.budget_hit = threading.Event()
        self._held = Held(store)  # the claims this run holds, released together on a stop
        self._threads: list[threading.Thread] = []
        self.pacer = getattr(client, "pacer", None)  # any client may pace its calls by lanes

    def run(self, stage: str, units: list, upstream: Callable[[Any], Any] = lambda unit: None) -> None:
        if not units:
            return
        interrupt.check()
        from multiverse.core._progress import Progress

        bar = Progress(len(units), STAGE_OF_RECORD[stage], enabled=self.progress)
        if self.backend == "dask":
            results = self._dask(stage, units, upstream)
        else:
            results = self._local(stage, units, upstream, self._handed_out if self.backend == "processes" else self._pool)
        try:
            for key, failure in results:
                if failure is None:
                    self.computed[stage].add(key)
                elif failure is not ELSEWHERE:
                    self.failures[stage][key] = failure
                bar.update(1)
        finally:
            results.close()
            # Threads still in a call stop at their next one, even once the stop flag is cleared.
            interrupt.cancel(self._threads)
            self.release_all()
            bar.close()

    def release_all(self) -> None:
        """Release every claim this run still holds (on the way out of an interrupted stage)."""
        self._held.release_all()

    # -- local -------------------------------------------------------------------

    def _one(self, stage: str, unit, upstream) -> tuple[Any, str | None]:
        taken = self._held.take(stage, unit.key)
        if not taken:
            return unit, (_NOT_STARTED if taken is None else _CLAIMED)
        try:
            if self.store.has(stage, unit.key):  # stored between our look-up and our claim
                return unit, ELSEWHERE
            record, failure = self.attempt(stage, unit, upstream(unit), self.client, self.budget_hit)
            if record is not None:
                self.store.put(stage, unit.key, record)
            return unit, failure
        except RunInterrupted:
            return unit, _NOT_STARTED  # stopped between two calls of the unit: nothing half-done is stored
        finally:
            self._release(stage, unit.key)

    def _local(self, stage: str, units: list, upstream, pool: Callable):
        pending = list(units)
        while pending:
            waiting = []
            for unit, failure in pool(stage, pending, upstream):
                if failure is _CLAIMED:
                    waiting.append(unit)
                else:
                    yield unit.key, failure
            # Another run is computing these: wait for its entries rather than pay twice.
            pending = []
            while waiting:
                interrupt.sleep(0.2)
                still = []
                for unit in waiting:
                    if self.store.has(stage, unit.key):
                        yield unit.key, ELSEWHERE
                    elif self.store.claimed(stage, unit.key):
                        still.append(unit)
                    else:
                        pending.append(unit)  # it gave up or died: compute it ourselves
                waiting = still

    def _pool(self, stage: str, units: list, upstream):
        """(unit, failure) per unit as each finishes, from ``jobs`` daemon threads."""
        todo = _LaneQueue(units, self.pacer)
        done: queue.SimpleQueue = queue.SimpleQueue()

        def work() -> None:
            try:
                while not interrupt.requested():
                    try:
                        group, unit = todo.take()
                    except queue.Empty:
                        return
                    if unit is None:  # no lane has room yet: look again soon, ready to stop
                        time.sleep(min(group, _POLL))
                        continue
                    try:
                        done.put(self._one(stage, unit, upstream))
                    except BaseException as exc:  # a bug: hand it to the main thread
                        done.put((unit, exc))
                        return
                    finally:
                        todo.finished(group)
            finally:
                interrupt.forget(threading.current_thread())

        threads = [threading.Thread(target=work, name=f"mv-{stage}-{i}", daemon=True)
                   for i in range(min(self.jobs, len(units)))]
        self._threads = threads
        for thread in threads:
            thread.start()
        received = 0
        while received < len(units) and not interrupt.requested():
            try:
                unit, failure = done.get(timeout=_POLL)
            except queue.Empty:
                if not any(t.is_alive() for t in threads) and done.empty():
                    break
                continue
            received += 1
            if isinstance(failure, BaseException):
                self._settle(threads)
                raise failure
            if failure is not _NOT_STARTED:
                yield unit, failure
        if not interrupt.requested():
            return
        # Stopped: no unit starts any more; give the ones in flight a grace to be stored.
        deadline = time.monotonic() + self.grace
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            try:
                unit, failure = done.get(timeout=_POLL)
            except queue.Empty:
                continue
            if not isinstance(failure, BaseException) and failure not in (_NOT_STARTED, _CLAIMED):
                yield unit, failure
        in_flight = sum(t.is_alive() for t in threads)
        self.release_all()
        raise RunInterrupted(f"{STAGE_OF_RECORD[stage]} stopped, {in_flight} unit(s) still in flight abandoned")

    def _settle(self, threads: list[threading.Thread]) -> None:
        """A worker's error (a lost store, a bug) ends the stage: the other threads stop at their
        next call, and the calls in flight get the grace to end. A daemon thread abandoned
        mid-call may hold an import lock (litellm imports lazily) when the process exits, and
        a finalizer that imports then waits for it forever: the one-line error never exits."""
        interrupt.cancel(threads)
        deadline = time.monotonic() + self.grace
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    # -- worker processes ------------------------------------------------------------

    def _handed_out(self, stage: str, units: list, upstream):
        """(unit, failure) per unit as each finishes in the worker pool; each unit is
        claimed here before it is handed out and released when it is reported."""
        pool = self.workers
        try:
            yield from self._hand_out(stage, units, upstream, pool)
        except BaseException:  # a bug, a lost worker, or the run's consumer stopped: start nothing more
            pool.stop()
            raise

    def _hand_out(self, stage: str, units: list, upstream, pool):
        todo = list(reversed(units))
        sent: dict[int, Any] = {}
        while (todo or sent) and not interrupt.requested():
            while todo and len(sent) < pool.window:
                unit = todo.pop()
                taken = self._held.take(stage, unit.key)
                stopping, claimed = taken is None, bool(taken)
                if stopping:
                    todo.append(unit)
                    break
                if not claimed:
                    yield unit, _CLAIMED
                    continue
                if self.store.has(stage, unit.key):  # stored between our look-up and our claim
                    self._release(stage, unit.key)
                    yield unit, ELSEWHERE
                    continue
                sent[pool.submit(stage, unit, upstream(unit))] = unit
            yield from self._reported(stage, pool, sent)
        if not interrupt.requested():
            return
        # Stopped: no worker starts a unit any more; give the ones in flight a grace to be stored.
        pool.stop()
        deadline = time.monotonic() + self.grace
        while sent and time.monotonic() < deadline:
            yield from self._reported(stage, pool, sent)
        self.release_all()
        raise RunInterrupted(f"{STAGE_OF_RECORD[stage]} stopped, {len(sent)} unit(s) still in flight abandoned")

    def _reported(self, stage: str, pool, sent: dict):
        for ticket, failure in pool.finished(timeout=_POLL):
            unit = sent.pop(ticket)
            self._release(stage, unit.key)
            if failure != _NOT_STARTED:
                yield unit, failure

    def _release(self, stage: str, key: str) -> None:
        self._held.release(stage, key)


    # -- dask --------------------------------------------------------------------

    def _dask(self, stage: str, units: list, upstream):
        """Units go out in a window, so a stop leaves little queued; queued ones are cancelled."""
        from distributed import wait

        root = str(self.store.root)
        todo = list(reversed(units))
        window = max(64, 8 * self.jobs)
        futures: set = set()
        try:
            while todo or futures:
                while todo and len(futures) < window and not interrupt.requested():
                    unit = todo.pop()
                    futures.add(self.dask_client.submit(self.remote, stage, unit, upstream(unit), root, self.jobs, pure=False))
                if interrupt.requested():
                    raise RunInterrupted(f"{STAGE_OF_RECORD[stage]} stopped, {len(futures)} unit(s) cancelled or abandoned")
                try:
                    finished = wait(futures, timeout=_POLL * 5, return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    continue
                futures -= finished
                for future in finished:
                    yield future.result()
        finally:
            if futures:
                # Units already running on a worker finish there and are stored by it.
                self.dask_client.cancel(list(futures))


class _LaneQueue:
    """A stage's units grouped by the lanes of the models they call, handed to the
    threads so that each takes a unit whose lanes can start a call now.

    With one group left, or no pacer, it is a plain FIFO: a thread waiting in
    the only lane with work holds back nothing else. With several, a thread
    takes a ready group's unit (the group with the fewest threads busy, so the
    groups share the threads at the start, before the lanes have state), else
    the one that is ready within ``_POLL``, else it is told how long to wait.
    """

    def __init__(self, units: list, pacer: Any):
        self._pacer = pacer
        self._lock = threading.Lock()
        self._groups: dict[tuple, deque] = {}
        for unit in units:
            self._groups.setdefault(self._lanes(unit), deque()).append(unit)
        self._busy: dict[tuple, int] = defaultdict(int)

    def _lanes(self, unit: Any) -> tuple:
        if self._pacer is None:
            return ()
        return tuple(sorted({self._pacer.lane(c.model, c.api_base): (c.model, c.api_base)
                             for c in getattr(unit, "models", ())}.items()))

    def _wait(self, group: tuple) -> float:
        return max((self._pacer.wait_seconds(model, base, _EST_TOKENS) for _, (model, base) in group), default=0.0)

    def take(self) -> tuple[Any, Any]:
        """``(group, unit)``, or ``(seconds, None)`` when no unit can start within ``_POLL``;
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
                    if waits[group] > _POLL:
                        return waits[group], None
            self._busy[group] += 1
            return group, self._groups[group].popleft()

    def finished(self, group: tuple) -> None:
        with self._lock:
            self._busy[group] -= 1


class DaskSession:
    """A Dask client for the run (None for the local backend); closes what it opened."""

    def __init__(self, backend: str, scheduler: Any, jobs: int):
        self.backend, self.scheduler, self.jobs = backend, scheduler, jobs
        self.client: Any = None
        self.cluster: Any = None

    def __enter__(self):
        from multiverse.errors import InputError

        if self.backend != "dask":
            return None
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise InputError("backend='dask': dask.distributed is not installed; pip install 'multiverse[dask]'",
                             param="backend") from None
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            return self.scheduler  # the caller's own distributed.Client
        if self.scheduler is None:
            # One worker per core and the jobs split among them: --jobs is the run's concurrent calls.
            workers = min(usable_cores(), max(1, self.jobs))
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=max(1, self.jobs // workers),
                                        processes=True, dashboard_address=None)
            self.client = Client(self.cluster)
        else:
            try:
                self.client = Client(self.scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise InputError(f"scheduler: cannot reach a Dask scheduler at {self.scheduler} ({exc})",
                                 param="scheduler") from None
        return self.client

    def __exit__(self, *exc):
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        return False
