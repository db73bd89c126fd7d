"""The store: round trip, write-once, many writers, corruption, secrets, gc."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import random
import threading
import time
from pathlib import Path

import pytest

from multiverse.store import CorruptEntryWarning, StageGc, Store, default_store_path

FAKE_KEY = "sk-fake-0123456789abcdef"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def transcript(n: int = 0, **extra) -> dict:
    return {
        "messages": [{"role": "user", "content": f"case {n}"},
                     {"role": "assistant", "content": "ok"}],
        "provenance": {"model_requested": "sim/alpha", "usage": {"prompt_tokens": 3}},
        **extra,
    }


def files(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.rglob(pattern) if p.is_file())


def test_round_trip_and_layout(store: Store):
    assert not store.root.exists()  # created lazily
    assert store.get("transcript", "ab12") is None
    assert store.put("transcript", "ab12", transcript(1)) is True

    path = store.root / "transcript" / "ab" / "ab12.json"
    on_disk = json.loads(path.read_text(encoding="utf-8"))  # plain, readable JSON
    got = store.get("transcript", "ab12")
    assert got == on_disk
    assert got["messages"][0]["content"] == "case 1"
    assert got["stored_at"].endswith("+00:00")
    assert store.has("transcript", "ab12") and not store.has("transcript", "ab13")
    assert not store.has("judgment", "ab12")


def test_put_does_not_touch_callers_record_and_keeps_given_stored_at(store: Store):
    record = transcript(stored_at="2020-01-01T00:00:00+00:00")
    store.put("case", "c0", record)
    assert store.get("case", "c0")["stored_at"] == "2020-01-01T00:00:00+00:00"
    plain = transcript()
    store.put("case", "c1", plain)
    assert "stored_at" not in plain


def test_write_once_first_writer_wins(store: Store):
    assert store.put("judgment", "k1", {"label": "first"}) is True
    assert store.put("judgment", "k1", {"label": "second"}) is False
    assert store.get("judgment", "k1")["label"] == "first"
    assert files(store.root, ".*.tmp") == []


def test_get_many_returns_only_stored_keys(store: Store):
    for i in range(50):
        store.put("transcript", f"{i:04x}", transcript(i))
    wanted = [f"{i:04x}" for i in range(0, 100, 2)]
    got = store.get_many("transcript", wanted)
    assert sorted(got) == [f"{i:04x}" for i in range(0, 50, 2)]
    assert got["0010"]["messages"][0]["content"] == "case 16"
    assert store.get_many("transcript", []) == {}
    assert store.get_many("nothing_here", ["00ff"]) == {}


def test_keys_lists_entries_only(store: Store):
    for key in ["ff01", "0a02", "0a01"]:
        store.put("case", key, {})
    shard = store.root / "case" / "0a"
    (shard / ".0a03.123.deadbeef.tmp").write_text('{"half":')  # a crashed writer
    (shard / "0a04.json.corrupt").write_text("garbage")
    assert list(store.keys("case")) == ["0a01", "0a02", "ff01"]
    assert list(store.keys("judgment")) == []
    assert store.get("case", "0a03") is None


# -- many writers ------------------------------------------------------------


def _write_overlapping(args: tuple[str, int, list[str]]) -> list[tuple[str, bool]]:
    root, writer, keys = args
    store = Store(root)
    return [(key, store.put("transcript", key, {"writer": writer, "key": key, "pad": "x" * 2000}))
            for key in keys]


def _assert_one_winner_per_key(store: Store, results: list[tuple[str, bool]], keys: list[str]):
    winners = {}
    for key, won in results:
        if won:
            assert key not in winners, f"{key} written twice"
            winners[key] = True
    assert sorted(winners) == sorted(keys)
    entries = files(store.root, "*.json")
    assert len(entries) == len(keys)
    for path in entries:
        record = json.loads(path.read_text(encoding="utf-8"))  # complete, valid JSON
        assert record["key"] == path.stem and len(record["pad"]) == 2000
    assert files(store.root, ".*.tmp") == []


def test_concurrent_processes_write_each_key_once(store: Store):
    keys = [f"{i:06x}" for i in range(300)]
    jobs = []
    for writer in range(4):
        order = keys[:]
        random.Random(writer).shuffle(order)  # overlapping keys, different orders
        jobs.append((str(store.root), writer, order))
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        per_writer = pool.map(_write_overlapping, jobs)

    results = [r for rs in per_writer for r in rs]
    assert len(results) == 4 * len(keys)
    _assert_one_winner_per_key(store, results, keys)
    won_by = {key: writer for writer, rs in enumerate(per_writer) for key, won in rs if won}
    for key in keys:  # the record kept is the winner's
        assert store.get("transcript", key)["writer"] == won_by[key]


def test_concurrent_threads_write_each_key_once(store: Store):
    keys = [f"{i:06x}" for i in range(200)]
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work(writer: int):
        order = keys[:]
        random.Random(writer).shuffle(order)
        start.wait()
        out = _write_overlapping((str(store.root), writer, order))
        with lock:
            results.extend(out)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _assert_one_winner_per_key(store, results, keys)


def test_falls_back_to_rename_where_hard_links_are_unsupported(store: Store, monkeypatch):
    def no_link(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    assert store.put("case", "aa01", {"n": 1}) is True
    assert store.put("case", "aa01", {"n": 2}) is False
    assert store.get("case", "aa01")["n"] == 1
    assert files(store.root, ".*.tmp") == []


def test_link_errors_that_are_not_about_support_are_raised(store: Store, monkeypatch):
    def disk_full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", disk_full)
    with pytest.raises(OSError):
        store.put("case", "aa01", {"n": 1})
    assert store.get("case", "aa01") is None
    assert files(store.root, ".*.tmp") == []


# -- corruption ----------------------------------------------------------------


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],  # truncated by a disk fault
    lambda text: "",                       # zero-length file
    lambda text: "[1, 2, 3]",              # valid JSON, but not a record
    lambda text: "\xff\xfe not utf-8",     # binary junk
])
def test_corrupt_entry_is_absent_and_quarantined(store: Store, damage):
    store.put("judgment", "beef", {"label": "ok", "rationale": "long enough " * 10})
    path = store.root / "judgment" / "be" / "beef.json"
    path.write_bytes(damage(path.read_text()).encode("latin-1"))

    with pytest.warns(CorruptEntryWarning, match="beef"):
        assert store.get("judgment", "beef") is None
    assert not path.exists()
    assert len(list((store.root / "quarantine" / "judgment").glob("beef.json.*"))) == 1
    assert store.quarantined == 1 and store.stats().corrupt_files == 1
    assert list(store.keys("judgment")) == []
    # the work is redone and stored again
    assert store.put("judgment", "beef", {"label": "redone"}) is True
    assert store.get("judgment", "beef")["label"] == "redone"


def test_get_many_skips_corrupt_entries(store: Store):
    store.put("case", "c1", {"n": 1})
    store.put("case", "c2", {"n": 2})
    (store.root / "case" / "c2" / "c2.json").write_text('{"n": 2')
    with pytest.warns(CorruptEntryWarning):
        assert store.get_many("case", ["c1", "c2"]) == {"c1": store.get("case", "c1")}


# -- credentials -------------------------------------------------------------------


def test_secrets_are_scrubbed_before_writing(store: Store, monkeypatch):
    monkeypatch.setenv("FAKE_PROVIDER_API_KEY", FAKE_KEY)
    monkeypatch.setenv("DB_PASSWORD", "hunter2-hunter2")
    monkeypatch.setenv("SHORT_TOKEN", "abc")        # too short to be a secret
    monkeypatch.setenv("MODEL_NAME", "sim/alpha-1")  # not a secret-looking name
    record = {
        "echo": FAKE_KEY,
        "error": f"401: invalid key {FAKE_KEY} for provider",
        "nested": [{"deep": ["fine", f"Bearer {FAKE_KEY}"]}, ("hunter2-hunter2",)],
        "api_key": "anything",
        "headers": {"Authorization": "Bearer whatever", "Accept": "application/json"},
        "provenance": {"model_requested": "sim/alpha-1", "params": {"x-api-key": "abc123456789"},
                       "api_key_env": "FAKE_PROVIDER_API_KEY"},
        "note": "abc",
    }
    store.put("transcript", "5ec2e7", record)

    raw = (store.root / "transcript" / "5e" / "5ec2e7.json").read_text(encoding="utf-8")
    assert FAKE_KEY not in raw and "hunter2" not in raw and "whatever" not in raw
    got = store.get("transcript", "5ec2e7")
    assert got["echo"] == "[redacted]"
    # Only the value is replaced: the rest of a message or a transcript turn stays readable.
    assert got["error"] == "401: invalid key [redacted] for provider"
    assert got["nested"] == [{"deep": ["fine", "Bearer [redacted]"]}, ["[redacted]"]]
    assert "api_key" not in got
    assert got["headers"] == {"Accept": "application/json"}
    assert got["provenance"] == {"model_requested": "sim/alpha-1", "params": {},
                                 "api_key_env": "FAKE_PROVIDER_API_KEY"}
    assert got["note"] == "abc"
    assert record["echo"] == FAKE_KEY  # the caller's record is untouched


# -- names that could escape the root ----------------------------------------------


@pytest.mark.parametrize("stage, key", [
    ("transcript", "../../etc/passwd"),
    ("transcript", "ab/cd"),
    ("transcript", ".."),
    ("transcript", ""),
    ("transcript", "ab.json"),
    ("transcript", "/abs"),
    ("../outside", "ab12"),
    ("", "ab12"),
    ("a\\b", "ab12"),
])
def test_path_traversal_is_rejected(store: Store, stage, key):
    with pytest.raises(ValueError):
        store.put(stage, key, {})
    with pytest.raises(ValueError):
        store.get(stage, key)
    with pytest.raises(ValueError):
        store.has(stage, key)
    with pytest.raises(ValueError):
        store.get_many(stage, [key])
    if key == "ab12":
        with pytest.raises(ValueError):
            store.keys(stage)
        with pytest.raises(ValueError):
            store.gc({stage: set()})
    assert not store.root.exists()


def test_non_json_record_fails_before_writing(store: Store):
    with pytest.raises(TypeError):
        store.put("case", "c1", {"when": object()})
    assert store.get("case", "c1") is None
    assert not store.root.exists()


# -- maintenance ---------------------------------------------------------------------


def test_stats_counts_entries_and_bytes(store: Store):
    assert store.stats().entries == 0  # no root yet
    for i in range(5):
        store.put("transcript", f"t{i}", transcript(i))
    for i in range(3):
        store.put("judgment", f"j{i}", {"label": i})
    (store.root / "judgment" / "j0" / ".j9.1.ab.tmp").write_text("{")

    stats = store.stats()
    assert stats.stages["transcript"].entries == 5
    assert stats.stages["judgment"].entries == 3
    assert stats.entries == 8
    sizes = sum(p.stat().st_size for p in files(store.root, "*.json"))
    assert stats.bytes == sizes > 0
    assert stats.temp_files == 1


def test_gc_removes_unreferenced_entries_and_stale_temp_files(store: Store):
    for i in range(6):
        store.put("transcript", f"t{i}", transcript(i))
        store.put("judgment", f"j{i}", {"label": i})
    shard = store.root / "transcript" / "t0"
    stale, fresh = shard / ".t7.1.aa.tmp", shard / ".t8.1.bb.tmp"
    stale.write_text("{")
    fresh.write_text("{")  # may belong to a writer still running
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    (store.root / "quarantine" / "transcript").mkdir(parents=True)
    (store.root / "quarantine" / "transcript" / "t9.json.1.ab").write_text("x")
    keep = {"transcript": {"t0", "t2"}}
    past = time.time() - 2 * 3600  # older than gc's grace for fresh entries
    for path in store.root.glob("*/*/*.json"):
        os.utime(path, (past, past))

    dry = store.gc(keep, dry_run=True)
    assert dry.removed == 4 and dry.temp_files == 1 and dry.corrupt_files == 1
    assert len(list(store.keys("transcript"))) == 6 and stale.exists()

    report = store.gc(keep)
    assert report.stages["transcript"] == StageGc(kept=2, removed=4, bytes=dry.bytes)
    assert report.bytes > 0
    assert list(store.keys("transcript")) == ["t0", "t2"]
    assert len(list(store.keys("judgment"))) == 6  # stages keep does not name are left alone
    assert not stale.exists() and fresh.exists()
    assert not list((store.root / "quarantine").rglob("t9*"))
    assert store.get("transcript", "t2")["messages"][0]["content"] == "case 2"

    assert store.gc({"judgment": set()}).removed == 6
    assert list(store.keys("judgment")) == []


def test_gc_without_keep_removes_no_entry(store: Store):
    store.put("case", "c1", {})
    report = store.gc()
    assert report.removed == 0 and store.has("case", "c1")


def test_default_store_path(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("MULTIVERSE_STORE", raising=False)
    spec = tmp_path / "specs" / "demo.yaml"
    assert default_store_path(spec) == tmp_path / "specs" / ".multiverse" / "store"
    assert default_store_path(None) == Path(".multiverse") / "store"
    monkeypatch.setenv("MULTIVERSE_STORE", str(tmp_path / "shared"))
    assert default_store_path(spec) == tmp_path / "shared"
    assert default_store_path(None) == tmp_path / "shared"


# -- claims --------------------------------------------------------------------


def test_a_claim_is_exclusive_until_released(tmp_path):
    import subprocess
    import sys

    store = Store(tmp_path)
    assert store.claim("judgment", "abc123")
    assert store.claimed("judgment", "abc123")
    # another live process cannot take it
    code = f"from multiverse.store import Store; print(Store({str(tmp_path)!r}).claim('judgment', 'abc123'))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "False"
    store.release("judgment", "abc123")
    assert not store.claimed("judgment", "abc123")
    assert list(store.keys("judgment")) == []  # a claim is never an entry


def test_a_dead_processs_claim_is_taken_over(tmp_path):
    import subprocess
    import sys

    code = f"from multiverse.store import Store; Store({str(tmp_path)!r}).claim('transcript', 'k1')"
    subprocess.run([sys.executable, "-c", code], check=True)  # claims, then exits without releasing
    store = Store(tmp_path)
    assert not store.claimed("transcript", "k1")
    assert store.claim("transcript", "k1")


def test_an_expired_claim_is_stale_and_gc_removes_old_claims(tmp_path):
    import time as _time

    store = Store(tmp_path)
    assert store.claim("case", "k2")
    assert not store.claimed("case", "k2", lease=-1.0)  # past its lease
    claim = next(tmp_path.rglob("*.claim"))
    old = _time.time() - 7200
    os.utime(claim, (old, old))
    store.gc(keep=None)
    assert not claim.exists()
