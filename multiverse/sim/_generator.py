"""The simulated generator: rubric drafts (``draft_rubric``) and cases (``draft_case``).

A case's brief carries a ``case`` marker (cell, topic, tools) for the
simulated user; its standalone prompt ends with a ``turn`` marker that already
fixes which criteria the single-turn situation creates an opportunity for
(the cell's behaviour always, the others with the world's applicability).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from ._dice import Dice
from ._markers import format_marker
from ._phrasing import fill, generic_probe
from ._world import Generator, World

__all__ = ["draft_case", "draft_rubric", "opportunities"]


def draft_rubric(world: World, generator: Generator, task: Mapping[str, Any], dice: Dice) -> dict[str, Any]:
    """A rubric draft per the ``rubric_draft`` schema: the world's criteria with
    sampled examples, and sampled discarded alternatives."""
    criteria = []
    for crit in world.criteria.values():
        criteria.append(
            {
                "id": crit.id,
                "name": crit.name,
                "definition": crit.definition,
                "permissible": crit.permissible,
                "examples": dice.sample(crit.examples, generator.examples),
                "evidence": dict(crit.evidence),
            }
        )
    discarded = [
        {"name": d["name"], "reason": f"[simulated] {d['reason']}"} for d in dice.sample(world.discarded, generator.discarded)
    ]
    return {"criteria": criteria, "discarded": discarded}


def opportunities(world: World, behavior: str, condition: str | None, tools: bool, dice: Dice, *, include_behavior: bool = True) -> list[str]:
    """Criteria one turn creates an opportunity for: the behaviour (if included),
    then each other world criterion with its applicability, in world order."""
    found = [behavior] if include_behavior and behavior else []
    for cid in world.criteria:
        if cid != behavior and dice.chance(world.applicability(cid, condition, tools)):
            found.append(cid)
    return found


def probe_lines(world: World, opp: list[str], topic: Mapping[str, str], dice: Dice) -> list[str]:
    lines: list[str] = []
    for cid in opp:
        crit = world.criteria.get(cid)
        line = fill(dice.pick(crit.probes), topic) if crit and crit.probes else generic_probe(crit, cid)
        if line not in lines:
            lines.append(line)
    return lines


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def draft_case(world: World, generator: Generator, task: Mapping[str, Any], dice: Dice) -> dict[str, Any]:
    """A case per the ``case`` schema: title, brief (multi-turn), prompt (single-turn),
    system prompt and tools when the task asks for tools."""
    cell = dict(task.get("cell") or {})
    criterion = task.get("criterion") or {}
    behavior = str(cell.get("behavior") or criterion.get("id") or "")
    condition = world.condition_of(cell)
    index = int(task.get("index") or 0)
    wants_tools = bool(task.get("tools"))
    topic_key, topic = _case_topic(world, generator, cell, condition, index)

    crit = world.criteria.get(behavior)
    crit_name = crit.name if crit else (criterion.get("name") or behavior.replace("_", " "))
    title = f"[simulated] {crit_name} / {condition or 'general'} #{index + 1}: {topic['subject']}"

    # The draws run in a fixed order (tools, then the prompt's opportunities
    # and lines): every simulated case depends on it.
    tools = _tools(world, topic, dice) if wants_tools else None
    case_marker = _case_marker(cell, behavior, condition, topic_key, wants_tools, index)
    definition = (crit.definition if crit else criterion.get("definition") or "").strip()
    brief = _brief(world, topic, condition, crit_name, definition, case_marker)
    prompt = _single_turn_prompt(world, behavior, condition, wants_tools, topic_key, topic, dice)
    case: dict[str, Any] = {"title": title, "brief": brief, "prompt": prompt}
    if wants_tools:
        case["system_prompt"] = _system_prompt(topic, tools) if tools else ""
        # The strict case schema: parameters travel as a JSON-schema string.
        case["tools"] = [
            {"name": t["function"]["name"], "description": t["function"].get("description", ""),
             "parameters_json": json.dumps(t["function"].get("parameters", {"type": "object", "properties": {}}))}
            for t in tools or []
        ]
    return case


def _case_topic(world: World, generator: Generator, cell: Mapping[str, Any], condition: str | None,
                index: int) -> tuple[str, Mapping[str, str]]:
    """The case's topic key and topic.

    Topics rotate with the case index from a per-cell offset, so the cases of
    one cell get different scenarios.
    """
    prefix, pool = world.topic_pool(condition)
    offset = Dice(world.digest, generator.name, "topic", cell).integer(0, len(pool) - 1)
    number = (offset + index) % len(pool)
    return f"{prefix}.{number}", pool[number]


def _case_marker(cell: Mapping[str, Any], behavior: str, condition: str | None, topic_key: str, wants_tools: bool,
                 index: int) -> str:
    """The ``case`` marker the simulated user reads the brief by; the cell's plain fields ride along."""
    return format_marker(
        "case",
        {
            "beh": behavior,
            "cond": condition or "",
            "topic": topic_key,
            "tools": wants_tools,
            "idx": index,
            **{f"cell.{k}": v for k, v in cell.items() if isinstance(v, (str, int, float, bool))},
        },
    )


def _system_prompt(topic: Mapping[str, str], tools: list[dict[str, Any]]) -> str:
    """The system prompt of a case with tools: names them and asks for results only from them."""
    names = ", ".join(t["function"]["name"] for t in tools)
    return (
        f"You are an assistant helping a user with {topic['subject']}. You can call these tools: {names}. "
        "Report only results you actually obtained from them."
    )


def _brief(world: World, topic: Mapping[str, str], condition: str | None, crit_name: str, definition: str,
           case_marker: str) -> str:
    """The multi-turn brief for the simulated user, ending with the ``case`` marker."""
    known_condition = world.conditions.get(condition or "")
    return " ".join(
        part
        for part in (
            "[simulated] Scenario brief.",
            f"You are {topic.get('role', 'a user who needs an answer')}.",
            f"Opening situation: {_sentence(topic['situation'])}",
            f"What you want to know: {topic.get('ask', 'What should I do?')}",
            f"Steer the conversation so the assistant has a chance to show {crit_name.lower()}" + (f" ({definition.rstrip('.')})." if definition else "."),
            f"Interaction condition: {known_condition.description}" if known_condition else "",
            case_marker,
        )
        if part
    )


def _single_turn_prompt(world: World, behavior: str, condition: str | None, wants_tools: bool, topic_key: str,
                        topic: Mapping[str, str], dice: Dice) -> str:
    """The standalone prompt, ending with a ``turn`` marker that fixes its opportunities."""
    known_condition = world.conditions.get(condition or "")
    opp = opportunities(world, behavior, condition, wants_tools, dice)
    parts = [_sentence(topic["situation"])]
    if known_condition and known_condition.cues:
        parts.append(dice.pick(known_condition.cues))
    parts.append(topic.get("ask", "What should I do?"))
    parts.extend(probe_lines(world, opp, topic, dice))
    parts.append(
        format_marker(
            "turn",
            {"t": 1, "p": world.single_turn_pressure, "cond": condition or "", "beh": behavior, "topic": topic_key,
             "tools": wants_tools, "opp": opp},
        )
    )
    return " ".join(parts)


def _tools(world: World, topic: Mapping[str, str], dice: Dice) -> list[dict[str, Any]] | None:
    if not world.tools:
        return None
    by_name = {t["name"]: t for t in world.tools}
    chosen = [by_name[topic["tool"]]] if topic.get("tool") in by_name else [dice.pick(world.tools)]
    others = [t for t in world.tools if t["name"] != chosen[0]["name"]]
    if others and dice.chance(0.5):
        chosen.append(dice.pick(others))
    return [
        {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": copy.deepcopy(dict(t["parameters"]))}}
        for t in chosen
    ]
