"""Run files: written atomically with the user's umask; one rule finds the store."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document
from store_rows import connect, count

from multiverse.core._atomicfile import atomic_write, atomic_write_text, synced_once
from multiverse.engine._pipeline import run
from multiverse.spec import load_spec
from multiverse.store._store import default_store_path

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def umask():
    """Set the process umask for one test, and restore it."""
    previous = os.umask(0o022)
    yield os.umask
    os.umask(previous)


def modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()}


# -- umask ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask,expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_every_file_a_run_writes_follows_the_umask(tmp_path, write_spec, umask, mask, expected):
    umask(mask)
    spec = load_spec(write_spec(tiny_spec_document()))
    run(spec, store=tmp_path / "store", out=tmp_path / "run", progress=False)
    written = modes(tmp_path / "run")
    assert {"verdicts.parquet", "verdicts.csv", "criteria.csv", "rates.parquet", "manifest.json",
            "transcripts.jsonl", "spec.yaml"} <= set(written)
    assert set(written.values()) == {expected}, written
    entries = modes(tmp_path / "store")
    assert entries and set(entries.values()) == {expected}, entries
    assert not list((tmp_path / "run").glob(".*"))  # no temp file left


@pytest.mark.parametrize("mask,expected", [(0o022, 0o644), (0o077, 0o600)])
def test_imports_figures_and_reports_follow_the_umask(tmp_path, umask, mask, expected):
    import matplotlib.pyplot as plt

    from multiverse.cli import _save
    from multiverse.importers import import_table

    umask(mask)
    table = tmp_path / "labels.csv"
    table.write_text("model,item,label\na,1,1\na,2,0\nb,1,1\nb,2,1\n")
    os.chmod(table, 0o644)
    import_table(table, system="model", item="item", label="label", out_dir=tmp_path / "imported")
    assert set(modes(tmp_path / "imported").values()) == {expected}
    figure, _ = plt.subplots()
    _save(figure, tmp_path / "fig" / "curve.png")
    assert stat.S_IMODE((tmp_path / "fig" / "curve.png").stat().st_mode) == expected
    assert (tmp_path / "fig" / "curve.png").read_bytes()[:4] == b"\x89PNG"


def test_an_overwrite_keeps_the_umask_not_the_old_files_mode(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "t.json"
    target.write_text("old")
    target.chmod(0o600)
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old")

    def half(tmp: str) -> None:
        Path(tmp).write_text("half a ta")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_folder_written_together_is_flushed_once_not_per_file(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    atomic_write_text(tmp_path / "alone.txt", "x")
    assert len(synced) == 1  # a file written on its own is fsynced before its rename
    synced.clear()
    with synced_once(tmp_path):
        for i in range(5):
            atomic_write_text(tmp_path / f"t{i}.csv", f"{i}\n")
        assert synced == []  # none per file inside the block
    assert [p.read_text() for p in sorted(tmp_path.glob("t*.csv"))] == [f"{i}\n" for i in range(5)]
    assert 1 <= len(synced) <= 6  # the folder once (and each file only where syncfs is missing)
    assert not list(tmp_path.glob(".*.tmp"))
    synced.clear()
    with pytest.raises(ZeroDivisionError), synced_once(tmp_path):
        atomic_write_text(tmp_path / "t0.csv", "changed")
        raise ZeroDivisionError
    assert (tmp_path / "t0.csv").read_text() == "changed" and len(synced) >= 1  # what was renamed is flushed


def test_no_writer_uses_mkstemp():
    # mkstemp always creates 0600 files: every writer goes through atomicfile instead.
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "multiverse").rglob("*.py") if "mkstemp(" in p.read_text()]
    assert offenders == []


# -- one store rule -------------------------------------------------------------------------------


def test_the_rule_explicit_then_environment_then_beside_the_spec(tmp_path, monkeypatch):
    monkeypatch.delenv("MULTIVERSE_STORE", raising=False)
    spec = tmp_path / "specs" / "x.yaml"
    assert default_store_path(spec) == tmp_path / "specs" / ".multiverse" / "store"
    assert default_store_path(None) == Path(".multiverse") / "store"  # no spec file: the current directory
    assert default_store_path(spec, tmp_path / "mine") == tmp_path / "mine"
    monkeypatch.setenv("MULTIVERSE_STORE", str(tmp_path / "shared"))
    assert default_store_path(spec) == tmp_path / "shared"
    assert default_store_path(None) == tmp_path / "shared"
    assert default_store_path(spec, tmp_path / "mine") == tmp_path / "mine"


def entries_in(root: Path) -> int:
    return count(root)


def test_store_stats_of_a_spec_shows_what_its_run_stored(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "x.yaml").write_text(yaml.safe_dump(tiny_spec_document(name="x"), sort_keys=False))
    done = run_cli(["run", "specs/x.yaml", "--quiet"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    stored = entries_in(specs / ".multiverse" / "store")
    assert stored > 0
    for where in (["specs/x.yaml"], ["x.yaml"], ["runs/x"]):
        cwd = specs if where == ["x.yaml"] else tmp_path
        stats = run_cli(["store", "stats", *where, "--json"], cwd=cwd)
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["entries"] == stored, where
    # gc of that spec finds the same store and keeps all of it
    gc = run_cli(["store", "gc", "specs/x.yaml", "--json"], cwd=tmp_path)
    assert gc.returncode == 0 and json.loads(gc.stdout)["removed"] == 0
    assert json.loads(gc.stdout)["stages"]["transcript"]["kept"] > 0


def test_the_environment_store_is_used_by_run_and_by_stats(tmp_path, monkeypatch):
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(tiny_spec_document(name="x"), sort_keys=False))
    env = {"MULTIVERSE_STORE": str(tmp_path / "shared")}
    monkeypatch.setenv("MULTIVERSE_STORE", env["MULTIVERSE_STORE"])
    run(load_spec(tmp_path / "x.yaml"), out=tmp_path / "runs" / "x", progress=False)
    assert not (tmp_path / ".multiverse").exists()
    stats = run_cli(["store", "stats", "x.yaml", "--json"], cwd=tmp_path, env=env)
    assert json.loads(stats.stdout)["entries"] == entries_in(tmp_path / "shared") > 0


def test_store_commands_refuse_what_cannot_name_a_store(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder / "s.yaml").write_text(yaml.safe_dump(tiny_spec_document(), sort_keys=False))
    cases = [
        (["store", "gc", "a/s.yaml", "b/s.yaml"], "different places"),
        (["store", "stats", "nothere.yaml"], "nothere.yaml"),
        (["store", "stats", "a"], "expected a spec file or a run directory"),
    ]
    (tmp_path / "afile").write_text("x")
    cases.append((["store", "stats", "--store", "afile"], "afile"))
    for args, mention in cases:
        done = run_cli(args, cwd=tmp_path)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2, (args, done.stderr)
        assert len(lines) == 1 and mention in lines[0] and "Traceback" not in done.stderr, (args, done.stderr)


def test_demo_help_says_where_its_store_is():
    from multiverse.cli import build_parser

    parser = build_parser()
    demo = parser._subparsers._group_actions[0].choices["demo"]
    text = demo.format_help()
    assert "./.multiverse/store" in " ".join(text.split())
    assert ".store" not in text.replace(".multiverse/store", "")


def test_the_demo_stores_in_the_current_directory_not_beside_its_packaged_spec(tmp_path, monkeypatch):
    import multiverse.cli as cli_module

    seen = {}

    def capture(spec, args, out):
        seen["store"], seen["spec"] = args.store, spec.path
        raise SystemExit(0)

    monkeypatch.delenv("MULTIVERSE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_module._audit, "_run_and_say", capture)
    with pytest.raises(SystemExit):
        cli_module.main(["demo", "--quiet"])
    assert seen["store"] == Path(".multiverse") / "store"
    assert Path(seen["spec"]).parent != tmp_path  # the spec is the packaged one
    monkeypatch.setenv("MULTIVERSE_STORE", str(tmp_path / "shared"))
    with pytest.raises(SystemExit):
        cli_module.main(["demo", "--quiet"])
    assert seen["store"] == tmp_path / "shared"


def test_plan_refuses_a_store_that_is_a_file_but_not_one_not_made_yet(tmp_path, write_spec):
    from multiverse.engine._pipeline import plan
    from multiverse.errors import InputError

    spec = load_spec(write_spec(tiny_spec_document()))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="afile: is not a directory"):
        plan(spec, store=tmp_path / "afile")
    assert plan(spec, store=tmp_path / "later").stages["judge"].stored == 0
    assert not (tmp_path / "later").exists()


@pytest.mark.slow
def test_a_finished_demo_leaves_at_most_50_files_in_its_store(tmp_path):
    """The store is a database, not a file per entry: the demo's thousands of calls are rows."""
    done = run_cli(["demo", "--quiet", "--store", tmp_path / "store", "--out", tmp_path / "run"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    files = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    stats = run_cli(["store", "stats", "--store", tmp_path / "store", "--json"], cwd=tmp_path)
    entries = json.loads(stats.stdout)["entries"]
    assert len(files) <= 50 < entries, (len(files), entries)
    with connect(tmp_path / "store") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
