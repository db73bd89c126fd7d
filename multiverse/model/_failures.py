"""What a failed model call means: a short reason, whether to retry, and how long to wait.

litellm maps provider and network errors to openai-style exceptions; this
module turns any of them into a :class:`Failure`::

    retried:  rate_limited | server_error | timeout | connection
    at once:  bad_request | auth | not_found | provider_error | error

and a failed call's message into one storable line with every credential
redacted (:func:`one_line`). Classifying imports nothing beyond litellm and
openai, which a failed call has already imported.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

from multiverse.core import credentials
from multiverse.model._answers import storable_text
from multiverse.model._providers import load_litellm

__all__ = ["Failure", "classify", "is_model_failure", "one_line", "retry_after"]

# Transport exceptions that mean the network failed, not the model (their
# *Timeout* siblings mean a timeout). Named, so that classifying a failure
# imports nothing.
_TRANSPORTS = frozenset({"httpx", "httpcore", "aiohttp"})
_NETWORK_ERRORS = frozenset(
    {
        "ConnectError",
        "ReadError",
        "WriteError",
        "CloseError",
        "NetworkError",
        "RemoteProtocolError",
        "ProxyError",
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ServerDisconnectedError",
    }
)


@dataclass(frozen=True)
class Failure:
    """A failed call: its short reason, whether a retry may cure it, and the wait the provider asked for."""

    reason: str
    retryable: bool
    retry_after: float | None = None


def retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (Retry-After / retry-after-ms), if any."""
    response = getattr(exc, "response", None)
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
        getattr(response, "headers", None),
    ):
        if not headers:
            continue
        try:
            millis = headers.get("retry-after-ms")
            if millis is not None:
                return max(float(millis) / 1000, 0.0)
            value = headers.get("retry-after") or headers.get("Retry-After")
        except (AttributeError, ValueError, TypeError):
            continue
        if value is None:
            continue
        try:
            return max(float(value), 0.0)
        except ValueError:
            from email.utils import parsedate_to_datetime

            try:
                return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
            except (TypeError, ValueError):
                continue
    return None


def is_model_failure(exc: BaseException) -> bool:
    """True for what litellm raises about a model call (it maps provider and
    network errors to openai-style exceptions); False for programming errors."""
    import openai

    return isinstance(exc, (openai.OpenAIError, OSError))


def classify(exc: BaseException) -> Failure:
    """Map a litellm / openai / httpx exception to a short reason and whether to retry."""
    litellm = load_litellm()
    import openai

    if isinstance(exc, litellm.RateLimitError):
        return Failure("rate_limited", True, retry_after(exc))
    # Walk the cause chain for the transport's own error: litellm reports a
    # dropped connection as a 500 InternalServerError caused by httpx.ReadError.
    chain: BaseException | None = exc
    seen: set[int] = set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        name, module = type(chain).__name__, type(chain).__module__.split(".")[0]
        if isinstance(chain, (litellm.Timeout, openai.APITimeoutError, TimeoutError)) or (
            module in _TRANSPORTS and "Timeout" in name
        ):
            return Failure("timeout", True)
        if isinstance(chain, (ConnectionError, socket.gaierror)) or (module in _TRANSPORTS and name in _NETWORK_ERRORS):
            return Failure("connection", True)
        chain = chain.__cause__ or chain.__context__
    if isinstance(exc, litellm.APIConnectionError):
        # litellm also wraps any exception a provider raised (a custom
        # provider's bug, say) as APIConnectionError; with no transport error
        # underneath, retrying would only repeat it.
        return Failure("provider_error", False)
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return Failure("auth", False)
    if isinstance(exc, litellm.NotFoundError):
        return Failure("not_found", False)
    if isinstance(exc, (litellm.BadRequestError, litellm.UnprocessableEntityError)):
        return Failure("bad_request", False)
    status = getattr(exc, "status_code", None)
    if status == 429:
        return Failure("rate_limited", True, retry_after(exc))
    if status == 408:
        return Failure("timeout", True)
    if isinstance(status, int) and status >= 500:
        return Failure("server_error", True, retry_after(exc))
    if isinstance(status, int) and 400 <= status < 500:
        return Failure("bad_request", False)
    return Failure("error", False)


def one_line(exc: BaseException, secrets: Iterable[str]) -> str:
    """The failure's message as one storable line, credentials redacted, control and invisible characters
    escaped (a provider's message is its text, not ours), at most 300 characters."""
    from multiverse.core import short_reason, terminal_safe

    # Redact before cutting: a key cut in half would no longer match. Cut at a word, and marked.
    # This call's own keys join every credential in use (shorter ones too: they are known keys, not guesses).
    values = sorted({*(s for s in secrets if s and len(s) >= 6), *credentials.secret_values()}, key=len, reverse=True)
    text = credentials.redact(" ".join(str(exc).split()), values)
    return short_reason(terminal_safe(storable_text(text)), 300)
