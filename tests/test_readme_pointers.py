"""The documentation's pointers lead somewhere: every repository path README and the pages under ``docs/`` name
exists, and the Commands page's block is the CLI's.

A reader follows the prose to the code (``multiverse/work/_prompts.py``)
and copies the Commands block; a file moved or a subcommand added without
the pages following is a stale pointer. This module reads every page as that reader
does: inline code (a path from the repository's root) and link targets (a path from the page's own folder)
outside the fenced blocks (whose commands ``tests/test_docs_blocks_*.py`` run), and the Commands block against
the parser.
"""

from __future__ import annotations

import argparse
import fnmatch
import posixpath
import re
import shutil
import subprocess

import pytest
from cli_runner import REPO
from readme_blocks import blocks, pages, section_blocks

from multiverse.cli._parser import build_parser

_FENCED = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: What a path may look like: no spaces, no placeholders (``RUN_DIR/x``, ``<name>``, ``{a,b}``).
_PATHLIKE = re.compile(r"^\.?[A-Za-z0-9_][A-Za-z0-9_.*/-]*$")
_MODULE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\.py$")


def _tracked() -> list[str]:
    """The repository's files as git knows them (what a fresh clone has)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    done = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [p for p in done.stdout.decode("utf-8").split("\0") if p]


def _prose(text: str) -> str:
    """README without its fenced blocks, line numbers kept (each block becomes as many empty lines)."""
    return _FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def named_paths(text: str, base: str = "") -> list[tuple[int, str]]:
    """(line, token) of every inline code span and relative link target that looks like a path; a link's target
    is read from ``base``, the page's folder (``docs/guides`` for ``docs/guides/spec.md``)."""
    prose = _prose(text)
    found = []
    for pattern in (_INLINE, _LINK):
        for match in pattern.finditer(prose):
            token = match.group(1).strip()
            if "://" in token or token.startswith(("#", "mailto:")):
                continue
            token = re.split(r"::|:(?=\d)", token)[0].split("#")[0]  # tests/x.py::test_y, file.py:12, file.md#part
            if pattern is _LINK and base:
                token = posixpath.normpath(posixpath.join(base, token))
            # a path has a slash inside it (``sim/`` and ``openai/`` are model prefixes) or is a module's name
            if _PATHLIKE.match(token) and ("/" in token.rstrip("/") or _MODULE.match(token)):
                found.append((prose.count("\n", 0, match.start()) + 1, token))
    return found


def stale_paths(named: list[tuple[int, str]], tracked: list[str], page: str = "README.md") -> list[str]:
    """The named paths that lead nowhere in ``tracked``: a path under a tracked top-level folder (or a
    top-level file) must be a tracked file or folder, a glob must match one, a bare ``name.py`` must be
    some tracked file's name. Paths elsewhere (``runs/demo``, ``.multiverse/store``) are what a run makes."""
    files = set(tracked)
    folders = {"/".join(p.split("/")[:i]) for p in tracked for i in range(1, p.count("/") + 1)}
    tops = {p.split("/")[0] for p in tracked}
    names = {p.rsplit("/", 1)[-1] for p in tracked}
    stale = []
    for line, token in named:
        path = token.removeprefix("./").rstrip("/")
        if "/" not in path:
            ok = path in names if "*" not in path else any(fnmatch.fnmatch(n, path) for n in names)
        elif path.split("/")[0] not in tops:
            continue
        elif "*" in path:
            ok = any(fnmatch.fnmatch(p, path) for p in files | folders)
        else:
            ok = path in files or path in folders
        if not ok:
            stale.append(f"{page}:{line}: `{token}`")
    return stale


def test_every_path_the_pages_name_exists():
    tracked = _tracked()
    stale, count = [], 0
    for path in pages():
        page = path.relative_to(REPO).as_posix()
        named = named_paths(path.read_text(encoding="utf-8"), posixpath.dirname(page))
        count += len(named)
        stale += stale_paths(named, tracked, page)
    assert count > 20, "the pages name paths in inline code: the reader found too few to be reading them"
    assert not stale, "the pages name paths that are not in the repository:\n" + "\n".join(stale)


def test_a_link_is_read_from_its_page_s_folder():
    tracked = ["docs/reliability.md", "figures/a.png", "docs/guides/spec.md"]
    text = "[s](../reliability.md#the-store) ![a](../../figures/a.png) [b](spec.md) [c](../gone.md) `docs/x.md`\n"
    stale = stale_paths(named_paths(text, "docs/guides"), tracked, "docs/guides/spec.md")
    assert stale == ["docs/guides/spec.md:1: `docs/x.md`", "docs/guides/spec.md:1: `docs/gone.md`"]


def test_a_stale_or_moved_path_is_found():
    """The check itself: a moved module, a renamed test, a missing figure and a bare name are each caught."""
    tracked = ["multiverse/work/_prompts.py", "tests/cli_runner.py", "figures/a.png", "specs/demo.yaml"]
    text = ("See `multiverse/prompts.py` and `multiverse/work/_prompts.py`, `tests/cli_runner.py::run_cli`,\n"
            "`cli_runner.py`, `synthetic.py`, ![x](figures/b.png), [y](figures/a.png), `specs/*.yaml`,\n"
            "`specs/*.json`, `runs/demo/report.html`, `./.multiverse/store`, `multiverse/work/`, `RUN_DIR/x y`, `sim/`, `.py`.\n"
            "```\nmultiverse run specs/missing.yaml `tests/nothing.py`\n```\n`tests/gone.py:12` [z](#the-store)\n")
    stale = stale_paths(named_paths(text), tracked)
    assert stale == ["README.md:1: `multiverse/prompts.py`", "README.md:2: `synthetic.py`",
                     "README.md:3: `specs/*.json`", "README.md:7: `tests/gone.py`", "README.md:2: `figures/b.png`"]


def _parser_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every runnable command path of the parser: ("validate",), ("import", "inspect"), ..."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prefix}
    out: set[tuple[str, ...]] = set()
    for action in subs:
        for name, child in action.choices.items():
            out |= _parser_commands(child, (*prefix, name))
    return out


def readme_commands(code: str, parser: argparse.ArgumentParser) -> set[tuple[str, ...]]:
    """The command paths the Commands block's ``multiverse ...`` lines name (``a|b`` names both), read
    down the parser's tree: a word names a subcommand only where the parser has subcommands."""
    out: set[tuple[str, ...]] = set()
    for line in code.splitlines():
        words = line.split("#")[0].split()
        if not words or words[0] != "multiverse":
            continue
        paths: set[tuple[str, ...]] = {()}
        node: list[argparse.ArgumentParser] = [parser]
        for word in words[1:]:
            subs = [a for p in node for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if not subs:
                break
            choices = {name: child for a in subs for name, child in a.choices.items()}
            names = word.split("|")
            paths = {(*p, n) for p in paths for n in names}
            node = [choices[n] for n in names if n in choices]
            if len(node) < len(names):  # a word the parser does not know: named as written, so it fails below
                break
        out |= paths
    return out


def test_the_commands_block_lists_every_subcommand_and_no_other():
    commands = section_blocks("Commands")
    assert commands, "no page has a Commands section with a block"
    parser = build_parser()
    defined = _parser_commands(parser)
    listed = readme_commands(commands[0].code, parser)
    assert len(defined) > 15, sorted(defined)
    missing = sorted(" ".join(c) for c in defined - listed)
    unknown = sorted(" ".join(c) for c in listed - defined)
    assert not missing, f"{commands[0].where}: the parser defines commands the Commands block omits: {missing}"
    assert not unknown, f"{commands[0].where}: the Commands block names commands the parser lacks: {unknown}"


def test_the_commands_reader_sees_omissions_and_inventions():
    """The check itself: a nested subcommand left out, an alternation, an invented command."""
    parser = build_parser()
    code = ("multiverse validate SPEC   # import table is not a command here\n"
            "multiverse curve|agreement RUN_DIR\n"
            "multiverse import table FILE --out DIR\n"
            "multiverse store gc|stats SPEC\n"
            "multiverse frobnicate X\n"
            "multiverse import parquet FILE\n")
    listed = readme_commands(code, parser)
    assert listed == {("validate",), ("curve",), ("agreement",), ("import", "table"), ("store", "gc"),
                      ("store", "stats"), ("frobnicate",), ("import", "parquet")}
    defined = _parser_commands(parser)
    assert {("import", "inspect"), ("import", "promptfoo"), ("store", "migrate")} <= defined - listed
    assert listed - defined == {("frobnicate",), ("import", "parquet")}


def test_the_pages_have_one_commands_block():
    """The Commands section's first block is the reference list the check reads: it must be the one."""
    heads = [b for b in blocks() if b.section == "Commands"]
    assert len(heads) == 1, [b.where for b in heads]
