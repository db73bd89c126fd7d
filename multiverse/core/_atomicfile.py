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
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_text"]


def atomic_write(path: str | os.PathLike, write: Callable[[str], object]) -> None:
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
        with open(tmp, "rb") as fh:
            # On disk before the name points at it, or a power cut could leave a
            # complete-looking file over empty blocks.
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` atomically by ``text`` (UTF-8)."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
