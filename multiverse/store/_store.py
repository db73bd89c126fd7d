"""The store: content-addressed, write-once records of every model call, in one database.

Every case, transcript, judgment, rubric draft and model answer is one row
of the store's database (``multiverse.store._db``): SQLite in WAL mode in
``<root>/store.sqlite3`` by default, or a PostgreSQL server named by a
``postgresql://`` URL for runs whose workers are on many machines. The key of
a row is the stage's cache key (``keys.digest`` of exactly the inputs the
stage reads). Why it is built this way:

- **Write-once rows.** An entry is inserted with ``ON CONFLICT DO NOTHING``
  in one transaction with its texts: the first writer wins, later writers
  get ``False``, and a reader sees a complete entry or none. A process
  killed at any point leaves every committed entry whole; a transaction it
  had open is rolled back by the database.
- **A few files, not one per entry.** A store directory holds the database
  and its two WAL files; a 100k-universe grid is rows, not millions of inodes.
  A record is one row of compact JSON, compressed only when it is large
  (``multiverse.store._packing``); rows of the earlier layout, whose long
  texts were kept once in a table of their own, read as before.
- **Commits in groups.** The writes of a run's threads share transactions
  (``Database.grouped``): one commit per group of finished units and answers,
  each writer told only once its row is committed.
- **A bad entry is a miss, never a crash.** A row that does not decompress,
  parse, or have the shape its stage needs (``multiverse.store._records``) is
  moved to the ``quarantine`` table with a :class:`CorruptEntryWarning` and
  counted; ``get()`` answers ``None`` and the unit is computed again.
- **Stores from before the database read transparently.** An entry file of
  an older store (``<root>/<stage>/<key[:2]>/<key>.json``) is read when its
  row is missing, with all the file store's defences
  (``multiverse.store._legacy``); ``multiverse store migrate`` moves them in.
- **A store that vanishes is an error.** Once a store has been opened (a run
  opens it before its first call), a missing root or database file is never
  silently recreated: :class:`~multiverse.errors.StoreError`.
- **No credentials.** Records are scrubbed before they are written: the
  value of every credential in use (``multiverse.core._credentials``) becomes
  ``[redacted]`` wherever it appears, and credential-named dict keys are dropped.
- **Claims, so concurrent runs do not pay twice** (``multiverse.store._claims``):
  rows too, ended by the very transaction that stores the entry.

Provenance is written by the stages; the store only adds ``stored_at``.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

from multiverse.errors import InputError, StoreError
from multiverse.store import _claims, _gc
from multiverse.store._db import SQLiteDatabase, is_server, open_database
from multiverse.store._files import check_name
from multiverse.store._gc import GcReport, StoreStats
from multiverse.store._legacy import MAX_ENTRY_BYTES, CorruptEntryWarning, LegacyFiles
from multiverse.store._packing import Packed, parse, refers, unpack
from multiverse.store._path import check_store_path, default_store_path
from multiverse.store._scrub import clean_row, scrub

__all__ = ["CLAIM_LEASE", "MAX_ENTRY_BYTES", "CorruptEntryWarning", "Store", "check_store_path", "default_store_path",
           "open_store", "scrub"]


#: A claim older than this is stale whoever holds it (a unit is one rollout or one judge call).
CLAIM_LEASE = 900.0
#: keys per statement when many are read at once (below every database's limit on parameters)
_BATCH = 500

class Store:
    """Content-addressed, write-once records in the database of the store at ``root``.

    ``root`` is a store directory (its database is ``store.sqlite3`` in it) or
    a ``postgresql://`` URL. ``stage`` is ``"case"``, ``"transcript"``,
    ``"judgment"``, ``"request"`` or ``"rubric"`` (any ``[A-Za-z0-9_-]`` name
    works); ``key`` is that stage's cache key. Safe to share between threads,
    processes and (with a server) machines. Nothing is created until the
    first :meth:`put`, :meth:`claim` or :meth:`open`.

    ``shapes`` maps a stage to ``check(record) -> None | problem`` (the
    pipeline passes ``multiverse.store._records.SHAPES``); a record that fails its
    check is quarantined on read. ``existing=True`` says the root was already
    opened by someone else (a run's workers): it is never recreated.
    """

    def __init__(self, root: str | os.PathLike[str], *, shapes: Mapping[str, Any] | None = None, existing: bool = False):
        self.server = is_server(root)
        self.root: Any = str(root) if self.server else Path(root).expanduser()
        #: where the store is, as a string another process can open it by
        self.location = str(self.root)
        self.shapes = dict(shapes or {})
        self.db = open_database(self.location)
        # Set once the root is known to exist: from then on its absence is an error.
        self._opened = existing
        self._connected = False
        self._lock = threading.Lock()
        self._mine: set[tuple[str, str]] = set()  # the claims this object holds
        self.legacy = None if self.server else LegacyFiles(self.root, self.shapes, self._count_quarantined)
        #: entries this instance moved into quarantine
        self.quarantined = 0

    def __repr__(self) -> str:
        return f"Store({self.db.label if self.server else self.location!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.location, "shapes": self.shapes, "existing": True}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["root"], shapes=state["shapes"], existing=state["existing"])  # type: ignore[misc]

    def _count_quarantined(self) -> None:
        with self._lock:
            self.quarantined += 1

    def open(self) -> Store:
        """Create the store if needed; from now on a vanished root raises ``StoreError``."""
        if self._opened:
            self._check_root()
        elif not self.server:
            self.root.mkdir(parents=True, exist_ok=True)
        self._opened = True
        self._ready(create=True)
        return self

    def _check_root(self) -> None:
        if self.server or not self._opened:
            return
        if self._connected and isinstance(self.db, SQLiteDatabase):
            # An open connection writes on into a deleted file; one stat, as the file goes with its root.
            gone = not os.path.isfile(self.db.path)
        else:
            gone = not os.path.isdir(self.location)
        if gone:
            raise StoreError(f"store {self.root}: it was deleted while in use; "
                             "expected it to stay for the whole run (rerun to recompute what was lost)")

    def _ready(self, *, create: bool = False) -> bool:
        """Whether the database is there to be read (``create``: make it, and the root, if need be)."""
        self._check_root()
        if self._connected or self.server:
            self._connected = True
            return True
        assert isinstance(self.db, SQLiteDatabase)
        if not create and not os.path.isfile(self.db.path):
            return False  # nothing stored yet: reading creates nothing
        if create and not self._opened:
            self.root.mkdir(parents=True, exist_ok=True)
            self._opened = True
        self.db.query("SELECT 1 FROM lease LIMIT 1")  # connects, and makes the tables of a new store
        self._connected = True
        return True

    # -- reading ---------------------------------------------------------

    def get(self, stage: str, key: str) -> dict[str, Any] | None:
        """The record stored under ``(stage, key)``, or ``None`` if absent or unusable."""
        check_name("stage", stage)
        check_name("key", key)
        if self._ready():
            rows = self.db.query("SELECT body FROM entry WHERE stage = ? AND key = ?", (stage, key))
            if rows:
                return self._record(stage, key, rows[0][0], self._texts)
        return self.legacy.get(stage, key) if self.legacy is not None else None

    def get_many(self, stage: str, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """``{key: record}`` for the given keys that are stored; missing ones are absent."""
        check_name("stage", stage)
        wanted = list(dict.fromkeys(check_name("key", k) for k in keys))
        found: dict[str, dict[str, Any]] = {}
        if self._ready():
            for start in range(0, len(wanted), _BATCH):
                chunk = wanted[start:start + _BATCH]
                marks = ",".join("?" * len(chunk))
                rows = self.db.query(f"SELECT key, body FROM entry WHERE stage = ? AND key IN ({marks})", (stage, *chunk))
                for key, body in rows:
                    record = self._record(stage, key, body, self._texts)
                    if record is not None:
                        found[key] = record
        if self.legacy is not None and self.legacy.present(stage):
            for key in wanted:
                if key not in found:
                    record = self.legacy.get(stage, key)
                    if record is not None:
                        found[key] = record
        return found

    def has(self, stage: str, key: str) -> bool:
        """Whether an entry is stored under the key (not parsed: a bad one counts until read)."""
        check_name("stage", stage)
        check_name("key", key)
        if self._ready() and self.db.query("SELECT 1 FROM entry WHERE stage = ? AND key = ?", (stage, key)):
            return True
        return self.legacy is not None and self.legacy.present(stage) and self.legacy.has(stage, key)

    def keys(self, stage: str) -> Iterator[str]:
        """The keys stored in ``stage``, in sorted order; temp and corrupt files are skipped."""
        check_name("stage", stage)  # here, not when the iterator is first read
        found = {k for (k,) in self.db.query("SELECT key FROM entry WHERE stage = ?", (stage,))} if self._ready() else set()
        if self.legacy is not None:
            found.update(self.legacy.keys(stage))
        return iter(sorted(found))

    def _texts(self, digests: Iterable[str]) -> dict[str, Any]:
        wanted = sorted(digests)
        out: dict[str, Any] = {}
        for start in range(0, len(wanted), _BATCH):
            chunk = wanted[start:start + _BATCH]
            out.update(self.db.query(f"SELECT digest, body FROM text WHERE digest IN ({','.join('?' * len(chunk))})",
                                     chunk))
        return out

    def _record(self, stage: str, key: str, body: Any, texts: Any) -> dict[str, Any] | None:
        value, problem = parse(body)
        if problem is None and not isinstance(value, dict):
            problem = f"not a JSON object ({type(value).__name__})"
        if problem is None and refers(body):
            value, problem = unpack(value, texts)
        if problem is None:
            check = self.shapes.get(stage)
            problem = check(value) if check is not None else None
            if problem is None:
                return cast("dict[str, Any] | None", value)
        self._quarantine(stage, key, body, problem)
        return None

    def _quarantine(self, stage: str, key: str, body: Any, problem: str) -> None:
        # Another reader may have quarantined it already and a writer put a good entry in
        # its place: only the very row read is moved.
        with self.db.transaction() as tx:
            moved = tx.execute("DELETE FROM entry WHERE stage = ? AND key = ? AND body = ?", (stage, key, body))
            if moved:
                tx.execute("DELETE FROM entry_text WHERE stage = ? AND key = ?", (stage, key))
                tx.execute("INSERT INTO quarantine (stage, key, body, problem, at) VALUES (?, ?, ?, ?, ?)",
                           (stage, key, body, problem, time.time()))
        if not moved:
            return
        self._count_quarantined()
        warnings.warn(f"{self.db.label}: {stage}/{key}: bad store entry ({problem}) moved to its quarantine; "
                      "it will be redone", CorruptEntryWarning, stacklevel=4)

    # -- writing ---------------------------------------------------------

    def put(self, stage: str, key: str, record: Mapping[str, Any], *, durable: bool = True) -> bool:
        """Store ``record`` under ``(stage, key)`` unless an entry exists.

        Returns ``True`` if this call wrote the entry, ``False`` if one was
        already there (the first writer wins; its record is kept). The record
        is scrubbed of credentials and gets ``stored_at`` (UTC ISO) if absent.
        Raises ``ValueError`` for a bad stage or key and ``TypeError`` for a
        record that is not JSON-serialisable, before anything is written.
        A claim this object holds on the key ends in the same transaction.

        ``durable`` is kept for callers of the file store: every commit is
        now as safe as the database's log (see ``multiverse.store._db``).
        """
        check_name("stage", stage)
        check_name("key", key)
        if type(record) is not dict and not isinstance(record, Mapping):
            raise TypeError(f"store: {stage}/{key}: expected a dict record, got {type(record).__name__}")
        # The last sweep before the disk: credential values redacted and text
        # made UTF-8-safe here too, whatever stage or tool function composed the record.
        # A record that is not JSON raises TypeError here, before anything is looked at.
        packed = clean_row(record, _now_iso())
        if self.legacy is not None and self.legacy.present(stage) and self.legacy.clear_for_put(stage, key):
            return False  # an entry file of an older store holds it
        return self.insert(stage, key, packed)

    def insert(self, stage: str, key: str, packed: Packed, stored_at: float | None = None) -> bool:
        """Write a packed record (scrubbed and storable already) as a row unless one is there;
        ``stored_at``: when it was made (epoch seconds, now by default)."""
        self._ready(create=True)
        with self._lock:
            mine = (stage, key) in self._mine
            self._mine.discard((stage, key))
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if mine:  # the claim ends in the very transaction that stores the entry
            statements.append(("DELETE FROM claim WHERE stage = ? AND key = ? AND host = ? AND pid = ?",
                               (stage, key, _claims.HOST, os.getpid())))
        statements.append(("INSERT INTO entry (stage, key, body, size, stored_at) VALUES (?, ?, ?, ?, ?) "
                           "ON CONFLICT (stage, key) DO NOTHING",
                           (stage, key, packed.body, packed.size, time.time() if stored_at is None else stored_at)))
        # Shared with the other threads' writes of the moment: one commit for a group of finished units.
        return bool(self.db.grouped(statements)[-1])

    # -- claims ----------------------------------------------------------

    def claim(self, stage: str, key: str, *, lease: float = CLAIM_LEASE) -> bool:
        """Claim ``(stage, key)`` for this process; False if someone else holds a live claim
        (see ``multiverse.store._claims``)."""
        check_name("stage", stage)
        check_name("key", key)
        self._ready(create=True)
        if not _claims.claim(self.db, stage, key, lease):
            return False
        with self._lock:
            self._mine.add((stage, key))
        return True

    def claim_block(self, stage: str, keys: Iterable[str], *, lease: float = CLAIM_LEASE) -> _claims.Block:
        """Claim at once every key of ``keys`` neither stored nor held live by another process:
        which were taken, stored or held elsewhere (``multiverse.store._claims.claim_block``)."""
        check_name("stage", stage)
        wanted = [check_name("key", k) for k in keys]
        self._ready(create=True)
        block = _claims.claim_block(self.db, stage, wanted, lease)
        with self._lock:
            self._mine.update((stage, key) for key in block.taken)
        return block

    def claimed(self, stage: str, key: str, *, lease: float = CLAIM_LEASE) -> bool:
        """Whether someone holds a live claim on ``(stage, key)``."""
        return self._ready() and _claims.is_live(self.db, stage, key, lease)

    def release(self, stage: str, key: str) -> None:
        """Drop this process's claim (after storing the entry, or giving up)."""
        with self._lock:
            if (stage, key) not in self._mine:
                return  # never taken here, or ended by the put that stored the entry
            self._mine.discard((stage, key))
        if self._ready():
            _claims.release(self.db, stage, key)

    # -- keeping it tidy -------------------------------------------------

    def stats(self) -> StoreStats:
        """Entries and bytes per stage and in total, plus stray temp and quarantined files
        (``multiverse.store._gc.stats``)."""
        return _gc.stats(self.location, self.db if self._ready() else None)

    def gc(self, keep: Mapping[str, Collection[str]] | None = None, *, dry_run: bool = False,
           temp_age: float = 3600.0, fresh: float = 3600.0) -> GcReport:
        """Remove entries not in ``keep``, quarantined entries, stale claims and temp files; never an
        entry written in the last ``fresh`` seconds or since a live run started
        (``multiverse.store._gc.gc``)."""
        return _gc.gc(self.location, self.db if self._ready() else None, keep, dry_run=dry_run,
                      temp_age=temp_age, fresh=fresh)

    def close(self) -> None:
        """Close the connection to the database (it reopens if the store is used again)."""
        self.db.close()
        self._connected = False


_second: tuple[int, str] = (-1, "")


def _now_iso() -> str:
    """Now in UTC, ISO to the second (the same string for every write of that second)."""
    global _second
    now = time.time()
    second, text = _second
    if int(now) != second:
        text = datetime.fromtimestamp(int(now), timezone.utc).isoformat(timespec="seconds")
        _second = (int(now), text)
    return text


def open_store(given: Store | str | os.PathLike[str]) -> Store:
    """The store a caller named for reading what it already holds: a :class:`Store` as it is, else the
    existing directory (or server) ``given`` (``InputError`` otherwise; nothing is created).

    No environment variable, no default and never a store a folder's manifest
    names: the caller chose this store (a report shows transcripts from it).
    """
    if isinstance(given, Store):
        return given
    if not is_server(given) and not Path(given).is_dir():
        raise InputError(f"store: {given}: expected the store directory that holds the run's transcripts",
                         param="store")
    return Store(given, existing=True)
