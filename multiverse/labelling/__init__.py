"""Labelling by hand: draw the transcripts people label, and the sheet they label them in.

::

    tables = load_run("runs/audit")
    sample = draw_sample(tables.verdicts, run_transcripts("runs/audit"), n=60, seed=0, factors=tables.factors)
    write_sheet(sample, run_criteria("runs/audit"), run_transcripts("runs/audit"), "SHEET.csv",
                verdicts=tables.verdicts, axes=tables.axes)

``SHEET.csv`` lists the sample with an empty ``compliant`` column (``score``
for a scored run, to fill on the judge's scale); ``SHEET.html`` beside it
shows each transcript with the rubric, never a judge's verdict (and, with
``blind_systems``, never a system's name), keeps the labeller's progress in
the browser and exports the filled CSV, which ``Results.calibrate`` reads. Every row carries the sample's
identity (``IDENTITY_COLUMNS``), and ``check_sheet`` holds a filled sheet to
it before its labels are used.
"""

from __future__ import annotations

from ._check import check_sheet
from ._identity import IDENTITY_COLUMNS
from ._label import check_sheet_places, label_results
from ._run_files import run_criteria, run_transcripts
from ._sample import SHEET_COLUMNS, draw_sample
from ._sheet import write_sheet

__all__ = ["IDENTITY_COLUMNS", "SHEET_COLUMNS", "check_sheet", "check_sheet_places", "draw_sample", "label_results",
           "run_criteria", "run_transcripts", "write_sheet"]

