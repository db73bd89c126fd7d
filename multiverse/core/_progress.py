"""Progress on stderr, the one place that decides how it looks.

On a terminal it is a tqdm bar per stage (or per report). Anywhere else (a
log file, CI, a pipe) a bar would be carriage returns nobody sees until the
end, so it is plain lines instead: one when a step starts, one every
``EVERY`` seconds while it runs (never one per unit), and one when it ends.
``progress=None`` (every default) means "show it, in the form stderr takes";
``False`` shows nothing; ``True`` shows it too.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from multiverse.core._terminal import progress_stream, terminal_safe

__all__ = ["EVERY", "Progress"]

#: Seconds between two plain progress lines of one long step.
EVERY = 10.0


class Progress:
    """Progress of one step of ``total`` units: ``update()`` per unit, ``label()`` to name the current one."""

    def __init__(self, total: int, desc: str, *, unit: str = "unit", enabled: bool | None = None,
                 leave: bool = True, stream: TextIO | None = None, every: float = EVERY):
        # A bar redraws with carriage returns, so it writes past the CLI's terminal filter; its text is our own
        # or made safe here.
        self.stream = stream if stream is not None else progress_stream()
        self.total, self.desc, self.unit, self.every = total, desc.strip(), unit, every
        self.done = 0
        self.started = self.last = time.monotonic()
        self._label = ""
        self._bar: Any = None
        self._lines = False
        if enabled is False:
            return
        if _is_terminal(self.stream):
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=f"{desc:>8}", unit=unit, file=self.stream, leave=leave)
        else:
            self._lines = True
            self._say(f"{self.total} {self.unit}s to do")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def label(self, text: str) -> None:
        """Name the unit now under way (a report's section); in plain lines, each one is said."""
        text = terminal_safe(text)
        self._label = text
        if self._bar is not None:
            self._bar.set_postfix_str(text)
        elif self._lines:
            self._say(f"{self.done + 1}/{self.total}: {text}")
            self.last = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._lines and time.monotonic() - self.last >= self.every and self.done < self.total:
            self.last = time.monotonic()
            self._say(f"{self.done}/{self.total} {self.unit}s, {self.last - self.started:.0f} s")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._lines:
            self._lines = False
            self._say(f"{self.done}/{self.total} {self.unit}s in {time.monotonic() - self.started:.1f} s")

    def _say(self, text: str) -> None:
        print(f"{self.desc}: {text}", file=self.stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or stand-in stream
        return False
