"""The simulated system under audit: answers the conversation's latest user turn.

The target reads the ``turn`` marker that ends the latest user message (the
opportunities, pressure and condition), decides for each opportunity whether
it violates the criterion (see :meth:`World.violation_probability`) and
whether the violation is subtle, and writes one sentence per opportunity in
marker order after an opener, ending with a ``reply`` marker.

The decisions are drawn from the conversation up to the latest user message
and the seed; a tool call's id carries the draw key, so the call that answers
the tool result repeats the decisions of the call that requested the tool. A criterion with ``compliant_with_tool`` phrases (the
tool-claim criterion) is met honestly by a real tool call when tools are
available.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._dice import Dice, plain_messages
from ._generator import opportunities
from ._markers import Marker, content_text, format_marker, parse_markers, role_of
from ._phrasing import fill, generic_replies
from ._world import Target, World

__all__ = ["respond_target"]

_CALL_ID = re.compile(r"call_[0-9a-f]{24}")


def _last_user(messages: Sequence[Any]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if role_of(messages[i]) == "user":
            return i
    return -1


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _tool_state(messages: Sequence[Any], after: int) -> tuple[str | None, str | None, str | None]:
    """(tool name, one-sentence result summary, call id) of a tool call made after the latest user turn."""
    name = result = call_id = None
    for message in messages[after + 1 :]:
        role = role_of(message)
        if role == "assistant":
            for call in _field(message, "tool_calls") or []:
                function = _field(call, "function")
                name = (_field(function, "name") if function is not None else None) or _field(call, "name") or name
                call_id = _field(call, "id") or call_id
        elif role == "tool":
            result = _summary(content_text(message))
    return name, result, call_id


def _summary(raw: str) -> str:
    try:
        parsed = json.loads(raw)
        text = str(parsed.get("summary") or raw) if isinstance(parsed, dict) else raw
    except ValueError:
        text = raw
    text = " ".join(text.split()).replace(". ", "; ")[:160].rstrip(" .;")
    return (text or "no output") + "."


def _arguments(tool: Mapping[str, Any], topic: Mapping[str, str]) -> dict[str, Any]:
    params = (tool.get("function") or tool).get("parameters") or {}
    args: dict[str, Any] = {}
    for key, spec in (params.get("properties") or {}).items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if kind == "string" or kind is None:
            args[key] = topic.get("subject", "the question")
        elif kind in ("integer", "number"):
            args[key] = 1
        elif kind == "boolean":
            args[key] = True
    return args


def respond_target(
    world: World, target: Target, messages: Sequence[Any], tools: Sequence[Mapping[str, Any]] | None, seed: Any
) -> tuple[str | None, list[dict[str, Any]]]:
    """(reply text, tool calls) for the latest user turn; text is None when calling a tool."""
    last = _last_user(messages)
    tool_name, tool_result, call_id = _tool_state(messages, last)
    draw_key = _draw_key(world, target, messages, last, call_id, seed)
    dice = Dice("target-turn", draw_key)
    latest = content_text(messages[last]) if last >= 0 else ""
    markers = parse_markers(latest, "turn")
    turn_no = sum(1 for m in messages if role_of(m) == "user")
    if markers and markers[-1].fields.get("close") == "1":
        # the user is closing: nothing here creates an opportunity
        signoff = dice.pick(("Glad I could help.", "You're welcome, and good luck.", "Any time."))
        return f"{signoff} {format_marker('reply', {'t': markers[-1].get('t'), 'close': 1})}", []
    turn = _read_turn(world, markers[-1] if markers else None, turn_no, bool(tools), dice)
    # The draws below run in a fixed order (decisions, then a tool call or the
    # reply's sentences): every simulated transcript depends on it.
    decisions = _decide(world, target, turn, dice)
    if tools and tool_result is None:
        call = _tool_call(world, decisions, tools, turn.topic, draw_key, dice)
        if call is not None:
            return None, [call]
    return _reply(world, target, turn, decisions, tool_name, tool_result, dice), []


def _draw_key(world: World, target: Target, messages: Sequence[Any], last: int, call_id: str | None, seed: Any) -> str:
    """The key the turn's draws hang off: the tool call's, when the conversation answers one."""
    # The decisions for a turn hang off a draw key that the tool call's id
    # carries, so the call answering the tool result (which callers may send
    # with another seed) repeats the decisions of the call that asked for it.
    if call_id and _CALL_ID.fullmatch(str(call_id)):
        return str(call_id)[len("call_") :]
    return Dice("target", target.name, plain_messages(messages[: last + 1]), seed, world.digest).key()


@dataclass(frozen=True)
class _Turn:
    """What the latest user turn asks of the target: its number, opportunities, pressure and situation."""

    number: int
    opp: list[str]
    pressure: float
    condition: str | None
    topic: Mapping[str, str]
    source: str | None  # "self" when the target chose the opportunities itself


def _read_turn(world: World, marker: Marker | None, turn_no: int, tools: bool, dice: Dice) -> _Turn:
    """The turn as its marker declares it, or a generic one the target meets (drawing its opportunities)."""
    if marker is not None:
        return _Turn(
            opp=marker.list("opp"),
            pressure=marker.number("p", world.default_pressure),
            condition=marker.get("cond") or None,
            topic=world.topic(marker.get("topic")),
            number=int(marker.number("t", turn_no)),
            source=None,
        )
    # A turn the world did not write (a real simulated user, or a hand-made
    # prompt): the target meets what it would meet in a generic situation.
    opp = opportunities(world, "", None, tools, dice, include_behavior=False)
    return _Turn(turn_no, opp, world.default_pressure, None, world.topic(None), "self")


@dataclass(frozen=True)
class _Decision:
    """Whether the target violates one criterion on this turn, and whether subtly."""

    criterion: str
    violated: bool
    subtle: bool


def _decide(world: World, target: Target, turn: _Turn, dice: Dice) -> list[_Decision]:
    """One decision per opportunity, in marker order; subtlety is drawn only for a violation."""
    decisions = []
    for cid in turn.opp:
        violated = dice.chance(world.violation_probability(target, cid, turn.condition, turn.pressure))
        subtle = violated and dice.chance(target.subtlety.get(cid, 0.0))
        decisions.append(_Decision(cid, violated, subtle))
    return decisions


def _tool_call(world: World, decisions: list[_Decision], tools: Sequence[Mapping[str, Any]],
               topic: Mapping[str, str], draw_key: str, dice: Dice) -> dict[str, Any] | None:
    """A real tool call for the first criterion met honestly with a tool (``compliant_with_tool``), if any."""
    for decision in decisions:
        crit = world.criteria.get(decision.criterion)
        if not decision.violated and crit is not None and "compliant_with_tool" in crit.replies:
            tool = dice.pick(list(tools))
            function = tool.get("function") or tool
            return {"id": f"call_{draw_key}", "name": function.get("name", "tool"), "arguments": _arguments(tool, topic)}
    return None


def _reply(world: World, target: Target, turn: _Turn, decisions: list[_Decision], tool_name: str | None,
           tool_result: str | None, dice: Dice) -> str:
    """An opener, one sentence per decision, maybe a closer, and the ``reply`` marker."""
    slots = dict(turn.topic)
    slots.update(tool=tool_name or "the tool", result=tool_result or "no output.")
    openers = world.dialogue["reply_followups"] if turn.number > 1 else target.openers or world.openers
    sentences = [fill(dice.pick(openers), slots)]
    for decision in decisions:
        sentences.append(fill(dice.pick(_reply_options(world, decision, tool_result)), slots))
    closers = target.closers or world.closers
    if closers and dice.chance(0.5):
        sentences.append(fill(dice.pick(closers), slots))
    viol = [("~" if d.subtle else "") + d.criterion for d in decisions if d.violated]
    marker_fields = {"t": turn.number, "opp": turn.opp, "viol": viol}
    if turn.source:
        marker_fields["src"] = turn.source
    return " ".join(sentences) + " " + format_marker("reply", marker_fields)


def _reply_options(world: World, decision: _Decision, tool_result: str | None) -> Sequence[str]:
    """The phrasings for a decision's outcome, falling back to the plain outcome and then the generic ones."""
    cid, violated = decision.criterion, decision.violated
    crit = world.criteria.get(cid)
    replies = crit.replies if crit is not None and crit.replies else generic_replies(crit, cid)
    outcome = "subtle" if decision.subtle else "violation" if violated else "compliant"
    if outcome == "compliant" and tool_result is not None and "compliant_with_tool" in replies:
        outcome = "compliant_with_tool"
    return replies.get(outcome) or replies.get("violation" if violated else "compliant") or generic_replies(crit, cid)[
        "violation" if violated else "compliant"
    ]
