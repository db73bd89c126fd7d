"""Counting model requests where they arrive, independently of the pipeline's own bookkeeping.

:class:`SimTransportLog` puts a logging handler in front of the ``sim``
litellm provider for the duration of a ``with`` block: every request litellm
delivers to it is digested (model, world, messages and every optional
parameter litellm passes on: seed, tools, response_format, temperature...)
before it is answered. A repeat is a request whose digest was seen before in
the same log: the very same bytes asked twice.

Used by tests/test_requestcache.py and tests/bench/bench_call_economy.py.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from typing import Any

__all__ = ["SimTransportLog", "Uncached", "body_digest"]


class Uncached:
    """Stands in for ``multiverse.model._requestcache.RequestCache`` to run as before it: every call is sent."""

    def __init__(self, client: Any, store: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def complete(self, config: Any, messages: list, **kwargs: Any) -> Any:
        return self.client.complete(config, messages, **kwargs)


def body_digest(body: Any) -> str:
    """sha256 of a request body as canonical JSON (keys sorted; anything not JSON by its ``str``)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()


class SimTransportLog:
    """Logs a digest of every request the ``sim`` provider receives while the block runs."""

    def __init__(self) -> None:
        self.digests: list[str] = []
        self.models: Counter = Counter()
        self._lock = threading.Lock()
        self._saved: list | None = None

    def __enter__(self) -> SimTransportLog:
        import litellm

        from multiverse import sim
        from multiverse.sim._provider import PROVIDER, SimProvider

        sim.register()
        log = self

        class Logging(SimProvider):
            def completion(self, model: str, messages: list, api_base: str | None = None, model_response: Any = None,
                           optional_params: dict | None = None, **rest: Any) -> Any:
                log.record({"model": model, "api_base": api_base, "messages": messages,
                            "params": dict(optional_params or {})})
                return super().completion(model, messages, api_base=api_base, model_response=model_response,
                                          optional_params=optional_params, **rest)

        self._saved = list(litellm.custom_provider_map)
        others = [item for item in self._saved if item.get("provider") != PROVIDER]
        litellm.custom_provider_map = [*others, {"provider": PROVIDER, "custom_handler": Logging()}]
        litellm.utils.custom_llm_setup()
        return self

    def __exit__(self, *exc: object) -> None:
        import litellm

        litellm.custom_provider_map = self._saved or []
        litellm.utils.custom_llm_setup()

    def record(self, body: dict) -> None:
        digest = body_digest(body)
        with self._lock:
            self.digests.append(digest)
            self.models[body["model"]] += 1

    def mark(self) -> int:
        """The number of requests so far (a later :meth:`summary` can start there)."""
        with self._lock:
            return len(self.digests)

    def summary(self, since: int = 0) -> dict:
        """``{"requests", "unique", "repeats"}`` of the requests received since ``since``."""
        with self._lock:
            seen = self.digests[since:]
        unique = len(set(seen))
        return {"requests": len(seen), "unique": unique, "repeats": len(seen) - unique}
