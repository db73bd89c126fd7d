"""The files of a store from before the database: what each name in it is, and the careful file operations.

A store root holds one folder per stage, each of two-character shards of
``<key>.json`` entries, beside ``quarantine/`` and ``leases/``. A shard may
also hold a writer's temp file (``.<key>.<pid>.<rand>.tmp``), a claim
(``<key>.claim``) or an old-style ``.corrupt`` file. The store, its claims
and its garbage collector all name and walk these files through this
module, so none of them needs another's private helpers.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

__all__ = [
    "CLAIM_SUFFIX", "CORRUPT_SUFFIX", "NAME", "NO_LINK_ERRNOS", "QUARANTINE", "RESERVED", "SUFFIX", "TMP_SUFFIX",
    "check_name", "file_type", "identity_of", "name_kind", "quarantined_files", "read_capped", "same_file", "scan",
    "sorted_dirs", "stage_names", "unlink_quietly", "write_synced",
]

# Stage names and keys become path components: restricting them to this
# alphabet (no dot, no separator) is what keeps every entry inside the root.
NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
SUFFIX = ".json"
TMP_SUFFIX = ".tmp"
CORRUPT_SUFFIX = ".corrupt"
CLAIM_SUFFIX = ".claim"
#: Folders of the store root that are not stages.
QUARANTINE = "quarantine"
#: where a store before the database kept its leases
LEASES = "leases"
RESERVED = frozenset({QUARANTINE, LEASES})

# Hard links are unsupported on these errnos; anything else is a real error.
NO_LINK_ERRNOS = {errno.EPERM, errno.ENOSYS, errno.EXDEV, errno.EMLINK}
NO_LINK_ERRNOS |= {getattr(errno, n) for n in ("ENOTSUP", "EOPNOTSUPP") if hasattr(errno, n)}


def check_name(what: str, name: str) -> str:
    """``name`` if it may be a ``what`` ("stage" or "key") of the store; else ``ValueError``."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or (what == "stage" and name in RESERVED):
        raise ValueError(f"store: {what} {name!r}: expected 1-128 characters of [A-Za-z0-9_-], "
                         f"not {' or '.join(sorted(RESERVED))}")
    return name


def name_kind(name: str) -> str | None:
    """``entry``, ``temp``, ``corrupt``, ``claim`` or ``None`` for a file in a shard directory."""
    if name.endswith(SUFFIX) and NAME.fullmatch(name[: -len(SUFFIX)]):
        return "entry"
    if name.startswith(".") and name.endswith(TMP_SUFFIX):
        return "temp"
    if name.endswith(CORRUPT_SUFFIX):
        return "corrupt"
    if name.endswith(CLAIM_SUFFIX):
        return "claim"
    return None


# -- directory walking -------------------------------------------------------


def scan(directory: str | Path) -> list[os.DirEntry[str]]:
    """The entries of ``directory``; none if it is missing or not a directory."""
    try:
        with os.scandir(directory) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def sorted_dirs(directory: str | Path) -> list[str]:
    """The paths of the store-named folders in ``directory`` (never through a symlink), sorted."""
    return sorted(e.path for e in scan(directory) if e.is_dir(follow_symlinks=False) and NAME.fullmatch(e.name))


def stage_names(root: str | Path) -> list[str]:
    """The stages that have a folder under the store ``root``."""
    return [entry.name for entry in scan(root)
            if entry.is_dir(follow_symlinks=False) and NAME.fullmatch(entry.name) and entry.name not in RESERVED]


def quarantined_files(root: str | Path) -> list[str]:
    """The paths of everything moved into the store's quarantine, stage by stage."""
    return [e.path for folder in sorted_dirs(os.path.join(root, QUARANTINE)) for e in scan(folder)]


# -- one file ------------------------------------------------------------------


def identity_of(st: os.stat_result) -> tuple[int, int]:
    """Which file a stat result is of: a path may name another file by the next look."""
    return (st.st_dev, st.st_ino)


def file_type(mode: int) -> str:
    """What a file that is not a regular one is, for a message."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def read_capped(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from ``fd``: a file that grows while it is read is not read whole."""
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def same_file(a: str, b: str) -> bool:
    """Whether both paths name one file (False if either is gone)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_synced(path: str, payload: bytes, *, sync: bool = True) -> None:
    """Create ``path`` (it must not exist) holding ``payload``, flushed to disk if ``sync``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o666)  # & umask, like any file the user writes
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        # The data must be on disk before a name points at it, or a power cut
        # could leave a complete-looking entry over empty blocks. The directory
        # is not fsynced: losing a fresh link in a power cut only means the
        # call is redone.
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def unlink_quietly(path: str) -> None:
    """Remove ``path`` if it is still there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
