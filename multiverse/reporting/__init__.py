"""The report: the run's explorer page, with every figure and table of the run under it, in one HTML file.

``write_report(source)`` reads a run directory, an import directory or a bare
verdicts table (``multiverse.load_run``), and ``multiverse.report(results, path)`` does
the same for results already loaded. The page is the explorer
(``multiverse.explorer``): the interactive specification curve, filters, the
universe view with its cases, transcripts and the judges' rationales, and
comparisons. Under it the report runs the analyses (specification curves with
joint tests, ranking stability, variance decomposition, judge agreement, rates
by design factor) and shows them as static figures (inline PNGs, ``data:``
URIs) with how to read each, failure accounting, example transcripts, the spec
and provenance; printed, the page shows these in place of the interactive
charts. Nothing is fetched from anywhere, so the file opens offline and can be
mailed as is. ``build_report_html(results)`` returns the same page as a
string, for notebooks.

Everything that comes from the run (transcripts, rationales, reasons, the
spec, system, axis and option names) is HTML-escaped on the way in (the
explorer's data is an inert JSON block its script shows as text); the
explorer's Content-Security-Policy, which allows only its own script and
stylesheet (by hash) and ``data:`` images, is the second line of defence. A
section whose analysis fails says so in place and the rest of the report is
still written.

On load the page sets ``data-images-total``, ``data-images-loaded`` and
``data-script-errors`` on ``<body>``, so a headless browser can check that it
rendered.

The package, one module per part of the page:

- ``__init__``: the page itself (the explorer, then a header, table of
  contents and footer around the sections) and the list of sections;
- ``run``: the results with the report's own choices (``_Run``);
- ``sections``: the analysis sections (rates, curves, ranking, variance,
  agreement, design factors, universes);
- ``anchoring``: the section "Anchored to people", only when the report is
  given human labels (``human``);
- ``comparison``: the section "Compared with the baseline", only when the
  report is given a baseline run (``baseline``);
- ``records``: the run's own records (failures, example transcripts and
  judgments, spec, provenance);
- ``markup``: escaping and the small HTML builders the sections share.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from multiverse.results import Results

from ..errors import MultiverseError
from ._anchoring import ANCHOR as ANCHORED
from ._anchoring import TITLE as ANCHORED_TITLE
from ._anchoring import _anchored
from ._comparison import ANCHOR as COMPARED
from ._comparison import TITLE as COMPARED_TITLE
from ._comparison import _comparison
from ._markup import _e
from ._records import (
    EXAMPLES_PER_CELL,
    MAX_DRILLDOWN,
    _drilldown,
    _failures,
    _provenance,
    _spec,
)
from ._run import _prepare, _Run
from ._sections import (
    _agreement,
    _curves,
    _difference,
    _factors,
    _primary_rates,
    _ranking,
    _universes,
    _variance,
)

__all__ = ["EXAMPLES_PER_CELL", "MAX_DRILLDOWN", "build_report_html", "write_report", "write_results_report"]

# What an analysis raises when it cannot run on a source (rather than a bug, which should surface).
_SECTION_ERRORS = (MultiverseError, ValueError, KeyError, IndexError, TypeError, np.linalg.LinAlgError)


@dataclass(frozen=True)
class _Section:
    """One section of the page: its anchor, its title, and what builds its HTML from the run."""

    anchor: str
    title: str
    build: Callable[[_Run], str]


_SECTIONS = (
    _Section("primary", "Primary universe", _primary_rates),
    _Section("curves", "Specification curves", _curves),
    _Section("difference", "Difference curve of the top two systems", _difference),
    _Section("ranking", "Ranking stability", _ranking),
    _Section("variance", "What moves the rates", _variance),
    _Section("agreement", "Judge agreement", _agreement),
    _Section("factors", "Rates by design factor", _factors),
    _Section("universes", "Universes", _universes),
    _Section("failures", "Failure accounting", _failures),
    _Section("drilldown", "Examples: transcripts and judgments", _drilldown),
    _Section("spec", "Spec", _spec),
    _Section("provenance", "Provenance", _provenance),
)


def _page_sections(run: _Run) -> tuple[_Section, ...]:
    """The sections of this page: with human labels, "Anchored to people" follows the ranking; with a
    baseline, "Compared with the baseline" follows the primary universe's rates."""
    sections: tuple[_Section, ...] = _SECTIONS
    if run.human is not None:
        at = next(i for i, s in enumerate(sections) if s.anchor == "ranking") + 1
        sections = (*sections[:at], _Section(ANCHORED, ANCHORED_TITLE, _anchored), *sections[at:])
    if run.comparison is not None:
        at = next(i for i, s in enumerate(sections) if s.anchor == "primary") + 1
        sections = (*sections[:at], _Section(COMPARED, COMPARED_TITLE, _comparison), *sections[at:])
    return sections


def build_report_html(tables: Results, *, store: Any = None, threshold: float | None = None, tests: bool = True,
                      progress: bool | None = None, human: Any = None, baseline: Any = None) -> str:
    """The report of ``tables`` (a :class:`~multiverse.results._results.Results`) as one self-contained HTML string.

    Transcripts come from the run folder's ``transcripts.jsonl``; else from
    ``store`` (a store directory or ``multiverse.store._store.Store``) when the
    caller names one; never from the store the manifest names (a folder is
    untrusted input: ``multiverse.tables._folder.shown_transcripts``).
    The per-system joint tests and the specification curves' grey band hold
    each system's rate fixed in every universe: at its rate in the primary
    universe (``threshold=None``, the default), or at ``threshold`` for every
    system. ``tests=False`` leaves out every joint test (no bands, no
    p-values). ``progress`` shows the section being built on stderr while the
    page builds (default: a bar on a terminal, one plain line per section elsewhere;
    ``False``: nothing). ``human``: human labels
    (a file or a table, as ``Results.calibrate`` takes them) add the section
    "Anchored to people". ``baseline``: an earlier run of the same design (its
    path or :class:`Results`) adds the section "Compared with the baseline"
    (``multiverse.gate.diff``).
    """
    from multiverse.core import Progress

    run = _prepare(tables, store, threshold, tests, human, baseline)
    body = []
    sections = _page_sections(run)
    with Progress(len(sections), "report", unit="section", enabled=progress, leave=False) as steps:
        for section in sections:
            steps.label(section.title)
            try:
                content = section.build(run)
            except _SECTION_ERRORS as exc:
                # One analysis that cannot run on this source must not cost the reader the rest of the report.
                content = _problem("This section could not be computed", exc)
            body.append(f'<section id="{section.anchor}"><h2>{_e(section.title)}</h2>{content}</section>')
            steps.update()
    return _page(run, "".join(body))


def _page(run: _Run, sections: str) -> str:
    """The explorer of the run, with every section under it (and in print, in place of its charts)."""
    from ..explorer import document_from_results, render_explorer

    m = run.tables.manifest
    v = run.verdicts
    facts = [("universes", run.universes.shape[0]), ("systems", len(run.systems)), ("cases", v["case_id"].nunique()),
             ("verdict rows", len(v))]
    if "transcript_key" in v.columns:
        facts.insert(3, ("transcripts", v["transcript_key"].nunique()))
    subtitle = []
    if m is not None and m.created:
        subtitle.append(f"run created {_when(m.created)}")
    if m is not None and m.source:
        subtitle.append(f"imported ({m.source})")
    toc = "".join(f'<li><a href="#{s.anchor}">{_e(s.title)}</a></li>' for s in _page_sections(run))
    details = (
        '<header><h2 id="analyses">Every analysis</h2>'
        '<p class="note">The same run as figures, tables and example transcripts, with how to read each; '
        "this part is what the page prints.</p>"
        f"<p class=\"note\">{_e(' · '.join(subtitle))}</p>"
        '<ul class="facts">' + "".join(f"<li><b>{int(n)}</b> {_e(k)}</li>" for k, n in facts) + "</ul>"
        f"<nav><ol>{toc}</ol></nav></header>{sections}"
        f'<footer><p class="note">Written by multiverse {_e(_version())} on {_e(time.strftime("%Y-%m-%d %H:%M"))}.</p>'
        "</footer>"
    )
    try:
        document = document_from_results(run.tables, transcripts=run.transcripts or {})
    except _SECTION_ERRORS as exc:
        # No rate could be computed (say, every verdict failed): the explorer still lists the universes and
        # cases with their failures, over an empty curve, and says why, like any section that cannot run.
        document = document_from_results(run.tables, rates=_NO_RATES, transcripts=run.transcripts or {})
        details = _problem("The specification curve could not be computed", exc) + details
    return render_explorer(document, details=details)


_NO_RATES = pd.DataFrame({c: pd.Series(dtype=t) for c, t in (
    ("universe_id", str), ("system", str), ("n", int), ("n_compliant", int), ("rate", float), ("ci_low", float),
    ("ci_high", float))})


def _problem(what: str, exc: Exception) -> str:
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f'<p class="problem">{_e(what)}: {_e(type(exc).__name__)}: {_e(first)}</p>'


def _when(stamp: Any) -> str:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp)).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return str(stamp)


def _version() -> str:
    from multiverse.core import __version__

    return __version__


def write_report(source: str | os.PathLike[str], out_html: str | os.PathLike[str] | None = None, *, store: Any = None,
                 threshold: float | None = None, tests: bool = True, progress: bool | None = None,
                 human: Any = None, baseline: Any = None) -> Path:
    """Write the HTML report of a run directory, import directory or verdicts table; return its path.

    The default output is ``report.html`` inside the run or import directory
    (beside the table for a table file). See :func:`build_report_html` for
    ``store``, ``threshold``, ``tests``, ``progress``, ``human`` and ``baseline``.
    """
    from multiverse.results import load_run

    return write_results_report(load_run(source), out_html, store=store, threshold=threshold, tests=tests,
                                progress=progress, human=human, baseline=baseline)


def write_results_report(results: Results, out_html: str | os.PathLike[str] | None = None, *, store: Any = None,
                         threshold: float | None = None, tests: bool = True, progress: bool | None = None,
                         human: Any = None, baseline: Any = None) -> Path:
    """Write the HTML report of ``results``; return its path (``multiverse.report`` calls this).

    The default output is ``report.html`` in the results' directory (beside
    the table for a table file; in the current directory for results that
    were never written). The output may not be one of the run's own files.
    """
    from multiverse.core import atomic_write_text
    from multiverse.tables import TABLE_FILES, check_output_file

    source = results.source
    folder = source if source is not None and source.is_dir() else source.parent if source is not None else Path()
    out = Path(out_html) if out_html is not None else folder / "report.html"
    inputs = [] if source is None else [source] + (
        [source / name for name in (*TABLE_FILES, "manifest.json")] if source.is_dir() else [])
    if isinstance(human, (str, os.PathLike)):
        inputs.append(Path(human))
    check_output_file(out, inputs=inputs)  # before the analyses: a bad place costs nothing
    page = build_report_html(results, store=store, threshold=threshold, tests=tests, progress=progress, human=human,
                             baseline=baseline)
    atomic_write_text(out, page)  # a reader never sees half a page; the umask decides who may read it
    return out
