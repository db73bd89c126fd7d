"""The store's database: one SQLite file beside nothing else by default, or a PostgreSQL server for many machines.

Both speak the same few statements (``ON CONFLICT`` upserts, which SQLite has
had since 3.24); only the connection, the placeholders and the column types
differ. Tables::

    entry(stage, key, body, size, stored_at)  one record per (stage, key), written once
    text(digest, body)                        a long text, stored once whichever records hold it
    entry_text(stage, key, digest)            which texts a record holds (gc drops texts none holds)
    quarantine(stage, key, body, problem, at) rows that did not read back as a record
    claim(stage, key, host, pid, since)       a unit or request a process is computing
    lease(id, host, pid, started, refreshed)  a live run on the store (gc keeps what it wrote)

SQLite runs in WAL mode with ``synchronous=NORMAL``: a commit is a write to
the log, without an fsync, and survives a SIGKILL of the writer at any
point; a power cut may drop the last commits (redone on the next run) but
never leaves a torn row. Several processes share the file through SQLite's
own locking; a writer waits up to :data:`BUSY_SECONDS` for another's
transaction, and every transaction here is a handful of statements.

Writes from many threads commit in groups (:meth:`Database.grouped`): a
thread whose statements arrive while another's transaction is committing
waits for it, then commits everything that queued meanwhile in one
transaction. Each caller still returns only once its own statements are
committed, so what a caller was told is stored survives a SIGKILL as
before; a run's finished units and stored answers simply share commits
instead of paying one each.

One connection serves a :class:`Database` object and all its threads (a
lock around each statement or transaction): the work per statement is tens
of microseconds, far below a model call. A process that forked or unpickled
the object opens its own.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from multiverse.core import credentials
from multiverse.errors import InputError, StoreError, StoreUnavailable

__all__ = ["BUSY_SECONDS", "DB_NAME", "Database", "is_server", "open_database"]

#: the database file of a store directory
DB_NAME = "store.sqlite3"
#: how long a writer waits for another process's transaction
BUSY_SECONDS = 60.0
_SERVER_SCHEMES = ("postgresql://", "postgres://")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entry (stage TEXT NOT NULL, key TEXT NOT NULL, body {blob} NOT NULL,
    size BIGINT NOT NULL, stored_at {real} NOT NULL, PRIMARY KEY (stage, key)){without_rowid};
CREATE TABLE IF NOT EXISTS text (digest TEXT PRIMARY KEY, body {blob} NOT NULL){without_rowid};
CREATE TABLE IF NOT EXISTS entry_text (stage TEXT NOT NULL, key TEXT NOT NULL, digest TEXT NOT NULL,
    PRIMARY KEY (stage, key, digest)){without_rowid};
CREATE INDEX IF NOT EXISTS entry_text_digest ON entry_text (digest);
CREATE TABLE IF NOT EXISTS quarantine (id {serial} PRIMARY KEY, stage TEXT NOT NULL, key TEXT NOT NULL,
    body {blob}, problem TEXT NOT NULL, at {real} NOT NULL);
CREATE TABLE IF NOT EXISTS claim (stage TEXT NOT NULL, key TEXT NOT NULL, host TEXT NOT NULL, pid BIGINT NOT NULL,
    since {real} NOT NULL, PRIMARY KEY (stage, key)){without_rowid};
CREATE TABLE IF NOT EXISTS lease (id TEXT PRIMARY KEY, host TEXT NOT NULL, pid BIGINT NOT NULL,
    started {real} NOT NULL, refreshed {real} NOT NULL){without_rowid};
"""
# An index of entry(stored_at) that stores made before 2026-12-07 carry: nothing reads by it (gc reads a
# stage's rows whole), and keeping it cost every write a second b-tree insert, a tenth of its CPU.
_RETIRED = "DROP INDEX IF EXISTS entry_stored_at"
_SQLITE_TYPES = {"blob": "BLOB", "real": "REAL", "serial": "INTEGER", "without_rowid": " WITHOUT ROWID"}
_SERVER_TYPES = {"blob": "BYTEA", "real": "DOUBLE PRECISION", "serial": "BIGSERIAL", "without_rowid": ""}


def is_server(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a database server (``postgresql://...``) rather than a store directory."""
    return isinstance(location, str) and location.startswith(_SERVER_SCHEMES)


class Database:
    """The connection to one store's database: statements, transactions, and reopening after a fork."""

    #: what a message calls this database
    where: str

    def __init__(self, where: str):
        self.where = where
        self._lock = threading.RLock()
        self._conn: Any = None
        self._pid = -1
        self._group = _Group()
        self._group_pid = os.getpid()

    @property
    def label(self) -> str:
        """What a message calls this database: its file, or its server without a password."""
        return credentials.address_label(self.where) if is_server(self.where) else self.where

    def __getstate__(self) -> dict[str, Any]:
        return {"where": self.where}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["where"])  # type: ignore[misc]

    # -- what a dialect provides -------------------------------------------------------------

    def _connect(self) -> Any:
        raise NotImplementedError

    def _sql(self, statement: str) -> str:
        return statement

    def _begin(self, conn: Any) -> None:
        conn.execute("BEGIN")

    def _errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    # -- use ---------------------------------------------------------------------------------

    def _connection(self) -> Any:
        if self._conn is None or self._pid != os.getpid():
            self._conn = self._connect()
            self._pid = os.getpid()
        return self._conn

    @contextlib.contextmanager
    def _failing_clearly(self) -> Iterator[None]:
        try:
            yield
        except self._errors() as exc:
            raise StoreError(f"store {self.label}: the database failed ({_first_line(exc)}); "
                             "expected a store database this process can read and write") from None

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows ``statement`` selects."""
        with self._lock, self._failing_clearly():
            return list(self._connection().execute(self._sql(statement), tuple(params)).fetchall())

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        """Run one statement in its own transaction; how many rows it changed."""
        with self._lock, self._failing_clearly():
            return int(self._connection().execute(self._sql(statement), tuple(params)).rowcount)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Statements that commit together or not at all (nothing of them is seen before the commit)."""
        with self._lock, self._failing_clearly():
            conn = self._connection()
            self._begin(conn)
            try:
                yield Transaction(self, conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _all_in_one(self, lists: Sequence[Sequence[tuple[str, Sequence[Any]]]]) -> list[list[int]]:
        """Every list's statements in one transaction; how many rows each changed."""
        with self.transaction() as tx:
            return [[tx.execute(sql, params) for sql, params in statements] for statements in lists]

    def grouped(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[int]:
        """Run ``statements`` in a transaction shared with whatever other threads submit meanwhile;
        how many rows each changed. Returns once they are committed; if the shared transaction
        fails, every caller in it gets the error and none of their statements is kept."""
        if self._group_pid != os.getpid():  # forked: the parent's waiters are not here
            self._group, self._group_pid = _Group(), os.getpid()
        return self._group.submit(self, statements)

    def close(self) -> None:
        """Close the connection (the object opens a new one when used again)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                with contextlib.suppress(Exception):
                    self._conn.close()
            self._conn = None


class _Waiting:
    """One caller's statements in a group commit, and what became of them."""

    __slots__ = ("done", "error", "result", "statements")

    def __init__(self, statements: Sequence[tuple[str, Sequence[Any]]]):
        self.statements = statements
        self.result: list[int] = []
        self.error: BaseException | None = None
        self.done = False


class _Group:
    """Group commit: the first caller to find no commit under way commits every caller's statements
    queued by then, in one transaction; the others wait on a condition, no thread of its own."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._queued: list[_Waiting] = []
        self._committing = False

    def submit(self, db: Database, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[int]:
        mine = _Waiting(statements)
        with self._cond:
            self._queued.append(mine)
            while self._committing and not mine.done:
                self._cond.wait()
            if not mine.done:  # no commit under way: this caller commits the queue
                self._committing = True
                batch, self._queued = self._queued, []
        if not mine.done:
            try:
                results = db._all_in_one([w.statements for w in batch])
            except BaseException as exc:
                with self._cond:
                    for waiting in batch:
                        waiting.error, waiting.done = exc, True
            else:
                with self._cond:
                    for waiting, result in zip(batch, results):
                        waiting.result, waiting.done = result, True
            finally:
                with self._cond:
                    self._committing = False
                    self._cond.notify_all()
        if mine.error is not None:
            raise mine.error
        return mine.result


class Transaction:
    """Statements inside :meth:`Database.transaction`."""

    def __init__(self, db: Database, conn: Any):
        self._db, self._conn = db, conn

    def execute(self, statement: str, params: Sequence[Any] = ()) -> int:
        return int(self._conn.execute(self._db._sql(statement), tuple(params)).rowcount)

    def many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            cursor = self._conn.cursor()
            cursor.executemany(self._db._sql(statement), [tuple(r) for r in rows])

    def query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._conn.execute(self._db._sql(statement), tuple(params)).fetchall())


class SQLiteDatabase(Database):
    """The store's own file, ``<store>/store.sqlite3``, in WAL mode."""

    def __init__(self, where: str):
        super().__init__(where)
        self.path = where

    def _connect(self) -> sqlite3.Connection:
        _check_file(Path(self.path))
        try:
            # Made here, 0o666 & umask like any file the user writes: SQLite would make it 0o644
            # whatever the umask (a group-shared store needs 0o664), and its log files copy its mode.
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666))
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(f"store {Path(self.path).parent}: cannot create its database ({exc.strerror}); "
                             "expected a directory you can write to") from None
        # isolation_level=None: this code opens its transactions itself, and a lone statement commits at once.
        conn = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise sqlite3.OperationalError("the database could not switch to WAL mode")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'lease'").fetchone():
                conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA.format(**_SQLITE_TYPES) + "COMMIT;")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'entry_stored_at'").fetchone():
                with contextlib.suppress(sqlite3.OperationalError):  # busy or read-only: it only costs speed
                    conn.execute(_RETIRED)
        except BaseException:
            conn.close()
            raise
        return conn

    def _begin(self, conn: Any) -> None:
        conn.execute("BEGIN IMMEDIATE")  # the write lock now: no deadlock upgrading a read later

    def _all_in_one(self, lists: Sequence[Sequence[tuple[str, Sequence[Any]]]]) -> list[list[int]]:
        # transaction() without its two generator context managers: this is every write's path.
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    results = [[conn.execute(sql, params).rowcount for sql, params in statements] for statements in lists]
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(f"store {self.label}: the database failed ({_first_line(exc)}); "
                                 "expected a store database this process can read and write") from None
            return results

    def _errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)


class ServerDatabase(Database):
    """A PostgreSQL database (psycopg 3) that the workers of many machines share.

    Every wait on the server is bounded (``multiverse.store._server``): a server
    that cannot be reached, or stops answering, is one :class:`StoreUnavailable`
    line naming its address without credentials, within its timeout.
    """

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError(f"store {self.label}: a PostgreSQL store needs psycopg; expected it "
                             "installed (pip install 'multiverse[postgres]')") from None
        from multiverse.store import _server as server

        self._unless_down()
        try:
            limits = server.timeouts(self.where)
        except InputError as exc:
            raise InputError(f"store {self.label}: {exc}", param="store") from None
        except psycopg.Error as exc:
            raise StoreUnavailable(f"store {self.label}: could not connect ({self._said(exc)}); "
                                   "expected a reachable PostgreSQL database") from None
        try:
            conn = server.connect(self.where, limits)
        except psycopg.errors.ConnectionTimeout:
            raise self._unavailable(f"could not connect: {limits.connect_words()}", limits.connect) from None
        except server.NoLookup as exc:
            raise self._unavailable(f"could not connect: {limits.lookup_words(exc.host)}", limits.connect) from None
        except server.NoAnswer:
            raise self._unavailable(f"could not connect: {limits.answer_words()}", limits.answer) from None
        except psycopg.Error as exc:
            raise StoreUnavailable(f"store {self.label}: could not connect ({self._said(exc)}); "
                                   "expected a reachable PostgreSQL database") from None
        try:
            with conn.transaction():
                # One creator at a time: CREATE TABLE IF NOT EXISTS races with itself in PostgreSQL.
                conn.execute("SELECT pg_advisory_xact_lock(727274)")
                conn.execute(_SCHEMA.format(**_SERVER_TYPES))
                conn.execute(_RETIRED)
        except BaseException:
            conn.close()
            raise
        return conn

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def _errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.Error,)

    def _said(self, exc: BaseException) -> str:
        """The first line of an error about this server, without the credentials of its address."""
        return credentials.without_address_secrets(_first_line(exc), self.where)

    def _unless_down(self) -> None:
        from multiverse.store import _server as server

        message = server.down(self.where)
        if message is not None:
            raise StoreUnavailable(message)

    def _unavailable(self, what: str, seconds: float) -> StoreUnavailable:
        from multiverse.store import _server as server

        message = f"store {self.label}: {what}; expected a PostgreSQL server that answers"
        server.mark_down(self.where, message, seconds)
        return StoreUnavailable(message)

    @contextlib.contextmanager
    def _failing_clearly(self) -> Iterator[None]:
        import psycopg

        from multiverse.store import _server as server

        self._unless_down()
        try:
            yield
        except server.NoAnswer:
            self._conn = None  # closed by the wait that gave up: the next statement connects again
            limits = server.timeouts(self.where)
            raise self._unavailable(limits.answer_words(), limits.answer) from None
        except psycopg.errors.QueryCanceled as exc:
            # Its statement_timeout (the words are the server's, in its language), or an administrator.
            limits = server.timeouts(self.where)
            raise StoreUnavailable(f"store {self.label}: the server cancelled a statement ({self._said(exc)}; "
                                   f"${server.ANSWER_VARIABLE} sets its time, now {limits.answer:g} s); "
                                   "expected a PostgreSQL server that answers") from None
        except psycopg.OperationalError as exc:
            conn = self._conn
            if conn is not None and not conn.closed and not conn.broken:
                raise StoreError(f"store {self.label}: the database failed ({self._said(exc)}); "
                                 "expected a store database this process can read and write") from None
            # The connection broke (the server restarted, the network went): say so, and start afresh next time.
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = None
            raise StoreUnavailable(f"store {self.label}: the connection to the server failed ({self._said(exc)}); "
                                   "expected a PostgreSQL server that answers") from None
        except psycopg.Error as exc:
            raise StoreError(f"store {self.label}: the database failed ({self._said(exc)}); "
                             "expected a store database this process can read and write") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        with self._lock, self._failing_clearly():
            conn = self._connection()
            with conn.transaction():
                yield Transaction(self, conn)


def open_database(location: str | os.PathLike[str]) -> Database:
    """The database of the store at ``location``: a server's URL, or a store directory (its file)."""
    if is_server(location):
        return ServerDatabase(str(location))
    return SQLiteDatabase(os.path.join(location, DB_NAME))


def _check_file(path: Path) -> None:
    """Only a regular file (or none yet) is opened as the database: never a link, a folder or a FIFO."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    import stat

    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"store {path.parent}: {path.name} is not a regular file; expected the store's database")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
