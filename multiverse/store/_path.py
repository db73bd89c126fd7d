"""Where a store is, and whether it can be used there: one rule for every command.

``--store DIR`` (the caller's explicit choice), else ``$MULTIVERSE_STORE``, else
``.multiverse/store`` beside the spec file, else (a spec with no file of its
own, like the built-in demo) ``.multiverse/store`` in the current directory.
``run``, ``plan``, ``draft``, the demo and ``store stats|gc`` all ask
:func:`default_store_path`, so a store a run filled is the one the store
commands show. :func:`store_of` is the same rule for commands given several
specs, or a run folder (whose manifest records the store its run used).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from multiverse.errors import InputError
from multiverse.store._db import is_server

__all__ = ["ENV_VAR", "RecordedStore", "check_store_path", "default_store_path", "store_of", "why_this_store"]

ENV_VAR = "MULTIVERSE_STORE"


def default_store_path(spec_path: str | os.PathLike[str] | None, explicit: str | os.PathLike[str] | None = None) -> Path:
    """The one rule for where a store is: ``explicit`` (the caller's choice), else
    ``$MULTIVERSE_STORE``, else ``.multiverse/store`` beside the spec file, else
    (no spec file, e.g. the built-in demo) ``.multiverse/store`` in the current directory.

    A ``postgresql://`` URL (a store on a database server) is answered as the
    string it is: a path would fold its ``//``."""
    if explicit is not None and str(explicit).strip():
        return _place(explicit)
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return _place(env)
    base = Path(spec_path).parent if spec_path is not None else Path(".")
    return base / ".multiverse" / "store"


def why_this_store(spec_path: str | os.PathLike[str] | None, explicit: str | os.PathLike[str] | None = None) -> str:
    """Which branch of :func:`default_store_path`'s rule chose the store, in words a person reads."""
    if explicit is not None and str(explicit).strip():
        return "the store given"
    if os.environ.get(ENV_VAR, "").strip():
        return f"from ${ENV_VAR}"
    return "beside the spec" if spec_path is not None else "in the current directory"


def _place(given: str | os.PathLike[str]) -> Path:
    if is_server(given):
        return given  # type: ignore[return-value]  # a server's URL is the store's name as it is
    return Path(given).expanduser()


class RecordedStore(Protocol):
    """A run folder's manifest, as far as :func:`store_of` reads it (the tables room's ``Manifest`` is one)."""

    @property
    def store(self) -> str | None: ...


def store_of(places: Iterable[str | os.PathLike[str]], given: str | os.PathLike[str] | None = None, *,
             manifest_of: Callable[[Path], RecordedStore | None] | None = None) -> Path:
    """The one store that specs and run folders use: what ``store stats|gc`` act on.

    ``given`` (the caller's ``--store``) wins. Else each place is a spec file,
    whose store is :func:`default_store_path` of it, or, when ``manifest_of``
    is given, a run folder, whose store is the one its manifest records
    (``manifest_of(folder)`` reads it; None: no manifest, so not a run
    folder). Every place must name the same store (``InputError`` otherwise);
    no place at all: the default store. The store a folder's manifest names
    is read only through ``manifest_of``: a caller that shows or copies what
    a store holds from an untrusted folder passes none.
    """
    if given is not None:
        return default_store_path(None, given)
    found = set()
    for place in map(Path, places):
        manifest = manifest_of(place) if manifest_of is not None and place.is_dir() else None
        if manifest is not None:
            if not manifest.store:
                raise InputError(f"{place / 'manifest.json'}: store: expected the path of the run's store")
            found.add(_place(manifest.store))
        elif not place.is_file():
            what = "a spec file" if manifest_of is None else "a spec file or a run directory with a manifest.json"
            raise InputError(f"{place}: expected {what}")
        else:
            found.add(default_store_path(place))
    if len(found) > 1:
        raise InputError(f"these specs keep their stores in different places ({', '.join(sorted(map(str, found)))}); "
                         "expected one store: name it with `store`", param="store")
    return found.pop() if found else default_store_path(None)


def check_store_path(path: str | os.PathLike[str], *, out: str | os.PathLike[str] | None = None, write: bool = True) -> Path:
    """Check, before anything is paid, that a store can be used at ``path``; return it.

    Raises one-line ``InputError`` when ``path`` (or the folder it would be
    created in) is not a writable directory, or when the store and the run
    directory ``out`` would contain each other (a run directory is shared,
    copied and deleted as a unit; a store is kept across runs). With
    ``write=False`` (plan, stats) only a path that exists but is not a
    directory is refused: a store not made yet is just empty.
    """
    if is_server(path):
        return path  # type: ignore[return-value]  # a server is checked when the run connects, before any call
    path = Path(path).expanduser()
    where = f"store {path}"
    if not write:
        if os.path.lexists(path) and not path.is_dir():
            raise InputError(f"{where}: is not a directory; expected a store directory")
        return path
    existing = path
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():
        raise InputError(f"{where}: {existing} is a dangling symlink; expected a directory")
    if not existing.is_dir():
        what = "is a file" if existing.is_file() else "is not a directory"
        raise InputError(f"{where}: {existing} {what}; expected a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{where}: {existing} is not writable; expected a directory you can write to")
    from multiverse.core import check_writable

    check_writable(existing, where)  # a probe file: os.access says yes to root on a read-only mount
    if existing == path:
        # Stages, quarantine and leases: a run writes into each of them.
        for sub in (Path(e.path) for e in os.scandir(path) if e.is_dir(follow_symlinks=False)):
            if not os.access(sub, os.W_OK | os.X_OK):
                raise InputError(f"{where}: {sub} is not writable; expected a store you can write to")
    if out is not None:
        store, run = _absolute(path), _absolute(Path(out))
        if store == run or store.is_relative_to(run) or run.is_relative_to(store):
            raise InputError(f"{where}: the run directory {out} and the store would contain each other; "
                             "expected them apart (a run directory is shared and replaced, a store is kept)")
    return path


def _absolute(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))
