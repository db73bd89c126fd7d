"""Reading a run or import folder: the one reader of its files, which treats them as untrusted.

Run folders are passed around (mailed, unpacked from archives, copied from a
colleague), so nothing in one is taken on trust. Every file of a folder is
read here, and each read:

* takes ``name`` inside the folder only: a symbolic link is followed only
  when it ends at a file inside the same folder (a link to a credentials
  file elsewhere, a dangling link or a loop is refused);
* reads regular files only: ``stat`` before ``open``, ``O_NONBLOCK`` and an
  ``fstat`` of what was opened, so a FIFO never blocks and a device
  (``/dev/zero``) is never read;
* reads at most the cap of its kind of file (:data:`CAPS`), with a bounded
  read, so no file can exhaust memory;
* checks every JSON and YAML document against its model
  (``multiverse.tables._folder_models``).

A problem is one :class:`~multiverse.errors.InputError` line naming the file,
the field and what was expected. The caps are documented in README ›
Reliability and security.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from multiverse.core import read_regular_file
from multiverse.errors import InputError
from multiverse.tables._folder_models import Manifest, ResolvedSpec, SpecDocument, TranscriptRecord, check_document

__all__ = [
    "CAPS",
    "MAX_LINE_BYTES",
    "TABLE_FILES",
    "check_folder",
    "folder_file",
    "read_folder_bytes",
    "read_manifest",
    "read_spec",
    "read_transcripts",
    "shown_transcripts",
    "table_path",
]

#: The tables of a run or import folder, each written as parquet and as CSV.
TABLE_FILES = tuple(f"{name}.{ext}" for name in ("verdicts", "criteria", "rates") for ext in ("parquet", "csv"))

_MB = 2**20
#: Caps per kind of file. A manifest lists every universe (at most 100,000, about 200 bytes each);
#: spec.yaml is the resolved spec (spec files are capped at 5 MB, and the rubric is inlined);
#: transcripts.jsonl and the tables grow with the run.
CAPS = {
    "manifest.json": 64 * _MB,
    "spec.yaml": 16 * _MB,
    "transcripts.jsonl": 8 * 1024 * _MB,
    "table": 64 * 1024 * _MB,
    # An ASSERT run's config, taxonomy and JSON-lines files (read whole), and its judge-config hash.
    "import file": 1024 * _MB,
    ".judge_config_hash": _MB,
}
#: One transcript (a line of transcripts.jsonl): far above 100 turns of long answers.
MAX_LINE_BYTES = 64 * _MB


def folder_file(folder: str | os.PathLike[str], name: str | os.PathLike[str]) -> Path | None:
    """The path to read for ``name`` in ``folder``, or None when there is no such entry.

    ``name`` may hold sub-folders. Symbolic links (of the file or of a folder
    on its way) count only when they end inside ``folder``; the resolved
    target is returned, so the reader opens what was checked. What is there
    (a regular file, not a FIFO or a device) is checked when it is read.
    """
    folder = Path(folder)
    path = folder / name
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        raise InputError(f"{path}: a symbolic link to nothing; expected a file of the folder") from None
    except (OSError, RuntimeError):
        raise InputError(f"{path}: a symbolic link that cannot be followed (a loop); expected a file of the folder") from None
    if not target.is_relative_to(folder.resolve()):
        raise InputError(f"{path}: leads outside the folder (a symbolic link or '..'); expected a file inside {folder}")
    return target


def _problem(path: Path) -> Any:
    return lambda expected: InputError(f"{path}: {expected}")


def read_folder_bytes(folder: str | os.PathLike[str], name: str | os.PathLike[str], *, kind: str | None = None) -> bytes | None:
    """The bytes of ``name`` in ``folder`` (None when absent), under the cap of its ``kind`` (default: ``name``)."""
    target = folder_file(folder, name)
    if target is None:
        return None
    return read_regular_file(target, _problem(Path(folder) / name), limit=CAPS[kind or str(name)])


def table_path(folder: str | os.PathLike[str], name: str) -> Path | None:
    """The checked path of a table file ``name`` of ``folder`` (None when absent): inside it, regular, under the cap."""
    from multiverse.core import regular_file_problem

    target = folder_file(folder, name)
    if target is None:
        return None
    shown = Path(folder) / name
    problem = regular_file_problem(target)
    if problem:
        raise InputError(f"{shown}: {problem}")
    size = target.stat().st_size
    if size > CAPS["table"]:
        raise InputError(f"{shown}: file is {size / 1e9:.1f} GB; expected a table under {CAPS['table'] // 2**30} GB")
    return target


def _text(folder: str | os.PathLike[str], name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{Path(folder) / name}: expected UTF-8 text, found byte 0x{data[exc.start]:02x} "
                         f"at offset {exc.start}") from None


# -- manifest.json ----------------------------------------------------------------------------


def read_manifest(folder: str | os.PathLike[str]) -> Manifest | None:
    """The folder's checked manifest, or None when it has none (not a run or import folder)."""
    data = read_folder_bytes(folder, "manifest.json")
    if data is None:
        return None
    path = Path(folder) / "manifest.json"
    try:
        document = json.loads(_text(folder, "manifest.json", data))
    except RecursionError:
        raise InputError(f"{path}: nesting too deep; expected the run's manifest (a few levels deep)") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    return check_document(Manifest, document, path, "a JSON object (the run's manifest)")


# -- spec.yaml ----------------------------------------------------------------------------------


def read_spec(folder: str | os.PathLike[str]) -> ResolvedSpec | None:
    """The folder's resolved spec (``spec.yaml``): its text and the checked document, or None when there is none."""
    from multiverse.errors import SpecError
    from multiverse.spec import parse_yaml

    data = read_folder_bytes(folder, "spec.yaml")
    if data is None:
        return None
    path = Path(folder) / "spec.yaml"
    text = _text(folder, "spec.yaml", data)
    try:
        document, _ = parse_yaml(text, path)
    except SpecError as exc:  # this file came with a folder: an input problem, reported the same way
        raise InputError(str(exc)) from None
    return ResolvedSpec(text, check_document(SpecDocument, document, path, "a YAML mapping (the run's resolved spec)"))


# -- transcripts.jsonl --------------------------------------------------------------------------


def read_transcripts(folder: str | os.PathLike[str], name: str = "transcripts.jsonl") -> dict[str, dict[str, Any]] | None:
    """Every transcript of the folder's ``transcripts.jsonl`` (or ``name``) by key, or None when it has none.

    Each line is one JSON object checked against :class:`TranscriptRecord`.
    Lines are read one at a time, each under :data:`MAX_LINE_BYTES`, and the
    whole file under its cap.
    """
    out: dict[str, dict[str, Any]] = {}
    lines = _lines(folder, name)
    if lines is None:
        return None
    path = Path(folder) / name
    for number, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except RecursionError:
            raise InputError(f"{path}: line {number}: nesting too deep; expected one transcript per line") from None
        except ValueError as exc:
            raise InputError(f"{path}: line {number}: not valid JSON ({exc}); expected one JSON object per line") from None
        check_document(TranscriptRecord, record, path, "a JSON object (one transcript)", where=f"line {number}")
        out[record["key"]] = record
    return out


#: The keys a store can hold: a verdicts table may carry anything in its transcript_key column.
_STORE_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")


def shown_transcripts(source: str | os.PathLike[str] | None, verdicts: Any, store: Any = None
                      ) -> tuple[dict[str, dict[str, Any]] | None, str]:
    """The transcripts a source's report and explorer show (key -> record), or None and why there are none.

    The one rule for both: a run folder's own ``transcripts.jsonl`` first;
    else the store the caller names (a directory or a
    ``multiverse.store._store.Store``), read for the keys the verdicts name. Never
    the store a folder's manifest names: a folder is untrusted input, and
    that field could point at the reader's own store, whose transcripts
    would then be copied into a page that gets shared.
    """
    folder = Path(source) if source is not None and Path(source).is_dir() else None
    own = read_transcripts(folder) if folder is not None else None
    if own:
        return own, ""
    if store is not None:
        return _from_store(verdicts, store), ""
    if folder is None:
        return None, ("this source has no transcripts.jsonl (imported data or a bare table); "
                      "give the store that holds its transcripts to show them")
    from multiverse.core import shared_path

    # The note is shown in pages that travel: the folder by its name, never its absolute path.
    return None, (f"{shared_path(folder)} has no transcripts.jsonl, or an empty one; give the store that holds the run's "
                  "transcripts to show them (the store a folder's manifest names is never read: a folder is "
                  "untrusted input)")


def _from_store(verdicts: Any, store: Any) -> dict[str, dict[str, Any]]:
    from multiverse.store import open_store

    opened = open_store(store)  # the store the caller named, never one a folder names
    if "transcript_key" not in verdicts.columns:
        return {}
    keys = [k for k in map(str, verdicts["transcript_key"].dropna().unique()) if _STORE_KEY.fullmatch(k)]
    try:
        return opened.get_many("transcript", keys)
    finally:
        if opened is not store:
            opened.close()  # a reader leaves the store's files as it found them


def _lines(folder: str | os.PathLike[str], name: str, kind: str = "transcripts.jsonl") -> Iterator[tuple[int, str]] | None:
    target = folder_file(folder, name)
    if target is None:
        return None
    path = Path(folder) / name
    fail = _problem(path)
    # The same checks as every other file, without reading the whole file at once.
    read_regular_file(target, fail, limit=CAPS[kind], probe=True)

    def lines() -> Iterator[tuple[int, str]]:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise fail("expected a regular file; it changed while it was read")
            total = 0
            for number in range(1, 1 << 62):
                raw = handle.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    return
                total += len(raw)
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    raise fail(f"line {number}: longer than {MAX_LINE_BYTES // _MB} MB; expected one transcript per line")
                if total > CAPS[kind]:
                    raise fail(f"larger than {CAPS[kind] // 2**30} GB; expected a file under that size")
                try:
                    yield number, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise fail(f"line {number}: expected UTF-8 text, found byte 0x{raw[exc.start]:02x}") from None

    return lines()


# -- the whole folder -----------------------------------------------------------------------------


def check_folder(folder: str | os.PathLike[str]) -> None:
    """Refuse a folder any of whose files would be refused when read (the transcripts' lines aside).

    ``load_run`` calls this, so a command refuses a bad folder before any
    analysis runs or anything is written: ``spec.yaml`` is read and checked
    (it is small); the tables and ``transcripts.jsonl`` are checked as files
    (inside the folder, regular, under their caps), their content when read.
    """
    read_spec(folder)
    for name in TABLE_FILES:
        table_path(folder, name)
    target = folder_file(folder, "transcripts.jsonl")
    if target is not None:
        read_regular_file(target, _problem(Path(folder) / "transcripts.jsonl"), limit=CAPS["transcripts.jsonl"], probe=True)
