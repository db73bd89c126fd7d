"""One pool of HTTP connections per OpenAI-compatible endpoint and key, sized for the run.

litellm looks up (or builds) an openai client on every call, and the one it
builds sits on a bare ``httpx.Client`` (100 connections, 20 kept alive): at
many jobs, calls queue for a connection and keep opening new ones. Measured
with ``tests/bench/bench_concurrency.py``, one client for all calls made 256
jobs at 1 s latency 8x faster. So the model client passes litellm, per
request (litellm's ``client=``), the ``openai.OpenAI`` of its endpoint: one per
(``api_base``, key), with ``max_retries=0`` (the run retries, paced) and room
for ``2 * jobs`` connections, ``jobs`` of them kept alive (openai's
``DefaultHttpxClient`` otherwise: its timeout, redirects).

Clients are found by a digest of the key, never by the key itself, and the
key lives only inside its openai client (which never prints it).

The pools are the run's: ``multiverse.run`` closes them when it ends (through
``LiteLLMClient.close``), and a pool dropped unclosed is closed when it is
garbage-collected, so no socket is left for the interpreter to warn about.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from typing import Any

__all__ = ["Connections"]


class Connections:
    """The run's ``openai.OpenAI`` clients, one per (``api_base``, key). Thread-safe."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        # Holds the clients, not self: closes them when this pool is collected (or at exit).
        self._finalizer = weakref.finalize(self, _close_all, self._clients)

    def client(self, api_base: str, api_key: str) -> Any:
        """The openai client for ``api_base`` with ``api_key`` (built on first use)."""
        key = (api_base, hashlib.sha256(api_key.encode()).hexdigest())
        found = self._clients.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._clients.get(key)
            if found is None:
                import importlib

                import openai

                # The HTTP library openai's own client is built on (httpx, or httpx2 since openai 3), for its Limits.
                http = importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
                limits = http.Limits(max_connections=2 * self.jobs, max_keepalive_connections=self.jobs)
                found = self._clients[key] = openai.OpenAI(
                    base_url=api_base, api_key=api_key, max_retries=0, http_client=openai.DefaultHttpxClient(limits=limits)
                )
            return found

    def close(self) -> None:
        """Close every pool (a client used after this builds new ones)."""
        with self._lock:
            clients = dict(self._clients)
            self._clients.clear()
        _close_all(clients)


def _close_all(clients: dict[Any, Any]) -> None:
    for client in list(clients.values()):
        client.close()
    clients.clear()
