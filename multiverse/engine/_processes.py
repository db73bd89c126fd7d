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
Workers store what they compute themselves. A worker that dies (killed,
out of memory) stops the run at once with :class:`WorkerLost`, one line
naming its process id and the units it had in flight: those are not stored,
everything finished is, so a rerun resumes. It is not replaced: a worker
killed once (by the out-of-memory killer, say) would likely be killed again,
and a run that goes on with fewer workers would hide it. A worker that dies
after its last unit is noticed when the pool closes (it never said goodbye). They ignore SIGINT: the run's process decides when to stop,
sets the pool's stop flag (no worker starts another unit), waits the grace
for the units in flight and then ends the workers.

Shared caps are split evenly across the workers, because a worker's client
paces only its own calls: the ``budget`` (a worker stops at its share; the
run may end below the total) and each declared ``rate_limits`` entry
(``rpm`` and ``tpm`` divided; ``max_concurrency`` in whole shares that add
up to it, at least one per worker, which is why a pool never has more
workers than the smallest declared ``max_concurrency``). Each worker spaces
its starts ``60 / (rpm / workers)`` apart, so a window of any length holds
at most the declared share plus one start per worker (one process: plus
one). Units are handed out as threads free up, so each worker sees about its
share of every provider's calls; undeclared providers are paced from their
answers by each worker on its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from multiprocessing.connection import Connection, wait
from typing import Any, NoReturn

from multiverse.core import STAGE_OF_RECORD
from multiverse.errors import MultiverseError

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


def split_limits(limits: Mapping[str, Any] | None, workers: int) -> list[dict[str, dict[str, Any]]]:
    """Each worker's share of the declared ``rate_limits``: rates divided evenly,
    ``max_concurrency`` in whole shares (so their sum is the declared one)."""
    per_worker: list[dict[str, dict[str, Any]]] = [{} for _ in range(workers)]
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

    Workers are not ``multiprocessing`` processes, which re-import the
    caller's ``__main__`` script in every child (running an unguarded script's
    calls again). One ``python -c`` child imports litellm (about 4 s of CPU)
    and then forks the workers, still single-threaded, so the import is paid
    once; each worker talks to the run over two pipes of its own. They run in
    their own session (a Ctrl-C at the terminal reaches only the run's
    process) and exit the moment the run's end of their pipe closes.
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
        self._zygote: subprocess.Popen[Any] | None = None
        #: each worker's process id, once it has said hello
        self.pids: list[int | None] = [None] * self.workers
        self._inboxes: list[Connection] = []
        self._outboxes: list[Connection] = []
        self._busy = [0] * self.workers
        self._holder: dict[int, int] = {}
        #: what each ticket is, for the one line that names a lost worker's units
        self._what: dict[int, str] = {}
        self._gone: list[bool] = [False] * self.workers  # the worker said goodbye
        self._tickets = itertools.count()
        self._stopped = False
        self._root = store_root
        #: a worker was killed or died: its request claims (``multiverse.model._requestcache``) are left to drop
        self._abandoned = False

    def __enter__(self) -> WorkerPool:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        # A worker found dead at the end stops the run too, unless the run is already stopping for a reason.
        self.close(check=exc[0] is None)

    def _start(self) -> None:
        ends: list[int] = []  # the workers' ends of their pipes, passed to the zygote
        try:
            for _ in range(self.workers):
                child_in, to_child = os.pipe()
                from_child, child_out = os.pipe()
                ends += [child_in, child_out]
                self._inboxes.append(Connection(to_child, readable=False))
                self._outboxes.append(Connection(from_child, writable=False))
            self._zygote = subprocess.Popen([sys.executable, "-c", _BOOT, json.dumps(sys.path), *map(str, ends)], pass_fds=ends,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            for end in ends:
                os.close(end)
        for inbox, setup in zip(self._inboxes, self._setup, strict=True):
            inbox.send(setup)

    def submit(self, stage: str, unit: Any, upstream: Any) -> int:
        worker = min(range(self.workers), key=lambda i: self._busy[i] / self.threads[i])
        ticket = next(self._tickets)
        self._send(worker, (ticket, stage, unit, upstream))
        self._busy[worker] += 1
        self._holder[ticket] = worker
        self._what[ticket] = f"{STAGE_OF_RECORD.get(stage, stage)} unit {getattr(unit, 'key', '?')}"
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
                if status == _HELLO:
                    self.pids[worker] = payload
                    continue
                if status == _BYE:
                    self._gone[worker] = True
                    continue
                self._busy[worker] -= 1
                del self._holder[ticket]
                self._what.pop(ticket, None)
                if status == _RAISED:
                    raise pickle.loads(payload)
                yield ticket, (NOT_STARTED if status == _SKIPPED else payload)

    def close(self, *, check: bool = False) -> None:
        """End the workers: at once if the run stopped, else once their threads leave.

        ``check``: raise :class:`WorkerLost` if a worker had died without a word (after its last unit).
        """
        for worker in range(len(self._inboxes)):
            self._send(worker, None, quiet=True)
            self._inboxes[worker].close()
        if self._zygote is not None:
            try:  # the zygote leaves once every worker has
                self._zygote.wait(0.5 if self._stopped else 10)
            except subprocess.TimeoutExpired:
                # The workers are its process group: a call still in flight is abandoned, as a threaded run's is.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._zygote.pid, signal.SIGKILL)
                self._zygote.wait()
                self._abandoned = True
        dead = self._silent_workers() if check and not self._stopped and not self._abandoned else []
        for outbox in self._outboxes:
            outbox.close()
        self._zygote, self._inboxes, self._outboxes = None, [], []
        if dead:
            self._abandoned = True
        if self._abandoned:
            from multiverse.store import Store, release_of

            # Stale already (their holders are gone), but a run leaves no claim behind.
            release_of(Store(self._root, existing=True), {pid for pid in self.pids if pid is not None})
        if dead:
            raise WorkerLost(f"{self._who(dead[0])} died before the run ended (after its last unit; "
                             "nothing is lost: every finished unit is in the store): rerun to resume")

    def _silent_workers(self) -> list[int]:
        """The workers that ended without saying goodbye: read what is left on their pipes."""
        for worker, outbox in enumerate(self._outboxes):
            with contextlib.suppress(EOFError, OSError):
                while not self._gone[worker] and outbox.poll(1):
                    if outbox.recv()[1] == _BYE:
                        self._gone[worker] = True
        return [w for w in range(len(self._outboxes)) if not self._gone[w]]

    def _who(self, worker: int) -> str:
        pid = self.pids[worker]
        return f"worker process {pid if pid is not None else '(not started)'} (worker {worker} of {self.workers})"

    def _send(self, worker: int, message: Any, *, quiet: bool = False) -> None:
        try:
            self._inboxes[worker].send(message)
        except OSError:
            if not quiet:
                self._lost(worker)

    def _lost(self, worker: int) -> NoReturn:
        self._abandoned = True
        units = [self._what[t] for t, w in self._holder.items() if w == worker and t in self._what]
        shown = ", ".join(units[:3]) + (f" and {len(units) - 3} more" if len(units) > 3 else "")
        raise WorkerLost(f"{self._who(worker)} died with {len(units)} unit(s) in flight"
                         f"{f' ({shown})' if units else ''}; those are not stored, every finished unit is: "
                         "rerun to resume")


class WorkerLost(MultiverseError):
    """A worker process ended while the run still needed it."""


# -- in the worker ---------------------------------------------------------------

# Takes the run's sys.path, so the zygote imports the same multiverse.
_BOOT = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
         "from multiverse.engine._processes import _zygote; _zygote([int(fd) for fd in sys.argv[2:]])")
_STOP = "stop"
_HELLO = "hello"
_BYE = "bye"  # a worker's last message when it ends as told: a worker that ends without it died


def _zygote(ends: list[int]) -> None:
    """Import what every worker needs, then fork one worker per pair of pipe ends."""
    from multiverse.engine._compute import attempt  # noqa: F401
    from multiverse.model import (
        Breaker,  # noqa: F401 - imported once here, shared by every fork
        LiteLLMClient,  # noqa: F401
        load_litellm,
    )

    load_litellm()
    pairs = [ends[i:i + 2] for i in range(0, len(ends), 2)]
    children = []
    for mine in pairs:
        pid = os.fork()  # single-threaded here: nothing is copied half-locked
        if pid == 0:
            code = 1
            try:
                for end in ends:
                    if end not in mine:
                        os.close(end)  # so the run sees EOF the moment a worker dies
                _serve(Connection(mine[0], writable=False), Connection(mine[1], readable=False))
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    for end in ends:
        os.close(end)
    for pid in children:
        os.waitpid(pid, 0)


def _serve(inbox: Connection, outbox: Connection) -> None:
    """A worker process: threads compute the units the run sends until it says no more."""
    from multiverse.engine._compute import attempt
    from multiverse.model import Breaker, LiteLLMClient, RequestCache
    from multiverse.store import SHAPES, Store

    store_root, threads, options = inbox.recv()
    outbox.send((None, _HELLO, os.getpid()))
    store = Store(store_root, existing=True)  # opened by the run: never recreated if it vanishes
    # The run's request cache, shared through the store: a request answered in any worker is not sent again.
    client = RequestCache(Breaker(LiteLLMClient(jobs=threads, **options)),
                          Store(store_root, shapes=SHAPES, existing=True))
    budget_hit, stop, sending = threading.Event(), threading.Event(), threading.Lock()
    tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def send(message: tuple[Any, ...]) -> None:
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
    client.release_all()
    close = getattr(client, "close", None)
    if callable(close):
        close()  # the worker's HTTP connections end with it
    send((None, _BYE, None))
    outbox.close()


def _picklable(exc: BaseException) -> bytes:
    try:
        payload = pickle.dumps(exc)
        pickle.loads(payload)
        return payload
    except Exception:  # an exception that does not survive pickling: keep its text
        return pickle.dumps(RuntimeError(f"in a worker process: {type(exc).__name__}: {exc}"))
