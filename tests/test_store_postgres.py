"""The store on a PostgreSQL server: the same promises as the SQLite store, for workers on many machines.

A throwaway server is started for this module (``tests/pg_server.py``: initdb
and pg_ctl on a unix socket); each test gets a database of its own. CI
installs Debian's ``postgresql`` package for it (``.ci/run``).
"""

from __future__ import annotations

import multiprocessing
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pg_server import PostgresServer, binaries

from multiverse.engine._pipeline import run
from multiverse.errors import StoreError
from multiverse.spec import load_spec
from multiverse.store import SHAPES, CorruptEntryWarning, Lease, Store, live_leases

psycopg = pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def server():
    found = binaries()
    if found is None:
        pytest.skip("PostgreSQL is not installed (no initdb and pg_ctl on PATH or in /usr/lib/postgresql/*/bin); "
                    "CI installs Debian's postgresql package")
    with PostgresServer(found) as started:
        yield started


@pytest.fixture
def url(server) -> str:
    """A new, empty database on the server."""
    name = "t" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.url.replace("postgresql:///postgres?", f"postgresql:///{name}?")


def _query(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


TRANSCRIPT = {"status": "ok", "reason": "", "turns": [{"role": "user", "content": "hi"},
                                                      {"role": "assistant", "content": "a long answer " * 60}]}


def test_round_trip_write_once_and_one_row_per_entry(url):
    store = Store(url, shapes=SHAPES)
    assert store.get("transcript", "ab12") is None and not store.has("transcript", "ab12")
    assert store.put("transcript", "ab12", TRANSCRIPT) is True
    assert store.put("transcript", "ab12", {**TRANSCRIPT, "reason": "second"}) is False
    got = store.get("transcript", "ab12")
    assert got["turns"] == TRANSCRIPT["turns"] and got["reason"] == "" and got["stored_at"].endswith("+00:00")
    answer = TRANSCRIPT["turns"][1]["content"]
    store.put("request", "r1", {"status": "ok", "reason": "", "answer": {"text": answer, "model_reported": "m"}})
    assert _query(url, "SELECT COUNT(*) FROM text") == [(0,)]  # each record whole in its own row
    assert bytes(_query(url, "SELECT body FROM entry WHERE key = 'r1'")[0][0])[:1] == b"{"  # small: plain JSON
    assert list(store.keys("transcript")) == ["ab12"] and store.get_many("transcript", ["ab12", "cd34"]).keys() == {"ab12"}
    stats = store.stats()
    assert stats.entries == 2 and stats.stages["transcript"].entries == 1 and "postgresql://" in stats.root


def test_a_corrupt_row_is_quarantined_and_redone(url):
    import zlib

    store = Store(url, shapes=SHAPES)
    store.put("judgment", "beef", {"status": "ok", "reason": "", "criteria": []})
    _query(url, "UPDATE entry SET body = %s WHERE key = 'beef'", (zlib.compress(b'{"status": "ok"}'),))
    with pytest.warns(CorruptEntryWarning, match="beef"):
        assert store.get("judgment", "beef") is None
    assert _query(url, "SELECT COUNT(*) FROM quarantine") == [(1,)] and store.stats().corrupt_files == 1
    assert store.put("judgment", "beef", {"status": "ok", "reason": "", "criteria": []}) is True
    assert store.gc(None).corrupt_files == 1 and _query(url, "SELECT COUNT(*) FROM quarantine") == [(0,)]


def test_claims_are_exclusive_across_processes_and_a_dead_ones_is_taken_over(url):
    store = Store(url)
    assert store.claim("judgment", "abc123") and store.claimed("judgment", "abc123")
    code = f"from multiverse.store import Store; print(Store({url!r}).claim('judgment', 'abc123'))"
    env = {"PYTHONPATH": str(REPO)}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert other.stdout.strip() == "False"
    store.release("judgment", "abc123")
    assert not store.claimed("judgment", "abc123")
    code = f"from multiverse.store import Store; Store({url!r}).claim('transcript', 'k1')"
    subprocess.run([sys.executable, "-c", code], check=True, env=env)  # claims, exits without releasing
    assert not store.claimed("transcript", "k1") and store.claim("transcript", "k1")


def test_gc_keeps_what_a_live_run_wrote(url):
    store = Store(url)
    store.put("transcript", "aa00", TRANSCRIPT)
    _query(url, "UPDATE entry SET stored_at = %s", (time.time() - 3 * 3600,))
    with Lease(url):  # started now: after aa00's backdated time, at most when bb00 is stored
        store.put("transcript", "bb00", TRANSCRIPT)
        assert len(live_leases(url)) == 1
        report = store.gc({"transcript": set()}, fresh=0)
        assert report.live_runs == 1 and report.kept_recent == 1 and report.removed == 1
    assert live_leases(url) == [] and store.gc({"transcript": set()}, fresh=0).removed == 1
    assert _query(url, "SELECT COUNT(*) FROM text") == [(0,)]  # texts go with the last record holding them


def _write_overlapping(args: tuple[str, int, list[str]]) -> list[tuple[str, bool]]:
    url, writer, keys = args
    store = Store(url)
    return [(key, store.put("transcript", key, {"writer": writer, "key": key, "pad": "x" * 2000})) for key in keys]


def test_concurrent_processes_write_each_key_once(url):
    keys = [f"{i:06x}" for i in range(200)]
    jobs = [(url, writer, random.Random(writer).sample(keys, len(keys))) for writer in range(4)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        per_writer = pool.map(_write_overlapping, jobs)
    won = [key for results in per_writer for key, ok in results if ok]
    assert sorted(won) == sorted(keys)  # each key written exactly once
    by = {key: w for w, results in enumerate(per_writer) for key, ok in results if ok}
    got = Store(url).get_many("transcript", keys)
    assert all(got[k]["writer"] == by[k] and len(got[k]["pad"]) == 2000 for k in keys)


def test_an_unreachable_server_is_one_store_error(server):
    bad = server.url.replace(f"port={server.port}", "port=1")
    with pytest.raises(StoreError, match="could not connect") as raised:
        Store(bad).get("case", "c1")
    assert "\n" not in str(raised.value)


def test_a_password_in_the_url_is_never_in_a_message(server):
    bad = server.url.replace("user=multiverse", "user=multiverse&password=hunter2-secret").replace(
        f"port={server.port}", "port=1")
    with pytest.raises(StoreError) as raised:
        Store(bad).get("case", "c1")
    assert "hunter2" not in str(raised.value)


# -- a run with Dask workers sharing the server ---------------------------------------------------


@pytest.mark.slow
def test_a_dask_run_on_a_server_store_matches_a_local_run_and_a_rerun_pays_nothing(url, tmp_path):
    distributed = pytest.importorskip("distributed")
    from audit_server import audit_responder, fake_spec_document
    from fakeserver import FakeServer

    with FakeServer(responder=audit_responder, latency=0.01) as fake, \
            distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        spec_path = tmp_path / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(fake_spec_document(fake.url, name="pg"), sort_keys=False))
        spec = load_spec(spec_path)
        local = run(spec, store=tmp_path / "local-store", out=tmp_path / "local", progress=False)
        paid_local = fake.counts["total"]
        remote = run(spec, store=url, out=tmp_path / "dask", progress=False, backend="dask", scheduler=client)
        paid_remote = fake.counts["total"] - paid_local
        again = run(spec, store=url, out=tmp_path / "again", progress=False, backend="dask", scheduler=client)
        assert fake.counts["total"] == paid_local + paid_remote  # the rerun sent nothing
    assert paid_remote == paid_local > 0
    keys = ["universe_id", "system", "case_id", "replicate"]
    for result in (remote, again):
        pd.testing.assert_frame_equal(local.verdicts.sort_values(keys).reset_index(drop=True),
                                      result.verdicts.sort_values(keys).reset_index(drop=True))
    assert all(s.computed == 0 for s in again.manifest.stages.values())
    assert _query(url, "SELECT COUNT(*) FROM claim") == [(0,)] and _query(url, "SELECT COUNT(*) FROM lease") == [(0,)]
    assert remote.manifest.store.startswith("postgresql://")


def test_what_a_manifest_or_message_names_is_the_url_without_its_password():
    from multiverse.store._db import ServerDatabase

    assert ServerDatabase("postgresql:///mv?host=/run/pg&port=5432&user=a").label == \
        "postgresql:///mv?host=/run/pg&port=5432&user=a"
    label = ServerDatabase("postgresql://a:s3cret-pw@db.example:5432/mv?sslpassword=k3y&sslmode=require").label
    assert "s3cret" not in label and "k3y" not in label
    assert label.startswith("postgresql://a:[redacted]@db.example:5432/mv?") and "sslmode=require" in label
