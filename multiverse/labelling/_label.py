"""``multiverse label`` in one call: a run or import folder (or a bare table) in, the sheet and its page out."""

from __future__ import annotations

import os
from pathlib import Path

from ._run_files import run_criteria, run_transcripts
from ._sample import draw_sample
from ._sheet import write_sheet

__all__ = ["label_run"]


def label_run(run_dir: str | os.PathLike, n: int, out_csv: str | os.PathLike, *,
              seed: int = 0) -> tuple[Path, Path, list[str]]:
    """Load ``run_dir``, draw ``n`` transcripts per system and rollout configuration, write the sheet and page.

    Returns (csv path, html path, notes). A bare table file has no
    transcripts or rubric: its page shows what the table has.
    """
    from ..tables import load_run

    tables = load_run(run_dir)
    folder = Path(run_dir).is_dir()
    transcripts = run_transcripts(run_dir) if folder else None
    sample = draw_sample(tables.verdicts, transcripts, n, seed, tables.factors, tables.axes)
    criteria = run_criteria(run_dir) if folder else []
    csv_path, html_path = write_sheet(sample, criteria, transcripts, out_csv, verdicts=tables.verdicts, axes=tables.axes)
    return csv_path, html_path, list(sample.attrs.get("notes", []))
