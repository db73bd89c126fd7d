"""The store: round trip, write-once, many writers, corruption, secrets, gc."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from multiverse.store import CorruptEntryWarning, StageGc, Store, default_store_path

sys.path.insert(0, str(Path(__file__).parent))
from store_rows import backdate, body, connect, legacy_entry, raw_json, record_json, rows, set_body, store_files

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

    # One database file (and its write-ahead log) holds the store: no file per entry.
    assert {p.name for p in store_files(store.root)} <= {"store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm"}
    with connect(store) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    on_disk = record_json(store, "transcript", "ab12")  # compact JSON: readable with any SQLite
    assert body(store, "transcript", "ab12")[:1] == b"{"  # small: not compressed
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
    assert len(rows(store)) == 1


def test_one_row_per_entry_compressed_only_when_large(store: Store):
    answer = "A long answer the model gave. " * 200
    store.put("request", "r1", {"answer": {"text": answer}})
    store.put("request", "r2", {"answer": {"text": "short"}})
    assert store.get("request", "r1")["answer"]["text"] == answer
    assert rows(store, "text") == [] and rows(store, "entry_text") == []  # nothing beside the entry's row
    large, small = body(store, "request", "r1"), body(store, "request", "r2")
    assert len(large) < len(answer) / 5 and zlib.decompress(large).startswith(b"{")  # compressed
    assert small.startswith(b"{") and json.loads(small)["answer"]["text"] == "short"  # plain JSON
    sizes = {key: size for _stage, key, _body, size, _at in rows(store)}
    assert sizes == {"r1": len(zlib.decompress(large)), "r2": len(small)}  # the size is the JSON's either way


def test_rows_of_the_earlier_layout_read_and_their_texts_go_with_the_last_record(store: Store):
    # Before one row per entry: zlib bodies, long texts kept once in the text table, referred to by digest.
    answer = "A long answer the model gave. " * 100
    digest = "ab" * 16
    store.put("case", "seed", {"n": 0})  # makes the tables
    with connect(store) as conn:
        conn.execute("INSERT INTO text (digest, body) VALUES (?, ?)", (digest, zlib.compress(answer.encode())))
        for stage, key, record in (("request", "r1", {"answer": {"text": "\x00" + digest}}),
                                   ("transcript", "t1", {"turns": [{"role": "assistant", "content": "\x00" + digest}]})):
            raw = json.dumps(record, separators=(",", ":")).encode()
            conn.execute("INSERT INTO entry (stage, key, body, size, stored_at) VALUES (?, ?, ?, ?, 0)",
                         (stage, key, zlib.compress(raw), len(raw)))
            conn.execute("INSERT INTO entry_text (stage, key, digest) VALUES (?, ?, ?)", (stage, key, digest))
    assert store.get("transcript", "t1")["turns"][0]["content"] == answer
    assert store.get("request", "r1")["answer"]["text"] == answer
    # A text stays while any record holds it, and goes with the last.
    store.gc({"request": set(), "case": {"seed"}}, fresh=0)
    assert len(rows(store, "text")) == 1 and store.get("transcript", "t1")["turns"][0]["content"] == answer
    store.gc({"transcript": set(), "case": {"seed"}}, fresh=0)
    assert rows(store, "text") == [] and rows(store, "entry_text") == []


def test_a_string_that_looks_like_a_text_reference_round_trips(store: Store):
    sneaky = "\x00" + "0" * 32  # NUL never reaches the store: it becomes U+FFFD
    store.put("case", "c1", {"s": sneaky})
    assert store.get("case", "c1")["s"] == "\ufffd" + "0" * 32


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
    legacy_entry(store.root, "case", "0b05", {})  # an entry file of a store from before the database
    shard = store.root / "case" / "0a"
    shard.mkdir(parents=True)
    (shard / ".0a03.123.deadbeef.tmp").write_text('{"half":')  # a crashed writer
    (shard / "0a04.json.corrupt").write_text("garbage")
    assert list(store.keys("case")) == ["0a01", "0a02", "0b05", "ff01"]
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
    assert len(rows(store)) == len(keys)
    for key, record in store.get_many("transcript", keys).items():  # complete, valid records
        assert record["key"] == key and len(record["pad"]) == 2000
    assert len(store.get_many("transcript", keys)) == len(keys)
    assert rows(store, "claim") == []
    with connect(store) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


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


def test_a_store_busy_past_its_timeout_is_one_store_error_and_writes_nothing(store: Store):
    from multiverse.errors import StoreError

    store.put("case", "aa00", {"n": 0})
    busy = Store(store.root)
    real_connect = busy.db._connect

    def impatient():
        conn = real_connect()
        conn.execute("PRAGMA busy_timeout = 200")
        return conn

    busy.db._connect = impatient
    with connect(store) as conn:  # another process holds the write lock past the busy timeout
        conn.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match=r"database failed .*locked") as raised:
            busy.put("case", "aa01", {"n": 1})
        conn.execute("ROLLBACK")
    assert "\n" not in str(raised.value)
    assert store.get("case", "aa01") is None and store.get("case", "aa00")["n"] == 0
    assert busy.put("case", "aa01", {"n": 1}) is True  # free again: the same object works on


def test_a_database_that_is_not_a_file_or_not_a_database_is_refused_in_one_line(tmp_path):
    from multiverse.errors import StoreError

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "store.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"store .*a.*database") as raised:
        Store(tmp_path / "a").get("case", "c1")
    assert "\n" not in str(raised.value)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "store.sqlite3").symlink_to(tmp_path / "a" / "store.sqlite3")
    with pytest.raises(StoreError, match="not a regular file"):
        Store(tmp_path / "b").put("case", "c1", {})
    assert (tmp_path / "a" / "store.sqlite3").read_bytes().startswith(b"this is not")  # never written through a link


# -- corruption ----------------------------------------------------------------


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],  # truncated by a disk fault
    lambda text: "",                       # zero-length file
    lambda text: "[1, 2, 3]",              # valid JSON, but not a record
    lambda text: "\xff\xfe not utf-8",     # binary junk
])
def test_corrupt_entry_file_is_absent_and_quarantined(store: Store, damage):
    path = legacy_entry(store.open().root, "judgment", "beef", {"label": "ok", "rationale": "long enough " * 10})
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


@pytest.mark.parametrize("damage", [
    lambda raw: raw[: len(raw) // 2],                      # truncated
    lambda raw: b"",                                       # empty
    lambda raw: zlib.compress(b"[1, 2, 3]"),               # valid JSON, but not a record
    lambda raw: zlib.compress(b"\xff\xfe not utf-8"),      # binary junk
    lambda raw: zlib.compress(b"[" * 100_000 + b"]" * 100_000),  # nested past the stack
    lambda raw: zlib.compress(b" " * (65 * 2**20)),         # a bomb: tiny stored, huge read
    lambda raw: zlib.compress(b'{"label": "\\u0000' + b"f" * 32 + b'"}'),  # a text that is not there
    lambda raw: b'{"label": "\\u0000' + b"f" * 32 + b'"}',  # the same in a plain body
])
def test_corrupt_row_is_absent_and_quarantined(store: Store, damage):
    store.put("judgment", "beef", {"label": "ok", "rationale": "long enough " * 10})
    set_body(store, "judgment", "beef", damage(body(store, "judgment", "beef")))

    with pytest.warns(CorruptEntryWarning, match="beef"):
        assert store.get("judgment", "beef") is None
    assert rows(store) == [] and len(rows(store, "quarantine")) == 1
    assert store.quarantined == 1 and store.stats().corrupt_files == 1
    assert list(store.keys("judgment")) == []
    assert store.put("judgment", "beef", {"label": "redone"}) is True
    assert store.get("judgment", "beef")["label"] == "redone"
    assert store.gc(None).corrupt_files == 1 and rows(store, "quarantine") == []


def test_get_many_skips_corrupt_entries(store: Store):
    store.put("case", "c1", {"n": 1})
    store.put("case", "c2", {"n": 2})
    legacy_entry(store.root, "case", "c3", {"n": 3})
    set_body(store, "case", "c2", zlib.compress(b'{"n": 2'))
    (store.root / "case" / "c3" / "c3.json").write_text('{"n": 3')
    with pytest.warns(CorruptEntryWarning):
        assert store.get_many("case", ["c1", "c2", "c3"]) == {"c1": store.get("case", "c1")}
    assert store.quarantined == 2


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

    raw = b"".join(raw_json(r[2]) for r in rows(store)).decode()
    raw += b"".join(zlib.decompress(r[1]) for r in rows(store, "text")).decode()
    raw += b"".join(open(p, "rb").read() for p in store_files(store.root)).decode("latin-1")
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
    (store.root / "judgment" / "j0").mkdir(parents=True)
    (store.root / "judgment" / "j0" / ".j9.1.ab.tmp").write_text("{")
    legacy = legacy_entry(store.root, "judgment", "j7", {"label": 7})

    stats = store.stats()
    assert stats.stages["transcript"].entries == 5
    assert stats.stages["judgment"].entries == 4
    assert stats.entries == 9
    # bytes: each record's JSON, as stored or as the old file holds it
    sizes = sum(len(raw_json(b)) for (b,) in connect(store).execute("SELECT body FROM entry"))
    assert stats.bytes == sizes + legacy.stat().st_size > 0
    assert stats.temp_files == 1


def test_gc_removes_unreferenced_entries_and_stale_temp_files(store: Store):
    for i in range(6):
        store.put("transcript", f"t{i}", transcript(i))
        store.put("judgment", f"j{i}", {"label": i})
    shard = store.root / "transcript" / "t0"
    shard.mkdir(parents=True)
    stale, fresh = shard / ".t7.1.aa.tmp", shard / ".t8.1.bb.tmp"
    stale.write_text("{")
    fresh.write_text("{")  # may belong to a writer still running
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    (store.root / "quarantine" / "transcript").mkdir(parents=True)
    (store.root / "quarantine" / "transcript" / "t9.json.1.ab").write_text("x")
    keep = {"transcript": {"t0", "t2"}}
    past = time.time() - 2 * 3600  # older than gc's grace for fresh entries
    backdate(store, time.time() - past)

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
    assert len(rows(store, "claim")) == 1
    store.gc(keep=None)
    assert len(rows(store, "claim")) == 1  # younger than gc's grace for temp files and claims
    with connect(store) as conn:
        conn.execute("UPDATE claim SET since = ?", (_time.time() - 7200,))
    assert store.gc(keep=None, dry_run=True).temp_files == 1 and len(rows(store, "claim")) == 1
    store.gc(keep=None)
    assert rows(store, "claim") == []


# -- stores from before the database -------------------------------------------------------------


def test_an_old_store_of_entry_files_is_read_as_it_is_and_migrated_in_one_step(tmp_path):
    import multiverse as mv
    from multiverse.store import SHAPES

    root = tmp_path / "old"
    good = {"status": "ok", "reason": "", "turns": [{"role": "user", "content": "a long turn " * 40}]}
    paths = [legacy_entry(root, "transcript", f"{i:02x}aa", {**good, "n": i}) for i in range(12)]
    bad = legacy_entry(root, "transcript", "ffbb", {"status": "ok", "turns": "not a list"})
    (root / "leases").mkdir()
    past = time.time() - 3 * 3600
    for path in paths:
        os.utime(path, (past, past))
    keys = [f"{i:02x}aa" for i in range(12)]
    store = Store(root, shapes=SHAPES)
    assert len(store.get_many("transcript", keys)) == 12  # read transparently, nothing moved
    assert not (root / "store.sqlite3").exists() and all(p.exists() for p in paths)

    with pytest.warns(CorruptEntryWarning, match="ffbb"):
        moved = mv.store_migrate(store=root)
    assert (moved.moved, moved.already, moved.quarantined) == (12, 0, 1)
    assert not (root / "transcript").exists() and not (root / "leases").exists() and not bad.exists()
    assert {p.name for p in store_files(root) if p.parent == root} <= {"store.sqlite3", "store.sqlite3-wal",
                                                                        "store.sqlite3-shm"}
    got = Store(root, shapes=SHAPES).get_many("transcript", keys)
    assert [got[k]["n"] for k in keys] == list(range(12)) and got[keys[0]]["turns"] == good["turns"]
    # The files' age is kept: gc's grace for fresh entries still counts from when they were made.
    assert Store(root).gc({"transcript": set(keys[6:])}).removed == 6
    assert mv.store_migrate(store=root).moved == 0  # again: nothing left to move


def test_store_migrate_on_the_command_line_says_what_it_moved(tmp_path):
    from cli_runner import run_cli

    legacy_entry(tmp_path / "old", "case", "c1aa", {"status": "ok", "case": {}})
    done = run_cli(["store", "migrate", "--store", tmp_path / "old", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) | {"root": ""} == {"root": "", "moved": 1, "already": 0, "quarantined": 0}
    assert Store(tmp_path / "old").get("case", "c1aa")["status"] == "ok"


def test_writes_from_many_threads_each_learn_their_own_outcome(store: Store):
    # Group commits: whichever thread commits a group, each writer is told whether its own row went in.
    import threading

    store.open()
    writers, keys = 12, 15
    start = threading.Barrier(writers)
    told: dict[int, list[bool]] = {}

    def write(i: int) -> None:
        start.wait()
        told[i] = [store.put("judgment", f"k{j}", {"by": i}) for j in range(keys)]

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for j in range(keys):
        won = [i for i in range(writers) if told[i][j]]
        assert len(won) == 1  # the first writer wins, and only it is told so
        assert store.get("judgment", f"k{j}")["by"] == won[0]
    assert len(rows(store)) == keys


def test_a_failed_group_commit_fails_its_writer_and_stores_nothing(store: Store):
    from multiverse.errors import StoreError

    store.put("judgment", "before", {"n": 0})
    # The database itself fails the group's transaction (a trigger stands in for a disk error).
    store.db.execute("CREATE TRIGGER fail BEFORE INSERT ON entry WHEN NEW.key = 'lost' "
                     "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")
    with pytest.raises(StoreError, match="disk I/O"):
        store.put("judgment", "lost", {"n": 1})
    store.db.execute("DROP TRIGGER fail")
    assert store.get("judgment", "lost") is None and store.put("judgment", "lost", {"n": 1}) is True
