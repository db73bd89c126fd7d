"""Leases: a live run marks the store it uses, so ``store gc`` leaves its work alone.

A run (or a draft) holds a lease for as long as it computes: one row of the
store's ``lease`` table giving the host, the process and when the run
started. ``Store.gc`` reads the live leases and keeps every entry written
since the oldest of them started, whatever the specs it was given say: those
entries are what live runs have just computed and will read back when they
assemble their tables.

A lease is live while its process runs (same host: ``kill(pid, 0)``) or,
for another host, while its row is fresh: the holder refreshes it every
:data:`REFRESH` seconds and it is stale after :data:`TTL`. A killed run thus
stops protecting anything after :data:`TTL` at most.

The lease also tells a run that its store was deleted under it: the
database file (or the lease's row) is gone. The run then stops with a clear
error instead of reporting the missing entries as failed units.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Any, Literal

from multiverse.errors import StoreError
from multiverse.store._db import DB_NAME, Database, SQLiteDatabase, is_server, open_database

__all__ = ["REFRESH", "TTL", "Lease", "live_leases"]

REFRESH = 60.0
TTL = 600.0


class Lease:
    """The lease of one run on the store at ``root`` (a directory or a server's URL; a context manager)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root: str | Path = str(root) if is_server(root) else Path(root)
        self.id = f"{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(4)}"
        self.started = time.time()
        self._db: Database = open_database(str(self.root))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        if isinstance(self._db, SQLiteDatabase):
            Path(self._db.path).parent.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self._db.execute("INSERT INTO lease (id, host, pid, started, refreshed) VALUES (?, ?, ?, ?, ?)",
                         (self.id, socket.gethostname(), os.getpid(), self.started, now))
        self._thread = threading.Thread(target=self._refresh, name="mv-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self._stop.set()
        try:
            if self._file_there():
                self._db.execute("DELETE FROM lease WHERE id = ?", (self.id,))
        except StoreError:
            pass  # the store went with the run: nothing to release
        self._db.close()
        return False

    def held(self) -> bool:
        """Whether the lease is still there (it is gone if the store was deleted)."""
        try:
            return self._file_there() and bool(self._db.query("SELECT 1 FROM lease WHERE id = ?", (self.id,)))
        except StoreError:
            return False

    def _file_there(self) -> bool:
        # An open SQLite connection writes on into a deleted file: look at the name.
        return not isinstance(self._db, SQLiteDatabase) or os.path.isfile(self._db.path)

    def _refresh(self) -> None:
        while not self._stop.wait(REFRESH):
            try:
                if not self._file_there():
                    return
                self._db.execute("UPDATE lease SET refreshed = ? WHERE id = ?", (time.time(), self.id))
            except StoreError:
                return  # deleted with the store: the run finds out through held()


def live_leases(root: str | os.PathLike[str] | Database, *, remove_stale: bool = False) -> list[dict[str, Any]]:
    """The live leases on the store at ``root`` (each ``{"host", "pid", "started"}``).

    With ``remove_stale``, the leases of runs that are gone are deleted.
    """
    if isinstance(root, Database):
        db = root
    else:
        if not is_server(root) and not os.path.isfile(os.path.join(root, DB_NAME)):
            return []  # no store yet: no lease either
        db = open_database(str(root))
    live = []
    host = socket.gethostname()
    for lease_id, lease_host, pid, started, refreshed in db.query("SELECT id, host, pid, started, refreshed FROM lease"):
        if _alive(int(pid)) if lease_host == host else time.time() - float(refreshed) < TTL:
            live.append({"host": lease_host, "pid": int(pid), "started": float(started)})
        elif remove_stale:
            db.execute("DELETE FROM lease WHERE id = ? AND refreshed = ?", (lease_id, refreshed))
    return live


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
