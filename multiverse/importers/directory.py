"""The import directory: verdicts, criteria and rates tables plus manifest.json.

An import directory holds the same tables as a run directory, each as ``.parquet`` and
``.csv``, and a manifest::

    {"schema_version": 1, "source": "assert" | "table", "axes": [...], "factors": [...],
     "universes": [universe ids], "primary": null, "warnings": [...], ...}

Every file is written atomically (multiverse.tables); the manifest is removed first and
written last, so a directory with a manifest is complete.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from multiverse.errors import InputError
from multiverse.tables import SCHEMA_VERSION, write_json, write_table

__all__ = ["ImportResult", "write_import_dir"]


@dataclass(frozen=True)
class ImportResult:
    """What an importer wrote: the directory, its tables and its manifest."""

    out_dir: Path
    verdicts: pd.DataFrame
    criteria: pd.DataFrame | None
    rates: pd.DataFrame
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        return list(self.manifest.get("warnings", []))

    @property
    def axes(self) -> list[str]:
        return list(self.manifest.get("axes", []))

    @property
    def factors(self) -> list[str]:
        return list(self.manifest.get("factors", []))


def write_import_dir(
    out_dir: str | os.PathLike,
    *,
    verdicts: pd.DataFrame,
    criteria: pd.DataFrame | None,
    rates: pd.DataFrame,
    manifest: dict[str, Any],
) -> ImportResult:
    """Write the tables and manifest into ``out_dir`` (created if needed), each file atomically.

    Callers validate everything before calling this, so bad input writes nothing. A
    criteria table left by an earlier import into the same directory is removed when
    this import has none.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: --out: expected a directory, found a file")
    manifest = {"schema_version": SCHEMA_VERSION, **manifest}
    # The manifest marks a complete directory: take it away first, put it back last.
    (out / "manifest.json").unlink(missing_ok=True)
    write_table(verdicts, out, "verdicts")
    if criteria is not None:
        write_table(criteria, out, "criteria")
    else:
        for suffix in (".parquet", ".csv"):
            (out / f"criteria{suffix}").unlink(missing_ok=True)
    write_table(rates, out, "rates")
    write_json(manifest, out / "manifest.json")
    return ImportResult(out_dir=out, verdicts=verdicts, criteria=criteria, rates=rates, manifest=manifest)
