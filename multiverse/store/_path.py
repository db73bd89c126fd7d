"""Where a store is, and whether it can be used there: one rule for every command.

``--store DIR`` (the caller's explicit choice), else ``$MULTIVERSE_STORE``, else
``.multiverse/store`` beside the spec file, else (a spec with no file of its
own, like the built-in demo) ``.multiverse/store`` in the current directory.
``run``, ``plan``, ``draft``, the demo and ``store stats|gc`` all ask
:func:`default_store_path`, so a store a run filled is the one the store
commands show.
"""

from __future__ import annotations

import os
from pathlib import Path

from multiverse.errors import InputError

__all__ = ["ENV_VAR", "check_store_path", "default_store_path"]

ENV_VAR = "MULTIVERSE_STORE"


def default_store_path(spec_path: str | Path | None, explicit: str | Path | None = None) -> Path:
    """The one rule for where a store is: ``explicit`` (the caller's choice), else
    ``$MULTIVERSE_STORE``, else ``.multiverse/store`` beside the spec file, else
    (no spec file, e.g. the built-in demo) ``.multiverse/store`` in the current directory."""
    if explicit is not None and str(explicit).strip():
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    base = Path(spec_path).parent if spec_path is not None else Path(".")
    return base / ".multiverse" / "store"


def check_store_path(path: str | Path, *, out: str | Path | None = None, write: bool = True) -> Path:
    """Check, before anything is paid, that a store can be used at ``path``; return it.

    Raises one-line ``InputError`` when ``path`` (or the folder it would be
    created in) is not a writable directory, or when the store and the run
    directory ``out`` would contain each other (a run directory is shared,
    copied and deleted as a unit; a store is kept across runs). With
    ``write=False`` (plan, stats) only a path that exists but is not a
    directory is refused: a store not made yet is just empty.
    """
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
    from multiverse.core._writable import check_writable

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
