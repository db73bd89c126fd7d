"""The store room as a whole: its facade, which store a command uses, and stats and gc by path.

Its imports (only errors and core; no module importing another that imports it back) are held by test_house.
"""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
import yaml
from conftest import tiny_spec_document
from store_rows import backdate

import multiverse.store as store_room
from multiverse.errors import InputError
from multiverse.spec import load_spec
from multiverse.store import (
    GcReport,
    StageGc,
    StageStats,
    Store,
    StoreStats,
    open_store,
    store_gc,
    store_of,
    store_stats,
)
from multiverse.work._units import referenced_keys

ROOM = Path(store_room.__file__).parent


def test_the_facade_is_curated():
    assert store_room.__doc__ and len(store_room.__all__) == len(set(store_room.__all__))
    assert all(not name.startswith("_") and hasattr(store_room, name) for name in store_room.__all__)
    for name in ("Store", "default_store_path", "store_of", "store_stats", "store_gc", "Held", "SHAPES"):
        assert name in store_room.__all__
    # Private modules stay private: none is a public name of the room.
    assert not [n for n in store_room.__all__ if n in {p.stem for p in ROOM.glob("_*.py")}]


# -- typed answers ---------------------------------------------------------------------------------


def _filled(root: Path) -> Store:
    store = Store(root)
    for i in range(3):
        store.put("transcript", f"t{i}", {"turns": [], "n": i})
    store.put("judgment", "j0", {"label": 1})
    (root / "quarantine" / "judgment").mkdir(parents=True)
    (root / "quarantine" / "judgment" / "j9.json.1.ab").write_text("x")
    return store


def test_stats_is_frozen_and_its_dict_is_the_json_document(tmp_path):
    stats = store_stats(_filled(tmp_path / "s").root)
    assert isinstance(stats, StoreStats) and stats.stages["judgment"] == StageStats(entries=1, bytes=stats.stages[
        "judgment"].bytes)
    document = stats.to_dict()
    assert list(document) == ["root", "stages", "entries", "bytes", "temp_files", "corrupt_files"]
    assert document["stages"]["transcript"] == {"entries": 3, "bytes": stats.stages["transcript"].bytes}
    assert document["root"] == str(tmp_path / "s") and document["corrupt_files"] == 1
    assert json.loads(json.dumps(document)) == document
    with pytest.raises(FrozenInstanceError):
        stats.entries = 0  # type: ignore[misc]


def test_gc_is_frozen_and_its_dict_is_the_json_document(tmp_path):
    report = store_gc(_filled(tmp_path / "s").root, keep={"transcript": {"t0"}}, dry_run=True, fresh=0)
    assert isinstance(report, GcReport) and report.stages["transcript"] == StageGc(kept=1, removed=2,
                                                                                   bytes=report.bytes)
    document = report.to_dict()
    assert list(document) == ["dry_run", "stages", "removed", "bytes", "temp_files", "corrupt_files",
                              "kept_recent", "live_runs"]
    assert document["stages"]["judgment"] == {"kept": 1, "removed": 0, "bytes": 0}
    assert document["dry_run"] is True and document["removed"] == 2 and document["corrupt_files"] == 1


# -- gc by path and by specs -----------------------------------------------------------------------


def test_store_gc_keeps_what_the_specs_reference_and_removes_the_rest(tmp_path):
    spec_path = tmp_path / "x.yaml"
    spec_path.write_text(yaml.safe_dump(tiny_spec_document(name="x"), sort_keys=False))
    referenced = referenced_keys(load_spec(spec_path))
    store = Store(tmp_path / "store")
    used = sorted(referenced["transcript"])[0]
    for key in (used, "unused1", "unused2"):
        store.put("transcript", key, {"turns": []})
    store.put("request", "r1", {"x": 1})  # a stage no spec names is left alone
    backdate(store, 7200)  # older than gc's grace for fresh entries

    # One mapping per spec, merged: what either references is kept.
    report = store_gc(store.root, [referenced, {"transcript": {"unused2"}}])
    assert report.stages["transcript"] == StageGc(kept=2, removed=1, bytes=report.bytes)
    assert list(store.keys("transcript")) == sorted([used, "unused2"]) and store.has("request", "r1")
    # No keep: no entry is removed.
    assert store_gc(store.root).removed == 0 and store.has("transcript", "unused2")


def test_store_gc_reads_the_specs_only_once_the_store_is_usable(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    read = []

    def per_spec():
        read.append("spec")
        yield {"transcript": set()}

    with pytest.raises(InputError, match="afile"):
        store_gc(afile / "store", per_spec())
    assert read == []


def test_store_stats_and_gc_refuse_a_path_that_is_no_store(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for call in (lambda: store_stats(afile), lambda: store_gc(afile)):
        with pytest.raises(InputError, match="afile"):
            call()
    assert store_stats(tmp_path / "none").entries == 0  # not made yet: empty
    assert not (tmp_path / "none").exists()


# -- which store -----------------------------------------------------------------------------------


class _Manifest:
    def __init__(self, store: str | None):
        self.store = store


def test_store_of_follows_the_one_rule(tmp_path, monkeypatch):
    monkeypatch.delenv("MULTIVERSE_STORE", raising=False)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "s.yaml").write_text("name: s\n")
    a, b = tmp_path / "a" / "s.yaml", tmp_path / "b" / "s.yaml"
    assert store_of([a]) == tmp_path / "a" / ".multiverse" / "store"
    assert store_of([a, a]) == store_of([a])
    assert store_of([a, b], tmp_path / "mine") == tmp_path / "mine"  # --store wins
    assert store_of([]) == Path(".multiverse") / "store"
    with pytest.raises(InputError, match="different places"):
        store_of([a, b])
    monkeypatch.setenv("MULTIVERSE_STORE", str(tmp_path / "shared"))
    assert store_of([a, b]) == tmp_path / "shared"


def test_a_run_folders_store_is_read_only_through_the_reader_the_caller_passes(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    recorded = str(tmp_path / "elsewhere")
    asked = []

    def manifest_of(folder: Path) -> _Manifest:
        asked.append(folder)
        return _Manifest(recorded)

    assert store_of([run], manifest_of=manifest_of) == Path(recorded) and asked == [run]
    # Without a reader a folder is no place of a store: its manifest is never read.
    with pytest.raises(InputError, match=r"expected a spec file$"):
        store_of([run])
    with pytest.raises(InputError, match=r"manifest\.json: store: expected"):
        store_of([run], manifest_of=lambda folder: _Manifest(""))
    with pytest.raises(InputError, match="expected a spec file or a run directory"):
        store_of([run], manifest_of=lambda folder: None)


def test_open_store_takes_only_what_the_caller_names(tmp_path):
    store = Store(tmp_path / "s")
    assert open_store(store) is store
    with pytest.raises(InputError, match="expected the store directory") as refused:
        open_store(tmp_path / "s")  # not made: nothing is created for a reader
    assert refused.value.param == "store" and not (tmp_path / "s").exists()
    (tmp_path / "s").mkdir()
    opened = open_store(tmp_path / "s")
    assert opened.root == tmp_path / "s" and opened.get("transcript", "k1") is None
