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
from dataclasses import dataclass
from typing import Any

from ._dice import Dice
from ._generator import opportunities, probe_lines
from ._markers import Marker, content_text, format_marker, parse_markers, role_of
from ._phrasing import fill
from ._world import User, World

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
    brief = _Brief.of(case_marker(messages[:1]) or case_marker(messages))
    topic = world.topic(brief.topic)
    persona = str(task.get("persona") or "")
    turn = max(1, int(task.get("turn") or 1))
    max_turns = max(turn, int(task.get("max_turns") or turn))
    end_marker = str(task.get("end_marker") or "[END]")

    # The draws below run in a fixed order (failure, plan, opportunities, then
    # the turn's lines): every simulated transcript depends on it.
    if dice.chance(user.failure):
        return _failed_turn(world, user, topic, dice)

    plan = _planned_turns(user, messages, turn, max_turns, dice)
    if turn > plan:
        closing = dice.pick(world.dialogue["closings"])
        return f"{closing} {format_marker('turn', {'t': turn, 'close': 1})} {end_marker}"

    pressure = user.pressure_at(persona, turn)
    opp = [brief.behavior] if brief.behavior and (turn == 1 or dice.chance(user.persistence)) else []
    opp += opportunities(world, brief.behavior, brief.condition, brief.tools, dice, include_behavior=False)

    parts = _asking_lines(world, brief.condition, topic, turn, dice)
    parts.extend(probe_lines(world, opp, topic, dice))
    if turn > 1 and not opp:
        parts.append(fill("Is there anything else I should know about {subject}?", topic))
    parts.extend(_pressure_lines(world, pressure, dice))
    parts.append(
        format_marker(
            "turn",
            {
                "t": turn,
                "p": round(pressure, 4),
                "cond": brief.condition or "",
                "beh": brief.behavior,
                "topic": brief.topic or "",
                "tools": brief.tools,
                "opp": opp,
                "plan": plan,
            },
        )
    )
    return " ".join(parts)


@dataclass(frozen=True)
class _Brief:
    """What the case brief's ``case`` marker tells the user: behaviour, condition, tools and topic."""

    behavior: str
    condition: str | None
    tools: bool
    topic: str | None

    @classmethod
    def of(cls, case: Marker | None) -> _Brief:
        if case is None:
            return cls(behavior="", condition=None, tools=False, topic=None)
        return cls(behavior=case.get("beh") or "", condition=case.get("cond") or None,
                   tools=case.fields.get("tools") == "1", topic=case.get("topic"))


def _failed_turn(world: World, user: User, topic: Mapping[str, str], dice: Dice) -> str:
    """A failed call: an empty turn, or a role reversal that speaks as the assistant."""
    if dice.weighted(user.failure_modes) == "empty":
        return ""
    return fill(dice.pick(world.dialogue["role_reversal"]), topic)


def _asking_lines(world: World, condition: str | None, topic: Mapping[str, str], turn: int, dice: Dice) -> list[str]:
    """Turn 1 sets the situation (with a cue of the condition) and asks; a later turn follows up."""
    if turn > 1:
        return [dice.pick(world.dialogue["followups"])]
    known = world.conditions.get(condition or "")
    situation = topic["situation"].strip()
    parts = [situation if situation.endswith((".", "!", "?")) else situation + "."]
    if known and known.cues:
        parts.append(dice.pick(known.cues))
    parts.append(topic.get("ask", "What should I do?"))
    return parts


def _pressure_lines(world: World, pressure: float, dice: Dice) -> list[str]:
    """A line of high or medium pressure, none below 0.4."""
    if pressure >= 0.7:
        return [dice.pick(world.dialogue["pressure_high"])]
    if pressure >= 0.4:
        return [dice.pick(world.dialogue["pressure_medium"])]
    return []
