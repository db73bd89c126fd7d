"""Stores near a spec that may hold its work: so a spec copied into another folder does not pay again unawares.

The store sits beside each spec (``store._path``). A spec copied into a
subfolder, or a project reorganised, starts with an empty store and would
pay for every call again. Before a run makes its first call (and in
``plan``), :func:`nearby_store` looks, cheaply, at the stores "nearby" and
says which one holds work for these very keys:

- the default store (``.multiverse/store``) in each of the spec folder's
  parents, up to :data:`PARENTS` levels;
- the default store in each sibling folder of the spec's folder and in each
  of its subfolders, at most :data:`FOLDERS` folders each (hidden folders
  skipped);
- the default store of the current directory.

Only a folder with a store database (or an older store's entry folders) is
opened, read-only (reading creates nothing), and only for a sample of the
spec's keys (:data:`SAMPLE` per stage, spread over them): a few indexed
look-ups per store, whatever the grid's size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FOLDERS", "PARENTS", "SAMPLE", "NearbyStore", "StoreWarning", "nearby_message", "nearby_store", "sample_keys"]

PARENTS = 3
FOLDERS = 50
SAMPLE = 64
_DEFAULT = Path(".multiverse") / "store"
#: what makes a folder a store worth opening: its database, or an older store's entry folders
_MARKS = ("store.sqlite3", "case", "transcript", "judgment")


class StoreWarning(UserWarning):
    """The store a run uses holds none of its work while a store nearby does."""


@dataclass(frozen=True)
class NearbyStore:
    """A store near the spec that holds ``found`` of the ``checked`` keys sampled from the spec's work."""

    path: Path
    found: int
    checked: int


def sample_keys(keys_by_stage: Mapping[str, Sequence[str]], size: int = SAMPLE) -> dict[str, list[str]]:
    """At most ``size`` keys per stage, spread evenly over each stage's keys (the first and last included)."""
    out = {}
    for stage, keys in keys_by_stage.items():
        keys = list(keys)
        if len(keys) > size:
            step = (len(keys) - 1) / (size - 1)
            keys = [keys[round(i * step)] for i in range(size)]
        if keys:
            out[stage] = keys
    return out


def _holds(root: Path, keys: Mapping[str, Sequence[str]]) -> int:
    from multiverse.store._store import Store

    store = Store(root)
    try:
        return sum(store.has(stage, key) for stage, stage_keys in keys.items() for key in stage_keys)
    except Exception:  # a store we cannot read is no store to point at; the run's own store is checked elsewhere
        return 0
    finally:
        store.close()


def _is_store(folder: Path) -> bool:
    return any(os.path.exists(folder / mark) for mark in _MARKS)


def _subfolders(folder: Path) -> list[Path]:
    try:
        entries = sorted(e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)
                         and not e.name.startswith("."))
    except OSError:
        return []
    return [Path(p) for p in entries[:FOLDERS]]


def candidates(spec_folder: Path) -> list[Path]:
    """The stores "nearby" a spec in ``spec_folder``, nearest first, each once (see the module)."""
    spec_folder = Path(os.path.abspath(spec_folder))
    places = [*spec_folder.parents][:PARENTS]
    places += [p for p in _subfolders(spec_folder.parent) if p != spec_folder]
    places += _subfolders(spec_folder)
    places.append(Path.cwd())
    seen: set[Path] = set()
    out = []
    for place in places:
        store = Path(os.path.realpath(place / _DEFAULT))
        if store not in seen:
            seen.add(store)
            out.append(store)
    return out


def nearby_store(spec_folder: str | os.PathLike[str], own: str | os.PathLike[str],
                 keys_by_stage: Mapping[str, Sequence[str]]) -> NearbyStore | None:
    """The nearest store other than ``own`` that holds some of the spec's work, when ``own`` holds none of it.

    ``keys_by_stage``: the spec's work keys per store stage (``case``, ``transcript``, ``judgment``), sampled
    here. None when ``own`` holds some of the sample, when nothing is sampled, or when no store nearby holds any.
    """
    keys = sample_keys(keys_by_stage)
    checked = sum(map(len, keys.values()))
    if not checked:
        return None
    own_path = Path(os.path.realpath(own))
    if _is_store(own_path) and _holds(own_path, keys):
        return None
    for store in candidates(Path(spec_folder)):
        if store != own_path and _is_store(store):
            found = _holds(store, keys)
            if found:
                return NearbyStore(store, found, checked)
    return None


def nearby_message(own: str | os.PathLike[str], found: NearbyStore) -> str:
    """The one line that says so, in the library's words (``store`` is the parameter that names a store)."""
    return (f"the store {_shown(own)} holds none of this spec's work, but {_shown(found.path)} holds "
            f"{found.found} of the {found.checked} work units checked; to reuse them instead of paying again, "
            f"give `store` {_shown(found.path)}")


def _shown(path: str | os.PathLike[str]) -> str:
    # Relative to the current directory when that is short and plain, so the line can be copied as a flag.
    relative = os.path.relpath(path)
    return relative if Path(relative).parts[:3].count("..") < 3 else os.fspath(path)
