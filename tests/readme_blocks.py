"""The documentation's code blocks, as a test reads them: where each is, what it is, and how it is marked.

README and the documentation site (``docs/``, Markdown pages) are the contract, so their examples are run
(``tests/test_docs_blocks_*.py``; the case study's block by ``tests/test_case_study.py``). A block that cannot
run in a test carries a visible marker, an HTML comment on the line before its opening fence::

    <!-- readme-test: skip (needs an API key) -->
    <!-- readme-test: spec -->

``skip`` needs its reason in brackets; ``spec`` marks a YAML block that is a
whole spec (the test validates it). Nothing else is a marker, so the skip
list is what a reader of the page source sees.

The pages are read in the site's reading order: README first, then ``docs/index.md`` and the pages its
toctrees list, in order (``pages()``). What a build generates (``docs/_generated/``) is not a page here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cli_runner import REPO, cli_environment

__all__ = ["DOCS", "GROUPS", "README", "RUN", "Block", "block_environment", "blocks", "documentation",
           "newcomer_folder", "pages", "run_group", "run_shell", "section_blocks"]

README = REPO / "README.md"
DOCS = REPO / "docs"

#: Languages whose blocks are commands or code to run; a YAML block is a spec or marked.
RUN = ("bash", "sh", "console", "python")

#: An opening fence: its language, or a MyST directive (``{toctree}``, ``{include} PATH``) with its argument.
_FENCE = re.compile(r"^```(\S*)(?:\s.*)?$")
_HEADING = re.compile(r"^(#{1,4}) (.+?)\s*$")
_MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<kind>[a-z-]+)\s*(?:\((?P<reason>[^)]*)\))?\s*-->\s*$")
_LOOKS_LIKE_MARKER = re.compile(r"readme-test", re.IGNORECASE)
_TOCTREE = re.compile(r"^```\{toctree\}\s*$(?P<body>.*?)^```\s*$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, text, first line (1-based), section, marker and page."""

    language: str
    code: str
    line: int
    section: str
    marker: str | None = None
    reason: str | None = None
    page: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line} ({self.section})"

    @property
    def directive(self) -> bool:
        """A MyST directive (``{toctree}``, ``{include}``, ``{eval-rst}``): the site's structure, not an example."""
        return self.language.startswith("{")

    @property
    def runs(self) -> bool:
        return self.language in RUN and self.marker != "skip"


def pages() -> list[Path]:
    """README, then the site's pages in reading order: ``docs/index.md`` and its toctrees' entries, in order."""
    found = [README]
    index = DOCS / "index.md"
    if not index.is_file():
        return found
    found.append(index)
    for tree in _TOCTREE.finditer(index.read_text(encoding="utf-8")):
        for entry in tree.group("body").splitlines():
            entry = entry.strip()
            if entry and not entry.startswith(":"):
                found.append(DOCS / f"{entry}.md")
    return found


def documentation() -> str:
    """Every page's text, in reading order: what a reader of README and the site can find said somewhere."""
    return "\n\n".join(page.read_text(encoding="utf-8") for page in pages())


def _blocks_of(text: str, page: str) -> list[Block]:
    lines = text.splitlines()
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
            raise ValueError(f"{page}:{start + 1}: a code block that never closes")
        marker = reason = None
        if _LOOKS_LIKE_MARKER.search(previous):
            match = _MARKER.match(previous)
            if not match:
                raise ValueError(f"{page}:{start}: expected '<!-- readme-test: KIND (REASON) -->', got {previous!r}")
            marker, reason = match.group("kind"), match.group("reason")
        found.append(Block(fence.group(1).lower(), "\n".join(body) + "\n", start + 1, section, marker, reason, page))
        previous = ""
        i += 1
    return found


def blocks(text: str | None = None, *, page: str = "README.md") -> list[Block]:
    """Every fenced block of every page in reading order (or of ``text``, named ``page``); a malformed marker
    is a ValueError."""
    if text is not None:
        return _blocks_of(text, page)
    return [b for path in pages() for b in _blocks_of(path.read_text(encoding="utf-8"), _name(path))]


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def section_blocks(section: str, text: str | None = None) -> list[Block]:
    """The blocks under one heading (its exact text, e.g. "Reproduce the simulated study"), on any page."""
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


#: The pages whose blocks build on each other, run together in one folder, one test module a group
#: (``tests/test_docs_blocks_<group>.py``), so that xdist's two workers share the time. ``demo``: the demo's run
#: folder and what reads it; ``scores``: the scored demo and what reads it; ``imports``: the imports of results
#: made elsewhere; ``draft``: drafting. A page with a
#: block to run is in exactly one group (``tests/test_readme.py`` checks it).
GROUPS: dict[str, tuple[str, ...]] = {
    "demo": ("README.md", "docs/index.md", "docs/getting-started.md", "docs/guides/python-api.md",
             "docs/guides/human-anchoring.md", "docs/guides/report.md", "docs/guides/release-gate.md"),
    "scores": ("docs/guides/spec.md", "docs/guides/scores.md"),
    "imports": ("docs/guides/importing.md", "docs/guides/pairwise-judges.md"),
    "draft": ("docs/guides/commands.md",),
}

#: One block's limit: the demo is the longest (about a minute on 2 cores, several at high load).
BLOCK_TIMEOUT = 900


def _run_python(block: Block, folder: Path, namespace: dict) -> None:
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(block.code, block.where, "exec"), namespace)  # the page's own example, as a user runs it
    finally:
        os.chdir(here)


def _validate_spec(block: Block, folder: Path) -> None:
    path = folder / "specs" / f"doc-line-{block.line}.yaml"  # beside the specs it names (the rubric file)
    path.write_text(block.code, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "multiverse.cli", "validate", str(path)], cwd=folder,
                          env=block_environment(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block.where}: the spec example does not validate:\n{done.stderr}"


def run_group(group: str, folder: Path) -> dict[str, float | str]:
    """Every runnable block of the group's pages, in reading order, in ``folder``: shell blocks with ``bash -e``,
    Python blocks in one namespace per page section, spec blocks validated. A block whose code is the same as
    one already run here (README's quickstart, repeated in Getting started) is not run twice: same code, same
    folder, same result. Returns each block's seconds (or the block it repeats), keyed by where it is."""
    seconds: dict[str, float | str] = {}
    namespaces: dict[tuple[str, str], dict] = {}
    ran: dict[str, str] = {}
    for block in blocks():
        if block.page not in GROUPS[group] or block.marker == "skip":
            continue
        if not (block.language in RUN or block.marker == "spec"):
            continue
        if block.code in ran:
            seconds[block.where] = f"as {ran[block.code]}"
            continue
        start = time.perf_counter()
        if block.language == "python":
            _run_python(block, folder, namespaces.setdefault((block.page, block.section), {"__name__": "__readme__"}))
        elif block.language in RUN:
            run_shell(block, folder, timeout=BLOCK_TIMEOUT)
        else:
            _validate_spec(block, folder)
        ran[block.code] = block.where
        seconds[block.where] = round(time.perf_counter() - start, 1)
        print(f"{block.where}: {seconds[block.where]} s", file=sys.stderr)  # shown with -s: where the time goes
    return seconds
