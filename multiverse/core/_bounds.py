"""Bounds on what any input may ask for: safe names, finite sizes, regular input files.

A spec is checked against these bounds by ``validate``, before anything is
planned or paid, so a typo (``cases_per_cell: 1000000000``) or a hostile file
(a FIFO, ``/dev/zero``, ``name: ../../x``) is one line with exit 2, never a
run that grows memory without end or writes outside its place.

The caps are far above any audit we know of (they are documented in README ›
Reliability and security); raising one is a one-line change here.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "CAPS",
    "MAX_FILE_BYTES",
    "MAX_NAME_LENGTH",
    "MAX_OPTIONS",
    "MAX_UNITS",
    "MAX_UNIVERSES",
    "MAX_VERDICT_ROWS",
    "name_problem",
    "read_regular_file",
    "regular_file_problem",
    "universes_problem",
]

#: Spec, rubric, cases and world files: YAML a person edits is far smaller.
MAX_FILE_BYTES = 5 * 1024 * 1024
#: A spec name becomes a directory name (runs/<name>); most file systems allow 255 bytes.
MAX_NAME_LENGTH = 100
#: Universes one spec may expand into (after ``sample``); larger grids must be sampled.
MAX_UNIVERSES = 100_000
#: Unique work units (case drafts + transcripts + judge calls) ``run`` lists before asking
#: (``max_units``) and ``plan`` reads from the store: each is at least one paid call.
MAX_UNITS = 1_000_000
#: Options over all axes: each is resolved on its own at validate (milliseconds apiece).
MAX_OPTIONS = 2_000
#: universes x systems x cases x replicates: the rows of the verdicts table.
MAX_VERDICT_ROWS = 20_000_000

MAX_SEED = 2**63

#: Per-field caps: (YAML path, cap, why).
CAPS = {
    "design.cases_per_cell": 10_000,
    "design.allocation.cases": 10_000,
    "rollout.max_turns": 100,
    "rollout.replicates": 1_000,
    "judge.samples": 100,
    "scoring.ci.n_boot": 100_000,
    "sample.n": MAX_UNIVERSES,
}

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\- ]*")


def read_regular_file(path: Path, fail: Callable[[str], Exception], *, limit: int = MAX_FILE_BYTES, what: str = "file",
                      probe: bool = False) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes (``probe``: check only, b"").

    ``stat`` comes before ``open``: opening a FIFO blocks until a writer
    appears, and ``/dev/zero`` never ends. What was opened is checked again
    (``fstat``), and read with a bounded read, so a file swapped for a FIFO or
    a device in between is refused too. ``fail(message)`` builds the
    exception raised for a bad file.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise fail("file not found") from None
    except OSError as exc:
        raise fail(f"cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise fail(f"expected a {what}, got a directory")
    if not stat.S_ISREG(info.st_mode):
        raise fail(f"expected a regular {what}, got a {_kind(info.st_mode)}")
    if info.st_size > limit:
        raise fail(f"file is {info.st_size / 1e6:.1f} MB; expected a {what} under {limit // 2**20} MB")
    if probe:
        return b""
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, open does not hang.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            opened = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(opened):
                raise fail(f"expected a regular {what}, got a {_kind(opened)}")
            data = fh.read(limit + 1)
    except OSError as exc:
        raise fail(f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise fail(f"file is larger than {limit // 2**20} MB; expected a {what} under that size")
    return data


def regular_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a data file (missing, a folder, a FIFO, a device), or None.

    Tables have no size cap (they reach millions of rows), but a FIFO would
    block the reader and a device never ends, so both are refused up front.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "file not found"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(info.st_mode):
        return "expected a file, got a directory"
    if not stat.S_ISREG(info.st_mode):
        return f"expected a regular file, got a {_kind(info.st_mode)}"
    return None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


def name_problem(name: str) -> str | None:
    """What is wrong with a spec ``name`` as a directory name, or None.

    The name becomes ``runs/<name>``, so it must be one path component that
    cannot climb (``..``), hide (``.``) or pass for a flag (``-x``).
    """
    shown = repr(name) if len(name) <= 60 else repr(name[:60] + "...")
    if not name:
        return "expected a non-empty name (it becomes the run directory runs/<name>)"
    if len(name) > MAX_NAME_LENGTH:
        return f"expected a name of at most {MAX_NAME_LENGTH} characters, got {len(name)}"
    if name in (".", "..") or not _NAME.fullmatch(name) or name != name.strip() or name.endswith("."):
        return (f"expected a safe directory name (letters, digits, '_', '-', '.', spaces; not starting with "
                f"'-' or '.', no '/', '\\' or control characters), got {shown}")
    return None


def universes_problem(n_universes: int, n_rows_per_universe: int) -> str | None:
    """Too many universes, or too many verdict rows across them."""
    if n_universes > MAX_UNIVERSES:
        return (f"the axes make {n_universes:,} universes; expected at most {MAX_UNIVERSES:,} "
                "(run a sample of the grid: sample: {n: ...})")
    if n_universes * n_rows_per_universe > MAX_VERDICT_ROWS:
        return (f"{n_universes:,} universes x {n_rows_per_universe:,} transcripts make "
                f"{n_universes * n_rows_per_universe:,} verdicts; expected at most {MAX_VERDICT_ROWS:,} "
                "(sample the grid or use fewer cases)")
    return None
