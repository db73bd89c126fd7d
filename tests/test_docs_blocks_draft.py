"""The blocks of the Commands page, run as written in one folder (``GROUPS["draft"]``): drafting a rubric and
cases for your first spec, from a copy of the demo's. ``tests/test_readme.py`` says how the blocks are found
and marked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from readme_blocks import newcomer_folder, run_group

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return newcomer_folder(tmp_path_factory.mktemp("docs-draft"))


def test_the_drafting_blocks_run_as_written(folder):
    ran = run_group("draft", folder)
    assert ran, "the Commands page has a block to run"
    for made in ("specs/my-audit.rubric.yaml", "specs/my-audit.cases.yaml"):
        assert (folder / made).is_file(), f"a block should have written {made}"
    rubric = yaml.safe_load((folder / "specs/my-audit.rubric.yaml").read_text(encoding="utf-8"))
    assert rubric, "the drafted rubric is a YAML document with content"
