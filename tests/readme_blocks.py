"""README.md's code blocks, as a test reads them: where each is, what it is, and how it is marked.

README is the contract, so its examples are run (``tests/test_readme.py``;
the case study's block by ``tests/test_case_study.py``). A block that cannot
run in a test carries a visible marker, an HTML comment on the line before
its opening fence::

    <!-- readme-test: skip (needs an API key) -->
    <!-- readme-test: spec -->

``skip`` needs its reason in brackets; ``spec`` marks a YAML block that is a
whole spec (the test validates it). Nothing else is a marker, so the skip
list is what a reader of README sees.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cli_runner import REPO, cli_environment

__all__ = ["README", "RUN", "Block", "block_environment", "blocks", "newcomer_folder", "run_shell", "section_blocks"]

README = REPO / "README.md"

#: Languages whose blocks are commands or code to run; a YAML block is a spec or marked.
RUN = ("bash", "sh", "console", "python")

_FENCE = re.compile(r"^```(\S*)\s*$")
_HEADING = re.compile(r"^(#{2,4}) (.+?)\s*$")
_MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<kind>[a-z-]+)\s*(?:\((?P<reason>[^)]*)\))?\s*-->\s*$")
_LOOKS_LIKE_MARKER = re.compile(r"readme-test", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """One fenced block of README: its language, text, first line (1-based), section and marker."""

    language: str
    code: str
    line: int
    section: str
    marker: str | None = None
    reason: str | None = None

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.section})"

    @property
    def runs(self) -> bool:
        return self.language in RUN and self.marker != "skip"


def blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of README (or of ``text``) in order; a malformed marker is a ValueError."""
    lines = (README.read_text(encoding="utf-8") if text is None else text).splitlines()
    found: list[Block] = []
    section = "top"
    previous = ""  # the last non-blank line outside a block
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        if heading:
            section = heading.group(2)
        fence = _FENCE.match(line)
        if not fence:
            if line.strip():
                previous = line.strip()
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"README.md:{start + 1}: a code block that never closes")
        marker = reason = None
        if _LOOKS_LIKE_MARKER.search(previous):
            match = _MARKER.match(previous)
            if not match:
                raise ValueError(f"README.md:{start}: expected '<!-- readme-test: KIND (REASON) -->', got {previous!r}")
            marker, reason = match.group("kind"), match.group("reason")
        found.append(Block(fence.group(1).lower(), "\n".join(body) + "\n", start + 1, section, marker, reason))
        previous = ""
        i += 1
    return found


def section_blocks(section: str, text: str | None = None) -> list[Block]:
    """The blocks under one heading (its exact text, e.g. "Reproduce the simulated study")."""
    return [b for b in blocks(text) if b.section == section]


def newcomer_folder(root: Path) -> Path:
    """``root`` as a newcomer's working folder: a copy of the repository's specs/ and analyses/, nothing else."""
    shutil.copytree(REPO / "specs", root / "specs", ignore=shutil.ignore_patterns(".multiverse"))
    shutil.copytree(REPO / "analyses", root / "analyses", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def block_environment() -> dict[str, str]:
    """The environment a block runs in: no shared store, figures off-screen, this environment's tools first."""
    env = cli_environment({"MPLBACKEND": "Agg"})
    # `multiverse` and `python` are this environment's, as after `pip install -e .`.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_shell(block: Block, folder: Path, *, timeout: float) -> str:
    """Run a shell block with ``bash -e -o pipefail`` in ``folder``; assert it succeeds; return its stdout."""
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=folder, env=block_environment(),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert "Traceback" not in done.stderr, f"{block.where}:\n{block.code}\n{done.stderr}"
    assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{block.code}\n{done.stderr[-3000:]}"
    return done.stdout
