"""Importers: results of other audit tools as multiverse import directories.

- :func:`import_assert` reads ASSERT run directories (each run a universe);
- :func:`import_table` reads a generic label table (each axis combination a universe);
- :func:`import_inspect` reads Inspect AI logs (each judge a universe, epochs replicates);
- :func:`import_promptfoo` reads promptfoo result files (each grader a universe, assertions criteria).

Each writes verdicts, criteria (where available), rates and transcripts (where the source
has them) as .parquet and .csv plus a manifest.json, and returns the
:class:`multiverse.results._results.Results` of the import directory. Bad input raises
:class:`multiverse.errors.InputError` with a one-line message and writes nothing.
"""

from multiverse.importers._assert import import_assert
from multiverse.importers._inspect import import_inspect
from multiverse.importers._promptfoo import import_promptfoo
from multiverse.importers._table import import_table

__all__ = ["import_assert", "import_inspect", "import_promptfoo", "import_table"]
