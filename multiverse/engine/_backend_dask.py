"""The dask backend: a stage's units sent to a Dask cluster in blocks, which its workers claim and store.

The scheduler only hands out blocks. A block is a task of many units (their
upstream with them, so the spec is serialised once per block, not per unit):
the worker claims all of its units in the shared store in one transaction
(``Store.claim_block``), computes them one after another on the task's thread
with the worker's one model client, and stores each as it ends through the
worker's one store connection, whose writes share group commits. A unit
stored already is not computed, one another run holds is reported and waited
for (:func:`~multiverse.engine._backend.wait_for_claimed`), as the local
backends do; a worker that dies loses only its call in flight, and its
claims die with its process. Blocks are small enough that every worker thread
gets several (:data:`ROUNDS`), so a stage's tail stays short. Blocks go out in
a window, so a stop leaves little queued; the queued ones are cancelled, and a
running block starts no unit once its task is cancelled. dask.distributed is
imported only when this backend is entered.

A scheduler named by its address is held to :func:`scheduler_timeout`
seconds (``$MULTIVERSE_SCHEDULER_TIMEOUT``, else 20): to connect, handshake
included (distributed bounds the TCP connection but waits without end for a
listener that accepts and says nothing), and, during the stage, to answer
whenever nothing finished for that long. Every error names the address
without its credentials, in one line.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

from multiverse.core import STAGE_OF_RECORD, RunInterrupted, credentials, interrupt, seconds_setting
from multiverse.engine._backend import CLAIMED, ELSEWHERE, NOT_STARTED, POLL, Outcome, StageRun, wait_for_claimed
from multiverse.engine._processes import usable_cores
from multiverse.errors import InputError
from multiverse.model import ModelClient
from multiverse.store import Store

__all__ = ["MAX_BLOCK", "QUIET", "ROUNDS", "SCHEDULER_SECONDS", "TIMEOUT_VARIABLE", "Dask", "dask_block", "scheduler_timeout",
           "worker_unit"]

#: the environment variable of how long a scheduler may take to answer, in seconds
TIMEOUT_VARIABLE = "MULTIVERSE_SCHEDULER_TIMEOUT"
#: how long a scheduler may take to answer without ``$MULTIVERSE_SCHEDULER_TIMEOUT``
SCHEDULER_SECONDS = 20.0
#: the most units a block holds: one task, one claim statement, run one after another on a worker thread
MAX_BLOCK = 32
#: blocks each worker thread gets at least, when the stage has the units: a short tail, as blocks run whole
ROUNDS = 8
#: distributed's settings for the local cluster a run starts itself: what its workers do between units costs
#: CPU for every second of a stage, which waits on the model's latency. No statistical profiler sampling the
#: threads in a call every 10 ms, no memory limits to watch ten times a second (a run's memory is its
#: records), the system monitor every 5 s. A cluster of your own can be given the same (dask.config).
QUIET = {
    "distributed.worker.profile.enabled": False,
    "distributed.worker.memory.monitor-interval": "2s",
    "distributed.worker.memory.target": False,
    "distributed.worker.memory.spill": False,
    "distributed.worker.memory.pause": False,
    "distributed.worker.memory.terminate": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.admin.system-monitor.gil.enabled": False,
}


def scheduler_timeout() -> float:
    """Seconds a scheduler may take to answer: ``$MULTIVERSE_SCHEDULER_TIMEOUT``, else :data:`SCHEDULER_SECONDS`."""
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not raw:
        return SCHEDULER_SECONDS
    return seconds_setting(raw, TIMEOUT_VARIABLE)


class Dask:
    """Units computed on the Dask cluster at ``scheduler``: an address, a ``distributed.Client``
    of the caller's (used, never closed), or None for a local cluster of one worker per core.

    ``remote(stage, unit, upstream, store_root, jobs) -> (key, failure)`` is what a
    worker runs for each unit of a block it claimed (default :func:`worker_unit`).
    Entering connects (or starts the local cluster); leaving closes what was
    opened here. ``by_worker`` counts the units each worker computed, by address.
    """

    def __init__(self, scheduler: Any = None, *, jobs: int, remote: Callable[..., Any] | None = None,
                 timeout: float | None = None):
        self.scheduler, self.jobs = scheduler, max(1, jobs)
        #: seconds the scheduler at an address may take to answer (None: :func:`scheduler_timeout`)
        self.timeout = timeout
        self.remote = worker_unit if remote is None else remote
        #: units computed and stored, by the address of the worker that did
        self.by_worker: Counter[str] = Counter()
        given = scheduler is not None and not isinstance(scheduler, str)
        #: the client units are submitted to: the caller's, or the one opened on entering
        self.client: Any = scheduler if given else None
        self._opened: Any = None
        self._cluster: Any = None

    @classmethod
    def refuse(cls, *, client: ModelClient | None, budget: float | None, rate_limits: Any) -> None:
        if budget is not None:
            raise InputError("budget: not supported with backend='dask' (each worker has its own client); "
                             "run locally to cap spending", param="budget")
        if rate_limits:
            # Each worker paces only its own calls: together they would exceed the declared limits.
            raise InputError("backend: 'dask' does not keep the spec's rate_limits (each worker paces its own calls); "
                             "run locally, or remove rate_limits", param="backend")

    @classmethod
    def for_run(cls, *, store: Store, client: ModelClient, jobs: int, budget: float | None,
                rate_limits: Mapping[str, Any] | None, scheduler: Any) -> Dask:
        return cls(scheduler, jobs=jobs)

    def __enter__(self) -> Dask:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise InputError("backend='dask': dask.distributed is not installed; pip install 'multiverse[dask]'",
                             param="backend") from None
        if self.client is not None:
            return self  # the caller's own distributed.Client
        if self.scheduler is None:
            # One worker per core and the jobs split among them: `jobs` is the run's concurrent calls.
            import dask

            workers = min(usable_cores(), self.jobs)
            with dask.config.set(QUIET):  # the nannies hand the workers this configuration
                self._cluster = LocalCluster(n_workers=workers, threads_per_worker=max(1, self.jobs // workers),
                                             processes=True, dashboard_address=None)
            self._opened = Client(self._cluster)
        else:
            self._opened = _connect(str(self.scheduler), self._seconds())
        self.client = self._opened
        return self

    def _seconds(self) -> float:
        return scheduler_timeout() if self.timeout is None else self.timeout

    def __exit__(self, *exc: object) -> None:
        if self._opened is not None:
            with contextlib.suppress(Exception):  # a scheduler gone silent: nothing left to tell it
                self._opened.close(timeout=self._seconds())
            self.client = self._opened = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def outcomes(self, stage: StageRun) -> Generator[Outcome, None, None]:
        return wait_for_claimed(stage, lambda units: self._blocks(stage, units))

    def _blocks(self, stage: StageRun, units: list[Any]) -> Iterator[tuple[Any, str | None]]:
        """(unit, failure) per unit, a block's units as its task ends; CLAIMED for those another run holds."""
        from distributed import wait

        root = stage.store.location
        size = self.block_size(len(units))
        by_key = {unit.key: unit for unit in units}
        todo = [units[i:i + size] for i in range(0, len(units), size)][::-1]
        window = max(2, -(-max(64, 8 * self.jobs) // size))  # blocks out at once: about as many units as before
        futures: dict[Any, int] = {}  # each block's future, and how many units it holds
        heard = time.monotonic()  # when a block last finished, or the scheduler last answered
        silent = False
        try:
            while todo or futures:
                while todo and len(futures) < window and not interrupt.requested():
                    block = todo.pop()
                    future = self.client.submit(dask_block, stage.stage, [(u, stage.upstream(u)) for u in block], root,
                                                self.jobs, self.remote, pure=False)
                    futures[future] = len(block)
                if interrupt.requested():
                    raise RunInterrupted(f"{STAGE_OF_RECORD[stage.stage]} stopped, {sum(futures.values())} unit(s) "
                                         "cancelled or abandoned")
                try:
                    finished = wait(list(futures), timeout=POLL * 5, return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    if time.monotonic() - heard >= self._seconds():
                        if not self._answers():
                            silent = True
                            raise _unanswered(self._label(), self._seconds(), midway=True) from None
                        heard = time.monotonic()
                    continue
                heard = time.monotonic()
                for future in finished:
                    del futures[future]
                    address, results = future.result()
                    for key, failure in results:
                        if failure == NOT_STARTED:
                            continue
                        if failure is None:
                            self.by_worker[address] += 1
                        # The run's markers are compared by identity: the worker's copies become them again.
                        yield by_key[key], (CLAIMED if failure == CLAIMED else ELSEWHERE if failure == ELSEWHERE
                                            else failure)
        finally:
            if futures and not silent:
                # Blocks already running on a worker end after their unit in flight, stored by it.
                self.client.cancel(list(futures))

    def block_size(self, units: int) -> int:
        """Units per block for a stage of ``units``: every thread of the cluster gets :data:`ROUNDS`
        blocks or more, each of at most :data:`MAX_BLOCK` units."""
        try:
            threads = sum(self.client.sync(self.client.scheduler.ncores, callback_timeout=self._seconds()).values())
        except Exception:  # silent, or gone: the stage's own wait says so
            threads = 0
        return max(1, min(MAX_BLOCK, units // (ROUNDS * (threads or self.jobs))))

    def _answers(self) -> bool:
        """Whether the scheduler answers within the timeout.

        Asked only when no unit finished for that long: units may be slow, but
        a scheduler that says nothing (stopped, or its network gone) would leave
        the stage waiting for ever.
        """
        try:
            self.client.sync(self.client.scheduler.identity, callback_timeout=self._seconds())
        except Exception:  # silent (TimeoutError), or its connection gone (CommClosedError, OSError)
            return False
        return True

    def _label(self) -> str:
        address = self.scheduler if isinstance(self.scheduler, str) else self.client.scheduler.address
        return credentials.address_label(str(address))

    def end_stage(self) -> None:
        """The cluster's workers store what they finish: nothing to stop here."""


# -- on a worker ----------------------------------------------------------------------------

# One store and one model client per worker process and store: a block opens no connection of its own, and the
# worker's units share the client's connections and the store's group commits.
_WORKER_STORES: dict[str, Store] = {}
_WORKER_CLIENTS: dict[tuple[int, str], ModelClient] = {}
_WORKER_LOCK = threading.Lock()


def dask_block(stage: str, block: list[tuple[Any, Any]], store_root: str, jobs: int,
               remote: Callable[..., Any] | None = None) -> tuple[str, list[Outcome]]:
    """A block of ``(unit, upstream)`` on a Dask worker: (the worker's address, each unit's outcome).

    Its units are claimed in one transaction; those stored already are
    ELSEWHERE, those another process holds CLAIMED. The claimed ones are
    computed in order by ``remote`` (default :func:`worker_unit`), which
    stores each; once the task is cancelled (the run stopped) no further unit
    starts, and those are NOT_STARTED. Every claim not ended by a stored entry
    is released before the task returns or raises.
    """
    store = _worker_store(store_root)
    claimed = store.claim_block(stage, [unit.key for unit, _ in block])
    taken = set(claimed.taken)
    outcomes: list[Outcome] = [(key, ELSEWHERE) for key in claimed.stored]
    outcomes += [(key, CLAIMED) for key in claimed.elsewhere]
    compute = worker_unit if remote is None else remote
    try:
        for unit, upstream in block:
            if unit.key in taken:
                outcomes.append((unit.key, NOT_STARTED) if _cancelled() else compute(stage, unit, upstream, store_root, jobs))
    finally:
        for key in claimed.taken:
            store.release(stage, key)  # nothing to do for a unit whose entry was stored
    return _address(), outcomes


def worker_unit(stage: str, unit: Any, upstream: Any, store_root: str, jobs: int) -> Outcome:
    """One claimed unit on a Dask worker, computed with the worker's client and stored through its store.

    The client allows as many calls at once as the worker has threads (``jobs``
    off a worker): a thread runs one unit, and a unit one call at a time.
    """
    from multiverse.engine._compute import attempt

    store = _worker_store(store_root)
    threads = _worker_threads(jobs)
    with _WORKER_LOCK:
        client = _WORKER_CLIENTS.get((threads, store_root))
        if client is None:
            from multiverse.model import LiteLLMClient, RequestCache

            client = _WORKER_CLIENTS[threads, store_root] = RequestCache(LiteLLMClient(jobs=threads), store)
    record, failure = attempt(stage, unit, upstream, client, threading.Event())
    if record is not None:
        store.put(stage, unit.key, record)
    return unit.key, failure


def _worker_store(root: str) -> Store:
    with _WORKER_LOCK:
        store = _WORKER_STORES.get(root)
        if store is None:
            from multiverse.store import SHAPES

            # Opened by the run: never recreated if it vanishes. Its answers are read with their checks.
            store = _WORKER_STORES[root] = Store(root, shapes=SHAPES, existing=True)
        return store


def _worker_threads(default: int) -> int:
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):  # not on a Dask worker
        return default


def _address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):  # not on a Dask worker
        return f"pid {os.getpid()}"


def _cancelled() -> bool:
    """Whether this task was cancelled (the run stopped): read from the worker's own state, no round trip."""
    try:
        from distributed import get_worker

        worker = get_worker()
        task = worker.state.tasks.get(worker.get_current_task())
    except (ImportError, ValueError):  # not on a Dask worker
        return False
    return task is None or task.state in ("cancelled", "released", "forgotten")


def _connect(address: str, seconds: float) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``, or one :class:`InputError` line within ``seconds``."""
    from distributed import Client

    label = credentials.address_label(address)
    _check_address(address, label)

    class BoundedClient(Client):
        """A Client whose start, handshake included, ends within ``seconds``."""

        def start(self, **kwargs: Any) -> None:
            kwargs.setdefault("callback_timeout", seconds)
            try:
                super().start(**kwargs)
            except BaseException:
                with contextlib.suppress(Exception):
                    self.close(timeout=seconds)  # its event loop thread, and any half-open connection
                raise

    try:
        return BoundedClient(address, timeout=seconds)
    except TimeoutError:
        raise _unanswered(label, seconds) from None
    except OSError as exc:
        raise InputError(f"scheduler: cannot reach a Dask scheduler at {label} "
                         f"({credentials.without_address_secrets(exc.strerror or _first_line(exc), address)})",
                         param="scheduler") from None
    except Exception as exc:
        # What answered is not a scheduler (a different protocol, a frame it cannot hold), or TLS is not set up.
        raise InputError(f"scheduler: cannot use a Dask scheduler at {label} "
                         f"({type(exc).__name__}: {credentials.without_address_secrets(_first_line(exc), address)})",
                         param="scheduler") from None


#: host:port of a network scheme: a bracketed IPv6 address or a name/IPv4 address, then 1 to 5 digits
_HOST_PORT = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+)):(?P<port>[0-9]{1,5})")
_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def _check_address(address: str, label: str) -> None:
    """Refuse, before any connection, an address no scheduler can be at, naming it without credentials.

    distributed's own parser is lenient (``tcp://:8786`` is host ``''``, ``tcp://a b:+80`` port 80):
    what it lets through would be tried, and end only at the timeout."""
    from distributed.comm import parse_address

    expected = "expected an address such as tcp://10.0.0.5:8786"
    if "@" in address:
        raise InputError(f"scheduler: {label}: a Dask address holds no user or password; {expected}",
                         param="scheduler")
    try:
        scheme, location = parse_address(address)
        from distributed.comm.registry import get_backend

        get_backend(scheme)
        if scheme in ("tcp", "tls", "ws", "wss"):
            _check_host_port(location)
    except (ValueError, TypeError, ImportError) as exc:
        raise InputError(f"scheduler: {label}: {credentials.without_address_secrets(_first_line(exc), address)}; "
                         f"{expected}", param="scheduler") from None


def _check_host_port(location: str) -> None:
    match = _HOST_PORT.fullmatch(location)
    if match is None:
        raise ValueError("no host before the port" if location.startswith(":") else
                         f"{location!r} is not host:port" if ":" in location else "no port after the host")
    if match["ipv6"] is not None:
        ipaddress.IPv6Address(match["ipv6"])  # ValueError if it is not one
    else:
        host = match["host"]
        labels = host.split(".")
        if len(host) > 253 or not all(_LABEL.fullmatch(part) for part in labels):
            raise ValueError(f"{host!r} is not a host name or IP address")
        if all(part.isdigit() for part in labels):
            ipaddress.IPv4Address(host)  # all digits: an IPv4 address or nothing
    port = int(match["port"])
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is out of range")


def _unanswered(label: str, seconds: float, *, midway: bool = False) -> InputError:
    what = f"the Dask scheduler at {label} stopped answering" if midway else f"no Dask scheduler answered at {label}"
    return InputError(f"scheduler: {what} (nothing within {seconds:g} s; ${TIMEOUT_VARIABLE} sets the wait)",
                      param="scheduler")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
