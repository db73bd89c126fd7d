"""Hidden markers and TASK lines: how the simulated world's truth travels through text.

The lead's stages pass briefs, prompts and turns verbatim, so the world writes
its state into the text itself as markers of the form::

    [[sim:<tag> key=value key=value ...]]

Tags: ``case`` (in a case brief: the cell, topic, whether tools exist),
``turn`` (ending every simulated user turn and single-turn prompt: the turn
number, pressure, condition and the criteria the turn creates an opportunity
for), ``reply`` (ending every target reply: the opportunities it met and the
criteria it violated, a ``~`` prefix marking a subtle violation). Values are
percent-encoded; lists are comma-separated.

A request to a generator, simulated user, tool simulator or judge carries its
task in machine terms beside the prompt (the provider's ``sim_task``), never
in it: real models see only the declared prompt. The world reads the task as
the one ``TASK: {...}`` line that :func:`with_task` puts back where such
prompts once carried it, so every answer (and every draw of the dice, which
hashes the messages) is the one the same request always got.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

__all__ = [
    "Marker",
    "content_text",
    "find_task",
    "format_marker",
    "parse_markers",
    "role_of",
    "split_list",
    "strip_markers",
    "with_task",
]

_MARKER = re.compile(r"\[\[sim:(?P<tag>[a-z_]+)(?P<body>[^\[\]]*)\]\]")
_TASK = re.compile(r"^[ \t]*TASK:[ \t]*(\{.*\})[ \t]*$", re.MULTILINE)
_SAFE = "~-_.:/"


@dataclass(frozen=True)
class Marker:
    """One parsed marker: its tag, raw (still encoded) fields and span in the text it came from."""

    tag: str
    fields: Mapping[str, str]
    start: int
    end: int

    def get(self, key: str, default: str | None = None) -> str | None:
        """The field ``key`` decoded (``default`` when absent)."""
        raw = self.fields.get(key)
        return default if raw is None else unquote(raw)

    def list(self, key: str) -> list[str]:
        """The field ``key`` as a list (empty when absent)."""
        return split_list(self.fields.get(key, ""))

    def number(self, key: str, default: float = 0.0) -> float:
        try:
            return float(self.fields[key])
        except (KeyError, ValueError):
            return default


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ",".join(quote(str(v), safe=_SAFE) for v in value)
    return quote(str(value), safe=_SAFE)


def format_marker(tag: str, fields: Mapping[str, Any]) -> str:
    """``[[sim:tag k=v ...]]`` with values encoded so they survive any prose around them."""
    body = "".join(f" {quote(str(k), safe='_.')}={_value(v)}" for k, v in fields.items() if v is not None)
    return f"[[sim:{tag}{body}]]"


def parse_markers(text: str, tag: str | None = None) -> list[Marker]:
    """Every marker in ``text`` (of one ``tag`` when given), in order."""
    found = []
    for m in _MARKER.finditer(text):
        if tag is not None and m.group("tag") != tag:
            continue
        fields = {}
        for token in m.group("body").split():
            key, eq, value = token.partition("=")
            if eq:
                fields[unquote(key)] = value  # decoded on access: a list item may hold an encoded comma
        found.append(Marker(m.group("tag"), fields, m.start(), m.end()))
    return found


def split_list(value: str) -> list[str]:
    """Decode a comma-separated marker list."""
    return [unquote(v) for v in value.split(",") if v]


def strip_markers(text: str) -> str:
    """``text`` without its markers (and the space they leave)."""
    return re.sub(r"[ \t]*\[\[sim:[^\[\]]*\]\]", "", text).strip()


def content_text(message: Any) -> str:
    """The text of one chat message, whatever shape litellm or the caller gave it."""
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part.get("text", "")))
            else:
                parts.append(str(part))
        return "".join(parts)
    return str(content)


def role_of(message: Any) -> str:
    """The role of one chat message (dict or object)."""
    return str(message.get("role") if isinstance(message, Mapping) else getattr(message, "role", ""))


#: Tasks whose line ends the first (system) message; the others end the first user message.
_TASK_FIRST = ("simulate_user", "simulate_tool")


def with_task(messages: Sequence[Any], task: Mapping[str, Any]) -> list[Any]:
    """``messages`` with ``task``'s ``TASK:`` line ending the message that reads it: the system message of a
    simulated user or tool simulator, else the first user message (a repair request's plea comes after it)."""
    out = list(messages)
    if task.get("kind") in _TASK_FIRST:
        at = 0
    else:
        at = next((i for i, m in enumerate(out) if role_of(m) == "user"), len(out) - 1)
    text = content_text(out[at])
    line = "TASK: " + json.dumps(dict(task), sort_keys=True, ensure_ascii=False)
    # The built-in prompts end in a newline; a declared one may not, and the line must stand alone.
    text = text + ("" if not text or text.endswith("\n") else "\n") + line
    message = out[at]
    fields = dict(message) if isinstance(message, Mapping) else {"role": role_of(message)}
    out[at] = {**fields, "content": text}
    return out


def find_task(messages: Sequence[Any], *, first: bool) -> tuple[dict[str, Any], int] | None:
    """The ``TASK`` object and the index of the message carrying it.

    ``first``: look in the first (system) message before the others (simulated
    user, tool simulator); otherwise in the last user message before the
    others (generator, judge), and then the earliest user message carrying the
    same TASK, so that a repair turn repeating the TASK line resolves to the
    original prompt.
    """
    order = list(range(len(messages)))
    if first:
        order = order[:1] + order[1:][::-1]
    else:
        users = [i for i in order if role_of(messages[i]) == "user"]
        lead = users[-1:] if users else []
        order = lead + [i for i in order[::-1] if i not in lead]
    for i in order:
        task = _task_in(messages[i])
        if task is None:
            continue
        if not first:
            # A repair turn repeats the TASK line: the task belongs to the
            # earliest user message that carries the same one.
            for j in range(i):
                if role_of(messages[j]) == "user" and _task_in(messages[j]) == task:
                    return task, j
        return task, i
    return None


def _task_in(message: Any) -> dict[str, Any] | None:
    text = content_text(message)
    if "TASK:" not in text:
        return None
    for m in reversed(list(_TASK.finditer(text))):
        try:
            task = json.loads(m.group(1))
        except ValueError:
            continue
        if isinstance(task, dict) and isinstance(task.get("kind"), str):
            return task
    return None
