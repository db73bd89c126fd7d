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
- **Corruption is a miss, never a crash.** An entry that no longer parses
  (a disk fault, a hand edit) is renamed ``<key>.json.corrupt`` with a
  :class:`CorruptEntryWarning`, and ``get()`` answers ``None`` so the work is
  redone.
- **No credentials.** Records are scrubbed before they touch the disk: any
  string holding the value of a secret-looking environment variable becomes
  ``"[redacted]"`` and credential-named dict keys are dropped.

- **Claims, so concurrent runs do not pay twice.** Before computing a unit a
  run may ``claim`` it: an exclusive-create ``<key>.claim`` file naming the
  host, process and time. Another run that finds a live claim waits for the
  entry instead of calling the model. A claim whose process is gone (same
  host) or that is older than its lease is stale and may be taken over, so a
  killed run never blocks anyone for long. Claims are an economy, not a
  lock: correctness still rests on write-once entries.

Provenance is written by the stages; the store only adds ``stored_at``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import socket
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .answers import storable
from .credentials import redact_all

__all__ = ["Store", "CorruptEntryWarning", "default_store_path", "scrub"]

ENV_VAR = "MULTIVERSE_STORE"
REDACTED = "[redacted]"

# Stage names and keys become path components: restricting them to this
# alphabet (no dot, no separator) is what keeps every entry inside the root.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
_SUFFIX = ".json"
_TMP_SUFFIX = ".tmp"
_CORRUPT_SUFFIX = ".corrupt"
_CLAIM_SUFFIX = ".claim"
#: A claim older than this is stale whoever holds it (a unit is one rollout or one judge call).
CLAIM_LEASE = 900.0

# Dict keys that carry credentials in litellm/OpenAI/Anthropic call kwargs and
# HTTP headers; compared case-insensitively. `api_key_env` (a variable *name*)
# is deliberately not here.
_CREDENTIAL_KEYS = frozenset(
    {"api_key", "apikey", "api-key", "x-api-key", "authorization", "proxy-authorization"}
)
_SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET")  # _API_KEY ends with _KEY
_MIN_SECRET_LEN = 8  # shorter values ("1", "true") would redact ordinary text

# Hard links are unsupported on these errnos; anything else is a real error.
_NO_LINK_ERRNOS = {errno.EPERM, errno.ENOSYS, errno.EXDEV, errno.EMLINK}
_NO_LINK_ERRNOS |= {getattr(errno, n) for n in ("ENOTSUP", "EOPNOTSUPP") if hasattr(errno, n)}


class CorruptEntryWarning(RuntimeWarning):
    """An entry did not parse as a JSON object and was quarantined as ``*.corrupt``."""


def default_store_path(spec_path: str | Path | None) -> Path:
    """Where a run keeps its store: ``$MULTIVERSE_STORE``, else ``.multiverse/store``
    beside the spec, else ``./.multiverse/store``."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    base = Path(spec_path).parent if spec_path is not None else Path(".")
    return base / ".multiverse" / "store"


def _check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"store: {kind} {name!r}: expected 1-128 characters of [A-Za-z0-9_-]")
    return name


def _secret_values() -> list[str]:
    """Values of environment variables whose names look like credentials."""
    found = []
    for name, value in os.environ.items():
        upper = name.upper()
        if len(value) >= _MIN_SECRET_LEN and (
            upper.endswith(_SECRET_SUFFIXES) or "PASSWORD" in upper
        ):
            found.append(value)
    return found


def scrub(record: Any, secret_values: Iterable[str] | None = None) -> Any:
    """A copy of ``record`` with credentials removed.

    Any string equal to or containing a secret value becomes ``"[redacted]"``
    (the whole string, so no part of a key survives even where two secret
    values overlap), and dict keys named like credentials (``api_key``,
    ``Authorization``, ...) are dropped. ``secret_values`` defaults to the
    values of secret-looking environment variables, read at each call.
    """
    values = tuple(_secret_values() if secret_values is None else secret_values)

    def clean(obj: Any) -> Any:
        if isinstance(obj, str):
            return REDACTED if any(v in obj for v in values) else obj
        if isinstance(obj, Mapping):
            return {
                clean(k) if isinstance(k, str) else k: clean(v)
                for k, v in obj.items()
                if not (isinstance(k, str) and k.lower() in _CREDENTIAL_KEYS)
            }
        if isinstance(obj, (list, tuple)):
            return [clean(v) for v in obj]
        return obj

    return clean(record)


class Store:
    """Content-addressed, write-once JSON records under ``root``.

    ``stage`` is ``"case"``, ``"transcript"``, ``"judgment"`` or ``"rubric"``
    (any ``[A-Za-z0-9_-]`` name works); ``key`` is that stage's cache key.
    Safe to share between threads, processes and machines. Nothing is created
    until the first :meth:`put`.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()
        # Cleared the first time os.link turns out to be unsupported here.
        self._can_link = hasattr(os, "link")

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def _path(self, stage: str, key: str) -> str:
        # Plain string joins: get_many builds 100k of these.
        _check_name("stage", stage)
        _check_name("key", key)
        return os.path.join(self.root, stage, key[:2], key + _SUFFIX)

    # -- reading ---------------------------------------------------------

    def get(self, stage: str, key: str) -> dict | None:
        """The record stored under ``(stage, key)``, or ``None`` if absent or corrupt."""
        return self._read(self._path(stage, key))

    def get_many(self, stage: str, keys: Iterable[str]) -> dict[str, dict]:
        """``{key: record}`` for the given keys that are stored; missing ones are absent."""
        found = {}
        for key in keys:
            record = self._read(self._path(stage, key))
            if record is not None:
                found[key] = record
        return found

    def has(self, stage: str, key: str) -> bool:
        """Whether an entry exists (without parsing it: a corrupt one counts until read)."""
        return os.path.exists(self._path(stage, key))

    def keys(self, stage: str) -> Iterator[str]:
        """The keys stored in ``stage``, in sorted order; temp and corrupt files are skipped."""
        # Not a generator itself, so that a bad stage name raises here.
        stage_dir = os.path.join(self.root, _check_name("stage", stage))
        return (name[: -len(_SUFFIX)]
                for shard in _sorted_dirs(stage_dir)
                for name in sorted(_entry_names(shard)))

    def _read(self, path: str) -> dict | None:
        try:
            with open(path, "rb") as f:
                raw = f.read()
                try:
                    record = json.loads(raw)
                except ValueError:  # JSONDecodeError and UnicodeDecodeError
                    record = None
                if isinstance(record, dict):
                    return record
                identity = _identity(os.fstat(f.fileno()))
        except FileNotFoundError:
            return None
        self._quarantine(path, identity)
        return None

    def _quarantine(self, path: str, identity: tuple[int, int]) -> None:
        # Another reader may have quarantined it already and a writer put a
        # good entry in its place: only move the very file we read.
        try:
            if _identity(os.stat(path)) != identity:
                return
            os.replace(path, path + _CORRUPT_SUFFIX)
        except FileNotFoundError:
            return
        except OSError as exc:
            warnings.warn(f"{path}: corrupt store entry, could not quarantine: {exc}",
                          CorruptEntryWarning, stacklevel=4)
            return
        warnings.warn(f"{path}: corrupt store entry moved to *{_CORRUPT_SUFFIX}; it will be redone",
                      CorruptEntryWarning, stacklevel=4)

    # -- writing ---------------------------------------------------------

    def put(self, stage: str, key: str, record: dict) -> bool:
        """Store ``record`` under ``(stage, key)`` unless an entry exists.

        Returns ``True`` if this call wrote the entry, ``False`` if one was
        already there (the first writer wins; its record is kept). The record
        is scrubbed of credentials and gets ``stored_at`` (UTC ISO) if absent.
        Raises ``ValueError`` for a bad stage or key and ``TypeError`` for a
        record that is not JSON-serialisable, before anything is written.
        """
        final = self._path(stage, key)
        if not isinstance(record, Mapping):
            kind = type(record).__name__
            raise TypeError(f"store: {stage}/{key}: expected a dict record, got {kind}")
        if os.path.exists(final):  # the cheap answer on a resumed run
            return False
        # The last sweep before the disk: credential values redacted and text
        # made UTF-8-safe here too, whatever stage or tool function composed the record.
        clean = scrub(redact_all(storable(record)))
        clean.setdefault("stored_at", datetime.now(timezone.utc).isoformat(timespec="seconds"))
        payload = json.dumps(clean, ensure_ascii=False, indent=2).encode("utf-8")

        directory = os.path.dirname(final)
        for attempt in range(3):
            tmp_name = f".{key}.{os.getpid()}.{secrets.token_hex(4)}{_TMP_SUFFIX}"
            tmp = os.path.join(directory, tmp_name)
            try:
                _write_synced(tmp, payload)
                return self._publish(tmp, final)
            except FileNotFoundError:
                # A person or another host's gc removed our temp file or its
                # directory between write and link: write it again.
                if attempt == 2:
                    raise
            finally:
                _unlink_quietly(tmp)
        raise AssertionError("unreachable")

    def _publish(self, tmp: str, final: str) -> bool:
        if self._can_link:
            try:
                os.link(tmp, final)
                return True
            except FileExistsError:
                # Over NFS a retransmitted link can report EEXIST although the
                # first attempt succeeded: then the entry is our own file.
                return _same_file(tmp, final)
            except OSError as exc:
                if _same_file(tmp, final):  # NFS: the reply was lost, the link was made
                    return True
                if exc.errno not in _NO_LINK_ERRNOS:
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

    # -- maintenance -----------------------------------------------------

    # -- claims ----------------------------------------------------------

    def _claim_path(self, stage: str, key: str) -> str:
        return self._path(stage, key)[: -len(_SUFFIX)] + _CLAIM_SUFFIX

    def claim(self, stage: str, key: str, *, lease: float = CLAIM_LEASE) -> bool:
        """Claim ``(stage, key)`` for this process. False if someone else holds a live claim.

        A stale claim (its process is gone, or it is older than ``lease``) is
        taken over. Two processes taking over the same stale claim at the same
        moment may both proceed: the entry is still written once.
        """
        path = self._claim_path(stage, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # The claim appears with its content in one step (a temp file hard-linked
        # into place), so nobody ever reads a half-written claim as stale.
        tmp = os.path.join(os.path.dirname(path), f".{key}.{os.getpid()}.{secrets.token_hex(4)}{_TMP_SUFFIX}")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}\n")
        try:
            for _ in range(2):
                try:
                    os.link(tmp, path)
                    return True
                except FileExistsError:
                    if self._claim_is_live(path, lease):
                        return False
                    _unlink_quietly(path)  # stale: take it over (one of several takers wins the link)
                except OSError as exc:
                    if exc.errno not in _NO_LINK_ERRNOS:
                        raise
                    return True  # no hard links here: claims are only an economy, compute anyway
            return False
        finally:
            _unlink_quietly(tmp)

    def claimed(self, stage: str, key: str, *, lease: float = CLAIM_LEASE) -> bool:
        """Whether someone holds a live claim on ``(stage, key)``."""
        return self._claim_is_live(self._claim_path(stage, key), lease)

    def release(self, stage: str, key: str) -> None:
        """Drop this process's claim (after storing the entry, or giving up)."""
        path = self._claim_path(stage, key)
        holder = _claim_holder(path)
        if holder is not None and holder[:2] == (socket.gethostname(), os.getpid()):
            _unlink_quietly(path)

    @staticmethod
    def _claim_is_live(path: str, lease: float) -> bool:
        holder = _claim_holder(path)
        if holder is None:
            return False
        host, pid, since = holder
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

    def stats(self) -> dict:
        """Entries and bytes per stage and in total, plus stray temp and corrupt files.

        ``{"root", "stages": {stage: {"entries", "bytes"}}, "entries", "bytes",
        "temp_files", "corrupt_files"}``
        """
        report: dict[str, Any] = {"root": str(self.root), "stages": {}, "entries": 0,
                                  "bytes": 0, "temp_files": 0, "corrupt_files": 0}
        for stage in self._stages():
            entries = size = 0
            for shard in _sorted_dirs(os.path.join(self.root, stage)):
                for entry in _scan(shard):
                    kind = _kind(entry.name)
                    if kind == "entry":
                        entries += 1
                        size += entry.stat().st_size
                    elif kind == "temp":
                        report["temp_files"] += 1
                    elif kind == "corrupt":
                        report["corrupt_files"] += 1
            report["stages"][stage] = {"entries": entries, "bytes": size}
            report["entries"] += entries
            report["bytes"] += size
        return report

    def gc(self, keep: Mapping[str, set[str]] | None = None, *, dry_run: bool = False,
           temp_age: float = 3600.0) -> dict:
        """Remove entries not in ``keep``, quarantined files and stale temp files.

        ``keep`` maps a stage to the keys still referenced. Stages it does not
        name are left alone (pass an empty set to empty a stage); ``None``
        removes no entry at all. Temp files younger than ``temp_age`` seconds
        may belong to a writer still running, so they are kept. With
        ``dry_run`` nothing is deleted and the counts say what would be.

        Returns ``{"dry_run", "stages": {stage: {"kept", "removed", "bytes"}},
        "removed", "bytes", "temp_files", "corrupt_files"}`` (``bytes`` freed).
        """
        if keep is not None:
            for stage in keep:
                _check_name("stage", stage)
        report: dict[str, Any] = {"dry_run": dry_run, "stages": {}, "removed": 0, "bytes": 0,
                                  "temp_files": 0, "corrupt_files": 0}
        cutoff = time.time() - temp_age
        for stage in self._stages():
            wanted = None if keep is None else keep.get(stage)
            counts = {"kept": 0, "removed": 0, "bytes": 0}
            for shard in _sorted_dirs(os.path.join(self.root, stage)):
                for entry in _scan(shard):
                    kind = _kind(entry.name)
                    try:
                        if kind == "entry":
                            if wanted is None or entry.name[: -len(_SUFFIX)] in wanted:
                                counts["kept"] += 1
                                continue
                            size = entry.stat().st_size
                            _remove(entry.path, dry_run)
                            counts["removed"] += 1
                            counts["bytes"] += size
                        elif kind in ("temp", "claim") and entry.stat().st_mtime < cutoff:
                            _remove(entry.path, dry_run)
                            report["temp_files"] += 1
                        elif kind == "corrupt":
                            _remove(entry.path, dry_run)
                            report["corrupt_files"] += 1
                    except FileNotFoundError:
                        continue  # another gc or a writer got there first
            report["stages"][stage] = counts
            report["removed"] += counts["removed"]
            report["bytes"] += counts["bytes"]
        return report

    def _stages(self) -> list[str]:
        return [entry.name for entry in _scan(self.root)
                if entry.is_dir() and _NAME.fullmatch(entry.name)]


# -- directory walking -------------------------------------------------------


def _scan(directory: str | Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _sorted_dirs(directory: str | Path) -> list[str]:
    return sorted(e.path for e in _scan(directory) if e.is_dir() and _NAME.fullmatch(e.name))


def _kind(name: str) -> str | None:
    """``entry``, ``temp``, ``corrupt`` or ``None`` for a file in a shard directory."""
    if name.endswith(_SUFFIX) and _NAME.fullmatch(name[: -len(_SUFFIX)]):
        return "entry"
    if name.startswith(".") and name.endswith(_TMP_SUFFIX):
        return "temp"
    if name.endswith(_CORRUPT_SUFFIX):
        return "corrupt"
    if name.endswith(_CLAIM_SUFFIX):
        return "claim"
    return None


def _claim_holder(path: str) -> tuple[str, int, float] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            host, pid, since = fh.read().split()
        return host, int(pid), float(since)
    except (OSError, ValueError):
        return None


def _entry_names(shard: str) -> Iterator[str]:
    return (e.name for e in _scan(shard) if _kind(e.name) == "entry")


def _identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _remove(path: str, dry_run: bool) -> None:
    if dry_run:
        os.stat(path)  # still there? (raises FileNotFoundError like unlink would)
    else:
        os.unlink(path)


def _write_synced(path: str, payload: bytes) -> None:
    """Create ``path`` (it must not exist) holding ``payload``, flushed to disk."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags, 0o644)  # & umask: entries stay readable by the team
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        # The data must be on disk before a name points at it, or a power cut
        # could leave a complete-looking entry over empty blocks. The directory
        # is not fsynced: losing a fresh link in a power cut only means the
        # call is redone.
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
