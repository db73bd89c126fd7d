"""A report or explorer page is sent to colleagues: it names no absolute local path (issue 48).

Every field that names a place (the run folder, the spec file, the store, a file named in an import warning or
a failure's reason) goes through ``core.shared_path``: relative to the run folder, or only its name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse.core import shared_path, shared_text


def _places(tmp_path: Path, home: Path) -> list[str]:
    """What must never appear in a shared page: the temporary root, the (pretend) home and the user's name."""
    return [str(tmp_path), str(home), "alice"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home" / "alice"
    home.mkdir(parents=True)
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: home))
    return home


@pytest.mark.parametrize("layout", ["beside", "store-in-home", "everything-in-home"])
def test_a_report_of_a_run_names_no_absolute_path(tmp_path, home, write_spec, layout):
    import yaml

    project = home / "audit" if layout == "everything-in-home" else tmp_path / "work"
    project.mkdir(parents=True)
    store = home / ".multiverse" / "store" if layout != "beside" else project / ".multiverse" / "store"
    spec = project / "spec.yaml"
    document = tiny_spec_document()
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    out = project / "runs" / "tiny"
    run_cli(["run", str(spec), "--out", str(out), "--store", str(store), "--quiet"]).ok()
    assert json.loads((out / "manifest.json").read_text())["store"] == str(store)  # the machine's own record
    report = out / "report.html"
    run_cli(["report", str(out), "--out", str(report), "--quiet"]).ok()
    page = report.read_text()
    for place in _places(tmp_path, home):
        assert place not in page, place
    facts = dict(row.split("</td><td>", 1) for row in page.split("<tr><td>")[1:] if "</td><td>" in row)
    assert facts["source"].startswith("tiny<")
    assert facts["spec file"].startswith("../../spec.yaml<")
    shown = facts["store"].split("<", 1)[0]
    # Beside the project: the way from the run folder; in a home it does not share: only its name.
    expected = "../../.multiverse/store" if layout == "beside" else (
        "../../../.multiverse/store" if layout == "everything-in-home" else ".multiverse/store")
    assert shown == expected
    if shown.startswith(".."):
        assert (out / shown).resolve() == store.resolve()  # a relative path that leads to the store


def test_an_import_report_with_warnings_names_no_absolute_path(tmp_path, home):
    table = home / "labels" / "t.csv"
    table.parent.mkdir(parents=True)
    rows = [f"{s},i{i},{g},{'' if i == 3 else (i + len(s) + len(g)) % 2}" for s in "AB" for i in range(6) for g in ("g1", "g2")]
    table.write_text("model,item,grader,label\n" + "\n".join(rows) + "\n")
    out = tmp_path / "shared" / "imp"
    run_cli(["import", "table", str(table), "--system", "model", "--item", "item", "--label", "label",
             "--axis", "grader", "--out", str(out)]).ok()
    manifest = json.loads((out / "manifest.json").read_text())
    assert any(str(table) in w for w in manifest["warnings"])  # the importer's warning names the file...
    report = out / "report.html"
    run_cli(["report", str(out), "--out", str(report), "--quiet"]).ok()
    page = report.read_text()
    for place in _places(tmp_path, home):
        assert place not in page, place
    assert "t.csv: label:" in page  # ...and the page names it by its name


def test_the_explorer_document_names_no_absolute_path(tmp_path, home, write_spec):
    import yaml

    from multiverse.explorer import document_from_run

    spec = home / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_spec_document(), sort_keys=False))
    out = tmp_path / "r"
    run_cli(["run", str(spec), "--out", str(out), "--store", str(home / "store"), "--quiet"]).ok()
    text = json.dumps(document_from_run(out))
    for place in _places(tmp_path, home):
        assert place not in text, place


@pytest.mark.parametrize(("path", "base", "shown"), [
    ("/srv/a/.multiverse/store", "/srv/a/runs/x", "../../.multiverse/store"),
    ("/srv/a/spec.yaml", "/srv/b/runs/x", "../../../a/spec.yaml"),
    ("/srv/a/spec.yaml", "/opt/runs/x", "spec.yaml"),  # they meet only at the root
    ("/srv/a/.multiverse/store", None, ".multiverse/store"),
    ("runs/demo", None, "runs/demo"),  # as the user typed it
    ("../../secret/x", None, "x"),
    ("postgresql://u:[redacted]@db/audits", "/srv/a", "postgresql://u:[redacted]@db/audits"),
])
def test_shared_path(path, base, shown):
    assert shared_path(path, base) == shown


def test_shared_path_never_climbs_through_the_home_directorys_parent(home):
    other = home.parent / "bob" / "store"
    assert shared_path(other, home / "runs" / "x") == "store"
    assert shared_path(home / "store", home / "runs" / "x") == "../../store"  # below the home: no user name


def test_shared_text_replaces_only_absolute_paths():
    text = "x /srv/a/t.csv: 3 rows; ratio 3/4, https://h/a/b, ~/t/u.csv and (/srv/q/r.json)"
    assert shared_text(text, "/srv/a/runs/x") == "x ../../t.csv: 3 rows; ratio 3/4, https://h/a/b, " \
        f"{shared_path('~/t/u.csv', '/srv/a/runs/x')} and (../../../q/r.json)"
