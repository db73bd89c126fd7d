"""Whether a place can be written: the one probe every output and the store use.

``os.access`` says yes to root even on ``/proc`` or a read-only mount, so the
probe makes and removes a hidden file in the nearest existing folder.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from multiverse.errors import InputError

__all__ = ["PlaceError", "check_writable", "resolved"]


class PlaceError(InputError):
    """An output place that is refused. ``forceable``: writing there anyway is the caller's call."""

    def __init__(self, message: str, *, forceable: bool = False):
        super().__init__(message)
        self.forceable = forceable


def check_writable(path: Path, where: str) -> None:
    # The nearest existing folder decides whether the output can be made and written. os.access
    # says yes to root even on /proc or a read-only mount, so a hidden file is made and removed.
    probe = resolved(path)
    while not probe.is_dir() and probe != probe.parent:
        probe = probe.parent
    try:
        with tempfile.TemporaryFile(prefix=".multiverse-probe-", dir=probe):
            pass
    except OSError as exc:
        raise PlaceError(f"{where}: {probe} is not writable ({exc.strerror or exc}); expected a writable location") from None


def resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))
