"""Batch mode against a hostile provider (issue 45): what its files and statuses may be, and what comes of each.

The loopback server (tests/batch_server.py) answers every request honestly,
then serves output and error files rewritten by the test: lines without end,
files without end, lines that are not batch lines, requests answered twice or
never sent, statuses that never end, looks never answered. Whatever it serves,
each request is an answer kept under its own key (the one the server gave it)
or a failure with its reason, never both, and nothing the files garble becomes
a label.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest
from batch_server import BatchServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import multiverse.model._batch as batch_module
from multiverse.core import ModelConfig
from multiverse.model import STAGE, BatchCall, BatchSender, LiteLLMClient, request_key
from multiverse.store import Store

KEY_ENV, KEY = "MV_BATCH_TEST_KEY", "sk-batch-test-5f1e0c77d2"
_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def _answer(body: dict) -> str:
    return json.dumps({"n": int(body["messages"][-1]["content"])})


def _calls(url: str, n: int) -> dict[str, BatchCall]:
    config = ModelConfig("openai/fake", {}, url, KEY_ENV)
    calls = {}
    for i in range(n):
        messages = [{"role": "user", "content": str(i)}]
        key = request_key(config, messages, seed=i, schema=_SCHEMA)
        calls[key] = BatchCall(key, config, messages, {"seed": i, "schema": _SCHEMA, "schema_name": "answer"})
    return calls


def _send(server: BatchServer, store: Store, n: int, **sender) -> tuple[dict[str, BatchCall], object]:
    calls = _calls(server.url, n)
    client = LiteLLMClient(jobs=2, timeout=sender.pop("timeout", 20))
    return calls, BatchSender(client, store, poll=0.001, **sender).send(calls)


def _number(call: BatchCall) -> int:
    return int(call.messages[-1]["content"])


def _lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _jsonl(lines: list) -> bytes:
    return b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines)


def _assert_kept_or_failed(store: Store, calls: dict[str, BatchCall], report) -> dict[str, dict]:
    kept = store.get_many(STAGE, list(calls))
    assert kept.keys().isdisjoint(report.failed) and kept.keys() | report.failed.keys() == calls.keys()
    assert report.answered == len(kept) == len(report.paid) and not report.unsettled
    for key, record in kept.items():  # each answer is its own request's, never another's
        assert record["answer"]["parsed"] == {"n": _number(calls[key])}
    return kept


def test_an_output_file_without_end_is_cut_at_its_bound_and_nothing_of_it_is_kept(tmp_path):
    sent = []

    def endless(kind: str, data: bytes) -> Iterator[bytes]:
        yield data  # the honest answers first: a cut file keeps none of them either
        for _ in itertools.count():
            sent.append(2**20)
            yield b"x" * 2**20

    with BatchServer(_answer, rewrite=endless) as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 2)
    assert not store.get_many(STAGE, list(calls)) and report.answered == 0
    assert set(report.failed) == set(calls)
    assert all("past 16 MB (8 MB a request); not read further" in r for r in report.failed.values())
    # read as a stream: the reader hung up near its bound, not after the server's gigabytes
    assert len(sent) * 2**20 < 16 * 2**20 + 64 * 2**20


def test_a_line_past_its_bound_is_skipped_and_the_other_lines_are_kept(tmp_path):
    def one_long_line(kind: str, data: bytes) -> bytes:
        lines = data.splitlines()
        return b"\n".join([b'{"custom_id": "' + b"y" * (9 * 2**20) + b'"}', *lines[1:]]) + b"\n"

    with BatchServer(_answer, rewrite=one_long_line) as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 3)
    kept = _assert_kept_or_failed(store, calls, report)
    assert sorted(_number(calls[k]) for k in kept) == [1, 2]
    (reason,) = report.failed.values()
    assert reason.startswith("batch completed: no answer")


_GARBLED = [
    b"not json at all",
    b"[" * 200_000,  # nests past the parser's recursion limit
    b"null", b"42", b'"text"', b"[]",
    {"custom_id": 7, "response": {"status_code": 200}},  # an id of the wrong type names no request
]


def _garble(line: dict, how: str) -> list:
    body = line["response"]["body"]
    if how == "response_text":
        return [{**line, "response": "ok"}]
    if how == "body_list":
        return [{**line, "response": {"status_code": 200, "body": [body]}}]
    if how == "status_text":
        return [{**line, "response": {**line["response"], "status_code": "200"}}]
    if how == "error_text":
        return [{**line, "response": {"status_code": 500, "body": "boom"}, "error": "\x1b[31m" + "e" * 100_000}]
    usage = {"negative": -5, "huge": 10**30, "float": 1.5, "bool": True, "text": "12"}[how]
    return [{**line, "response": {**line["response"], "body": {**body, "usage": {**body["usage"], "prompt_tokens": usage}}}}]


_HOW = ["response_text", "body_list", "status_text", "error_text", "negative", "huge", "float", "bool", "text"]


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fates=st.lists(st.sampled_from(["keep", "drop", "twice", "twice_other", "also_error", *_HOW]), min_size=1,
                      max_size=8),
       noise=st.lists(st.sampled_from(range(len(_GARBLED) + 1)), max_size=4))
def test_whatever_the_files_hold_each_request_is_its_own_answer_or_a_failure(tmp_path_factory, fates, noise):
    """Lines dropped, answered twice (the same or another answer), in both files, garbled, or among noise and
    requests never sent: only a request answered once by a well-formed line is kept, with its own answer."""
    def hostile(kind: str, data: bytes) -> bytes:
        out: list = []
        for line, fate in zip(_lines(data), fates, strict=True):
            if fate == "keep":
                out.append(line)
            elif fate == "twice":
                out += [line, line]
            elif fate == "twice_other":  # a second line for the same request answering another number
                other = json.loads(json.dumps(line))
                other["response"]["body"]["choices"][0]["message"]["content"] = json.dumps({"n": 10_000})
                out += [line, other]
            elif fate == "also_error":  # answered here, and failed in the error file (see Both)
                out.append(line)
            elif fate != "drop":
                out += _garble(line, fate)
        for i in noise:  # noise, and a request this batch never carried
            out.insert(i % (len(out) + 1), _GARBLED[i] if i < len(_GARBLED) else
                       {**_lines(data)[0], "custom_id": "never-sent"})
        return _jsonl(out)

    class Both(BatchServer):
        def look(self, batch_id: str) -> dict:
            batch = super().look(batch_id)
            if batch.get("status") == "completed" and not batch.get("error_file_id"):
                sent = _lines(self._files[batch["output_file_id"]])
                batch["error_file_id"] = "file-errors"
                self._files["file-errors"] = _jsonl([
                    {"custom_id": line["custom_id"], "response": None,
                     "error": {"code": "server_error", "message": "and failed"}}
                    for line, fate in zip(sent, fates, strict=True) if fate == "also_error"])
            return batch

    folder = tmp_path_factory.mktemp("hostile")
    with Both(_answer, rewrite=hostile) as server:
        store = Store(folder / "store")
        calls, report = _send(server, store, len(fates))
        assert set(server.lines.values()) == {1}, "each request submitted and answered once"
    kept = _assert_kept_or_failed(store, calls, report)
    assert {_number(calls[k]) for k in kept} == {i for i, fate in enumerate(fates) if fate == "keep"}
    for key, reason in report.failed.items():
        fate = fates[_number(calls[key])]
        if fate in ("twice", "twice_other", "also_error"):
            assert "answered this request 2 times; none kept" in reason
        assert "\x1b" not in reason and len(reason) <= 500
    assert report.cost == pytest.approx(sum(c.cost for c in report.paid.values()))
    assert KEY.encode() not in b"".join(p.read_bytes() for p in (folder / "store").rglob("*") if p.is_file())


def test_a_status_that_never_ends_is_given_up_on_and_the_batch_never_paid_again(tmp_path):
    with BatchServer(_answer, status="in_progress") as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 3, give_up_after=0)
        assert set(report.unsettled) == set(calls) and not report.failed and not report.answered
        assert all("still in_progress" in r and "no longer polled" in r for r in report.unsettled.values())
        # Left in flight: the next run polls the same batch (and gives up again), it submits nothing.
        again = BatchSender(LiteLLMClient(jobs=2), store, poll=0.001, give_up_after=0).send(calls)
        assert again.resumed == 1 and again.submitted == 0 and set(again.unsettled) == set(calls)
        assert server.counts["batches"] == 1 and server.counts["files"] == 1
    assert not store.get_many(STAGE, list(calls)) and not list(store.keys("batch_end"))


def test_the_poll_gives_up_a_day_and_a_half_after_submission_by_default(tmp_path):
    sender = BatchSender(LiteLLMClient(jobs=1), Store(tmp_path / "store"))
    assert sender.give_up_after == 36 * 3600


def test_an_unknown_status_or_a_silent_provider_leaves_the_batch_in_flight_within_its_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(batch_module, "POLL_FAILURES", 2)
    with BatchServer(_answer, status="\x1b[2Jbogus") as server:
        calls, report = _send(server, Store(tmp_path / "a"), 2)
    assert set(report.unsettled) == set(calls)
    # refused by litellm's own model of a batch, or by the sender: either way a reason, never a raw escape
    assert all(("unknown batch status" in r or "could not be polled" in r) and r"\x1b[2J" in r and "\x1b" not in r
               for r in report.unsettled.values()), report.unsettled
    with BatchServer(_answer, silent=True) as server:
        # 3 s: long enough for a loopback server to take a file on a loaded machine, short for a test of two looks
        calls, report = _send(server, Store(tmp_path / "b"), 2, timeout=3)
        assert server.counts["polls"] == 2, "each look ended by the client's timeout"
    assert set(report.unsettled) == set(calls)
    assert all("could not be polled" in r for r in report.unsettled.values())


def test_a_request_answered_ten_thousand_times_is_held_once_and_never_kept(tmp_path):
    # under the file's bound (16 MB for two requests): each copy is counted, one is held in memory
    def repeated(kind: str, data: bytes) -> bytes:
        first, *rest = data.splitlines()
        return (first + b"\n") * 10_000 + b"\n".join(rest) + b"\n"

    with BatchServer(_answer, rewrite=repeated) as server:
        store = Store(tmp_path / "store")
        calls, report = _send(server, store, 2)
    kept = _assert_kept_or_failed(store, calls, report)
    assert [_number(calls[k]) for k in kept] == [1]
    (reason,) = report.failed.values()
    assert reason == "batch answered this request 10000 times; none kept"
