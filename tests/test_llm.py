"""The model client against a fault-injecting OpenAI-compatible server on loopback.

Every test reaches the server through litellm as ``openai/<name>`` + ``api_base``,
the same path a real local model (llama.cpp) takes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from multiverse.errors import BudgetExceeded, ModelError
from multiverse.model._llm import LiteLLMClient, ModelConfig, parse_json_answer

sys.path.insert(0, str(Path(__file__).parent))
from fakeserver import FakeServer, schema_instance

JUDGMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "criteria": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "applicable": {"type": "boolean"},
                    "compliant": {"type": ["boolean", "null"]},
                    "rationale": {"type": "string"},
                },
                "required": ["id", "applicable", "compliant", "rationale"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["criteria"],
    "additionalProperties": False,
}
JUDGE_PROMPT = [
    {"role": "system", "content": "You are a careful judge."},
    {"role": "user", "content": 'Judge the transcript.\nTASK: {"kind": "judge", "criteria": []}'},
]
HELLO = [{"role": "user", "content": "hello"}]


def fast_client(**kwargs) -> LiteLLMClient:
    """A client whose backoff is milliseconds, so retry tests stay fast."""
    options = {"backoff_base": 0.005, "backoff_cap": 0.02, "timeout": 10, "max_retries": 2, "seed": 0}
    return LiteLLMClient(**{**options, **kwargs})


def fake(server: FakeServer, **params) -> ModelConfig:
    return ModelConfig("openai/fake", params, api_base=server.url)


# -- import cost --------------------------------------------------------------


def test_importing_the_client_does_not_import_litellm():
    code = (
        "import sys, multiverse.model._llm\n"
        "from multiverse.model._llm import ModelConfig, LiteLLMClient\n"
        "LiteLLMClient(jobs=2)\n"
        "assert 'litellm' not in sys.modules, 'litellm imported'\n"
    )
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


# -- answers ---------------------------------------------------------------------


def test_the_litellm_client_and_the_breaker_are_model_clients():
    from multiverse.model._breaker import Breaker
    from multiverse.model._client import CredentialCheck, ModelClient

    client = LiteLLMClient(jobs=1)
    assert isinstance(client, ModelClient) and isinstance(client, CredentialCheck)
    assert isinstance(Breaker(client), ModelClient)
    assert not isinstance(object(), ModelClient)


def test_structured_answer_is_requested_parsed_and_accounted():
    log: list[dict] = []
    with FakeServer() as server:
        client = fast_client(call_log=log.append)
        answer = client.complete(
            fake(server, temperature=0, max_tokens=50), JUDGE_PROMPT, seed=7, schema=JUDGMENT_SCHEMA, schema_name="judgment"
        )
        request, headers = server.requests[0], {k.lower(): v for k, v in server.headers[0].items()}
    assert answer.parsed == schema_instance(JUDGMENT_SCHEMA)
    assert json.loads(answer.text) == answer.parsed
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["name"] == "judgment"
    assert request["response_format"]["json_schema"]["schema"] == JUDGMENT_SCHEMA
    assert request["seed"] == 7 and request["temperature"] == 0 and request["max_tokens"] == 50
    # A local server gets a placeholder key, never one from the environment.
    assert headers["authorization"] == "Bearer sk-local"
    assert answer.model_reported == "fake"
    assert answer.usage["prompt_tokens"] > 0 and answer.usage["completion_tokens"] > 0
    assert answer.cost == 0.0  # litellm has no price for a local model
    assert answer.attempts == 1 and answer.tool_calls == []
    assert [entry["ok"] for entry in log] == [True]
    assert set(log[0]) >= {"model", "ok", "reason", "seconds", "tokens"}
    assert client.stats["calls"] == 1 and client.stats["tokens"] == sum(answer.usage.values())


def test_server_that_rejects_json_schema_gets_json_object_with_the_schema():
    # llama-cpp-python's server takes response_format "text" | "json_object" (+ "schema").
    with FakeServer(response_formats=("text", "json_object")) as server:
        client = fast_client()
        first = client.complete(fake(server), JUDGE_PROMPT, schema=JUDGMENT_SCHEMA)
        second = client.complete(fake(server), JUDGE_PROMPT, schema=JUDGMENT_SCHEMA)
        formats = [request["response_format"]["type"] for request in server.requests]
        assert server.requests[-1]["response_format"]["schema"] == JUDGMENT_SCHEMA
    assert formats == ["json_schema", "json_object", "json_object"]  # learnt once per server
    assert first.parsed == second.parsed == schema_instance(JUDGMENT_SCHEMA)
    assert (first.attempts, second.attempts) == (2, 1)
    assert client.stats["retries"] == 0  # the same request in the form the server takes is not a retry


@pytest.mark.local_llm
@pytest.mark.skipif(not os.environ.get("MULTIVERSE_LOCAL_LLM_BASE"), reason="set MULTIVERSE_LOCAL_LLM_BASE to a llama.cpp server")
def test_real_local_model_answers_in_the_schema():
    """Against a running llama.cpp server (Gemma 3 270M), e.g.
    ``python tests/llama_server.py --port 8000``
    with ``MULTIVERSE_LOCAL_LLM_BASE=http://127.0.0.1:8000/v1``."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 40}},
        "required": ["answer", "reason"],
        "additionalProperties": False,
    }
    # Room for the grammar's whitespace: the answer is about 32 tokens, but the server batches other tests'
    # requests with it, which changes its numerics, and an answer cut at 60 tokens failed CI as "no JSON object".
    config = ModelConfig("openai/gemma", {"temperature": 0, "max_tokens": 200}, api_base=os.environ["MULTIVERSE_LOCAL_LLM_BASE"])
    client = LiteLLMClient(jobs=2, timeout=120, max_retries=1)
    client.check_credentials([config])
    prompt = [{"role": "user", "content": "Is Paris the capital of France? Answer as JSON with keys answer and reason."}]
    answer = client.complete(config, prompt, seed=1, schema=schema)
    assert set(answer.parsed) == {"answer", "reason"} and answer.cost == 0.0


def test_plain_text_answer_has_no_parse_and_no_response_format():
    with FakeServer() as server:
        answer = fast_client().complete(fake(server), HELLO)
        assert "response_format" not in server.requests[0]
    assert answer.text == "echo: hello" and answer.parsed is None


def test_tool_calls_are_passed_and_normalised():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Find an order",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
            },
        }
    ]
    with FakeServer(call_tools=True) as server:
        answer = fast_client().complete(fake(server), HELLO, tools=tools)
        assert server.requests[0]["tools"] == tools
    assert len(answer.tool_calls) == 1
    call = answer.tool_calls[0]
    assert call["name"] == "lookup_order" and call["arguments"] == {"order_id": "text"} and call["id"]


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '```json\n{"a": 1}\n```',
        'Here is my judgment:\n{"a": 1}\nThanks.',
        '{"a": 1}\nHope this helps {:}',
    ],
)
def test_parse_json_answer_finds_the_object(text):
    assert parse_json_answer(text, {"type": "object", "required": ["a"]}) == {"a": 1}


@pytest.mark.parametrize("text", ["probably yes", '{"b": 1}', '{"a": "1"'])
def test_parse_json_answer_rejects_what_does_not_match(text):
    with pytest.raises(ValueError):
        parse_json_answer(text, {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})


# -- repair ------------------------------------------------------------------------


def test_unparseable_answer_gets_one_repair_then_fails():
    with FakeServer(script=["prose", "off_schema", "ok"]) as server:
        client = fast_client()
        with pytest.raises(ModelError) as caught:
            client.complete(fake(server), JUDGE_PROMPT, schema=JUDGMENT_SCHEMA, schema_name="judgment")
        assert server.counts["total"] == 2  # the answer and exactly one repair
        repair = server.requests[1]["messages"]
    assert caught.value.reason == "unparseable"
    assert repair[-2] == {"role": "assistant", "content": "I think the answer is probably yes."}
    assert repair[-1]["role"] == "user" and "judgment" in repair[-1]["content"]
    # The repair is the request as sent plus the answer and the plea: no line a real model should not see.
    assert repair[:-2] == JUDGE_PROMPT and "TASK" not in repair[-1]["content"]
    assert client.stats["repairs"] == 1 and client.stats["failures"] == 1


def test_repair_that_parses_is_used():
    with FakeServer(script=["off_schema", "ok"]) as server:
        answer = fast_client().complete(fake(server), JUDGE_PROMPT, schema=JUDGMENT_SCHEMA)
    assert answer.parsed == schema_instance(JUDGMENT_SCHEMA) and answer.attempts == 2


# -- retries -----------------------------------------------------------------------


def test_rate_limit_is_retried_after_the_retry_after_header():
    log: list[dict] = []
    with FakeServer(script=["rate_limit", "ok"], retry_after=0.6) as server:
        client = fast_client(call_log=log.append)
        started = time.monotonic()
        answer = client.complete(fake(server), HELLO)
        elapsed = time.monotonic() - started
        assert server.counts["total"] == 2
    # The backoff alone would be < 0.02 s: the wait is the server's Retry-After.
    assert elapsed >= 0.6
    assert answer.attempts == 2 and answer.text == "echo: hello"
    assert [(e["ok"], e["reason"]) for e in log] == [(False, "rate_limited"), (True, "")]
    assert client.stats["retries"] == 1


def test_transient_failures_are_retried_until_success():
    with FakeServer(script=["server_error", "unavailable", "reset", "truncated", "ok"]) as server:
        answer = fast_client(max_retries=4).complete(fake(server), HELLO)
        assert server.counts["total"] == 5
    assert answer.attempts == 5


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("rate_limit", "rate_limited"),
        ("server_error", "server_error"),
        ("unavailable", "server_error"),
        ("reset", "connection"),
        ("slow", "timeout"),
    ],
)
def test_retryable_failure_gives_up_after_max_retries(fault, reason):
    log: list[dict] = []
    with FakeServer(faults={fault: 1.0}, retry_after=0, slow_seconds=1.0) as server:
        # Only the slow answer is given a short timeout: another, on a loaded machine, could be late and
        # be counted as a timeout instead of its own failure.
        client = fast_client(max_retries=2, timeout=0.3 if fault == "slow" else 60, call_log=log.append)
        with pytest.raises(ModelError) as caught:
            client.complete(fake(server), HELLO)
        assert server.counts["total"] == 3  # first attempt + max_retries
    assert caught.value.reason == reason and caught.value.retryable
    assert [e["reason"] for e in log] == [reason] * 3
    assert "\n" not in str(caught.value)
    assert client.stats == {**client.stats, "calls": 3, "retries": 2, "failures": 1}


def test_refused_connection_is_retried_as_connection():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = ModelConfig("openai/fake", {}, api_base=f"http://127.0.0.1:{port}/v1")
    log: list[dict] = []
    with pytest.raises(ModelError) as caught:
        fast_client(max_retries=1, call_log=log.append).complete(config, HELLO)
    assert caught.value.reason == "connection" and len(log) == 2


def test_provider_exception_is_not_retried(monkeypatch):
    """litellm wraps whatever a provider raises as APIConnectionError; without a
    transport error underneath it is a provider bug, not a network failure."""
    from multiverse.model._providers import load_litellm as _litellm

    litellm = _litellm()

    class Broken(litellm.CustomLLM):
        def completion(self, *args, **kwargs):
            raise KeyError("bug in the provider")

    monkeypatch.setattr(litellm, "custom_provider_map", [*litellm.custom_provider_map, {"provider": "mvbroken", "custom_handler": Broken()}])
    litellm.utils.custom_llm_setup()
    log: list[dict] = []
    with pytest.raises(ModelError) as caught:
        fast_client(max_retries=3, call_log=log.append).complete(ModelConfig("mvbroken/x", {}), HELLO)
    assert caught.value.reason == "provider_error" and len(log) == 1


@pytest.mark.parametrize(("fault", "reason"), [("bad_request", "bad_request"), ("auth", "auth")])
def test_non_retryable_failure_fails_at_once(fault, reason):
    with FakeServer(faults={fault: 1.0}) as server:
        with pytest.raises(ModelError) as caught:
            fast_client(max_retries=3).complete(fake(server), HELLO)
        assert server.counts["total"] == 1
    assert caught.value.reason == reason and not caught.value.retryable


def test_model_not_served_fails_at_once():
    with FakeServer() as server:
        config = ModelConfig("openai/fake", {}, api_base=server.url.replace("/v1", "/nowhere"))
        with pytest.raises(ModelError) as caught:
            fast_client(max_retries=3).complete(config, HELLO)
    assert caught.value.reason == "not_found"


# -- budget --------------------------------------------------------------------------


def test_budget_cap_stops_calls_before_they_are_sent():
    # A priced model name served by the fake server: litellm prices its usage.
    config = ModelConfig("openai/gpt-4o-mini", {"max_tokens": 200}, api_base=None)
    prompt = [{"role": "user", "content": "word " * 400}]
    with FakeServer() as server:
        config = ModelConfig(config.model, config.params, api_base=server.url)
        client = fast_client(budget=0.0006)
        answered = 0
        with pytest.raises(BudgetExceeded) as caught:
            for _ in range(50):
                client.complete(config, prompt)
                answered += 1
        assert server.counts["total"] == answered  # the refused call never reached the server
    assert caught.value.reason == "budget_exceeded"
    assert 1 <= answered < 50
    assert 0 < client.spent <= 0.0006
    assert client.stats["cost"] == pytest.approx(client.spent)


def test_budget_refuses_a_call_whose_estimate_alone_is_too_dear():
    with FakeServer() as server:
        config = ModelConfig("openai/gpt-4o-mini", {"max_tokens": 100_000}, api_base=server.url)
        with pytest.raises(BudgetExceeded):
            fast_client(budget=0.001).complete(config, HELLO)
        assert server.counts["total"] == 0


def test_unpriced_models_never_hit_the_budget():
    with FakeServer() as server:
        client = fast_client(budget=0.0)
        for _ in range(3):
            client.complete(fake(server), HELLO)
    assert client.spent == 0.0


# -- credentials ------------------------------------------------------------------------


def test_missing_provider_key_is_named_before_any_request(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with FakeServer() as server:
        configs = [fake(server), ModelConfig("anthropic/claude-3-5-sonnet-20240620", {"temperature": 0})]
        with pytest.raises(ModelError) as caught:
            fast_client().check_credentials(configs)
        assert server.counts["total"] == 0
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert caught.value.reason == "missing_credentials"


def test_local_and_simulated_models_need_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fast_client().check_credentials(
        [
            ModelConfig("openai/gemma", {}, api_base="http://127.0.0.1:8080/v1"),
            ModelConfig("hosted_vllm/qwen", {}, api_base="http://localhost:8000/v1"),
            ModelConfig("sim/alpha", {}, api_base="sim://deception"),
        ]
    )
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        fast_client().check_credentials([ModelConfig("openai/gpt-4o-mini", {})])


def test_named_key_env_is_checked_and_never_leaks(monkeypatch):
    monkeypatch.delenv("MV_TEST_KEY", raising=False)
    with FakeServer(faults={"auth": 1.0}) as server:
        config = ModelConfig("openai/fake", {}, api_base=server.url, api_key_env="MV_TEST_KEY")
        with pytest.raises(ModelError, match="MV_TEST_KEY"):
            fast_client().check_credentials([config])
        secret = "sk-test-secret-0123456789"
        monkeypatch.setenv("MV_TEST_KEY", secret)
        fast_client().check_credentials([config])
        log: list[dict] = []
        client = fast_client(call_log=log.append)
        with pytest.raises(ModelError) as caught:
            client.complete(config, HELLO)
        sent = {k.lower(): v for k, v in server.headers[0].items()}["authorization"]
    assert sent == f"Bearer {secret}"  # the named key is what the server saw
    assert secret not in str(caught.value) and secret not in repr(log) and secret not in repr(client.stats)


# -- concurrency ---------------------------------------------------------------------------


def test_requests_in_flight_never_exceed_jobs_per_provider():
    with FakeServer(latency=0.15) as first, FakeServer(latency=0.15) as second:
        client = fast_client(jobs=3)
        configs = [fake(first), fake(second)] * 9
        with ThreadPoolExecutor(len(configs)) as pool:
            answers = list(pool.map(lambda config: client.complete(config, HELLO), configs))
        assert len(answers) == 18
        # Each server is its own provider (api_base): each gets up to 3 at once.
        assert first.max_in_flight == 3 and second.max_in_flight == 3
    assert client.stats["calls"] == 18


def test_stats_and_call_log_count_every_attempt_under_threads():
    log: list[dict] = []
    lock = threading.Lock()

    def record(entry: dict) -> None:
        with lock:
            log.append(entry)

    with FakeServer(faults={"server_error": 0.3, "rate_limit": 0.1}, retry_after=0, seed=3) as server:
        client = fast_client(jobs=4, max_retries=8, call_log=record)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: client.complete(fake(server), HELLO), range(40)))
        total = server.counts["total"]
    assert client.stats["calls"] == len(log) == total
    assert client.stats["retries"] == total - 40 == sum(not entry["ok"] for entry in log)


def test_raw_newlines_inside_json_strings_are_accepted_not_repaired():
    from multiverse.model._answers import parse_json_answer

    schema = {"type": "object", "properties": {"answer": {"type": "boolean"}, "reason": {"type": "string"}},
              "required": ["answer", "reason"]}
    parsed = parse_json_answer('{ "answer": true, "reason": "Paris is the capital. It\'s a\n\r" } ', schema)
    assert parsed == {"answer": True, "reason": "Paris is the capital. It's a\n\r"}
