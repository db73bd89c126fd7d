"""Worker processes for a run's model calls: more than one core for litellm.

litellm spends about 5 ms of CPU on each call (request building, pricing,
the openai SDK, httpx), under one process's GIL; one process therefore
completes at most ~200 calls per second of wall time, whatever ``jobs`` asks
for (README › Performance). A :class:`WorkerPool` starts one process per
usable core, each with its own model client and a share of the run's
``jobs`` as threads, so ``jobs`` still means the run's concurrent calls.

The run's own process keeps the bookkeeping: it claims each unit in the store
before handing it out and releases the claim when the worker reports back, so
the store, claim and call-economy guarantees are those of a threaded run.
Workers store what they compute themselves (a worker that dies loses only its
units in flight). They ignore SIGINT: the run's process decides when to stop,
sets the pool's stop flag (no worker starts another unit), waits the grace
for the units in flight and then ends the workers.

Shared caps are split evenly across the workers, so together they never
exceed them: the ``budget`` (a worker stops at its share; the run may end
below the total) and each declared ``rate_limits`` entry (``rpm`` and
``tpm`` divided, ``max_concurrency`` divided with at least one call per
worker, which is why a pool never has more workers than the smallest
declared ``max_concurrency``). Units are handed out one at a time as threads
free up, so each worker sees about its share of every provider's calls.
"""

from __future__ import annotations

import itertools
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from multiprocessing.connection import Connection, wait
from typing import Any, NoReturn

from .errors import MultiverseError

__all__ = ["NOT_STARTED", "WorkerPool", "shares", "split_limits", "usable_cores"]

#: what a worker reports for a unit it did not start because the run is stopping
NOT_STARTED = "not started: the run was interrupted"
_DONE, _SKIPPED, _RAISED = "done", "skipped", "raised"


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole shares that differ by at most one."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def split_limits(limits: Mapping[str, Any] | None, workers: int) -> list[dict[str, dict]]:
    """Each worker's share of the declared ``rate_limits``: rates divided evenly,
    ``max_concurrency`` in whole shares (so their sum is the declared one)."""
    per_worker: list[dict[str, dict]] = [{} for _ in range(workers)]
    for prefix, value in (limits or {}).items():
        fields = {name: value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)
                  for name in ("rpm", "tpm", "max_concurrency")}
        concurrency = shares(int(fields["max_concurrency"]), workers) if fields["max_concurrency"] else None
        for i in range(workers):
            per_worker[i][prefix] = {
                "rpm": None if fields["rpm"] is None else fields["rpm"] / workers,
                "tpm": None if fields["tpm"] is None else fields["tpm"] / workers,
                "max_concurrency": None if concurrency is None else concurrency[i],
            }
    return per_worker


def worker_count(jobs: int, limits: Mapping[str, Any] | None = None, cores: int | None = None) -> int:
    """Workers for ``jobs`` concurrent calls: one per usable core, at most ``jobs``, and at
    most the smallest declared ``max_concurrency`` (each worker needs one call of every lane)."""
    count = min(max(1, jobs), usable_cores() if cores is None else cores)
    for value in (limits or {}).values():
        cap = value.get("max_concurrency") if isinstance(value, Mapping) else getattr(value, "max_concurrency", None)
        if cap:
            count = min(count, int(cap))
    return max(1, count)


class WorkerPool:
    """Worker processes that compute work units and store them.

    ``submit`` hands a unit to the least busy worker and returns its ticket;
    ``finished`` yields ``(ticket, failure)`` as units end, where failure is
    None (stored), a failure reason, or :data:`NOT_STARTED`. An exception a
    unit raised in a worker (a bug, or ``ModelUnusable``) is raised again here.
    ``stop`` makes every worker start nothing more.

    Workers are plain ``python -c`` children talking over two pipes each, not
    ``multiprocessing`` processes: those re-import the caller's ``__main__``
    script in every child (running an unguarded script's calls again). They
    run in their own session, so a Ctrl-C at the terminal reaches only the
    run's process, and they exit the moment its end of their pipe closes.
    """

    def __init__(self, store_root: str, jobs: int, *, workers: int | None = None, budget: float | None = None,
                 rate_limits: Mapping[str, Any] | None = None):
        self.workers = worker_count(jobs, rate_limits) if workers is None else max(1, min(workers, jobs))
        self.threads = shares(max(1, jobs), self.workers)
        #: units handed out but not reported: enough that no worker thread waits for the next one
        self.window = max(1, jobs) + 2 * self.workers
        budgets = [None if budget is None else budget / self.workers] * self.workers
        limits = split_limits(rate_limits, self.workers)
        self._setup = [(store_root, self.threads[i], {"budget": budgets[i], **({"rate_limits": limits[i]} if rate_limits else {})})
                       for i in range(self.workers)]
        self._processes: list[subprocess.Popen] = []
        self._inboxes: list[Connection] = []
        self._outboxes: list[Connection] = []
        self._busy = [0] * self.workers
        self._holder: dict[int, int] = {}
        self._tickets = itertools.count()
        self._stopped = False

    def __enter__(self) -> WorkerPool:
        try:
            for setup in self._setup:
                self._start(setup)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, setup: tuple) -> None:
        to_child, child_in = os.pipe()[::-1]
        child_out, from_child = os.pipe()[::-1]
        try:
            process = subprocess.Popen([sys.executable, "-c", _BOOT, str(child_in), str(child_out)],
                                       pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            os.close(child_in)
            os.close(child_out)
        self._processes.append(process)
        inbox, outbox = Connection(to_child, readable=False), Connection(from_child, writable=False)
        self._inboxes.append(inbox)
        self._outboxes.append(outbox)
        inbox.send(list(sys.path))
        inbox.send(setup)

    def submit(self, stage: str, unit: Any, upstream: Any) -> int:
        worker = min(range(self.workers), key=lambda i: self._busy[i] / self.threads[i])
        ticket = next(self._tickets)
        self._send(worker, (ticket, stage, unit, upstream))
        self._busy[worker] += 1
        self._holder[ticket] = worker
        return ticket

    def stop(self) -> None:
        self._stopped = True
        for worker in range(self.workers):
            self._send(worker, _STOP, quiet=True)

    def finished(self, timeout: float) -> Iterator[tuple[int, str | None]]:
        """Units reported within ``timeout`` seconds (waits for the first only)."""
        for ready in wait(self._outboxes, timeout):
            worker = self._outboxes.index(ready)  # type: ignore[arg-type]
            outbox = self._outboxes[worker]
            while outbox.poll():
                try:
                    ticket, status, payload = outbox.recv()
                except (EOFError, OSError):
                    self._lost(worker)
                self._busy[worker] -= 1
                del self._holder[ticket]
                if status == _RAISED:
                    raise pickle.loads(payload)
                yield ticket, (NOT_STARTED if status == _SKIPPED else payload)

    def close(self) -> None:
        """End the workers: at once if the run stopped, else once their threads leave."""
        for worker in range(len(self._inboxes)):
            self._send(worker, None, quiet=True)
            self._inboxes[worker].close()
        for process in self._processes:
            try:
                process.wait(0.5 if self._stopped else 10)
            except subprocess.TimeoutExpired:
                process.kill()  # a call still in flight is abandoned, as a threaded run's is
                process.wait()
        for outbox in self._outboxes:
            outbox.close()
        self._processes, self._inboxes, self._outboxes = [], [], []

    def _send(self, worker: int, message: Any, *, quiet: bool = False) -> None:
        try:
            self._inboxes[worker].send(message)
        except OSError:
            if not quiet:
                self._lost(worker)

    def _lost(self, worker: int) -> NoReturn:
        code = self._processes[worker].poll()
        raise WorkerLost(f"worker process {worker} ended (exit code {code}) with {self._busy[worker]} unit(s) "
                         "in flight; those are not stored: rerun to compute them")


class WorkerLost(MultiverseError):
    """A worker process ended while the run still needed it."""


# -- in the worker ---------------------------------------------------------------

# Reads the parent's sys.path first, so the child imports the same multiverse.
_BOOT = ("import sys; from multiprocessing.connection import Connection; "
         "inbox = Connection(int(sys.argv[1]), writable=False); sys.path[:] = inbox.recv(); "
         "from multiverse.processes import _serve; _serve(inbox, Connection(int(sys.argv[2]), readable=False))")
_STOP = "stop"


def _serve(inbox: Connection, outbox: Connection) -> None:
    """A worker process: threads compute the units the run sends until it says no more."""
    from .breaker import Breaker
    from .compute import attempt
    from .llm import LiteLLMClient
    from .store import Store

    store_root, threads, options = inbox.recv()
    store = Store(store_root, existing=True)  # opened by the run: never recreated if it vanishes
    client = Breaker(LiteLLMClient(jobs=threads, **options))
    budget_hit, stop, sending = threading.Event(), threading.Event(), threading.Lock()
    tasks: queue.SimpleQueue = queue.SimpleQueue()

    def send(message: tuple) -> None:
        with sending:
            outbox.send(message)

    def work() -> None:
        while (task := tasks.get()) is not None:
            ticket, stage, unit, upstream = task
            if stop.is_set():
                send((ticket, _SKIPPED, None))
                continue
            try:
                record, failure = attempt(stage, unit, upstream, client, budget_hit)
                if record is not None:
                    store.put(stage, unit.key, record)
            except BaseException as exc:  # handed to the run's process, which raises it
                send((ticket, _RAISED, _picklable(exc)))
                continue
            send((ticket, _DONE, failure))

    pool = [threading.Thread(target=work, name=f"mv-call-{i}", daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            os._exit(0)  # the run's process is gone: abandon the calls in flight, as it did
        if message is None:
            break
        if message == _STOP:
            stop.set()
        else:
            tasks.put(message)
    for _ in pool:
        tasks.put(None)
    for thread in pool:
        thread.join()
    outbox.close()


def _picklable(exc: BaseException) -> bytes:
    try:
        payload = pickle.dumps(exc)
        pickle.loads(payload)
        return payload
    except Exception:  # an exception that does not survive pickling: keep its text
        return pickle.dumps(RuntimeError(f"in a worker process: {type(exc).__name__}: {exc}"))
