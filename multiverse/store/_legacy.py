"""Stores from before the database: one JSON file per entry, read transparently and migrated in one step.

A store directory written by an earlier version holds ``<stage>/<key[:2]>/<key>.json``
files beside ``quarantine/`` (see ``multiverse.store._files``). The store reads
such an entry whenever its database has no row for the key, with every
defence the file store had: only regular files under
:data:`MAX_ENTRY_BYTES` are read, opened without following symlinks or
blocking; anything else, a file that does not parse, or a record of the
wrong shape is moved into ``<root>/quarantine/<stage>/`` with a
:class:`CorruptEntryWarning`, and the read is a miss. :func:`migrate` moves
every good entry into the database and removes its file.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from multiverse.store._files import (
    QUARANTINE,
    SUFFIX,
    file_type,
    identity_of,
    name_kind,
    read_capped,
    scan,
    sorted_dirs,
    stage_names,
)

__all__ = ["MAX_ENTRY_BYTES", "CorruptEntryWarning", "LegacyFiles"]

#: The largest entry read (a transcript of long turns is a few MB; a planted
#: multi-GB file or /dev/zero must not be read into memory).
MAX_ENTRY_BYTES = 64 * 2**20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


class CorruptEntryWarning(RuntimeWarning):
    """An entry was unusable (not a regular file, too large, not JSON, wrong shape) and was quarantined."""


class LegacyFiles:
    """The entry files of a store directory written before the database (read, quarantined, listed)."""

    def __init__(self, root: str | os.PathLike[str], shapes: Mapping[str, Callable[..., Any]], on_quarantine: Callable[[], None]):
        self.root = root
        self.shapes = shapes
        self.on_quarantine = on_quarantine

    def path(self, stage: str, key: str) -> str:
        return os.path.join(self.root, stage, key[:2], key + SUFFIX)

    def present(self, stage: str) -> bool:
        """Whether the stage has a folder of entry files at all (one stat: most stores have none)."""
        return os.path.isdir(os.path.join(self.root, stage))

    def get(self, stage: str, key: str) -> dict[str, Any] | None:
        """The record in the entry file of ``(stage, key)``, or None (absent, or unusable and quarantined)."""
        if not self.present(stage):
            return None
        return self.read(stage, self.path(stage, key))

    def has(self, stage: str, key: str) -> bool:
        """Whether a regular file is there (not parsed: a bad one counts until read)."""
        try:
            return stat.S_ISREG(os.lstat(self.path(stage, key)).st_mode)
        except OSError:
            return False

    def clear_for_put(self, stage: str, key: str) -> bool:
        """Whether a good-looking entry file holds the key; a folder, symlink or FIFO in its place is moved aside."""
        path = self.path(stage, key)
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if stat.S_ISREG(st.st_mode):
            return True
        self.quarantine(stage, path, identity_of(st), f"not a regular file ({file_type(st.st_mode)})")
        return False

    def keys(self, stage: str) -> Iterator[str]:
        stage_dir = os.path.join(self.root, stage)
        return (name[: -len(SUFFIX)]
                for shard in sorted_dirs(stage_dir)
                for name in sorted(e.name for e in scan(shard) if name_kind(e.name) == "entry"))

    def stages(self) -> list[str]:
        return stage_names(os.fspath(self.root))

    def read(self, stage: str, path: str) -> dict[str, Any] | None:
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
            self.quarantine(stage, path, identity, kind)
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
                    return cast("dict[str, Any] | None", record)
        self.quarantine(stage, path, identity, problem)
        return None

    def quarantine(self, stage: str, path: str, identity: tuple[int, int], problem: str) -> None:
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
        self.on_quarantine()
        warnings.warn(f"{path}: bad store entry ({problem}) moved to {target}; it will be redone",
                      CorruptEntryWarning, stacklevel=4)
