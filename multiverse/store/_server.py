"""How long the store waits for a PostgreSQL server, and a connection that never waits longer.

A server can accept a connection and then say nothing: stopped (SIGSTOP),
swapped out, behind a firewall that drops its packets, or not PostgreSQL at
all. The kernel of a stopped server still acknowledges TCP and its
keepalives, so neither keepalives nor ``tcp_user_timeout`` notice it, and a
server-side ``statement_timeout`` needs a server that runs. So the client
keeps its own deadlines:

- **connecting** (the TCP connection and the whole handshake) is bounded by
  libpq's own ``connect_timeout``, from the URL (``?connect_timeout=5``) or
  ``$PGCONNECT_TIMEOUT``, else :data:`CONNECT_SECONDS`; psycopg enforces it
  in Python over every step of the handshake. Looking the host's name up is
  not among those steps (psycopg calls ``getaddrinfo``, which waits as long as
  the resolver does), so :func:`connect` looks it up itself, in a thread it
  stops waiting for at the same deadline (:class:`NoLookup`), and hands libpq
  the addresses (``hostaddr``).
- **each statement** is bounded by ``$MULTIVERSE_STORE_TIMEOUT`` seconds
  (else :data:`ANSWER_SECONDS`) of silence: every wait on the connection's
  socket is, and a server that neither answers nor takes what is sent for
  that long ends the connection (:class:`NoAnswer`). The server is told the
  same ``statement_timeout``, so a statement it cannot finish in time (a lock
  wait) ends there too, rather than running on after the client left.

After a server failed to answer, statements to it fail at once for the same
time (:func:`down`): a run's other threads and its teardown (the lease, the
last commits) would each wait the whole timeout again.
"""

from __future__ import annotations

import ipaddress
import math
import os
import socket
import threading
import time
from collections.abc import Generator
from functools import lru_cache
from typing import Any

from multiverse.core import seconds_setting

__all__ = ["ANSWER_SECONDS", "ANSWER_VARIABLE", "CONNECT_SECONDS", "NoAnswer", "NoLookup", "Timeouts", "connect",
           "down", "mark_down", "timeouts"]

#: the environment variable of the longest silence a statement waits through, in seconds
ANSWER_VARIABLE = "MULTIVERSE_STORE_TIMEOUT"
#: the longest silence a statement waits through without ``$MULTIVERSE_STORE_TIMEOUT``
ANSWER_SECONDS = 60.0
#: how long connecting may take without ``connect_timeout`` in the URL or ``$PGCONNECT_TIMEOUT``
CONNECT_SECONDS = 10


class NoAnswer(Exception):
    """The server said nothing, and took nothing, for the whole answer timeout."""


class NoLookup(Exception):
    """The resolver gave no address for ``host`` within the connect timeout."""

    def __init__(self, host: str):
        super().__init__(host)
        self.host = host


class Timeouts:
    """The deadlines of one server's connections, and the words a message uses for where each is set."""

    def __init__(self, connect: float, connect_source: str, answer: float):
        self.connect, self.connect_source, self.answer = connect, connect_source, answer

    def connect_words(self) -> str:
        return f"no answer within {self.connect:g} s ({self.connect_source} sets the wait)"

    def lookup_words(self, host: str) -> str:
        return f"no address for {host} within {self.connect:g} s ({self.connect_source} sets the wait)"

    def answer_words(self) -> str:
        return f"the server did not answer within {self.answer:g} s (${ANSWER_VARIABLE} sets the wait)"


def timeouts(url: str) -> Timeouts:
    """The deadlines for the server at ``url``; a malformed setting is an :class:`InputError`."""
    from psycopg.conninfo import conninfo_to_dict

    raw = os.environ.get(ANSWER_VARIABLE)
    answer = ANSWER_SECONDS if raw is None or not raw.strip() else seconds_setting(raw, ANSWER_VARIABLE)
    given = conninfo_to_dict(url).get("connect_timeout")
    if given is not None:
        source, value = "connect_timeout in the store's URL", str(given)
    elif os.environ.get("PGCONNECT_TIMEOUT", "").strip():
        source, value = "$PGCONNECT_TIMEOUT", os.environ["PGCONNECT_TIMEOUT"]
    else:
        return Timeouts(CONNECT_SECONDS, "connect_timeout in the store's URL", answer)
    # libpq reads a whole number, at least 2 (0 waits forever; psycopg caps that at 130 s): refuse what it can't keep.
    connect = seconds_setting(value, source)
    return Timeouts(max(2, math.ceil(connect)), source, answer)


def connect(url: str, limits: Timeouts) -> Any:
    """A psycopg connection to ``url`` in autocommit mode, whose every wait is bounded by ``limits``."""
    from psycopg.conninfo import conninfo_to_dict

    started = time.monotonic()
    addresses = _looked_up(conninfo_to_dict(url), limits.connect)
    # What the lookup took comes off the connection's time (libpq takes whole seconds, at least 2).
    left = max(2, math.ceil(limits.connect - (time.monotonic() - started)))
    conn = _connection_class().connect(url, autocommit=True, connect_timeout=str(left), **addresses)
    conn.answer_within = limits.answer
    conn.execute(f"SET statement_timeout = {max(1, round(limits.answer * 1000))}")
    return conn


def _looked_up(params: dict[str, Any], seconds: float) -> dict[str, str]:
    """``host``, ``hostaddr`` and ``port`` for libpq with every host name looked up within ``seconds``
    (as psycopg would: each address of each host, one attempt each), or ``{}`` when none needs it."""
    import psycopg

    hosts = str(params.get("host") or os.environ.get("PGHOST") or "").split(",")
    if params.get("hostaddr") or os.environ.get("PGHOSTADDR") or not any(map(_named, hosts)):
        return {}
    ports = str(params.get("port") or os.environ.get("PGPORT") or "5432").split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports
    found: dict[str, list[str]] = {}
    failed: list[BaseException] = []

    def look_up() -> None:
        for host, port in zip(hosts, ports, strict=False):
            if _named(host) and host not in found:
                try:
                    answers = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP, type=socket.SOCK_STREAM)
                except OSError as exc:
                    failed.append(psycopg.OperationalError(f"failed to resolve host {host!r}: {exc}"))
                    return
                found[host] = [str(answer[4][0]) for answer in answers]

    # A daemon thread: a resolver that never answers keeps it, not the process, once we stop waiting.
    lookup = threading.Thread(target=look_up, name="store-host-lookup", daemon=True)
    lookup.start()
    lookup.join(seconds)
    if lookup.is_alive():
        raise NoLookup(next(h for h in hosts if _named(h) and h not in found))
    if failed:
        raise failed[0]
    attempts = [(host, address, port) for host, port in zip(hosts, ports, strict=False)
                for address in (found[host] if _named(host) else [""])]
    return {name: ",".join(a[i] for a in attempts) for i, name in enumerate(("host", "hostaddr", "port"))}


def _named(host: str) -> bool:
    """A host given by name (not a socket folder, an IP address, or nothing)."""
    if not host or host.startswith("/") or host[1:2] == ":":
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return True
    return False


@lru_cache(maxsize=1)
def _connection_class() -> Any:
    """psycopg's Connection whose waits on the socket end after ``answer_within`` seconds of silence.

    Made on first use: psycopg is the ``postgres`` extra, imported only by a store on a server.
    """
    import psycopg

    class AnsweringConnection(psycopg.Connection):
        answer_within: float = ANSWER_SECONDS

        def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
            try:
                return super().wait(_heard_within(gen, self.answer_within), interval=interval, timeout=timeout)
            except NoAnswer:
                # Mid-statement: nothing more can be said on this connection (not even ROLLBACK).
                self.close()
                raise

    return AnsweringConnection


def _heard_within(gen: Generator[Any, Any, Any], seconds: float) -> Any:
    """``gen`` (psycopg's protocol: it yields what it waits for and is sent what became ready, or
    nothing when its wait's interval passed) stopped with :class:`NoAnswer` once the socket has been
    neither readable nor writable for ``seconds``."""
    heard = time.monotonic()
    try:
        waiting = next(gen)
        while True:
            ready = yield waiting
            now = time.monotonic()
            if ready:
                heard = now
            elif now - heard >= seconds:
                gen.close()
                raise NoAnswer
            waiting = gen.send(ready)
    except StopIteration as done:
        return done.value


_down: dict[str, tuple[float, str]] = {}
_down_lock = threading.Lock()


def mark_down(url: str, message: str, seconds: float) -> None:
    """Remember for ``seconds`` that the server at ``url`` did not answer, and the message that said so."""
    with _down_lock:
        _down[url] = (time.monotonic() + seconds, message)


def down(url: str) -> str | None:
    """The message of a recent failure to answer of the server at ``url``, or None."""
    with _down_lock:
        until, message = _down.get(url, (0.0, ""))
        if time.monotonic() < until:
            return message
        _down.pop(url, None)
        return None
