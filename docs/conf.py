"""Sphinx configuration of multiverse's documentation site (``sphinx-build -W --keep-going -b html docs docs/_build``).

The pages are Markdown (MyST); the reference pages are made from the code at each build by
``_ext/generated.py`` (the CLI from its parser, the spec from its JSON Schema, the run folder from its models,
the performance figures from ``bench/*.json``) and autodoc (the Python API from the facades' docstrings,
whose Sphinx roles it renders as written).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

project = "multiverse"
author = "the multiverse authors"
copyright = "the multiverse authors, MIT licence"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "generated"]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
# _generated holds what _ext/generated.py writes; the reference pages include it.
exclude_patterns = ["_build", "_generated", "bench", "Thumbs.db", ".DS_Store"]

# Headings up to ### get anchors, so a page links to another's section as README linked to its own.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
# In the signature, where a type names the type (in "description" mode a bare `bytes` also matched
# the attributes named bytes on four store documents).
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
# The package reads its own environment at import; nothing here calls a model.
autodoc_mock_imports: list[str] = []

html_theme = "furo"
html_title = "multiverse"
html_static_path: list[str] = []


def _builtins_unlinked(app, doctree) -> None:
    """A builtin's name in a signature (``-> bytes``, ``type``) stays text.

    Sphinx resolves a signature's types by suffix, so ``bytes`` would link to whichever documented
    attribute is named ``bytes`` (four store documents have one): a wrong link, and an ambiguity warning.
    The builtins have no page here, so their names are plain text.
    """
    import builtins

    from sphinx.addnodes import pending_xref

    for node in list(doctree.findall(pending_xref)):
        if node.get("refdomain") == "py" and node.get("reftarget") in vars(builtins):
            node.replace_self(node.children)


def setup(app):
    app.connect("doctree-read", _builtins_unlinked)
    # README's examples mark JSON with comments as jsonc; Pygments' JSON lexer reads comments.
    from pygments.lexers.data import JsonLexer

    app.add_lexer("jsonc", JsonLexer)
