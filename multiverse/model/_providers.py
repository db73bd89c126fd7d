"""Which provider serves a model, and litellm itself, imported once and lazily.

Importing litellm takes seconds, so commands that call no model never import
it: :func:`load_litellm` does on first use, and registers the simulated
world (``sim/`` models) as a litellm provider so they take the same path as
any other model.
"""

from __future__ import annotations

import logging
import os
import threading
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse

__all__ = ["KEYLESS", "LOCAL_API_KEY", "OPENAI_COMPATIBLE", "is_loopback", "load_litellm", "provider_key", "provider_of"]

# Providers that speak the OpenAI chat API when pointed at an api_base
# (llama.cpp, vLLM, LM Studio): they accept a json_schema response_format.
OPENAI_COMPATIBLE = frozenset({"openai", "hosted_vllm", "llamafile", "lm_studio", "openai_like"})
# Providers that never need a key: the simulated audit world.
KEYLESS = frozenset({"sim"})
LOCAL_API_KEY = "sk-local"
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})

_lock = threading.Lock()
_module: Any = None


def load_litellm() -> Any:
    """The litellm module, configured for multiverse (imported on the first call)."""
    global _module
    if _module is None:
        with _lock:
            if _module is None:
                # litellm fetches a remote price map at import unless told not to.
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm

                litellm.suppress_debug_info = True
                litellm.set_verbose = False
                # A param a provider does not take (seed, response_format) is
                # dropped rather than failing the call: the spec stays portable.
                litellm.drop_params = True
                for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
                    logging.getLogger(name).setLevel(logging.ERROR)
                from multiverse.sim import register

                register()
                _module = litellm
    return _module


def provider_of(model: str) -> str:
    """The provider prefix of a litellm model string (``"openai/gemma"`` -> ``"openai"``)."""
    return model.split("/", 1)[0] if "/" in model else ""


def is_loopback(api_base: str | None) -> bool:
    """True when ``api_base`` points at this machine (a local server needs no key)."""
    if not api_base:
        return False
    host = urlparse(api_base).hostname or ""
    return host in _LOOPBACK or host.startswith("127.")


def provider_key(model: str, api_base: str | None) -> tuple[str, str | None]:
    """The provider (prefix, or litellm's guess for a bare name) and endpoint a model's calls go to."""
    return provider_of(model) or _bare_provider(model), api_base


@lru_cache(maxsize=256)
def _bare_provider(model: str) -> str:
    """litellm's provider for a model string without a prefix ("gpt-4o" -> "openai")."""
    try:
        return str(load_litellm().get_llm_provider(model)[1])
    except Exception:  # unknown to litellm: the call itself will say so
        return model
