"""README's and the documentation site's examples are run or marked: the checks on the blocks themselves.

README and the pages under ``docs/`` are the contract, and a newcomer copies their blocks. The blocks are
run as a newcomer would, top to bottom, in fresh folders holding a copy of the repository's ``specs/`` and
``analyses/`` (the folders the blocks name), by ``tests/test_docs_blocks_<group>.py``: one module for each
group of pages whose blocks build on each other (``GROUPS`` in ``tests/readme_blocks.py``), so that xdist's
two workers share the time. ``bash`` blocks run with ``bash -e`` (the ``multiverse`` and ``python`` of this
environment first on PATH), ``python`` blocks in one namespace per page section, and YAML blocks marked
``spec`` are validated as specs.

A block that cannot run here (an API key, a model server, CI itself, a
person labelling a sheet) carries ``<!-- readme-test: skip (reason) -->``
before its fence (``tests/readme_blocks.py``), and ``SKIPPED`` below names
each one: a new skip fails until it is written here too, so the list cannot
grow unseen. An unmarked block in a language the test cannot run fails.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from cli_runner import REPO
from readme_blocks import GROUPS, RUN, blocks, documentation, pages

#: (page, section, reason) of every block the pages mark skip. Add one only with its marker on the page.
SKIPPED = Counter({
    ("README.md", "Quickstart", "installs the package; the test runs in the installed one"): 1,
    ("README.md", "Quickstart", "it is CI itself, which runs this test"): 1,
    ("README.md", "Documentation", "installs the docs extra; .ci/run builds the site in its docs step"): 1,
    ("docs/getting-started.md", "Quickstart", "installs the package; the test runs in the installed one"): 1,
    ("docs/getting-started.md", "Quickstart", "it is CI itself, which runs this test"): 1,
    ("docs/guides/spec.md", "Scored judges", "a part of a spec, not a whole one"): 1,
    ("docs/guides/spec.md", "Instructions", "a part of a spec, not a whole one"): 1,
    ("docs/guides/simulated-world.md", "The simulated world", "a part of a world file, not a whole one"): 1,
    ("docs/guides/human-anchoring.md", "Human anchoring", "needs the sheet a person filled in"): 1,
    ("docs/guides/scores.md", "Scores beyond pass/fail", "a part of a spec, not a whole one"): 1,
    ("docs/guides/real-models.md", "Real models", "needs API keys"): 2,
    ("docs/guides/real-models.md", "Real models", "a part of a spec, not a whole one"): 1,
    ("docs/guides/real-models.md", "Real models", "starts a model server; tests/test_local_llm.py runs this spec in CI"): 1,
    ("docs/guides/cluster.md", "On a cluster (Dask)", "needs a Dask cluster and API keys"): 1,
    ("docs/guides/cluster.md", "On a cluster (Dask)", "needs a Dask cluster, a PostgreSQL server and API keys"): 1,
    ("docs/reliability.md", "Code named by a spec", "a part of a spec, not a whole one"): 1,
    ("docs/case-study.md", "Reproduce the simulated study", "minutes: tests/test_case_study.py runs it"): 1,
    ("docs/case-study.md", "Run it with real models", "needs API keys"): 1,
    ("docs/development.md", "Development", "installs, and runs the whole suite that holds this test"): 1,
})

#: Fenced blocks in these languages are prose (diagrams, output, file excerpts), not run.
TEXT = ("", "text", "jsonc", "json")


def test_every_block_is_run_checked_or_marked():
    found = blocks()
    unknown = [b.where for b in found if b.language not in (*RUN, "yaml", *TEXT) and not b.directive]
    assert not unknown, f"code blocks in a language this test neither runs nor reads as text: {unknown}"
    bad = [b.where for b in found if b.marker not in (None, "skip", "spec")]
    assert not bad, f"unknown readme-test markers (expected skip or spec): {bad}"
    unmarked_yaml = [b.where for b in found if b.language == "yaml" and b.marker is None]
    assert not unmarked_yaml, f"YAML blocks must be marked spec (validated) or skip (reason): {unmarked_yaml}"
    no_reason = [b.where for b in found if b.marker == "skip" and not (b.reason or "").strip()]
    assert not no_reason, f"a skip marker needs its reason in brackets: {no_reason}"
    misplaced = [b.where for b in found if b.marker == "spec" and b.language != "yaml"]
    assert not misplaced, f"'spec' marks a YAML block: {misplaced}"
    skipped = Counter((b.page, b.section, b.reason) for b in found if b.marker == "skip")
    assert skipped == SKIPPED, ("the pages' skipped blocks differ from SKIPPED in this test: "
                                f"new {dict(skipped - SKIPPED)}, gone {dict(SKIPPED - skipped)}")
    assert sum(b.runs for b in found) >= 8, "expected the documentation to keep most of its examples runnable"
    assert any(b.runs for b in found if b.page == "README.md"), "README keeps one example that runs"


def test_every_page_with_a_block_to_run_is_in_one_group():
    """A page whose blocks no group runs would be an example no test runs: each is in exactly one group."""
    runnable = {b.page for b in blocks() if b.runs or b.marker == "spec"}
    grouped = Counter(page for group in GROUPS.values() for page in group)
    assert not [p for p, n in grouped.items() if n > 1], f"a page in two groups runs twice: {grouped}"
    assert runnable <= set(grouped), f"pages with blocks that no group in GROUPS runs: {sorted(runnable - set(grouped))}"
    listed = {p.relative_to(REPO).as_posix() for p in pages()}
    assert set(grouped) <= listed, f"GROUPS names pages the site does not list: {sorted(set(grouped) - listed)}"


def test_every_page_is_in_the_reading_order():
    """Every Markdown page under docs/ is in a toctree (else the site hides it and no test reads it)."""
    listed = {p.resolve() for p in pages()}
    on_disk = {p.resolve() for p in (REPO / "docs").rglob("*.md")
               if not {"_build", "_generated"} & set(p.relative_to(REPO / "docs").parts)}
    assert on_disk, "docs/ has no pages"
    assert on_disk <= listed, f"pages no toctree lists: {sorted(str(p) for p in on_disk - listed)}"
    assert all(p.is_file() for p in listed), f"toctree entries with no page: {[str(p) for p in listed if not p.is_file()]}"


def test_readme_stays_short():
    """README is what it is, the two set-up commands, one example, one figure and links: the rest is the site's."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README has {len(lines)} lines; move detail to a page under docs/"
    assert sum(line.startswith("![") for line in lines) >= 1, "README shows one figure"


def test_markers_are_read_and_a_bad_one_is_refused():
    text = ("## A\n\n<!-- readme-test: skip (needs a key) -->\n```bash\nexit 1\n```\n\n"
            "```python\nx = 1\n```\n\n## B\n<!-- readme-test: spec -->\n```yaml\nname: x\n```\n")
    first, second, third = blocks(text, page="docs/x.md")
    assert (first.section, first.marker, first.reason, first.runs, first.line) == ("A", "skip", "needs a key", False, 4)
    assert (second.marker, second.runs, second.code) == (None, True, "x = 1\n")
    assert (third.section, third.marker, third.language, third.where) == ("B", "spec", "yaml", "docs/x.md:14 (B)")
    # A MyST directive's fence carries its argument after the name; it is read, and closes, like any block.
    (include, after) = blocks("```{include} ../_generated/cli.md\n```\n\n```bash\nmultiverse demo\n```\n")
    assert (include.directive, include.runs, after.language, after.line) == (True, False, "bash", 4)
    # A marker the parser cannot read is an error, not an unmarked block that then runs.
    with pytest.raises(ValueError, match="readme-test: KIND"):
        blocks("<!-- readme-test skip needs a key -->\n```bash\nexit 1\n```\n")
    with pytest.raises(ValueError, match="never closes"):
        blocks("```bash\nmultiverse demo\n")


def documented_number(pattern: str) -> list[int]:
    """Every number the documentation (README and the pages, whitespace folded) quotes in ``pattern``'s group."""
    text = " ".join(documentation().split())
    return [int(m.replace(",", "")) for m in re.findall(pattern, text)]


def check_the_demo_quotes(folder: Path) -> None:
    """The demo's calls and verdict rows that the pages quote are the ones the demo's run in ``folder`` made."""
    manifest = json.loads((folder / "runs/demo/manifest.json").read_text(encoding="utf-8"))
    calls = sum(int(stage.get("calls") or 0) for stage in manifest["stages"].values())
    quoted = documented_number(r"`multiverse demo` \(24 universes × 4 systems, ([\d,]+) simulated calls")
    quoted += documented_number(r"\| `specs/demo\.yaml` \(24 universes\) \| ([\d,]+) \|")
    assert len(quoted) == 2, "the pages should quote the demo's calls under End to end and Call economy"
    assert quoted == [calls, calls], f"the pages quote {quoted} calls for the demo; its run made {calls}"
    rows = sum(manifest["statuses"].values())
    assert documented_number(r"On the demo run \(24 universes × 4 systems, ([\d,]+) verdict rows\)") == [rows]
    assert len(manifest["universes"]) == 24
