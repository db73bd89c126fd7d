"""The store: content-addressed, write-once records of every model call.

Every case, transcript, judgment and rubric draft is kept as one JSON file::

    <root>/<stage>/<key[:2]>/<key>.json

where ``key`` is the stage's cache key (``keys.digest`` of exactly the inputs
the stage reads). Why it is built this way:

- **Plain files, one per entry.** A directory shared by threads, processes
  and machines (NFS, SMB) needs no server, no database lock and
  no in-memory lock; a person can read any entry with ``cat`` or ``jq``.
  The two-character shard keeps directories small at 100k entries.
- **Write-once by hard link.** A writer writes a temp file in the entry's
  own directory, fsyncs it, then hard-links it to the final name. The link
  is atomic and fails if the name exists, so the first writer wins,
  later writers get ``False``, and a reader sees a complete entry or none.
  A crash leaves at most a temp file (``.<key>.<pid>.<rand>.tmp``), which
  ``keys()`` and ``get()`` never see and ``gc()`` removes once it is stale.
  Where hard links are unsupported (some FUSE, SMB or FAT mounts) the store
  falls back to a rename: still atomic, but on POSIX two racing writers may
  both report success, the later one's record being the one kept.
- **A bad entry is a miss, never a crash.** Only regular files under
  :data:`MAX_ENTRY_BYTES` are read, opened without following symlinks or
  blocking. Anything else (a folder, symlink, FIFO, device, huge file), a
  file that does not parse, or a record of the wrong shape for its stage
  (``multiverse.store._records``) is moved into ``<root>/quarantine/<stage>/`` with
  a :class:`CorruptEntryWarning` and counted; ``get()`` answers ``None``.
- **A store that vanishes is an error.** Once a store has been opened (a run
  opens it before its first call), a missing root is never silently
  recreated: :class:`~multiverse.errors.StoreError`.
- **No credentials.** Records are scrubbed before they touch the disk: the
  value of every credential in use (``multiverse.core._credentials``) becomes
  ``[redacted]`` wherever it appears, and credential-named dict keys are dropped.
- **Claims, so concurrent runs do not pay twice** (``multiverse.store._claims``).

Provenance is written by the stages; the store only adds ``stored_at``.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import threading
import time
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from multiverse.core import credentials
from multiverse.errors import InputError, StoreError
from multiverse.store import _claims, _gc
from multiverse.store._files import (
    CLAIM_SUFFIX,
    NO_LINK_ERRNOS,
    QUARANTINE,
    SUFFIX,
    TMP_SUFFIX,
    check_name,
    file_type,
    identity_of,
    name_kind,
    read_capped,
    same_file,
    scan,
    sorted_dirs,
    unlink_quietly,
    write_synced,
)
from multiverse.store._gc import GcReport, StoreStats
from multiverse.store._path import check_store_path, default_store_path
from multiverse.store._text import storable

__all__ = ["CLAIM_LEASE", "MAX_ENTRY_BYTES", "CorruptEntryWarning", "Store", "check_store_path", "default_store_path",
           "open_store", "scrub"]

#: The largest entry read (a transcript of long turns is a few MB; a planted
#: multi-GB file or /dev/zero must not be read into memory).
MAX_ENTRY_BYTES = 64 * 2**20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
#: A claim older than this is stale whoever holds it (a unit is one rollout or one judge call).
CLAIM_LEASE = 900.0

# Dict keys that carry credentials in litellm/OpenAI/Anthropic call kwargs and
# HTTP headers; compared case-insensitively. `api_key_env` (a variable *name*)
# is deliberately not here.
_CREDENTIAL_KEYS = frozenset(
    {"api_key", "apikey", "api-key", "x-api-key", "authorization", "proxy-authorization"}
)


class CorruptEntryWarning(RuntimeWarning):
    """An entry was unusable (not a regular file, too large, not JSON, wrong shape) and was quarantined."""


def scrub(record: Any, secret_values: Iterable[str] | None = None) -> Any:
    """A copy of ``record`` with credentials removed.

    The value of every credential in use is replaced by ``[redacted]`` wherever
    it appears (:func:`multiverse.core._credentials.redact_all`; ``secret_values``
    overrides which values), and dict keys named like credentials
    (``api_key``, ``Authorization``, ...) are dropped with their values.
    """

    def drop_keys(obj: Any) -> Any:
        if isinstance(obj, Mapping):
            return {k: drop_keys(v) for k, v in obj.items()
                    if not (isinstance(k, str) and k.lower() in _CREDENTIAL_KEYS)}
        if isinstance(obj, (list, tuple)):
            return [drop_keys(v) for v in obj]
        return obj

    return credentials.redact_all(drop_keys(record), secret_values)


class Store:
    """Content-addressed, write-once JSON records under ``root``.

    ``stage`` is ``"case"``, ``"transcript"``, ``"judgment"`` or ``"rubric"``
    (any ``[A-Za-z0-9_-]`` name works); ``key`` is that stage's cache key.
    Safe to share between threads, processes and machines. Nothing is created
    until the first :meth:`put` or :meth:`open`.

    ``shapes`` maps a stage to ``check(record) -> None | problem`` (the
    pipeline passes ``multiverse.store._records.SHAPES``); a record that fails its
    check is quarantined on read. ``existing=True`` says the root was already
    opened by someone else (a run's Dask workers): it is never recreated.
    """

    def __init__(self, root: str | os.PathLike, *, shapes: Mapping | None = None, existing: bool = False):
        self.root = Path(root).expanduser()
        self.shapes = dict(shapes or {})
        # Cleared the first time os.link turns out to be unsupported here.
        self._can_link = hasattr(os, "link")
        # Set once the root is known to exist: from then on its absence is an error.
        self._opened = existing
        self._lock = threading.Lock()
        #: entries this instance moved into quarantine
        self.quarantined = 0

    def open(self) -> Store:
        """Create the root if needed; from now on a vanished root raises ``StoreError``."""
        if self._opened:
            self._check_root()
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            self._opened = True
        return self

    def _check_root(self) -> None:
        if self._opened and not os.path.isdir(self.root):
            raise StoreError(f"store {self.root}: it was deleted while in use; "
                             "expected it to stay for the whole run (rerun to recompute what was lost)")

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def _path(self, stage: str, key: str) -> str:
        # Plain string joins: get_many builds 100k of these.
        check_name("stage", stage)
        check_name("key", key)
        return os.path.join(self.root, stage, key[:2], key + SUFFIX)

    # -- reading ---------------------------------------------------------

    def get(self, stage: str, key: str) -> dict | None:
        """The record stored under ``(stage, key)``, or ``None`` if absent or unusable."""
        self._check_root()
        return self._read(stage, self._path(stage, key))

    def get_many(self, stage: str, keys: Iterable[str]) -> dict[str, dict]:
        """``{key: record}`` for the given keys that are stored; missing ones are absent."""
        self._check_root()
        found = {}
        for key in keys:
            record = self._read(stage, self._path(stage, key))
            if record is not None:
                found[key] = record
        return found

    def has(self, stage: str, key: str) -> bool:
        """Whether a regular file is stored under the key (not parsed: a bad one counts until read)."""
        try:
            return stat.S_ISREG(os.lstat(self._path(stage, key)).st_mode)
        except OSError:
            return False

    def keys(self, stage: str) -> Iterator[str]:
        """The keys stored in ``stage``, in sorted order; temp and corrupt files are skipped."""
        # Not a generator itself, so that a bad stage name raises here.
        stage_dir = os.path.join(self.root, check_name("stage", stage))
        return (name[: -len(SUFFIX)]
                for shard in sorted_dirs(stage_dir)
                for name in sorted(e.name for e in scan(shard) if name_kind(e.name) == "entry"))

    def _read(self, stage: str, path: str) -> dict | None:
        try:
            # No symlink is followed and a FIFO does not block: what is there is checked first.
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP: a symlink in place of the entry; EACCES: not ours to read
            try:
                identity = identity_of(os.lstat(path))
            except FileNotFoundError:
                return None
            kind = "a symlink" if exc.errno == errno.ELOOP or os.path.islink(path) else f"unreadable ({exc.strerror})"
            self._quarantine(stage, path, identity, kind)
            return None
        try:
            st = os.fstat(fd)
            identity = identity_of(st)
            if not stat.S_ISREG(st.st_mode):
                problem = f"not a regular file ({file_type(st.st_mode)})"
            elif st.st_size > MAX_ENTRY_BYTES:
                problem = f"larger than {MAX_ENTRY_BYTES} bytes"
            else:
                problem = None
                raw = read_capped(fd, MAX_ENTRY_BYTES + 1)
        except OSError as exc:  # EISDIR and friends
            problem = f"unreadable ({exc.strerror})"
        finally:
            os.close(fd)
        if problem is None and len(raw) > MAX_ENTRY_BYTES:
            problem = f"larger than {MAX_ENTRY_BYTES} bytes"
        if problem is None:
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, deep nesting
                problem = "not JSON"
            else:
                check = self.shapes.get(stage)
                if not isinstance(record, dict):
                    problem = f"not a JSON object ({type(record).__name__})"
                else:
                    problem = check(record) if check is not None else None
                if problem is None:
                    return record
        self._quarantine(stage, path, identity, problem)
        return None

    def _quarantine(self, stage: str, path: str, identity: tuple[int, int], problem: str) -> None:
        # Another reader may have quarantined it already and a writer put a
        # good entry in its place: only move the very file we read.
        folder = os.path.join(self.root, QUARANTINE, stage)
        target = os.path.join(folder, f"{os.path.basename(path)}.{int(time.time())}.{secrets.token_hex(3)}")
        try:
            if identity_of(os.lstat(path)) != identity:
                return
            os.makedirs(folder, exist_ok=True)
            os.replace(path, target)  # moves a symlink or a folder itself, never what it points to
        except FileNotFoundError:
            return
        except OSError as exc:
            warnings.warn(f"{path}: bad store entry ({problem}), could not quarantine: {exc}",
                          CorruptEntryWarning, stacklevel=4)
            return
        with self._lock:
            self.quarantined += 1
        warnings.warn(f"{path}: bad store entry ({problem}) moved to {target}; it will be redone",
                      CorruptEntryWarning, stacklevel=4)

    # -- writing ---------------------------------------------------------

    def put(self, stage: str, key: str, record: Mapping[str, Any], *, durable: bool = True) -> bool:
        """Store ``record`` under ``(stage, key)`` unless an entry exists.

        Returns ``True`` if this call wrote the entry, ``False`` if one was
        already there (the first writer wins; its record is kept). The record
        is scrubbed of credentials and gets ``stored_at`` (UTC ISO) if absent.
        Raises ``ValueError`` for a bad stage or key and ``TypeError`` for a
        record that is not JSON-serialisable, before anything is written.

        ``durable=False`` skips the fsync (4 ms a write here, 10x the rest)
        for entries whose loss costs only their redoing: after a power cut
        such an entry may be torn, and a torn entry is quarantined on read
        like any bad one.
        """
        final = self._path(stage, key)
        if not isinstance(record, Mapping):
            kind = type(record).__name__
            raise TypeError(f"store: {stage}/{key}: expected a dict record, got {kind}")
        if os.path.lexists(final):  # the cheap answer on a resumed run
            st = os.lstat(final)
            if stat.S_ISREG(st.st_mode):
                return False
            # A folder, symlink or FIFO would make every later link fail: move it aside.
            self._quarantine(stage, final, identity_of(st), f"not a regular file ({file_type(st.st_mode)})")
        # The last sweep before the disk: credential values redacted and text
        # made UTF-8-safe here too, whatever stage or tool function composed the record.
        clean = scrub(storable(record))
        clean.setdefault("stored_at", datetime.now(timezone.utc).isoformat(timespec="seconds"))
        payload = json.dumps(clean, ensure_ascii=False, indent=2).encode("utf-8")

        directory = os.path.dirname(final)
        for attempt in range(3):
            tmp_name = f".{key}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"
            tmp = os.path.join(directory, tmp_name)
            try:
                self._make_dirs(directory)
                write_synced(tmp, payload, sync=durable)
                return self._publish(tmp, final)
            except FileNotFoundError:
                # A person or another host's gc removed our temp file or its
                # directory between write and link: write it again, unless
                # the whole store is gone.
                self._check_root()
                if attempt == 2:
                    raise
            finally:
                unlink_quietly(tmp)
        raise AssertionError("unreachable")

    def _make_dirs(self, directory: str) -> None:
        if os.path.isdir(directory):
            return
        if not self._opened:
            self.open()
        self._check_root()
        # <stage>/<shard> one level at a time, never makedirs: a root removed meanwhile must stay removed.
        for path in (os.path.dirname(directory), directory):
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            except FileNotFoundError:
                self._check_root()
                raise

    def _publish(self, tmp: str, final: str) -> bool:
        if self._can_link:
            try:
                os.link(tmp, final)
                return True
            except FileExistsError:
                # Over NFS a retransmitted link can report EEXIST although the
                # first attempt succeeded: then the entry is our own file.
                return same_file(tmp, final)
            except OSError as exc:
                if same_file(tmp, final):  # NFS: the reply was lost, the link was made
                    return True
                if exc.errno not in NO_LINK_ERRNOS:
                    raise
                self._can_link = False
        if os.name == "nt":
            try:
                os.rename(tmp, final)  # refuses to overwrite on Windows: write-once
                return True
            except FileExistsError:
                return False
        if os.path.exists(final):
            return False
        os.replace(tmp, final)  # atomic; a racing writer may overwrite (see docstring)
        return True

    # -- claims ----------------------------------------------------------

    def _claim_path(self, stage: str, key: str) -> str:
        return self._path(stage, key)[: -len(SUFFIX)] + CLAIM_SUFFIX

    def claim(self, stage: str, key: str, *, lease: float = CLAIM_LEASE) -> bool:
        """Claim ``(stage, key)`` for this process; False if someone else holds a live claim
        (see ``multiverse.store._claims``)."""
        self._make_dirs(os.path.dirname(self._claim_path(stage, key)))
        return _claims.claim(self._claim_path(stage, key), key, lease)

    def claimed(self, stage: str, key: str, *, lease: float = CLAIM_LEASE) -> bool:
        """Whether someone holds a live claim on ``(stage, key)``."""
        return _claims.is_live(self._claim_path(stage, key), lease)

    def release(self, stage: str, key: str) -> None:
        """Drop this process's claim (after storing the entry, or giving up)."""
        _claims.release(self._claim_path(stage, key))

    # -- keeping it tidy -------------------------------------------------

    def stats(self) -> StoreStats:
        """Entries and bytes per stage and in total, plus stray temp and quarantined files
        (``multiverse.store._gc.stats``)."""
        return _gc.stats(self.root)

    def gc(self, keep: Mapping[str, Collection[str]] | None = None, *, dry_run: bool = False,
           temp_age: float = 3600.0, fresh: float = 3600.0) -> GcReport:
        """Remove entries not in ``keep``, quarantined files and stale temp files; never an
        entry written in the last ``fresh`` seconds or since a live run started
        (``multiverse.store._gc.gc``)."""
        return _gc.gc(self.root, keep, dry_run=dry_run, temp_age=temp_age, fresh=fresh)


def open_store(given: Store | str | os.PathLike) -> Store:
    """The store a caller named for reading what it already holds: a :class:`Store` as it is, else the
    existing directory ``given`` (``InputError`` otherwise; nothing is created).

    No environment variable, no default and never a store a folder's manifest
    names: the caller chose this store (a report shows transcripts from it).
    """
    if isinstance(given, Store):
        return given
    if not Path(given).is_dir():
        raise InputError(f"store: {given}: expected the store directory that holds the run's transcripts",
                         param="store")
    return Store(given, existing=True)
