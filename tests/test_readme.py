"""README's examples run as written: every shell and Python block, in order, in one working folder.

README is the contract, and a newcomer copies its blocks. So this module
runs them as a newcomer would, top to bottom, in a fresh folder that holds a
copy of the repository's ``specs/`` and ``analyses/`` (the folders the blocks
name): ``bash`` blocks with ``bash -e`` (the ``multiverse`` and ``python``
of this environment first on PATH), ``python`` blocks in one namespace per
README section. Blocks share what they make, as README's own reading order
does: the demo writes ``runs/demo`` once and the later sections analyse it.
YAML blocks marked ``spec`` are validated as specs.

A block that cannot run here (an API key, a model server, CI itself, a
person labelling a sheet) carries ``<!-- readme-test: skip (reason) -->``
before its fence (``tests/readme_blocks.py``), and ``SKIPPED`` below names
each one: a new skip fails until it is written here too, so the list cannot
grow unseen. An unmarked block in a language the test cannot run fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from cli_runner import REPO
from readme_blocks import RUN, Block, block_environment, blocks, newcomer_folder, run_shell

pytestmark = pytest.mark.slow

#: (section, reason) of every block README marks skip. Add one only with its marker in README.
SKIPPED = Counter({
    ("Quickstart", "installs the package; the test runs in the installed one"): 1,
    ("Quickstart", "it is CI itself, which runs this test"): 1,
    ("Scored judges", "a part of a spec, not a whole one"): 1,
    ("Instructions", "a part of a spec, not a whole one"): 1,
    ("The simulated world", "a part of a world file, not a whole one"): 1,
    ("Human anchoring", "needs the sheet a person filled in"): 1,
    ("Scores beyond pass/fail", "a part of a spec, not a whole one"): 1,
    ("Real models", "needs API keys"): 2,
    ("Real models", "a part of a spec, not a whole one"): 1,
    ("Real models", "starts a model server; tests/test_local_llm.py runs this spec in CI"): 1,
    ("On a cluster (Dask)", "needs a Dask cluster and API keys"): 1,
    ("On a cluster (Dask)", "needs a Dask cluster, a PostgreSQL server and API keys"): 1,
    ("Code named by a spec", "a part of a spec, not a whole one"): 1,
    ("Reproduce the simulated study", "minutes: tests/test_case_study.py runs it"): 1,
    ("Run it with real models", "needs API keys"): 1,
    ("Development", "installs, and runs the whole suite that holds this test"): 1,
})

#: Fenced blocks in these languages are prose (diagrams, output, file excerpts), not run.
TEXT = ("", "text", "jsonc", "json")

#: One block's limit: the demo is the longest (about a minute on 2 cores, several at high load).
BLOCK_TIMEOUT = 900


def test_every_block_is_run_checked_or_marked():
    found = blocks()
    unknown = [b.where for b in found if b.language not in (*RUN, "yaml", *TEXT)]
    assert not unknown, f"code blocks in a language this test neither runs nor reads as text: {unknown}"
    bad = [b.where for b in found if b.marker not in (None, "skip", "spec")]
    assert not bad, f"unknown readme-test markers (expected skip or spec): {bad}"
    unmarked_yaml = [b.where for b in found if b.language == "yaml" and b.marker is None]
    assert not unmarked_yaml, f"YAML blocks must be marked spec (validated) or skip (reason): {unmarked_yaml}"
    no_reason = [b.where for b in found if b.marker == "skip" and not (b.reason or "").strip()]
    assert not no_reason, f"a skip marker needs its reason in brackets: {no_reason}"
    misplaced = [b.where for b in found if b.marker == "spec" and b.language != "yaml"]
    assert not misplaced, f"'spec' marks a YAML block: {misplaced}"
    skipped = Counter((b.section, b.reason) for b in found if b.marker == "skip")
    assert skipped == SKIPPED, ("README's skipped blocks differ from SKIPPED in this test: "
                                f"new {dict(skipped - SKIPPED)}, gone {dict(SKIPPED - skipped)}")
    assert sum(b.runs for b in found) >= 8, "expected README to keep most of its examples runnable"


def test_markers_are_read_and_a_bad_one_is_refused():
    text = ("## A\n\n<!-- readme-test: skip (needs a key) -->\n```bash\nexit 1\n```\n\n"
            "```python\nx = 1\n```\n\n## B\n<!-- readme-test: spec -->\n```yaml\nname: x\n```\n")
    first, second, third = blocks(text)
    assert (first.section, first.marker, first.reason, first.runs, first.line) == ("A", "skip", "needs a key", False, 4)
    assert (second.marker, second.runs, second.code) == (None, True, "x = 1\n")
    assert (third.section, third.marker, third.language) == ("B", "spec", "yaml")
    # A marker the parser cannot read is an error, not an unmarked block that then runs.
    with pytest.raises(ValueError, match="readme-test: KIND"):
        blocks("<!-- readme-test skip needs a key -->\n```bash\nexit 1\n```\n")
    with pytest.raises(ValueError, match="never closes"):
        blocks("```bash\nmultiverse demo\n")


# --------------------------------------------------------------------------- running them


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return newcomer_folder(tmp_path_factory.mktemp("readme"))


def _run_python(block: Block, folder: Path, namespace: dict) -> None:
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(block.code, block.where, "exec"), namespace)  # README's own example, as a user runs it
    finally:
        os.chdir(here)


def _validate_spec(block: Block, folder: Path) -> None:
    path = folder / "specs" / f"readme-line-{block.line}.yaml"  # beside the specs it names (the rubric file)
    path.write_text(block.code, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "multiverse.cli", "validate", str(path)], cwd=folder,
                          env=block_environment(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{block.where}: the spec example does not validate:\n{done.stderr}"


@pytest.fixture(scope="module")
def ran(folder) -> dict:
    """Every runnable block, in README's order; each block's seconds, keyed by where it is."""
    seconds: dict[str, float] = {}
    namespaces: dict[str, dict] = {}
    for block in blocks():
        if block.marker == "skip":
            continue
        start = time.perf_counter()
        if block.language == "python":
            _run_python(block, folder, namespaces.setdefault(block.section, {"__name__": "__readme__"}))
        elif block.language in RUN:
            run_shell(block, folder, timeout=BLOCK_TIMEOUT)
        elif block.marker == "spec":
            _validate_spec(block, folder)
        else:
            continue
        seconds[block.where] = round(time.perf_counter() - start, 1)
        print(f"{block.where}: {seconds[block.where]} s", file=sys.stderr)  # shown with -s: where the time goes
    return seconds


def test_readme_blocks_run_as_written(ran, folder):
    assert ran, "no block ran"
    # What the blocks say they write is there.
    for made in ("runs/demo/report.html", "runs/demo/manifest.json", "multiverse.schema.json", "report.html",
                 "explorer.html", "SHEET.csv", "SHEET.html", "specs/my-audit.rubric.yaml",
                 "specs/my-audit.cases.yaml", "runs/imported/manifest.json", "runs/labels-import/report.html"):
        assert (folder / made).is_file(), f"a README block should have written {made}"
    json.loads((folder / "multiverse.schema.json").read_text(encoding="utf-8"))
    page = (folder / "explorer.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page


def _readme_number(pattern: str) -> list[int]:
    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    return [int(m.replace(",", "")) for m in re.findall(pattern, text)]


def test_readme_quotes_the_demo_as_it_runs(ran, folder):
    """The demo's calls and verdict rows that README quotes are the ones the demo's run makes."""
    manifest = json.loads((folder / "runs/demo/manifest.json").read_text(encoding="utf-8"))
    calls = sum(int(stage.get("calls") or 0) for stage in manifest["stages"].values())
    quoted = _readme_number(r"`multiverse demo` \(24 universes × 4 systems, ([\d,]+) simulated calls")
    quoted += _readme_number(r"\| `specs/demo\.yaml` \(24 universes\) \| ([\d,]+) \|")
    assert len(quoted) == 2, "README should quote the demo's calls under End to end and Call economy"
    assert quoted == [calls, calls], f"README quotes {quoted} calls for the demo; its run made {calls}"
    rows = sum(manifest["statuses"].values())
    assert _readme_number(r"On the demo run \(24 universes × 4 systems, ([\d,]+) verdict rows\)") == [rows]
    assert len(manifest["universes"]) == 24
