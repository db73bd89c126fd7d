"""The blocks of the pages built on the demo's run, run as written in one folder (``GROUPS["demo"]``).

README's quickstart runs ``multiverse demo`` once (Getting started repeats the block; it is not run twice),
then README's example, the Python API, human anchoring, the report and the release gate read ``runs/demo``.
The other groups run in their own modules (``tests/test_readme.py`` says how the blocks are found and marked).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from readme_blocks import newcomer_folder, run_group
from test_readme import check_the_demo_quotes

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return newcomer_folder(tmp_path_factory.mktemp("docs-demo"))


@pytest.fixture(scope="module")
def ran(folder) -> dict:
    return run_group("demo", folder)


def test_the_demo_pages_blocks_run_as_written(ran, folder):
    assert len([s for s in ran.values() if not isinstance(s, str)]) >= 5, ran
    assert any(isinstance(s, str) for s in ran.values()), "Getting started repeats README's demo: run once"
    for made in ("runs/demo/report.html", "runs/demo/manifest.json", "curve.png", "report.html", "explorer.html",
                 "SHEET.csv", "SHEET.html", "claims.xml", "diff.png"):
        assert (folder / made).is_file(), f"a block should have written {made}"
    page = (folder / "explorer.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page


def test_the_pages_quote_the_demo_as_it_runs(ran, folder):
    check_the_demo_quotes(folder)
