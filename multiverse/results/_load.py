"""Reading a run folder, an import folder or a bare verdicts table as :class:`Results`.

It sits above both: the tables room reads and checks the files, the results
room holds them. A folder's results are built by ``Results.from_manifest``,
as a run's and an import's are when they write one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from multiverse.errors import InputError
from multiverse.results._results import Results
from multiverse.tables import (
    check_folder,
    check_scores,
    folder_scale,
    infer_axes,
    read_indexed,
    read_manifest,
    read_table,
    split_factors,
    table_path,
    universe_ids,
    universe_scales,
)

__all__ = ["load_run"]


def load_run(path: str | os.PathLike[str]) -> Results:
    """Read a run directory, an import directory, or a bare verdicts table file, as :class:`Results`.

    A bare table's axes are its non-core columns; when it has a
    ``universe_id``, those that vary inside a universe are design factors.
    Text columns are pandas categoricals (``read_table(..., categories=True)``),
    from parquet and CSV alike.
    """
    path = Path(path)
    if path.is_dir():
        return _load_dir(path)
    if not path.exists():
        raise InputError(f"{path}: no such run directory or table file")
    frame = read_table(path, categories=True)
    missing = [c for c in ("system", "case_id", "compliant") if c not in frame.columns]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {', '.join(missing)}; expected a verdicts table with system, case_id, "
            "compliant and axis columns; a table with other column names is imported first, naming its columns"
        )
    axes, factors = split_factors(frame, infer_axes(frame))
    frame = frame.copy()
    frame["universe_id"] = universe_ids(frame, axes)
    return Results(verdicts=frame, axes=axes, factors=factors, source=path)


def _load_dir(path: Path) -> Results:
    # Every file through the folder's one reader: inside the folder, regular, capped, checked against its model.
    manifest = read_manifest(path)
    if manifest is None:
        raise InputError(f"{path}: not a run or import directory (no manifest.json); expected the folder a run or an import wrote")
    check_folder(path)

    def table(name: str, required: bool, categories: bool = True) -> pd.DataFrame | None:
        for suffix in (".parquet", ".csv"):
            candidate = table_path(path, f"{name}{suffix}")
            if candidate is not None:
                def read(candidate: Path = candidate, suffix: str = suffix) -> pd.DataFrame:
                    return read_table(candidate, categories=categories, shown=path / f"{name}{suffix}")
                # Read once as load_run reads it, then from the folder's columnar index (tables.read_indexed).
                return read_indexed(path, name, candidate, read) if categories else read()
        if required:
            raise InputError(f"{path}: missing {name}.parquet (and {name}.csv)")
        return None

    verdicts = table("verdicts", True)
    assert verdicts is not None
    shown = path / ("verdicts.parquet" if table_path(path, "verdicts.parquet") is not None else "verdicts.csv")
    return Results.from_manifest(
        manifest,
        verdicts=check_scores(verdicts, folder_scale(manifest), shown, universe_scales(manifest)),
        criteria=table("criteria", False),
        # Rows per universe, not per case: small, so plain text, as a fresh run's rates are.
        rates=table("rates", False, categories=False),
        source=path,
    )
