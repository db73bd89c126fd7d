"""The report: one self-contained HTML file with every figure and table of a run.

``write_report(source)`` reads a run directory, an import directory or a bare
verdicts table (``multiverse.load_run``), and ``Results.report(path)`` does
the same for results already loaded; the report runs the analyses (specification curves
with joint tests, ranking stability, variance decomposition, judge agreement,
rates by design factor) and writes a single HTML file: figures are inline PNGs
(``data:`` URIs), styles and the one small script are inline, and nothing is
fetched from anywhere, so the file opens offline and can be mailed as is.
``build_report_html(results)`` returns the same page as a string, for notebooks.

Everything that comes from the run (transcripts, rationales, reasons, the
spec, system, axis and option names) is HTML-escaped on the way in; a
Content-Security-Policy that allows only the page's own script (by hash) is
the second line of defence. A section whose analysis fails says so in place
and the rest of the report is still written.

The script at the top of ``<head>`` counts script errors and, on load, sets
``data-images-total``, ``data-images-loaded`` and ``data-script-errors`` on
``<body>``, so a headless browser can check that the page rendered.

The package, one module per part of the page:

- ``__init__``: the page itself (head, header, table of contents, footer) and
  the list of sections;
- ``run``: the results with the report's own choices (``_Run``);
- ``sections``: the analysis sections (rates, curves, ranking, variance,
  agreement, design factors, universes);
- ``records``: the run's own records (failures, example transcripts and
  judgments, spec, provenance);
- ``markup``: escaping and the small HTML builders the sections share.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MultiverseError
from ..results import Results
from .anchoring import ANCHOR as ANCHORED
from .anchoring import TITLE as ANCHORED_TITLE
from .anchoring import _anchored
from .markup import _e
from .records import (
    EXAMPLES_PER_CELL,
    MAX_DRILLDOWN,
    _drilldown,
    _failures,
    _provenance,
    _spec,
)
from .run import _prepare, _Run
from .sections import (
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

# Counts script errors (not failed images: those show up as images not loaded)
# and publishes what a headless browser needs to judge the page.
_SCRIPT = (
    "(function(){var n=0,m=[];"
    "window.addEventListener('error',function(e){n++;m.push(String(e.message||e.type));});"
    "window.addEventListener('load',function(){var i=document.images,k=0,j;"
    "for(j=0;j<i.length;j++){if(i[j].complete&&i[j].naturalWidth>0){k++;}}"
    "var b=document.body;b.setAttribute('data-images-total',i.length);"
    "b.setAttribute('data-images-loaded',k);b.setAttribute('data-script-errors',n);"
    "b.setAttribute('data-script-error-messages',m.join(' | '));});})();"
)

_CSS = """
body{margin:0;color:#1f2328;background:#fff;line-height:1.5;
 font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:72rem;margin:0 auto;padding:1.5rem 1.25rem 4rem}
h1{font-size:1.7rem;margin:.2rem 0 .6rem}
h2{font-size:1.3rem;margin:2.6rem 0 .6rem;padding-bottom:.2rem;border-bottom:1px solid #d0d7de}
h3{font-size:1.05rem;margin:1.6rem 0 .4rem}
p,li{max-width:60rem}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85em}
.banner{background:#fff4d6;border:2px solid #d4a017;border-radius:6px;padding:.6rem .9rem;font-weight:600;
 margin:.8rem 0}
.facts{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;margin:.6rem 0;padding:0;list-style:none}
.facts li b{font-size:1.25rem}
nav ol{columns:2;font-size:.95rem}
figure{margin:1rem 0}
figure img{display:block;max-width:100%;height:auto}
figcaption,.howto{font-size:.9rem;color:#3d444d;background:#f6f8fa;border-left:3px solid #8c959f;
 padding:.45rem .75rem;margin:.4rem 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.85rem;margin:.6rem 0}
th,td{border:1px solid #d8dee4;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.primary td{background:#fff8e6}
tr.na td{color:#6e7781}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;border:1px solid #d8dee4;
 border-radius:4px;padding:.6rem .8rem;font-size:.8rem;max-height:40rem;overflow:auto}
details{border:1px solid #d8dee4;border-radius:4px;margin:.35rem 0;padding:.25rem .6rem}
details[open]{padding-bottom:.6rem}
summary{cursor:pointer}
.note{color:#57606a;font-size:.9rem}
.problem{background:#ffebe9;border:1px solid #ff8182;border-radius:4px;padding:.5rem .8rem}
.example{border-top:1px dashed #d0d7de;margin-top:.8rem;padding-top:.5rem}
.turn{border-radius:4px;padding:.3rem .6rem;margin:.3rem 0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem}
.turn .role{display:block;font-size:.7rem;font-weight:700;letter-spacing:.04em;text-transform:uppercase;color:#57606a}
.turn.user{background:#eef4fb}.turn.assistant{background:#f4f4ee}.turn.tool{background:#f3eefb}
.turn.other{background:#f6f8fa}
.no{color:#b42318;font-weight:600}.yes{color:#1a7f37}
""".strip()


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


def _sections(run: _Run) -> tuple[_Section, ...]:
    """The sections of this page: with human labels, "Anchored to people" follows the ranking."""
    if run.human is None:
        return _SECTIONS
    at = next(i for i, s in enumerate(_SECTIONS) if s.anchor == "ranking") + 1
    return (*_SECTIONS[:at], _Section(ANCHORED, ANCHORED_TITLE, _anchored), *_SECTIONS[at:])


def build_report_html(tables: Results, *, store: Any = None, threshold: float | None = None, tests: bool = True,
                      progress: bool | None = None, human: Any = None) -> str:
    """The report of ``tables`` (a :class:`~multiverse.results.Results`) as one self-contained HTML string.

    ``store`` is a store directory or ``multiverse.store.Store`` for the
    drill-down transcripts (default: the one the manifest names, if it exists).
    The per-system joint tests and the specification curves' grey band hold
    each system's rate fixed in every universe: at its rate in the primary
    universe (``threshold=None``, the default), or at ``threshold`` for every
    system. ``tests=False`` leaves out every joint test (no bands, no
    p-values). ``progress`` shows one line per section on stderr while the
    page builds (default: when stderr is a terminal). ``human``: human labels
    (a file or a table, as ``Results.calibrate`` takes them) add the section
    "Anchored to people".
    """
    from tqdm.auto import tqdm

    run = _prepare(tables, store, threshold, tests, human)
    if progress is None:
        progress = sys.stderr.isatty()
    body = []
    with tqdm(_sections(run), desc="report", unit="section", disable=not progress, file=sys.stderr,
              leave=False) as steps:
        for section in steps:
            steps.set_postfix_str(section.title)
            try:
                content = section.build(run)
            except (MultiverseError, ValueError, KeyError, IndexError, TypeError, np.linalg.LinAlgError) as exc:
                # One analysis that cannot run on this source must not cost the reader the rest of the report.
                content = (f'<p class="problem">This section could not be computed: {_e(type(exc).__name__)}: '
                           f"{_e(str(exc).splitlines()[0] if str(exc) else '')}</p>")
            body.append(f'<section id="{section.anchor}"><h2>{_e(section.title)}</h2>{content}</section>')
    return _page(run, "".join(body))


def _page(run: _Run, sections: str) -> str:
    m = run.tables.manifest
    name = m.get("spec") or (run.tables.source.name if run.tables.source else "audit")
    v = run.verdicts
    facts = [("universes", run.universes.shape[0]), ("systems", len(run.systems)), ("cases", v["case_id"].nunique()),
             ("verdict rows", len(v))]
    if "transcript_key" in v.columns:
        facts.insert(3, ("transcripts", v["transcript_key"].nunique()))
    banner = ('<div class="banner" role="alert">SIMULATED — every transcript, label and rate in this report comes '
              "from multiverse's built-in simulated audit world, not from real models. Use it to learn the tool, "
              "not to judge any system.</div>") if m.get("simulated") else ""
    subtitle = []
    if m.get("created"):
        subtitle.append(f"run created {_when(m['created'])}")
    if m.get("source"):
        subtitle.append(f"imported ({m['source']})")
    toc = "".join(f'<li><a href="#{s.anchor}">{_e(s.title)}</a></li>' for s in _sections(run))
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    policy = (f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; "
              "base-uri 'none'; form-action 'none'")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head>"
        f"<script>{_SCRIPT}</script>"
        '<meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{'[SIMULATED] ' if m.get('simulated') else ''}multiverse report: {_e(name)}</title>"
        f"<style>{_CSS}</style></head><body><main>"
        f"<header><p class=\"note\">multiverse report</p><h1>{_e(name)}</h1>{banner}"
        f"<p class=\"note\">{_e(' · '.join(subtitle))}</p>"
        '<ul class="facts">' + "".join(f"<li><b>{int(n)}</b> {_e(k)}</li>" for k, n in facts) + "</ul>"
        f"<nav><ol>{toc}</ol></nav></header>{sections}"
        f'<footer><p class="note">Written by multiverse {_e(_version())} on {_e(time.strftime("%Y-%m-%d %H:%M"))}.</p>'
        "</footer></main></body></html>\n"
    )


def _when(stamp: Any) -> str:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp)).strftime("%Y-%m-%d %H:%M %Z").strip()
    except ValueError:
        return str(stamp)


def _version() -> str:
    from .. import __version__

    return __version__


def write_report(source: str | os.PathLike, out_html: str | os.PathLike | None = None, *, store: Any = None,
                 threshold: float | None = None, tests: bool = True, progress: bool | None = None,
                 human: Any = None) -> Path:
    """Write the HTML report of a run directory, import directory or verdicts table; return its path.

    The default output is ``report.html`` inside the run or import directory
    (beside the table for a table file). See :func:`build_report_html` for
    ``store``, ``threshold``, ``tests``, ``progress`` and ``human``.
    """
    from ..tables import load_run

    return write_results_report(load_run(source), out_html, store=store, threshold=threshold, tests=tests,
                                progress=progress, human=human)


def write_results_report(results: Results, out_html: str | os.PathLike | None = None, *, store: Any = None,
                         threshold: float | None = None, tests: bool = True, progress: bool | None = None,
                 human: Any = None) -> Path:
    """Write the HTML report of ``results``; return its path (``Results.report`` calls this).

    The default output is ``report.html`` in the results' directory (beside
    the table for a table file; in the current directory for results that
    were never written). The output may not be one of the run's own files.
    """
    from ..atomicfile import atomic_write_text
    from ..places import TABLE_FILES, check_output_file

    source = results.source
    folder = source if source is not None and source.is_dir() else source.parent if source is not None else Path()
    out = Path(out_html) if out_html is not None else folder / "report.html"
    inputs = [] if source is None else [source] + (
        [source / name for name in (*TABLE_FILES, "manifest.json")] if source.is_dir() else [])
    if isinstance(human, (str, os.PathLike)):
        inputs.append(Path(human))
    check_output_file(out, inputs=inputs)  # before the analyses: a bad place costs nothing
    page = build_report_html(results, store=store, threshold=threshold, tests=tests, progress=progress, human=human)
    atomic_write_text(out, page)  # a reader never sees half a page; the umask decides who may read it
    return out
