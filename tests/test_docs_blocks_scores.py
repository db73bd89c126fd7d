"""The blocks of the spec and scores pages, run as written in one folder (``GROUPS["scores"]``).

The spec page validates its example and runs the scored demo (``runs/demo-scores``), which the scores page
reads, with the imports of graded and preference tables. Neither needs the demo's run. ``tests/test_readme.py``
says how the blocks are found and marked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from readme_blocks import newcomer_folder, run_group

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return newcomer_folder(tmp_path_factory.mktemp("docs-scores"))


@pytest.fixture(scope="module")
def ran(folder) -> dict:
    return run_group("scores", folder)


def test_the_spec_and_scores_pages_blocks_run_as_written(ran, folder):
    assert len(ran) >= 5, ran
    for made in ("multiverse.schema.json", "runs/demo-scores/manifest.json", "runs/demo-scores/curve.png",
                 "runs/grades/manifest.json", "runs/preferences/manifest.json"):
        assert (folder / made).is_file(), f"a block should have written {made}"
    json.loads((folder / "multiverse.schema.json").read_text(encoding="utf-8"))
