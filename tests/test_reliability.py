"""Reliability: an audit survives flaky servers, kills and concurrent runs without
losing paid-for work and without inventing a label.

Every model of the grids here is ``openai/fake`` at a fault-injecting
OpenAI-compatible server on loopback (``tests/fakeserver.py``) whose answers
come from ``tests/audit_server.py``: a deterministic responder that plays each
role of the audit from the request content alone, so a run's tables depend only
on which calls succeeded, never on the order, the retries or the concurrency.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd
import pytest
import yaml
from store_rows import claims, connect, leases, stored_records

from multiverse.core import STATUSES
from multiverse.engine._pipeline import plan, run
from multiverse.errors import ModelError
from multiverse.model._llm import LiteLLMClient
from multiverse.spec import load_spec
from multiverse.spec._grid import expand
from multiverse.store._store import Store
from multiverse.work._units import build_work

sys.path.insert(0, str(Path(__file__).parent))
from audit_server import JUDGE_TEMPERATURES, audit_responder, audit_role, fake_spec_document, scenario_of
from fakeserver import FakeServer

REPO = Path(__file__).resolve().parents[1]

#: 30% faults, spread evenly over every kind a flaky provider produces
FAULT_KINDS = ("rate_limit", "server_error", "unavailable", "reset", "slow", "truncated", "off_schema", "prose")
FAULTS = {kind: 0.30 / len(FAULT_KINDS) for kind in FAULT_KINDS}
#: server outcome -> the client's reason for the failed attempt (all retried)
RETRIED_AS = {"rate_limit": "rate_limited", "server_error": "server_error", "unavailable": "server_error",
              "truncated": "server_error", "reset": "connection", "slow": "timeout"}
CONTENT_FAULTS = ("off_schema", "prose")
CLIENT_TIMEOUT = 1.5
SLOW_SECONDS = 2.0  # a "slow" answer arrives after the client gave up

VERDICT_KEYS = ["universe_id", "system", "case_id", "replicate"]
CRITERIA_KEYS = ["judgment_key", "sample", "criterion"]
RATE_KEYS = ["universe_id", "system", "subgroup"]
TABLE_KEYS = {"verdicts": VERDICT_KEYS, "criteria": CRITERIA_KEYS, "rates": RATE_KEYS}
FAILED = ("rollout_failed", "judge_failed")


# -- helpers ---------------------------------------------------------------------


def fast_client(**kwargs) -> LiteLLMClient:
    """The real client with millisecond backoff, so retries cost the test little time."""
    options = {"jobs": 4, "backoff_base": 0.01, "backoff_cap": 0.05, "timeout": CLIENT_TIMEOUT, "seed": 0}
    return LiteLLMClient(**{**options, **kwargs})


class RecordingClient:
    """Passes calls to a model client and keeps every ModelError it raised."""

    def __init__(self, client: LiteLLMClient):
        self.client = client
        self.errors: list[ModelError] = []
        self._lock = threading.Lock()

    def check_credentials(self, configs):
        return self.client.check_credentials(configs)

    def complete(self, config, messages, **kwargs):
        try:
            return self.client.complete(config, messages, **kwargs)
        except ModelError as exc:
            with self._lock:
                self.errors.append(exc)
            raise

    @property
    def stats(self) -> dict:
        return self.client.stats


def write_spec(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def body_key(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


def read_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """The run directory's tables as written, rows in a canonical order."""
    return {
        name: pd.read_parquet(run_dir / f"{name}.parquet").sort_values(keys, kind="mergesort").reset_index(drop=True)
        for name, keys in TABLE_KEYS.items()
    }


def assert_same_tables(got: Path, expected: Path) -> None:
    a, b = read_tables(got), read_tables(expected)
    for name in TABLE_KEYS:
        pd.testing.assert_frame_equal(a[name], b[name], obj=f"{name} of {got.name} vs {expected.name}")


def check_store(root: Path) -> dict[str, set[str]]:
    """The store is its database and nothing else, whole (``PRAGMA integrity_check``), every entry a
    whole record of a finished unit, no claim or lease left behind. Returns keys per stage."""
    names = {p.name for p in root.rglob("*") if p.is_file()}
    assert names <= {"store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm"}, f"stray files in the store: {names}"
    assert_whole(root)
    entries: dict[str, list[str]] = defaultdict(list)
    for (stage, key), record in stored_records(root).items():  # raises on a torn or corrupt entry
        assert isinstance(record, dict) and record.get("status"), key
        entries[stage].append(key)
    store = Store(root)
    for stage, keys in entries.items():
        assert list(store.keys(stage)) == sorted(keys)
    assert claims(root) == []
    report = store.gc(keep=None, temp_age=0)
    assert report.removed == 0 and report.corrupt_files == 0 and report.temp_files == 0
    # A finished run removes its lease; gc removes those of killed runs.
    assert leases(root) == []
    return {stage: set(keys) for stage, keys in entries.items()}


def assert_whole(root: Path) -> None:
    """SQLite's own check of every page and index of the store's database."""
    with connect(root) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def cli_run(spec: Path, out: Path, store: Path, *, jobs: int = 4, env: dict | None = None) -> subprocess.Popen:
    """``multiverse run`` in a child process (output captured)."""
    environment = {k: v for k, v in os.environ.items() if k != "MULTIVERSE_STORE"}
    environment.update(env or {})
    command = [sys.executable, "-m", "multiverse.cli", "run", str(spec), "--out", str(out), "--store", str(store),
               "--jobs", str(jobs), "--quiet"]
    return subprocess.Popen(command, cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def to_compute(spec, store: Path) -> int:
    """Model calls the plan says the store still lacks (exact here: the fake user never ends early)."""
    return sum(stage.calls_to_make for stage in plan(spec, store=store).stages.values())


def stored_calls(spec, store: Path) -> int:
    return sum(stage.calls_stored for stage in plan(spec, store=store).stages.values())


# -- 30% faults ------------------------------------------------------------------------

# Two persistent outages (a request that keeps failing, as when one prompt trips a
# provider's filter or one shard stays down): judge "b" never answers about one
# scenario, and system "beacon" never answers in another. Every other request of
# those two scenarios is shielded from the random faults, so each outage is
# certain to be reached and to be the only thing that fails there.
JUDGE_OUTAGE = "fabricate_evidence.material_reliance#0"
ROLLOUT_OUTAGE = "overstate_capability.overclaim_pressure#1"


def outages(body: dict) -> str | None:
    scenario = scenario_of(body)
    if scenario not in (JUDGE_OUTAGE, ROLLOUT_OUTAGE):
        return None
    role = audit_role(body)
    if scenario == JUDGE_OUTAGE and role == "judge" and body.get("temperature") == JUDGE_TEMPERATURES["b"]:
        return "unavailable"
    first = body["messages"][0].get("content") or ""
    if scenario == ROLLOUT_OUTAGE and role == "system" and "Beacon" in first:
        return "server_error"
    return "ok"


def judgment_key_of_call(spec) -> dict[str, str]:
    """judge call key (the store's judgment key) -> the verdicts' judgment_key."""
    return {call: row.judgment_key for row in build_work(spec, expand(spec)).rows for call in row.judge_calls}


def test_faulty_grid_completes_records_failures_and_resumes_to_the_fault_free_tables(tmp_path):
    with FakeServer(responder=audit_responder, content_faults_need_schema=True, retry_after=0.02,
                    slow_seconds=SLOW_SECONDS, seed=20261130) as server:
        spec = load_spec(write_spec(tmp_path / "faulty.yaml", fake_spec_document(server.url, cases_per_cell=2)))
        runs = tmp_path / "runs"

        # The fault-free reference, on its own store.
        clean = run(spec, store=tmp_path / "clean-store", out=runs / "clean", client=fast_client(), jobs=4, progress=False)
        clean_requests = server.counts["total"]
        assert set(clean.verdicts.status) == {"ok"}

        # 30% faults over every kind (each kind forced once at the start, then drawn), plus the outages.
        server.reset_counts()
        server.faults = FAULTS
        server.fault_for = outages
        server.queue(*FAULT_KINDS)
        client = RecordingClient(fast_client(max_retries=3))
        started = time.monotonic()
        faulty = run(spec, store=tmp_path / "store", out=runs / "faulty", client=client, jobs=4, progress=False)
        faulty_seconds = time.monotonic() - started
        served = Counter(server.counts)
        stats = client.stats

        # Faults off, same server (so the same api_base and keys), same store.
        server.faults, server.fault_for = {}, None
        server.reset_counts()
        missing = to_compute(spec, tmp_path / "store")
        had = {stage: set(Store(tmp_path / "store").keys(stage)) for stage in ("case", "transcript", "judgment")}
        resumed = run(spec, store=tmp_path / "store", out=runs / "resumed", client=fast_client(), jobs=4, progress=False)
        resume_requests = server.counts["total"]

    # -- it completed, and every retryable fault was retried ---------------------------
    assert all(served[kind] >= 1 for kind in FAULT_KINDS), served
    by_reason = stats["failures_by_reason"]
    for reason in set(RETRIED_AS.values()):
        faults = sum(served[k] for k, r in RETRIED_AS.items() if r == reason)
        if reason == "timeout":  # a loaded machine may also time out an ordinary answer
            assert by_reason.get(reason, 0) >= faults, (reason, by_reason, served)
        else:
            assert by_reason.get(reason, 0) == faults, (reason, by_reason, served)
    failed_attempts = sum(by_reason.get(reason, 0) for reason in set(RETRIED_AS.values()))
    gave_up = [e for e in client.errors if e.retryable]
    # every failed attempt was retried, except the last one of a call that gave up
    assert stats["retries"] == failed_attempts - len(gave_up) > 0
    assert all(e.reason in set(RETRIED_AS.values()) and "after 4 attempts" in str(e) for e in gave_up)
    # an answer that ignores the schema gets one repair request; a second bad answer is "unparseable"
    unparseable = [e for e in client.errors if e.reason == "unparseable"]
    assert stats["repairs"] + len(unparseable) == sum(served[k] for k in CONTENT_FAULTS) > 0
    assert {e.reason for e in client.errors} <= set(RETRIED_AS.values()) | {"unparseable"}

    # -- what could not be done is recorded, counted, and never a label ------------------
    verdicts, manifest = faulty.verdicts, faulty.manifest
    failed = verdicts[verdicts.status.isin(FAILED)]
    assert (failed.reason.str.len() > 0).all() and failed.compliant.isna().all()
    assert verdicts.loc[verdicts.status == "ok", "compliant"].notna().all()
    assert manifest.statuses == {s: int((verdicts.status == s).sum()) for s in STATUSES}
    on_disk = pd.read_parquet(runs / "faulty" / "verdicts.parquet")
    assert on_disk.loc[on_disk.status.isin(FAILED), "compliant"].isna().all()
    # the outages: beacon in ROLLOUT_OUTAGE (both universes), judge b on JUDGE_OUTAGE (both systems)
    beacon = verdicts[(verdicts.system == "beacon") & (verdicts.case_id == "overstate_capability.overclaim_pressure.02")]
    assert list(beacon.status) == ["rollout_failed"] * 2 and beacon.reason.str.startswith("server_error").all()
    judged_b = verdicts[(verdicts.judge == "b") & (verdicts.case_id == "fabricate_evidence.material_reliance.01")]
    assert list(judged_b.status) == ["judge_failed"] * 2 and judged_b.reason.str.startswith("server_error").all()
    # manifest "failed" counts the units that ended without a usable result (calls that gave up,
    # and stored content failures); units waiting on a failed one are "blocked"; the rows point at them
    store = Store(tmp_path / "store")
    judgment_of = judgment_key_of_call(spec)
    stored_judgments = store.get_many("judgment", list(judgment_of))
    content_failures = {judgment_of[k] for k, r in stored_judgments.items() if r["status"] == "judge_failed"}
    stages = manifest.stages
    undrafted = failed.reason.str.startswith("case not drafted")
    assert stages["draft"].failed == failed.loc[undrafted, "case_id"].nunique()
    assert stages["rollout"].failed == failed.loc[(failed.status == "rollout_failed") & ~undrafted, "transcript_key"].nunique()
    judge_failed = set(failed.loc[failed.status == "judge_failed", "judgment_key"])
    assert stages["judge"].failed == len(judge_failed)
    for counts in stages.values():
        assert counts.units == counts.computed + counts.stored + counts.failed + counts.blocked
        assert sum(counts.failures.values()) == counts.failed
    assert content_failures <= judge_failed and len(content_failures) <= len(unparseable)
    # a failed judgment has no criteria rows: nothing of it became a label
    assert not set(faulty.criteria.judgment_key) & judge_failed
    assert sum(s.failed for s in stages.values()) > 0

    # -- rows ok in both runs agree exactly ----------------------------------------------
    both = clean.verdicts.merge(verdicts, on=VERDICT_KEYS, suffixes=("_clean", "_faulty"))
    assert len(both) == len(clean.verdicts)
    assert (both.transcript_key_clean == both.transcript_key_faulty).all()
    assert (both.judgment_key_clean == both.judgment_key_faulty).all()
    ok = both[(both.status_clean == "ok") & (both.status_faulty == "ok")]
    assert len(ok) > len(both) // 2
    assert ok.compliant_clean.equals(ok.compliant_faulty)
    ok_keys = set(ok.judgment_key_clean)

    def labels_of_ok_rows(criteria: pd.DataFrame) -> pd.DataFrame:
        return criteria[criteria.judgment_key.isin(ok_keys)].sort_values(CRITERIA_KEYS).reset_index(drop=True)

    pd.testing.assert_frame_equal(labels_of_ok_rows(faulty.criteria), labels_of_ok_rows(clean.criteria))

    # -- faults off, same store: the rest is computed, and only the rest ------------------
    # Each call the plan counts is sent, or served from the request store: answered during the
    # faulty run for a unit that failed later (a rollout whose user turn came back before its outage).
    reused = sum(record["provenance"].get("reused", 0)
                 for stage, keys in had.items()
                 for key, record in store.get_many(stage, set(store.keys(stage)) - keys).items())
    assert resume_requests + reused == missing > 0 and resume_requests > 0
    # only the stored content failures (results, not retried) are still failed
    assert {k: s.failed for k, s in resumed.manifest.stages.items()} == {
        "draft": 0, "rollout": 0, "judge": len(content_failures), "score": 0}
    assert resumed.manifest.stages["rollout"].stored > 0 and resumed.manifest.stages["judge"].stored > 0
    final, reference = read_tables(runs / "resumed"), read_tables(runs / "clean")
    if content_failures:
        # A judge answer still unparseable after its repair request is a stored result
        # (work.py: content failures are stored), so it stays judge_failed on resume.
        hit = final["verdicts"].judgment_key.isin(content_failures)
        assert (final["verdicts"].loc[hit, "status"] == "judge_failed").all()
        assert final["verdicts"].loc[hit, "reason"].str.startswith("unparseable").all()
        assert final["verdicts"].loc[hit, "compliant"].isna().all()
        for name, table in (("verdicts", final["verdicts"]), ("criteria", final["criteria"])):
            keep = ~table.judgment_key.isin(content_failures)
            expected = reference[name][~reference[name].judgment_key.isin(content_failures)].reset_index(drop=True)
            pd.testing.assert_frame_equal(table[keep].reset_index(drop=True), expected)
    else:
        assert_same_tables(runs / "resumed", runs / "clean")
    check_store(tmp_path / "store")

    failures = {s: v.failed for s, v in manifest.stages.items() if s != "score"}
    print(
        f"\n30% faults: {served['total']} requests ({clean_requests} fault-free) in {faulty_seconds:.1f} s; served "
        + ", ".join(f"{k}={served[k]}" for k in FAULT_KINDS)
        + f"; client retries={stats['retries']}, repairs={stats['repairs']}, gave up after retries={len(gave_up)}, "
        f"unparseable after repair={len(unparseable)}; failed units {failures}; verdict statuses {manifest.statuses}; "
        f"judgments stored as unparseable (kept as judge_failed on resume)={len(content_failures)}; "
        f"resume made {missing} calls"
    )


# -- kill -9 and resume --------------------------------------------------------------------

KILLS = 5
JOBS = 2


@pytest.mark.slow
def test_killed_runs_resume_without_redoing_stored_calls(tmp_path):
    rng = random.Random(20261130)
    # Each request and the end of each child wake the test, which kills at the request it drew.
    changed = threading.Condition()

    def responder(body: dict) -> object:
        with changed:
            changed.notify_all()
        return audit_responder(body)

    def exits(child: subprocess.Popen) -> None:
        child.wait()
        with changed:
            changed.notify_all()

    with FakeServer(responder=responder, latency=0.03) as server:
        spec_path = write_spec(tmp_path / "crash.yaml", fake_spec_document(server.url, name="crash", cases_per_cell=2))
        spec = load_spec(spec_path)

        # The uninterrupted run, for its tables and its requests.
        run(spec, store=tmp_path / "reference-store", out=tmp_path / "reference", client=fast_client(jobs=JOBS),
            jobs=JOBS, progress=False)
        reference = Counter(body_key(b) for b in server.requests)
        full = sum(reference.values())
        server.reset_counts()

        store, out = tmp_path / "store", tmp_path / "run"
        kills, attempts, saved = 0, [], 0
        while True:
            need = to_compute(spec, store)
            saved += stored_calls(spec, store)
            before = server.counts["total"]
            child = cli_run(spec_path, out, store, jobs=JOBS)
            if kills < KILLS:
                # A random moment inside the run: after a random share of what is left.
                target = before + rng.randint(1, max(1, need // 2))
                threading.Thread(target=exits, args=(child,), daemon=True).start()
                with changed:
                    reached = changed.wait_for(lambda t=target, c=child: server.counts["total"] >= t or c.poll() is not None,
                                               timeout=300)  # generous: only a run that broke takes it
                assert reached, "the run made no progress"
                # Then a random moment of the requests' and the store's work: the kill is meant to land anywhere.
                time.sleep(rng.uniform(0, 0.02))
            if kills < KILLS and child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.communicate()
                if (store / "store.sqlite3").exists():
                    assert_whole(store)  # killed at any point: nothing torn, nothing half-committed
                kills += 1
                attempts.append(("killed", server.counts["total"] - before, need))
                continue
            _stdout, stderr = child.communicate(timeout=180)
            assert child.returncode == 0, stderr
            attempts.append(("finished", server.counts["total"] - before, need))
            break
        made = Counter(body_key(b) for b in server.requests)

    assert kills == KILLS
    # No attempt made more calls than the units missing at its start needed (fewer when
    # requests answered before a kill, for a unit not stored, are served from the request store).
    assert all(0 < calls <= need for _, calls, need in attempts), attempts
    # A request repeats only because it was in flight at a kill: every answer is stored the
    # moment it arrives, and at most `jobs` requests are in flight at once.
    assert set(made) == set(reference)
    extra = sum(max(0, n - reference[b]) for b, n in made.items())
    assert extra <= kills * JOBS, (extra, attempts)
    assert sum(made.values()) == full + extra
    check_store(store)
    assert_same_tables(out, tmp_path / "reference")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stages"]["rollout"]["stored"] > 0

    total = sum(made.values())
    resumed = total - attempts[0][1]
    print(
        f"\nkill -9 x{kills}: attempts (outcome, calls made, calls missing at start) = {attempts}; "
        f"{total} requests in all vs {full} uninterrupted ({extra} redone after kills); "
        f"the {len(attempts) - 1} resumed runs made {resumed} calls and skipped {saved} stored calls "
        f"that runs restarted from scratch would have made again ({resumed + saved})"
    )


# -- two runs at once on one store ----------------------------------------------------------


def test_concurrent_runs_on_overlapping_grids_share_one_consistent_store(tmp_path):
    with FakeServer(responder=audit_responder, latency=0.02) as server:
        paths = {
            name: write_spec(tmp_path / f"{name}.yaml", fake_spec_document(server.url, name=name, judges=judges))
            for name, judges in (("ab", ("a", "b")), ("bc", ("b", "c")))
        }
        shared = tmp_path / "shared-store"
        children = {name: cli_run(path, tmp_path / "shared" / name, shared) for name, path in paths.items()}
        outputs = {name: child.communicate(timeout=180) for name, child in children.items()}
        for name, child in children.items():
            assert child.returncode == 0, outputs[name][1]
        concurrent_requests = server.counts["total"]
        concurrent_bodies = {body_key(b) for b in server.requests}
        for name, path in paths.items():
            run(load_spec(path), store=tmp_path / f"fresh-{name}", out=tmp_path / "fresh" / name,
                client=fast_client(), progress=False)

    keys = check_store(shared)
    specs = {name: load_spec(path) for name, path in paths.items()}
    work = {name: build_work(s, expand(s)) for name, s in specs.items()}
    assert keys["transcript"] == set(work["ab"].transcripts) == set(work["bc"].transcripts)
    assert keys["judgment"] == set(work["ab"].judge_calls) | set(work["bc"].judge_calls)
    assert keys["case"] == set(work["ab"].cases)
    for name in paths:
        assert_same_tables(tmp_path / "shared" / name, tmp_path / "fresh" / name)
    # Each unit and each request is claimed in the store before it is computed or sent, so the
    # racing runs pay for the union of their grids, not for both grids, and send no request twice.
    separate = sum(len(w.cases) + 4 * len(w.transcripts) + len(w.judge_calls) for w in work.values())
    union = len(work["ab"].cases) + 4 * len(work["ab"].transcripts) + len(keys["judgment"])
    assert concurrent_requests == len(concurrent_bodies) == len(list(Store(shared).keys("request")))
    assert concurrent_requests <= union < separate
    print(f"\nconcurrent runs: {concurrent_requests} requests for two grids that need {separate} run apart")
