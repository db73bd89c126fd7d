"""A run's labelling sheet in one call: loaded results in, the sheet and its page out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from multiverse.errors import InputError
from multiverse.tables import ResolvedSpec, ScaleRecord

from ._run_files import run_transcripts, spec_criteria
from ._sample import draw_sample
from ._sheet import write_sheet

__all__ = ["check_sheet_places", "label_results"]


class _Loaded(Protocol):
    """What the sheet needs of loaded results (``multiverse.Results`` has it)."""

    verdicts: pd.DataFrame
    axes: list[str]
    factors: list[str]
    source: Path | None

    @property
    def resolved_spec(self) -> ResolvedSpec | None: ...

    @property
    def scale(self) -> ScaleRecord: ...

    @property
    def rate_direction(self) -> str: ...


def check_sheet_places(source: str | os.PathLike[str], out_csv: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Refuse a sheet name before anything is read: a ``.csv`` name, a writable place, none of the run's files.

    An existing sheet is replaced only with ``force=True``: people may have typed labels into it.
    """
    from multiverse.tables import RUN_FILES, check_output_file

    source, out_csv = Path(source), Path(out_csv)
    if out_csv.suffix.lower() != ".csv":
        raise InputError(f"{out_csv}: expected a .csv file name for the sheet", param="out")
    # The run's own files are inputs (its report too: a sheet named report.csv would replace report.html).
    inputs = [source / name for name in RUN_FILES] if source.is_dir() else [source]
    for path in (out_csv, out_csv.with_suffix(".html")):
        check_output_file(path, inputs=inputs)
    if out_csv.exists() and not force:
        raise InputError(f"{out_csv}: a sheet is already there and may hold labels; expected a new file "
                         "(force=True replaces it)", param="force")
    return out_csv


def label_results(results: _Loaded, n: int, out_csv: str | os.PathLike[str], *, seed: int = 0,
                  blind_systems: bool = False) -> tuple[Path, Path, list[str]]:
    """Draw ``n`` transcripts per system and rollout configuration of ``results``; write the sheet and page.

    Returns (csv path, html path, notes). Results read from a bare table
    have no transcripts or rubric: the page shows what the table has. A
    scored run's sheet asks for a ``score`` on the judge's scale (a pairwise
    scale is refused); ``blind_systems`` hides the systems' names on the page
    (``write_sheet``); the pass/fail question is worded as the results read rates (``rate_direction``).
    """
    scale = results.scale
    if scale.type == "pairwise":
        raise InputError(f"{results.source}: scale: the run's judge gives pairwise scores, which people labelling one "
                         "transcript at a time cannot give; expected a run with an ordinal or continuous scale, or "
                         "compliant labels", param="source")
    source: Any = results.source
    folder = source is not None and Path(source).is_dir()
    transcripts = run_transcripts(source) if folder else None
    sample = draw_sample(results.verdicts, transcripts, n, seed, results.factors, results.axes,
                         label="score" if scale.scored else "compliant")
    spec = results.resolved_spec  # a run's, read once by its results; an import or a table has none
    criteria = spec_criteria(spec.document if spec is not None else None)
    csv_path, html_path = write_sheet(sample, criteria, transcripts, Path(out_csv), verdicts=results.verdicts,
                                      axes=results.axes, scale=scale, blind_systems=blind_systems,
                                      rates_read=results.rate_direction)
    return csv_path, html_path, list(sample.attrs.get("notes", []))
