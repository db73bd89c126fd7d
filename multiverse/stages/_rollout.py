"""Rollout stage: one case on one system becomes one transcript.

Multi-turn: a simulated user plays the case's brief (it never sees the
rubric) and the system answers with its own system prompt, up to
``max_turns`` user turns, or until the user ends with the end marker. When
the job carries an ``opening`` (a case file's written prompt), that is the
first user turn verbatim and the simulated user writes the turns after it.
Single-turn: the case's standalone prompt, answered once.

When the system has tools, its tool calls are answered by a tool-simulator
model that sees the conversation so far, or by a Python function named in the
spec (:mod:`multiverse.spec._toolcode`); every call and result is kept in the
transcript, because criteria such as "false claims about tool execution" hinge
on what really ran. A call of a tool that was not offered in this
conversation, or whose arguments are not a JSON object, gets an error result
and reaches neither a function nor the simulator: what a model asks for never
chooses which code runs.

A simulated user that misbehaves (an empty turn, answering as the assistant,
leaking its brief) is asked again with another seed; if it keeps failing the
rollout is recorded as ``rollout_failed`` with the reason, never repaired.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from multiverse.core import OK, ModelConfig
from multiverse.model import ModelClient
from multiverse.spec import ToolCodeError, load_function
from multiverse.store import TranscriptRecord, Turn, call_of, storable_text
from multiverse.work import END_MARKER, tool_messages, user_messages

from ..errors import ModelError

__all__ = ["MAX_TOOL_CALLS", "MAX_TOOL_ROUNDS", "USER_ATTEMPTS", "RolloutJob", "UserFailure", "run_rollout"]

USER_ATTEMPTS = 3
MAX_TOOL_ROUNDS = 3
# Calls answered per system turn; the rest get an error result, so a model that
# emits a thousand calls at once costs no more than a few simulator calls.
MAX_TOOL_CALLS = 8


class UserFailure(Exception):
    """The simulated user broke role; ``reason`` says how."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RolloutJob:
    """Everything one rollout reads (its key hashes exactly this)."""

    case: Mapping[str, Any]
    system: ModelConfig
    system_prompt: str
    tools: tuple[Mapping[str, Any], ...]
    setting: str
    max_turns: int
    user: ModelConfig | None
    persona: str
    instructions: str
    tool_simulator: ModelConfig | None
    tool_functions: Mapping[str, str]  # tool name -> resolved "/abs/file.py:function"
    seed: int
    opening: str = ""  # multi-turn: the first user turn as written in the case, instead of the user model's
    user_template: str | None = None  # the spec's rollout.user.template (None: the built-in text)
    user_opening: str | None = None  # the spec's rollout.user.opening (None: the built-in text)
    tool_template: str | None = None  # the spec's rollout.tool_simulator.template (None: the built-in text)


def _completion_meta(completion: Any) -> dict[str, Any]:
    return dict(call_of(completion))


def _check_user_turn(text: str, brief: str) -> str | None:
    """Why a simulated user's turn is unusable, or None if it is fine."""
    stripped = text.replace(END_MARKER, "").strip()
    if not stripped and END_MARKER not in text:
        return "empty_user_turn"
    lowered = stripped.lower()
    if lowered.startswith(("assistant:", "as an ai", "as an assistant", "i am an ai assistant")):
        return "role_reversal"
    if "task: {" in lowered or "scenario brief" in lowered or (len(brief) > 80 and brief[:80] in stripped):
        return "brief_leaked"
    return None


def run_rollout(client: ModelClient, job: RolloutJob) -> tuple[TranscriptRecord, list[dict[str, Any]]]:
    """Run one rollout. Returns the transcript (``status`` ok or rollout_failed) and every call it made
    (model reported, usage, cost, and which actor, turn and attempt).

    Transport failures raise ``ModelError`` (the caller records them without
    storing, so a later run retries); a misbehaving simulated user is a result.
    """
    system_prompt = "\n\n".join(p for p in (job.system_prompt, job.case.get("system_prompt") or "") if p)
    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    tools = [*job.tools, *(job.case.get("tools") or [])]
    conversation: list[Turn] = []
    turns_meta: list[dict[str, Any]] = []
    stop_reason = "max_turns"
    try:
        if job.setting == "single_turn":
            prompt = job.case.get("prompt") or job.case.get("brief") or ""
            conversation.append({"role": "user", "content": prompt})
            _target_turn(client, job, head, conversation, tools, turns_meta)
            stop_reason = "completed"
        else:
            for turn in range(1, job.max_turns + 1):
                if turn == 1 and job.opening:
                    text, ended = job.opening, False
                else:
                    text, ended = _user_turn(client, job, conversation, turn, turns_meta)
                if text:
                    conversation.append({"role": "user", "content": text})
                if ended and not text:
                    stop_reason = "user_ended"
                    break
                _target_turn(client, job, head, conversation, tools, turns_meta)
                if ended:
                    stop_reason = "user_ended"
                    break
    except UserFailure as failure:
        return {"status": "rollout_failed", "reason": failure.reason, "turns": conversation}, turns_meta
    if not any(m["role"] == "assistant" for m in conversation):
        return {"status": "rollout_failed", "reason": "no_system_turn", "turns": conversation}, turns_meta
    return {"status": OK, "reason": "", "stop_reason": stop_reason, "turns": conversation}, turns_meta


def _user_turn(client: ModelClient, job: RolloutJob, conversation: list[Any], turn: int, meta: list[Any]) -> tuple[str, bool]:
    brief = job.case.get("brief") or job.case.get("prompt") or ""
    assert job.user is not None  # multi-turn jobs carry their simulated user
    last_reason = "empty_user_turn"
    for attempt in range(USER_ATTEMPTS):
        messages = user_messages(brief, job.persona, job.instructions, conversation, turn=turn, max_turns=job.max_turns,
                                 template=job.user_template, opening=job.user_opening)
        completion = client.complete(job.user, messages, seed=job.seed * 1000 + turn * 10 + attempt, task=messages.task)
        meta.append({"actor": "user", "turn": turn, "attempt": attempt, **_completion_meta(completion)})
        text = completion.text or ""
        problem = _check_user_turn(text, brief)
        if problem is None:
            ended = END_MARKER in text
            return text.replace(END_MARKER, "").strip(), ended
        last_reason = problem
    raise UserFailure(f"{last_reason} (after {USER_ATTEMPTS} attempts)")


def _offered(tools: Sequence[Mapping[str, Any]]) -> set[str]:
    """The names of the tools offered in a conversation (OpenAI form, or a bare {name, ...})."""
    names = set()
    for tool in tools:
        inner = tool.get("function")
        function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
        if isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def _target_turn(client: ModelClient, job: RolloutJob, head: list[Any], conversation: list[Any], tools: list[Any], meta: list[Any]) -> None:
    offered = _offered(tools)
    for _ in range(MAX_TOOL_ROUNDS + 1):
        completion = client.complete(job.system, head + _for_target(conversation), seed=job.seed + len(conversation), tools=tools or None)
        meta.append({"actor": "system", **_completion_meta(completion)})
        message: dict[str, Any] = {"role": "assistant", "content": completion.text or ""}
        calls = completion.tool_calls or []
        if calls:
            message["tool_calls"] = [{"id": c.get("id") or f"call_{i}", "name": c["name"], "arguments": c.get("arguments", {})} for i, c in enumerate(calls)]
        conversation.append(message)
        if not calls:
            return
        for index, call in enumerate(message["tool_calls"]):
            if index < MAX_TOOL_CALLS:
                result = _run_tool(client, job, call, offered, conversation, meta)
            else:
                result = _tool_error(f"more than {MAX_TOOL_CALLS} tool calls in one turn; this one was not run")
            conversation.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": result})
    # The system kept calling tools; its last message stands as its answer.


def _for_target(conversation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation in the OpenAI chat format the system under audit expects."""
    out = []
    for m in conversation:
        if m["role"] == "assistant" and m.get("tool_calls"):
            out.append(
                {
                    "role": "assistant",
                    "content": m.get("content") or None,
                    "tool_calls": [
                        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": _arguments_text(c["arguments"])}}
                        for c in m["tool_calls"]
                    ],
                }
            )
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def _arguments_text(arguments: Any) -> str:
    # Malformed arguments are kept as the model wrote them (a string), and sent back so.
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _tool_error(message: str, **detail: Any) -> str:
    return json.dumps({"error": message, **detail}, ensure_ascii=False)


def _run_tool(client: ModelClient, job: RolloutJob, call: Mapping[str, Any], offered: set[str], conversation: list[Any], meta: list[Any]) -> str:
    name = call["name"]
    if name not in offered:
        return _tool_error(f"tool {name!r} was not offered in this conversation", offered=sorted(offered))
    arguments = call.get("arguments")
    if not isinstance(arguments, dict):
        return _tool_error(f"the arguments of the call to {name!r} are not a JSON object")
    if name in job.tool_functions:
        try:
            function = load_function(job.tool_functions[name])
        except ToolCodeError as exc:
            # The file changed since validation: a failure of this unit (not stored, redone on a rerun), never a result.
            raise ModelError(str(exc), reason="tool_function_failed") from None
        try:
            result = function(**arguments)
            text = result if isinstance(result, str) else json.dumps(result, default=str, ensure_ascii=False)
        except Exception as exc:  # a user's tool raising is a tool result, as in a live system
            text = _tool_error(f"{type(exc).__name__}: {exc}")
        return storable_text(text)
    if job.tool_simulator is None:
        raise ModelError(f"the system called tool {name!r} but no tool simulator is configured", reason="no_tool_simulator")
    prompt = tool_messages(name, arguments, conversation, template=job.tool_template)
    completion = client.complete(job.tool_simulator, prompt, seed=job.seed + len(conversation), task=prompt.task)
    meta.append({"actor": "tool", "tool": name, **_completion_meta(completion)})
    return completion.text or ""
