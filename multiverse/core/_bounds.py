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
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "CAPS",
    "MAX_FILE_BYTES",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_ROWS",
    "MAX_NAME_LENGTH",
    "MAX_OPTIONS",
    "MAX_TRANSCRIPT_BYTES",
    "MAX_UNITS",
    "MAX_UNIVERSES",
    "MAX_VERDICT_ROWS",
    "ImportBudget",
    "name_problem",
    "read_regular_file",
    "regular_file_problem",
    "universes_problem",
    "whole_number_problem",
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

# -- imports: one budget of bytes and rows per import, checked before anything is written --------------
#: Bytes one import reads, all its input files together and each counted uncompressed (an Inspect
#: ``.eval`` is a zip: its members' inflated sizes count, not the file's). Parsed, a byte of JSON or CSV
#: takes 2-4 bytes of memory, so this keeps an import under 2 GB. ``max_bytes`` raises it.
MAX_IMPORT_BYTES = 256 * 2**20
#: Rows one import reads (a table's rows, a log's samples x epochs, a result file's results). The
#: dearest are promptfoo's: 500,000 results of 400 bytes peaked at 1.97 GiB, 300,000 at 1.30 GiB (a
#: table's rows take about a third of that), so 300,000 keep an import under 2 GB. ``max_rows`` raises it.
MAX_IMPORT_ROWS = 300_000
#: One transcript as written (one line of transcripts.jsonl). The folder's reader refuses a line past
#: 64 MB (``multiverse.tables.MAX_LINE_BYTES``), which is as far as ``max_transcript_bytes`` goes.
MAX_TRANSCRIPT_BYTES = 16 * 2**20
#: Members of one zip besides its samples (an Inspect log's header, summaries, journal).
_ZIP_EXTRA_MEMBERS = 1_000
_CHUNK = 2**20

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
                      probe: bool = False, raised_by: str | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes (``probe``: check only, b"").

    ``stat`` comes before ``open``: opening a FIFO blocks until a writer
    appears, and ``/dev/zero`` never ends. What was opened is checked again
    (``fstat``), and read with a bounded read, so a file swapped for a FIFO or
    a device in between is refused too. ``fail(message)`` builds the
    exception raised for a bad file; ``raised_by`` names the option that raises ``limit``.
    """
    raise_it = f" (`{raised_by}` raises it)" if raised_by else ""
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
        raise fail(f"file is {info.st_size / 1e6:.1f} MB; expected a {what} under {_whole_mb(limit)}{raise_it}")
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
        raise fail(f"file is larger than {_whole_mb(limit)}; expected a {what} under that size{raise_it}")
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


def _whole_mb(size: int) -> str:
    return f"{size // 2**20} MB" if size >= 2**20 and size % 2**20 == 0 else _mb(size)


def _mb(size: int) -> str:
    return f"{size / 2**20:,.1f} MB" if size < 10 * 2**20 else f"{size / 2**20:,.0f} MB"


def whole_number_problem(value: Any, low: int, high: int) -> str | None:
    """Why ``value`` is not a whole number from ``low`` to ``high`` (an epoch, an index, an id), or None.

    Numbers read from a file are checked against the type that stores them
    before anything is built from them: ``10**30`` would not fit the int64
    column it lands in, and ``True`` is not a number.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{_shown(value)}; expected a whole number from {low:,} to {high:,}"
    if not low <= value <= high:
        return f"{_shown(value)}; expected a whole number from {low:,} to {high:,}"
    return None


def _shown(value: Any) -> str:
    try:
        shown = repr(value)
    except ValueError:  # an int past Python's digits limit
        return "a number of more than 4,300 digits"
    return shown if len(shown) <= 40 else shown[:37] + "..."


class ImportBudget:
    """What one import may still read and write: bytes, rows and the size of each transcript.

    Every importer takes its files' bytes and its rows from one budget as it
    reads them, so a limit is met before memory grows past it and before
    anything is written. Each refusal names the limit and the option that
    raises it (``max_bytes``, ``max_rows``, ``max_transcript_bytes``);
    ``fail(message, option)`` builds the exception.
    """

    def __init__(self, fail: Callable[[str, str], Exception], *, max_bytes: int = MAX_IMPORT_BYTES,
                 max_rows: int = MAX_IMPORT_ROWS, max_transcript_bytes: int = MAX_TRANSCRIPT_BYTES,
                 max_line_bytes: int = 64 * 2**20) -> None:
        for option, value, top in (("max_bytes", max_bytes, None), ("max_rows", max_rows, None),
                                   ("max_transcript_bytes", max_transcript_bytes, max_line_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fail(f"{option}: {_shown(value)}; expected a whole number >= 1", option)
            if top is not None and value > top:
                raise fail(f"{option}: {value:,}; expected at most {top:,} bytes (a longer line of "
                           "transcripts.jsonl could not be read back)", option)
        self.fail = fail
        self.max_bytes, self.max_rows, self.max_transcript_bytes = max_bytes, max_rows, max_transcript_bytes
        self.bytes_read = 0
        self.rows_read = 0
        self.bytes_written = 0

    @property
    def bytes_left(self) -> int:
        return self.max_bytes - self.bytes_read

    def take_bytes(self, size: int, where: str) -> None:
        """Count ``size`` more bytes read from ``where``; refuse past ``max_bytes``."""
        self.bytes_read += size
        if self.bytes_read > self.max_bytes:
            raise self.fail(f"{where}: the import's input comes to more than {_mb(self.max_bytes)} "
                            f"(uncompressed); expected at most that (`max_bytes` raises it)", "max_bytes")

    def take_rows(self, count: int, where: str) -> None:
        """Count ``count`` more rows read from ``where``; refuse past ``max_rows``."""
        self.rows_read += count
        if self.rows_read > self.max_rows:
            raise self.fail(f"{where}: the import holds more than {self.max_rows:,} rows; expected at most that "
                            "(`max_rows` raises it)", "max_rows")

    def check_transcript(self, size: int, where: str) -> None:
        """Refuse one transcript (a line of transcripts.jsonl) of ``size`` bytes past ``max_transcript_bytes``."""
        if size > self.max_transcript_bytes:
            raise self.fail(f"{where}: the transcript comes to {_mb(size)}; expected at most "
                            f"{_mb(self.max_transcript_bytes)} per transcript (`max_transcript_bytes` raises it)",
                            "max_transcript_bytes")

    def take_transcript(self, size: int, where: str) -> None:
        """:meth:`check_transcript`, and count ``size`` towards all transcripts, which ``max_bytes`` bounds too.

        For a source whose transcripts can outgrow its input (an attachment referred to by many messages).
        """
        self.check_transcript(size, where)
        self.bytes_written += size
        if self.bytes_written > self.max_bytes:
            raise self.fail(f"{where}: the transcripts come to more than {_mb(self.max_bytes)}; expected at most "
                            "that (`max_bytes` raises it)", "max_bytes")

    def read_file(self, path: Path, fail: Callable[[str], Exception], what: str = "file") -> bytes:
        """The bytes of the regular file ``path``, taken from the budget (a special file is refused unread)."""
        data = read_regular_file(path, fail, limit=max(self.bytes_left, 0), what=what, raised_by="max_bytes")
        self.take_bytes(len(data), str(path))
        return data

    def check_zip(self, path: Path, fail: Callable[[str], Exception]) -> None:
        """Take a zip's inflated size from the budget, before any reader inflates it.

        The central directory's entry count is read first (a zip of millions of
        empty members would fill memory with their records), then the members'
        declared sizes are summed, then every member is inflated in pieces and
        its bytes counted, since a zip can declare less than it holds.
        """
        try:
            with open(path, "rb") as handle:
                end = zipfile._EndRecData(handle)  # type: ignore[attr-defined]  # the end record only
                if end is None:
                    raise fail("cannot read as a zip (no end of central directory)")
                members = int(end[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]
                most = self.max_rows + _ZIP_EXTRA_MEMBERS
                if members > most:
                    raise self.fail(f"{path}: the zip holds {members:,} members; expected at most {most:,} "
                                    "(`max_rows` raises it)", "max_rows")
                with zipfile.ZipFile(handle) as archive:
                    infos = archive.infolist()
                    declared = sum(info.file_size for info in infos)
                    if declared > self.bytes_left:
                        self.take_bytes(declared, f"{path} (its members declare {_mb(declared)} inflated)")
                    inflated = 0
                    for info in infos:
                        with archive.open(info) as member:
                            while chunk := member.read(_CHUNK):
                                inflated += len(chunk)
                                if inflated > declared:
                                    raise fail(f"{info.filename}: inflates past the size the zip declares; "
                                               "expected a zip whose members are what they declare")
                    self.take_bytes(inflated, f"{path} (inflated)")
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
            detail = " ".join(str(exc).split())[:160]
            raise fail(f"cannot read as a zip: {type(exc).__name__}: {detail}") from None
        except OSError as exc:
            raise fail(f"cannot be read ({exc.strerror or exc})") from None
