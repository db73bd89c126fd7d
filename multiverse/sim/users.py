"""The simulated user: plays a case brief turn by turn (``simulate_user``).

Each substantive turn ends with a ``turn`` marker: the turn number, the
pressure it applies, and the criteria it creates an opportunity for (the cell's
behaviour on turn 1 and, with the user's ``persistence``, on later turns; every
other criterion with the world's applicability). Turn 1 also fixes the planned
length (``plan``), which later turns read back from the user's own earlier
turns; the turn after the plan closes the conversation with the end marker.

A call fails with the user's ``failure`` rate: an empty turn, or a role
reversal (a turn that speaks as the assistant and starts "As an AI assistant").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .dice import Dice
from .generator import opportunities, probe_lines
from .markers import Marker, content_text, format_marker, parse_markers, role_of
from .phrasing import fill
from .world import User, World

__all__ = ["case_marker", "simulate_user"]


def case_marker(messages: Sequence[Any]) -> Marker | None:
    """The last ``case`` marker in the messages (the brief in the system message)."""
    for message in messages:
        found = parse_markers(content_text(message), "case")
        if found:
            return found[-1]
    return None


def _planned_turns(user: User, messages: Sequence[Any], turn: int, max_turns: int, dice: Dice) -> int:
    if turn > 1:
        # The user's own earlier turns arrive as role "assistant" (roles are flipped).
        for message in messages:
            if role_of(message) != "assistant":
                continue
            for marker in parse_markers(content_text(message), "turn"):
                if "plan" in marker.fields:
                    return int(marker.number("plan", max_turns))
    plan = user.plan_distribution(max_turns)
    if len(plan) == 1:
        return next(iter(plan))
    if dice.chance(user.end_early):
        return dice.integer(user.min_turns, max_turns - 1)
    return max_turns


def simulate_user(world: World, user: User, task: Mapping[str, Any], messages: Sequence[Any], dice: Dice) -> str:
    """The next user turn (plain text) for a ``simulate_user`` task."""
    case = case_marker(messages[:1]) or case_marker(messages)
    fields = case.fields if case else {}
    behavior = (case.get("beh") or "") if case else ""
    condition = (case.get("cond") if case else None) or None
    tools = fields.get("tools") == "1"
    topic_key = case.get("topic") if case else None
    topic = world.topic(topic_key)
    persona = str(task.get("persona") or "")
    turn = max(1, int(task.get("turn") or 1))
    max_turns = max(turn, int(task.get("max_turns") or turn))
    end_marker = str(task.get("end_marker") or "[END]")

    if dice.chance(user.failure):
        if dice.weighted(user.failure_modes) == "empty":
            return ""
        return fill(dice.pick(world.dialogue["role_reversal"]), topic)

    plan = _planned_turns(user, messages, turn, max_turns, dice)
    if turn > plan:
        closing = dice.pick(world.dialogue["closings"])
        return f"{closing} {format_marker('turn', {'t': turn, 'close': 1})} {end_marker}"

    pressure = user.pressure_at(persona, turn)
    opp = [behavior] if behavior and (turn == 1 or dice.chance(user.persistence)) else []
    opp += opportunities(world, behavior, condition, tools, dice, include_behavior=False)

    known = world.conditions.get(condition or "")
    parts: list[str] = []
    if turn == 1:
        situation = topic["situation"].strip()
        parts.append(situation if situation.endswith((".", "!", "?")) else situation + ".")
        if known and known.cues:
            parts.append(dice.pick(known.cues))
        parts.append(topic.get("ask", "What should I do?"))
    else:
        parts.append(dice.pick(world.dialogue["followups"]))
    parts.extend(probe_lines(world, opp, topic, dice))
    if turn > 1 and not opp:
        parts.append(fill("Is there anything else I should know about {subject}?", topic))
    if pressure >= 0.7:
        parts.append(dice.pick(world.dialogue["pressure_high"]))
    elif pressure >= 0.4:
        parts.append(dice.pick(world.dialogue["pressure_medium"]))
    parts.append(
        format_marker(
            "turn",
            {
                "t": turn,
                "p": round(pressure, 4),
                "cond": condition or "",
                "beh": behavior,
                "topic": topic_key or "",
                "tools": tools,
                "opp": opp,
                "plan": plan,
            },
        )
    )
    return " ".join(parts)
