"""The blocks of the import page, run as written in one folder (``GROUPS["imports"]``): ASSERT runs, label
tables, Inspect logs, promptfoo outputs and lm-eval samples from ``analyses/data``, each read into a run folder
and analysed. ``tests/test_readme.py`` says how the blocks are found and marked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from readme_blocks import newcomer_folder, run_group

pytestmark = pytest.mark.slow


def test_the_import_pages_blocks_run_as_written(tmp_path: Path):
    folder = newcomer_folder(tmp_path)
    ran = run_group("imports", folder)
    assert len(ran) >= 6, ran
    for name in ("imported", "labels-import", "epochs-import", "inspect-import", "promptfoo-import", "lm-eval-import"):
        manifest = json.loads((folder / "runs" / name / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["universes"], f"runs/{name}: an import with no universe"
    assert (folder / "runs/labels-import/report.html").is_file()
