"""A real model end to end over HTTP: specs/local-llm.yaml on llama.cpp's server.

``.ci/run`` starts llama.cpp's OpenAI-compatible server (``tests/llama_server.py``)
with Gemma 3 270M (alias ``gemma``) and exports ``MULTIVERSE_LOCAL_LLM_BASE``. This test
runs the real CLI in a child process against it, exactly as a user would, then
reads what the run left behind: the run directory and the store.

Without the server the test is skipped, except under CI (``CI`` set), where
a missing server is a failure: the real-model path must not silently go
untested. To run it by hand::

    python tests/llama_server.py --port 8766 &
    MULTIVERSE_LOCAL_LLM_BASE=http://127.0.0.1:8766/v1 python -m pytest -m local_llm -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.local_llm

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "specs" / "local-llm.yaml"
ENV = "MULTIVERSE_LOCAL_LLM_BASE"
STATUSES = {"ok", "excluded", "rollout_failed", "judge_failed"}


def _local_base() -> str:
    """The server's base URL; a skip without one, or a failure under CI."""
    base = os.environ.get(ENV, "").strip()
    if not base:
        message = f"{ENV} is not set: start the llama.cpp server (see .ci/run) and export it"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {message}", pytrace=False)
        pytest.skip(message)
    try:
        with urllib.request.urlopen(base.rstrip("/") + "/models", timeout=10) as answer:
            served = [m.get("id") for m in json.load(answer).get("data", [])]
    except OSError as exc:
        pytest.fail(f"{ENV}={base}: the model server does not answer: {exc}", pytrace=False)
    assert "gemma" in served, f"{base} serves {served}; expected the alias 'gemma'"
    return base


def _cli_run(out: Path, store: Path, base: str) -> tuple[subprocess.CompletedProcess, float]:
    environment = {k: v for k, v in os.environ.items() if k != "MULTIVERSE_STORE"}
    environment[ENV] = base
    command = [sys.executable, "-m", "multiverse.cli", "run", str(SPEC), "--out", str(out), "--store", str(store), "--quiet"]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=1800)
    return done, time.monotonic() - started


@pytest.mark.slow
def test_local_model_runs_the_spec_end_to_end_over_http(tmp_path, monkeypatch):
    local_base = _local_base()  # in the test, not a fixture: under CI a missing server FAILS
    from multiverse.engine._pipeline import plan
    from multiverse.spec import load_spec
    from multiverse.stages._rollout import USER_ATTEMPTS
    from multiverse.store._store import Store

    monkeypatch.setenv(ENV, local_base)
    spec = load_spec(SPEC)
    store_dir = tmp_path / "store"
    planned = plan(spec, store=store_dir)
    assert planned.axis_stages == {"judge": "judge", "evidence": "judge"}

    done, seconds = _cli_run(tmp_path / "run", store_dir, local_base)
    print(f"\nlocal model ({local_base}): first run {seconds:.1f} s wall\n{done.stdout}")
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "run"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    verdicts = pd.read_parquet(run_dir / "verdicts.parquet")
    criteria = pd.read_parquet(run_dir / "criteria.parquet")
    store = Store(store_dir)
    rubric_ids = {c.id for c in spec.rubric.criteria}

    # Every universe and system has its rows; the statuses are the four known ones.
    assert verdicts.universe_id.nunique() == 4 and set(verdicts.system) == {"careful", "eager"}
    assert len(verdicts) == 4 * 2 * 2
    assert set(verdicts.status) <= STATUSES

    # Transcripts: real model text, read back from the store.
    transcript_keys = sorted(set(verdicts.transcript_key))
    transcripts = store.get_many("transcript", transcript_keys)
    assert set(transcripts) == set(transcript_keys), "a transcript was not stored"
    ok_transcripts = {k: t for k, t in transcripts.items() if t["status"] == "ok"}
    assert ok_transcripts, {k: t.get("reason") for k, t in transcripts.items()}
    for key, record in transcripts.items():
        if record["status"] != "ok":
            assert record["reason"], key  # a simulated user that broke role, with why
            continue
        answers = [m["content"] for m in record["turns"] if m["role"] == "assistant"]
        users = [m["content"] for m in record["turns"] if m["role"] == "user"]
        assert answers and all(isinstance(a, str) and a.strip() for a in answers), (key, record["turns"])
        assert users and all(isinstance(u, str) and u.strip() for u in users), (key, record["turns"])
        assert record["provenance"]["model_requested"] == "openai/gemma" and record["provenance"]["calls"] >= 2

    # Judgments: parsed through the schema, or judge_failed; never a label otherwise.
    labelled = criteria.groupby("judgment_key").criterion.apply(set).to_dict()
    for row in verdicts.itertuples():
        if row.status == "ok":
            assert not pd.isna(row.compliant), row
            assert labelled.get(row.judgment_key) == rubric_ids, row
        elif row.status == "excluded":
            assert pd.isna(row.compliant) and labelled.get(row.judgment_key) == rubric_ids
        else:
            assert pd.isna(row.compliant) and row.reason, row
            if row.status == "judge_failed":
                assert row.judgment_key not in labelled, row
    applicable = criteria[criteria.applicable]
    assert applicable.compliant.notna().all() and criteria[~criteria.applicable].compliant.isna().all()
    judgments = [store.get("judgment", k) for k in store.keys("judgment")]
    not_judged = verdicts.loc[verdicts.status == "rollout_failed", "judgment_key"].nunique()
    judge = manifest["stages"]["judge"]
    # An unparseable answer is stored (as judge_failed) and counted as failed, not as computed.
    ok_judgments = [r for r in judgments if r["status"] == "ok"]
    assert judge["blocked"] == not_judged
    assert len(ok_judgments) + judge["failed"] + judge["blocked"] == judge["units"]
    assert judge["computed"] + judge["stored"] + judge["failed"] + judge["blocked"] == judge["units"]
    for record in judgments:
        if record["status"] == "ok":
            assert {c["criterion"] for c in record["criteria"]} == rubric_ids
        else:
            assert record["status"] == "judge_failed" and record["reason"] and not record["criteria"]

    # The judge and evidence axes reused every transcript: one rollout per (system, case).
    rollout = manifest["stages"]["rollout"]
    assert rollout["units"] == planned.stages["rollout"].units == verdicts.transcript_key.nunique() == 4
    # A 270M model can break role on every attempt (its text varies with how the server batches concurrent
    # requests): that rollout is recorded with why, counted as failed, never judged and not retried.
    failed = [t for t in transcripts.values() if t["status"] != "ok"]
    assert rollout["failed"] == len(failed) == sum(rollout["failures"].values())
    assert rollout["computed"] + rollout["failed"] == 4
    assert len(list(store.keys("transcript"))) == 4
    # The calls made are exactly those kept in the four transcripts, so no universe rolled out
    # again. The plan counts one user and one system call a turn; a simulated user that
    # broke role is asked again (up to USER_ATTEMPTS times), still within one pass.
    assert rollout["calls"] == sum(t["provenance"]["calls"] for t in transcripts.values())
    one_pass = planned.stages["rollout"].calls * (USER_ATTEMPTS + 1) // 2
    assert rollout["calls"] <= one_pass < 4 * planned.stages["rollout"].calls
    assert manifest["stages"]["judge"]["units"] == verdicts.judgment_key.nunique() == 16

    # A second run makes zero calls.
    again, again_seconds = _cli_run(tmp_path / "again", store_dir, local_base)
    assert again.returncode == 0, again.stderr
    second = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert {s: v["computed"] for s, v in second["stages"].items()} == {s: 0 for s in second["stages"]}
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "again" / "verdicts.parquet"), verdicts)

    statuses = verdicts.status.value_counts().to_dict()
    print(
        f"local model: {seconds:.1f} s wall for the first run ({rollout['calls']} rollout calls for 4 transcripts "
        f"shared by 4 universes; plan {planned.stages['rollout'].calls}, naive {planned.naive_calls}), "
        f"{manifest['stages']['judge']['calls']} judge calls answered; verdicts {statuses}; "
        f"second run {again_seconds:.1f} s with 0 calls"
    )
