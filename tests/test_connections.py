"""One openai client (one connection pool) per OpenAI-compatible endpoint and key."""

from __future__ import annotations

import gc
import warnings

from fakeserver import FakeServer

from multiverse.model._connections import Connections
from multiverse.model._llm import LiteLLMClient
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


def _no_resource_warnings(action) -> list:
    gc.collect()  # earlier tests' garbage in this process first: what the gc below finds is then action's own
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        action()
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_closed_client_leaves_no_socket_open_and_stays_usable():
    with FakeServer() as server:
        config = ModelConfig("openai/fake", {}, api_base=server.url)

        def use_then_close():
            with LiteLLMClient(jobs=2, max_retries=0) as client:
                assert client.complete(config, [{"role": "user", "content": "a"}]).text == "echo: a"
                client.close()
                assert client._connections._clients == {}
                # Still usable: a later call opens a new pool (closed again when the block ends).
                assert client.complete(config, [{"role": "user", "content": "b"}]).text == "echo: b"
                assert len(client._connections._clients) == 1

        assert _no_resource_warnings(use_then_close) == []


def test_a_client_dropped_unclosed_closes_its_pool_when_collected():
    # A test, a notebook or a wrapper that never closes its client must not leave sockets for the
    # interpreter to warn about (in-process CLI runs print every warning into their stderr).
    with FakeServer() as server:
        config = ModelConfig("openai/fake", {}, api_base=server.url)

        def use_and_drop():
            client = LiteLLMClient(jobs=2, max_retries=0)
            client.complete(config, [{"role": "user", "content": "hello"}])
            del client

        assert _no_resource_warnings(use_and_drop) == []
