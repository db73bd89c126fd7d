"""Batch mode (issue 47): the spec's batched roles go through OpenAI's files and batches endpoints, through litellm.

Every run here is a real run against a loopback server that implements the
chat, files and batches endpoints (tests/batch_server.py) and counts what it is
sent: a batch that completes, one that expires, one that fails part-way, a run
killed while its batch is in flight, and the store shared with direct runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml
from audit_server import audit_responder, fake_spec_document, task_of
from batch_server import BatchServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multiverse.core import FAILED_STATUSES
from multiverse.engine import plan, run
from multiverse.errors import SpecError
from multiverse.model import STAGE, LiteLLMClient, request_key
from multiverse.spec import load_spec
from multiverse.store import Store

KEY_ENV, KEY = "MV_BATCH_TEST_KEY", "sk-batch-test-5f1e0c77d2"


def _spec(tmp_path: Path, url: str, roles: list[str], *, setting: str = "multi_turn", name: str = "spec.yaml",
          model: str = "openai/fake") -> Path:
    document = fake_spec_document(url, judges=("a",), max_turns=2)
    for section in (document["design"]["generator"], *document["systems"], document["rollout"]["user"],
                    document["judge"]):
        section["api_key_env"] = KEY_ENV
        section["model"] = model
    document["rollout"]["setting"] = setting
    document["batch"] = {"roles": roles, "poll": 0.01}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def _run(path: Path, store: Path, out: Path):
    return run(load_spec(path), out=out, store=store, client=LiteLLMClient(jobs=4, timeout=20, max_retries=1),
               jobs=4, progress=False)


def _judge_lines(server: BatchServer) -> int:
    """Judge requests the server was sent directly."""
    return sum(1 for body in server.chats if (task_of(body) or {}).get("kind") == "judge")


def _store_bytes(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in store.rglob("*") if p.is_file())


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.mark.slow
def test_a_batch_run_sends_each_request_once_and_shares_the_store_with_direct_runs(tmp_path):
    # gpt-4o-mini: litellm prices it, directly and (at its batch price, half) in batches
    with BatchServer(audit_responder) as server:
        batched = _spec(tmp_path, server.url, ["generator", "systems", "user", "judge"], model="openai/gpt-4o-mini")
        result = _run(batched, tmp_path / "store", tmp_path / "run")
        assert server.counts["chat"] == 0, "every role is batched: no direct request"
        # generator, 4 turns of a 2-turn conversation (user, system, user, system), judge: one batch each
        assert server.counts["batches"] == 6 == server.counts["files"]
        assert server.lines and set(server.lines.values()) == {1}, "each request answered once"
        assert (~result.verdicts["status"].isin(FAILED_STATUSES)).all()
        # The batches' cost and requests are the run's: one request per line, in its manifest.
        stages = result.manifest.stages
        assert sum(stages[s].calls for s in ("draft", "rollout", "judge")) == sum(server.lines.values())
        # The key was sent (it reached the server) and written nowhere.
        assert any(KEY.encode() in seen for seen in server.seen)
        assert KEY.encode() not in _store_bytes(tmp_path / "store")
        assert KEY.encode() not in _store_bytes(tmp_path / "run")

        # A direct run on the batch run's store pays for nothing ...
        direct = _spec(tmp_path, server.url, [], name="direct.yaml", model="openai/gpt-4o-mini")
        before = dict(server.counts)
        again = _run(direct, tmp_path / "store", tmp_path / "run2")
        assert dict(server.counts) == before
        assert again.verdicts[["universe_id", "case_id", "system", "compliant"]].equals(
            result.verdicts[["universe_id", "case_id", "system", "compliant"]])

        # ... a direct run on a fresh store sends exactly the requests the batches carried ...
        paid = _run(direct, tmp_path / "fresh", tmp_path / "run3")
        assert server.counts["chat"] == len(server.lines)
        # The same requests and token counts, at half the price.
        assert paid.manifest.cost > 0 and result.manifest.cost == pytest.approx(paid.manifest.cost / 2, rel=0.01)
        # ... and a batch run after it submits nothing.
        before = dict(server.counts)
        _run(batched, tmp_path / "fresh", tmp_path / "run4")
        assert dict(server.counts) == before


@pytest.mark.slow
def test_an_expired_batch_keeps_what_it_answered_and_sends_the_rest_directly(tmp_path):
    with BatchServer(audit_responder, ending="expire", answered=3) as server:
        result = _run(_spec(tmp_path, server.url, ["judge"], setting="single_turn"), tmp_path / "store", tmp_path / "run")
        judged = result.verdicts["judgment_key"].nunique()
        assert server.counts["batches"] == 1 and sum(server.lines.values()) == 3
        assert _judge_lines(server) == judged - 3, "the expired requests, and only they, were sent directly"
        assert (~result.verdicts["status"].isin(FAILED_STATUSES)).all()
        ended = _batch_ends(tmp_path / "store")
        assert [(e["state"], e["answered"], len(e["failed"])) for e in ended] == [("expired", 3, judged - 3)]
        assert all("batch_expired" in reason for reason in ended[0]["failed"].values())


@pytest.mark.slow
def test_a_batch_that_fails_part_way_never_turns_a_failed_line_into_a_label(tmp_path):
    # Lines fail with a 500, and answered lines are prose, not a judgment, by their content: a request key holds
    # the server's port, so a choice by key made some runs with no line both answered and prose.
    def bit(body: dict, i: int) -> bool:
        return bool(hashlib.sha256(json.dumps(body["messages"]).encode()).digest()[0] >> i & 1)

    def batch_answer(body: dict) -> str:
        return "I would rather not say." if bit(body, 0) else audit_responder(body)

    with BatchServer(audit_responder, ending="partial", fails_body=lambda body: bit(body, 1),
                     batch_responder=batch_answer) as server:
        result = _run(_spec(tmp_path, server.url, ["judge"], setting="single_turn"), tmp_path / "store", tmp_path / "run")
        ended = _batch_ends(tmp_path / "store")
        failed = ended[0]["failed"]
        assert ended[0]["state"] == "completed" and failed and server.failed_ids
        assert {k for k, reason in failed.items() if reason.startswith("batch line 500")} == server.failed_ids
        assert any(reason.startswith("batch answer unusable") for reason in failed.values()), failed
        # Each failed line was sent again directly, once; the answered ones never.
        assert _judge_lines(server) == len(failed)
        assert ended[0]["answered"] + len(failed) == result.verdicts["judgment_key"].nunique()
        assert (~result.verdicts["status"].isin(FAILED_STATUSES)).all()
        answers = Store(tmp_path / "store").get_many(STAGE, list(failed))
        assert set(answers) == set(failed), "stored from the direct answer, under the same key"


def _batch_ends(store: Path) -> list[dict]:
    st = Store(store)
    return list(st.get_many("batch_end", list(st.keys("batch_end"))).values())


_CHILD = textwrap.dedent("""
    import sys
    from multiverse.engine import run
    from multiverse.model import LiteLLMClient
    from multiverse.spec import load_spec
    run(load_spec(sys.argv[1]), out=sys.argv[2], store=sys.argv[3], client=LiteLLMClient(jobs=4), jobs=4,
        progress=False)
""")


@pytest.mark.slow
def test_a_run_killed_while_its_batch_is_in_flight_polls_it_again_and_pays_once(tmp_path):
    with BatchServer(audit_responder, hold=True) as server:
        spec = _spec(tmp_path, server.url, ["judge"], setting="single_turn")
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(spec), str(tmp_path / "run"), str(tmp_path / "store")],
                                 env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # The batch is submitted, recorded and looked at once: then the run dies without a word.
            assert server.submitted.wait(300) and server.polled.wait(60), child.stderr
            os.kill(child.pid, signal.SIGKILL)
            child.wait(60)
        finally:
            if child.poll() is None:
                child.kill()
        direct_before = server.counts["chat"]
        server.release()
        result = _run(spec, tmp_path / "store", tmp_path / "run")
        assert server.counts["batches"] == 1 and server.counts["files"] == 1, "the batch was polled, not submitted again"
        assert server.counts["chat"] == direct_before, "no request sent again: the rollouts were stored, the judge batched"
        assert set(server.lines.values()) == {1} and len(server.lines) == result.verdicts["judgment_key"].nunique()
        assert (~result.verdicts["status"].isin(FAILED_STATUSES)).all()
        assert KEY.encode() not in _store_bytes(tmp_path / "store")


def test_plan_shows_the_batch_price_and_turnaround(tmp_path):
    # gpt-4o-mini has a batch price in litellm's list; a fine-tuned gpt-3.5 has none, so half its direct price.
    for model, source in (("openai/gpt-4o-mini", "batch price"), ("openai/ft:gpt-3.5-turbo-0125", "half the direct price")):
        spec = load_spec(_spec(tmp_path, "http://127.0.0.1:9/v1", ["systems", "judge"], model=model))
        direct = load_spec(_spec(tmp_path, "http://127.0.0.1:9/v1", [], model=model, name="direct.yaml"))
        batched, plain = plan(spec, store=tmp_path / "store"), plan(direct, store=tmp_path / "store")
        assert batched.batch is not None and plain.batch is None
        assert batched.batch.prices == {model: source}
        for stage in ("rollout", "judge"):
            assert plain.stages[stage].cost > 0
        assert batched.stages["judge"].cost == pytest.approx(plain.stages["judge"].cost / 2)
        assert batched.batch.cost == pytest.approx(batched.batch.direct_cost / 2)
        # The simulated user is sent directly: the rollout costs more than half.
        assert plain.stages["rollout"].cost / 2 < batched.stages["rollout"].cost < plain.stages["rollout"].cost
        # A two-turn conversation with its system batched: two waves, then the judge's.
        assert batched.batch.waves == 3 and batched.batch.turnaround_seconds == 3 * 24 * 3600
        assert any(note.startswith("batch (systems, judge)") and "72.0 h" in note for note in batched.notes)
        assert "batch" in batched.as_dict() and "batch" not in plain.as_dict()


@pytest.mark.parametrize(("batch", "expected"), [
    ({"roles": ["jury"]}, "batch.roles.0 (line"),
    ({"roles": ["judge", "judge"]}, "duplicate role 'judge'"),
    ({"poll": 0}, "batch.poll (line"),
    ({"window": "1h"}, "batch.window (line"),
])
def test_a_bad_batch_block_is_one_line_naming_the_field(tmp_path, batch, expected):
    path = _spec(tmp_path, "http://127.0.0.1:9/v1", [])
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["batch"] = batch
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert len(str(raised.value).splitlines()) == 1 and expected in str(raised.value)
    assert str(path) in str(raised.value)


def test_a_batched_role_without_a_batch_api_is_refused_at_load(tmp_path):
    path = _spec(tmp_path, "http://127.0.0.1:9/v1", ["judge"])
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["judge"]["model"] = "anthropic/claude-3-haiku-20240307"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    message = str(raised.value)
    assert len(message.splitlines()) == 1 and "judge.model" in message and "batch.roles" in message


def test_batch_is_not_a_measurement_choice(tmp_path):
    batched = load_spec(_spec(tmp_path, "http://127.0.0.1:9/v1", ["judge"]))
    direct = load_spec(_spec(tmp_path, "http://127.0.0.1:9/v1", [], name="direct.yaml"))
    assert batched.measurement() == direct.measurement()
    path = _spec(tmp_path, "http://127.0.0.1:9/v1", [], name="axis.yaml")
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["axes"] = {"mode": {"direct": {"batch.roles": []}, "batched": {"batch.roles": ["judge"]}}}
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(SpecError, match="batch"):
        load_spec(path)


def test_an_axis_giving_a_batched_role_a_model_without_a_batch_api_is_refused_before_any_call(tmp_path):
    with BatchServer(audit_responder) as server:
        path = _spec(tmp_path, server.url, ["judge"], setting="single_turn")
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        document["axes"]["judge"]["b"] = {"judge.model": "anthropic/claude-3-haiku-20240307"}
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        with pytest.raises(SpecError) as raised:
            _run(path, tmp_path / "store", tmp_path / "run")
        assert len(str(raised.value).splitlines()) == 1 and "batch.roles" in str(raised.value)
        assert "anthropic/claude-3-haiku-20240307" in str(raised.value)
        assert not server.counts and not (tmp_path / "run").exists()


_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 12), ending=st.sampled_from(["complete", "expire", "partial", "fail"]), answered=st.integers(0, 12),
       failing=st.sets(st.integers(0, 11)), prose=st.sets(st.integers(0, 11)), per_batch=st.integers(1, 12))
def test_every_batched_request_is_kept_once_or_counted_failed_never_both(tmp_path_factory, n, ending, answered,
                                                                          failing, prose, per_batch):
    """Whatever a batch ends in, each request is an answer kept under its key or a failure with its reason."""
    from multiverse.core import ModelConfig
    from multiverse.model import BatchCall, BatchSender

    def answer(body: dict) -> str:
        i = int(body["messages"][-1]["content"])
        return "not JSON at all" if i in prose else json.dumps({"n": i})

    folder = tmp_path_factory.mktemp("sender")
    with BatchServer(answer, ending=ending, answered=answered, fails=lambda key: calls[key].messages[-1]["content"]
                     in {str(i) for i in failing}) as server:
        config = ModelConfig("openai/fake", {}, server.url, KEY_ENV)
        calls = {}
        for i in range(n):
            messages = [{"role": "user", "content": str(i)}]
            key = request_key(config, messages, seed=i, schema=_SCHEMA)
            calls[key] = BatchCall(key, config, messages, {"seed": i, "schema": _SCHEMA, "schema_name": "answer"})
        store = Store(folder / "store")
        report = BatchSender(LiteLLMClient(jobs=2), store, poll=0.001, max_lines=per_batch).send(calls)
        kept = store.get_many(STAGE, list(calls))
        assert kept.keys().isdisjoint(report.failed) and kept.keys() | report.failed.keys() == calls.keys()
        assert report.answered == len(kept) and set(server.lines.values()) <= {1}
        for key, record in kept.items():
            assert record["answer"]["parsed"] == {"n": int(calls[key].messages[-1]["content"])}
        for key, reason in report.failed.items():
            i = int(calls[key].messages[-1]["content"])
            expired = ending == "expire" and list(calls).index(key) % per_batch >= answered
            refused = ending == "fail" and reason == "batch failed: no answer (the file was refused)"
            assert refused or expired or (ending == "partial" and i in failing) or i in prose, reason
        # one batch per per_batch requests, each recorded as ended, adding up to every request
        ended = _batch_ends(folder / "store")
        assert len(ended) == report.submitted == server.counts["batches"] == -(-n // per_batch)
        assert sum(e["answered"] + len(e["failed"]) for e in ended) == n
        assert KEY.encode() not in _store_bytes(folder / "store")


def test_a_counted_plan_says_its_costs_are_direct_prices(tmp_path, monkeypatch):
    import multiverse.engine._pipeline as pipeline

    monkeypatch.setattr(pipeline, "MAX_UNITS", 1)  # any grid is then counted, not listed
    counted = plan(load_spec(_spec(tmp_path, "http://127.0.0.1:9/v1", ["judge"], model="openai/gpt-4o-mini")),
                   store=tmp_path / "store")
    assert counted.stages["judge"].stored is None and counted.batch is None
    assert "the costs are direct prices: the batched roles (judge) pay litellm's batch price" in counted.notes[0]


@pytest.mark.slow
def test_a_batch_run_and_the_same_run_direct_give_the_same_tables_rates_and_curve(tmp_path):
    """Batch mode is not a measurement choice: a batched run and the same spec sent directly, each on a store of
    its own (so each pays for its answers), write the same universes, verdicts and rates, and print the same
    curve (issue 42: the same data through two doors)."""
    from cli_runner import run_cli

    with BatchServer(audit_responder) as server:
        batched = _spec(tmp_path, server.url, ["generator", "systems", "user", "judge"])
        direct = _spec(tmp_path, server.url, [], name="direct.yaml")
        _run(batched, tmp_path / "store-batch", tmp_path / "batch")
        assert server.counts["chat"] == 0 and server.counts["batches"] > 0
        _run(direct, tmp_path / "store-direct", tmp_path / "direct")
        assert server.counts["chat"] == len(server.lines), "the direct run sent what the batches carried"
    tables = {}
    for name in ("batch", "direct"):
        folder = tmp_path / name
        manifest = json.loads((folder / "manifest.json").read_text())
        tables[name] = (manifest["universes"], pd.read_parquet(folder / "verdicts.parquet"),
                        pd.read_parquet(folder / "rates.parquet"))
    (universes, verdicts, rates), (universes_d, verdicts_d, rates_d) = tables["batch"], tables["direct"]
    assert universes == universes_d
    pd.testing.assert_frame_equal(verdicts, verdicts_d)
    pd.testing.assert_frame_equal(rates, rates_d)
    assert rates["n"].sum() > 0
    curves = []
    for name in ("batch", "direct"):
        code, out, err = run_cli(["curve", tmp_path / name, "--threshold", "0.5", "--boot", "99", "--json"])
        assert code == 0, err
        curves.append(json.loads(out))
    assert json.dumps(curves[0], sort_keys=True) == json.dumps(curves[1], sort_keys=True)
