"""The explorer page: the data document, the script and the styles in one self-contained HTML file.

The page fetches nothing, so it opens from disk and as a mail attachment. Its
Content-Security-Policy allows no source at all (``default-src 'none'``)
except the page's own script and stylesheet, named by their SHA-256 hashes,
and ``data:`` images (the static figures for print): a string from a model
or a table that slipped past the escaping still could not run. The document
sits in an inert ``<script type="application/json">`` with ``<``, ``>`` and
``&`` written as JSON escapes, so no text inside it can close the element;
the script builds every element with ``textContent``, never from markup.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from ..core import escaped, json_escaped
from ..errors import InputError
from ._document import FORMAT

__all__ = ["content_security_policy", "render_explorer"]

_INERT = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})
_PNG = b"\x89PNG\r\n\x1a\n"


@cache
def _asset(name: str) -> str:
    return resources.files("multiverse.explorer").joinpath("static", name).read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy() -> str:
    """The policy the page declares: only its own script and styles (by hash) and ``data:`` images."""
    return (f"default-src 'none'; script-src {_hash(_asset('explorer.js'))}; style-src {_hash(_asset('explorer.css'))}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def render_explorer(document: Mapping[str, Any], *, static_figures: Mapping[str, bytes] | None = None,
                    details: str | None = None) -> str:
    """The explorer of ``document`` (``explorer_document``) as one self-contained HTML page.

    ``static_figures`` maps a caption to a PNG (e.g. the seaborn figures of
    ``multiverse figure``): they are embedded as ``data:`` images and shown
    only when the page is printed, in place of the interactive charts (the
    summary and an open universe still print).

    ``details`` is markup placed under the explorer, shown on screen and in
    print (the report puts every analysis there, figures included, so the
    printed page falls back to them in place of the interactive charts). It is
    taken as written, so it must come from this package's own builders with
    every run string escaped; the page's policy blocks any script or inline
    style in it all the same.
    """
    if not isinstance(document, Mapping) or document.get("format") != FORMAT:
        raise InputError(f"document: expected an explorer document ({FORMAT}), as explorer_document returns",
                         param="document")
    figures = []
    for caption, png in (static_figures or {}).items():
        if not isinstance(png, (bytes, bytearray)) or not bytes(png).startswith(_PNG):
            raise InputError(f"static_figures: {caption!r}: expected the bytes of a PNG image", param="static_figures")
        uri = "data:image/png;base64," + base64.b64encode(bytes(png)).decode("ascii")
        figures.append(f'<figure><img src="{uri}" alt="{_e(caption)}"><figcaption>{_e(caption)}</figcaption></figure>')
    data = json_escaped(json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False).translate(_INERT))
    title = str(document.get("title") or "audit")
    banner = ('<p class="banner" role="alert">SIMULATED: every transcript, label and rate here comes from '
              "multiverse's built-in simulated world, not from real models. Use it to learn the tool, not to judge any system.</p>") if document.get("simulated") else ""
    print_part = (f'<section class="print-figures"><h2>Figures</h2>{"".join(figures)}</section>' if figures else "")
    after = f'<div id="details">{details}</div>' if details else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_e(content_security_policy())}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{'[SIMULATED] ' if document.get('simulated') else ''}multiverse explorer: {_e(title)}</title>"
        f"<style>{_asset('explorer.css')}</style></head>"
        f'<body class="{"has-print-figures" if figures or details else ""}"><main>'
        f'<header><p class="note">multiverse explorer</p><h1>{_e(title)}</h1>{banner}</header>'
        '<noscript><p class="banner">The explorer needs JavaScript; the printed page shows the static figures.</p>'
        "</noscript>"
        f'{print_part}<div id="app" aria-live="polite"></div>{after}</main>'
        f'<script type="application/json" id="explorer-data">{data}</script>'
        f"<script>{_asset('explorer.js')}</script></body></html>\n"
    )


def _e(value: Any) -> str:
    # The one rule for outputs: a control, invisible or non-text character (U+0001, a bidi override,
    # U+FFFE, a lone surrogate) is shown as a visible escape, so the page always parses and encodes.
    return html.escape(escaped(value, whitespace=True), quote=True)
