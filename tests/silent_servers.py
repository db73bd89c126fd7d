"""Servers that go quiet on purpose, for the tests of remote backends' timeouts.

- :class:`SilentListener`: a loopback TCP listener that accepts every
  connection and never says a word (or says ``garbage`` once and then
  nothing): what a firewall's black hole, a hung proxy or a wrong port looks
  like to a client.
- :class:`DaskScheduler`: a real ``distributed`` scheduler in a process of its
  own, with :meth:`DaskScheduler.silenced` to stop it (SIGSTOP) and resume it;
  :meth:`DaskScheduler.worker` starts a worker process for it.

(``tests/pg_server.py`` is the PostgreSQL server, with its own ``silenced``.)
Every wait here is for an event (an accepted connection, a line a process
prints), bounded only by a generous timeout, never a sleep.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MARGIN", "SECRET", "DaskScheduler", "SilentListener", "one_line", "within"]

REPO = Path(__file__).resolve().parents[1]
#: how long a helper waits for a process it started to say it is ready (generous: a loaded machine)
READY_SECONDS = 180

#: seconds added to a timeout before a test calls it a hang: far above any scheduling delay
MARGIN = 90.0
SECRET = "hunter2-s3cret"


def one_line(message: str, *fragments: str) -> str:
    """``message`` is one line, with no traceback and no trace of :data:`SECRET`, and holds every fragment."""
    assert "\n" not in message.strip() and "Traceback" not in message, message
    assert SECRET not in message and "hunter2" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def within(started: float, seconds: float, *, waited: bool = True) -> float:
    """Seconds since ``started``: at least ``seconds`` (when the call ``waited`` them out), and no hang."""
    elapsed = time.monotonic() - started
    assert elapsed <= seconds + MARGIN, f"{elapsed:.1f} s for a timeout of {seconds} s"
    assert not waited or elapsed >= seconds - 0.5, f"{elapsed:.1f} s for a timeout of {seconds} s"
    return elapsed



class SilentListener:
    """A TCP listener on 127.0.0.1 that accepts and never answers; ``accepted`` is set at the first connection."""

    def __init__(self, garbage: bytes = b""):
        self.garbage = garbage
        self.accepted = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="silent-listener", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed by __exit__
                return
            self._conns.append(conn)  # kept open, so the client waits on a live connection
            # Set before any garbage goes out: a client that reads it fails at once, and the test that then asks
            # whether it connected must not race this thread's next line.
            self.accepted.set()
            if self.garbage:
                with contextlib.suppress(OSError):
                    conn.sendall(self.garbage)

    def __enter__(self) -> SilentListener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for conn in self._conns:
            conn.close()
        self._thread.join(timeout=READY_SECONDS)


_SCHEDULER = """
import asyncio
from distributed import Scheduler

async def main():
    async with Scheduler(host="127.0.0.1", port=0, dashboard=False, dashboard_address=None) as scheduler:
        print(scheduler.address, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""

_WORKER = """
import asyncio, sys
from distributed import Worker

async def main():
    async with Worker(sys.argv[1], nthreads=2, host="127.0.0.1", dashboard=False) as worker:
        print(worker.address, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


class DaskScheduler:
    """A real Dask scheduler in a process of its own (started on entry, killed on exit); ``address`` is its address."""

    def __init__(self) -> None:
        self._processes: list[subprocess.Popen] = []
        self.address = ""
        self.pid = 0

    def _start(self, code: str, *args: str) -> tuple[subprocess.Popen, str]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
        process = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, env=env)
        self._processes.append(process)
        line = _first_line(process)
        if not line.startswith("tcp://"):
            raise RuntimeError(f"the Dask process did not start (it printed {line!r})")
        return process, line

    def __enter__(self) -> DaskScheduler:
        try:
            process, self.address = self._start(_SCHEDULER)
        except BaseException:
            self.__exit__()
            raise
        self.pid = process.pid
        return self

    def worker(self) -> str:
        """Start a worker process of two threads for this scheduler; its address."""
        return self._start(_WORKER, self.address)[1]

    @contextlib.contextmanager
    def silenced(self) -> Iterator[None]:
        """The scheduler stopped (SIGSTOP) inside the block, resumed after it: its socket accepts, nothing answers."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.pid, signal.SIGCONT)

    def __exit__(self, *exc: object) -> None:
        for process in reversed(self._processes):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
            process.wait(timeout=READY_SECONDS)
            if process.stdout is not None:
                process.stdout.close()


def _first_line(process: subprocess.Popen) -> str:
    """The first line ``process`` prints, waited for up to :data:`READY_SECONDS` (empty if it died first)."""
    found: list[str] = []
    reader = threading.Thread(target=lambda: found.append(process.stdout.readline() if process.stdout else ""),
                              daemon=True)
    reader.start()
    reader.join(timeout=READY_SECONDS)
    return found[0].strip() if found else ""
