"""Importers: results of other audit tools as multiverse import directories.

- :func:`import_assert` reads ASSERT run directories (each run a universe);
- :func:`import_table` reads a generic label table (each axis combination a universe);
- :func:`import_inspect` reads Inspect AI logs and eval-set folders (each judge, scorer and reducer a universe);
- :func:`import_promptfoo` reads promptfoo result files (each grader a universe, assertions criteria);
- :func:`import_lm_eval` reads lm-evaluation-harness output (each filter and metric a universe, tasks a factor).

Each writes verdicts, criteria (where available), rates and transcripts (where the source
has them) as .parquet and .csv plus a manifest.json, and returns the
:class:`multiverse.results._results.Results` of the import directory. Bad input raises
:class:`multiverse.errors.InputError` with a one-line message and writes nothing.

Every name an import reads is at most :data:`MAX_NAME_CHARS` characters (a case id
:data:`MAX_CASE_ID_CHARS`): each is a label in every table, figure and report.

Every importer keeps one contract for what it cannot take as labels (:mod:`._losses`): a
row's kind of loss (``no_grade``, ``grader_error``, ``system_error``, ``not_run``) decides its
status (:func:`loss_reason`), the manifest counts ``statuses`` and ``losses`` and lists what
was ``dropped`` (:class:`ImportLosses`), and :func:`loss_lines` are the lines ``import`` prints.
"""

from multiverse.importers._assert import import_assert
from multiverse.importers._guard import MAX_CASE_ID_CHARS, MAX_NAME_CHARS
from multiverse.importers._inspect import import_inspect
from multiverse.importers._lm_eval import import_lm_eval
from multiverse.importers._losses import LOSS_KINDS, LOSS_UNITS, Dropped, ImportLosses, loss_lines, loss_reason
from multiverse.importers._promptfoo import import_promptfoo
from multiverse.importers._table import import_table

__all__ = ["LOSS_KINDS", "LOSS_UNITS", "MAX_CASE_ID_CHARS", "MAX_NAME_CHARS", "Dropped", "ImportLosses", "import_assert", "import_inspect", "import_lm_eval",
           "import_promptfoo", "import_table", "loss_lines", "loss_reason"]
