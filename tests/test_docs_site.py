"""The documentation site's generated reference says what the code says (``docs/_ext/generated.py``).

``.ci/run`` builds the site with every warning an error; these check, without a build, that the pages made
from the code hold all of it: every command of the parser, every field of the spec's schema, every field of
the run folder's manifest, every facade, and every recorded benchmark with its command and date.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

import pytest
from cli_runner import REPO

from multiverse.cli import build_parser
from multiverse.spec import spec_schema
from multiverse.tables import Manifest


@pytest.fixture(scope="module")
def generated():
    spec = importlib.util.spec_from_file_location("docs_generated", REPO / "docs" / "_ext" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_generated"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("docs_generated", None)


def test_the_cli_page_has_every_command_s_help(generated, monkeypatch):
    monkeypatch.setenv("COLUMNS", "123")
    page = generated.cli_page()
    assert os.environ["COLUMNS"] == "123", "the build's terminal width is given back"
    paths = [path for path, _ in generated._commands(build_parser())]
    assert len(paths) > 15
    for path in paths:
        assert f"`{' '.join(('multiverse', *path))}`" in page, path
    assert "--max-units" in page and "usage: multiverse" in page
    options = [line for line in page.splitlines() if line.startswith("  -")]
    assert options and max(map(len, options)) <= 80, "options' help is wrapped at the page's width"


def test_the_spec_page_has_every_field_of_the_schema(generated):
    page = generated.spec_page()
    schema = spec_schema()
    for name in schema["properties"]:
        assert f"| `{name}` |" in page, name
    # nested fields are reached through $refs and lists: the judge's model, a system's model
    assert "| `judge.model` |" in page and "| `systems[].model` |" in page
    assert re.search(r"\| `scoring\.ci\.level` \|.*exclusiveMinimum 0", page), "the ranges the checks enforce are shown"


def test_the_run_folder_page_has_every_manifest_field(generated):
    page = generated.run_folder_page()
    for name, info in Manifest.model_fields.items():
        assert f"| `{info.alias or name}` |" in page, name


def test_the_api_page_documents_each_name_once(generated):
    page = generated.api_page()
    rooms = re.findall(r"^\.\. automodule:: (\S+)$", page, re.MULTILINE)
    assert rooms[0] == "multiverse" and {"multiverse.spec", "multiverse.results", "multiverse.analysis"} <= set(rooms)
    # ModelConfig lives in core and is re-exported by spec: documented once, in core
    spec_block = page.split(".. automodule:: multiverse.spec", 1)[1].split("```", 1)[0]
    assert "ModelConfig" in spec_block.split(":exclude-members:", 1)[1]
    assert ".. autofunction:: multiverse.report" in page


def test_the_performance_page_shows_each_record_with_its_command_and_date(generated):
    records = sorted((REPO / "docs" / "bench").glob("*.json"))
    assert records, "docs/bench holds the recorded benchmarks"
    page = generated.performance_page()
    for path in records:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["title"] in page and record["command"] in page and f"Measured {record['date']}" in page
    # a list of records is one table, a column a field; a nested figure is one dotted row
    rows = generated._rows_table([{"a": 1, "b": {"c": 2}}, {"a": 3}])
    assert rows == ["| `a` | `b.c` |", "|---|---|", "| 1 | 2 |", "| 3 |  |"]
