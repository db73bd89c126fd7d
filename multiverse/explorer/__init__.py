"""The explorer: a run as one interactive, self-contained HTML page.

From a point on the specification curve to the transcripts and the judges'
reasons behind it: the page draws the curve (one point per universe x system,
with its CI, the options in an indicator panel and n underneath), lets a
reader include or exclude options per axis and brush a range (the curve, the
rank chart and the summary recompute in the page, and the selection is kept in
the URL fragment), opens a universe's options, rates and cases, shows any
case's transcript with every judgment of it side by side, and compares two
universes or two systems case by case.

Two steps, so the data can be checked, stored or embedded on its own:

- ``explorer_document(verdicts, criteria, rates, transcripts, axes=...)``
  builds the plain, JSON-able data document from a run's tables
  (``document_from_run(path)`` reads them from a run folder first,
  ``document_from_results(results)`` from loaded results);
- ``render_explorer(document, static_figures=...)`` writes the page: plain
  SVG and one small script, inline, under a strict Content-Security-Policy.

``unpack`` reads a document's lazy blocks (``document["blocks"]``) back;
``document_texts`` its transcripts and criterion rows with their long texts
(stored once each, in chunks) in place.
"""

from ._document import (
    FORMAT,
    VERDICTS,
    document_from_results,
    document_from_run,
    explorer_document,
    read_transcripts,
)
from ._packing import document_texts, unpack
from ._page import content_security_policy, render_explorer

__all__ = [
    "FORMAT",
    "VERDICTS",
    "content_security_policy",
    "document_from_results",
    "document_from_run",
    "document_texts",
    "explorer_document",
    "read_transcripts",
    "render_explorer",
    "unpack",
]
