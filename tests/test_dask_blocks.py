"""Dask workers claim blocks of units from the shared store: they split a stage, and nothing is paid twice.

SQLite and PostgreSQL stores alike (the PostgreSQL cases skip where no server
is installed; CI installs one). Not timed: ``tests/bench/bench_dask_scaling.py``
measures the wall time one and two workers take.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from audit_server import audit_responder, fake_spec_document
from fakeserver import FakeServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multiverse.engine._backend_dask import MAX_BLOCK, ROUNDS, Dask
from multiverse.engine._executor import Executor
from multiverse.spec import load_spec
from multiverse.store import Store
from multiverse.work import build_work

sys.path.insert(0, str(Path(__file__).parent))

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def postgres():
    from pg_server import PostgresServer, binaries

    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    found = binaries()
    if found is None:
        pytest.skip("PostgreSQL is not installed (no initdb and pg_ctl); CI installs Debian's postgresql package")
    with PostgresServer(found) as started:
        yield started


def _new_database(postgres) -> str:
    import psycopg

    name = "t" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return str(postgres.url.replace("postgresql:///postgres?", f"postgresql:///{name}?"))


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request, tmp_path) -> str:
    """A new, empty store: a directory, or a database on the PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "store")
    return _new_database(request.getfixturevalue("postgres"))


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as c:
        with distributed.Client(c) as client:
            yield client


def _claim_rows(store: Store) -> list[tuple]:
    return store.db.query("SELECT stage, key, host, pid FROM claim ORDER BY key")


# -- claiming a block -----------------------------------------------------------------------------


def test_a_block_claims_what_is_neither_stored_nor_held_and_takes_over_stale_claims(where):
    store = Store(where).open()
    store.put("case", "k1", {"status": "ok"})
    now = time.time()
    with store.db.transaction() as tx:
        for key, host, pid, since in [("k2", HOST, os.getppid(), now),  # another live process here
                                      ("k3", "elsewhere", 1, now - 10_000),  # another host's, older than its lease
                                      ("k4", HOST, 2**22 + 12345, now),  # a process of this host that is gone
                                      ("k6", "elsewhere", 1, now)]:  # another host's, fresh
            tx.execute("INSERT INTO claim (stage, key, host, pid, since) VALUES (?, ?, ?, ?, ?)",
                       ("case", key, host, pid, since))
    block = store.claim_block("case", ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k0"])
    assert block.taken == ["k0", "k3", "k4", "k5"]
    assert block.stored == ["k1"] and block.elsewhere == ["k2", "k6"]
    # Another block of this very process (a second run on the same Dask workers) waits for these.
    again = Store(where).claim_block("case", ["k0", "k5", "k7"])
    assert again.taken == ["k7"] and again.elsewhere == ["k0", "k5"]
    # Storing ends the claim in the same transaction; a release ends one given up.
    store.put("case", "k0", {"status": "ok"})
    store.release("case", "k3")
    mine = [row[1] for row in _claim_rows(store) if row[3] == os.getpid()]
    assert mine == ["k4", "k5", "k7"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["stored", "live", "stale", "free"]), min_size=1, max_size=12))
def test_a_block_is_split_exactly_into_taken_stored_and_held_elsewhere(tmp_path_factory, kinds):
    store = Store(tmp_path_factory.mktemp("blocks") / "store").open()
    keys = [f"u{i:03d}" for i in range(len(kinds))]
    with store.db.transaction() as tx:
        for key, kind in zip(keys, kinds):
            if kind in ("live", "stale"):
                tx.execute("INSERT INTO claim (stage, key, host, pid, since) VALUES (?, ?, ?, ?, ?)",
                           ("judgment", key, "elsewhere", 1, time.time() - (10_000 if kind == "stale" else 0)))
    for key, kind in zip(keys, kinds):
        if kind == "stored":
            store.put("judgment", key, {"status": "ok"})
    block = store.claim_block("judgment", list(reversed(keys)))
    expected = {kind: [k for k, c in zip(reversed(keys), reversed(kinds)) if c == kind] for kind in set(kinds)}
    assert block.stored == expected.get("stored", [])
    assert block.elsewhere == expected.get("live", [])
    assert block.taken == [k for k, c in zip(reversed(keys), reversed(kinds)) if c in ("stale", "free")]
    held = {row[1] for row in _claim_rows(store) if row[2] == HOST and row[3] == os.getpid()}
    assert held == set(block.taken)


def test_blocks_give_every_thread_several_and_hold_at_most_max_block():
    backend = Dask(None, jobs=4)  # not entered: no cluster to ask, so its own jobs are the threads
    assert backend.block_size(10) == 1
    assert backend.block_size(ROUNDS * 4 * 5) == 5
    assert backend.block_size(10**6) == MAX_BLOCK


# -- two workers ------------------------------------------------------------------------------------


def _case_units(tmp_path: Path, url: str, cases: int) -> list:
    path = tmp_path / "blocks.yaml"
    path.write_text(yaml.safe_dump(fake_spec_document(url, name="blocks", cases_per_cell=cases), sort_keys=False))
    work = build_work(load_spec(path))
    return [unit for unit in work.cases.values() if unit.given is None]


def _paid_once(fake: FakeServer) -> int:
    """How many requests the server answered, once it is checked that no body came twice."""
    bodies = [json.dumps(body, sort_keys=True) for body in fake.requests]
    assert len(bodies) == len(set(bodies)), "a request was paid twice"
    return len(bodies)


@pytest.mark.slow
def test_two_workers_split_a_stage_and_pay_nothing_twice(where, tmp_path, cluster):
    with FakeServer(responder=audit_responder, latency=0.2) as fake:
        units = _case_units(tmp_path, fake.url, cases=16)
        store = Store(where).open()
        backend = Dask(cluster, jobs=4)
        executor = Executor(store, backend, progress=False)
        with backend:
            executor.run("case", units)
        paid = _paid_once(fake)
    keys = {unit.key for unit in units}
    assert paid == len(units) == 64
    assert executor.computed["case"] == keys and not executor.failures["case"]
    # 32 blocks of 2 and each worker holds at most 3 at once: both must have taken some.
    assert len(backend.by_worker) == 2 and min(backend.by_worker.values()) > 0
    assert sum(backend.by_worker.values()) == len(units)
    assert set(store.get_many("case", keys)) == keys
    assert _claim_rows(store) == []  # every claim ended with its entry


@pytest.mark.slow
def test_two_runs_on_the_same_workers_and_store_compute_each_unit_once(where, tmp_path, cluster):
    with FakeServer(responder=audit_responder, latency=0.2) as fake:
        units = _case_units(tmp_path, fake.url, cases=8)
        executors = [Executor(Store(where).open(), Dask(cluster, jobs=4), progress=False) for _ in range(2)]
        errors: list[BaseException] = []

        def one(executor: Executor) -> None:
            try:
                with executor.backend:  # type: ignore[attr-defined]
                    executor.run("case", units)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(executor,)) for executor in executors]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert not errors
        paid = _paid_once(fake)
    first, second = (executor.computed["case"] for executor in executors)
    assert paid == len(units) == len(first) + len(second)
    assert not first & second and first | second == {unit.key for unit in units}
    assert not any(executor.failures["case"] for executor in executors)
    assert _claim_rows(Store(where)) == []
