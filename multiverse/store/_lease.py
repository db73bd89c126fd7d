"""Leases: a live run marks the store it uses, so ``store gc`` leaves its work alone.

A run (or a draft) holds a lease for as long as it computes: one small file
``<store>/leases/<host>.<pid>.<random>.json`` giving the host, the process and
when the run started. ``Store.gc`` reads the live leases and keeps every
entry written since the oldest of them started, whatever the specs it was
given say: those entries are what live runs have just computed and will read
back when they assemble their tables.

A lease is live while its process runs (same host: ``kill(pid, 0)``) or,
for another host, while its file is fresh: the holder touches it every
:data:`REFRESH` seconds and it is stale after :data:`TTL`. A killed run thus
stops protecting anything after :data:`TTL` at most.

The lease also tells a run that its store was deleted under it: the file
is gone. The run then stops with a clear error instead of reporting the
missing entries as failed units.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Literal

__all__ = ["REFRESH", "TTL", "Lease", "live_leases"]

FOLDER = "leases"
REFRESH = 60.0
TTL = 600.0


class Lease:
    """The lease of one run on the store at ``root`` (a context manager)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        host = socket.gethostname()
        name = f"{_safe(host)}.{os.getpid()}.{secrets.token_hex(4)}.json"
        self.path = self.root / FOLDER / name
        self.started = time.time()
        self._body = {"host": host, "pid": os.getpid(), "started": self.started}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name("." + self.path.name + ".tmp")
        tmp.write_text(json.dumps(self._body), encoding="utf-8")
        os.replace(tmp, self.path)
        self._thread = threading.Thread(target=self._refresh, name="mv-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> Literal[False]:
        self._stop.set()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        return False

    def held(self) -> bool:
        """Whether the lease file is still there (it is gone if the store was deleted)."""
        return self.path.is_file()

    def _refresh(self) -> None:
        while not self._stop.wait(REFRESH):
            try:
                os.utime(self.path)
            except OSError:
                return  # deleted with the store: the run finds out through held()


def live_leases(root: str | os.PathLike, *, remove_stale: bool = False) -> list[dict]:
    """The live leases on the store at ``root`` (each ``{"host", "pid", "started"}``).

    With ``remove_stale``, lease files of runs that are gone are deleted.
    """
    folder = Path(root) / FOLDER
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    live = []
    host = socket.gethostname()
    for name in names:
        path = folder / name
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            mtime = path.lstat().st_mtime
            body = json.loads(path.read_text(encoding="utf-8"))
            pid, started = int(body["pid"]), float(body["started"])
            same_host = body["host"] == host
        except (OSError, ValueError, KeyError, TypeError):
            # Unreadable: assume live while fresh, rather than delete a live run's work.
            if time.time() - _mtime(path) < TTL:
                live.append({"host": "?", "pid": -1, "started": _mtime(path) - TTL})
            continue
        if _alive(pid) if same_host else time.time() - mtime < TTL:
            live.append({"host": body["host"], "pid": pid, "started": started})
        elif remove_stale:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
    return live


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:64] or "host"
