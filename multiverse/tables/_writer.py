"""Writing a run or import folder: every file atomically, the manifest last, so a folder with a manifest is complete.

This is the one writer of a folder's files, for runs and imports alike; the
folder's reader (:mod:`multiverse.tables._folder`) is its counterpart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from multiverse.core import SCHEMA_VERSION, atomic_write_text, synced_once
from multiverse.errors import InputError
from multiverse.tables._folder_models import TranscriptRecord
from multiverse.tables._index import INDEXED_ROWS, drop_index, index_table
from multiverse.tables._places import DERIVED_FILES
from multiverse.tables._scores import BINARY, with_score_column
from multiverse.tables._tables import write_json, write_table

__all__ = ["write_run_folder"]

# Files a folder may lack; an earlier folder's copy of one is removed so nothing describes another run.
_OPTIONAL_FILES = ("criteria.parquet", "criteria.csv", "transcripts.jsonl", "spec.yaml")


def write_run_folder(
    out_dir: str | os.PathLike[str],
    *,
    verdicts: pd.DataFrame,
    criteria: pd.DataFrame | None,
    rates: pd.DataFrame,
    manifest: Mapping[str, Any],
    spec_document: Mapping[str, Any] | None = None,
    transcripts: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write a run (or import) folder, each file atomically; the manifest goes last.

    ``transcripts.jsonl`` holds every transcript the verdicts refer to (one
    JSON object per line, ``tables.TranscriptRecord``: key, system, status, reason, stop_reason, turns), so
    the folder can be read, reported and shared without the store.
    ``spec_document`` is written as ``spec.yaml``. A file of an earlier
    folder that this one has no counterpart for (criteria, transcripts, spec)
    is removed, so what is left never describes another run, and so is every
    file made from the earlier tables (``places.DERIVED_FILES``: the report),
    before the first table is rewritten. ``manifest`` gets ``schema_version`` when it has none, and ``scale``
    (binary) when it records none; ``verdicts`` gets a ``score`` column (all NaN) when it has none, so every
    folder of this layout has both. Returns the folder.
    """
    import yaml

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: output folder: expected a folder, found a file")
    out.mkdir(parents=True, exist_ok=True)
    # The manifest marks a complete folder: take it away first, put it back last.
    (out / "manifest.json").unlink(missing_ok=True)
    for name in DERIVED_FILES:
        (out / name).unlink(missing_ok=True)
    given = {"criteria.parquet": criteria, "criteria.csv": criteria, "transcripts.jsonl": transcripts,
             "spec.yaml": spec_document}
    for name in _OPTIONAL_FILES:
        if given[name] is None:
            (out / name).unlink(missing_ok=True)
    # An earlier folder's index would only be ignored (it names the table it was read from): drop it.
    for name in ("verdicts", "criteria"):
        drop_index(out, name)
    # One flush of the folder's files before the manifest, not an fsync per file (each is still
    # written to a temporary name and renamed: a killed run leaves whole files).
    with synced_once(out):
        if transcripts is not None:
            # One model for the line the run writes and the line the folder's reader checks.
            lines = [TranscriptRecord.from_stored(k, r).line() for k, r in sorted(transcripts.items())]
            atomic_write_text(out / "transcripts.jsonl", "\n".join(lines) + "\n")
        write_table(with_score_column(verdicts), out, "verdicts")
        if criteria is not None:
            write_table(criteria, out, "criteria")
        write_table(rates, out, "rates")
        if spec_document is not None:
            text = "# The resolved spec of this run (rubric inlined).\n" + yaml.safe_dump(
                dict(spec_document), sort_keys=False, allow_unicode=True)
            atomic_write_text(out / "spec.yaml", text)
    scale = manifest.get("scale")
    if scale is None:
        # A run's spec declares its judge's scale: the manifest records it for every reader.
        judge = (spec_document or {}).get("judge") or {}
        scale = dict(judge.get("scale") or BINARY.model_dump()) if isinstance(judge, Mapping) else BINARY.model_dump()
    elif not isinstance(scale, Mapping):
        scale = scale.model_dump()
    write_json({"schema_version": SCHEMA_VERSION, **manifest, "scale": scale}, out / "manifest.json")
    # After the manifest: the index is a cache, and a folder without one is complete.
    for name, table in (("verdicts", verdicts), ("criteria", criteria)):
        if table is not None and len(table) >= INDEXED_ROWS:
            index_table(out, name)
    return out
