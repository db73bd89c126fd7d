"""Text that reaches matplotlib as written: run-supplied names never turn into mathtext.

matplotlib reads any string with a pair of unescaped ``$`` as mathtext, so a
system called ``$x^2$`` would be typeset as math and one called ``a $\\b $``
would stop the figure with a parse error. Names of systems, axes, options and
factors come from the user's spec or table, so every one of them passes
through :func:`literal` before it becomes a title, a label, a tick label or a
legend entry. Outside math mode ``\\``, ``_`` and ``^`` are already plain
text; escaping ``$`` is all it takes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["literal"]


def literal(value: Any) -> str:
    """``str(value)`` with every ``$`` escaped, so matplotlib draws it verbatim."""
    return str(value).replace("$", r"\$")
