"""The dask backend: a stage's units sent to a Dask cluster whose workers share the store.

Each worker runs ``remote`` for a unit (default
:func:`multiverse.engine._compute.dask_unit`) and stores what it computes
itself, so a worker that dies loses only its call in flight. Units go out in
a window, so a stop leaves little queued; the queued ones are cancelled.
dask.distributed is imported only when this backend is entered.

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
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any

from multiverse.core import STAGE_OF_RECORD, RunInterrupted, credentials, interrupt, seconds_setting
from multiverse.engine._backend import POLL, Outcome, StageRun
from multiverse.engine._processes import usable_cores
from multiverse.errors import InputError
from multiverse.model import ModelClient
from multiverse.store import Store

__all__ = ["SCHEDULER_SECONDS", "TIMEOUT_VARIABLE", "Dask", "scheduler_timeout"]

#: the environment variable of how long a scheduler may take to answer, in seconds
TIMEOUT_VARIABLE = "MULTIVERSE_SCHEDULER_TIMEOUT"
#: how long a scheduler may take to answer without ``$MULTIVERSE_SCHEDULER_TIMEOUT``
SCHEDULER_SECONDS = 20.0


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
    worker runs for one unit. Entering connects (or starts the local cluster);
    leaving closes what was opened here.
    """

    def __init__(self, scheduler: Any = None, *, jobs: int, remote: Callable[..., Any] | None = None,
                 timeout: float | None = None):
        from multiverse.engine import _compute as compute

        self.scheduler, self.jobs = scheduler, max(1, jobs)
        #: seconds the scheduler at an address may take to answer (None: :func:`scheduler_timeout`)
        self.timeout = timeout
        self.remote = compute.dask_unit if remote is None else remote
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
            workers = min(usable_cores(), self.jobs)
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
        from distributed import wait

        root = stage.store.location
        todo = list(reversed(stage.units))
        window = max(64, 8 * self.jobs)
        futures: set[Any] = set()
        heard = time.monotonic()  # when a unit last finished, or the scheduler last answered
        silent = False
        try:
            while todo or futures:
                while todo and len(futures) < window and not interrupt.requested():
                    unit = todo.pop()
                    futures.add(self.client.submit(self.remote, stage.stage, unit, stage.upstream(unit), root, self.jobs,
                                                   pure=False))
                if interrupt.requested():
                    raise RunInterrupted(f"{STAGE_OF_RECORD[stage.stage]} stopped, {len(futures)} unit(s) cancelled "
                                         "or abandoned")
                try:
                    finished = wait(futures, timeout=POLL * 5, return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    if time.monotonic() - heard >= self._seconds():
                        if not self._answers():
                            silent = True
                            raise _unanswered(self._label(), self._seconds(), midway=True) from None
                        heard = time.monotonic()
                    continue
                heard = time.monotonic()
                futures -= finished
                for future in finished:
                    yield future.result()
        finally:
            if futures and not silent:
                # Units already running on a worker finish there and are stored by it.
                self.client.cancel(list(futures))

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
