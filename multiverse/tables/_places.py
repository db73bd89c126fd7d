"""Where results may be written: output folders and report files, checked before anything runs.

A run or an import writes a fixed set of files into one folder. Before any
model is called (and before an import reads its tables), that folder is
checked, so a bad place is one line with exit 2 and nothing half-written:

- it is a folder (or can become one): not a file, no parent that is a file,
  not on a read-only path;
- it holds none of the inputs it would write over (a spec named
  ``spec.yaml``, a table named ``verdicts.csv``), and is not an ASSERT run
  folder being imported;
- it is not the store, nor inside it;
- if it exists, it is empty, or a run folder when writing a run, or an
  import folder when writing an import. A folder of the other kind, one
  holding other files, or a run folder of another spec (its manifest names
  another ``spec``, when the caller says whose run it writes) needs
  ``force`` (the caller's explicit consent): the files written are then the
  only ones replaced; the rest stay, except the files derived from the
  tables (``DERIVED_FILES``: the report), which the writer removes so none
  describes other tables. Inputs, the store and unwritable places are
  refused even with ``force``.

Names starting with ``.`` (temporary files, a store kept in the folder) do
not make a folder "unrelated".
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from multiverse.core import PlaceError, check_writable
from multiverse.core import resolved as _resolved
from multiverse.errors import InputError
from multiverse.tables._folder import TABLE_FILES, read_manifest
from multiverse.tables._folder_models import Manifest

__all__ = ["DERIVED_FILES", "IMPORT_FILES", "RUN_FILES", "TABLE_FILES", "PlaceError", "check_output_dir", "check_output_file", "check_writable",
           "folder_kind"]

# Made from a folder's tables after they are written: stale the moment the tables are rewritten.
DERIVED_FILES = ("report.html",)
RUN_FILES = (*TABLE_FILES, "manifest.json", "spec.yaml", "transcripts.jsonl", *DERIVED_FILES)
IMPORT_FILES = (*TABLE_FILES, "manifest.json", *DERIVED_FILES)


def folder_kind(path: Path) -> str | None:
    """``"run"``, ``"import"``, or None when ``path`` holds no readable manifest."""
    manifest = _manifest(path)
    if manifest is None:
        return None
    # An import's manifest names its source; a run's has none (the field, not its value, tells them apart).
    return "import" if "source" in manifest.model_fields_set else "run"


def _manifest(path: Path) -> Manifest | None:
    try:
        manifest = read_manifest(path)
    except InputError:  # a manifest that is not one (a FIFO, a list, a link outside): no folder of ours
        return None
    return manifest


def check_output_dir(
    out: str | os.PathLike[str],
    *,
    kind: str,
    inputs: Iterable[str | os.PathLike[str]] = (),
    input_dirs: Iterable[str | os.PathLike[str]] = (),
    store: str | os.PathLike[str] | None = None,
    force: bool = False,
    spec_name: str | None = None,
) -> Path:
    """Check that a ``kind`` (``"run"`` or ``"import"``) folder may be written at ``out``.

    ``inputs`` are files the command reads, ``input_dirs`` folders it reads
    (ASSERT runs): none may be written over or into. ``spec_name``: the spec
    whose run is written; a run folder of another spec then needs ``force``.
    Returns ``out``; raises ``InputError`` naming the folder and the problem.
    """
    out = Path(out)
    written = RUN_FILES if kind == "run" else IMPORT_FILES
    where = f"{out}: output folder"
    _check_parents(out, where)
    if out.exists() and not out.is_dir():
        raise PlaceError(f"{where}: expected a folder, found a {'file' if out.is_file() else 'special file'}")
    target = _resolved(out)
    for path in inputs:
        path = Path(path)
        if _resolved(path.parent) == target and path.name in written:
            raise PlaceError(f"{where}: holds the input {path.name}, which the {kind} would overwrite; "
                             "expected another folder")
    for folder in input_dirs:
        folder = _resolved(Path(folder))
        if target == folder or folder in target.parents:
            raise PlaceError(f"{where}: is (inside) the input folder {folder}; expected a folder outside the inputs")
    if store is not None:
        root = _resolved(Path(store))
        if target == root or root in target.parents:
            raise PlaceError(f"{where}: is inside the store {store}; expected a folder outside it")
    if out.is_dir():
        _check_existing(out, where, kind, written, force, spec_name)
    check_writable(out, where)
    return out


def _check_existing(out: Path, where: str, kind: str, written: tuple[str, ...], force: bool,
                    spec_name: str | None) -> None:
    try:
        names = [p.name for p in out.iterdir() if not p.name.startswith(".")]
    except OSError as exc:
        raise PlaceError(f"{where}: cannot be listed ({exc.strerror or exc})") from None
    if not names:
        return
    found = folder_kind(out)
    if force:
        return
    if found is not None and found != kind:
        raise PlaceError(f"{where}: is an existing {found} folder; expected a new folder or an earlier {kind} folder",
                         forceable=True)
    if found == "run" and spec_name is not None:
        # The spec's name, not its digest: an edited spec rerun into its own folder is the usual workflow.
        manifest = _manifest(out)
        held = manifest.spec if manifest is not None else None
        if held != spec_name:
            raise PlaceError(f"{where}: holds the run of spec {held!r}; expected a new folder or an earlier run of "
                             f"spec {spec_name!r}", forceable=True)
    if found is None and any(name not in written for name in names):
        shown = ", ".join(sorted(n for n in names if n not in written)[:5])
        raise PlaceError(f"{where}: is not empty and is not {_article(kind)} {kind} folder (it holds {shown}); "
                         "expected a new or empty folder", forceable=True)


def check_output_file(out: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Check that a single file (a report) may be written at ``out``; returns ``out``."""
    out = Path(out)
    where = f"{out}: output file"
    if out.is_dir():
        raise PlaceError(f"{where}: is a folder; expected a file name (e.g. {out / 'report.html'})")
    if out.exists() and not out.is_file():
        raise PlaceError(f"{where}: is a special file; expected a regular file name")
    _check_parents(out, where)
    for path in inputs:
        if Path(path).exists() and _resolved(Path(path)) == _resolved(out):
            raise PlaceError(f"{where}: is the input {path}; expected another file name")
    check_writable(out.parent if not out.exists() else out, where)
    return out


def _check_parents(out: Path, where: str) -> None:
    for parent in _resolved(out).parents:
        if parent.exists():
            if not parent.is_dir():
                raise PlaceError(f"{where}: {parent} is a file; expected a folder there")
            return


def _article(word: str) -> str:
    # "an import folder", "a run folder": the kind is shown to users in one line.
    return "an" if word[:1].lower() in "aeiou" else "a"
