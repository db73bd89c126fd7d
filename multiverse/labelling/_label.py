"""``multiverse label`` in one call: a run or import folder (or a bare table) in, the sheet and its page out."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ._run_files import run_criteria, run_transcripts
from ._sample import draw_sample
from ._sheet import write_sheet

__all__ = ["label_run"]


def label_run(run_dir: str | os.PathLike, n: int, out_csv: str | os.PathLike, *,
              seed: int = 0, force: bool = False) -> tuple[Path, Path, list[str]]:
    """Load ``run_dir``, draw ``n`` transcripts per system and rollout configuration, write the sheet and page.

    Returns (csv path, html path, notes). A bare table file has no
    transcripts or rubric: its page shows what the table has. Both output
    files are checked before the run is read: a ``.csv`` name, a writable
    place, and neither of them one of the run's own files. An existing sheet
    is replaced only with ``force=True``: people may have typed labels into it.
    """
    from multiverse.tables._tables import load_run

    out_csv = Path(out_csv)
    _check_places(Path(run_dir), out_csv)
    if out_csv.exists() and not force:
        raise InputError(f"{out_csv}: a sheet is already there and may hold labels; expected a new file "
                         "(force=True replaces it)", param="force")
    tables = load_run(run_dir)
    folder = Path(run_dir).is_dir()
    transcripts = run_transcripts(run_dir) if folder else None
    sample = draw_sample(tables.verdicts, transcripts, n, seed, tables.factors, tables.axes)
    criteria = run_criteria(run_dir) if folder else []
    csv_path, html_path = write_sheet(sample, criteria, transcripts, out_csv, verdicts=tables.verdicts, axes=tables.axes)
    return csv_path, html_path, list(sample.attrs.get("notes", []))


def _check_places(source: Path, out_csv: Path) -> None:
    from multiverse.tables._places import RUN_FILES, check_output_file

    if out_csv.suffix.lower() != ".csv":
        raise InputError(f"{out_csv}: expected a .csv file name for the sheet", param="out")
    # The run's own files are inputs (its report too: a sheet named report.csv would replace report.html).
    inputs = [source / name for name in RUN_FILES] if source.is_dir() else [source]
    for path in (out_csv, out_csv.with_suffix(".html")):
        check_output_file(path, inputs=inputs)
