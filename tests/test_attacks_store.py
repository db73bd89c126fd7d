"""The store defends itself: whatever sits in place of an entry, a run neither
crashes nor hangs nor trusts it; gc never deletes a live run's work; a store
that is unusable or vanishes is one clear line, never false failure rows.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pandas as pd
import pytest
import yaml
from cli_runner import run_cli, start_cli
from conftest import CountingClient, tiny_spec_document

from multiverse.engine._pipeline import run
from multiverse.errors import InputError, StoreError
from multiverse.spec import load_spec
from multiverse.store import MAX_ENTRY_BYTES, SHAPES, CorruptEntryWarning, Lease, Store, check_store_path, live_leases

sys.path.insert(0, str(Path(__file__).parent))
from audit_server import audit_responder, fake_spec_document
from fakeserver import FakeServer
from store_rows import backdate, body, connect, rows, set_body

REPO = Path(__file__).resolve().parents[1]
GOOD_TRANSCRIPT = {"status": "ok", "reason": "", "turns": [{"role": "user", "content": "hi"},
                                                           {"role": "assistant", "content": "hello"}]}

# Valid JSON of the wrong shape, per stage: each crashed or misled a rerun before.
WRONG_SHAPES = {
    "transcript": [{}, [], "text", 3, None, {"status": "ok"}, {"status": "ok", "turns": "not a list"},
                   {"status": 1, "turns": []}, {"status": "ok", "turns": [1, 2]},
                   {"status": "ok", "turns": [], "provenance": {"calls": "many"}},
                   {"status": "ok", "turns": [], "provenance": {"usage": {"prompt_tokens": "x"}}},
                   {"status": "ok", "turns": [], "provenance": {"model_reported": "not-a-list"}},
                   {"status": "ok", "turns": [], "reason": ["x"]}],
    "judgment": [{}, {"status": "ok"}, {"status": "ok", "criteria": {}},
                 {"status": "ok", "criteria": [{"criterion": "c1"}]},
                 {"status": "ok", "criteria": [{"criterion": "c1", "permissible": "no", "applicable": True}]},
                 {"status": "ok", "criteria": [{"criterion": "c1", "permissible": False, "applicable": True,
                                                "compliant": "yes", "rationale": ""}]}],
    "case": [{}, {"status": "ok", "case": "a prompt"}, {"status": "ok", "case": {}, "cell": []}],
}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", shapes=SHAPES).open()


def entry(store: Store, stage: str, key: str) -> Path:
    return store.root / stage / key[:2] / f"{key}.json"


def quarantined(store: Store, stage: str) -> list[Path]:
    return sorted((store.root / "quarantine" / stage).glob("*"))


def read_fast(store: Store, stage: str, key: str) -> dict | None:
    """``store.get`` in a thread, failing the test if it blocks (FIFO, /dev/zero)."""
    result: list = []
    thread = threading.Thread(target=lambda: result.append(store.get(stage, key)), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "reading the entry blocked"
    return result[0]


# -- what sits in place of an entry ---------------------------------------------------------


@pytest.mark.parametrize("stage,record", [(s, r) for s, records in WRONG_SHAPES.items() for r in records])
def test_a_record_of_the_wrong_shape_is_quarantined_and_redone(store, stage, record):
    path = entry(store, stage, "ab01")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    with pytest.warns(CorruptEntryWarning, match="ab01"):
        assert store.get(stage, "ab01") is None
    assert not path.exists() and len(quarantined(store, stage)) == 1
    assert store.quarantined == 1 and store.stats().corrupt_files == 1


@pytest.mark.parametrize("stage,record", [(s, r) for s, records in WRONG_SHAPES.items() for r in records
                                          if isinstance(r, dict)])
def test_a_row_of_the_wrong_shape_is_quarantined_and_redone(store, stage, record):
    Store(store.root).put(stage, "ab01", record)  # a store without checks writes anything
    with pytest.warns(CorruptEntryWarning, match="ab01"):
        assert store.get(stage, "ab01") is None
    assert rows(store) == [] and len(rows(store, "quarantine")) == 1
    assert store.quarantined == 1 and store.stats().corrupt_files == 1


@pytest.mark.parametrize("plant", ["folder", "symlink_dev_zero", "symlink_to_good_entry", "dangling_symlink",
                                   "fifo", "huge", "deep_nesting", "invalid_utf8", "unreadable"])
def test_anything_but_a_small_regular_file_is_quarantined_without_being_read(store, tmp_path, plant):
    path = entry(store, "transcript", "cd02")
    path.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(GOOD_TRANSCRIPT))
    if plant == "folder":
        path.mkdir()
        (path / "inside").write_text("x")
    elif plant == "symlink_dev_zero":
        path.symlink_to("/dev/zero")
    elif plant == "symlink_to_good_entry":
        path.symlink_to(elsewhere)  # a valid record, but reached through a link: not trusted
    elif plant == "dangling_symlink":
        path.symlink_to(tmp_path / "nowhere.json")
    elif plant == "fifo":
        os.mkfifo(path)
    elif plant == "huge":
        with open(path, "wb") as fh:
            fh.truncate(MAX_ENTRY_BYTES + 1)  # sparse: costs no disk
    elif plant == "deep_nesting":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif plant == "invalid_utf8":
        path.write_bytes(b'{"status": "ok", "turns": [], "reason": "\xff\xfe"}')
    elif plant == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        path.write_text(json.dumps(GOOD_TRANSCRIPT))
        path.chmod(0)
    with pytest.warns(CorruptEntryWarning):
        assert read_fast(store, "transcript", "cd02") is None
    assert not os.path.lexists(path)
    assert len(quarantined(store, "transcript")) == 1
    assert elsewhere.read_text() == json.dumps(GOOD_TRANSCRIPT)  # the link's target is untouched
    assert not store.has("transcript", "cd02")
    # The unit is redone and stored in its place.
    assert store.put("transcript", "cd02", GOOD_TRANSCRIPT) is True
    assert store.get("transcript", "cd02")["turns"] == GOOD_TRANSCRIPT["turns"]
    # stats and gc walk past the quarantine without following anything
    assert store.stats().stages["transcript"].entries == 1
    assert store.gc(None).corrupt_files == 1 and quarantined(store, "transcript") == []


@pytest.mark.parametrize("plant", ["folder", "symlink", "fifo"])
def test_put_moves_a_non_file_out_of_the_way_instead_of_losing_the_record(store, plant):
    path = entry(store, "transcript", "ef03")
    path.parent.mkdir(parents=True)
    {"folder": path.mkdir, "symlink": lambda: path.symlink_to("/dev/zero"), "fifo": lambda: os.mkfifo(path)}[plant]()
    with pytest.warns(CorruptEntryWarning):
        assert store.put("transcript", "ef03", GOOD_TRANSCRIPT) is True
    assert not os.path.lexists(path) and len(quarantined(store, "transcript")) == 1  # moved aside, not followed
    assert store.get("transcript", "ef03")["status"] == "ok"


def test_a_run_over_a_sabotaged_store_recomputes_exactly_the_bad_units(tmp_path, write_spec):
    spec = load_spec(write_spec(tiny_spec_document()))
    first = run(spec, store=tmp_path / "store", out=tmp_path / "first", client=CountingClient(jobs=4), progress=False)
    root = tmp_path / "store"
    transcripts = sorted(key for stage, key, *_ in rows(root) if stage == "transcript")
    judgments = sorted(key for stage, key, *_ in rows(root) if stage == "judgment")
    set_body(root, "transcript", transcripts[0], zlib.compress(b"{}"))
    set_body(root, "transcript", transcripts[1], zlib.compress(b"\0" * (65 * 2**20)))  # a bomb, as /dev/zero was
    set_body(root, "judgment", judgments[0], zlib.compress(json.dumps({"status": "ok", "criteria": "wrong"}).encode()))
    set_body(root, "judgment", judgments[1], body(root, "judgment", judgments[1])[:-9])  # torn

    client = CountingClient(jobs=4)
    with pytest.warns(CorruptEntryWarning):
        again = run(spec, store=root, out=tmp_path / "again", client=client, progress=False)
    keys = ["universe_id", "system", "case_id", "replicate"]
    pd.testing.assert_frame_equal(first.verdicts.sort_values(keys).reset_index(drop=True),
                                  again.verdicts.sort_values(keys).reset_index(drop=True))
    assert len(rows(root, "quarantine")) == 4
    # Two transcripts redone (with their judgments, whose keys depend on them) and two judgments.
    assert again.manifest.stages["rollout"].computed > 0
    # Every request the redone units make was answered before: served from the request store, none sent.
    assert client.total == 0 and again.manifest.stages["rollout"].calls == 0
    redone = [r for r in Store(root).get_many("transcript", list(again.verdicts.transcript_key.unique())).values()
              if r["provenance"]["calls"] == 0 and r["provenance"].get("reused")]
    assert len(redone) == 2


# -- gc and live runs ----------------------------------------------------------------------------


def test_gc_keeps_what_a_live_run_wrote_and_drops_it_once_the_run_is_gone(tmp_path):
    store = Store(tmp_path / "store")
    old = time.time() - 3 * 3600
    store.put("transcript", "aa00", GOOD_TRANSCRIPT)
    backdate(store, time.time() - old, "transcript", "aa00")
    with Lease(store.root) as lease:
        lease.started = time.time() - 1  # before what it writes next, whatever the clock's resolution
        store.put("transcript", "bb00", GOOD_TRANSCRIPT)
        # Even when asked to keep nothing, with no grace for fresh entries:
        report = store.gc({"transcript": set()}, fresh=0)
        assert report.live_runs == 1 and report.kept_recent == 1 and report.removed == 1
        assert store.has("transcript", "bb00") and not store.has("transcript", "aa00")
        assert len(live_leases(store.root)) == 1
    assert live_leases(store.root) == []
    assert store.gc({"transcript": set()}, fresh=0).removed == 1


def test_gc_keeps_entries_younger_than_its_grace_even_without_a_lease(tmp_path):
    store = Store(tmp_path / "store")
    store.put("judgment", "cc00", {"status": "ok", "criteria": []})
    assert store.gc({"judgment": set()}).removed == 0
    assert store.gc({"judgment": set()}, fresh=0).removed == 1


def test_a_dead_runs_lease_protects_nothing_and_is_removed(tmp_path):
    store = Store(tmp_path / "store").open()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    import socket

    with connect(store) as conn:
        conn.execute("INSERT INTO lease VALUES (?, ?, ?, ?, ?)", ("x.1", socket.gethostname(), int(dead.stdout),
                                                                  time.time() - 7200, time.time()))
    assert live_leases(store.root) == []
    store.gc({}, fresh=0)
    assert rows(store, "lease") == []


@pytest.mark.slow
def test_store_gc_mid_run_deletes_nothing_the_run_needs(tmp_path):
    # The test holds the run live: once it has stored three transcripts, every request it sends waits
    # at the fake server until gc has finished. So gc meets a live run however slow the machine is.
    store = tmp_path / "store"
    holding, release = threading.Event(), threading.Event()

    def hold_until_gc_ran(body: dict) -> object:
        if not release.is_set() and _stored(store, "transcript") >= 3:
            holding.set()
            release.wait(timeout=900)
        return audit_responder(body)

    with FakeServer(responder=hold_until_gc_ran) as server:
        document = fake_spec_document(server.url, name="live")
        for section in (document["design"]["generator"], *document["systems"], document["rollout"]["user"],
                        document["judge"]):
            section["params"] = {**section.get("params", {}), "timeout": 900}  # a held request is not given up
        live = tmp_path / "live.yaml"
        live.write_text(yaml.safe_dump(document, sort_keys=False))
        other = tmp_path / "other.yaml"  # shares nothing with the live run's grid
        other.write_text(yaml.safe_dump(fake_spec_document(server.url, name="other", judges=("c",),
                                                           max_turns=1), sort_keys=False))
        child = start_cli(["run", live, "--store", store, "--out", tmp_path / "run", "--quiet", "--jobs", "2"], cwd=tmp_path)
        try:
            assert holding.wait(timeout=600), "the run never stored three transcripts"
            # Older than gc's one-hour grace, and the run started before them: only its lease keeps them.
            backdate(store, 2 * 3600)
            with connect(store) as conn:
                conn.execute("UPDATE lease SET started = started - ?", (3 * 3600,))
            gc = start_cli(["store", "gc", other, "--store", store], cwd=tmp_path)
            gc_out, gc_err = gc.communicate(timeout=600)
        finally:
            release.set()
        _, stderr = child.communicate(timeout=600)
    assert gc.returncode == 0, gc_err
    assert "removed 0 entries" in gc_out and "1 live runs" in gc_out
    assert child.returncode == 0, stderr  # it also checks that nothing it wrote disappeared
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["statuses"]["rollout_failed"] == 0 and manifest["statuses"]["judge_failed"] == 0


def _stored(root: Path, stage: str) -> int:
    """How many entries of ``stage`` a live run has committed so far (0 before its database exists)."""
    if not (root / "store.sqlite3").is_file():
        return 0
    try:
        with connect(root) as conn:
            return conn.execute("SELECT COUNT(*) FROM entry WHERE stage = ?", (stage,)).fetchone()[0]
    except sqlite3.OperationalError:  # its tables are being made
        return 0


def test_a_store_deleted_mid_run_is_one_clear_error_not_failure_rows(tmp_path):
    # Held by the test as in the gc test above: after two transcripts, requests wait until the store is gone.
    store = tmp_path / "store"
    holding, release = threading.Event(), threading.Event()

    def hold_until_deleted(body: dict) -> object:
        if not release.is_set() and _stored(store, "transcript") >= 2:
            holding.set()
            release.wait(timeout=900)
        return audit_responder(body)

    with FakeServer(responder=hold_until_deleted) as server:
        spec = tmp_path / "gone.yaml"
        spec.write_text(yaml.safe_dump(fake_spec_document(server.url, name="gone"), sort_keys=False))
        child = start_cli(["run", spec, "--store", store, "--out", tmp_path / "run", "--quiet", "--jobs", "2"], cwd=tmp_path)
        try:
            assert holding.wait(timeout=600), "the run never stored two transcripts"
            while store.exists():  # a pass may meet a file (the database's log) created after its listing
                shutil.rmtree(store, ignore_errors=True)
        finally:
            release.set()
        _, stderr = child.communicate(timeout=600)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert child.returncode == 1, stderr
    assert len(lines) == 1 and "Traceback" not in stderr
    assert str(store) in lines[0] and "deleted" in lines[0]
    assert not (tmp_path / "run" / "verdicts.csv").exists()  # no table of false failures


@pytest.mark.parametrize("backend", ["local", "processes"])
def test_entries_lost_after_a_stage_stop_the_run_instead_of_becoming_failures(tmp_path, write_spec, monkeypatch, backend):
    """Whether the stages run one by one (``Executor.run`` each) or as one flow (the threaded backend's
    ``run_flow``), an entry deleted behind the run's back after it was stored stops the run."""
    from multiverse.engine import _executor as executor_module
    from multiverse.engine import _flow as flow_module

    spec = load_spec(write_spec(tiny_spec_document()))
    real_run, real_flow = executor_module.Executor.run, flow_module.run_flow

    def lose_one(root) -> None:  # someone deletes one fresh entry behind the run's back
        with connect(root) as conn:
            conn.execute("DELETE FROM entry WHERE key = (SELECT key FROM entry WHERE stage = 'transcript' LIMIT 1)")

    def run_then_lose(self, stage, units, upstream=lambda unit: None):
        real_run(self, stage, units, upstream)
        if stage == "transcript":
            lose_one(self.store.root)

    def flow_then_lose(executor, *args, **kwargs):
        real_flow(executor, *args, **kwargs)
        lose_one(executor.store.root)

    monkeypatch.setattr(executor_module.Executor, "run", run_then_lose)
    monkeypatch.setattr(flow_module, "run_flow", flow_then_lose)
    with pytest.raises(StoreError, match="1 transcript entries this run wrote have disappeared"):
        run(spec, store=tmp_path / "store", out=tmp_path / "run", progress=False, backend=backend)
    assert not (tmp_path / "run").exists()


def test_a_vanished_store_is_not_silently_recreated(tmp_path):
    store = Store(tmp_path / "store").open()
    store.put("case", "aa11", {"status": "ok", "case": {}})
    shutil.rmtree(store.root)
    with pytest.raises(StoreError, match="deleted while in use"):
        store.put("case", "bb22", {"status": "ok", "case": {}})
    with pytest.raises(StoreError):
        store.get_many("case", ["aa11"])
    assert not store.root.exists()


# -- an unusable --store, before any call ------------------------------------------------------------


def bad_store(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """(store, out) for each kind of unusable store."""
    out = tmp_path / "run"
    if kind == "file":
        (tmp_path / "afile").write_text("x")
        return tmp_path / "afile", out
    if kind == "under_a_file":
        (tmp_path / "afile").write_text("x")
        return tmp_path / "afile" / "store", out
    if kind == "dangling_symlink":
        (tmp_path / "link").symlink_to(tmp_path / "nowhere")
        return tmp_path / "link", out
    if kind == "inside_the_run_dir":
        return out / "store", out
    if kind == "holding_the_run_dir":
        return tmp_path / "store", tmp_path / "store" / "run"
    if kind == "same_as_the_run_dir":
        return out, out
    if kind == "read_only":
        (tmp_path / "ro").mkdir()
        (tmp_path / "ro").chmod(0o555)
        return tmp_path / "ro" / "store", out
    raise AssertionError(kind)


KINDS = ["file", "under_a_file", "dangling_symlink", "inside_the_run_dir", "holding_the_run_dir",
         "same_as_the_run_dir", "read_only"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_unusable_store_is_refused_before_any_call(tmp_path, write_spec, kind):
    if kind == "read_only" and os.geteuid() == 0:
        pytest.skip("root may write anywhere")
    store, out = bad_store(tmp_path, kind)
    spec = load_spec(write_spec(tiny_spec_document()))
    client = CountingClient(jobs=2)
    with pytest.raises(InputError, match=f"store {store}") as raised:
        run(spec, store=store, out=out, client=client, progress=False)
    assert "\n" not in str(raised.value) and "expected" in str(raised.value)
    assert client.total == 0
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize("kind", ["file", "inside_the_run_dir", "dangling_symlink"])
def test_the_cli_says_one_line_and_exits_2_for_an_unusable_store(tmp_path, write_spec, kind):
    store, out = bad_store(tmp_path, kind)
    spec = write_spec(tiny_spec_document())
    done = run_cli(["run", spec, "--store", store, "--out", out, "--quiet"], cwd=tmp_path)
    stderr = done.stderr
    assert done.returncode == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(store) in lines[0] and "Traceback" not in stderr
    assert not (out / "verdicts.csv").exists()


def test_a_read_only_store_directory_is_refused(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere")
    (tmp_path / "store" / "transcript").mkdir(parents=True)
    (tmp_path / "store" / "transcript").chmod(0o555)
    with pytest.raises(InputError, match="not writable"):
        check_store_path(tmp_path / "store")


def test_a_killed_runs_lease_stops_protecting_once_its_process_is_gone(tmp_path):
    """kill -9 leaves a lease file behind; it is stale as soon as its process is gone."""
    store = tmp_path / "store"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from multiverse.store import Lease\n"
                               "with Lease(sys.argv[1]):\n    print('held', flush=True); sys.stdin.read()", str(store)],
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # holds the lease until it is killed, however long the test takes
    assert holder.stdout.readline().strip() == "held"
    assert len(live_leases(store)) == 1
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    holder.stdin.close()
    holder.stdout.close()
    assert len(rows(store, "lease")) == 1  # left behind
    assert live_leases(store) == []
    Store(store).gc(None)
    assert rows(store, "lease") == []


def test_the_cli_reports_each_quarantined_entry_in_one_line_and_stats_counts_them(tmp_path, write_spec):
    spec_path = write_spec(tiny_spec_document())
    store = tmp_path / "store"
    run(load_spec(spec_path), store=store, out=tmp_path / "first", progress=False)
    bad = min(key for stage, key, *_ in rows(store) if stage == "transcript")
    set_body(store, "transcript", bad, zlib.compress(b"{}"))
    again = run_cli(["run", spec_path, "--store", store, "--out", tmp_path / "again", "--quiet"], cwd=tmp_path)
    stderr = again.stderr
    assert again.returncode == 0, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and bad in lines[0], stderr
    assert "status: expected a string" in lines[0]
    assert "quarantined: 1 bad entries" in run_cli(["store", "stats", "--store", store], cwd=tmp_path).ok()
    manifest = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert manifest["statuses"]["rollout_failed"] == json.loads((tmp_path / "first" / "manifest.json").read_text())[
        "statuses"]["rollout_failed"]
