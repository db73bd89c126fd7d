"""How the command line prints: aligned tables, one JSON document, numbers, and figure files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from multiverse.core import terminal_safe

from ..errors import InputError

__all__ = ["interval", "number", "print_json", "print_table", "save_figure", "say", "say_rates_note"]


def say_rates_note(results: Any) -> None:
    """A stored rates table's disagreement with the verdicts (``Results.rates_note``), once on stderr."""
    import sys

    note = results.rates_note()
    if note is not None:
        say(f"warning: {note}", file=sys.stderr)


def say(*parts: Any, file: Any = None) -> None:
    """Print one line of the command's output: each part with its controls and newlines shown as escapes.

    Every line the commands print goes through here (or ``print_table`` and
    ``print_json``), so a name holding a newline or an escape sequence cannot
    forge a line, retitle the terminal or hide what came before.
    """
    print(*(terminal_safe(p) for p in parts), file=file)


def print_table(rows: list[list[Any]]) -> None:
    """The first row is the header, underlined; columns are padded to their widest cell.

    A cell is one line whatever it holds: a newline or a control in a name is shown as an escape.
    """
    rows = [[terminal_safe(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if j == 0:
            print("  ".join("-" * w for w in widths))


def print_json(document: Any) -> None:
    """One JSON document, with null for undefined statistics (NaN)."""
    from multiverse.core import json_ready

    print(json.dumps(json_ready(document), indent=2, allow_nan=False))


def number(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def interval(pair: Any) -> str:
    return f"[{number(pair[0], 2)}, {number(pair[1], 2)}]" if pair else ""


def save_figure(figure: Any, path: Path) -> None:
    """Write ``figure`` to ``path`` (.png, .svg or .pdf by its extension), atomically."""
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InputError(f"--figure {path}: expected a .png, .svg or .pdf file name")
    from multiverse.core import atomic_write
    from multiverse.tables import check_output_file

    try:
        check_output_file(path)
    except InputError as exc:
        raise InputError(f"--figure {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: figure.savefig(tmp, format=path.suffix.lower()[1:], dpi=150, bbox_inches="tight"))
