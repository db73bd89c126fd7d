"""Credentials: the values an audit must never write, and the spec fields that must never hold one.

A key reaches an audit in two ways only: an environment variable (a
provider's own, such as ``OPENAI_API_KEY``, or the one a spec names with
``api_key_env``, whatever its name), and, if a spec were allowed to carry one,
the spec itself. So:

- :func:`redact` / :func:`redact_all` replace the *values* of every credential
  in use with ``[redacted]`` in any string or record. The values are those of
  :data:`PROVIDER_KEY_VARIABLES`, of every environment variable whose name
  looks secret, and of every variable registered with :func:`register` (the
  model client registers each ``api_key_env`` variable it reads, whatever its
  name). The model client redacts every string that leaves a call (answer
  text, tool calls, error messages); the store redacts every record again
  before it is written.
- :func:`address_label` is a server's address (a store's ``postgresql://``
  URL, a Dask scheduler's) as a message or manifest may show it: without the
  password of its user part or of its query; :func:`without_address_secrets`
  takes them out of any text (an error a library raised about the address).
- :func:`check_spec_sections` refuses a spec section that holds a literal
  credential: a key-like ``params`` field, an ``Authorization``-like header,
  or ``user:password@`` (or a key in the query) in ``api_base``.

Importing this module imports neither litellm nor the spec.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "MIN_SECRET_LENGTH",
    "PROVIDER_KEY_VARIABLES",
    "REDACTED",
    "address_label",
    "check_spec_sections",
    "redact",
    "redact_all",
    "register",
    "secret_values",
    "without_address_secrets",
]

REDACTED = "[redacted]"
#: Shorter values ("1", "true", "local") would redact ordinary words.
MIN_SECRET_LENGTH = 8

#: Variables litellm reads a provider's key from (its ``validate_environment``
#: and provider modules). Their values are redacted whether or not a spec uses
#: that provider: a model may echo any key the process can read.
PROVIDER_KEY_VARIABLES = (
    "OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_AD_TOKEN", "AZURE_CLIENT_SECRET",
    "AZURE_AI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "VERTEXAI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS", "MISTRAL_API_KEY", "CODESTRAL_API_KEY",
    "COHERE_API_KEY", "CO_API_KEY", "GROQ_API_KEY", "TOGETHERAI_API_KEY", "TOGETHER_API_KEY",
    "TOGETHER_AI_TOKEN", "HF_TOKEN", "HUGGINGFACE_API_KEY", "HUGGING_FACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK",
    "DEEPSEEK_API_KEY", "XAI_API_KEY", "OPENROUTER_API_KEY", "OR_API_KEY", "FIREWORKS_API_KEY",
    "FIREWORKS_AI_API_KEY", "FIREWORKSAI_API_KEY", "PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY",
    "REPLICATE_API_KEY", "REPLICATE_API_TOKEN", "DEEPINFRA_API_KEY", "ANYSCALE_API_KEY", "AI21_API_KEY",
    "NLP_CLOUD_API_KEY", "ALEPH_ALPHA_API_KEY", "ALEPHALPHA_API_KEY", "VOYAGE_API_KEY", "CEREBRAS_API_KEY",
    "NVIDIA_NIM_API_KEY", "SAMBANOVA_API_KEY", "DATABRICKS_API_KEY", "DATABRICKS_TOKEN", "WATSONX_APIKEY",
    "WATSONX_API_KEY", "WATSONX_TOKEN", "CLARIFAI_API_KEY", "CLOUDFLARE_API_KEY", "PREDIBASE_API_KEY",
    "FRIENDLIAI_API_KEY", "FRIENDLI_TOKEN", "GITHUB_API_KEY", "GITHUB_TOKEN", "NOVITA_API_KEY",
    "MOONSHOT_API_KEY", "DASHSCOPE_API_KEY", "VOLCENGINE_API_KEY", "HYPERBOLIC_API_KEY", "NEBIUS_API_KEY",
    "LITELLM_API_KEY", "LITELLM_MASTER_KEY", "OLLAMA_API_KEY", "HOSTED_VLLM_API_KEY", "LM_STUDIO_API_KEY",
    "OPENAI_LIKE_API_KEY", "LLAMAFILE_API_KEY", "VLLM_API_KEY",
)

# A variable holds a secret when a word of its name (split at "_") ends in KEY
# or TOKEN, is AUTH or CREDENTIAL(S), or contains SECRET or PASSWORD:
# OPENAI_API_KEY, GH_TOKEN, MY_APIKEY, PGPASSWORD, but not GIT_AUTHOR_NAME.
# Over-redacting an innocent value costs a word in a transcript; a leak costs a key.
_SECRET_WORD = re.compile(r".*(KEY|TOKEN)|AUTH|CREDENTIALS?|.*(SECRET|PASSWORD|PASSWD).*")


@lru_cache(maxsize=4096)
def _secret_name(name: str) -> bool:
    # Cached: every model call reads the environment again (a key set mid-run counts).
    return name in PROVIDER_KEY_VARIABLES or any(_SECRET_WORD.fullmatch(word) for word in name.upper().split("_"))

_lock = threading.Lock()
_registered: set[str] = set()


def register(*values: str | None) -> None:
    """Remember credential values that are in use (e.g. an ``api_key_env`` variable's)."""
    with _lock:
        _registered.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH)


# The last answer of secret_values, with the environment and the number of registered values it was
# made from: a store write asks for every record, and decoding the whole environment each time cost
# a tenth of a run's CPU per request. The environment is compared as its raw mapping (one C-level
# dict comparison), so a variable set mid-run is still seen at the next call.
_answer: tuple[dict[str, Any] | None, int, tuple[str, ...]] = (None, -1, ())


def secret_values() -> tuple[str, ...]:
    """Every credential value to redact, longest first (so a key containing
    another is replaced whole). Read from the environment at each call."""
    global _answer
    raw = getattr(os.environ, "_data", None)  # the encoded mapping os.environ keeps; None elsewhere
    seen, registered, values = _answer
    if raw is not None and raw == seen and registered == len(_registered):
        return values
    found = set()
    for name, value in os.environ.items():
        if len(value) >= MIN_SECRET_LENGTH and _secret_name(name):
            found.add(value)
    with _lock:
        found |= _registered
        count = len(_registered)
    values = tuple(sorted(found, key=lambda v: (-len(v), v)))
    _answer = (dict(raw) if raw is not None else None, count, values)
    return values


def redact(text: str, values: Iterable[str] | None = None) -> str:
    """``text`` with every credential value replaced by ``[redacted]``.

    A value cut off by an earlier truncation (the text ends with its first
    ``MIN_SECRET_LENGTH`` or more characters) is redacted too.
    """
    if not isinstance(text, str) or not text:
        return text
    for value in secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, REDACTED)
        text = _redact_cut_tail(text, value)
    return text


def _redact_cut_tail(text: str, value: str) -> str:
    # Scan only where the value's first characters occur in the last len(value) characters.
    head = value[:MIN_SECRET_LENGTH]
    start = text.find(head, max(len(text) - len(value), 0))
    while start >= 0:
        if value.startswith(text[start:]):
            return text[:start] + REDACTED
        start = text.find(head, start + 1)
    return text


def redact_all(obj: Any, values: Iterable[str] | None = None) -> Any:
    """A copy of a JSON-like record (dicts, lists, strings) with :func:`redact`
    applied to every string, dict keys included."""
    values = secret_values() if values is None else tuple(values)
    if not values:
        return obj

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            return redact(item, values)
        if isinstance(item, Mapping):
            return {clean(k): clean(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [clean(v) for v in item]
        return item

    return clean(obj)


# -- literal credentials in a spec -------------------------------------------------

# params fields (at any depth; compared lower-case with '-' read as '_') that
# litellm or a provider SDK would send as a credential.
_CREDENTIAL_PARAMS = frozenset(
    {
        "api_key", "apikey", "key", "token", "api_token", "access_token", "auth_token", "bearer_token",
        "azure_ad_token", "client_secret", "secret", "password", "aws_access_key_id",
        "aws_secret_access_key", "aws_session_token", "vertex_credentials", "credentials",
        "watsonx_api_key", "authorization",
    }
)
_CREDENTIAL_PARTS = ("api_key", "apikey", "secret", "password", "access_token", "auth_token")
# A header whose name holds one of these carries a credential (Authorization,
# api-key, x-api-key, x-goog-api-key, X-Auth-Token, Ocp-Apim-Subscription-Key, Cookie).
_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.IGNORECASE)
_HEADER_FIELDS = frozenset({"extra_headers", "headers"})
_QUERY_KEY = re.compile(r"key|token|secret|sig|password|auth", re.IGNORECASE)
_HINT = "put the key in an environment variable and name it with api_key_env"


def _credential_param(name: str) -> bool:
    normal = name.lower().replace("-", "_")
    return normal in _CREDENTIAL_PARAMS or any(part in normal for part in _CREDENTIAL_PARTS)


def _check_params(value: Any, where: str, problems: Any, headers: bool = False) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            name = str(key)
            path = f"{where}.{name}"
            if headers and _CREDENTIAL_HEADER.search(name):
                problems.add(path, f"a spec never holds a credential: expected no {name!r} header; {_HINT}")
            elif not headers and _credential_param(name):
                problems.add(path, f"a spec never holds a credential: expected no {name!r} field; {_HINT}")
            else:
                _check_params(item, path, problems, headers or name.lower() in _HEADER_FIELDS)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_params(item, f"{where}.{i}", problems, headers)


def _check_api_base(api_base: str | None, where: str, problems: Any) -> None:
    if not api_base:
        return
    try:
        parts = urlsplit(api_base)
    except ValueError:
        return  # not a URL at all: the call will say so, and nothing here is a credential
    if "@" in parts.netloc:
        problems.add(f"{where}.api_base", f"a spec never holds a credential: expected a URL without user:password@; {_HINT}")
    if any(_QUERY_KEY.search(name) for name, _ in parse_qsl(parts.query, keep_blank_values=True)):
        problems.add(f"{where}.api_base", f"a spec never holds a credential: expected a URL without a key in its query; {_HINT}")


def check_spec_sections(sections: Iterable[tuple[str, Any]], problems: Any) -> None:
    """Add a problem (``problems.add(yaml_path, expected)``) for each literal
    credential in the ``(yaml path, section)`` pairs; a section has ``params``
    and ``api_base``. Messages name the field, never its value."""
    for where, section in sections:
        _check_params(getattr(section, "params", None) or {}, f"{where}.params", problems)
        _check_api_base(getattr(section, "api_base", None), where, problems)


# -- a server's address in a message ----------------------------------------------

# scheme://user:password@host:port/path?query#fragment, every part optional; read by hand, not by
# urlsplit, which raises on a malformed host ("tcp://[::1") and reads "user:pw@host:8786" as a scheme.
_ADDRESS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)?(?P<authority>[^/?#]*)(?P<path>[^?#]*)"
                      r"(?:\?(?P<query>[^#]*))?(?P<fragment>#.*)?", re.DOTALL)


def _address_secrets(address: str) -> tuple[str, list[str]]:
    """``address`` with its secrets replaced, and the secrets (as written, and decoded)."""
    parts = _ADDRESS.fullmatch(address)
    if parts is None:  # the pattern matches any text; kept for the type checker
        return REDACTED, [address]
    secrets: list[str] = []
    authority = parts["authority"]
    if "@" in authority:
        userinfo, _, host = authority.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon:
            secrets.append(password)
            authority = f"{user}:{REDACTED}@{host}"
    query = parts["query"]
    if query:
        fields = []
        for field in query.split("&"):
            name, equals, value = field.partition("=")
            if equals and value and _QUERY_KEY.search(unquote(name)):
                secrets.append(value)
                field = f"{name}={REDACTED}"
            fields.append(field)
        query = "&".join(fields)
    label = (parts["scheme"] or "") + authority + parts["path"] + (f"?{query}" if query is not None else "")
    label += parts["fragment"] or ""
    return label, [v for s in secrets for v in dict.fromkeys((s, unquote(s))) if v]


def address_label(address: str) -> str:
    """``address`` without its credentials: a password in its user part
    (``user:[redacted]@host``) and the value of every key-like field of its
    query (``password``, ``sslpassword``, ``token``...) are ``[redacted]``;
    everything else, the user's name included, stays as written."""
    return _address_secrets(str(address))[0]


def without_address_secrets(text: str, address: str) -> str:
    """``text`` (an error message about ``address``) with the address shown by
    :func:`address_label` and every credential it holds replaced, wherever it appears."""
    label, secrets = _address_secrets(str(address))
    text = str(text).replace(str(address), label)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, REDACTED)
        else:  # a short one only where it stands alone, not inside a word of the message
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", REDACTED, text)
    return text
