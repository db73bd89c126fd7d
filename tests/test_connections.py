"""One openai client (one connection pool) per OpenAI-compatible endpoint and key."""

from __future__ import annotations

from fakeserver import FakeServer

from multiverse.connections import Connections
from multiverse.llm import LiteLLMClient
from multiverse.spec import ModelConfig

KEY = "sk-CANARY-connections-41c9e2"


def test_one_client_per_endpoint_and_key_found_by_digest_not_by_key():
    pool = Connections(jobs=8)
    first = pool.client("http://127.0.0.1:1/v1", KEY)
    assert pool.client("http://127.0.0.1:1/v1", KEY) is first
    assert pool.client("http://127.0.0.1:1/v1", KEY + "x") is not first
    assert pool.client("http://127.0.0.1:2/v1", KEY) is not first
    assert first.max_retries == 0 and str(first.base_url).startswith("http://127.0.0.1:1/v1")
    assert KEY not in repr(pool._clients) and KEY not in repr(first)
    pooled = first._client._transport._pool  # the sizes asked for reached the connection pool
    assert (pooled._max_connections, pooled._max_keepalive_connections) == (16, 8)
    pool.close()
    assert pool.client("http://127.0.0.1:1/v1", KEY) is not first


def test_calls_to_an_openai_compatible_server_share_its_client():
    with FakeServer() as server:
        client = LiteLLMClient(jobs=4, max_retries=0)
        config = ModelConfig("openai/fake", {}, api_base=server.url)
        other = ModelConfig("openai/other", {}, api_base=server.url)
        answers = [client.complete(c, [{"role": "user", "content": "hello"}]) for c in (config, config, other)]
        assert [a.text for a in answers] == ["echo: hello"] * 3
        # Both models at one endpoint with one key: one pool; a bare provider call gets none.
        assert len(client._connections._clients) == 1
        assert "client" not in client._request(ModelConfig("sim/judge-a", {}), [], seed=None, schema=None,
                                               schema_name="answer", tools=None)
