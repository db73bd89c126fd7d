"""Keeping a store tidy: what it holds (``stats``) and removing what no spec uses (``gc``).

``gc`` never removes what a live run holds or has just written: it keeps
every entry written in the last ``fresh`` seconds, and every entry written
since the oldest live run on the store started (``multiverse.store._lease``), so a
run of another spec going on right now loses nothing, and its tables never
show entries removed under it as failed units.

Both are queries of the store's database (``multiverse.store._db``), plus a
walk of the entry files a store from before the database may still hold
(``multiverse.store._files``); ``Store.stats`` and ``Store.gc`` are one-line
delegations; ``multiverse.store._by_path`` serves a caller that has only a
path (or a server's URL).
The answers are frozen dataclasses; ``to_dict()`` is the document
``multiverse store stats|gc --json`` prints.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from multiverse.store._db import Database, is_server
from multiverse.store._files import SUFFIX, check_name, name_kind, quarantined_files, scan, sorted_dirs, stage_names
from multiverse.store._lease import live_leases

__all__ = ["GcReport", "StageGc", "StageStats", "StoreStats", "gc", "stats"]


@dataclass(frozen=True)
class StageStats:
    """What one stage of a store holds: its entries and their bytes."""

    entries: int
    bytes: int


@dataclass(frozen=True)
class StoreStats:
    """What a store holds, per stage and in total, plus stray temp files and quarantined entries.

    ``corrupt_files`` counts quarantined entries (and old-style ``.corrupt`` files).
    Fields are in the order ``store stats --json`` prints them.
    """

    root: str
    stages: dict[str, StageStats]
    entries: int
    bytes: int
    temp_files: int
    corrupt_files: int

    def to_dict(self) -> dict[str, Any]:
        """``{"root", "stages": {stage: {"entries", "bytes"}}, "entries", "bytes", "temp_files", "corrupt_files"}``."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StageGc:
    """What gc did to one stage: entries kept, entries removed and the bytes they freed."""

    kept: int
    removed: int
    bytes: int


@dataclass(frozen=True)
class GcReport:
    """What gc removed (or, with ``dry_run``, would remove), per stage and in total.

    ``bytes``: freed by removed entries; ``temp_files``: stale temp files and
    claims; ``corrupt_files``: quarantined entries; ``kept_recent``: entries
    ``keep`` did not name that were kept as fresh or younger than a live run;
    ``live_runs``: the runs holding a lease on the store. Fields are in the
    order ``store gc --json`` prints them.
    """

    dry_run: bool
    stages: dict[str, StageGc]
    removed: int
    bytes: int
    temp_files: int
    corrupt_files: int
    kept_recent: int
    live_runs: int

    def to_dict(self) -> dict[str, Any]:
        """``{"dry_run", "stages": {stage: {"kept", "removed", "bytes"}}, "removed", "bytes", "temp_files",
        "corrupt_files", "kept_recent", "live_runs"}``."""
        return dataclasses.asdict(self)


def stats(root: str | os.PathLike[str], db: Database | None = None) -> StoreStats:
    """Entries and bytes per stage and in total, plus stray temp and quarantined files, of the store at ``root``.

    ``db``: the store's database (None: not made yet). Bytes are the records'
    size as JSON, each long text counted once per record that holds it.
    Entry files of a store from before the database count too. ``root`` is
    not checked (:func:`store_stats` checks it).
    """
    found: dict[str, list[int]] = {}
    temp_files = corrupt_files = 0
    if db is not None:
        for stage, count, size in db.query("SELECT stage, COUNT(*), SUM(size) FROM entry GROUP BY stage"):
            found[str(stage)] = [int(count), int(size or 0)]
        corrupt_files += int(db.query("SELECT COUNT(*) FROM quarantine")[0][0])
    if not is_server(root):
        files = _file_stats(Path(root).expanduser())
        temp_files += files.temp_files
        corrupt_files += files.corrupt_files
        for stage, counted in files.stages.items():
            entries, size = found.setdefault(stage, [0, 0])
            found[stage] = [entries + counted.entries, size + counted.bytes]
    stages = {stage: StageStats(entries=e, bytes=b) for stage, (e, b) in sorted(found.items())}
    return StoreStats(root=_label(root, db), stages=stages, entries=sum(s.entries for s in stages.values()),
                      bytes=sum(s.bytes for s in stages.values()), temp_files=temp_files, corrupt_files=corrupt_files)


def _label(root: str | os.PathLike[str], db: Database | None) -> str:
    return db.label if db is not None and is_server(root) else str(Path(root).expanduser()) if not is_server(root) else str(root)


def _file_stats(root: Path) -> StoreStats:
    """What the entry files of a store from before the database hold."""
    stages: dict[str, StageStats] = {}
    temp_files, corrupt_files = 0, len(quarantined_files(root))
    for stage in stage_names(root):
        entries = size = 0
        for shard in sorted_dirs(os.path.join(root, stage)):
            for entry in scan(shard):
                found = name_kind(entry.name)
                if found == "entry" and entry.is_file(follow_symlinks=False):
                    entries += 1
                    size += entry.stat(follow_symlinks=False).st_size
                elif found == "temp":
                    temp_files += 1
                elif found == "corrupt":
                    corrupt_files += 1
        stages[stage] = StageStats(entries=entries, bytes=size)
    return StoreStats(root=str(root), stages=stages, entries=sum(s.entries for s in stages.values()),
                      bytes=sum(s.bytes for s in stages.values()), temp_files=temp_files,
                      corrupt_files=corrupt_files)


def gc(root: str | os.PathLike[str], db: Database | None, keep: Mapping[str, Collection[str]] | None = None, *,
       dry_run: bool = False, temp_age: float = 3600.0, fresh: float = 3600.0) -> GcReport:
    """Remove entries not in ``keep``, quarantined entries and stale claims and temp files from the store at ``root``.

    ``db``: the store's database (None: not made yet). ``keep`` maps a stage
    to the keys still referenced. Stages it does not name are left alone
    (pass an empty set to empty a stage); ``None`` removes no entry at all.
    Claims and temp files younger than ``temp_age`` seconds may belong to a
    writer still running, so they are kept. With ``dry_run`` nothing is
    deleted and the counts say what would be.

    Whatever ``keep`` says, an entry is kept when it was written less than
    ``fresh`` seconds ago, or since the oldest live run on this store
    started (see ``multiverse.store._lease``): a live run reads back what it has
    just computed, and a run of another spec may be computing right now.
    ``root`` is not checked (:func:`store_gc` checks it).
    """
    if keep is not None:
        for stage in keep:
            check_name("stage", stage)
    now = time.time()
    live = live_leases(db, remove_stale=not dry_run) if db is not None else []
    # A minute of slack for clocks of other hosts writing to a shared store.
    protect_since = min([now - fresh, *(lease["started"] - 60.0 for lease in live)])
    tally = _Tally()
    if db is not None:
        _gc_rows(db, keep, protect_since, now - temp_age, dry_run, tally)
    if not is_server(root):
        _gc_files(Path(root).expanduser(), keep, protect_since, now - temp_age, dry_run, tally)
    stages = {stage: StageGc(kept=k, removed=r, bytes=b) for stage, (k, r, b) in sorted(tally.stages.items())}
    return GcReport(dry_run=dry_run, stages=stages, removed=sum(s.removed for s in stages.values()),
                    bytes=sum(s.bytes for s in stages.values()), temp_files=tally.temp_files,
                    corrupt_files=tally.corrupt_files, kept_recent=tally.kept_recent, live_runs=len(live))


class _Tally:
    """What gc kept and removed so far, rows and files together."""

    def __init__(self) -> None:
        self.stages: dict[str, list[int]] = {}
        self.temp_files = self.corrupt_files = self.kept_recent = 0

    def add(self, stage: str, kept: int = 0, removed: int = 0, freed: int = 0) -> None:
        counts = self.stages.setdefault(stage, [0, 0, 0])
        counts[0] += kept
        counts[1] += removed
        counts[2] += freed


def _gc_rows(db: Database, keep: Mapping[str, Collection[str]] | None, protect_since: float, stale_before: float,
             dry_run: bool, tally: _Tally) -> None:
    """gc of the database's rows: one query per stage, deletes in one transaction."""
    doomed: list[tuple[str, str]] = []
    for (stage,) in db.query("SELECT DISTINCT stage FROM entry"):
        wanted = None if keep is None else keep.get(stage)
        if wanted is None:
            tally.add(stage, kept=int(db.query("SELECT COUNT(*) FROM entry WHERE stage = ?", (stage,))[0][0]))
            continue
        wanted = set(wanted)
        for key, size, stored_at in db.query("SELECT key, size, stored_at FROM entry WHERE stage = ?", (stage,)):
            if key in wanted:
                tally.add(stage, kept=1)
            elif stored_at >= protect_since:
                tally.add(stage, kept=1)
                tally.kept_recent += 1
            else:
                tally.add(stage, removed=1, freed=int(size))
                doomed.append((stage, key))
    stale = db.query("SELECT COUNT(*) FROM claim WHERE since < ?", (stale_before,))[0][0]
    tally.temp_files += int(stale)
    tally.corrupt_files += int(db.query("SELECT COUNT(*) FROM quarantine")[0][0])
    if dry_run:
        return
    with db.transaction() as tx:
        tx.many("DELETE FROM entry WHERE stage = ? AND key = ?", doomed)
        tx.many("DELETE FROM entry_text WHERE stage = ? AND key = ?", doomed)
        tx.execute("DELETE FROM text WHERE NOT EXISTS (SELECT 1 FROM entry_text WHERE entry_text.digest = text.digest)")
        tx.execute("DELETE FROM claim WHERE since < ?", (stale_before,))
        tx.execute("DELETE FROM quarantine")


def _gc_files(root: Path, keep: Mapping[str, Collection[str]] | None, protect_since: float, stale_before: float,
              dry_run: bool, tally: _Tally) -> None:
    """gc of the entry files of a store from before the database."""
    for stage in stage_names(root):
        wanted = None if keep is None else keep.get(stage)
        for shard in sorted_dirs(os.path.join(root, stage)):
            for entry in scan(shard):
                found = name_kind(entry.name)
                try:
                    if found == "entry":
                        if wanted is None or entry.name[: -len(SUFFIX)] in wanted:
                            tally.add(stage, kept=1)
                            continue
                        st = entry.stat(follow_symlinks=False)
                        if st.st_mtime >= protect_since:
                            tally.add(stage, kept=1)
                            tally.kept_recent += 1
                            continue
                        _remove(entry.path, dry_run)
                        tally.add(stage, removed=1, freed=st.st_size)
                    elif found in ("temp", "claim") and entry.stat(follow_symlinks=False).st_mtime < stale_before:
                        _remove(entry.path, dry_run)
                        tally.temp_files += 1
                    elif found == "corrupt":
                        _remove(entry.path, dry_run)
                        tally.corrupt_files += 1
                except FileNotFoundError:
                    continue  # another gc or a writer got there first
    for path in quarantined_files(root):
        try:
            _remove_any(path, dry_run)
            tally.corrupt_files += 1
        except FileNotFoundError:
            continue


def _remove_any(path: str, dry_run: bool) -> None:
    """Remove a quarantined file, symlink or folder (never what a symlink points to)."""
    if dry_run:
        os.lstat(path)
    elif os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _remove(path: str, dry_run: bool) -> None:
    if dry_run:
        os.stat(path)  # still there? (raises FileNotFoundError like unlink would)
    else:
        os.unlink(path)
