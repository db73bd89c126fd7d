"""Claims: concurrent runs on one store do not pay for the same unit twice.

Before computing a unit a run may claim it: a row of the store's ``claim``
table naming the host, process and time. Another run that finds a live
claim waits for the entry instead of calling the model. A claim whose
process is gone (same host) or that is older than its lease is stale and may
be taken over, so a killed run never blocks anyone for long. Claims are an
economy, not a lock: correctness still rests on write-once entries
(``multiverse.store._store``).

Every statement here is one atomic step of the database: the claim is an
insert that fails if the row exists, a takeover deletes exactly the stale
row it read (a compare-and-delete), and a release deletes only this
process's own row. A store ends its own claims when it stores the entry
(``Store.put``), so a unit costs no separate release.

A Dask worker claims a whole block of units at once (:func:`claim_block`):
one transaction inserts a claim for each unit neither stored nor held by
someone else, and reads back who holds each, so a block of 32 units costs
one round trip to a database server, not 32.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Collection, Sequence
from typing import NamedTuple, Protocol

from multiverse.core import interrupt
from multiverse.store._db import Database

__all__ = ["Block", "Claimant", "HasDatabase", "Held", "claim", "claim_block", "holder", "is_live", "release", "release_of"]

#: this host, as claims name it
HOST = socket.gethostname()


class Claimant(Protocol):
    """What :class:`Held` claims units of: a store (``multiverse.store._store.Store``), named by what it does
    so that this module need not import the store that imports it."""

    def claim(self, stage: str, key: str) -> bool: ...

    def release(self, stage: str, key: str) -> None: ...


class HasDatabase(Protocol):
    """A store, as far as :func:`release_of` uses it: its database."""

    @property
    def db(self) -> Database: ...


def claim(db: Database, stage: str, key: str, lease: float) -> bool:
    """Claim ``(stage, key)``; False if someone else holds a live claim.

    A stale claim is taken over. Two processes taking over the same stale
    claim at the same moment: one wins the insert, the other is told False.
    """
    for attempt in range(2):
        insert = ("INSERT INTO claim (stage, key, host, pid, since) VALUES (?, ?, ?, ?, ?) "
                  "ON CONFLICT (stage, key) DO NOTHING", (stage, key, HOST, os.getpid(), time.time()))
        # The first try commits with the other threads' claims and entries of the moment.
        if (db.grouped([insert])[0] if attempt == 0 else db.execute(*insert)):
            return True
        found = holder(db, stage, key)
        if found is not None and _live(found, lease):
            return False
        if found is not None:  # stale: remove exactly that row, then try the insert again
            db.execute("DELETE FROM claim WHERE stage = ? AND key = ? AND host = ? AND pid = ? AND since = ?",
                       (stage, key, *found))
    return False


class Block(NamedTuple):
    """What :func:`claim_block` made of a block of keys, each in one list, in the block's order."""

    #: claimed by this call: to compute
    taken: list[str]
    #: stored already: nothing to compute
    stored: list[str]
    #: held by another live claim (another process's, or another block's of this process: two runs
    #: sharing a Dask cluster share its worker processes): waited for, not computed
    elsewhere: list[str]


#: keys per statement of a block (below every database's limit on parameters)
_CHUNK = 400
_STAMP_LOCK = threading.Lock()
_last_stamp = 0.0


def _stamp() -> float:
    """The time of a block's claims, distinct from every other block's of this process: its claims are
    told from theirs by it (a float near 1.7e9 holds steps of a microsecond)."""
    global _last_stamp
    with _STAMP_LOCK:
        _last_stamp = max(time.time(), _last_stamp + 1e-6)
        return _last_stamp


def claim_block(db: Database, stage: str, keys: Sequence[str], lease: float) -> Block:
    """Claim every key of ``keys`` that is neither stored nor claimed live by another process.

    One transaction per :data:`_CHUNK` keys: an insert of the claims that
    skips the stored keys and the held ones (``ON CONFLICT DO NOTHING``),
    then a read of each key's holder. A stale claim is taken over as
    :func:`claim` does (its exact row deleted, the insert tried again).
    """
    taken: set[str] = set()
    stored: set[str] = set()
    elsewhere: set[str] = set()
    wanted = list(dict.fromkeys(keys))
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start:start + _CHUNK]
        for attempt in range(2):
            mine, there, held = _claim_chunk(db, stage, chunk)
            taken |= mine
            stored |= there
            stale = [(key, found) for key, found in held.items() if attempt == 0 and not _live(found, lease)]
            elsewhere |= set(held) - {key for key, _ in stale}
            for key, found in stale:  # remove exactly the row read, then claim the key again
                db.execute("DELETE FROM claim WHERE stage = ? AND key = ? AND host = ? AND pid = ? AND since = ?",
                           (stage, key, *found))
            chunk = [key for key, _ in stale]
            if not chunk:
                break
    return Block([k for k in wanted if k in taken], [k for k in wanted if k in stored],
                 [k for k in wanted if k in elsewhere and k not in taken and k not in stored])


def _claim_chunk(db: Database, stage: str, chunk: list[str]) -> tuple[set[str], set[str], dict[str, tuple[str, int, float]]]:
    """(keys this process holds, keys stored, the others' holders) after claiming what ``chunk`` lets it."""
    rows, marks = ", ".join("(?)" for _ in chunk), ",".join("?" * len(chunk))
    me = (HOST, os.getpid(), _stamp())
    with db.transaction() as tx:
        # Both SQLite and PostgreSQL name a VALUES list's column column1; the WHERE also keeps
        # SQLite from reading ON CONFLICT as a join's ON.
        tx.execute(f"INSERT INTO claim (stage, key, host, pid, since) SELECT ?, CAST(block.column1 AS TEXT), ?, ?, ? "
                   f"FROM (VALUES {rows}) AS block WHERE NOT EXISTS (SELECT 1 FROM entry "
                   "WHERE entry.stage = ? AND entry.key = CAST(block.column1 AS TEXT)) ON CONFLICT (stage, key) DO NOTHING",
                   (stage, *me, *chunk, stage))
        holders = {str(key): (str(host), int(pid), float(since)) for key, host, pid, since in tx.query(
            f"SELECT key, host, pid, since FROM claim WHERE stage = ? AND key IN ({marks})", (stage, *chunk))}
        mine = {key for key, found in holders.items() if found == me}
        rest = [key for key in chunk if key not in mine]
        there: set[str] = set()
        if rest:
            there = {str(key) for (key,) in tx.query(
                f"SELECT key FROM entry WHERE stage = ? AND key IN ({','.join('?' * len(rest))})", (stage, *rest))}
    # A key neither held nor stored lost its claim between the two reads: another round claims it.
    held = {key: holders.get(key, ("", -1, 0.0)) for key in rest if key not in there}
    return mine, there, held


def release(db: Database, stage: str, key: str) -> None:
    """Drop this process's claim; someone else's (taken over meanwhile) is left alone."""
    db.execute("DELETE FROM claim WHERE stage = ? AND key = ? AND host = ? AND pid = ?",
               (stage, key, HOST, os.getpid()))


def release_of(store: HasDatabase, pids: Collection[int]) -> int:
    """Drop the claims in ``store`` held on this host by ``pids`` (ended processes of this
    run, killed before they could release them); returns how many."""
    db: Database = store.db
    dropped = 0
    for pid in set(pids):
        dropped += db.execute("DELETE FROM claim WHERE host = ? AND pid = ?", (HOST, int(pid)))
    return dropped


def is_live(db: Database, stage: str, key: str, lease: float) -> bool:
    """Whether someone holds a live claim on ``(stage, key)``."""
    found = holder(db, stage, key)
    return found is not None and _live(found, lease)


def holder(db: Database, stage: str, key: str) -> tuple[str, int, float] | None:
    """(host, pid, since) of the claim on ``(stage, key)``, if there is one."""
    rows = db.query("SELECT host, pid, since FROM claim WHERE stage = ? AND key = ?", (stage, key))
    if not rows:
        return None
    host, pid, since = rows[0]
    return str(host), int(pid), float(since)


def _live(found: tuple[str, int, float], lease: float) -> bool:
    host, pid, since = found
    if time.time() - since > lease:
        return False
    if host == HOST and pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, someone else's
    return True


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
