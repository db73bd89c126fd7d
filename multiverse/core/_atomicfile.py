"""Writing a file atomically, with the user's umask.

Every file a run, an import or a report writes goes through
:func:`atomic_write`: the content is written to a temporary name in the
target's own directory, flushed to disk, then renamed over the target. A
reader sees the old file or the new one, never half of one, and a crash
leaves at most a hidden ``.<name>.<pid>.<random>.tmp`` file.

The temporary file is created with mode ``0o666`` filtered by the process
umask, exactly as ``open(path, "w")`` would create it, so run files are as
readable by the team as anything else the user writes (0644 under umask
022, 0600 under 077). ``tempfile.mkstemp`` is not used because it always
creates 0600 files, whatever the umask.

A folder of many files written together (a run folder) need not pay an
fsync per file: inside :func:`synced_once`, each file is still written to a
temporary name and renamed (a killed process leaves whole files), and the
folder's data reach the disk in one flush of its file system when the block
ends, before the file that marks the folder complete is written (with its
own fsync and the folder's).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_text", "synced_once"]

# The files written inside synced_once (flushed together at its end), or None outside it.
_DEFERRED: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar("deferred_syncs", default=None)


def atomic_write(path: str | os.PathLike[str], write: Callable[[str], object]) -> None:
    """Replace ``path`` atomically by what ``write(tmp_path)`` writes to ``tmp_path``.

    ``write`` gets the name of an empty file that already exists with the
    final permissions; it may open it by name (pandas, matplotlib, yaml). On
    any error, including KeyboardInterrupt, the temporary file is removed and
    ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    os.close(fd)
    try:
        write(str(tmp))
        deferred = _DEFERRED.get()
        if deferred is None:
            with open(tmp, "rb") as fh:
                # On disk before the name points at it, or a power cut could leave a
                # complete-looking file over empty blocks.
                os.fsync(fh.fileno())
        else:
            deferred.append(path)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` atomically by ``text`` (UTF-8)."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


@contextlib.contextmanager
def synced_once(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, :func:`atomic_write` skips its fsync per file; when the block ends, the
    files written reach the disk in one flush of ``folder``'s file system (Linux ``syncfs``;
    elsewhere an fsync of each file), and the folder's entries in one fsync of the folder.
    Write what marks the folder complete after the block."""
    written: list[Path] = []
    token = _DEFERRED.set(written)
    try:
        yield
    finally:
        _DEFERRED.reset(token)
        if written:  # on an error too: what was renamed is as durable as a file written alone
            _flush(Path(folder), written)


def _flush(folder: Path, written: list[Path]) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        if not _syncfs(fd):
            for path in written:
                with contextlib.suppress(FileNotFoundError), open(path, "rb") as fh:
                    os.fsync(fh.fileno())
        os.fsync(fd)  # the renames themselves
    finally:
        os.close(fd)


def _syncfs(fd: int) -> bool:
    """Flush the file system holding ``fd`` in one call; False where there is no ``syncfs``."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(hasattr(libc, "syncfs") and libc.syncfs(fd) == 0)
    except OSError:
        return False
