"""Model answers: text made safe to store, and structured answers turned into schema-valid JSON.

``storable_text`` is what every string a model (or a tool function) returns
goes through before anything keeps it: lone surrogates and NUL bytes become
U+FFFD, so the text always encodes as UTF-8, and an answer longer than
``MAX_ANSWER_CHARS`` is cut to that length, ending with a marker that says
how long it was.


A stage that asks a model for JSON (a rubric draft, a case, a judgment) gets
back text. ``parse_json_answer`` finds the JSON in it (the whole text, a code
fence, or the outermost ``{...}``) and validates it against the requested JSON
schema; anything else raises ``ValueError`` with a short reason, never a guess.
``repair_messages`` builds the conversation for the one repair request the
model client (``multiverse.model._llm``) makes before it gives up with
``ModelError(reason="unparseable")``.

``answer_message``, ``answer_text`` and ``answer_tool_calls`` read a chat
response (OpenAI's shape, as litellm returns it) without guessing: content
that is not a string is kept as JSON, tool-call arguments that are not a
JSON object are kept as the text the model sent.

Importing this module imports neither litellm nor jsonschema; jsonschema is
imported on the first validation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from multiverse.core import credentials, short_reason, terminal_safe
from multiverse.model._schema_check import compile_check
from multiverse.store import MAX_ANSWER_CHARS, MAX_DEPTH, storable, storable_text, too_deep

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_DEPTH",
    "MAX_MODEL_CHARS",
    "answer_message",
    "answer_text",
    "answer_tool_calls",
    "parse_json_answer",
    "repair_messages",
    "reported_model",
    "storable",
    "storable_text",
    "too_deep",
]

#: the longest model name an answer may report as it is stored and shown (a provider's are under 100)
MAX_MODEL_CHARS = 200


def reported_model(value: Any, requested: str, secrets: Sequence[str]) -> str:
    """The model a provider's answer names, as it is stored, listed in the manifest and shown in the report.

    The provider's text, not ours: credentials redacted, control and invisible characters escaped, cut at
    ``MAX_MODEL_CHARS`` (marked); the requested model when it names none (or names it with no text).
    """
    text = str(value) if isinstance(value, (str, int, float)) and str(value) else requested
    return storable_text(short_reason(terminal_safe(credentials.redact(text, secrets)), MAX_MODEL_CHARS))


#: a tool call's id as providers give them (OpenAI's call_..., Anthropic's toolu_...)
_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)


def _decode(text: str) -> Any:
    """JSON in a model's text: whole, inside a code fence, or the outermost {...}."""
    stripped = text.strip()
    candidates = [stripped]
    fenced = _FENCE.match(stripped)
    if fenced:
        candidates.append(fenced.group(1).strip())
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    # strict=False accepts raw newlines inside strings, which small local models
    # emit under grammar-constrained decoding; nothing is added or guessed.
    decoder = json.JSONDecoder(strict=False)
    for candidate in candidates:
        try:
            return decoder.decode(candidate)
        except ValueError:
            continue
    if start >= 0:
        # The first complete object, when prose with braces follows it.
        try:
            return decoder.raw_decode(stripped[start:])[0]
        except ValueError:
            pass
    raise ValueError("no JSON object in the answer")


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Any:
    try:
        import jsonschema
    except ImportError:  # a dependency, but the client must still work without it
        return None
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


@lru_cache(maxsize=64)
def _quick_check(schema_json: str) -> Any:
    return compile_check(json.loads(schema_json))


def parse_json_answer(text: str, schema: Mapping[str, Any]) -> Any:
    """Decode a model's JSON answer and validate it against ``schema``.

    Raises ``ValueError`` with a short reason when the text holds no JSON or
    the JSON does not match the schema.
    """
    try:
        value = _decode(text)
    except RecursionError:  # absurdly nested JSON
        raise ValueError("the answer nests too deeply") from None
    if too_deep(value):
        raise ValueError(f"the answer nests more than {MAX_DEPTH} levels deep")
    key = json.dumps(schema, sort_keys=True)
    validator = _validator(key)
    if validator is not None:
        quick = _quick_check(key)
        # jsonschema has the last word, and the message, on any answer the quick check does not pass.
        error = None if quick is not None and quick(value) else next(iter(validator.iter_errors(value)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            raise ValueError(f"{where}: {' '.join(error.message.split())[:200]}")
    elif isinstance(value, dict):
        missing = [key for key in schema.get("required", []) if key not in value]
        if missing:
            raise ValueError(f"missing required keys {missing}")
    elif schema.get("type") == "object":
        raise ValueError("expected a JSON object")
    return value


def repair_messages(messages: list[dict[str, Any]], text: str, problem: str, schema: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    """The conversation for the one repair request: the bad answer, then a plea for JSON."""
    plea = (
        f"Your previous answer could not be used ({problem}). Reply with only a JSON object "
        f"that matches the JSON schema '{name}' below: no prose, no code fence.\n"
        f"{json.dumps(schema)}"
    )
    # A simulated model keeps reading the request's task, which the repair request carries as the first did.
    return [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": plea}]


def answer_message(response: Any, model: str) -> Any:
    """The first choice's message of a chat response; ``ModelError(empty_response)`` when there is none."""
    from multiverse.errors import ModelError

    choices = getattr(response, "choices", None)
    if not choices:
        raise ModelError(f"{model}: the answer has no choices", reason="empty_response")
    return choices[0].message


def answer_text(message: Any) -> str:
    """The answer's text; a provider's non-string content (parts, numbers) as JSON, never guessed at."""
    content = getattr(message, "content", None)
    if content is None or isinstance(content, str):
        return content or ""
    return json.dumps(content, default=str, ensure_ascii=False)


def answer_tool_calls(message: Any) -> list[dict[str, Any]]:
    """[{id, name, arguments}]: arguments as a dict when the model sent a JSON
    object, else exactly the text it sent (the rollout answers that with an error)."""
    calls: list[dict[str, Any]] = []
    for i, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        raw = getattr(function, "arguments", None)
        arguments: Any = raw if isinstance(raw, str) else json.dumps(raw, default=str)
        if isinstance(raw, dict) and not too_deep(raw):
            arguments = raw
        elif isinstance(raw, str):
            try:
                decoded = json.loads(raw) if raw.strip() else {}
            except (ValueError, RecursionError):
                decoded = None  # keep what the model said; never guess the arguments it meant
            if isinstance(decoded, dict) and not too_deep(decoded):
                arguments = decoded
        # The id keys the tool's result in the conversation sent back (rebuilt from these calls, so a new id
        # holds): one that is no id, or that an earlier call of this answer has, becomes the call's own.
        given = getattr(call, "id", None)
        taken = {c["id"] for c in calls}
        name = str(getattr(function, "name", None) or "")
        calls.append({"id": given if isinstance(given, str) and _CALL_ID.fullmatch(given) and given not in taken
                      else next(f"call_{i}{suffix}" for suffix in ("", *(f"_{n}" for n in range(1, len(calls) + 2)))
                                if f"call_{i}{suffix}" not in taken),
                      # no tool is named past MAX_MODEL_CHARS or with a control character: shown escaped, never matched
                      "name": short_reason(terminal_safe(name), MAX_MODEL_CHARS),
                      "arguments": arguments})
    return calls
