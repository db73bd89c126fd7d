"""Text made safe for a terminal: no control sequence in data can reach the screen.

A system name, an axis key, a case id or a label value comes from a spec, a
table or a run folder someone sent; printed raw, an ESC, OSC or CSI sequence in
it can retitle the terminal, clear the screen, move the cursor over earlier
lines or hide them, and a bidirectional override can make ``evil`` read as
``live``. :func:`terminal_safe` replaces every such character with a visible
escape (``\\x1b``, ``\\x9b``, ``\\u202e``), so what was there is shown, not obeyed:

- C0 controls (U+0000-U+001F, tab and carriage return included), DEL and the
  C1 controls (U+0080-U+009F; U+009B is a CSI on some terminals). A newline
  is kept only where a block of several lines is meant (``newlines=True``).
- Every invisible format character (Unicode category Cf: the bidirectional
  marks, embeddings, overrides and isolates U+200E/F, U+202A-U+202E,
  U+2066-U+2069, U+061C, zero-width space, word joiner, byte order mark, the
  tag characters U+E0000-U+E007F that can hide text), except the zero-width
  joiner and non-joiner (U+200C/D), which scripts and emoji need to render.
- The line and paragraph separators U+2028/U+2029, lone surrogates (a file
  name that is not UTF-8) and noncharacters (U+FFFE), which a terminal cannot show as text.

Everything else passes unchanged: é, ×, –, ≤, CJK and emoji are text.
A backslash is not escaped, so paths and regular text read as they are.

The command line writes through :class:`TerminalStream` (its stdout and
stderr during a command), so nothing it or the library prints can bypass
this; progress bars, whose carriage returns are their own, write to
:func:`progress_stream`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, TextIO

from ._names import escaped

__all__ = ["TerminalStream", "progress_stream", "terminal_safe"]

def terminal_safe(text: Any, *, newlines: bool = False) -> str:
    """``text`` (str()-ed) with every control and invisible format character shown as an escape.

    ``newlines=True`` keeps a newline as a line break (a block of several lines);
    otherwise it too is shown as ``\\n``, so one datum is always one line. The
    characters are those of the one rule for every output (:func:`multiverse.core._names.unshowable`).
    """
    return escaped(text, newlines=newlines)


class TerminalStream:
    """A text stream whose every write goes through :func:`terminal_safe` (newlines kept)."""

    def __init__(self, stream: TextIO) -> None:
        self.unfiltered = stream

    def write(self, text: str) -> int:
        self.unfiltered.write(terminal_safe(text, newlines=True))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        # flush, isatty, fileno, encoding ...: the stream's own.
        return getattr(self.unfiltered, name)


def progress_stream() -> TextIO:
    """Where a progress bar writes: stderr itself, past the filter, since its carriage returns redraw it.

    A bar's text must then be multiverse's own or pass through :func:`terminal_safe`.
    """
    stream = sys.stderr
    return stream.unfiltered if isinstance(stream, TerminalStream) else stream
