"""The tables room: a run's tables, the files of a run or import folder, and where output may go.

A run or import folder holds ``verdicts``, ``criteria`` and ``rates`` (each as
``.parquet`` and ``.csv``), ``manifest.json`` and, for a run,
``spec.yaml`` and ``transcripts.jsonl``::

    manifest = read_manifest("runs/demo")   # a Manifest, checked; None: no folder of ours
    manifest.universes[0].options           # typed fields, each with its type
    spec = read_spec("runs/demo")           # a ResolvedSpec: the text and the checked document

Every file of a folder is read by one reader (``read_manifest``,
``read_spec``, ``read_transcripts``, ``table_path``, ``read_folder_bytes``),
which treats it as untrusted input: inside the folder, a regular file,
under the cap of its kind, checked against its model (:class:`Manifest`,
:class:`SpecDocument`, :class:`TranscriptRecord`). The tables themselves are
read and written by ``read_table`` and ``write_table``, a whole folder
written by ``write_run_folder`` (the manifest last); ``check_output_dir``
and ``check_output_file`` say where output may go. Nothing here computes an
analysis or calls a model.
"""

from __future__ import annotations

from multiverse.tables._folder import (
    CAPS,
    MAX_LINE_BYTES,
    TABLE_FILES,
    check_folder,
    folder_file,
    read_folder_bytes,
    read_manifest,
    read_spec,
    read_transcripts,
    shown_transcripts,
    table_path,
)
from multiverse.tables._folder_models import (
    DroppedRecord,
    ImportLoss,
    Manifest,
    ResolvedSpec,
    ScaleRecord,
    ScoringChoice,
    SpecDocument,
    StageCounts,
    TranscriptRecord,
    UniverseEntry,
    universe_entry,
)
from multiverse.tables._index import INDEX_FOLDER, INDEXED_ROWS, PageTrail, index_table, page_out, read_indexed
from multiverse.tables._places import (
    DERIVED_FILES,
    IMPORT_FILES,
    RUN_FILES,
    PlaceError,
    check_output_dir,
    check_output_file,
    folder_kind,
)
from multiverse.tables._positional import csv_header, positional
from multiverse.tables._scores import (
    BINARY,
    FolderScales,
    check_scores,
    folder_scale,
    folder_scales,
    universe_scales,
    with_score_column,
)
from multiverse.tables._tables import (
    check_choice,
    csv_safe,
    infer_axes,
    read_table,
    require_columns,
    split_factors,
    universe_ids,
    write_json,
    write_table,
)
from multiverse.tables._writer import write_run_folder

__all__ = [
    "BINARY",
    "CAPS",
    "DERIVED_FILES",
    "IMPORT_FILES",
    "INDEXED_ROWS",
    "INDEX_FOLDER",
    "MAX_LINE_BYTES",
    "RUN_FILES",
    "TABLE_FILES",
    "DroppedRecord",
    "FolderScales",
    "ImportLoss",
    "Manifest",
    "PageTrail",
    "PlaceError",
    "ResolvedSpec",
    "ScaleRecord",
    "ScoringChoice",
    "SpecDocument",
    "StageCounts",
    "TranscriptRecord",
    "UniverseEntry",
    "check_choice",
    "check_folder",
    "check_output_dir",
    "check_output_file",
    "check_scores",
    "csv_header",
    "csv_safe",
    "folder_file",
    "folder_kind",
    "folder_scale",
    "folder_scales",
    "index_table",
    "infer_axes",
    "page_out",
    "positional",
    "read_folder_bytes",
    "read_indexed",
    "read_manifest",
    "read_spec",
    "read_table",
    "read_transcripts",
    "require_columns",
    "shown_transcripts",
    "split_factors",
    "table_path",
    "universe_entry",
    "universe_ids",
    "universe_scales",
    "with_score_column",
    "write_json",
    "write_run_folder",
    "write_table",
]
