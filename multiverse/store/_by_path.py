"""A store by its path, for a caller that has only that: its stats, its gc, and its migration.

:func:`store_stats` and :func:`store_gc` check the path first and then ask
the store (``Store.stats``, ``Store.gc``). Migration moves a store from before
the database into it: every good entry file becomes a row, then goes.
``multiverse store migrate`` runs :func:`migrate_store`. Each entry file is
read with the legacy reader's defences (a bad one is quarantined, as a run
would), written as a row with its file's time (so ``gc``'s protection of
fresh entries still holds), and removed only once its row is committed: a
migration killed at any point is finished by running it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from multiverse.store._gc import GcReport, StoreStats
from multiverse.store._path import check_store_path
from multiverse.store._records import SHAPES
from multiverse.store._scrub import clean_row
from multiverse.store._store import Store

__all__ = ["Migration", "migrate_store", "store_gc", "store_stats"]


@dataclass(frozen=True)
class Migration:
    """What a migration did: entry files moved into the database, already there, and quarantined."""

    root: str
    moved: int
    already: int
    quarantined: int

    def to_dict(self) -> dict[str, Any]:
        """``{"root", "moved", "already", "quarantined"}``."""
        return dataclasses.asdict(self)


def migrate_store(path: str | os.PathLike[str]) -> Migration:
    """Move every entry file of the store directory at ``path`` into its database (see module doc)."""
    root = check_store_path(path, write=True)
    store = Store(root, shapes=SHAPES).open()
    legacy = store.legacy
    assert legacy is not None  # a directory store
    moved = already = 0
    for stage in legacy.stages():
        for key in list(legacy.keys(stage)):
            file = legacy.path(stage, key)
            try:
                made = os.lstat(file).st_mtime
            except FileNotFoundError:
                continue
            record = legacy.read(stage, file)
            if record is None:
                continue  # quarantined by the reader
            if store.insert(stage, key, clean_row(record), stored_at=made):
                moved += 1
            else:
                already += 1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(file)
        _remove_empty(os.path.join(root, stage))
    _remove_empty(os.path.join(root, "leases"))
    return Migration(root=str(root), moved=moved, already=already, quarantined=store.quarantined)


def _remove_empty(folder: str) -> None:
    """Remove ``folder``'s empty subfolders and then it, if nothing else is left (a writer may add more)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)
        os.rmdir(folder)


def store_stats(path: str | os.PathLike[str]) -> StoreStats:
    """What the store at ``path`` holds (nothing, if it is not made yet).

    ``InputError`` if ``path`` exists but is not a directory.
    """
    return Store(check_store_path(path, write=False)).stats()


def store_gc(path: str | os.PathLike[str],
             keep: Mapping[str, Collection[str]] | Iterable[Mapping[str, Collection[str]]] | None = None, *,
             dry_run: bool = False, temp_age: float = 3600.0, fresh: float = 3600.0) -> GcReport:
    """Remove from the store at ``path`` the entries ``keep`` does not name, its quarantined files and its
    stale temp files (:func:`gc`).

    ``keep``: the keys still referenced per stage, or several such mappings
    (one per spec: what its grid references), merged; stages none of them
    names are left alone, and ``None`` removes no entry. Entries written in
    the last ``fresh`` seconds or since a live run on the store started are
    always kept. The store is checked first (``InputError`` unless it is a
    directory you can write to), then the mappings are read: a generator
    that loads specs loads them only once the store is known to be usable.
    """
    store = Store(check_store_path(path, write=True))
    if keep is None or isinstance(keep, Mapping):
        return store.gc(keep, dry_run=dry_run, temp_age=temp_age, fresh=fresh)
    merged: dict[str, set[str]] = {}
    for referenced in keep:
        for stage, keys in referenced.items():
            merged.setdefault(stage, set()).update(keys)
    return store.gc(merged, dry_run=dry_run, temp_age=temp_age, fresh=fresh)
