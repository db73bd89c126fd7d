"""Keeping a store tidy: what it holds (``stats``) and removing what no spec uses (``gc``).

``gc`` never removes what a live run holds or has just written: it keeps
every entry written in the last ``fresh`` seconds, and every entry written
since the oldest live run on the store started (``multiverse.store._lease``), so a
run of another spec going on right now loses nothing, and its tables never
show entries removed under it as failed units.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from multiverse.store._lease import live_leases
from multiverse.store._store import _SUFFIX, Store, _check_name, _kind, _scan, _sorted_dirs

__all__ = ["gc", "stats"]


def stats(store: Store) -> dict:
    """Entries and bytes per stage and in total, plus stray temp and quarantined files.

    ``{"root", "stages": {stage: {"entries", "bytes"}}, "entries", "bytes",
    "temp_files", "corrupt_files"}`` (``corrupt_files``: quarantined entries)
    """
    report: dict[str, Any] = {"root": str(store.root), "stages": {}, "entries": 0,
                              "bytes": 0, "temp_files": 0, "corrupt_files": len(store._quarantined())}
    for stage in store._stages():
        entries = size = 0
        for shard in _sorted_dirs(os.path.join(store.root, stage)):
            for entry in _scan(shard):
                kind = _kind(entry.name)
                if kind == "entry" and entry.is_file(follow_symlinks=False):
                    entries += 1
                    size += entry.stat(follow_symlinks=False).st_size
                elif kind == "temp":
                    report["temp_files"] += 1
                elif kind == "corrupt":
                    report["corrupt_files"] += 1
        report["stages"][stage] = {"entries": entries, "bytes": size}
        report["entries"] += entries
        report["bytes"] += size
    return report


def gc(store: Store, keep: Mapping[str, set[str]] | None = None, *, dry_run: bool = False,
       temp_age: float = 3600.0, fresh: float = 3600.0) -> dict:
    """Remove entries not in ``keep``, quarantined files and stale temp files.

    ``keep`` maps a stage to the keys still referenced. Stages it does not
    name are left alone (pass an empty set to empty a stage); ``None``
    removes no entry at all. Temp files younger than ``temp_age`` seconds
    may belong to a writer still running, so they are kept. With
    ``dry_run`` nothing is deleted and the counts say what would be.

    Whatever ``keep`` says, an entry is kept when it was written less than
    ``fresh`` seconds ago, or since the oldest live run on this store
    started (see ``multiverse.store._lease``): a live run reads back what it has
    just computed, and a run of another spec may be computing right now.

    Returns ``{"dry_run", "stages": {stage: {"kept", "removed", "bytes"}},
    "removed", "bytes", "temp_files", "corrupt_files", "kept_recent",
    "live_runs"}`` (``bytes`` freed).
    """
    if keep is not None:
        for stage in keep:
            _check_name("stage", stage)
    now = time.time()
    live = live_leases(store.root, remove_stale=not dry_run)
    # A minute of slack for clocks of other hosts writing to a shared store.
    protect_since = min([now - fresh, *(lease["started"] - 60.0 for lease in live)])
    report: dict[str, Any] = {"dry_run": dry_run, "stages": {}, "removed": 0, "bytes": 0,
                              "temp_files": 0, "corrupt_files": 0, "kept_recent": 0, "live_runs": len(live)}
    cutoff = now - temp_age
    for stage in store._stages():
        wanted = None if keep is None else keep.get(stage)
        counts = {"kept": 0, "removed": 0, "bytes": 0}
        for shard in _sorted_dirs(os.path.join(store.root, stage)):
            for entry in _scan(shard):
                kind = _kind(entry.name)
                try:
                    if kind == "entry":
                        if wanted is None or entry.name[: -len(_SUFFIX)] in wanted:
                            counts["kept"] += 1
                            continue
                        st = entry.stat(follow_symlinks=False)
                        if st.st_mtime >= protect_since:
                            counts["kept"] += 1
                            report["kept_recent"] += 1
                            continue
                        size = st.st_size
                        _remove(entry.path, dry_run)
                        counts["removed"] += 1
                        counts["bytes"] += size
                    elif kind in ("temp", "claim") and entry.stat(follow_symlinks=False).st_mtime < cutoff:
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
    for path in store._quarantined():
        try:
            _remove_any(path, dry_run)
            report["corrupt_files"] += 1
        except FileNotFoundError:
            continue
    return report


def _remove_any(path: str, dry_run: bool) -> None:
    """Remove a quarantined file, symlink or folder (never what a symlink points to)."""
    if dry_run:
        os.lstat(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path)
    else:
        os.unlink(path)


def _remove(path: str, dry_run: bool) -> None:
    if dry_run:
        os.stat(path)  # still there? (raises FileNotFoundError like unlink would)
    else:
        os.unlink(path)
