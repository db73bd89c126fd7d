"""How a page that travels names a local path: never absolutely.

A report or an explorer page is one file sent to colleagues. A path in it
as this machine spells it (``/home/alice/audits/.multiverse/store``) shows
directory and user names the reader has no use for. :func:`shared_path` is
the one rule every field of such a page that names a local place goes
through: a path relative to the run folder when the two meet below the home
directory (or anywhere not above it), else only the path's own name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["shared_path", "shared_text"]

# An absolute POSIX path in free text (a warning, a failure's reason): a "/" that starts a word, then at
# least one more component. A URL's "//" is not one (the scheme's ":" precedes it).
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])(?:~/|/)(?:[^\s/:;,'\"<>()\[\]]+/)+[^\s/:;,'\"<>()\[\]]*")

# A store's default place is the folder ".multiverse/store": its name alone ("store") says nothing.
_NAMED_BY_PARENT = {"store": ".multiverse"}


def shared_path(path: str | os.PathLike[str], base: str | os.PathLike[str] | None = None) -> str:
    """``path`` as a shared page shows it: relative to the folder ``base`` (the run folder) when both are
    local and meet below the file system's root and the home directory's parents; else its name.

    A path that is already relative (as a user typed it) is shown as typed, unless it climbs out of
    where it was typed; a URL (a ``postgresql://`` store, already without its password) as it is.
    """
    text = os.fspath(path)
    if "://" in text:
        return text
    given = Path(text).expanduser()
    if not given.is_absolute() and ".." not in given.parts:
        return given.as_posix()
    absolute = Path(os.path.abspath(given))
    if base is not None:
        folder = Path(os.path.abspath(Path(base).expanduser()))
        common = Path(os.path.commonpath([absolute, folder]))
        # Below the common folder the relative path names only what the two do not share; the common
        # folder must not be the root or a parent of the home directory, whose children are user names.
        if common != Path(common.anchor) and common not in Path.home().parents:
            return Path(os.path.relpath(absolute, folder)).as_posix()
    name = absolute.name or absolute.anchor
    parent = _NAMED_BY_PARENT.get(name)
    return f"{parent}/{name}" if parent is not None and absolute.parent.name == parent else name


def shared_text(text: str, base: str | os.PathLike[str] | None = None) -> str:
    """``text`` (a warning, a failure's reason) with every absolute local path in it as :func:`shared_path`
    shows it, so a message that named a file on this machine can go into a page that travels."""
    if "/" not in text:
        return text
    return _ABSOLUTE.sub(lambda m: shared_path(m.group(0), base), text)
