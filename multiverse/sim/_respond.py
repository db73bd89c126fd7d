"""One simulated model call, without litellm: the function the provider wraps.

:func:`respond` resolves the model in the world, derives its randomness from
the sha256 of (model, messages, seed, world digest), dispatches on the
model's kind (and, for TASK-driven kinds, the TASK line) and returns a
:class:`SimReply` with usage counted in words and cost 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from multiverse.core import SIM_PREFIX

from ..errors import SpecError
from ._dice import Dice, plain_messages
from ._generator import draft_case, draft_rubric
from ._judges import judge_transcript
from ._loader import load_world
from ._markers import content_text, find_task, with_task
from ._phrasing import word_count
from ._targets import respond_target
from ._toolsim import simulate_tool
from ._users import simulate_user
from ._world import Generator, Judge, Target, ToolSimulator, User, World

__all__ = ["SimReply", "respond"]

# Which TASK kinds each model kind answers.
_TASKS = {
    "generator": ("draft_rubric", "draft_case", "simulate_tool"),
    "user": ("simulate_user",),
    "judge": ("judge",),
    "tool_simulator": ("simulate_tool",),
}
# Where the TASK line sits: the first (system) message or the last user message.
_TASK_FIRST = {"simulate_user": True, "simulate_tool": True, "draft_rubric": False, "draft_case": False, "judge": False}


@dataclass(frozen=True)
class SimReply:
    """A simulated completion: ``text`` (None when the reply is a tool call),
    OpenAI-style ``tool_calls`` ({id, name, arguments dict}), the reported model
    (``sim/<name>@<world digest>``) and usage in words."""

    text: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    model_reported: str = ""
    usage: Mapping[str, int] = field(default_factory=dict)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


def respond(
    model: str,
    messages: Sequence[Any],
    *,
    seed: Any = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    world: World | str | None = None,
    task: Mapping[str, Any] | None = None,
) -> SimReply:
    """Answer ``messages`` as the world's model ``model`` (``sim/<name>`` or ``<name>``).

    ``task`` is the request in machine terms, given beside the prompt (the provider's ``sim_task``);
    without it the task is read from a ``TASK:`` line in the messages.

    Raises :class:`SpecError` when the model is not in the world or is asked
    for a TASK its kind does not do.
    """
    w = load_world(world)
    name = model.removeprefix(SIM_PREFIX)
    spec = w.model(name)
    if not messages:
        raise SpecError(w.source, f"models.{name}", "at least one message in the call")
    if task is not None and not isinstance(spec, Target):
        messages = with_task(messages, task)
    text: str | None
    calls: list[dict[str, Any]] = []
    if isinstance(spec, Target):
        text, calls = respond_target(w, spec, messages, tools, seed)
    else:
        wanted = _TASKS[spec.kind]
        found = None
        for kind in dict.fromkeys(wanted):
            found = find_task(messages, first=_TASK_FIRST[kind])
            if found is not None:
                break
        if found is None or found[0]["kind"] not in wanted:
            got = f"a '{found[0]['kind']}' TASK" if found else "no TASK line"
            raise SpecError(w.source, f"models.{name}", f"a {spec.kind} gets a TASK of kind {' or '.join(wanted)}, not {got}")
        task, at = found
        # Generator and judge draws depend on the conversation up to the
        # original TASK message, so a repair turn appended to a failed
        # judgment reproduces the failure (judge_failed keeps its rate).
        upto = messages if _TASK_FIRST[task["kind"]] else messages[: at + 1]
        dice = Dice(name, plain_messages(upto), seed, w.digest)
        text = _answer(w, spec, task, messages, at, dice)
    prompt_words = sum(word_count(content_text(m)) for m in messages)
    completion_words = word_count(text) if text else sum(word_count(json.dumps(c["arguments"])) + 1 for c in calls)
    return SimReply(
        text=text,
        tool_calls=calls,
        model_reported=w.reported(name),
        usage={"prompt_tokens": prompt_words, "completion_tokens": completion_words},
    )


def _answer(world: World, spec: Any, task: Mapping[str, Any], messages: Sequence[Any], at: int, dice: Dice) -> str:
    kind = task["kind"]
    if kind == "draft_rubric" and isinstance(spec, Generator):
        return json.dumps(draft_rubric(world, spec, task, dice), ensure_ascii=False)
    if kind == "draft_case" and isinstance(spec, Generator):
        return json.dumps(draft_case(world, spec, task, dice), ensure_ascii=False)
    if kind == "simulate_user" and isinstance(spec, User):
        return simulate_user(world, spec, task, messages, dice)
    if kind == "judge" and isinstance(spec, Judge):
        return judge_transcript(world, spec, task, content_text(messages[at]), dice)
    if kind == "simulate_tool":
        return simulate_tool(spec if isinstance(spec, ToolSimulator) else ToolSimulator(name=spec.name), task, dice)
    raise SpecError(world.source, f"models.{spec.name}", f"a model able to do '{kind}'")
