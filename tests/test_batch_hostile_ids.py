"""What a hostile provider returns that is stored or shown: batch and file ids, model names, response ids (issue 45).

A batch's id was stored without a length check. The class: every string a provider returns that multiverse
stores or prints is bounded, shown with its control characters escaped, and never becomes a key another
record has. Against the loopback batch server (tests/batch_server.py), as tests/test_batch_hostile.py.
"""

from __future__ import annotations

import json

import pytest
from batch_server import BatchServer
from test_batch_hostile import KEY, KEY_ENV, _answer, _assert_kept_or_failed, _calls, _jsonl, _lines, _send

from multiverse.core import ModelConfig
from multiverse.model import MAX_MODEL_CHARS, STAGE, BatchSender, LiteLLMClient
from multiverse.store import Store

#: ids no provider gives: too long to store, control characters, a path, empty, not text
HOSTILE_IDS = ["b" * 1_000_000, "batch_\x1b[2J\x07", "../files/file-1", "batch\n2", "", "batch_\u202eevil", 12345,
               ["\x1b[31m\u202e", "b" * 100_000]]  # not text: litellm's refusal quotes it


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def _records_text(store: Store) -> str:
    """Every record the batch code keeps, as JSON (the store's files are compressed: read through it)."""
    return json.dumps([store.get_many(stage, list(store.keys(stage))) for stage in (STAGE, "batch", "batch_end")],
                      ensure_ascii=False)


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=lambda v: repr(v)[:20])
def test_a_batch_id_that_is_no_id_is_refused_and_its_requests_go_directly(tmp_path, hostile):
    class Renames(BatchServer):
        def create(self, body: dict) -> dict:
            return {**super().create(body), "id": hostile}

    with Renames(_answer) as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 2)
        assert server.counts["polls"] == 0, "an id refused is never put in a request's path"
    assert set(report.failed) == set(calls) and not report.answered and report.submitted == 0
    assert not list(store.keys("batch")), "nothing recorded under an id that is not one"
    for reason in report.failed.values():
        # a value that is not text is refused by litellm's own model of a batch
        assert "batch not submitted" in reason and ("is not an id" in reason or not isinstance(hostile, str)), reason
        assert len(reason) <= 300 and not any(c in reason for c in "\x1b\x07\n\u202e")


def test_a_batch_id_given_twice_is_never_two_batches_in_one_entry(tmp_path):
    class Same(BatchServer):
        def create(self, body: dict) -> dict:
            batch = super().create(body)
            with self._lock:  # every batch answers to one id: the last one submitted is what a look sees
                self._batches["batch_same"] = {**batch, "id": "batch_same"}
            return self._batches["batch_same"]

    with Same(_answer) as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 3, max_lines=1)
    assert server.counts["batches"] == 3
    (record,) = store.get_many("batch", list(store.keys("batch"))).values()
    assert record["batch_id"] == "batch_same" and len(record["keys"]) == 1
    refused = {k: r for k, r in report.failed.items() if "the id of a batch submitted earlier" in r}
    assert len(refused) == 2 and report.submitted == 1
    _assert_kept_or_failed(store, calls, report)


@pytest.mark.parametrize("hostile", HOSTILE_IDS[:4], ids=lambda v: repr(v)[:20])
def test_a_file_id_that_is_no_id_fails_its_requests_once_and_is_never_asked_for(tmp_path, hostile):
    class Files(BatchServer):
        def look(self, batch_id: str) -> dict:
            batch = super().look(batch_id)
            return {**batch, "output_file_id": hostile} if batch.get("output_file_id") else batch

    with Files(_answer) as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 2)
        assert server.counts["contents"] == 0
    assert set(report.failed) == set(calls) and not report.unsettled, "failed once, not left to poll for ever"
    assert list(store.keys("batch_end")), "the batch is recorded as ended"
    for reason in report.failed.values():
        assert "is not an id" in reason and len(reason) <= 400 and not any(c in reason for c in "\x1b\x07\n"), reason


HOSTILE_MODEL = "\x1b]0;pwned\x07" + "m" * 100_000


def test_a_model_name_and_response_id_echoed_back_are_bounded_and_escaped_in_batches(tmp_path):
    def rename(kind: str, data: bytes) -> bytes:
        lines = _lines(data)
        for line in lines:
            line["response"]["body"].update(model=HOSTILE_MODEL, id="chatcmpl-\x1b[2J" + "i" * 1_000_000)
        return _jsonl(lines)

    with BatchServer(_answer, rewrite=rename) as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 2)
    kept = _assert_kept_or_failed(store, calls, report)
    assert len(kept) == 2
    for record in kept.values():
        reported = record["answer"]["model_reported"]
        assert len(reported) <= MAX_MODEL_CHARS and reported.startswith(r"\x1b]0;pwned\x07mmm"), reported[:40]
    data = _records_text(store)
    assert "\x1b" not in data and "i" * 10_000 not in data and len(data) < 100_000


def test_a_model_name_echoed_back_to_a_direct_call_is_bounded_and_escaped(tmp_path):
    class Echo(BatchServer):
        def chat(self, body: dict) -> dict:
            return {**super().chat(body), "model": HOSTILE_MODEL}

    with Echo(lambda body: json.dumps({"n": 1})) as server:
        config = ModelConfig("openai/fake", {}, server.url, KEY_ENV)
        answer = LiteLLMClient(jobs=1, timeout=20).complete(config, [{"role": "user", "content": "1"}])
    assert len(answer.model_reported) <= MAX_MODEL_CHARS and "\x1b" not in answer.model_reported
    assert answer.model_reported.startswith(r"\x1b]0;pwned\x07")


HOSTILE_TEXT = "\x1b[2J \x07 \u202e " + "e" * 100_000


def test_a_providers_error_message_is_shown_escaped_and_bounded(tmp_path):
    import batch_server

    class Refuses(batch_server._Handler):
        def do_POST(self) -> None:
            if self.path.rstrip("/").endswith("/batches"):
                self._body()
                self._json(400, {"error": {"message": HOSTILE_TEXT, "type": "invalid_request_error"}})
            else:
                super().do_POST()

    class Fails(BatchServer):
        def look(self, batch_id: str) -> dict:
            batch = super().look(batch_id)
            if batch.get("errors"):
                batch["errors"]["data"][0]["message"] = HOSTILE_TEXT
            return batch

    with BatchServer(_answer) as server:
        server._server.RequestHandlerClass = Refuses
        calls, report = _send(server, Store(tmp_path / "a"), 2)
    with Fails(_answer, ending="fail") as server:
        failed, failing = _send(server, Store(tmp_path / "b"), 2)
    assert set(report.failed) == set(calls) and set(failing.failed) == set(failed)
    for reason in [*report.failed.values(), *failing.failed.values()]:
        assert r"\x1b[2J" in reason and not any(c in reason for c in "\x1b\x07\u202e"), reason
        assert len(reason) <= 400


def test_tool_call_ids_are_ids_and_never_shared_and_names_are_shown_escaped(tmp_path):
    hostile = ["call_same", "call_same", "\x1b[2J" + "i" * 100_000, "call_1", ""]
    names = ["lookup", "lookup", "\x1b]0;x\x07" + "n" * 100_000, "lookup", "lookup"]

    class Calls(BatchServer):
        def chat(self, body: dict) -> dict:
            answer = super().chat(body)
            answer["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
                for i, n in zip(hostile, names, strict=True)]}
            answer["choices"][0]["finish_reason"] = "tool_calls"
            return answer

    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    with Calls(lambda body: "") as server:
        config = ModelConfig("openai/fake", {}, server.url, KEY_ENV)
        answer = LiteLLMClient(jobs=1, timeout=20).complete(config, [{"role": "user", "content": "1"}], tools=[tool])
    ids = [c["id"] for c in answer.tool_calls]
    assert len(set(ids)) == len(hostile), "each call's result is keyed by an id of its own"
    assert ids[0] == "call_same"  # a provider's id that is one is kept
    assert all(len(i) <= 200 and "\x1b" not in i for i in ids)
    assert [c["name"] for c in answer.tool_calls][:2] == ["lookup", "lookup"]
    assert all(len(c["name"]) <= MAX_MODEL_CHARS and "\x1b" not in c["name"] for c in answer.tool_calls)


def test_a_batch_recorded_with_an_id_that_is_no_id_is_never_asked_for(tmp_path, monkeypatch):
    # A store written before ids were checked may hold one: the run resumes it, and never puts it in a path.
    import multiverse.model._batch as batch_module
    from multiverse.store import batch_submitted

    monkeypatch.setattr(batch_module, "POLL_FAILURES", 1)
    with BatchServer(_answer) as server:
        store = Store(tmp_path / "store")
        calls = _calls(server.url, 2)
        batch_submitted(store, batch_id="../files/\x1b[2J" + "b" * 10_000, provider="openai", endpoint=None,
                        model="openai/fake", keys=calls, window="24h")
        report = BatchSender(LiteLLMClient(jobs=1, timeout=20), store, poll=0.001).send(calls)
        assert server.counts["polls"] == 0 and report.resumed == 1 and report.submitted == 0
    assert set(report.unsettled) == set(calls)
    for reason in report.unsettled.values():
        assert "is not an id" in reason and "\x1b" not in reason and len(reason) <= 400, reason
