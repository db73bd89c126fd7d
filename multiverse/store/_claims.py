"""Claims: concurrent runs on one store do not pay for the same unit twice.

Before computing a unit a run may claim it: an exclusive-create
``<key>.claim`` file beside the entry, naming the host, process and time.
Another run that finds a live claim waits for the entry instead of calling
the model. A claim whose process is gone (same host) or that is older than
its lease is stale and may be taken over, so a killed run never blocks
anyone for long. Claims are an economy, not a lock: correctness still rests
on write-once entries (``multiverse.store._store``).
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Collection, Iterable
from typing import Protocol

from multiverse.core import interrupt
from multiverse.store._files import NO_LINK_ERRNOS, TMP_SUFFIX, unlink_quietly

__all__ = ["Claimant", "Held", "claim", "holder", "is_live", "release", "release_of"]


class Claimant(Protocol):
    """What :class:`Held` claims units of: a store (``multiverse.store._store.Store``), named by what it does
    so that this module need not import the store that imports it."""

    def claim(self, stage: str, key: str) -> bool: ...

    def release(self, stage: str, key: str) -> None: ...


def claim(path: str, key: str, lease: float) -> bool:
    """Claim the unit whose claim file is ``path``; False if someone else holds a live claim.

    A stale claim is taken over. Two processes taking over the same stale
    claim at the same moment may both proceed: the entry is still written once.
    """
    # The claim appears with its content in one step (a temp file hard-linked
    # into place), so nobody ever reads a half-written claim as stale.
    tmp = os.path.join(os.path.dirname(path), f".{key}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}\n")
    try:
        for _ in range(2):
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                if is_live(path, lease):
                    return False
                unlink_quietly(path)  # stale: take it over (one of several takers wins the link)
            except OSError as exc:
                if exc.errno not in NO_LINK_ERRNOS:
                    raise
                return True  # no hard links here: claims are only an economy, compute anyway
        return False
    finally:
        unlink_quietly(tmp)


def release(path: str) -> None:
    """Drop this process's claim; someone else's (taken over meanwhile) is left alone."""
    found = holder(path)
    if found is not None and found[:2] == (socket.gethostname(), os.getpid()):
        unlink_quietly(path)


def release_of(paths: Iterable[str], pids: Collection[int]) -> int:
    """Drop the claims among ``paths`` held on this host by ``pids`` (ended processes of this
    run, killed before they could release them); returns how many."""
    here, dropped = socket.gethostname(), 0
    for path in paths:
        found = holder(path)
        if found is not None and found[0] == here and found[1] in pids:
            unlink_quietly(path)
            dropped += 1
    return dropped


def is_live(path: str, lease: float) -> bool:
    """Whether the claim at ``path`` is held by a live process within its lease."""
    found = holder(path)
    if found is None:
        return False
    host, pid, since = found
    if time.time() - since > lease:
        return False
    if host == socket.gethostname() and pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, someone else's
    return True


def holder(path: str) -> tuple[str, int, float] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            host, pid, since = fh.read().split()
        return host, int(pid), float(since)
    except (OSError, ValueError):
        return None


class Held:
    """The claims a run holds in ``store``, so that leaving on a signal releases them all. Thread-safe.

    A run's threads may never get to release their claims once it stops, so
    the run releases what is left with :meth:`release_all` on its way out.
    """

    def __init__(self, store: Claimant):
        self.store = store
        self._held: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def take(self, stage: str, key: str) -> bool | None:
        """Claim ``(stage, key)``: True if taken, False if someone holds it, None if the run is stopping.

        "Not stopping, so claim" is one step: no claim is taken after ``release_all`` has begun.
        """
        with self._lock:
            if interrupt.requested():
                return None
            if not self.store.claim(stage, key):
                return False
            self._held.add((stage, key))
            return True

    def release(self, stage: str, key: str) -> None:
        """Release the claim, if this run still holds it."""
        with self._lock:
            held = (stage, key) in self._held
            self._held.discard((stage, key))
        if held:
            self.store.release(stage, key)

    def release_all(self) -> None:
        """Release every claim still held (a run leaving on a signal)."""
        with interrupt.signals_held():
            while True:
                with self._lock:
                    if not self._held:
                        return
                    stage, key = self._held.pop()
                self.store.release(stage, key)
