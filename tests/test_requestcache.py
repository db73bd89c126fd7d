"""The request cache: no request is sent twice, counted where requests arrive.

The pipeline tests count at the transport (``tests/transport.py``: the sim
provider's handler digests every request body it receives), never from the
pipeline's own bookkeeping. The unit tests drive :class:`RequestCache` with a
client that answers from the request and counts what reaches it.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import tiny_spec_document
from fakeserver import FakeServer
from transport import SimTransportLog, Uncached

import multiverse.model
import multiverse.model._requestcache as requestcache
from multiverse.core._config import ModelConfig
from multiverse.engine._pipeline import run
from multiverse.errors import ModelError
from multiverse.model._client import Completion
from multiverse.model._llm import LiteLLMClient
from multiverse.model._requestcache import STAGE, RequestCache, request_key
from multiverse.spec import load_spec
from multiverse.store import SHAPES, CorruptEntryWarning, StageGc, Store
from multiverse.work._units import build_work, referenced_keys

MODEL = ModelConfig(model="openai/any", params={"temperature": 0.7}, api_base="http://127.0.0.1:9/v1")
HELLO = [{"role": "user", "content": "hello"}]


class Answering:
    """A model client whose answer is a function of the request; counts the calls that reach it."""

    def __init__(self, *, delay: float = 0.0, fail: int = 0, hold: bool = False):
        self.calls = 0
        self.delay = delay
        self.fail = fail  # the first `fail` calls raise
        #: with ``hold``, every call waits for ``release`` once it has set ``sending``
        self.hold, self.sending, self.release = hold, threading.Event(), threading.Event()
        self.caller = 0  # the thread in the held call
        self._lock = threading.Lock()

    def complete(self, config, messages, *, seed=None, schema=None, schema_name="answer", tools=None):
        with self._lock:
            self.calls += 1
            failing = self.calls <= self.fail
        if self.hold:
            self.caller = threading.get_ident()
            self.sending.set()
            self.release.wait(timeout=300)
        time.sleep(self.delay)
        if failing:
            raise ModelError("server_error after 6 attempts", reason="server_error", retryable=True)
        text = f"{config.model}|{seed}|{messages[-1]['content']}"
        return Completion(text=text, parsed={"echo": text} if schema else None, tool_calls=[], model_reported="m-1",
                          usage={"prompt_tokens": 3, "completion_tokens": 5}, cost=0.25, seconds=0.01, attempts=1)


def _followers_waiting(monkeypatch, client: Answering, followers: int) -> threading.Event:
    """Set once ``followers`` threads other than the one in ``client``'s call wait on that call in flight:
    a follower asks whether to stop (``interrupt.check``) each time its wait for the answer runs out."""
    everyone, seen, lock = threading.Event(), set(), threading.Lock()
    check = requestcache.interrupt.check

    def counting_check(*args, **kwargs):
        with lock:  # the caller asks too (before its call, as it claims the request): it is not counted
            seen.add(threading.get_ident())
            if client.sending.is_set() and len(seen - {client.caller}) >= followers:
                everyone.set()
        return check(*args, **kwargs)

    monkeypatch.setattr(requestcache.interrupt, "check", counting_check)
    return everyone


def _cache(tmp_path: Path, client=None) -> RequestCache:
    return RequestCache(client or Answering(), Store(tmp_path / "store", shapes=SHAPES).open())


# -- the key -------------------------------------------------------------------------


def test_every_input_that_changes_an_answer_changes_the_key():
    base = request_key(MODEL, HELLO, seed=1)
    variants = [
        request_key(MODEL, HELLO, seed=2),
        request_key(MODEL, HELLO, seed=None),
        request_key(MODEL, [{"role": "user", "content": "hello!"}], seed=1),
        request_key(MODEL, [{"role": "system", "content": ""}, *HELLO], seed=1),
        request_key(ModelConfig(model="openai/other", params=MODEL.params, api_base=MODEL.api_base), HELLO, seed=1),
        request_key(ModelConfig(model=MODEL.model, params={"temperature": 0.2}, api_base=MODEL.api_base), HELLO, seed=1),
        request_key(ModelConfig(model=MODEL.model, params=MODEL.params, api_base="http://127.0.0.1:10/v1"), HELLO, seed=1),
        request_key(MODEL, HELLO, seed=1, schema={"type": "object"}),
        request_key(MODEL, HELLO, seed=1, schema={"type": "object"}, schema_name="judgment"),
        request_key(MODEL, HELLO, seed=1, tools=[{"type": "function", "function": {"name": "lookup"}}]),
    ]
    assert len({base, *variants}) == len(variants) + 1
    # The same request spelled differently (key order, 1 vs 1.0, a transport-only param) is the same key.
    respelled = ModelConfig(model=MODEL.model, params={"temperature": 0.7, "timeout": 30}, api_base=MODEL.api_base)
    assert request_key(respelled, [{"content": "hello", "role": "user"}], seed=1) == base


def test_a_sim_model_is_keyed_by_its_world_content_not_its_path(tmp_path):
    world = (Path(__file__).resolve().parents[1] / "multiverse" / "sim" / "worlds" / "deception.yaml").read_text()
    (tmp_path / "a.yaml").write_text(world)
    (tmp_path / "b.yaml").write_text(world)
    (tmp_path / "c.yaml").write_text(world.replace("single_turn_pressure: 0.1", "single_turn_pressure: 0.2", 1))
    keys = {name: request_key(ModelConfig(model="sim/atlas", api_base=f"sim://{tmp_path / name}"), HELLO, seed=1)
            for name in ("a.yaml", "b.yaml", "c.yaml")}
    assert keys["a.yaml"] == keys["b.yaml"] != keys["c.yaml"]


def test_no_credential_enters_the_key(monkeypatch):
    """Userinfo, a key in the query, a credential header or param, a credential's value in a param:
    none reaches the digest (changing them does not change the key)."""
    monkeypatch.setenv("MV_REQUEST_TOKEN", "CANARY-request-9f3e7a51")
    seen: list[str] = []
    real = requestcache.digest
    monkeypatch.setattr(requestcache, "digest", lambda obj, n=16: seen.append(json.dumps(obj)) or real(obj, n))
    keys = {request_key(ModelConfig(model="openai/x", api_base=f"https://{who}@api.example:8443/v1?key={who}",
                                    params={"extra_headers": {"Authorization": f"Bearer {who}"}, "api_key": who,
                                            "user": "CANARY-request-9f3e7a51"}), HELLO, seed=1)
            for who in ("alice:CANARY-one-5521", "bob:CANARY-two-8812")}
    assert len(keys) == 1
    assert seen and not any("CANARY" in text for text in seen)
    assert any("api.example:8443/v1" in text for text in seen)  # where it is served still counts


# -- serving -------------------------------------------------------------------------


def test_a_repeat_is_served_from_the_store_at_no_cost_and_counted_as_reused(tmp_path):
    client = Answering()
    cache = _cache(tmp_path, client)
    first = cache.complete(MODEL, HELLO, seed=1, schema={"type": "object"})
    again = cache.complete(MODEL, HELLO, seed=1, schema={"type": "object"})
    assert client.calls == 1 and (cache.sent, cache.stored_answers) == (1, 1)
    assert (first.cost, first.attempts, first.usage["completion_tokens"]) == (0.25, 1, 5)
    assert (again.text, again.parsed, again.model_reported) == (first.text, first.parsed, first.model_reported)
    assert (again.cost, again.attempts, sum(again.usage.values())) == (0.0, 0, 0)
    # A later run (a new cache on the same store) sends nothing either.
    later = _cache(tmp_path, Answering())
    assert later.complete(MODEL, HELLO, seed=1, schema={"type": "object"}).text == first.text
    assert later.client.calls == 0


def test_replicates_and_samples_differ_by_seed_and_are_each_sent(tmp_path):
    client = Answering()
    cache = _cache(tmp_path, client)
    answers = {cache.complete(MODEL, HELLO, seed=seed).text for seed in range(5)}
    assert client.calls == 5 and len(answers) == 5


def test_a_failure_is_never_kept_and_the_next_call_sends_again(tmp_path):
    client = Answering(fail=1)
    cache = _cache(tmp_path, client)
    with pytest.raises(ModelError):
        cache.complete(MODEL, HELLO, seed=1)
    assert list(cache.store.keys(STAGE)) == []
    assert cache.complete(MODEL, HELLO, seed=1).attempts == 1
    assert client.calls == 2 and len(list(cache.store.keys(STAGE))) == 1


def test_identical_calls_in_flight_at_once_are_sent_once(tmp_path, monkeypatch):
    client = Answering(hold=True)  # the call is held until the 11 others wait on it
    following = _followers_waiting(monkeypatch, client, 11)
    cache = _cache(tmp_path, client)
    results: list[Completion] = []
    threads = [threading.Thread(target=lambda: results.append(cache.complete(MODEL, HELLO, seed=7))) for _ in range(12)]
    for t in threads:
        t.start()
    try:
        assert following.wait(timeout=300)
    finally:
        client.release.set()
    for t in threads:
        t.join()
    assert client.calls == 1 and len(results) == 12
    assert len({r.text for r in results}) == 1
    assert sorted(r.attempts for r in results) == [0] * 11 + [1]
    assert sum(r.cost for r in results) == 0.25 and cache.shared == 11


def test_a_failure_shared_with_waiters_keeps_its_own_count_whatever_copies_exceptions(tmp_path, monkeypatch):
    """tblib (imported by Dask) registers a reducer under which a copied exception shares
    the original's attributes: a waiter's "sent nothing" must still not reach the sender's error."""
    def rebuild(cls, args, attributes):
        exc = cls.__new__(cls)
        exc.args, exc.__dict__ = args, attributes  # as tblib's unpickle_exception_with_attrs does
        return exc

    monkeypatch.setattr(ModelError, "__reduce_ex__", lambda exc, protocol: (rebuild, (type(exc), exc.args, exc.__dict__)))
    test_a_failure_in_flight_fails_its_waiters_without_a_request_and_is_not_kept(tmp_path, monkeypatch)


def test_a_failure_in_flight_fails_its_waiters_without_a_request_and_is_not_kept(tmp_path, monkeypatch):
    client = Answering(fail=1, hold=True)  # the failing call is held until the 5 others wait on it
    following = _followers_waiting(monkeypatch, client, 5)
    cache = _cache(tmp_path, client)
    errors: list[ModelError] = []

    def call():
        try:
            cache.complete(MODEL, HELLO, seed=7)
        except ModelError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    try:
        assert following.wait(timeout=300)
    finally:
        client.release.set()
    for t in threads:
        t.join()
    client.hold = False
    assert client.calls == 1 and len(errors) == 6
    assert sorted(e.requests for e in errors if e.requests is not None) == [0] * 5  # the waiters sent nothing
    assert {e.reason for e in errors} == {"server_error"}
    assert cache.complete(MODEL, HELLO, seed=7).attempts == 1 and client.calls == 2


def test_a_concurrent_run_waits_for_the_claimed_request_instead_of_sending_it(tmp_path):
    """Two caches on one store (two runs): the second finds the first's claim and is served its answer."""
    first = _cache(tmp_path, Answering(hold=True))
    store = Store(tmp_path / "store", shapes=SHAPES)
    waiting = threading.Event()
    claimed = store.claimed

    def seen_claimed(stage: str, key: str) -> bool:
        found = claimed(stage, key)
        if found:
            waiting.set()  # the second run found the first's claim, and waits on it
        return found

    store.claimed = seen_claimed  # type: ignore[method-assign]
    second = RequestCache(Answering(), store)
    got: list[Completion] = []
    leader = threading.Thread(target=lambda: got.append(first.complete(MODEL, HELLO, seed=3)))
    leader.start()
    try:
        assert first.client.sending.wait(timeout=300)  # the first holds the claim and is sending
        served: list[Completion] = []
        follower_thread = threading.Thread(target=lambda: served.append(second.complete(MODEL, HELLO, seed=3)))
        follower_thread.start()
        assert waiting.wait(timeout=300)
    finally:
        first.client.release.set()
    leader.join()
    follower_thread.join()
    follower = served[0]
    assert second.client.calls == 0 and first.client.calls == 1
    assert follower.text == got[0].text and follower.attempts == 0


def test_a_bad_request_entry_is_quarantined_and_the_request_sent_again(tmp_path):
    cache = _cache(tmp_path)
    key = request_key(MODEL, HELLO, seed=1)
    path = cache.store.root / STAGE / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"status": "ok", "reason": "", "answer": {"text": 5}}))
    with pytest.warns(CorruptEntryWarning):
        assert cache.complete(MODEL, HELLO, seed=1).attempts == 1
    assert cache.client.calls == 1 and cache.store.get(STAGE, key)["answer"]["text"].startswith("openai/any|1|")


def test_repair_requests_are_counted_where_they_arrive(tmp_path):
    """A judge answer that needed its repair request: 2 requests at the server, 2 in the stored provenance."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    with FakeServer(script=["prose", "ok"]) as server:
        cache = _cache(tmp_path, LiteLLMClient(max_retries=0))
        config = ModelConfig(model="openai/fake", api_base=server.url)
        completion = cache.complete(config, HELLO, seed=1, schema=schema, schema_name="judgment")
        assert len(server.requests) == 2 and completion.attempts == 2
        record = cache.store.get(STAGE, request_key(config, HELLO, seed=1, schema=schema, schema_name="judgment"))
        assert record["provenance"]["calls"] == 2
        assert cache.complete(config, HELLO, seed=1, schema=schema, schema_name="judgment").attempts == 0
        assert len(server.requests) == 2


# -- a run, counted at the transport -------------------------------------------------


def _grid(tmp_path: Path) -> Path:
    """The tiny simulated grid with what a real one has: 2 systems, 2 replicates, 2 judge samples, 2 judges."""
    document = tiny_spec_document()
    document["rollout"]["replicates"] = 2
    document["judge"]["samples"] = 2
    document["axes"] = {"judge": {"a": {"judge.model": "sim/judge-a"}, "b": {"judge.model": "sim/judge-b"}}}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _records(store: Path, stage: str, keys) -> dict:
    found = Store(store, shapes=SHAPES).get_many(stage, keys)
    return {k: {f: v for f, v in r.items() if f not in ("provenance", "stored_at")} for k, r in found.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The grid run three times at the transport: cached (then again), and with the cache taken out (as before)."""
    root = tmp_path_factory.mktemp("requestcache")
    spec = load_spec(_grid(root))
    out = {}
    with SimTransportLog() as log:
        result = run(spec, store=root / "cached", out=root / "run-cached", progress=False, jobs=4)
        out["cached"] = (result, log.summary())
        mark = log.mark()
        run(spec, store=root / "cached", out=root / "run-again", progress=False, jobs=4)
        out["again"] = log.summary(mark)
        mark = log.mark()
        with pytest.MonkeyPatch.context() as patch:
            # The engine takes the cache from the model room's facade, where it is replaced.
            patch.setattr(multiverse.model, "RequestCache", Uncached)
            result = run(spec, store=root / "uncached", out=root / "run-uncached", progress=False, jobs=4)
        out["uncached"] = (result, log.summary(mark))
    return spec, root, out


def test_a_grid_sends_no_request_twice_and_a_second_run_sends_none(runs):
    _spec, _root, out = runs
    result, sent = out["cached"]
    _, before = out["uncached"]
    assert before["repeats"] > 0  # the grid does ask identical things (the user's opening turn per system)
    assert sent["repeats"] == 0 and sent["requests"] == sent["unique"] == before["unique"]
    assert out["again"]["requests"] == 0
    # The run's own count is what went over the wire.
    assert sum(stage.calls for stage in result.manifest.stages.values()) == sent["requests"]


def test_the_cache_changes_no_record_no_table_and_keeps_replicates_and_samples_distinct(runs):
    spec, root, out = runs
    work = build_work(spec)
    cached, uncached = out["cached"][0], out["uncached"][0]
    for stage, keys in referenced_keys(spec).items():
        assert _records(root / "cached", stage, keys) == _records(root / "uncached", stage, keys), stage
    columns = [c for c in cached.verdicts.columns if c != "seconds"]
    pd.testing.assert_frame_equal(cached.verdicts[columns], uncached.verdicts[columns])
    pd.testing.assert_frame_equal(cached.rates, uncached.rates)
    # Replicates stay distinct rollouts, samples distinct judgments (what a collapse would merge).
    transcripts = _records(root / "cached", "transcript", work.transcripts)
    by_replicate = {}
    for key, unit in work.transcripts.items():
        by_replicate.setdefault((unit.case_key, unit.system), set()).add(json.dumps(transcripts[key]["turns"]))
    assert any(len(texts) == 2 for texts in by_replicate.values())
    first_turns = {json.dumps(transcripts[k]["turns"][0]) for k in work.transcripts}
    assert len(first_turns) > len({u.case_key for u in work.transcripts.values()})


def test_stored_requests_pass_the_shape_checks_and_gc_keeps_them(runs):
    spec, root, out = runs
    store = Store(root / "cached", shapes=SHAPES)
    keys = list(store.keys(STAGE))
    assert len(keys) == out["cached"][1]["requests"]
    assert len(store.get_many(STAGE, keys)) == len(keys) and store.quarantined == 0
    report = store.gc(referenced_keys(spec), fresh=0)
    assert report.stages[STAGE] == StageGc(kept=len(keys), removed=0, bytes=0)
